/*
 * cmd_eval.c — `grpo eval RUN.ini`: reward and accuracy on the held-out prompts (data.eval_path)
 * with the current checkpoint (the newest under checkpoint.dir; else --model or model.path).
 * A directory holding adapter_config.json (a LoRA run's checkpoint, or --adapter DIR) is a PEFT
 * LoRA adapter: it is applied to model.path (or --model, or --checkpoint DIR); --adapter never
 * puts it on the newest checkpoint, which for a LoRA run holds only adapters.
 *
 * One completion per prompt, greedy unless --temperature is given (then sampled with
 * sampling.seed), max_completion_length and EOS as in training. Prints one JSON line:
 *   {"model": DIR, "n": prompts, "reward": mean summed reward, "accuracy": mean score of the
 *    first builtin.accuracy reward (null when the run has none), "rewards/NAME/mean": ...}
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "host/lora.h"
#include "train/checkpoint.h"
#include "train/eval.h"
#include "train/rewards.h"
#include "train/run.h"

typedef struct eval_opts {
    grpo_run_args run;
    const char *checkpoint;
    const char *adapter; /* --adapter DIR */
    int64_t limit;      /* --limit N: the first N prompts; 0 (the default): all */
    double temperature; /* --temperature T >= 0; 0: greedy */
} eval_opts;

static int evaluate(const eval_opts *o, grpo_error *err) {
    grpo_run r;
    int rc = grpo_run_open(&r, &o->run, err);
    const grpo_run_config *cfg = &r.cfg;
    char dir[4096];
    long step = 0;
    grpo_error quiet;
    grpo_error_init(&quiet);
    if (rc == GRPO_OK) {
        if (o->checkpoint)
            snprintf(dir, sizeof dir, "%s", o->checkpoint);
        else if (o->run.model_dir || o->adapter ||
                 grpo_ckpt_latest(cfg->checkpoint_dir, dir, sizeof dir, &step, &quiet) != GRPO_OK)
            snprintf(dir, sizeof dir, "%s", r.model_dir);
    }
    grpo_model *m = NULL;
    grpo_dataset *ds = NULL;
    grpo_reward_set rs = {0};
    grpo_lora lora = {0};
    char adapter[4200] = "", probe[4300];
    if (o->adapter) snprintf(adapter, sizeof adapter, "%s", o->adapter);
    snprintf(probe, sizeof probe, "%s/adapter_config.json", dir);
    if (rc == GRPO_OK && !o->adapter && access(probe, F_OK) == 0) { /* a LoRA checkpoint */
        snprintf(adapter, sizeof adapter, "%s", dir);
        snprintf(dir, sizeof dir, "%s", r.model_dir); /* --model, else model.path */
    }
    /* a LoRA run's base as its training held it (lora.base_dtype): the policy it sampled from */
    int32_t dtype = adapter[0] && cfg->lora_base_dtype == GRPO_BASE_BF16 ? GRPO_DTYPE_BF16
                                                                         : GRPO_DTYPE_F32;
    if (rc == GRPO_OK) rc = grpo_run_open_model_as(&r, dir, 0, dtype, &m, err);
    if (rc == GRPO_OK && adapter[0]) rc = grpo_lora_open_dir(&lora, m, adapter, err);
    char *path = rc == GRPO_OK ? grpo_run_path(&r, cfg->data_eval_path[0] ? cfg->data_eval_path
                                                                          : cfg->data_path)
                               : NULL;
    if (rc == GRPO_OK) rc = grpo_run_dataset(&r, path, &ds, err);
    if (rc == GRPO_OK && cfg->n_rewards == 0)
        rc = grpo_error_set(err, GRPO_ERR_INVALID,
                            "%s: no [reward.NAME] section; eval needs at "
                            "least one reward",
                            cfg->path);
    if (rc == GRPO_OK) rc = grpo_reward_set_create(&rs, cfg, &r.proc.reg, &r.proc.host, err);
    grpo_episodes episodes = {0}; /* [env]: every completion an episode */
    if (rc == GRPO_OK && cfg->env.entry) rc = grpo_episodes_open(&episodes, &r, err);
    size_t total = ds ? ds->n : 0;
    if (o->limit > 0 && (size_t)o->limit < total) total = (size_t)o->limit;
    grpo_rng rng;
    grpo_rng_seed(&rng, (uint64_t)cfg->sampling_seed);
    grpo_metric_row row;
    grpo_metric_row_clear(&row);
    if (rc == GRPO_OK)
        rc = grpo_evaluate(&r, m, &rs, episodes.desc ? &episodes : NULL, ds, total,
                           (float)o->temperature, &rng, "", &row, err);
    if (rc == GRPO_OK) { /* {"model", "n", then the metrics (accuracy null without one)} */
        printf("{\"model\": \"%s\", ", dir);
        if (adapter[0]) printf("\"adapter\": \"%s\", ", adapter);
        printf("\"n\": %zu", total);
        for (int i = 0; i < row.n; i++)
            if (isnan(row.values[i])) printf(", \"%s\": null", row.names[i]);
            else printf(", \"%s\": %.6g", row.names[i], row.values[i]);
        printf("}\n");
    }
    free(path);
    grpo_episodes_close(&episodes);
    grpo_reward_set_free(&rs);
    grpo_dataset_free(ds);
    grpo_lora_free(&lora);
    grpo_model_close(m);
    grpo_run_close(&r);
    return rc;
}

static const char usage[] =
    "usage: grpo eval RUN.ini [--checkpoint DIR | --model DIR] [--adapter DIR] [--limit N]\n"
    "                 [--temperature T] [--set SECTION.KEY=VALUE]... [--plugin-path DIR]...\n"
    "Mean reward and accuracy on data.eval_path (data.path when unset), one completion per\n"
    "prompt (greedy unless --temperature), with the newest checkpoint under checkpoint.dir\n"
    "(else --model or model.path). A LoRA checkpoint, or --adapter DIR (a PEFT LoRA\n"
    "directory), is applied to model.path (or --model, --checkpoint). Prints one JSON line.\n";

/* eval's own options: --checkpoint DIR, --adapter DIR, --limit N, --temperature T. */
static int take(void *opts, int argc, char **argv, int *i) {
    eval_opts *o = opts;
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (!v) return 0;
    if (!strcmp(a, "--checkpoint"))
        o->checkpoint = v;
    else if (!strcmp(a, "--adapter"))
        o->adapter = v;
    else if (!strcmp(a, "--limit")) {
        if (!grpo_cli_int64("eval", a, v, 0, INT64_MAX, &o->limit)) return 2;
    } else if (!strcmp(a, "--temperature")) {
        if (!grpo_cli_double("eval", a, v, 0, HUGE_VAL, &o->temperature)) return 2;
    } else
        return 0;
    ++*i;
    return 1;
}

int cmd_eval(int argc, char **argv) {
    eval_opts o;
    memset(&o, 0, sizeof o);
    grpo_cli_run_cmd c = {"eval", usage, NULL, take, &o};
    int status = grpo_cli_run_args(&c, argc, argv, &o.run);
    if (status >= 0) return status;
    grpo_error err;
    grpo_error_init(&err);
    return grpo_cli_run_status("eval", evaluate(&o, &err), &err);
}
