/* is_correction.c — truncated / masked importance sampling of off-policy samples (see
 * is_correction.h). */
#include "train/is_correction.h"

#include <math.h>
#include <stddef.h>

#include "base/comm.h"

grpo_is_sums grpo_is_sums_init(void) {
    return (grpo_is_sums){0.0, 0.0, 0.0, 0.0, INFINITY, -INFINITY, 0.0, 0.0};
}

int grpo_is_sums_reduce(grpo_is_sums *s, grpo_error *err) {
    if (grpo_comm_size() == 1) return GRPO_OK;
    double sum[] = {s->diff_sum, s->diff_n, s->ratio_sum, s->ratio_n, s->clipped};
    int rc = grpo_comm_allreduce_f64(sum, sizeof sum / sizeof *sum, GRPO_COMM_SUM, err);
    if (rc == GRPO_OK) rc = grpo_comm_allreduce_f64(&s->diff_max, 1, GRPO_COMM_MAX, err);
    if (rc == GRPO_OK) rc = grpo_comm_allreduce_f64(&s->ratio_max, 1, GRPO_COMM_MAX, err);
    if (rc == GRPO_OK) rc = grpo_comm_allreduce_f64(&s->ratio_min, 1, GRPO_COMM_MIN, err);
    s->diff_sum = sum[0], s->diff_n = sum[1], s->ratio_sum = sum[2], s->ratio_n = sum[3];
    s->clipped = sum[4];
    return rc;
}

/* The capped weight of ratio rho (NaN: a non-finite log-prob difference, weight 0), counted
 * into s. */
static double capped(double rho, grpo_is_mode mode, double cap, grpo_is_sums *s) {
    int bad = isnan(rho), over = bad || rho > cap;
    int mask = mode == GRPO_IS_TOKEN_MASK || mode == GRPO_IS_SEQUENCE_MASK;
    double w = bad ? 0.0 : over ? (mask ? 0.0 : cap) : rho;
    s->clipped += over;
    s->ratio_sum += w, s->ratio_n += 1.0;
    s->ratio_min = fmin(s->ratio_min, w), s->ratio_max = fmax(s->ratio_max, w);
    return w;
}

void grpo_is_weights(float *w, const float *old, const float *samp, const float *mask, int32_t N,
                     int32_t T, grpo_is_mode mode, double cap, grpo_is_sums *s) {
    int seq = mode == GRPO_IS_SEQUENCE_TRUNCATE || mode == GRPO_IS_SEQUENCE_MASK;
    for (int32_t i = 0; i < N; i++) {
        double row = 0.0;
        int row_bad = 0;
        for (int32_t t = 0; t < T; t++) {
            size_t it = (size_t)i * T + t;
            if (mask[it] == 0.0f) continue;
            double d = (double)old[it] - samp[it];
            if (!isfinite(d)) {
                row_bad = 1;
                continue;
            }
            s->diff_sum += fabs(d), s->diff_n += 1.0, s->diff_max = fmax(s->diff_max, fabs(d));
            row += d * mask[it];
        }
        double wrow = seq ? capped(row_bad ? NAN : exp(row), mode, cap, s) : 0.0;
        for (int32_t t = 0; t < T; t++) {
            size_t it = (size_t)i * T + t;
            double d = (double)old[it] - samp[it];
            if (mask[it] == 0.0f) w[it] = 0.0f;
            else if (seq) w[it] = (float)wrow;
            else w[it] = (float)capped(isfinite(d) ? exp(d) : NAN, mode, cap, s);
        }
    }
}
