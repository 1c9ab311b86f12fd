/*
 * dropout.c — dropout with a mask recomputed from (seed, index) (grpo/ops.h 1.5):
 *   out[i] = inp[i] / (1 - p) when grpo_dropout_keeps(seed, i, p), else 0
 * The same call on the gradient is the backward. Each element's result depends on its index
 * alone, so the thread count does not change it.
 */
#include "cpu/cpu_backend.h"

void cpu_dropout(void *ctx, float *out, const float *inp, uint64_t n, float p, uint64_t seed) {
    CPU_CHECK(p >= 0.0f && p < 1.0f, "dropout", "p in [0, 1)");
    const float scale = 1.0f / (1.0f - p);
    int nt = cpu_threads_for(ctx, (double)n * 8);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (uint64_t i = 0; i < n; i++)
        out[i] = grpo_dropout_keeps(seed, i, p) ? inp[i] * scale : 0.0f;
}
