/*
 * dropout.c — dropout with a mask recomputed from (seed, index) (grpo/ops.h 1.5):
 *   out[i] = inp[i] / (1 - p) when grpo_dropout_keeps(seed, i, p), else 0
 * The same call on the gradient is the backward. Each element's result depends on its index
 * alone, so the thread count does not change it.
 */
#include "cpu/cpu_backend.h"

typedef struct dropout_args {
    float *out;
    const float *inp;
    float p, scale;
    uint64_t seed;
} dropout_args;

static void dropout_range(void *arg, int64_t i0, int64_t i1, int32_t tid) {
    const dropout_args *a = arg;
    (void)tid;
    for (uint64_t i = (uint64_t)i0; i < (uint64_t)i1; i++)
        a->out[i] = grpo_dropout_keeps(a->seed, i, a->p) ? a->inp[i] * a->scale : 0.0f;
}

void cpu_dropout(void *ctx, float *out, const float *inp, uint64_t n, float p, uint64_t seed) {
    CPU_CHECK(p >= 0.0f && p < 1.0f, "dropout", "p in [0, 1)");
    dropout_args a = {out, inp, p, 1.0f / (1.0f - p), seed};
    cpu_parallel_range(ctx, CPU_FAM_ELEMENT, cpu_threads_for(ctx, (double)n * 8), (int64_t)n,
                       4096, dropout_range, &a);
}
