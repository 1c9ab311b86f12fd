/*
 * reward_sum.h — combining the K reward functions' scores into one reward per completion, and the
 * NaN-aware statistics the advantages and the reward metrics are built from.
 *
 * Dimension letters: B prompts, G completions per prompt (group size), N = B*G completions,
 * K reward functions. Row-major: R[n*K + k] is reward function k's score of completion n.
 *
 * NaN means "no opinion" (grpo/reward.h). The rules follow Hugging Face TRL's GRPOTrainer
 * (_generate_and_score_completions, trl/trainer/grpo_trainer.py, checked against the July 2026
 * source; see tools/make_loss_fixtures.py):
 *   r[n] = nansum_k w[k] * R[n,k]      NaN terms are skipped (a weight of 0 does not hide a NaN:
 *                                      0*NaN is still NaN, so it is skipped too, as in torch)
 *   r[n] = NaN when every R[n,k] is NaN ("unscorable": TRL marks such rows NaN so they are left
 *          out of the group baseline, and later gives them advantage 0).
 * Older TRL releases (before the unscorable rule) summed an all-NaN row to 0; we follow the
 * current rule.
 *
 * All sums are taken in double; inputs and outputs are fp32 host arrays owned by the caller.
 */
#ifndef GRPO_REWARD_SUM_H
#define GRPO_REWARD_SUM_H

#include <stddef.h>

/* r[N] = weighted nansum of R[N,K] with weights w[K]; NaN for unscorable rows.
 * Returns the number of unscorable rows (0..N). */
int grpo_reward_sum(float *r, const float *R, const float *w, int N, int K);

/* NaN-aware mean of x[0], x[stride], ..., x[(n-1)*stride]; NaN when all are NaN (torch.nanmean). */
double grpo_nanmean(const float *x, int n, int stride);

/* NaN-aware standard deviation over the same elements.
 * unbiased = 1: divides by (count-1) and is NaN when count <= 1 (TRL's nanstd).
 * unbiased = 0: divides by count and is NaN when count == 0. */
double grpo_nanstd(const float *x, int n, int stride, int unbiased);

/* Per-reward-function metrics, TRL's rewards/NAME/mean and rewards/NAME/std: the nanmean and the
 * (unbiased) nanstd of column k of R[N,K], unweighted. */
void grpo_reward_func_stats(double *mean, double *std, const float *R, int N, int K, int k);

#endif
