/* loss.c — GRPO policy loss, its gradient w.r.t. logp, and TRL's metrics (formulas in loss.h). */
#include "train/loss.h"

#include <math.h>
#include <string.h>

grpo_loss_opts grpo_loss_opts_default(void) {
    grpo_loss_opts o = {GRPO_LOSS_DAPO, 0.2, 0.2, 0.0, 0.0, 0, 0.0, 1};
    return o;
}

/* Every value the loss reads must be finite: adv[i], and logp / old_logp / ref_logp where the
 * mask is not 0 (padding is never read). */
static int32_t check_values(const grpo_loss_inputs *in, const grpo_loss_opts *o, grpo_error *err) {
    for (int i = 0; i < in->N; i++) {
        if (!isfinite(in->adv[i]))
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "loss.c: adv[%d] is %g, expected a finite advantage", i,
                                  in->adv[i]);
        for (int t = 0; t < in->T; t++) {
            size_t it = (size_t)i * in->T + t;
            const char *bad = NULL;
            double v = 0.0;
            if (!isfinite(in->mask[it])) bad = "mask", v = in->mask[it];
            else if (in->mask[it] == 0.0f) continue;
            else if (!isfinite(in->logp[it])) bad = "logp", v = in->logp[it];
            else if (in->old_logp && !isfinite(in->old_logp[it]))
                bad = "old_logp", v = in->old_logp[it];
            else if (o->beta != 0.0 && !isfinite(in->ref_logp[it]))
                bad = "ref_logp", v = in->ref_logp[it];
            if (bad)
                return grpo_error_set(err, GRPO_ERR_INVALID,
                                      "loss.c: %s[%d,%d] is %g, expected a finite value at a "
                                      "completion token (N=%d T=%d)", bad, i, t, v, in->N, in->T);
        }
    }
    return GRPO_OK;
}

static int32_t check(const grpo_loss_inputs *in, const grpo_loss_opts *o, grpo_error *err) {
    const char *bad = NULL;
    if (in->N < 1 || in->T < 1) bad = "N >= 1 sequences and T >= 1 tokens";
    else if (!in->logp || !in->mask || !in->adv) bad = "logp, mask and adv (not NULL)";
    else if ((unsigned)o->type >= GRPO_LOSS_TYPE_COUNT) bad = "a loss type from grpo_loss_type";
    else if (o->beta != 0.0 && !in->ref_logp) bad = "ref_logp when beta != 0";
    else if (!isfinite(o->beta)) bad = "a finite beta";
    else if (!(o->epsilon_low >= 0.0) || !(o->epsilon_high >= 0.0)) bad = "epsilon >= 0";
    else if (!(o->delta >= 0.0)) bad = "delta >= 0 (0 = off)";
    else if (o->grad_accum_steps < 1) bad = "grad_accum_steps >= 1";
    else if (o->type == GRPO_LOSS_DR_GRPO && o->max_completion_length < 1)
        bad = "max_completion_length >= 1 for dr_grpo";
    else if ((o->type == GRPO_LOSS_DAPO || o->type == GRPO_LOSS_CISPO) &&
             !(o->num_items_in_batch > 0.0))
        bad = "num_items_in_batch > 0 (tokens in the generation batch) for dapo and cispo";
    if (!bad) return check_values(in, o, err);
    return grpo_error_set(err, GRPO_ERR_INVALID, "loss.c: %s loss needs %s (N=%d T=%d)",
                          (unsigned)o->type < GRPO_LOSS_TYPE_COUNT ? grpo_choices_loss_type[o->type]
                                                                   : "?",
                          bad, in->N, in->T);
}

static double row_len(const grpo_loss_inputs *in, int i) {
    double L = 0.0;
    for (int t = 0; t < in->T; t++) L += in->mask[(size_t)i * in->T + t];
    return L;
}

/* The weight of row i's tokens in the loss (the loss-type normaliser), mask not included. */
static double row_scale(const grpo_loss_inputs *in, const grpo_loss_opts *o, int i, double total) {
    switch (o->type) {
    case GRPO_LOSS_GRPO: return 1.0 / (fmax(row_len(in, i), 1.0) * in->N * o->grad_accum_steps);
    case GRPO_LOSS_BNPO: return 1.0 / (fmax(total, 1.0) * o->grad_accum_steps);
    case GRPO_LOSS_DR_GRPO:
        return 1.0 / ((double)in->N * o->max_completion_length * o->grad_accum_steps);
    default: return 1.0 / fmax(o->num_items_in_batch, 1.0);
    }
}

/* One token's terms: its ratios, per-token loss and d(per-token loss)/d logp. */
typedef struct token_terms {
    double ratio, c1; /* exp(logp - old), and c1 after the delta clamp */
    double loss, dloss, kl;
} token_terms;

static token_terms token_forward_backward(const grpo_loss_inputs *in, const grpo_loss_opts *o,
                                          size_t it, double A) {
    token_terms k;
    double lp = in->logp[it], old = in->old_logp ? in->old_logp[it] : lp;
    double r = exp(lp - old); /* d ratio / d logp = ratio */
    k.ratio = r;
    k.c1 = r;
    if (o->type == GRPO_LOSS_CISPO) {
        double cr = fmin(r, (double)o->epsilon_high); /* detached */
        k.loss = -cr * A * lp;
        k.dloss = -cr * A;
    } else {
        double lo = 1.0 - o->epsilon_low, hi = 1.0 + o->epsilon_high;
        double dc1 = r;
        if (o->delta > 0.0 && r > o->delta) k.c1 = o->delta, dc1 = 0.0;
        double c2 = r < lo ? lo : r > hi ? hi : r, dc2 = (r >= lo && r <= hi) ? r : 0.0;
        double l1 = k.c1 * A, l2 = c2 * A;
        k.loss = -fmin(l1, l2);
        k.dloss = l1 < l2 ? -dc1 * A : l2 < l1 ? -dc2 * A : -0.5 * (dc1 + dc2) * A;
    }
    k.kl = 0.0;
    if (o->beta != 0.0) {
        double d = in->ref_logp[it] - lp, e = exp(d);
        k.kl = e - d - 1.0;
        k.loss += o->beta * k.kl;
        k.dloss += o->beta * (1.0 - e); /* d/dlogp of exp(ref - logp) + logp */
    }
    return k;
}

int32_t grpo_loss_forward(grpo_loss_metrics *out, const grpo_loss_inputs *in,
                          const grpo_loss_opts *o, grpo_error *err) {
    int32_t rc = check(in, o, err);
    if (rc != GRPO_OK) return rc;
    const int N = in->N, T = in->T;
    const double lo = 1.0 - o->epsilon_low, hi = 1.0 + o->epsilon_high;
    double total = 0.0, loss = 0.0, kl = 0.0, ent = 0.0, low = 0.0, high = 0.0, region = 0.0,
           cispo = 0.0;
    double low_min = NAN, high_max = NAN;
    for (int i = 0; i < N; i++) total += row_len(in, i);
    for (int i = 0; i < N; i++) {
        double A = in->adv[i], L = row_len(in, i), scale = row_scale(in, o, i, total);
        double row_low = 0.0, row_high = 0.0;
        for (int t = 0; t < T; t++) {
            size_t it = (size_t)i * T + t;
            double m = in->mask[it];
            if (m == 0.0) continue;
            token_terms k = token_forward_backward(in, o, it, A);
            loss += scale * m * k.loss;
            kl += m * k.kl;
            if (in->entropy) ent += m * in->entropy[it];
            int is_low = k.c1 < lo && A < 0, is_high = k.c1 > hi && A > 0;
            low += m * is_low;
            high += m * is_high;
            region += m * (is_low || is_high);
            row_low += m * is_low;
            row_high += m * is_high;
            cispo += m * (k.ratio > o->epsilon_high && A > 0);
        }
        if (L != 0.0) { /* an empty row's mean is 0/0 = NaN, which nanmin/nanmax skip */
            low_min = isnan(low_min) ? row_low / L : fmin(low_min, row_low / L);
            high_max = isnan(high_max) ? row_high / L : fmax(high_max, row_high / L);
        }
    }
    double denom = fmax(total, 1.0);
    int clipped = o->type != GRPO_LOSS_CISPO;
    int global = o->type == GRPO_LOSS_DAPO || o->type == GRPO_LOSS_CISPO; /* not / accum steps */
    out->loss = loss;
    out->policy_loss = global ? loss : loss * o->grad_accum_steps;
    out->kl = o->beta != 0.0 ? kl / denom : NAN;
    out->entropy = in->entropy ? ent / denom : NAN;
    out->clip_low_mean = clipped ? low / denom : NAN;
    out->clip_high_mean = clipped ? high / denom : NAN;
    out->clip_region_mean = clipped ? region / denom : NAN;
    out->clip_low_min = clipped ? low_min : NAN;
    out->clip_high_max = clipped ? high_max : NAN;
    out->cispo_clip_ratio = clipped ? NAN : cispo / denom;
    out->n_tokens = total;
    return GRPO_OK;
}

int32_t grpo_loss_backward(float *dlogp, const grpo_loss_inputs *in, const grpo_loss_opts *o,
                           grpo_error *err) {
    int32_t rc = check(in, o, err);
    if (rc != GRPO_OK) return rc;
    const int N = in->N, T = in->T;
    double total = 0.0;
    if (o->type == GRPO_LOSS_BNPO)
        for (int i = 0; i < N; i++) total += row_len(in, i);
    for (int i = 0; i < N; i++) {
        double A = in->adv[i], scale = row_scale(in, o, i, total);
        for (int t = 0; t < T; t++) {
            size_t it = (size_t)i * T + t;
            double m = in->mask[it];
            dlogp[it] = m == 0.0 ? 0.0f
                                 : (float)(scale * m * token_forward_backward(in, o, it, A).dloss);
        }
    }
    return GRPO_OK;
}

int grpo_mask_truncated(float *mask, const uint8_t *truncated, int N, int T) {
    int masked = 0;
    for (int i = 0; i < N; i++) {
        if (!truncated[i]) continue;
        memset(mask + (size_t)i * T, 0, sizeof(float) * (size_t)T);
        masked++;
    }
    return masked;
}

double grpo_mask_sum(const float *mask, int N, int T) {
    double s = 0.0;
    for (size_t i = 0; i < (size_t)N * T; i++) s += mask[i];
    return s;
}
