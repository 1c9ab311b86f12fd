/*
 * embedding.c — token embedding lookup.
 *   forward:  out (N,C) = wte (V,C)[ids (N)]
 *   backward: dwte (V,C) += dout (N,C) scattered by ids
 * ids must lie in [0, V); the table does not know V, the model checks its inputs.
 */
#include <string.h>

#include "cpu/cpu_backend.h"

void cpu_embedding_forward(void *ctx, float *out, const int32_t *ids, const float *wte, int32_t N,
                           int32_t C) {
    int nt = cpu_threads_for(ctx, (double)N * C);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int32_t n = 0; n < N; n++) {
        CPU_CHECK(ids[n] >= 0, "embedding_forward", "token id < 0");
        memcpy(out + (size_t)n * C, wte + (size_t)ids[n] * C, (size_t)C * sizeof(float));
    }
}

/* Repeated ids would race if threads split the tokens, so threads split the channels instead:
 * each owns a slice of every row of dwte and walks all tokens in order (deterministic). */
#define EMB_SLICE 16 /* one cache line of each row */

void cpu_embedding_backward(void *ctx, float *dwte, const float *dout, const int32_t *ids,
                            int32_t N, int32_t C) {
    if (!dwte) return;
    int32_t slices = (C + EMB_SLICE - 1) / EMB_SLICE;
    int nt = cpu_threads_for(ctx, (double)N * C);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int32_t s = 0; s < slices; s++) {
        int32_t c0 = s * EMB_SLICE, c1 = c0 + EMB_SLICE < C ? c0 + EMB_SLICE : C;
        for (int32_t n = 0; n < N; n++) {
            float *dw = dwte + (size_t)ids[n] * C;
            const float *d = dout + (size_t)n * C;
            for (int32_t c = c0; c < c1; c++) dw[c] += d[c];
        }
    }
}
