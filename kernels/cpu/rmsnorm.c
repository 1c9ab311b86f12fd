/*
 * rmsnorm.c — RMSNorm over the last dim, as Hugging Face Llama computes it in fp32:
 *   rstd (N) = 1 / sqrt(mean_c inp^2 + eps);  out (N,C) = (inp * rstd) * w (C)
 * backward, with g = dout * w:
 *   dinp (N,C) = rstd * g - inp * rstd^3 * mean_c(g * inp)   (written; may alias dout)
 *   dw (C)    += sum over N of dout * inp * rstd             (accumulated)
 */
#include <math.h>
#include <stdlib.h>

#include "cpu/cpu_backend.h"

typedef struct rms_args {
    float *out, *rstd, *dinp, *dw, *part;
    const float *inp, *w, *dout, *rstd_in;
    int32_t N, C, blocks;
    float eps;
} rms_args;

static void forward_range(void *arg, int64_t n0, int64_t n1, int32_t tid) {
    const rms_args *a = arg;
    const int32_t C = a->C;
    const float *w = a->w;
    (void)tid;
    for (int64_t n = n0; n < n1; n++) {
        const float *x = a->inp + (size_t)n * C;
        float *o = a->out + (size_t)n * C;
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int32_t c = 0; c < C; c++) ss += x[c] * x[c];
        float r = 1.0f / sqrtf(ss / (float)C + a->eps);
        for (int32_t c = 0; c < C; c++) o[c] = (x[c] * r) * w[c];
        if (a->rstd) a->rstd[n] = r;
    }
}

void cpu_rmsnorm_forward(void *ctx, float *out, float *rstd, const float *inp, const float *w,
                         int32_t N, int32_t C, float eps) {
    rms_args a = {out, rstd, NULL, NULL, NULL, inp, w, NULL, NULL, N, C, 0, eps};
    cpu_parallel_range(ctx, CPU_FAM_NORM, cpu_threads_for(ctx, (double)N * C), N, 1,
                       forward_range, &a);
}

/* dw is summed per block of RMS_ROWS rows into a partial (C) of its own, then the partials are
 * added in block order: parallel over rows, and the same bits whatever the thread count. */
#define RMS_ROWS 32

static void backward_block(void *arg, int64_t bl, int32_t tid) {
    const rms_args *a = arg;
    const int32_t C = a->C, N = a->N;
    const float *w = a->w;
    (void)tid;
    float *pw = a->part ? a->part + (size_t)bl * C : NULL;
    if (pw)
        for (int32_t c = 0; c < C; c++) pw[c] = 0.0f;
    int32_t n1 = ((int32_t)bl + 1) * RMS_ROWS < N ? ((int32_t)bl + 1) * RMS_ROWS : N;
    for (int32_t n = (int32_t)bl * RMS_ROWS; n < n1; n++) {
        const float *x = a->inp + (size_t)n * C, *d = a->dout + (size_t)n * C;
        float r = a->rstd_in[n], dot = 0.0f;
        if (pw) /* before dinp, which may overwrite dout */
            for (int32_t c = 0; c < C; c++) pw[c] += d[c] * x[c] * r;
        if (!a->dinp) continue;
#pragma omp simd reduction(+ : dot)
        for (int32_t c = 0; c < C; c++) dot += d[c] * w[c] * x[c];
        float k = r * r * r * dot / (float)C, *dx = a->dinp + (size_t)n * C;
        for (int32_t c = 0; c < C; c++) dx[c] = r * w[c] * d[c] - x[c] * k;
    }
}

static void dw_range(void *arg, int64_t c0, int64_t c1, int32_t tid) {
    const rms_args *a = arg;
    (void)tid;
    for (int64_t c = c0; c < c1; c++) {
        float acc = 0.0f;
        for (int32_t bl = 0; bl < a->blocks; bl++) acc += a->part[(size_t)bl * a->C + c];
        a->dw[c] += acc;
    }
}

void cpu_rmsnorm_backward(void *ctx, float *dinp, float *dw, const float *dout, const float *inp,
                          const float *w, const float *rstd, int32_t N, int32_t C) {
    if ((!dinp && !dw) || N <= 0) return;
    int32_t blocks = (N + RMS_ROWS - 1) / RMS_ROWS;
    float *part = dw ? malloc((size_t)blocks * C * sizeof(float)) : NULL;
    CPU_CHECK(part != NULL || !dw, "rmsnorm_backward", "out of memory for the dw partial sums");
    int nt = cpu_threads_for(ctx, (double)N * C);
    rms_args a = {NULL, NULL, dinp, dw, part, inp, w, dout, rstd, N, C, blocks, 0.0f};
    cpu_parallel(ctx, CPU_FAM_NORM, nt, blocks, backward_block, &a);
    if (dw) cpu_parallel_range(ctx, CPU_FAM_NORM, nt, C, 64, dw_range, &a);
    free(part);
}
