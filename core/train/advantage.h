/*
 * advantage.h — group-relative advantages: how much better each completion scored than its
 * siblings (the other completions of the same prompt).
 *
 * Dimension letters: B prompts, G completions per prompt, N = B*G completions, K reward functions.
 * Groups are contiguous: completion i belongs to prompt i / G.
 *
 * The formulas (Hugging Face TRL GRPOTrainer, trl/trainer/grpo_trainer.py, July 2026; see
 * tools/make_loss_fixtures.py for the PyTorch reference the tests compare against):
 *
 *   sum_then_normalize (TRL default), r[N] from grpo_reward_sum():
 *     mean_g  = nanmean of r over the group
 *     std     = scale GROUP: nanstd of r over the group   (0 when G == 1)
 *               scale BATCH: nanstd of r over all N        (0 when N == 1)
 *               scale NONE : the group std, only for the frac_reward_zero_std metric
 *     A       = (r - mean_g) / (std + 1e-4)   for GROUP and BATCH (note: the *group* mean is
 *                                             subtracted under BATCH too, as TRL does)
 *     A       = r - mean_g                     for NONE
 *   normalize_then_sum (TRL's GDPO option), from R[N,K] and w[K]:
 *     z[n,k]  = (R[n,k] - nanmean_g R[.,k]) / (nanstd_g R[.,k] + 1e-4)   per group, per function
 *     r2[n]   = nansum_k w[k] z[n,k]  (NaN when every R[n,k] is NaN)
 *     A       = (r2 - nanmean(r2)) / (nanstd(r2) + 1e-4)                  over the whole batch
 *   std is unbiased (Bessel, NaN for a single value: TRL's nanstd) or biased (std_unbiased = 0,
 *   MiniMind's current train_grpo.py uses torch.std(unbiased=False)).
 *
 *   MiniMind options (jingyaogong/minimind trainer/train_grpo.py of 2025-10 .. 2026-04, commit
 *   7d877db "minimind-2510"; removed in 2026-04-27's 6361510): after the formula above
 *     clip > 0     : A = clamp(A, -clip, clip)                 (MiniMind used 10)
 *     batch_renorm : A = (A - mean(A)) / (std_unbiased(A) + 1e-8) over the whole batch
 *   MiniMind had no NaN rewards; here both steps skip NaN entries (our definition).
 *
 *   Finally every NaN advantage becomes 0 (torch.nan_to_num): unscorable completions, and every
 *   member of a group whose std is NaN (fewer than 2 scored members with unbiased std).
 *
 * frac_reward_zero_std: the fraction of the N completions whose std (as used above) is 0
 * (TRL: torch.isclose(std, 0), i.e. |std| <= 1e-8; a NaN std does not count). With GROUP scaling
 * and equal groups this is the fraction of groups whose rewards are all equal.
 */
#ifndef GRPO_ADVANTAGE_H
#define GRPO_ADVANTAGE_H

#include <stddef.h>

#include "config/choices.h"
#include "grpo/plugin.h" /* grpo_error, GRPO_OK, GRPO_ERR_* */

/* enum grpo_scale_rewards { GRPO_SCALE_GROUP = 0 (TRL default), GRPO_SCALE_BATCH,
 * GRPO_SCALE_NONE } comes from choices.h (the run file's scale_rewards list). */

/* enum grpo_reward_aggregation { GRPO_AGG_SUM_THEN_NORMALIZE = 0 (TRL default),
 * GRPO_AGG_NORMALIZE_THEN_SUM (GDPO) } comes from choices.h (grpo.reward_aggregation). */

typedef struct grpo_advantage_opts {
    grpo_scale_rewards scale;
    int std_unbiased; /* 1: Bessel-corrected (TRL, torch default); 0: biased */
    double clip;      /* > 0: clamp advantages to [-clip, clip] (MiniMind legacy: 10); 0: off */
    int batch_renorm; /* 1: MiniMind legacy batch re-normalisation after the clamp */
} grpo_advantage_opts;

/* TRL's defaults: GROUP, unbiased, no clamp, no renormalisation. */
grpo_advantage_opts grpo_advantage_opts_default(void);

typedef struct grpo_advantage_metrics {
    double reward;               /* nanmean of the summed reward r (unscorable rows excluded) */
    double reward_std;           /* unbiased nanstd of r */
    double frac_reward_zero_std; /* see above */
    int n_unscorable;            /* completions whose every reward function returned NaN */
} grpo_advantage_metrics;

/* sum_then_normalize. adv[N] out (written, never NaN), m out (may be NULL), r[N] in (NaN =
 * unscorable). Returns GRPO_OK, or GRPO_ERR_INVALID with a message in err (may be NULL) when B, G
 * or the options are invalid or a reward is infinite (names r[i]). */
int32_t grpo_advantages(float *adv, grpo_advantage_metrics *m, const float *r, int B, int G,
                        const grpo_advantage_opts *o, grpo_error *err);

/* normalize_then_sum (GDPO). adv[N] out, m out (may be NULL; reward/reward_std describe the plain
 * weighted sum of R, as TRL logs them), R[N,K] and w[K] in. o->scale is ignored (the final
 * normalisation is always over the batch, as in TRL). Status as grpo_advantages, plus
 * GRPO_ERR_INVALID for K < 1 and GRPO_ERR_NOMEM when the [N,K] scratch cannot be allocated. */
int32_t grpo_advantages_gdpo(float *adv, grpo_advantage_metrics *m, const float *R, const float *w,
                             int B, int G, int K, const grpo_advantage_opts *o, grpo_error *err);

/* Which groups of r[B*G] (the summed reward, NaN = unscorable) have zero std: keep[b] = 0 when
 * every scored member has the same reward (or fewer than two are scored), else 1 (DAPO's dynamic
 * sampling filter: such a group's advantages are all 0, so it teaches nothing). Returns how many
 * groups were dropped. */
int grpo_zero_std_groups(unsigned char *keep, const float *r, int B, int G);

#endif
