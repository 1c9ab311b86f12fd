/*
 * run.h — what train, sft and eval share: a run file loaded with the environment (proc.h: plugin
 * registry, CPU backend, host services), the policy's tokenizer and prompt format, models opened with
 * their vocabulary checked against the tokenizer, and prompt batches (left-padded).
 *
 * Prompt text (TRL's rule): a string prompt is used as written unless the run file
 * sets data.chat_template, in which case it is the user message of that format; a prompt given
 * as messages goes through data.chat_template when set, else the model's own chat template,
 * else ChatML.
 *
 * Ownership: grpo_run_open() fills r; grpo_run_close() frees everything in it.
 */
#ifndef GRPO_RUN_H
#define GRPO_RUN_H

#include <stdint.h>

#include "text/chat_template.h"
#include "config/run_config.h"
#include "io/dataset.h"
#include "host/process.h"
#include "host/model_instance.h"
#include "host/sampler.h"
#include "text/tokenizer/tokenizer.h"

typedef struct grpo_run {
    grpo_run_config cfg;
    grpo_process proc;    /* plugin path, packs, backend (train.threads); proc.host also carries the
                        policy's tokenizer, and reward plugins load their models through it */
    char *model_dir; /* the policy's directory (model.path, or the --model override) */
    grpo_tokenizer *tok;
    grpo_chat_template *tpl; /* model's template or ChatML; used for message prompts */
    char *simple_format;     /* data.chat_template with {prompt} spelled {user}; NULL = none */
    char *tools_json;        /* proc.tools: the JSON list of tool schemas templates see; NULL = none */
    int32_t eos[GRPO_SAMPLER_MAX_EOS], n_eos, pad_id;
} grpo_run;

#define GRPO_RUN_MAX_SETS 64

typedef struct grpo_run_args {
    const char *run_file;
    const char *model_dir; /* overrides model.path when non-NULL */
    const char *extra_plugin_dirs[16];
    int n_extra;
    const char *sets[GRPO_RUN_MAX_SETS]; /* --set SECTION.KEY=VALUE, applied after the file */
    int n_sets;
    int training; /* 1: require rewards and the training keys */
    const char *allow_change; /* with --resume: keys that may differ from the checkpoint's run
                               * (`--allow-change KEY[,KEY...]`, run_record.h); NULL: none */
} grpo_run_args;

/* Takes argv[*i] if it is one of the arguments every run command shares: --model DIR,
 * --plugin-path DIR (repeatable), --set SECTION.KEY=VALUE (repeatable) or the run file itself;
 * advances *i past a value. Returns 1 when it took the argument, 0 when the command must look at
 * it. */
int grpo_run_args_take(grpo_run_args *a, int argc, char **argv, int *i);

/* Loads the run file with its --set overrides (errors: every problem, FILE:LINE or --set TEXT),
 * the registry, the backend (train.threads), the tokenizer of the model directory and the prompt
 * format. */
int grpo_run_open(grpo_run *r, const grpo_run_args *a, grpo_error *err);
void grpo_run_close(grpo_run *r);

/* Opens the model in dir; refuses a tokenizer with more ids than the model's embedding rows. */
int grpo_run_open_model(grpo_run *r, const char *dir, int trainable, grpo_model **out,
                        grpo_error *err);
/* The same with a frozen model's matrices held as weight_dtype (GRPO_DTYPE_BF16: host/model_instance.h). */
int grpo_run_open_model_as(grpo_run *r, const char *dir, int trainable, int32_t weight_dtype,
                           grpo_model **out, grpo_error *err);

/* key = bf16 (a compute-dtype key of the run file): m's passes compute their products in bf16
 * (grpo_model_set_compute); else the backend's refusal (the missing instruction set) prefixed
 * with the run file and the key, m unchanged. */
int grpo_run_compute_bf16(const grpo_run *r, grpo_model *m, const char *key, grpo_error *err);
/* grpo_run_compute_bf16's check alone, m left computing in f32: for a model whose bf16 passes
 * the caller switches on around them (the policy's training passes, a LoRA run's rollout). */
int grpo_run_check_bf16(const grpo_run *r, grpo_model *m, const char *key, grpo_error *err);

/* An input path of the run file resolved against its directory (malloc'd). */
char *grpo_run_path(const grpo_run *r, const char *value);

/* Loads a dataset file of the run (data.bad_lines applies). */
int grpo_run_dataset(grpo_run *r, const char *path, grpo_dataset **out, grpo_error *err);

/* The prompt text and ids of one example under data.max_prompt_length and data.truncation:
 * *keep 0 means skipped (too long with truncation = skip); an empty prompt is an error naming
 * ds's file and line. *text is what the policy sees: after
 * a left truncation, the decoded kept ids (special tokens included), not the full prompt.
 * *text and *ids are malloc'd. */
int grpo_run_prompt(grpo_run *r, const grpo_dataset *ds, const grpo_example *ex, char **text,
                    int32_t **ids, size_t *n, int *keep, grpo_error *err);

/* B prompts of lengths n[B] left-padded with pad_id into ids (B,P) and mask (B,P), P = max n.
 * Returns P; ids and mask are malloc'd (caller frees). */
int32_t grpo_left_pad(int32_t *const *prompts, const size_t *n, int32_t B, int32_t pad_id,
                      int32_t **ids, int32_t **mask);

/* Text of completion ids[n] with special tokens skipped (what rewards see); malloc'd. */
char *grpo_run_decode(const grpo_run *r, const int32_t *ids, int32_t n);

#endif
