/*
 * cmd_merge_lora.c — `grpo merge-lora BASE ADAPTER OUT`: folds a PEFT LoRA adapter directory
 * (a LoRA run's checkpoint, or `grpo sft --out` of one, or peft's save_pretrained) into its base
 * model and writes OUT as a Hugging Face directory that loads in transformers — what peft's
 * merge_and_unload() followed by save_pretrained() gives.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/files.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "host/process.h"
#include "host/lora.h"
#include "host/model_instance.h"

static int usage(FILE *f) {
    fputs("usage: grpo merge-lora BASE ADAPTER OUT [--plugin-path DIR]... [--threads N]\n"
          "  BASE: the Hugging Face model directory the adapters were trained on; ADAPTER: a\n"
          "  PEFT LoRA directory (adapter_config.json + adapter_model.safetensors); OUT: the\n"
          "  merged model (config.json, model.safetensors, BASE's tokenizer files)\n",
          f);
    return f == stdout ? 0 : 2;
}

static int merge(const char *base, const char *adapter, const char *out, const char **dirs,
                 int n_dirs, int threads, grpo_error *err) {
    grpo_process proc = {0}; /* closed on every path, opened or not */
    grpo_model *m = NULL;
    grpo_lora l = {0};
    int rc = grpo_dirs_apart(out, "OUT", base, "BASE", err);
    if (rc == GRPO_OK) rc = grpo_dirs_apart(out, "OUT", adapter, "ADAPTER", err);
    if (rc == GRPO_OK) rc = grpo_process_open(&proc, dirs, n_dirs, "cpu", threads, err);
    if (rc == GRPO_OK) rc = grpo_model_open_dir(&m, &proc.reg, &proc.host, base, 0, err);
    if (rc == GRPO_OK) rc = grpo_lora_open_dir(&l, m, adapter, err);
    uint32_t n = l.n;
    if (rc == GRPO_OK) rc = grpo_lora_merge(&l, err);
    if (rc == GRPO_OK) rc = grpo_model_save(m, out, err);
    if (rc == GRPO_OK) fprintf(stderr, "merged %u adapters of %s into %s: wrote %s\n", n, adapter,
                               base, out);
    grpo_lora_free(&l);
    grpo_model_close(m);
    grpo_process_close(&proc);
    return rc;
}

int cmd_merge_lora(int argc, char **argv) {
    const char *pos[3], *dirs[16];
    int n_pos = 0, n_dirs = 0, threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout);
        if (a[0] == '-' && a[1] == '-') {
            if (strcmp(a, "--plugin-path") && strcmp(a, "--threads"))
                return fprintf(stderr, "grpo merge-lora: unknown option '%s'\n", a), usage(stderr);
            if (!v) return fprintf(stderr, "grpo merge-lora: %s needs a value\n", a), usage(stderr);
            if (!strcmp(a, "--threads")) { /* as train.threads; 0: all cores or OMP_NUM_THREADS */
                if (!grpo_cli_int("merge-lora", a, v, 0, 1024, &threads)) return 2;
            } else if (n_dirs < 16)
                dirs[n_dirs++] = v;
            i++;
        } else if (n_pos < 3) {
            pos[n_pos++] = a;
        } else {
            return fprintf(stderr, "grpo merge-lora: unexpected argument '%s'\n", a), usage(stderr);
        }
    }
    if (n_pos != 3) return fprintf(stderr, "grpo merge-lora: need BASE ADAPTER OUT\n"), usage(stderr);
    grpo_error err;
    grpo_error_init(&err);
    if (merge(pos[0], pos[1], pos[2], dirs, n_dirs, threads, &err) == GRPO_OK) return 0;
    fprintf(stderr, "grpo merge-lora: %s\n", err.message);
    return 1;
}
