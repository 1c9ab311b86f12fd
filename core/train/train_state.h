/*
 * train_state.h — what a checkpoint holds besides the model, and writing/reading all of it.
 *
 * A checkpoint directory (checkpoint.h: temp dir, fsync, rename) is itself a Hugging Face model
 * directory that loads in transformers:
 *   config.json, model.safetensors        the policy (grpo_model_save, F32)
 *   tokenizer.json, tokenizer_config.json the tokenizer files the policy was opened with
 *                                         (and chat_template.jinja etc. when present)
 *   optimizer.safetensors                 AdamW moments: exp_avg.NAME, exp_avg_sq.NAME (F32)
 *   README.md                             the model card (model_card.h)
 *   trainer_state.json                    {"step", "optimizer_step", "num_tokens",
 *                                          "sampler_rng": 4 words as hex strings,
 *                                          "data_cursor": "seed=S epoch=E position=P n=N",
 *                                          "run_id": this run's mark,
 *                                          "run": the run file and data digests (run_record.h),
 *                                          with checkpoint.best_metric once an evaluation ran:
 *                                          "best": {"metric", "mode": "max"|"min", "value",
 *                                                   "step"}, the best evaluated so far}
 * Resuming loads the model from the checkpoint directory, then grpo_train_state_load restores
 * the moments and the counters, so the run continues the same trajectory.
 *
 * A LoRA run's checkpoint holds its adapters instead of the model, in PEFT's format (lora.h:
 * adapter_config.json, adapter_model.safetensors), their moments under exp_avg.<PEFT name>, the
 * card and trainer_state.json; the frozen base is model.path. It loads with
 * PeftModel.from_pretrained(base, checkpoint).
 */
#ifndef GRPO_TRAIN_STATE_H
#define GRPO_TRAIN_STATE_H

#include "io/dataset.h"
#include "host/lora.h"
#include "host/model_instance.h"
#include "train/optimizer.h"
#include "base/rng.h"

/* checkpoint.best_metric: the best evaluation so far (metric[0] == 0: none yet). */
typedef struct grpo_best {
    char metric[64]; /* the metric's name in metrics.jsonl (GRPO_METRIC_NAME_MAX) */
    int min;         /* checkpoint.best_mode: 1 = lower is better */
    double value;    /* finite */
    long step;       /* the step evaluated, <= the state's step */
} grpo_best;

typedef struct grpo_train_state {
    long step;           /* training steps completed */
    long optimizer_step; /* AdamW steps taken (skipped non-finite steps excluded) */
    double num_tokens;   /* tokens seen so far (TRL's num_tokens) */
    grpo_rng rng;        /* sampler RNG */
    grpo_data_cursor cursor;
    char run_id[33]; /* this run's mark: 32 hex digits made when it starts, kept by --resume
                      * (trainer_state.json "run_id"); checkpoint.keep prunes only checkpoints
                      * that carry it, never a directory another run (or no run) wrote */
    const char *record; /* the run's record (run_record.h), saved as trainer_state.json "run" and
                         * compared by --resume; borrowed (the session owns it); NULL: none */
    grpo_best best; /* checkpoint.best_metric: what checkpoint-best holds ("best"; absent: none) */
} grpo_train_state;

/* Reads st from text, a trainer_state.json (path names it in errors): every value range-checked
 * (step, optimizer_step <= step, num_tokens, 4 sampler_rng words, run_id, data_cursor). The step
 * is not checked against a directory here (grpo_checkpoint_resume does that). */
int grpo_train_state_parse(const char *text, const char *path, grpo_train_state *st,
                           grpo_error *err);

/* A new run's mark into id (33 bytes): 128 random bits as hex. */
void grpo_run_id_new(char id[33]);

/* Writes checkpoint root/checkpoint-STEP atomically, keeping the newest keep (<= 0: all), with
 * card (model_card.h; NULL: none) as its README.md. Nothing is read from the directory m was
 * opened from (it may be a pruned checkpoint). On failure no checkpoint is lost. */
int grpo_checkpoint_save(const char *root, int keep, const grpo_model *m, const grpo_lora *lora,
                         const grpo_train_state *st, const char *card, grpo_error *err);
/* The same as root/checkpoint-best (checkpoint.h: swapped in place of the previous best). */
int grpo_checkpoint_save_best(const char *root, const grpo_model *m, const grpo_lora *lora,
                              const grpo_train_state *st, const char *card, grpo_error *err);


/* --resume: opens the newest checkpoint under root that loads whole (model, optimizer moments,
 * trainer_state.json with every value range-checked and its step matching the directory) as
 * the trainable policy *policy and restores st; with lora (a LoRA run: *policy is the frozen
 * base, already open with lora attached) the checkpoint's adapters and their moments instead. A corrupt or empty newer checkpoint is skipped
 * with a warning naming it and why; none loading is an error naming root. */
struct grpo_run;
int grpo_checkpoint_resume(struct grpo_run *r, const char *root, grpo_model **policy,
                           grpo_lora *lora, grpo_train_state *st, grpo_error *err);

/* The data order of a run over d: fresh from data.seed, or on resume where st's cursor left
 * it (an error naming d's file when the cursor cannot belong to it). */
int grpo_train_data_order(grpo_data_order *o, const struct grpo_run *r, const grpo_dataset *d,
                          const grpo_train_state *st, int resume, grpo_error *err);

/* Writes m as a Hugging Face directory dir (config.json, model.safetensors) plus the files it
 * carries (tokenizer, base_model_README.md) and card as README.md (NULL: none): what
 * `grpo sft --out` users load in transformers. With lora: the adapters alone, in PEFT's format
 * (what PeftModel.from_pretrained(base, dir) loads), and the card. */
int grpo_model_export(const grpo_model *m, const grpo_lora *lora, const char *dir,
                      const char *card, grpo_error *err);

#endif
