/*
 * rows.c — moving rows between a (N,C) tensor and a (M,C) one through an index idx (M), for
 * mixture-of-experts routing (tokens grouped per expert, then added back weighted):
 *   gather_rows:               out[m] = inp[idx[m]]
 *   scatter_add_rows:          out[idx[m]] += w[m] * inp[m]        (w NULL: 1)
 *   scatter_add_rows_backward: dinp[m] = w[m] * dout[idx[m]], dw[m] = dot(dout[idx[m]], inp[m])
 * idx may repeat in scatter_add_rows, so its threads split the C columns, never the rows: every
 * output element is summed by one thread in order of m (the same bits for any thread count).
 */
#include "cpu/cpu_backend.h"

#define COL_BLOCK 64

void cpu_gather_rows(void *ctx, float *out, const float *inp, const int32_t *idx, int32_t M,
                     int32_t C) {
    int nt = cpu_threads_for(ctx, (double)M * C);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int32_t m = 0; m < M; m++) {
        const float *src = inp + (int64_t)idx[m] * C;
        float *dst = out + (int64_t)m * C;
        for (int32_t c = 0; c < C; c++) dst[c] = src[c];
    }
}

void cpu_scatter_add_rows(void *ctx, float *out, const float *inp, const int32_t *idx,
                          const float *w, int32_t M, int32_t C) {
    int32_t blocks = (C + COL_BLOCK - 1) / COL_BLOCK;
    int nt = cpu_threads_for(ctx, (double)M * C);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int32_t bl = 0; bl < blocks; bl++) {
        int32_t c0 = bl * COL_BLOCK, c1 = c0 + COL_BLOCK < C ? c0 + COL_BLOCK : C;
        for (int32_t m = 0; m < M; m++) {
            float wm = w ? w[m] : 1.0f;
            const float *src = inp + (int64_t)m * C;
            float *dst = out + (int64_t)idx[m] * C;
            for (int32_t c = c0; c < c1; c++) dst[c] += wm * src[c];
        }
    }
}

void cpu_scatter_add_rows_backward(void *ctx, float *dinp, float *dw, const float *dout,
                                   const float *inp, const int32_t *idx, const float *w,
                                   int32_t M, int32_t C) {
    int nt = cpu_threads_for(ctx, (double)M * C);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int32_t m = 0; m < M; m++) {
        const float *g = dout + (int64_t)idx[m] * C;
        if (dinp) {
            float wm = w ? w[m] : 1.0f, *d = dinp + (int64_t)m * C;
            for (int32_t c = 0; c < C; c++) d[c] = wm * g[c];
        }
        if (dw) {
            const float *x = inp + (int64_t)m * C;
            double acc = 0.0;
            for (int32_t c = 0; c < C; c++) acc += (double)g[c] * x[c];
            dw[m] = (float)acc;
        }
    }
}
