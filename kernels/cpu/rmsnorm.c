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

/* dw is summed per block of RMS_ROWS rows into a partial (C) of its own, then the partials are
 * added in block order: parallel over rows, and the same bits whatever the thread count. */
#define RMS_ROWS 32

void cpu_rmsnorm_backward(void *ctx, float *dinp, float *dw, const float *dout, const float *inp,
                          const float *w, const float *rstd, int32_t N, int32_t C) {
    if ((!dinp && !dw) || N <= 0) return;
    int32_t blocks = (N + RMS_ROWS - 1) / RMS_ROWS;
    float *part = dw ? malloc((size_t)blocks * C * sizeof(float)) : NULL;
    CPU_CHECK(part != NULL || !dw, "rmsnorm_backward", "out of memory for the dw partial sums");
    int nt = cpu_threads_for(ctx, (double)N * C);
#pragma omp parallel num_threads(nt)
    {
#pragma omp for schedule(static)
        for (int32_t bl = 0; bl < blocks; bl++) {
            float *pw = part ? part + (size_t)bl * C : NULL;
            if (pw)
                for (int32_t c = 0; c < C; c++) pw[c] = 0.0f;
            int32_t n1 = (bl + 1) * RMS_ROWS < N ? (bl + 1) * RMS_ROWS : N;
            for (int32_t n = bl * RMS_ROWS; n < n1; n++) {
                const float *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
                float r = rstd[n], dot = 0.0f;
                if (pw) /* before dinp, which may overwrite dout */
                    for (int32_t c = 0; c < C; c++) pw[c] += d[c] * x[c] * r;
                if (!dinp) continue;
#pragma omp simd reduction(+ : dot)
                for (int32_t c = 0; c < C; c++) dot += d[c] * w[c] * x[c];
                float k = r * r * r * dot / (float)C, *dx = dinp + (size_t)n * C;
                for (int32_t c = 0; c < C; c++) dx[c] = r * w[c] * d[c] - x[c] * k;
            }
        }
        if (dw) {
#pragma omp for schedule(static)
            for (int32_t c = 0; c < C; c++) {
                float acc = 0.0f;
                for (int32_t bl = 0; bl < blocks; bl++) acc += part[(size_t)bl * C + c];
                dw[c] += acc;
            }
        }
    }
    free(part);
}
