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
#include "cpu/fastmath.h"

typedef struct adamw_args {
    float *param, *m, *v;
    const float *grad;
    float decay, w1, b2, w2, step_size, bc2_sqrt, epsf;
} adamw_args;

/* Elements [0, n) of the four arrays: one vector lane each (every operation an IEEE one of its
 * own element, in the order above, no contraction under -std=c11: the bits of the scalar loop).
 * The file is compiled without errno (CMakeLists.txt), so that the sqrt vectorises. */
CPU_VECTOR_CLONES
static void adamw_slice(const adamw_args *a, float *param, float *m, float *v, const float *grad,
                        int64_t n) {
    const float decay = a->decay, w1 = a->w1, b2 = a->b2, w2 = a->w2;
    const float step_size = a->step_size, bc2_sqrt = a->bc2_sqrt, epsf = a->epsf;
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float g = grad[i], p = param[i] * decay;
        float mi = m[i] + w1 * (g - m[i]);
        float vi = v[i] * b2 + w2 * g * g;
        m[i] = mi;
        v[i] = vi;
        param[i] = p - step_size * (mi / (sqrtf(vi) / bc2_sqrt + epsf));
    }
}

static void adamw_range(void *arg, int64_t i0, int64_t i1, int32_t tid) {
    const adamw_args *a = arg;
    (void)tid;
    adamw_slice(a, a->param + i0, a->m + i0, a->v + i0, a->grad + i0, i1 - i0);
}

void cpu_adamw(void *ctx, float *param, const float *grad, float *m, float *v, uint64_t n,
               double lr, double beta1, double beta2, double eps, double weight_decay, int32_t t) {
    CPU_CHECK(t >= 1, "adamw", "step t must be >= 1");
    adamw_args a = {param, m, v, grad, (float)(1.0 - lr * weight_decay), (float)(1.0 - beta1),
                    (float)beta2, (float)(1.0 - beta2),
                    (float)(lr / (1.0 - pow(beta1, (double)t))),
                    (float)sqrt(1.0 - pow(beta2, (double)t)), (float)eps};
    cpu_parallel_range(ctx, CPU_FAM_OPTIMIZER, cpu_threads_for(ctx, (double)n * 8), (int64_t)n,
                       4096, adamw_range, &a);
}
