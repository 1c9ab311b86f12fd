/*
 * embedding.c — token embedding lookup.
 *   forward:  out (N,C) = wte (V,C)[ids (N)]
 *   backward: dwte (V,C) += dout (N,C) scattered by ids
 * ids must lie in [0, V); the table does not know V, the model checks its inputs.
 */
#include <string.h>

#include "cpu/cpu_backend.h"

typedef struct emb_args {
    float *out;
    const float *wte, *dout;
    const int32_t *ids;
    int32_t N, C;
} emb_args;

static void forward_range(void *arg, int64_t n0, int64_t n1, int32_t tid) {
    const emb_args *a = arg;
    (void)tid;
    for (int64_t n = n0; n < n1; n++) {
        CPU_CHECK(a->ids[n] >= 0, "embedding_forward", "token id < 0");
        memcpy(a->out + (size_t)n * a->C, a->wte + (size_t)a->ids[n] * a->C,
               (size_t)a->C * sizeof(float));
    }
}

void cpu_embedding_forward(void *ctx, float *out, const int32_t *ids, const float *wte, int32_t N,
                           int32_t C) {
    emb_args a = {out, wte, NULL, ids, N, C};
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
    emb_args a = {dwte, NULL, dout, ids, N, C};
    cpu_parallel(ctx, CPU_FAM_EMBEDDING, cpu_threads_for(ctx, (double)N * C), slices,
                 backward_task, &a);
}
