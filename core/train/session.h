/*
 * session.h — what `grpo train` and `grpo sft` share: one training session.
 *
 * A session is the run (run.h) plus everything an optimizer loop needs around its gradients:
 *   open   run file, backend, tokenizer; checkpoint.dir checked; the trainable policy from
 *          model.path, or with --resume from the newest checkpoint that loads whole (weights,
 *          AdamW moments, step, sampler RNG, data cursor: train_state.h); AdamW on the policy;
 *          data.path and its shuffled order (continued where the checkpoint left it).
 *   loop   log.dir/metrics.jsonl opened (cut back to the resumed step) and log.dir/config.ini
 *          written (the run file as resolved, --set overrides marked) only now, after every
 *          setup error could have stopped the run; then until train.steps: the command's step
 *          function computes gradients and its own
 *          metrics; grpo_session_update() takes the optimizer step, grpo_session_log() appends
 *          the common metrics and writes the line and the progress line, and
 *          grpo_session_checkpoint() saves every checkpoint.every steps; the last step is always
 *          saved. Each checkpoint carries a model card (README.md, model_card.h).
 *   close  frees it all; closing metrics.jsonl is the session's last write, so its error counts.
 *
 * The step function sees the session through s and its own state through ctx.
 */
#ifndef GRPO_SESSION_H
#define GRPO_SESSION_H

#include "io/tfevents.h"
#include "train/metrics.h"
#include "train/model_card.h"
#include "train/optimizer.h"
#include "train/run.h"
#include "train/train_state.h"

typedef struct grpo_session {
    grpo_run run;
    const grpo_run_config *cfg; /* &run.cfg */
    grpo_model *policy;         /* trainable (a LoRA run: the frozen base, adapters in lora) */
    grpo_lora lora;             /* [lora] r > 0: the adapters trained; lora.n = 0 otherwise */
    grpo_dataset *data;         /* data.path */
    grpo_data_order order;
    grpo_optimizer opt;
    grpo_train_state st; /* step, optimizer step, tokens, sampler RNG, data cursor */
    grpo_run_log metrics;
    grpo_tfevents tb; /* [log] tensorboard: events next to metrics.jsonl (tb.f NULL when off) */
    int resumed;      /* opened with --resume */
    char *record;     /* this run's record (run_record.h): in every checkpoint, compared by
                       * --resume and between ranks at start */
    const char *run_allow_change; /* --allow-change: keys a resume may change (NULL: none) */
    grpo_card_method method; /* what the model card of each checkpoint says (the caller sets it) */
    grpo_metric_row last;    /* the metrics of the last step, for the model card */
    double start;     /* grpo_now() when this process's first step began */
    long steps_done;  /* steps taken by this process (the progress line's rate) */
    int32_t compute_dtype; /* GRPO_DTYPE_* of the policy's training passes (train.compute_dtype) */
} grpo_session;

/* LoRA dropout (lora.dropout > 0) on for the policy's training pass number `pass` of this step
 * (its forward and backward), with masks from (train.seed, step, pass), so a resumed run draws
 * the same ones; off (on = 0) after its backward. Nothing to do without LoRA dropout. */
int grpo_session_dropout(grpo_session *s, int on, uint64_t pass, grpo_error *err);

/* train.compute_dtype = bf16: the policy computes in s->compute_dtype from on = 1 to on = 0,
 * around its training passes (forward and backward, the old log-probs' forward); its other
 * passes (the rollout, evaluation) stay fp32. Nothing to do for fp32. */
void grpo_session_train_compute(grpo_session *s, int on);
/* Opens everything above (ownership: grpo_session_close() frees it, also after a failure). */
int grpo_session_open(grpo_session *s, const grpo_run_args *a, int resume, grpo_error *err);
/* Opens log.dir/name (creating log.dir): fresh, or on resume cut back to the resumed step. */
int grpo_session_log_open(const grpo_session *s, const char *name, grpo_run_log *l,
                          grpo_error *err);
/* Frees the session; returns the error of closing metrics.jsonl, if any (err filled). */
int grpo_session_close(grpo_session *s, grpo_error *err);

/* One step of a command: gradients accumulated into the policy, the optimizer step taken with
 * grpo_session_update() and the metrics logged with grpo_session_log(). */
typedef int (*grpo_session_step_fn)(grpo_session *s, void *ctx, grpo_error *err);

/* Runs step until st.step reaches train.steps ("nothing to do" when it already has), then saves
 * the final checkpoint (when a step was taken) and says where. */
int grpo_session_run(grpo_session *s, grpo_session_step_fn step, void *ctx, grpo_error *err);

/* The optimizer step on the accumulated gradients (a non-finite gradient norm skips the update
 * with a warning); counts the step (st.step) and adds new_tokens to st.num_tokens. */
int grpo_session_update(grpo_session *s, double new_tokens, grpo_optim_stats *os,
                        grpo_error *err);

/* Appends grad_norm, learning_rate, num_tokens, step_time (since t0), when tokens >= 0
 * throughput/tokens_per_s, and the metrics of timings (NULL: none; time/...) to row (after the
 * command's own metrics: the timings come last in each line), then writes the metrics line and
 * the progress line when log.every (or the last step) says so. */
int grpo_session_log(grpo_session *s, grpo_metric_row *row, const grpo_optim_stats *os, double t0,
                     double tokens, const grpo_metric_row *timings, grpo_error *err);

/* Saves checkpoint.dir/checkpoint-STEP when checkpoint.every says so (the last step is saved by
 * grpo_session_run). */
int grpo_session_checkpoint(grpo_session *s, grpo_error *err);

/* Saves the policy as it stands as checkpoint.dir/checkpoint-best (best.h), st.best already set
 * to this step's evaluation. */
int grpo_session_save_best(grpo_session *s, grpo_error *err);

/* text as a TensorBoard text summary under tag at the current step (nothing when [log]
 * tensorboard is off). */
int grpo_session_log_text(grpo_session *s, const char *tag, const char *text, grpo_error *err);

/* The model card of the policy as it stands (model_card.h): malloc'd, NULL when out of memory. */
char *grpo_session_card(const grpo_session *s);

#endif
