/* clip.c — gradient clipping by global norm (see clip.h). */
#include "train/clip.h"

#include <math.h>

double grpo_grad_sumsq(const float *g, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)g[i] * g[i];
    return s;
}

double grpo_grad_total_norm(const double *sumsq, int n_tensors) {
    double s = 0.0;
    for (int i = 0; i < n_tensors; i++) s += sumsq[i];
    return sqrt(s);
}

double grpo_grad_clip_coef(double total_norm, double max_norm) {
    if (!(max_norm > 0.0)) return 1.0;
    double coef = max_norm / (total_norm + GRPO_CLIP_EPS);
    return coef > 1.0 ? 1.0 : coef; /* NaN stays NaN, as torch.clamp(max=1) keeps it */
}

void grpo_grad_scale(float *g, size_t n, double coef) {
    float c = (float)coef;
    for (size_t i = 0; i < n; i++) g[i] *= c;
}
