/*
 * adamw.c — AdamW with PyTorch's semantics (torch.optim.AdamW, the single-tensor path it takes
 * for CPU tensors), step t >= 1, in the same order and with the same roundings:
 *   p  *= 1 - lr * wd                         (decoupled weight decay, before the moments)
 *   m   = m + (1 - beta1) * (g - m)           (torch's lerp with weight 1 - beta1 < 0.5)
 *   v   = v * beta2 + (1 - beta2) * g * g
 *   p  += -(lr / (1 - beta1^t)) * (m / (sqrt(v) / sqrt(1 - beta2^t) + eps))
 * Scalars are formed in double from the configured values and rounded to fp32 once, as torch
 * does with its Python-float hyperparameters. param, grad, m, v are n floats; m, v start at 0.
 */
#include <math.h>

#include "cpu/cpu_backend.h"

void cpu_adamw(void *ctx, float *param, const float *grad, float *m, float *v, uint64_t n,
               double lr, double beta1, double beta2, double eps, double weight_decay, int32_t t) {
    CPU_CHECK(t >= 1, "adamw", "step t must be >= 1");
    const float decay = (float)(1.0 - lr * weight_decay);
    const float w1 = (float)(1.0 - beta1), b2 = (float)beta2, w2 = (float)(1.0 - beta2);
    const float step_size = (float)(lr / (1.0 - pow(beta1, (double)t)));
    const float bc2_sqrt = (float)sqrt(1.0 - pow(beta2, (double)t));
    const float epsf = (float)eps;
    int nt = cpu_threads_for(ctx, (double)n * 8);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (uint64_t i = 0; i < n; i++) {
        float g = grad[i], p = param[i] * decay;
        float mi = m[i] + w1 * (g - m[i]);
        float vi = v[i] * b2 + w2 * g * g;
        m[i] = mi;
        v[i] = vi;
        param[i] = p - step_size * (mi / (sqrtf(vi) / bc2_sqrt + epsf));
    }
}
