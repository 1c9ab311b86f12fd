/* clip.c — gradient clipping by global norm (see clip.h). */
#include "train/clip.h"

#include <math.h>

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
