/*
 * adamw.c — AdamW with PyTorch's semantics (torch.optim.AdamW, single-tensor path), step t >= 1:
 *   p  *= 1 - lr * wd                         (decoupled weight decay, before the moments)
 *   m   = m + (1 - beta1) * (g - m)           (torch's lerp)
 *   v   = beta2 * v + (1 - beta2) * g^2
 *   p  -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 * The bias corrections are computed in double and rounded once, as torch does with its Python
 * float scalars. param, grad, m, v are n floats; m and v start at zero.
 */
#include <math.h>

#include "cpu/cpu_backend.h"

void cpu_adamw(void *ctx, float *param, const float *grad, float *m, float *v, uint64_t n,
               float lr, float beta1, float beta2, float eps, float weight_decay, int32_t t) {
    CPU_CHECK(t >= 1, "adamw", "step t must be >= 1");
    float decay = (float)(1.0 - (double)lr * (double)weight_decay);
    float step_size = (float)((double)lr / (1.0 - pow((double)beta1, (double)t)));
    float bc2_sqrt = (float)sqrt(1.0 - pow((double)beta2, (double)t));
    float one_minus_b1 = (float)(1.0 - (double)beta1), one_minus_b2 = (float)(1.0 - (double)beta2);
    int nt = cpu_threads_for(ctx, (double)n * 8);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (uint64_t i = 0; i < n; i++) {
        float g = grad[i], p = param[i] * decay;
        float mi = m[i] + one_minus_b1 * (g - m[i]);
        float vi = beta2 * v[i] + one_minus_b2 * g * g;
        m[i] = mi;
        v[i] = vi;
        param[i] = p - step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
    }
}
