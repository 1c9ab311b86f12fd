/*
 * embedding.c — token embedding lookup.
 *   forward:  out (N,C) = wte (V,C)[ids (N)]
 *   backward: dwte (V,C) += dout (N,C) scattered by ids
 * ids must lie in [0, V); the table does not know V, the model checks its inputs.
 * With bf16 compute (ctx->compute_dtype: the bf16-compute keys) the fp32 table's rows are
 * taken at bf16 precision (rounded to nearest even, as the products' operands), the values a
 * bf16 copy of the weights holds: so a pass in bf16 compute on fp32 weights and one on the bf16
 * rollout copy start from the same residual stream and give the same bits. The backward is the
 * identity through the rounding (dwte gets dout).
 */
#include <string.h>

#include "cpu/cpu_backend.h"
#include "cpu/fastmath.h"

typedef struct emb_args {
    float *out;
    const float *wte, *dout;
    const int32_t *ids;
    int32_t N, C;
    int bf16; /* rows rounded to bf16 (bf16 compute) */
} emb_args;

/* x (n) = bf16(x) widened back to fp32 (cpu_bf16_bits) */
static void round_bf16(float *x, int32_t n) {
#pragma omp simd
    for (int32_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        u = cpu_bf16_bits(u) << 16;
        memcpy(&x[i], &u, sizeof u);
    }
}

static void forward_range(void *arg, int64_t n0, int64_t n1, int32_t tid) {
    const emb_args *a = arg;
    (void)tid;
    for (int64_t n = n0; n < n1; n++) {
        CPU_CHECK(a->ids[n] >= 0, "embedding_forward", "token id < 0");
        float *o = a->out + (size_t)n * a->C;
        memcpy(o, a->wte + (size_t)a->ids[n] * a->C, (size_t)a->C * sizeof(float));
        if (a->bf16) round_bf16(o, a->C);
    }
}

void cpu_embedding_forward(void *ctx, float *out, const int32_t *ids, const float *wte, int32_t N,
                           int32_t C) {
    const int bf16 = ((cpu_ctx *)ctx)->compute_dtype != GRPO_DTYPE_F32;
    emb_args a = {out, wte, NULL, ids, N, C, bf16};
    cpu_parallel_range(ctx, CPU_FAM_EMBEDDING, cpu_threads_for(ctx, (double)N * C), N, 1,
                       forward_range, &a);
}

/* Repeated ids would race if threads split the tokens, so threads split the channels instead:
 * each task owns a slice of every row of dwte and walks all tokens in order (deterministic). */
#define EMB_SLICE 16 /* one cache line of each row */

static void backward_task(void *arg, int64_t s, int32_t tid) {
    const emb_args *a = arg;
    (void)tid;
    int32_t C = a->C, c0 = (int32_t)s * EMB_SLICE, c1 = c0 + EMB_SLICE < C ? c0 + EMB_SLICE : C;
    for (int32_t n = 0; n < a->N; n++) {
        float *dw = a->out + (size_t)a->ids[n] * C;
        const float *d = a->dout + (size_t)n * C;
        for (int32_t c = c0; c < c1; c++) dw[c] += d[c];
    }
}

void cpu_embedding_backward(void *ctx, float *dwte, const float *dout, const int32_t *ids,
                            int32_t N, int32_t C) {
    if (!dwte) return;
    int32_t slices = (C + EMB_SLICE - 1) / EMB_SLICE;
    emb_args a = {dwte, NULL, dout, ids, N, C, 0};
    cpu_parallel(ctx, CPU_FAM_EMBEDDING, cpu_threads_for(ctx, (double)N * C), slices,
                 backward_task, &a);
}
