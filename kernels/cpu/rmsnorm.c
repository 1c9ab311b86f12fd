/*
 * rmsnorm.c — RMSNorm over the last dim, as Hugging Face Llama computes it in fp32:
 *   rstd (N) = 1 / sqrt(mean_c inp^2 + eps);  out (N,C) = (inp * rstd) * w (C)
 * backward, with g = dout * w:
 *   dinp (N,C) = rstd * g - inp * rstd^3 * mean_c(g * inp)   (written; may alias dout)
 *   dw (C)    += sum over N of dout * inp * rstd             (accumulated)
 */
#include <math.h>

#include "cpu/cpu_backend.h"

void cpu_rmsnorm_forward(void *ctx, float *out, float *rstd, const float *inp, const float *w,
                         int32_t N, int32_t C, float eps) {
    int nt = cpu_threads_for(ctx, (double)N * C);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int32_t n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *o = out + (size_t)n * C;
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int32_t c = 0; c < C; c++) ss += x[c] * x[c];
        float r = 1.0f / sqrtf(ss / (float)C + eps);
        for (int32_t c = 0; c < C; c++) o[c] = (x[c] * r) * w[c];
        if (rstd) rstd[n] = r;
    }
}

/* dw in channel slices: each thread owns a slice and walks all rows in order (deterministic). */
#define RMS_SLICE 64

static void rmsnorm_dw(void *ctx, float *dw, const float *dout, const float *inp,
                       const float *rstd, int32_t N, int32_t C) {
    int32_t slices = (C + RMS_SLICE - 1) / RMS_SLICE;
    int nt = cpu_threads_for(ctx, (double)N * C);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int32_t s = 0; s < slices; s++) {
        int32_t c0 = s * RMS_SLICE, c1 = c0 + RMS_SLICE < C ? c0 + RMS_SLICE : C;
        float acc[RMS_SLICE] = {0};
        for (int32_t n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
            for (int32_t c = c0; c < c1; c++) acc[c - c0] += d[c] * x[c] * rstd[n];
        }
        for (int32_t c = c0; c < c1; c++) dw[c] += acc[c - c0];
    }
}

void cpu_rmsnorm_backward(void *ctx, float *dinp, float *dw, const float *dout, const float *inp,
                          const float *w, const float *rstd, int32_t N, int32_t C) {
    /* dw first: dinp may overwrite dout */
    if (dw) rmsnorm_dw(ctx, dw, dout, inp, rstd, N, C);
    if (!dinp) return;
    int nt = cpu_threads_for(ctx, (double)N * C);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int32_t n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        float r = rstd[n], dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int32_t c = 0; c < C; c++) dot += d[c] * w[c] * x[c];
        float k = r * r * r * dot / (float)C;
        for (int32_t c = 0; c < C; c++) dx[c] = r * w[c] * d[c] - x[c] * k;
    }
}
