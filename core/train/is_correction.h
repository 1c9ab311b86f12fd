/*
 * is_correction.h — importance-sampling correction of completions sampled by another model than
 * the one trained (sampling.weights_dtype = bf16: the rollout reads a bf16 copy of the policy;
 * or a LoRA run's rollout computed in bf16, sampling.compute_dtype = bf16),
 * as TRL's vllm_importance_sampling_correction does for vLLM's samples.
 *
 * Dimension letters: N completions (rows), T completion tokens, row-major (N,T); m the
 * completion mask. With old the log-probs of the policy the loss treats as the sampling policy
 * (old_logp, or the current log-probs, detached) and samp those of the model that drew the
 * tokens (both at the sampling temperature, before top-k / top-p / penalties):
 *   token level:    rho[i,t] = exp(old - samp)
 *   sequence level: rho[i,t] = exp(sum_t (old - samp) m) for every token of row i
 *   truncate:       w = min(rho, cap)           mask: w = rho where rho <= cap, else 0
 * The loss multiplies each token's policy term by w (after the entropy mask, before the KL
 * term: loss.h is_w), which makes the gradient unbiased for the fp32 policy up to the cap.
 *
 * Metrics (TRL's names; over every masked token, or every row at sequence level):
 *   sampling/sampling_logp_difference/mean, /max   |old - samp| over masked tokens
 *   sampling/importance_sampling_ratio/min, /mean, /max   of rho after the cap
 *   sampling/importance_sampling_ratio/clipped_frac   share of rho past the cap
 */
#ifndef GRPO_IS_CORRECTION_H
#define GRPO_IS_CORRECTION_H

#include <stdint.h>

#include "config/choices.h"
#include "grpo/plugin.h" /* grpo_error */

/* Sums over micro-batches (and ranks): means are sum / n, min and max running. */
typedef struct grpo_is_sums {
    double diff_sum, diff_max, diff_n;
    double ratio_sum, ratio_min, ratio_max, ratio_n, clipped;
} grpo_is_sums;

/* Empty sums (min/max at their neutral values). */
grpo_is_sums grpo_is_sums_init(void);

/* Data parallel: the sums over every rank (comm.h), in place. */
int grpo_is_sums_reduce(grpo_is_sums *s, grpo_error *err);

/* w (N,T) for rows of N x T tokens (see above); adds the metrics to s. Unmasked tokens get
 * w = 0. A non-finite log-prob difference on a masked token gives w = 0 there (the mask
 * modes' reading of an infinite ratio) and is not counted in the difference metrics. */
void grpo_is_weights(float *w, const float *old, const float *samp, const float *mask, int32_t N,
                     int32_t T, grpo_is_mode mode, double cap, grpo_is_sums *s);

#endif
