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

typedef struct rows_args {
    float *out, *dinp, *dw;
    const float *inp, *dout, *w;
    const int32_t *idx;
    int32_t M, C;
} rows_args;

static void gather_range(void *arg, int64_t m0, int64_t m1, int32_t tid) {
    const rows_args *a = arg;
    (void)tid;
    for (int64_t m = m0; m < m1; m++) {
        const float *src = a->inp + (int64_t)a->idx[m] * a->C;
        float *dst = a->out + m * a->C;
        for (int32_t c = 0; c < a->C; c++) dst[c] = src[c];
    }
}

void cpu_gather_rows(void *ctx, float *out, const float *inp, const int32_t *idx, int32_t M,
                     int32_t C) {
    rows_args a = {out, NULL, NULL, inp, NULL, NULL, idx, M, C};
    cpu_parallel_range(ctx, CPU_FAM_ELEMENT, cpu_threads_for(ctx, (double)M * C), M, 1,
                       gather_range, &a);
}

static void scatter_task(void *arg, int64_t bl, int32_t tid) {
    const rows_args *a = arg;
    (void)tid;
    int32_t c0 = (int32_t)bl * COL_BLOCK, c1 = c0 + COL_BLOCK < a->C ? c0 + COL_BLOCK : a->C;
    for (int32_t m = 0; m < a->M; m++) {
        float wm = a->w ? a->w[m] : 1.0f;
        const float *src = a->inp + (int64_t)m * a->C;
        float *dst = a->out + (int64_t)a->idx[m] * a->C;
        for (int32_t c = c0; c < c1; c++) dst[c] += wm * src[c];
    }
}

void cpu_scatter_add_rows(void *ctx, float *out, const float *inp, const int32_t *idx,
                          const float *w, int32_t M, int32_t C) {
    int32_t blocks = (C + COL_BLOCK - 1) / COL_BLOCK;
    rows_args a = {out, NULL, NULL, inp, NULL, w, idx, M, C};
    cpu_parallel(ctx, CPU_FAM_ELEMENT, cpu_threads_for(ctx, (double)M * C), blocks, scatter_task,
                 &a);
}

static void scatter_backward_range(void *arg, int64_t m0, int64_t m1, int32_t tid) {
    const rows_args *a = arg;
    (void)tid;
    int32_t C = a->C;
    for (int64_t m = m0; m < m1; m++) {
        const float *g = a->dout + (int64_t)a->idx[m] * C;
        if (a->dinp) {
            float wm = a->w ? a->w[m] : 1.0f, *d = a->dinp + m * C;
            for (int32_t c = 0; c < C; c++) d[c] = wm * g[c];
        }
        if (a->dw) {
            const float *x = a->inp + m * C;
            double acc = 0.0;
            for (int32_t c = 0; c < C; c++) acc += (double)g[c] * x[c];
            a->dw[m] = (float)acc;
        }
    }
}

void cpu_scatter_add_rows_backward(void *ctx, float *dinp, float *dw, const float *dout,
                                   const float *inp, const int32_t *idx, const float *w,
                                   int32_t M, int32_t C) {
    rows_args a = {NULL, dinp, dw, inp, dout, w, idx, M, C};
    cpu_parallel_range(ctx, CPU_FAM_ELEMENT, cpu_threads_for(ctx, (double)M * C), M, 1,
                       scatter_backward_range, &a);
}
