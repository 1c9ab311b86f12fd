/* loss.c — GRPO policy loss, its gradient w.r.t. logp, and TRL's metrics (formulas in loss.h). */
#include "train/loss.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

grpo_loss_opts grpo_loss_opts_default(void) {
    grpo_loss_opts o = {.type = GRPO_LOSS_DAPO,
                        .epsilon_low = 0.2,
                        .epsilon_high = 0.2,
                        .grad_accum_steps = 1,
                        .is_level = GRPO_IS_TOKEN,
                        .sapo_temperature_pos = 1.0,
                        .sapo_temperature_neg = 1.05,
                        .top_entropy_quantile = 1.0};
    return o;
}

/* ---- the loss types ---------------------------------------------------------------------- */

/* A loss type's policy term l(ratio) of one token: value, d l / d ratio and d l / d logp with the
 * ratio held (the path of a type whose ratio is detached), and c1, the ratio after the delta clamp
 * (the clip metrics' flags). */
typedef struct policy_terms {
    double c1, loss, d_ratio, d_logp;
} policy_terms;

/* grpo, bnpo, dr_grpo, dapo: l = -min(c1 A, c2 A), c1 = ratio (min(ratio, delta) when delta > 0),
 * c2 = clamp(ratio, 1 - epsilon_low, 1 + epsilon_high). */
static policy_terms term_ppo(const grpo_loss_opts *o, double r, double A, double lp) {
    (void)lp;
    policy_terms p = {r, 0.0, 0.0, 0.0};
    double lo = 1.0 - o->epsilon_low, hi = 1.0 + o->epsilon_high;
    double dc1 = 1.0;
    if (o->delta > 0.0 && r > o->delta) p.c1 = o->delta, dc1 = 0.0;
    double c2 = r < lo ? lo : r > hi ? hi : r, dc2 = (r >= lo && r <= hi) ? 1.0 : 0.0;
    double l1 = p.c1 * A, l2 = c2 * A;
    p.loss = -fmin(l1, l2);
    p.d_ratio = l1 < l2 ? -dc1 * A : l2 < l1 ? -dc2 * A : -0.5 * (dc1 + dc2) * A;
    return p;
}

/* cispo: l = -min(ratio, epsilon_high) A logp, the clamped ratio detached. */
static policy_terms term_cispo(const grpo_loss_opts *o, double r, double A, double lp) {
    policy_terms p = {r, 0.0, 0.0, 0.0};
    double cr = fmin(r, (double)o->epsilon_high); /* detached */
    p.loss = -cr * A * lp;
    p.d_logp = -cr * A;
    return p;
}

/* sapo: l = -sigmoid(tau (ratio - 1)) 4 / tau A, tau = sapo_temperature_pos when A > 0, else
 * sapo_temperature_neg. */
static policy_terms term_sapo(const grpo_loss_opts *o, double r, double A, double lp) {
    (void)lp;
    policy_terms p = {r, 0.0, 0.0, 0.0};
    double tau = A > 0 ? o->sapo_temperature_pos : o->sapo_temperature_neg;
    double sg = 1.0 / (1.0 + exp(-tau * (r - 1.0)));
    p.loss = -sg * 4.0 / tau * A;
    p.d_ratio = -4.0 * sg * (1.0 - sg) * A; /* sigmoid' = sg (1 - sg), times tau, / tau */
    return p;
}

static double row_len(const grpo_loss_inputs *in, int i) {
    double L = 0.0;
    for (int t = 0; t < in->T; t++) L += in->mask[(size_t)i * in->T + t];
    return L;
}

/* The rows of the micro-batch the normalisers count: the logical micro-batch's (norm_rows) when
 * the inputs are one of its packs, else the inputs'. */
static double norm_n(const grpo_loss_inputs *in, const grpo_loss_opts *o) {
    return o->norm_rows > 0 ? o->norm_rows : in->N;
}

/* The normalisers: the weight of row i's tokens in the loss, mask not included (total: the
 * micro-batch's mask sum). Per row: 1 / (max(L_i, 1) N grad_accum_steps). */
static double norm_row(const grpo_loss_inputs *in, const grpo_loss_opts *o, int i, double total) {
    (void)total;
    return 1.0 / (fmax(row_len(in, i), 1.0) * norm_n(in, o) * o->grad_accum_steps);
}

/* Per micro-batch token: 1 / (max(sum_it m, 1) grad_accum_steps). */
static double norm_batch(const grpo_loss_inputs *in, const grpo_loss_opts *o, int i,
                         double total) {
    (void)in, (void)i;
    return 1.0 / (fmax(total, 1.0) * o->grad_accum_steps);
}

/* A constant: 1 / (N max_completion_length grad_accum_steps). */
static double norm_constant(const grpo_loss_inputs *in, const grpo_loss_opts *o, int i,
                            double total) {
    (void)i, (void)total;
    return 1.0 / (norm_n(in, o) * o->max_completion_length * o->grad_accum_steps);
}

/* The mask sum the normalisers count: the logical micro-batch's (norm_tokens) when the inputs
 * are one of its packs, else the inputs' (total). */
static double norm_total(const grpo_loss_opts *o, double total) {
    return o->norm_tokens > 0.0 ? o->norm_tokens : total;
}

/* Per token of the generation batch: 1 / max(num_items_in_batch, 1). */
static double norm_items(const grpo_loss_inputs *in, const grpo_loss_opts *o, int i,
                         double total) {
    (void)in, (void)i, (void)total;
    return 1.0 / fmax(o->num_items_in_batch, 1.0);
}

static const char *check_dr_grpo(const grpo_loss_opts *o) {
    return o->max_completion_length < 1 ? "max_completion_length >= 1 for dr_grpo" : NULL;
}

/* >= 0, not > 0: a generation batch whose every token is masked out (truncated rows, dropped
 * groups) is legal; TRL clamps the divisor to 1. */
static const char *check_items(const grpo_loss_opts *o) {
    return !(o->num_items_in_batch >= 0.0)
               ? "num_items_in_batch >= 0 (tokens in the generation batch) for dapo and cispo"
               : NULL;
}

static const char *check_sapo(const grpo_loss_opts *o) {
    return !(o->sapo_temperature_pos > 0.0 && o->sapo_temperature_neg > 0.0)
               ? "sapo temperatures > 0"
               : NULL;
}

/* One loss type: a row of kinds[]. A new loss type is a row and its term function (and its name
 * in config_keys.h's loss_type list). */
typedef struct loss_kind {
    double (*norm)(const grpo_loss_inputs *in, const grpo_loss_opts *o, int i, double total);
    grpo_loss_clip clip; /* what it clips, so which clip metrics it logs (loss.h) */
    int global;          /* normalised over the whole generation batch (num_items_in_batch): not
                            divided by grad_accum_steps */
    int ratio_detached;  /* the term's gradient is d l / d logp with the ratio held (d_logp) */
    policy_terms (*term)(const grpo_loss_opts *o, double r, double A, double lp);
    const char *(*check)(const grpo_loss_opts *o); /* the options it needs; NULL: none */
} loss_kind;

/* Each type's loss, with l its policy term of a token (term_*), m the mask, L_i = sum_t m[i,t]
 * (loss.h has the whole formulas and their TRL sources). Columns: normaliser, clip, global,
 * ratio_detached, term, check. */
static const loss_kind kinds[GRPO_LOSS_TYPE_COUNT] = {
    /* grpo:    mean_i( sum_t l m / max(L_i, 1) ) / grad_accum_steps,  l = -min(c1 A, c2 A) */
    [GRPO_LOSS_GRPO] = {norm_row, GRPO_CLIP_PPO, 0, 0, term_ppo, NULL},
    /* bnpo:    sum_it l m / max(sum_it m, 1) / grad_accum_steps,  l = -min(c1 A, c2 A) */
    [GRPO_LOSS_BNPO] = {norm_batch, GRPO_CLIP_PPO, 0, 0, term_ppo, NULL},
    /* dr_grpo: sum_it l m / (N max_completion_length) / grad_accum_steps,  l = -min(c1 A, c2 A) */
    [GRPO_LOSS_DR_GRPO] = {norm_constant, GRPO_CLIP_PPO, 0, 0, term_ppo, check_dr_grpo},
    /* dapo:    sum_it l m / max(num_items_in_batch, 1),  l = -min(c1 A, c2 A) */
    [GRPO_LOSS_DAPO] = {norm_items, GRPO_CLIP_PPO, 1, 0, term_ppo, check_items},
    /* cispo:   sum_it l m / max(num_items_in_batch, 1),  l = -min(ratio, epsilon_high) A logp */
    [GRPO_LOSS_CISPO] = {norm_items, GRPO_CLIP_CAP, 1, 1, term_cispo, check_items},
    /* sapo:    mean_i( sum_t l m / max(L_i, 1) ) / grad_accum_steps,
     *          l = -sigmoid(tau (ratio - 1)) 4 / tau A */
    [GRPO_LOSS_SAPO] = {norm_row, GRPO_CLIP_NONE, 0, 0, term_sapo, check_sapo},
};

grpo_loss_clip grpo_loss_type_clip(grpo_loss_type type) {
    return (unsigned)type < GRPO_LOSS_TYPE_COUNT ? kinds[type].clip : GRPO_CLIP_NONE;
}

/* ---- checks ------------------------------------------------------------------------------- */

static int needs_entropy(const grpo_loss_opts *o) {
    return o->top_entropy_quantile < 1.0 || o->entropy_coef != 0.0;
}

/* Every value the loss reads must be finite: adv[i], and logp / old_logp / ref_logp / entropy
 * where the mask is not 0 (padding is never read). */
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
            else if (needs_entropy(o) && !isfinite(in->entropy[it]))
                bad = "entropy", v = in->entropy[it];
            else if (in->is_w && !(in->is_w[it] >= 0.0f && isfinite(in->is_w[it])))
                bad = "is_w", v = in->is_w[it];
            if (bad)
                return grpo_error_set(err, GRPO_ERR_INVALID,
                                      "loss.c: %s[%d,%d] is %g, expected a finite value at a "
                                      "completion token (N=%d T=%d)", bad, i, t, v, in->N, in->T);
        }
    }
    return GRPO_OK;
}

static const char *check_opts(const grpo_loss_opts *o) {
    if ((unsigned)o->type >= GRPO_LOSS_TYPE_COUNT) return "a loss type from grpo_loss_type";
    if (!isfinite(o->beta)) return "a finite beta";
    if (!(o->epsilon_low >= 0.0) || !(o->epsilon_high >= 0.0)) return "epsilon >= 0";
    if (!(o->delta >= 0.0)) return "delta >= 0 (0 = off)";
    if (o->grad_accum_steps < 1) return "grad_accum_steps >= 1";
    if ((unsigned)o->is_level > GRPO_IS_SEQUENCE)
        return "importance_sampling_level token or sequence";
    if (!(o->top_entropy_quantile > 0.0 && o->top_entropy_quantile <= 1.0))
        return "top_entropy_quantile in (0, 1]";
    if (!isfinite(o->entropy_coef)) return "a finite entropy_coef";
    if (o->norm_rows < 0 || !(o->norm_tokens >= 0.0 && isfinite(o->norm_tokens)))
        return "norm_rows >= 0 and a finite norm_tokens >= 0 (0 = the inputs')";
    return kinds[o->type].check ? kinds[o->type].check(o) : NULL;
}

/* The tensors the options need. */
static const char *check_needed(const grpo_loss_inputs *in, const grpo_loss_opts *o) {
    if (o->beta != 0.0 && !in->ref_logp) return "ref_logp when beta != 0";
    if (needs_entropy(o) && !in->entropy)
        return "entropy when top_entropy_quantile < 1 or entropy_coef != 0";
    return NULL;
}

static int32_t check(const grpo_loss_inputs *in, const grpo_loss_opts *o, grpo_error *err) {
    const char *bad = NULL;
    if (in->N < 1 || in->T < 1) bad = "N >= 1 sequences and T >= 1 tokens";
    else if (!in->logp || !in->mask || !in->adv) bad = "logp, mask and adv (not NULL)";
    else if (!(bad = check_opts(o))) bad = check_needed(in, o);
    if (!bad) return check_values(in, o, err);
    return grpo_error_set(err, GRPO_ERR_INVALID, "loss.c: %s loss needs %s (N=%d T=%d)",
                          (unsigned)o->type < GRPO_LOSS_TYPE_COUNT ? grpo_choices_loss_type[o->type]
                                                                   : "?",
                          bad, in->N, in->T);
}

/* What the whole micro-batch decides once: the entropy mask's threshold. */
typedef struct loss_ctx {
    const loss_kind *kind; /* the loss type's row of kinds[] */
    int seq;        /* sequence-level ratio */
    int ent_masked; /* top_entropy_quantile < 1 */
    double thr;     /* the entropy quantile (+inf when no token has mask != 0) */
} loss_ctx;

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* torch.quantile(x, p) with linear interpolation, computed in double (torch.lerp's two forms). */
static int32_t entropy_threshold(loss_ctx *c, const grpo_loss_inputs *in, const grpo_loss_opts *o,
                                 grpo_error *err) {
    size_t NT = (size_t)in->N * in->T, n = 0;
    float *v = malloc(NT * sizeof *v); /* [<= N*T] entropies of the tokens with mask != 0 */
    if (!v)
        return grpo_error_set(err, GRPO_ERR_NOMEM,
                              "loss.c: out of memory for the entropy quantile (%zu tokens)", NT);
    for (size_t it = 0; it < NT; it++)
        if (in->mask[it] != 0.0f) v[n++] = in->entropy[it];
    c->thr = INFINITY;
    if (n > 0) {
        qsort(v, n, sizeof *v, cmp_float);
        double pos = (1.0 - o->top_entropy_quantile) * (double)(n - 1), w = pos - floor(pos);
        size_t lo = (size_t)floor(pos), hi = lo + 1 < n ? lo + 1 : lo;
        double a = v[lo], b = v[hi];
        c->thr = w < 0.5 ? a + w * (b - a) : b - (b - a) * (1.0 - w);
    }
    free(v);
    return GRPO_OK;
}

static int32_t ctx_init(loss_ctx *c, const grpo_loss_inputs *in, const grpo_loss_opts *o,
                        grpo_error *err) {
    int32_t rc = check(in, o, err);
    c->kind = rc == GRPO_OK ? &kinds[o->type] : NULL;
    c->seq = o->is_level == GRPO_IS_SEQUENCE;
    c->ent_masked = o->top_entropy_quantile < 1.0;
    c->thr = -INFINITY;
    if (rc == GRPO_OK && c->ent_masked) rc = entropy_threshold(c, in, o, err);
    return rc;
}

/* H[i,t]: 1 when the token takes part in the policy term (entropy mask; 1 when off). */
static double entropy_keep(const grpo_loss_inputs *in, const loss_ctx *c, size_t it) {
    if (!c->ent_masked) return 1.0;
    double m = in->mask[it];
    return m != 0.0 && in->entropy[it] * m >= c->thr ? 1.0 : 0.0;
}

/* The row's sequence-level log ratio: the masked mean of logp - old_logp. */
static double row_log_ratio(const grpo_loss_inputs *in, int i) {
    double s = 0.0, L = 0.0;
    if (!in->old_logp) return 0.0;
    for (int t = 0; t < in->T; t++) {
        size_t it = (size_t)i * in->T + t;
        double m = in->mask[it];
        if (m == 0.0) continue;
        s += ((double)in->logp[it] - in->old_logp[it]) * m;
        L += m;
    }
    return s / fmax(L, 1.0);
}

/* One token's terms: its ratio, per-token loss, d(per-token loss)/d logp through this token's
 * own ratio (token level) or with the row's ratio held (sequence level), and the entropy mask. */
typedef struct token_terms {
    double ratio, c1; /* exp(log_w), and c1 after the delta clamp */
    double loss, dloss, kl;
    double d_ratio; /* H * d l / d ratio (sequence level: summed over the row by the caller) */
    double keep;    /* H[i,t] */
} token_terms;

static token_terms token_forward_backward(const grpo_loss_inputs *in, const grpo_loss_opts *o,
                                          const loss_ctx *c, size_t it, double A, double r_seq) {
    token_terms k;
    double lp = in->logp[it], old = in->old_logp ? in->old_logp[it] : lp;
    double r = c->seq ? r_seq : exp(lp - old); /* d ratio / d logp = ratio (token level) */
    policy_terms p = c->kind->term(o, r, A, lp);
    k.keep = entropy_keep(in, c, it);
    k.ratio = r;
    k.c1 = p.c1;
    double w = k.keep * (in->is_w ? in->is_w[it] : 1.0); /* H x the IS weight */
    k.loss = w * p.loss;
    k.d_ratio = w * p.d_ratio;
    if (c->kind->ratio_detached || c->seq) k.dloss = w * p.d_logp;
    else k.dloss = w * (p.d_ratio * r);
    k.kl = 0.0;
    if (o->beta != 0.0) {
        double d = in->ref_logp[it] - lp, e = exp(d);
        k.kl = e - d - 1.0;
        k.loss += o->beta * k.kl;
        k.dloss += o->beta * (1.0 - e); /* d/dlogp of exp(ref - logp) + logp */
    }
    return k;
}

/* The entropy bonus's denominator (see loss.h): the same for every loss type, as in TRL >= 1.16;
 * 0 when the bonus is off. */
static double bonus_denominator(const grpo_loss_inputs *in, const grpo_loss_opts *o,
                                const loss_ctx *c) {
    if (o->entropy_coef == 0.0) return 0.0;
    if (!c->ent_masked && o->norm_tokens > 0.0) /* M = m: the logical micro-batch's mask sum */
        return fmax(o->norm_tokens, 1.0) * o->grad_accum_steps;
    double kept = 0.0;
    for (size_t it = 0; it < (size_t)in->N * in->T; it++)
        if (in->mask[it] != 0.0f) kept += in->mask[it] * entropy_keep(in, c, it);
    return fmax(kept, 1.0) * o->grad_accum_steps;
}

/* Clip-flag sums: per token (masked means), or per row at sequence level (means over rows). */
typedef struct clip_sums {
    double low, high, region, cispo, low_min, high_max;
} clip_sums;

static void clip_row(clip_sums *s, double row_low, double row_high, double w) {
    if (w == 0.0) return; /* an empty row's mean is 0/0 = NaN, which nanmin/nanmax skip */
    s->low_min = isnan(s->low_min) ? row_low / w : fmin(s->low_min, row_low / w);
    s->high_max = isnan(s->high_max) ? row_high / w : fmax(s->high_max, row_high / w);
}

int32_t grpo_loss_forward(grpo_loss_metrics *out, const grpo_loss_inputs *in,
                          const grpo_loss_opts *o, grpo_error *err) {
    loss_ctx c;
    int32_t rc = ctx_init(&c, in, o, err);
    if (rc != GRPO_OK) return rc;
    const int N = in->N, T = in->T;
    const double lo = 1.0 - o->epsilon_low, hi = 1.0 + o->epsilon_high;
    double total = 0.0, loss = 0.0, kl = 0.0, ent = 0.0, bonus = 0.0;
    clip_sums cs = {0.0, 0.0, 0.0, 0.0, NAN, NAN};
    for (int i = 0; i < N; i++) total += row_len(in, i);
    for (int i = 0; i < N; i++) {
        double A = in->adv[i], L = row_len(in, i);
        double scale = c.kind->norm(in, o, i, norm_total(o, total));
        double r_seq = c.seq ? exp(row_log_ratio(in, i)) : 0.0;
        double row_low = 0.0, row_high = 0.0;
        for (int t = 0; t < T; t++) {
            size_t it = (size_t)i * T + t;
            double m = in->mask[it];
            if (m == 0.0) continue;
            token_terms k = token_forward_backward(in, o, &c, it, A, r_seq);
            loss += scale * m * k.loss;
            kl += m * k.kl;
            if (in->entropy) ent += m * in->entropy[it];
            if (o->entropy_coef != 0.0) bonus += m * k.keep * in->entropy[it];
            if (c.seq) continue;
            int is_low = k.c1 < lo && A < 0, is_high = k.c1 > hi && A > 0;
            cs.low += m * is_low;
            cs.high += m * is_high;
            cs.region += m * (is_low || is_high);
            row_low += m * is_low;
            row_high += m * is_high;
            cs.cispo += m * (k.ratio > o->epsilon_high && A > 0);
        }
        if (c.seq) { /* TRL's (N,1) flags: one per row, empty rows included */
            double c1 = o->delta > 0.0 && r_seq > o->delta ? o->delta : r_seq;
            row_low = c1 < lo && A < 0, row_high = c1 > hi && A > 0;
            cs.low += row_low, cs.high += row_high, cs.region += row_low || row_high;
            cs.cispo += r_seq > o->epsilon_high && A > 0;
            clip_row(&cs, row_low, row_high, 1.0);
        } else {
            clip_row(&cs, row_low, row_high, L);
        }
    }
    double denom = fmax(total, 1.0), clip_denom = c.seq ? N : denom;
    int clipped = c.kind->clip == GRPO_CLIP_PPO, global = c.kind->global; /* not / accum steps */
    double bd = bonus_denominator(in, o, &c);
    out->entropy_bonus = bd > 0.0 ? bonus / bd : 0.0;
    out->loss = bd > 0.0 ? loss - o->entropy_coef * out->entropy_bonus : loss;
    out->policy_loss = global ? loss : loss * o->grad_accum_steps;
    out->kl = o->beta != 0.0 ? kl / denom : NAN;
    out->entropy = in->entropy ? ent / denom : NAN;
    out->clip_low_mean = clipped ? cs.low / clip_denom : NAN;
    out->clip_high_mean = clipped ? cs.high / clip_denom : NAN;
    out->clip_region_mean = clipped ? cs.region / clip_denom : NAN;
    out->clip_low_min = clipped ? cs.low_min : NAN;
    out->clip_high_max = clipped ? cs.high_max : NAN;
    out->cispo_clip_ratio = c.kind->clip == GRPO_CLIP_CAP ? cs.cispo / clip_denom : NAN;
    out->n_tokens = total;
    return GRPO_OK;
}

int32_t grpo_loss_backward(float *dlogp, const grpo_loss_inputs *in, const grpo_loss_opts *o,
                           grpo_error *err) {
    loss_ctx c;
    int32_t rc = ctx_init(&c, in, o, err);
    if (rc != GRPO_OK) return rc;
    const int N = in->N, T = in->T;
    double total = 0.0; /* read by bnpo's normaliser only */
    for (int i = 0; i < N; i++) total += row_len(in, i);
    for (int i = 0; i < N; i++) {
        double A = in->adv[i], scale = c.kind->norm(in, o, i, norm_total(o, total));
        double r_seq = c.seq ? exp(row_log_ratio(in, i)) : 0.0, g = 0.0;
        if (c.seq) { /* d ratio / d logp[i,t] = ratio * m[i,t] / max(L_i, 1): the row's tokens
                      * share the ratio, so each gets the row's summed d loss / d ratio */
            for (int t = 0; t < T; t++) {
                size_t it = (size_t)i * T + t;
                double m = in->mask[it];
                if (m != 0.0)
                    g += scale * m * token_forward_backward(in, o, &c, it, A, r_seq).d_ratio;
            }
            g *= r_seq / fmax(row_len(in, i), 1.0);
        }
        for (int t = 0; t < T; t++) {
            size_t it = (size_t)i * T + t;
            double m = in->mask[it];
            if (m == 0.0) {
                dlogp[it] = 0.0f;
                continue;
            }
            double d = scale * m * token_forward_backward(in, o, &c, it, A, r_seq).dloss;
            dlogp[it] = c.seq ? (float)(d + g * m) : (float)d;
        }
    }
    return GRPO_OK;
}

int32_t grpo_loss_entropy_backward(float *dentropy, const grpo_loss_inputs *in,
                                   const grpo_loss_opts *o, grpo_error *err) {
    loss_ctx c;
    int32_t rc = ctx_init(&c, in, o, err);
    if (rc != GRPO_OK) return rc;
    size_t NT = (size_t)in->N * in->T;
    double bd = bonus_denominator(in, o, &c);
    for (size_t it = 0; it < NT; it++) {
        double m = in->mask[it];
        dentropy[it] = bd > 0.0 && m != 0.0
                           ? (float)(-o->entropy_coef * m * entropy_keep(in, &c, it) / bd)
                           : 0.0f;
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
