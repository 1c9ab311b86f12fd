/*
 * cmd_generate.c — `grpo generate --model DIR --prompt-ids 1,2,3`: continue one prompt given as
 * token ids (no tokenizer needed), greedy by default or sampled with --temperature/--seed.
 * Prints {"prompt_ids":[...],"completion_ids":[...]}; generation stops after config.json's
 * eos_token_id (overridable with --eos, -1 = none) or --max-new-tokens tokens. Generation is the
 * sampler's (sampler.h) with G = 1; --seed S seeds its RNG like sampling.seed does (grpo_rng_seed).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "host/process.h"
#include "host/lora.h"
#include "host/model_instance.h"
#include "host/sampler.h"

#define CMD "generate" /* the command's name in its messages */

static void usage(FILE *out) {
    fprintf(out, "usage: grpo generate --model DIR [--adapter LORA_DIR] --prompt-ids 1,2,3 "
                 "[--max-new-tokens N] "
                 "[--greedy | --temperature T --seed S] [--eos ID] [--threads N] "
                 "[--plugin-path DIR]...\n");
}

/* "1,2,3" -> ids (malloc'd); returns the count or -1 on a malformed list. */
static int parse_ids(const char *text, int32_t **ids) {
    int cap = 16, n = 0;
    *ids = malloc(cap * sizeof(int32_t));
    const char *p = text;
    while (*ids && *p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > INT32_MAX || (*end && *end != ',')) return -1;
        if (n == cap) *ids = realloc(*ids, (cap *= 2) * sizeof(int32_t));
        if (!*ids) return -1;
        (*ids)[n++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    return *ids ? n : -1;
}

int cmd_generate(int argc, char **argv) {
    const char *model_dir = NULL, *adapter = NULL, *prompt_text = NULL, *plugin_dirs[16];
    int max_new = 32, threads = 0, n_dirs = 0, eos_set = 0, eos = -1, greedy = 0, seed_set = 0;
    double temperature = 0.0;
    int64_t seed = 0; /* >= 0, as sampling.seed */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1; /* 0: a bad number, already said */
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout), 0;
        if (!strcmp(a, "--greedy")) {
            greedy = 1;
            continue;
        }
        if (!v) return fprintf(stderr, "grpo generate: %s needs a value\n", a), usage(stderr), 2;
        if (!strcmp(a, "--model")) model_dir = v;
        else if (!strcmp(a, "--adapter")) adapter = v;
        else if (!strcmp(a, "--prompt-ids")) prompt_text = v;
        else if (!strcmp(a, "--max-new-tokens"))
            ok = grpo_cli_int(CMD, a, v, 1, INT32_MAX, &max_new);
        else if (!strcmp(a, "--temperature"))
            ok = grpo_cli_double(CMD, a, v, 0, HUGE_VAL, &temperature);
        else if (!strcmp(a, "--seed"))
            ok = grpo_cli_int64(CMD, a, v, 0, INT64_MAX, &seed), seed_set = 1;
        else if (!strcmp(a, "--eos")) /* -1: none */
            ok = grpo_cli_int(CMD, a, v, -1, INT32_MAX, &eos), eos_set = 1;
        else if (!strcmp(a, "--threads")) /* as train.threads; 0: all cores or OMP_NUM_THREADS */
            ok = grpo_cli_int(CMD, a, v, 0, 1024, &threads);
        else if (!strcmp(a, "--plugin-path") && n_dirs < 16) plugin_dirs[n_dirs++] = v;
        else return fprintf(stderr, "grpo generate: unknown option %s\n", a), usage(stderr), 2;
        if (!ok) return 2;
        i++;
    }
    if (greedy && temperature > 0)
        return grpo_cli_not_for("generate", "--temperature", "--greedy", "sampling");
    if (seed_set && !(temperature > 0))
        return grpo_cli_not_for("generate", "--seed", "greedy decoding",
                                "sampling, --temperature T > 0");
    int32_t *prompt = NULL;
    int P = prompt_text ? parse_ids(prompt_text, &prompt) : -1;
    if (!model_dir || P < 1 || max_new < 1 || temperature < 0) {
        free(prompt);
        fprintf(stderr, "grpo generate: need --model, --prompt-ids as comma-separated ids, "
                        "--max-new-tokens >= 1, --temperature >= 0\n");
        return usage(stderr), 2;
    }
    grpo_error err;
    grpo_error_init(&err);
    grpo_process proc;
    grpo_model *m = NULL;
    grpo_lora lora = {0};
    int rc = grpo_process_open(&proc, plugin_dirs, n_dirs, "cpu", threads, &err);
    if (rc == GRPO_OK) rc = grpo_model_open_dir(&m, &proc.reg, &proc.host, model_dir, 0, &err);
    if (rc == GRPO_OK && adapter) rc = grpo_lora_open_dir(&lora, m, adapter, &err);
    for (int i = 0; rc == GRPO_OK && i < P; i++)
        if (prompt[i] >= grpo_model_vocab(m))
            rc = grpo_error_set(&err, GRPO_ERR_INVALID, "--prompt-ids: %d is not below the "
                                "vocabulary size %d", prompt[i], grpo_model_vocab(m));
    int32_t *mask = malloc((size_t)P * sizeof(int32_t));
    for (int i = 0; mask && i < P; i++) mask[i] = 1;
    if (rc == GRPO_OK && !mask) rc = grpo_error_set(&err, GRPO_ERR_NOMEM, "out of memory");
    /* one prompt, one completion; no top-k/top-p/min-p, no repetition penalty */
    grpo_sampler_opts so = {{(float)temperature, 0, 1.0f, 0.0f, 1.0f}, 1, max_new, {0}, 0, 0,
                            0, NULL, NULL, NULL, 0, 0};
    grpo_rollout roll = {0};
    grpo_rng rng;
    grpo_rng_seed(&rng, (uint64_t)seed);
    if (rc == GRPO_OK) {
        int32_t e = eos_set ? eos : grpo_model_eos(m);
        if (e >= 0) so.eos[so.n_eos++] = e;
        rc = grpo_sampler_run(m, &so, prompt, mask, 1, P, &rng, &roll, &err);
    }
    if (rc == GRPO_OK) {
        printf("{\"prompt_ids\":[");
        for (int i = 0; i < P; i++) printf("%s%d", i ? "," : "", prompt[i]);
        printf("],\"completion_ids\":[");
        for (int i = 0; i < roll.len[0]; i++) printf("%s%d", i ? "," : "", roll.ids[i]);
        printf("]}\n");
    } else {
        fprintf(stderr, "grpo generate: %s\n", err.message);
    }
    grpo_rollout_free(&roll);
    free(prompt), free(mask);
    grpo_lora_free(&lora);
    grpo_model_close(m);
    grpo_process_close(&proc);
    return rc == GRPO_OK ? 0 : 1;
}
