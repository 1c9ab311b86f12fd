/* advantage.c — group-relative advantages (formulas in advantage.h). */
#include "train/advantage.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/reward_sum.h"

#define ADV_STD_EPS 1e-4    /* TRL and MiniMind: A = (r - mean) / (std + 1e-4) */
#define RENORM_STD_EPS 1e-8 /* MiniMind's batch re-normalisation */
#define ZERO_STD_ATOL 1e-8  /* torch.isclose(std, 0): |std| <= atol + rtol * 0 */

grpo_advantage_opts grpo_advantage_opts_default(void) {
    grpo_advantage_opts o = {GRPO_SCALE_GROUP, 1, 0.0, 0};
    return o;
}

static int32_t check_shape(int B, int G, const grpo_advantage_opts *o, grpo_error *err) {
    if (B < 1 || G < 1)
        return grpo_error_set(err, GRPO_ERR_INVALID, "advantage.c: need B >= 1 prompts and G >= 1 "
                              "completions per prompt, got B=%d G=%d", B, G);
    if ((unsigned)o->scale > GRPO_SCALE_NONE)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "advantage.c: scale_rewards %d is not group, batch or none",
                              (int)o->scale);
    if (!(o->clip >= 0.0) || isinf(o->clip))
        return grpo_error_set(err, GRPO_ERR_INVALID, "advantage.c: advantage clip must be a finite "
                              "number >= 0 (0 = off), got %g", (double)o->clip);
    return GRPO_OK;
}

/* Clamp, MiniMind re-normalisation, then NaN -> 0; a[N] holds the raw advantages (maybe NaN). */
static void finish(float *a, int N, const grpo_advantage_opts *o) {
    if (o->clip > 0.0)
        for (int i = 0; i < N; i++) {
            if (a[i] > o->clip) a[i] = (float)o->clip; /* NaN compares false and stays NaN */
            if (a[i] < -o->clip) a[i] = (float)-o->clip;
        }
    if (o->batch_renorm) {
        double mean = grpo_nanmean(a, N, 1), std = grpo_nanstd(a, N, 1, 1);
        for (int i = 0; i < N; i++) a[i] = (float)((a[i] - mean) / (std + RENORM_STD_EPS));
    }
    for (int i = 0; i < N; i++)
        if (isnan(a[i])) a[i] = 0.0f;
}

static void fill_reward_metrics(grpo_advantage_metrics *m, const float *r, int N) {
    m->reward = grpo_nanmean(r, N, 1);
    m->reward_std = grpo_nanstd(r, N, 1, 1);
    m->n_unscorable = 0;
    for (int i = 0; i < N; i++) m->n_unscorable += isnan(r[i]) != 0;
}

/* Rewards are finite or NaN ("no opinion"); an infinity would turn its whole group into NaN. */
static int32_t check_finite_or_nan(const float *x, int n, const char *what, grpo_error *err) {
    for (int i = 0; i < n; i++)
        if (isinf(x[i]))
            return grpo_error_set(err, GRPO_ERR_INVALID, "advantage.c: %s[%d] is %g; a reward must "
                                  "be finite, or NaN for \"no opinion\"", what, i, (double)x[i]);
    return GRPO_OK;
}

static int std_is_zero(double std) { return fabs(std) <= ZERO_STD_ATOL; }

int32_t grpo_advantages(float *adv, grpo_advantage_metrics *m, const float *r, int B, int G,
                        const grpo_advantage_opts *o, grpo_error *err) {
    int32_t rc = check_shape(B, G, o, err);
    if (rc != GRPO_OK) return rc;
    int N = B * G, zero_std = 0;
    rc = check_finite_or_nan(r, N, "r", err);
    if (rc != GRPO_OK) return rc;
    double batch_std = N > 1 ? grpo_nanstd(r, N, 1, o->std_unbiased) : 0.0;
    for (int b = 0; b < B; b++) {
        const float *rg = r + (size_t)b * G;
        double mean = grpo_nanmean(rg, G, 1);
        double std = o->scale == GRPO_SCALE_BATCH ? batch_std
                     : G > 1                      ? grpo_nanstd(rg, G, 1, o->std_unbiased)
                                                  : 0.0;
        for (int g = 0; g < G; g++) {
            double a = rg[g] - mean;
            if (o->scale != GRPO_SCALE_NONE) a /= std + ADV_STD_EPS;
            adv[(size_t)b * G + g] = (float)a;
        }
        zero_std += std_is_zero(std) ? G : 0;
    }
    finish(adv, N, o);
    if (m) {
        fill_reward_metrics(m, r, N);
        m->frac_reward_zero_std = (double)zero_std / N;
    }
    return GRPO_OK;
}

int32_t grpo_advantages_gdpo(float *adv, grpo_advantage_metrics *m, const float *R, const float *w,
                             int B, int G, int K, const grpo_advantage_opts *o, grpo_error *err) {
    int32_t rc = check_shape(B, G, o, err);
    if (rc != GRPO_OK) return rc;
    if (K < 1)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "advantage.c: normalize_then_sum needs K >= 1 reward functions, "
                              "got K=%d", K);
    int N = B * G;
    rc = check_finite_or_nan(R, N * K, "R", err);
    if (rc != GRPO_OK) return rc;
    float *z = malloc(sizeof(float) * (size_t)N * K); /* [N,K] per-group normalised rewards */
    float *r = malloc(sizeof(float) * (size_t)N);     /* [N] */
    if (!z || !r) {
        free(z);
        free(r);
        return grpo_error_set(err, GRPO_ERR_NOMEM, "advantage.c: out of memory for %d x %d "
                              "rewards", N, K);
    }
    for (int b = 0; b < B; b++)
        for (int k = 0; k < K; k++) {
            const float *col = R + (size_t)b * G * K + k;
            double mean = grpo_nanmean(col, G, K);
            double std = G > 1 ? grpo_nanstd(col, G, K, o->std_unbiased) : 0.0;
            for (int g = 0; g < G; g++)
                z[((size_t)b * G + g) * K + k] = (float)((col[(size_t)g * K] - mean) /
                                                         (std + ADV_STD_EPS));
        }
    /* The sum skips NaN terms; a row is NaN only when every raw reward was NaN. */
    grpo_reward_sum(r, z, w, N, K);
    for (int n = 0; n < N; n++) {
        int scored = 0;
        for (int k = 0; k < K; k++) scored |= !isnan(R[(size_t)n * K + k]);
        if (scored && isnan(r[n])) r[n] = 0.0f; /* every z was NaN: nansum of nothing is 0 */
    }
    double mean = grpo_nanmean(r, N, 1);
    double std = N > 1 ? grpo_nanstd(r, N, 1, o->std_unbiased) : 0.0;
    for (int n = 0; n < N; n++) adv[n] = (float)((r[n] - mean) / (std + ADV_STD_EPS));
    finish(adv, N, o);
    if (m) {
        grpo_reward_sum(r, R, w, N, K);
        fill_reward_metrics(m, r, N);
        m->frac_reward_zero_std = std_is_zero(std) ? 1.0 : 0.0;
    }
    free(z);
    free(r);
    return GRPO_OK;
}

int grpo_zero_std_groups(unsigned char *keep, const float *r, int B, int G) {
    int dropped = 0;
    for (int b = 0; b < B; b++) {
        /* biased: one scored member gives 0, none gives NaN; both leave every advantage at 0 */
        double std = grpo_nanstd(r + (size_t)b * G, G, 1, 0);
        keep[b] = !(isnan(std) || std_is_zero(std));
        dropped += !keep[b];
    }
    return dropped;
}
