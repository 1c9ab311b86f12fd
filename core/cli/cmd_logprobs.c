/*
 * cmd_logprobs.c — `grpo logprobs --model DIR --input FILE.jsonl`: per-token log-probs.
 *
 * Each input line is {"ids": [t0, t1, ...]} (at least 2 ids); each output line is
 * {"logprobs": [log p(t1 | t0), log p(t2 | t0 t1), ...]} (len(ids) - 1 values), in input order.
 * Lines are run in micro-batches of --batch rows, left-padded to the longest row.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "host/process.h"
#include "host/model_instance.h"

typedef struct seq {
    int32_t *ids;
    int32_t n;
    int line; /* of the input file */
} seq;

static void usage(FILE *out) {
    fprintf(out, "usage: grpo logprobs --model DIR --input FILE.jsonl [--output FILE] "
                 "[--batch N] [--threads N] [--plugin-path DIR]...\n"
                 "  input lines {\"ids\":[...]}; output lines {\"logprobs\":[...]} "
                 "(log p of ids[1..] given the prefix)\n");
}

/* Parses one input line into s; errors name file:line. */
static int parse_line(const char *line, const char *file, int lineno, int32_t vocab, seq *s,
                      grpo_error *err) {
    cJSON *o = cJSON_Parse(line);
    const cJSON *ids = o ? cJSON_GetObjectItemCaseSensitive(o, "ids") : NULL;
    int n = cJSON_IsArray(ids) ? cJSON_GetArraySize(ids) : -1, rc = GRPO_OK;
    if (n < 2) {
        cJSON_Delete(o);
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s:%d: expected {\"ids\": [at least 2 token ids]}", file, lineno);
    }
    s->ids = malloc((size_t)n * sizeof(int32_t));
    s->n = n;
    s->line = lineno;
    int k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, ids) {
        double v = cJSON_GetNumberValue(it);
        if (!cJSON_IsNumber(it) || v < 0 || v >= vocab || v != (int32_t)v) {
            rc = grpo_error_set(err, GRPO_ERR_INVALID,
                                "%s:%d: ids[%d] is not a token id in [0, %d)", file, lineno, k,
                                vocab);
            break;
        }
        s->ids[k++] = (int32_t)v;
    }
    cJSON_Delete(o);
    return rc;
}

/* Prints row b's log-probs (logp (T), its first pad columns padding) as one JSON line; a value
 * that is not finite is written as null (JSON has no NaN). Returns the first such column, or -1. */
static int32_t print_row(FILE *out, const float *logp, int32_t pad, int32_t T) {
    int32_t bad = -1;
    fputs("{\"logprobs\":[", out);
    for (int32_t t = pad; t + 1 < T; t++) {
        if (t > pad) fputc(',', out);
        if (isfinite(logp[t]))
            fprintf(out, "%.9g", logp[t]);
        else
            fputs("null", out), bad = bad < 0 ? t - pad : bad;
    }
    fputs("]}\n", out);
    return bad;
}

/* Runs rows [0,n) of seqs (read from file) through the model and prints their log-probs to out;
 * a non-finite log-prob (NaN weights) is written as null and then fails with file:line. */
static int run_batch(grpo_model *m, const seq *seqs, int n, const char *file, FILE *out,
                     grpo_error *err) {
    int32_t T = 0;
    for (int i = 0; i < n; i++) T = seqs[i].n > T ? seqs[i].n : T;
    size_t NT = (size_t)n * T;
    int32_t *ids = calloc(NT, 4), *mask = calloc(NT, 4), *pos = calloc(NT, 4);
    int32_t *tgt = malloc(NT * 4);
    float *logp = calloc(NT, 4);
    int rc = GRPO_OK;
    if (!ids || !mask || !pos || !tgt || !logp)
        rc = grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory for a batch of (%d,%d)", n, T);
    for (int b = 0; rc == GRPO_OK && b < n; b++) { /* left padding: row b starts at column pad */
        int32_t pad = T - seqs[b].n;
        for (int32_t t = 0; t < T; t++) {
            size_t i = (size_t)b * T + t;
            int real = t >= pad;
            ids[i] = real ? seqs[b].ids[t - pad] : 0;
            mask[i] = real;
            pos[i] = real ? t - pad : 0;
            tgt[i] = real && t + 1 < T ? seqs[b].ids[t + 1 - pad] : -1;
        }
    }
    /* the batch arrays live in host memory: fine for the cpu backend this command opens */
    grpo_batch batch = {sizeof(grpo_batch), n, T, ids, mask, pos, tgt, 0.0f, 0};
    if (rc == GRPO_OK) rc = grpo_model_reserve_acts(m, n, T, err);
    if (rc == GRPO_OK) rc = grpo_model_forward(m, &batch, logp, NULL, 1.0f, err);
    int first_bad = -1;
    int32_t bad_at = -1;
    for (int b = 0; rc == GRPO_OK && b < n; b++) {
        int32_t at = print_row(out, logp + (size_t)b * T, T - seqs[b].n, T);
        if (at >= 0 && first_bad < 0) first_bad = b, bad_at = at;
    }
    if (rc == GRPO_OK && first_bad >= 0)
        rc = grpo_error_set(err, GRPO_ERR_INVALID,
                            "%s:%d: the model gives a non-finite log-prob at logprobs[%d] "
                            "(written as null); expected finite weights",
                            file, seqs[first_bad].line, bad_at);
    free(ids), free(mask), free(pos), free(tgt), free(logp);
    return rc;
}

int cmd_logprobs(int argc, char **argv) {
    const char *model_dir = NULL, *input = NULL, *output = NULL, *plugin_dirs[16];
    int batch = 8, threads = 0, n_dirs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout), 0;
        if (!v) return fprintf(stderr, "grpo logprobs: %s needs a value\n", a), usage(stderr), 2;
        if (!strcmp(a, "--model")) model_dir = v;
        else if (!strcmp(a, "--input")) input = v;
        else if (!strcmp(a, "--output")) output = v;
        else if (!strcmp(a, "--batch")) ok = grpo_cli_int("logprobs", a, v, 1, INT32_MAX, &batch);
        else if (!strcmp(a, "--threads")) ok = grpo_cli_int("logprobs", a, v, 0, 1024, &threads);
        else if (!strcmp(a, "--plugin-path") && n_dirs < 16) plugin_dirs[n_dirs++] = v;
        else return fprintf(stderr, "grpo logprobs: unknown option %s\n", a), usage(stderr), 2;
        if (!ok) return 2; /* a bad number, already said */
        i++;
    }
    if (!model_dir || !input || batch < 1)
        return fprintf(stderr, "grpo logprobs: --model and --input are required\n"),
               usage(stderr), 2;
    grpo_error err;
    grpo_error_init(&err);
    grpo_process proc = {0};
    grpo_model *m = NULL;
    FILE *in = fopen(input, "re"), *out = output ? fopen(output, "we") : stdout;
    int rc = GRPO_OK;
    if (!in || !out)
        rc = grpo_error_set(&err, GRPO_ERR_IO, "%s: cannot open", !in ? input : output);
    if (rc == GRPO_OK) rc = grpo_process_open(&proc, plugin_dirs, n_dirs, "cpu", threads, &err);
    if (rc == GRPO_OK) rc = grpo_model_open_dir(&m, &proc.reg, &proc.host, model_dir, 0, &err);
    seq *seqs = calloc((size_t)batch, sizeof *seqs);
    char *line = NULL;
    size_t cap = 0;
    int n = 0, lineno = 0;
    while (rc == GRPO_OK && getline(&line, &cap, in) > 0) {
        lineno++;
        if (strspn(line, " \t\r\n") == strlen(line)) continue; /* blank line */
        rc = parse_line(line, input, lineno, grpo_model_vocab(m), &seqs[n], &err);
        if (rc == GRPO_OK && ++n == batch) {
            rc = run_batch(m, seqs, n, input, out, &err);
            for (int i = 0; i < n; i++) free(seqs[i].ids), seqs[i].ids = NULL;
            n = 0;
        }
    }
    if (rc == GRPO_OK && n > 0) rc = run_batch(m, seqs, n, input, out, &err);
    for (int i = 0; i <= n && i < batch; i++) free(seqs[i].ids);
    free(seqs), free(line);
    grpo_model_close(m);
    grpo_process_close(&proc);
    if (in) fclose(in);
    if (out && out != stdout) fclose(out);
    if (rc != GRPO_OK) fprintf(stderr, "grpo logprobs: %s\n", err.message);
    return rc == GRPO_OK ? 0 : 1;
}
