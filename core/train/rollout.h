/*
 * rollout.h — the rollout stage shared by `grpo train` and `grpo eval`: the prompts of one batch
 * → the sampler → decoded completions → the reward batch → every reward's scores.
 *
 * Dimension letters: B prompts, G completions per prompt, N = B*G samples (group-major: sample i
 * belongs to prompt i / G), P prompt columns (left-padded), T = max_completion_length, K reward
 * functions.
 *
 * Use: grpo_rollout_batch_begin, then grpo_rollout_batch_add until B prompts are in (the caller
 * chooses the examples: the trainer from its data order, skipping prompts that do not fit; eval
 * in file order), then grpo_rollout_batch_run once. grpo_rollout_batch_free releases everything,
 * whatever step failed.
 */
#ifndef GRPO_ROLLOUT_H
#define GRPO_ROLLOUT_H

#include <stdint.h>

#include "train/episode.h"
#include "train/rewards.h"
#include "train/run.h"
#include "host/sampler.h"

typedef struct grpo_rollout_batch {
    int32_t B, G, N, P;
    int32_t n_prompts;       /* prompts added so far (B once full) */
    int32_t **ids;           /* [B] prompt ids, until run left-pads them into prompt */
    size_t *n_ids;           /* [B] their lengths */
    int32_t *prompt, *pmask; /* (B,P) left-padded prompt ids, 1 on real tokens */
    char **prompt_text;      /* [B] the text the policy saw (run.h grpo_run_prompt), owned */
    const grpo_example **ex; /* [B] borrowed from the dataset */
    grpo_rollout roll;       /* (N,T) sampler output */
    char **completion;       /* [N] decoded, special tokens skipped, owned */
    float *R;                /* (N,K) R[i*K + k]: reward k's score of sample i (rewards.h) */
    uint64_t step, total_steps; /* training progress the rewards see (grpo_sample); 0 = none */
    grpo_rng *row_rng;       /* [N] one sampling stream per completion (the trainer's), or
                                NULL: every row draws from run's rng (eval); borrowed */
    grpo_episodes *env;      /* multi-turn: each row an episode of this environment (episode.h;
                                so->max_new is then env.max_episode_tokens); NULL = single-turn;
                                borrowed. After run, env->ep[N] holds each episode's results */
    grpo_field *fields;      /* (N, fields per row) the samples' fields with env (owned) */
    uint32_t parts_early, parts; /* after run: the pooled rewards' calls (rows or groups) begun
                                    while rows still decoded, and all (reward_pool.h) */
    /* Over-sampling (the trainer's sampling.oversample; needs row_rng and no env). keep > 0: of
     * the B groups started, keep that many. Each group is scored as soon as its G rows have
     * ended (pooled rewards took its rows or the group as they ended; the others score its G
     * samples as one batch on this thread: rewards.h score_group); the rollout stops once
     * `keep` complete groups pass spread() (their rewards differ), taken by the decode step
     * they completed in, ties by group index, and the rows still live are aborted. When fewer
     * pass by the time every row has ended, groups that do not pass fill the batch in the same
     * order (grpo.drop_zero_std_groups then leaves them out of the loss). After run, B = keep,
     * the kept groups in started order (group index ascending). */
    int32_t keep;
    int (*spread)(void *user, const float *R, int32_t G, int *pass, grpo_error *err);
    void *spread_user;          /* R: a group's scores (G,K) */
    int64_t aborted_tokens;     /* after run: the tokens generated for the groups not kept */
} grpo_rollout_batch;

/* Room for B prompts with G completions each; b is zeroed first (the trainer then sets step and
 * total_steps). */
int grpo_rollout_batch_begin(grpo_rollout_batch *b, int32_t B, int32_t G, grpo_error *err);

/* Adds example ex of ds as the next prompt when it fits data.max_prompt_length (run.h
 * grpo_run_prompt): *keep 0 means it was skipped and the batch is unchanged. */
int grpo_rollout_batch_add(grpo_rollout_batch *b, grpo_run *r, const grpo_dataset *ds,
                           const grpo_example *ex, int *keep, grpo_error *err);

/* With all B prompts added: left-pads them, samples so->G (= G) completions each with m (rng
 * advances, or row_rng when set), decodes them and scores them with every reward of rs into
 * R (N,K); with keep, over-sampling as above. With row_rng, no env and pooled rewards
 * (rewards.h), those score each row or group as soon as it ends, while the other rows still
 * decode; the scores are the same. */
int grpo_rollout_batch_run(grpo_rollout_batch *b, const grpo_run *r, grpo_model *m,
                           const grpo_sampler_opts *so, grpo_rng *rng, grpo_reward_set *rs,
                           grpo_error *err);

/* grpo_rollout_batch_run for the n batches bs[n] of one step (each with row_rng, no env), as
 * one continuous sampler run (host/sampler.h grpo_sampler_run_queue): at most max_live rows
 * (0: the first batch's B*G) decode together and the rows of a batch start while the one
 * before still decodes its tail. Each batch gets the completions and scores it would get alone;
 * the reward set takes the batches one at a time, in order (rows of a later batch that end
 * early are scored once the batches before it finished). stats: NULL or what the run did. */
int grpo_rollout_batches_run(grpo_rollout_batch **bs, int32_t n, const grpo_run *r,
                             grpo_model *m, const grpo_sampler_opts *so, grpo_reward_set *rs,
                             int32_t max_live, grpo_sampler_stats *stats, grpo_error *err);

void grpo_rollout_batch_free(grpo_rollout_batch *b);

#endif
