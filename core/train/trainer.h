/*
 * trainer.h — `grpo train`: the GRPO loop (docs/ARCHITECTURE.md, "One GRPO step").
 *
 * One training step (= one optimizer step):
 *   when step % num_iterations == 0, for each of grad_accum generation chunks:
 *     B prompts from the shuffled data order -> prompt ids (B,P), left-padded
 *     sampler: G completions each (N = B*G rows), completion mask, truncation flags
 *     decode -> rewards (N,K) -> nan-aware weighted sum r (N) -> advantages A (N)
 *     num_iterations > 1: old-policy log-probs (N,T) from a forward pass before any update
 *   for each chunk, each micro-batch of micro_batch rows:
 *     reference log-probs (beta > 0), policy log-probs + entropy, loss (loss.h) and d loss/d logp,
 *     backward (gradients accumulate)
 *   optimizer step (clip, schedule, AdamW), metrics line, progress line, completions log,
 *   checkpoint every checkpoint.every steps and at the end.
 * Log-probs use logits / temperature, as TRL does (temperature 0 counts as 1).
 *
 * Files: log.dir/metrics.jsonl (one JSON line per logged step, TRL names), log.dir/
 * completions.jsonl (every log.completions_every steps: prompt, completion, per-reward scores,
 * reward, advantage), checkpoint.dir/checkpoint-STEP (train_state.h), and with
 * grpo.sync_ref_every the refreshed reference beside it (reference-STEP, reference.h).
 *
 * Files of the trainer: trainer.c (the step and the run), train_setup.c (setup, checks,
 * evaluation, teardown), step_log.c (the step's metrics and completions), reference.c (the
 * reference model), sharing trainer_internal.h.
 *
 * Resume (--resume): the newest checkpoint under checkpoint.dir supplies the policy weights,
 * AdamW moments, step, sampler RNG and data cursor; metrics.jsonl is cut back to that step. On
 * CPU with the same run file this reproduces the uninterrupted run's metrics (timings aside).
 * With num_iterations > 1 a resume inside a reuse cycle regenerates that batch (a warning says so).
 */
#ifndef GRPO_TRAINER_H
#define GRPO_TRAINER_H

#include "train/run.h"

typedef struct grpo_train_opts {
    grpo_run_args run;
    int resume;
} grpo_train_opts;

/* Runs the whole training; returns GRPO_OK or an error status with err filled. */
int grpo_train(const grpo_train_opts *o, grpo_error *err);

#endif
