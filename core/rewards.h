/*
 * rewards.h — the run's reward functions: one instance per [reward.NAME] section, created through
 * the registry (the same path a third-party pack takes), scoring batches of samples.
 *
 * Dimension letters: K reward functions, N samples (B prompts x G completions, group-major).
 */
#ifndef GRPO_REWARDS_H
#define GRPO_REWARDS_H

#include "config.h"
#include "grpo/reward.h"
#include "registry.h"

typedef struct grpo_reward_set {
    int n;                           /* K */
    const grpo_reward_spec **specs;  /* [K] borrowed from the run config */
    const grpo_reward_desc **descs;  /* [K] borrowed from the loaded packs */
    void **states;                   /* [K] plugin instances (destroyed by free) */
} grpo_reward_set;

/* Loads each reward's pack and creates its instance from the resolved section. On failure every
 * instance created so far is destroyed and err names the section and the plugin. */
int grpo_reward_set_create(grpo_reward_set *set, const grpo_run_config *cfg, grpo_registry *reg,
                           const grpo_host *host, grpo_error *err);
void grpo_reward_set_free(grpo_reward_set *set);

/* Scores n samples with every reward into R (N, K): R[i*K + k] is reward k's score of sample i
 * (the layout reward_sum.h combines). NaN ("no opinion") passes through; an infinite score or a
 * plugin error fails with the section, plugin and sample named. */
int grpo_reward_set_score(grpo_reward_set *set, const grpo_sample *samples, uint32_t n, float *R,
                          grpo_error *err);
/* The weights w (K) of the sections, for grpo_reward_sum. */
void grpo_reward_set_weights(const grpo_reward_set *set, float *w);

#endif
