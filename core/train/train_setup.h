/*
 * train_setup.h — what `grpo train` adds to its session before the first step (trainer.h):
 * options this run cannot honour refused, the data-parallel checks, the reference (reference.h),
 * the bf16 rollout copy, the eval prompts, the [env] plugin, rewards, sampler and advantage
 * options, chunks and completions.jsonl; the evaluations due at a step; and the teardown.
 * Internal to the trainer's files.
 */
#ifndef GRPO_TRAIN_SETUP_H
#define GRPO_TRAIN_SETUP_H

#include "train/trainer_internal.h"

/* Sets t up around its open session t->s (t zeroed but for s). On failure the caller still
 * calls grpo_trainer_teardown. */
int grpo_trainer_setup(trainer *t, grpo_error *err);

/* Frees what setup made; closing completions.jsonl is a write, so its error is returned. */
int grpo_trainer_teardown(trainer *t, grpo_error *err);

/* Frees a chunk's arrays and zeroes it (for its next rollout, or the teardown). */
void grpo_trainer_chunk_clear(chunk *c);

/* Every train.eval_every steps: the policy on the eval prompts, greedy (eval/...) and, with
 * train.eval_temperature > 0, sampled too (eval_sampled/...), into row (rank 0 only). */
int grpo_trainer_evaluate_due(trainer *t, grpo_metric_row *row, grpo_error *err);

#endif
