/* reward_sum.c — NaN-aware weighted reward sum and NaN-aware mean / std (see reward_sum.h). */
#include "train/reward_sum.h"

#include <math.h>

int grpo_reward_sum(float *r, const float *R, const float *w, int N, int K) {
    int unscorable = 0;
    for (int n = 0; n < N; n++) {
        double sum = 0.0;
        int seen = 0;
        for (int k = 0; k < K; k++) {
            float v = R[(size_t)n * K + k];
            if (isnan(v)) continue;
            seen++;
            double term = (double)w[k] * v;
            if (isnan(term)) continue; /* inf * 0: torch's nansum skips it as well */
            sum += term;
        }
        if (seen == 0) {
            r[n] = NAN;
            unscorable++;
        } else {
            r[n] = (float)sum;
        }
    }
    return unscorable;
}

double grpo_nanmean(const float *x, int n, int stride) {
    double sum = 0.0;
    int count = 0;
    for (int i = 0; i < n; i++) {
        float v = x[(size_t)i * stride];
        if (isnan(v)) continue;
        sum += v;
        count++;
    }
    return count ? sum / count : NAN;
}

double grpo_nanstd(const float *x, int n, int stride, int unbiased) {
    double mean = grpo_nanmean(x, n, stride);
    double ss = 0.0;
    int count = 0;
    for (int i = 0; i < n; i++) {
        float v = x[(size_t)i * stride];
        if (isnan(v)) continue;
        ss += (v - mean) * (v - mean);
        count++;
    }
    int dof = unbiased ? count - 1 : count;
    return dof > 0 ? sqrt(ss / dof) : NAN;
}

void grpo_reward_func_stats(double *mean, double *std, const float *R, int N, int K, int k) {
    *mean = grpo_nanmean(R + k, N, K);
    *std = grpo_nanstd(R + k, N, K, 1);
}
