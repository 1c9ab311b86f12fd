/*
 * cmd_eval.c — `grpo eval RUN.ini`: reward and accuracy on the held-out prompts (data.eval_path)
 * with the current checkpoint (the newest under checkpoint.dir; else --model or model.path).
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

#include "train/checkpoint.h"
#include "cli/cli.h"
#include "train/reward_sum.h"
#include "train/rewards.h"
#include "train/rollout.h"
#include "train/run.h"
#include "host/sampler.h"

typedef struct eval_opts {
    grpo_run_args run;
    const char *checkpoint;
    long limit;
    double temperature;
} eval_opts;

/* Scores the B examples from first (one rollout, rollout.h): R (B, K) receives every reward's
 * score. Every prompt must fit data.max_prompt_length: eval skips none. */
static int eval_batch(grpo_run *r, grpo_model *m, grpo_reward_set *rs, const grpo_dataset *ds,
                      size_t first, int32_t B, const grpo_sampler_opts *so, grpo_rng *rng, float *R,
                      grpo_error *err) {
    grpo_rollout_batch rb;
    int rc = grpo_rollout_batch_begin(&rb, B, so->G, err);
    for (int32_t b = 0; rc == GRPO_OK && b < B; b++) {
        int keep = 0;
        rc = grpo_rollout_batch_add(&rb, r, ds, &ds->examples[first + b], &keep, err);
        if (rc == GRPO_OK && !keep)
            rc = grpo_error_set(err, GRPO_ERR_INVALID,
                                "%s:%llu: prompt longer than "
                                "data.max_prompt_length (truncation = skip)",
                                ds->path, (unsigned long long)ds->examples[first + b].line);
    }
    if (rc == GRPO_OK) rc = grpo_rollout_batch_run(&rb, r, m, so, rng, rs, err);
    if (rc == GRPO_OK) memcpy(R, rb.R, (size_t)rb.N * rs->n * sizeof(float));
    grpo_rollout_batch_free(&rb);
    return rc;
}

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
        else if (o->run.model_dir ||
                 grpo_ckpt_latest(cfg->checkpoint_dir, dir, sizeof dir, &step, &quiet) != GRPO_OK)
            snprintf(dir, sizeof dir, "%s", r.model_dir);
    }
    grpo_model *m = NULL;
    grpo_dataset *ds = NULL;
    grpo_reward_set rs = {0};
    if (rc == GRPO_OK) rc = grpo_run_open_model(&r, dir, 0, &m, err);
    char *path = rc == GRPO_OK ? grpo_run_path(&r, cfg->data_eval_path[0] ? cfg->data_eval_path
                                                                          : cfg->data_path)
                               : NULL;
    if (rc == GRPO_OK) rc = grpo_run_dataset(&r, path, &ds, err);
    if (rc == GRPO_OK && cfg->n_rewards == 0)
        rc = grpo_error_set(err, GRPO_ERR_INVALID,
                            "%s: no [reward.NAME] section; eval needs at "
                            "least one reward",
                            cfg->path);
    if (rc == GRPO_OK) rc = grpo_reward_set_create(&rs, cfg, &r.env.reg, &r.env.host, err);
    size_t total = ds ? ds->n : 0;
    if (o->limit > 0 && (size_t)o->limit < total) total = (size_t)o->limit;
    int K = rs.n;
    float *R = rc == GRPO_OK ? malloc((total * K + 1) * sizeof(float)) : NULL;
    float *w = rc == GRPO_OK ? malloc(((size_t)K + 1) * sizeof(float)) : NULL, *sum = NULL;
    grpo_sampler_opts so = {{(float)o->temperature, 0, 1.0f, 0.0f, 1.0f},
                            1,
                            (int32_t)cfg->sampling_max_completion_length,
                            {0},
                            r.n_eos,
                            r.pad_id};
    memcpy(so.eos, r.eos, sizeof so.eos);
    grpo_rng rng;
    grpo_rng_seed(&rng, (uint64_t)cfg->sampling_seed);
    for (size_t i = 0; rc == GRPO_OK && i < total; i += 32)
        rc = eval_batch(&r, m, &rs, ds, i, (int32_t)(total - i < 32 ? total - i : 32), &so, &rng,
                        R + i * K, err);
    if (rc == GRPO_OK && (sum = malloc(total * sizeof(float)))) {
        grpo_reward_set_weights(&rs, w);
        grpo_reward_sum(sum, R, w, (int)total, K);
        printf("{\"model\": \"%s\", \"n\": %zu, \"reward\": %.6g", dir, total,
               grpo_nanmean(sum, (int)total, 1));
        int acc = -1;
        for (int k = 0; k < K; k++)
            if (acc < 0 && !strcmp(rs.specs[k]->plugin, "builtin.accuracy")) acc = k;
        if (acc >= 0)
            printf(", \"accuracy\": %.6g", grpo_nanmean(R + acc, (int)total, K));
        else
            printf(", \"accuracy\": null");
        for (int k = 0; k < K; k++)
            printf(", \"rewards/%s/mean\": %.6g", rs.specs[k]->name,
                   grpo_nanmean(R + k, (int)total, K));
        printf("}\n");
    }
    free(R), free(w), free(sum), free(path);
    grpo_reward_set_free(&rs);
    grpo_dataset_free(ds);
    grpo_model_close(m);
    grpo_run_close(&r);
    return rc;
}

static int usage(FILE *f) {
    fputs("usage: grpo eval RUN.ini [--checkpoint DIR | --model DIR] [--limit N]\n"
          "                 [--temperature T] [--set SECTION.KEY=VALUE]... [--plugin-path DIR]...\n"
          "Mean reward and accuracy on data.eval_path (data.path when unset), one completion per\n"
          "prompt (greedy unless --temperature), with the newest checkpoint under checkpoint.dir\n"
          "(else --model or model.path). Prints one JSON line.\n",
          f);
    return f == stdout ? 0 : 2;
}

int cmd_eval(int argc, char **argv) {
    eval_opts o;
    memset(&o, 0, sizeof o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout);
        if (!strcmp(a, "--checkpoint") && v)
            o.checkpoint = v, i++;
        else if (!strcmp(a, "--limit") && v)
            o.limit = atol(v), i++;
        else if (!strcmp(a, "--temperature") && v)
            o.temperature = atof(v), i++;
        else if (!grpo_run_args_take(&o.run, argc, argv, &i)) {
            fprintf(stderr, "grpo eval: unexpected argument '%s'\n", a);
            return usage(stderr);
        }
    }
    if (!o.run.run_file) return usage(stderr);
    grpo_error err;
    grpo_error_init(&err);
    if (evaluate(&o, &err) != GRPO_OK) {
        fprintf(stderr, "grpo eval: %s\n", err.message);
        return 1;
    }
    return 0;
}
