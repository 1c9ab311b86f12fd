/*
 * eval.h — the evaluation `grpo eval` runs and `grpo train` runs every train.eval_every steps:
 * one completion per prompt of a dataset (greedy at temperature 0, else sampled), scored by the
 * run's rewards through the rollout stage (rollout.h), reduced to means.
 *
 * Metrics written to a row, each name prefixed (e.g. "eval/"): reward (the mean weighted sum of
 * the rewards), accuracy (the mean score of the first builtin.accuracy reward; NaN when the run has
 * none) and rewards/NAME/mean for every reward. NaN scores (no opinion) are left out of the means.
 * With an environment ([env], episode.h) every completion is an episode of up to
 * env.max_episode_tokens tokens, and the row also gets env/turns, env/tool_calls and
 * env/tool_use_rate (per episode).
 */
#ifndef GRPO_EVAL_H
#define GRPO_EVAL_H

#include "train/episode.h"
#include "train/metrics.h"
#include "train/rewards.h"
#include "train/run.h"

/* The prefixes of `grpo train`'s evaluations: greedy, and sampled (train.eval_temperature > 0). */
#define GRPO_EVAL_PREFIX "eval/"
#define GRPO_EVAL_SAMPLED_PREFIX "eval_sampled/"

/* Evaluates m on the first n examples of ds (each must fit data.max_prompt_length: eval skips
 * none), max_completion_length and EOS as in training; rng advances only when sampling. env:
 * the run's environment (episodes), or NULL for single-turn completions. */
int grpo_evaluate(grpo_run *r, grpo_model *m, grpo_reward_set *rs, grpo_episodes *env,
                  const grpo_dataset *ds, size_t n, float temperature, grpo_rng *rng,
                  const char *prefix, grpo_metric_row *row, grpo_error *err);

/* The metrics grpo_evaluate writes for rewards rs (env: with an environment), in the order it
 * writes them: their count, and metric i's name with prefix into out (size bytes). */
int grpo_eval_metric_count(const grpo_reward_set *rs, int env);
void grpo_eval_metric_name(const grpo_reward_set *rs, int i, const char *prefix, char *out,
                           size_t size);
/* The first builtin.accuracy reward of rs (what accuracy means), -1 when none (accuracy NaN). */
int grpo_eval_accuracy_reward(const grpo_reward_set *rs);

#endif
