/*
 * reward_batch.h — the samples the rewards score (grpo_sample, grpo/reward.h), built one way for
 * `grpo train`, `grpo eval` (both through rollout.h) and `grpo reward score`.
 *
 * Dimension letters: B prompts, G completions per prompt, N = B*G samples (group-major: sample
 * i belongs to prompt i / G and is member i % G of its group), T sampler columns.
 *
 * Ownership: the batch owns only its samples array. Every string and array a sample points at
 * (prompt text, the example's messages and fields, completion text and ids) is borrowed from the
 * caller and must outlive the batch; rewards.h lends plugins a private copy, never these.
 */
#ifndef GRPO_REWARD_BATCH_H
#define GRPO_REWARD_BATCH_H

#include <stdint.h>

#include "io/dataset.h"
#include "grpo/reward.h"
#include "host/sampler.h"

typedef struct grpo_reward_batch {
    uint32_t n;            /* N */
    grpo_sample *samples;  /* [N] (at least one element allocated, so never NULL after init) */
} grpo_reward_batch;

/* Allocates n zeroed samples. */
int grpo_reward_batch_init(grpo_reward_batch *b, uint32_t n, grpo_error *err);
void grpo_reward_batch_free(grpo_reward_batch *b);

/* Sample i: prompt is the text the policy saw; ex gives the messages and extra fields (prompt
 * messages are left out when ex->messages is NULL); ids[n_ids] are the completion's tokens (NULL
 * and 0 when only its text is known). */
void grpo_reward_batch_set(grpo_reward_batch *b, uint32_t i, const char *prompt,
                           const grpo_example *ex, const char *completion, const int32_t *ids,
                           uint32_t n_ids, uint32_t group, uint32_t member, uint32_t truncated);

/* The N = roll->N samples of a rollout of B prompts x G completions: prompt_text[B] and ex[B] per
 * prompt, completion[N] decoded from roll's ids (N,T), lengths and truncation flags. */
int grpo_reward_batch_from_rollout(grpo_reward_batch *b, char *const *prompt_text,
                                   const grpo_example *const *ex, int32_t G,
                                   char *const *completion, const grpo_rollout *roll,
                                   grpo_error *err);

/* Sets every sample's training progress: step (optimizer steps taken before this batch) and
 * total_steps (train.steps); both stay 0 outside training. */
void grpo_reward_batch_set_progress(grpo_reward_batch *b, uint64_t step, uint64_t total_steps);

#endif
