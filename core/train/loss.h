/*
 * loss.h — the GRPO policy loss over one micro-batch of completions, its gradient with respect to
 * the per-token log-probabilities, and TRL's loss metrics. Host-side, fp32 arrays in, double sums.
 *
 * Dimension letters: N sequences (completions) in this micro-batch, T completion tokens per row
 * (padded), row-major [N,T]. Everything is borrowed from the caller; nothing is kept (the
 * entropy quantile sorts a scratch copy).
 *
 * The formulas are Hugging Face TRL's GRPOTrainer._compute_loss (trl/trainer/grpo_trainer.py,
 * commit f2cd57710ae3 of July 2026), checked by tools/make_loss_fixtures.py, which writes the same
 * formulas in PyTorch and takes the gradient by autograd:
 *
 *   log_w[i,t] = logp - old_logp                 old_logp = logp, detached, when NULL
 *              importance_sampling_level = token
 *   log_w[i]   = sum_t (logp - old_logp) m / max(L_i, 1)
 *              importance_sampling_level = sequence (GSPO): one ratio per row, every token of the
 *              row shares it (TRL's (N,1) broadcast), so the policy term below is per row
 *   ratio = exp(log_w)
 *   grpo | bnpo | dr_grpo | dapo:
 *     c1 = ratio, or min(ratio, delta) when delta > 0  (two-sided clip, INTELLECT-2)
 *     c2 = clamp(ratio, 1 - epsilon_low, 1 + epsilon_high)
 *     l  = -min(c1 * A[i], c2 * A[i])
 *   cispo:
 *     l  = -min(ratio, epsilon_high) * A[i] * logp  with the clamped ratio detached
 *          (TRL clamps the ratio itself at epsilon_high, no lower bound: epsilon_high plays
 *          ScaleRL's eps_max, recommended 5.0)
 *   sapo (soft adaptive gate, TRL 1.x): tau = sapo_temperature_pos when A[i] > 0, else _neg
 *     l  = -sigmoid(tau * (ratio - 1)) * 4 / tau * A[i]
 *   l *= is_w[i,t] when given (importance-sampling correction of off-policy samples)
 *   l *= H[i,t] when top_entropy_quantile < 1 (TRL's entropy mask, "Beyond the 80/20 rule"):
 *     H = [m != 0 and entropy * m >= q], q = torch.quantile (linear) of the entropies of the
 *     micro-batch's tokens with m != 0 at 1 - top_entropy_quantile; no token: H = 0
 *   l += beta * KL,  KL[i,t] = exp(ref - logp) - (ref - logp) - 1   (k3; only when beta != 0)
 *
 *   With m the mask and L_i = sum_t m[i,t]:
 *   grpo, sapo
 *            loss = mean_i( sum_t l m / max(L_i, 1) ) / grad_accum_steps
 *   bnpo     loss = sum_it l m / max(sum_it m, 1)     / grad_accum_steps
 *   dr_grpo  loss = sum_it l m / (N * max_completion_length) / grad_accum_steps
 *   dapo, cispo
 *            loss = sum_it l m / max(num_items_in_batch, 1)
 *   where num_items_in_batch is the mask sum over the whole generation batch (all micro-batches
 *   of the optimizer step, all processes) divided by the number of processes. grpo, bnpo and
 *   dr_grpo are divided by the accumulation steps so that summing the micro-batch gradients gives
 *   their mean; dapo and cispo are already global.
 *   Entropy bonus (entropy_coef != 0), with M = m * H (m when there is no entropy mask):
 *     loss -= entropy_coef * E,   E = sum_it entropy M / max(sum M, 1) / grad_accum_steps
 *     for every loss type (TRL >= 1.16: the mean entropy, not the policy term's normaliser; TRL
 *     before it divided dapo's and cispo's by num_items_in_batch).
 *     E depends on the entropy, not on logp: grpo_loss_backward returns d loss / d logp only,
 *     grpo_loss_entropy_backward d loss / d entropy = -entropy_coef * M / (that denominator),
 *     which the model's backward_entropy carries through the fused head (grpo/ops.h
 *     head_backward_entropy). The entropy mask H is a step function of the entropies: no
 *     gradient flows through it (as in TRL, where the mask is computed without grad).
 *
 * Gradient conventions of torch, kept so the gradient matches autograd exactly: clamp passes the
 * gradient where the input lies inside the closed interval [lo, hi]; min(a, b) with a == b sends
 * half the gradient to each side. Tokens with mask 0 are never read (padding may hold garbage)
 * and get gradient 0.
 *
 * Metrics (TRL names; "masked mean" = sum(x m) / max(sum m, 1) over this micro-batch):
 *   kl                     masked mean of KL (NaN when beta == 0: TRL does not log it)
 *   entropy                masked mean of the entropy passed in (NaN when none is passed)
 *   clip_ratio/low_mean    masked mean of [c1 < 1 - epsilon_low  and A < 0]
 *   clip_ratio/high_mean   masked mean of [c1 > 1 + epsilon_high and A > 0]
 *   clip_ratio/region_mean masked mean of their union
 *   clip_ratio/low_min     min over rows (with L_i > 0) of the row's masked mean of the low flag
 *   clip_ratio/high_max    max over rows of the row's masked mean of the high flag
 *   cispo_clip_ratio       masked mean of [ratio > epsilon_high and A > 0] (cispo only)
 *   The clip metrics are NaN for the loss types that do not log them (cispo, sapo). At sequence
 *   level the flags are per row and TRL averages them over the N rows (empty rows included):
 *   the "masked means" are then plain means over rows, low_min/high_max the min/max over rows.
 *
 * Not supported (a run file asking for them is refused by name): vespo, luspo,
 * use_bias_correction_kl, off-policy masking, adaptive
 * entropy control. The MoE aux loss is added by the caller.
 */
#ifndef GRPO_LOSS_H
#define GRPO_LOSS_H

#include <stddef.h>
#include <stdint.h>

#include "config/choices.h"
#include "grpo/plugin.h" /* grpo_error, GRPO_OK, GRPO_ERR_* */

/* enum grpo_loss_type { GRPO_LOSS_GRPO = 0, GRPO_LOSS_BNPO, GRPO_LOSS_DR_GRPO, GRPO_LOSS_DAPO
 * (TRL default), GRPO_LOSS_CISPO, GRPO_LOSS_SAPO } and GRPO_LOSS_TYPE_COUNT come from choices.h
 * (the run file's loss_type list), so this header and run_config.h agree. loss.c holds one row
 * per type (its normaliser, what it clips, whether it is global, its policy term): a new loss
 * type is one row there plus its term function. */

/* What a loss type clips, so which clip metrics it logs (see Metrics above). */
typedef enum grpo_loss_clip {
    GRPO_CLIP_PPO,  /* grpo, bnpo, dr_grpo, dapo: the ratio clamp, clip_ratio/... */
    GRPO_CLIP_CAP,  /* cispo: the detached ratio capped at epsilon_high, cispo_clip_ratio */
    GRPO_CLIP_NONE, /* sapo: a soft gate, no clip metric */
} grpo_loss_clip;

/* The clip of a loss type (GRPO_CLIP_NONE for a value outside grpo_loss_type). */
grpo_loss_clip grpo_loss_type_clip(grpo_loss_type type);

typedef struct grpo_loss_opts {
    grpo_loss_type type;
    double epsilon_low;        /* TRL epsilon (0.2) */
    double epsilon_high;       /* TRL epsilon_high (= epsilon when unset; DAPO 0.28; cispo 5.0) */
    double delta;              /* > 0: upper bound of the unclipped ratio; 0: off (TRL None) */
    double beta;               /* KL coefficient; 0: no KL term, ref_logp is not read */
    int max_completion_length; /* dr_grpo's constant (> 0 for dr_grpo) */
    double num_items_in_batch; /* dapo, cispo: tokens in the generation batch, >= 0 (see above) */
    int grad_accum_steps;      /* grpo, bnpo, dr_grpo, sapo divide by this; >= 1 */
    grpo_importance_sampling_level is_level; /* GRPO_IS_TOKEN (TRL default) or GRPO_IS_SEQUENCE */
    double sapo_temperature_pos, sapo_temperature_neg; /* > 0; TRL 1.0 and 1.05 */
    double top_entropy_quantile; /* (0, 1]; 1 = every token (TRL default); < 1 needs entropy */
    double entropy_coef;         /* entropy bonus weight; 0 = none (TRL default) */
    /* Packed training (train.max_tokens_per_microbatch): the inputs are one pack of a logical
     * micro-batch, and its normalisers are the logical micro-batch's. norm_rows: its rows (the N
     * of grpo, sapo, dr_grpo); norm_tokens: its mask sum (bnpo's sum_it m, and the entropy
     * bonus's sum M when there is no entropy mask). 0 = take them from the inputs (N, sum m). The
     * metrics stay this call's own (masked means over its tokens, n_tokens its mask sum). */
    int norm_rows;
    double norm_tokens;
} grpo_loss_opts;

/* epsilon_low = epsilon_high = 0.2, dapo, no delta, beta 0, grad_accum_steps 1, token level,
 * sapo temperatures 1.0 / 1.05, top_entropy_quantile 1, entropy_coef 0. The caller must still
 * set num_items_in_batch (dapo/cispo) or max_completion_length (dr_grpo). */
grpo_loss_opts grpo_loss_opts_default(void);

typedef struct grpo_loss_inputs {
    const float *logp;     /* [N,T] log-prob of each completion token under the policy */
    const float *old_logp; /* [N,T] under the sampling policy (num_iterations > 1); NULL: logp */
    const float *ref_logp; /* [N,T] under the reference model; read only when beta != 0 */
    const float *mask;     /* [N,T] completion mask (1 counts, 0 is padding / masked out) */
    const float *adv;      /* [N] advantage of each sequence */
    const float *entropy;  /* [N,T] per-token entropy (metric, entropy mask and bonus); NULL:
                              none, allowed only when top_entropy_quantile = 1, entropy_coef = 0 */
    int N, T;
    const float *is_w;     /* [N,T] importance-sampling weights of off-policy samples (detached:
                              is_correction.h), multiplying each token's policy term after the
                              entropy mask, before the KL term (TRL's order); NULL: 1 */
} grpo_loss_inputs;

typedef struct grpo_loss_metrics {
    double loss;        /* the value grpo_loss_backward differentiates (bonus included) */
    double policy_loss; /* TRL's policy_loss: loss before the grad_accum_steps division */
    double kl;
    double entropy;
    double clip_low_mean, clip_high_mean, clip_region_mean;
    double clip_low_min, clip_high_max;
    double cispo_clip_ratio;
    double n_tokens; /* sum of the mask over this micro-batch */
    double entropy_bonus; /* E above before entropy_coef (0 when entropy_coef == 0) */
} grpo_loss_metrics;

/* Loss value and metrics. Returns GRPO_OK, or GRPO_ERR_INVALID with a message naming the bad input
 * in err (may be NULL): bad shapes or options, a NULL tensor that is needed, a non-finite adv[i],
 * or a non-finite logp / old_logp / ref_logp / mask / entropy value at a token whose mask is not 0
 * (names the tensor and [i,t]); GRPO_ERR_NOMEM when the entropy quantile's scratch (N*T floats,
 * only when top_entropy_quantile < 1) cannot be allocated. */
int32_t grpo_loss_forward(grpo_loss_metrics *out, const grpo_loss_inputs *in,
                          const grpo_loss_opts *o, grpo_error *err);

/* dlogp[N,T] = d loss / d logp (written, not accumulated; 0 where mask is 0). The gradient flows
 * through logp only: old_logp and ref_logp are constants, and a NULL old_logp is logp detached.
 * Same checks and status as grpo_loss_forward. */
int32_t grpo_loss_backward(float *dlogp, const grpo_loss_inputs *in, const grpo_loss_opts *o,
                           grpo_error *err);

/* dentropy[N,T] = d loss / d entropy (written; 0 where mask is 0, everywhere when entropy_coef is
 * 0): the entropy bonus's share. Same checks and status as grpo_loss_forward. */
int32_t grpo_loss_entropy_backward(float *dentropy, const grpo_loss_inputs *in,
                                   const grpo_loss_opts *o, grpo_error *err);

/* Zeroes the mask rows [N,T] of the completions with truncated[i] != 0 (truncated[N]). Returns
 * how many rows were masked. */
int grpo_mask_truncated(float *mask, const uint8_t *truncated, int N, int T);

/* Sum of mask[N,T] (the num_items_in_batch contribution of one micro-batch). */
double grpo_mask_sum(const float *mask, int N, int T);

#endif
