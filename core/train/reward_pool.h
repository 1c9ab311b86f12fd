/*
 * reward_pool.h — the threads that score a batch while it still decodes (issue 33, item 1).
 *
 * Each pooled reward k of a set (rewards.h: isolated, or declared thread_safe = true or
 * per_instance) has `workers` threads of its own (plan.threads); thread j scores with worker
 * j's instance (its worker process when isolated). A reward's work comes in parts: one sample
 * when its rows are independent (the run file's or manifest's rows_independent), else one group
 * (all its members), queued as soon as the part's last sample is done (row_done, called by the
 * sampler's row_end hook through rewards.h) and taken in queue order by the first free thread
 * of that reward.
 *
 * Dimension letters: N samples of the batch, U its groups, K rewards.
 *
 * Scores go to R[i*K + k] by sample index, so the result does not depend on which thread took a
 * part or when it finished. A part's error (a plugin's status, an infinite score) fails the
 * batch: the error of the lowest part of the lowest failed reward is reported. An isolated
 * worker that died or was killed makes that reward's whole batch NaN with one warning, and its
 * parts not yet sent are not sent (a hang costs one deadline, not one per part).
 *
 * Counters for the metrics (time/rewards_scored_while_decoding): the parts of the last batch
 * begun while some of its rows were still decoding (not yet row_done), and all its parts.
 */
#ifndef GRPO_REWARD_POOL_H
#define GRPO_REWARD_POOL_H

#include <stdint.h>

#include "grpo/plugin.h"
#include "grpo/reward.h"

typedef struct grpo_reward_pool grpo_reward_pool;

/* What the pool runs: rewards.c's calls, through these (the pool knows no plugin). */
typedef struct grpo_reward_pool_plan {
    int K;                       /* rewards: the columns of R */
    const int *threads;          /* [K] threads of reward k; 0: not pooled */
    const int *rows_independent; /* [K] 1: parts are single samples, else groups */
    void *user;
    /* Scores the part samples[n] (samples[0] is the batch's sample first) with thread j's
     * instance of reward k into row (n). *scratch is the thread's own (NULL at first, freed with
     * free_scratch). GRPO_OK with why[0] != 0: the reward's worker is lost (row meaningless). */
    int (*score)(void *user, int k, int j, void **scratch, const grpo_sample *samples,
                 uint32_t first, uint32_t n, float *row, char *why, size_t why_size,
                 grpo_error *err);
    /* The one warning of a batch of n whose scores of reward k are lost (why). */
    void (*lost)(void *user, int k, const char *why, uint32_t n);
    void (*free_scratch)(void *scratch);
} grpo_reward_pool_plan;

/* Starts the threads of plan (copied; its arrays and user borrowed for the pool's life). */
int grpo_reward_pool_start(grpo_reward_pool **pool, const grpo_reward_pool_plan *plan,
                           grpo_error *err);
/* Ends the threads (after the batch in progress, if any, was finished) and frees; NULL is a
 * no-op. */
void grpo_reward_pool_stop(grpo_reward_pool *pool);

/* A batch of samples[n] (borrowed; sample i read only after row_done(i)); groups of G (G > 0),
 * else runs of equal samples[i].group (all samples must be set then). Scores go to R (n, K). */
int grpo_reward_pool_begin(grpo_reward_pool *pool, const grpo_sample *samples, uint32_t n,
                           uint32_t G, float *R, grpo_error *err);
void grpo_reward_pool_row_done(grpo_reward_pool *pool, uint32_t i);
/* Every sample is done at once (a batch scored after it decoded): every part is queued. */
void grpo_reward_pool_all_done(grpo_reward_pool *pool);
/* Waits until every part of the group of sample i (all of whose samples are done) is scored:
 * its scores are in R, unless that reward failed or lost its worker (finish says so). */
void grpo_reward_pool_wait_group(grpo_reward_pool *pool, uint32_t i);
/* Waits until every queued part is scored. complete = 1: every row was done; NaN columns and
 * their warnings for lost workers, and the first error (see above). complete = 0: drops it all. */
int grpo_reward_pool_finish(grpo_reward_pool *pool, int complete, grpo_error *err);
/* The reward whose error the last finish reported (INT32_MAX when none, or pool NULL). */
int grpo_reward_pool_failed(const grpo_reward_pool *pool);
/* The last batch's parts: begun while rows still decoded (*early) and all (*all). */
void grpo_reward_pool_parts(const grpo_reward_pool *pool, uint32_t *early, uint32_t *all);

#endif
