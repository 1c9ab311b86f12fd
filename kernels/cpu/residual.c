/*
 * residual.c — elementwise helpers on flat float arrays of n elements:
 *   residual_forward: out = a + b     accumulate: y += x     scale: x *= s
 *   sumsq: sum of x^2 in double (for clip-by-global-norm), the same bits whatever the thread
 *   count: fixed blocks are summed in parallel, then the block sums in order.
 */
#include <stdlib.h>

#include "cpu/cpu_backend.h"

void cpu_residual_forward(void *ctx, float *out, const float *a, const float *b, uint64_t n) {
    int nt = cpu_threads_for(ctx, (double)n);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (uint64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void cpu_accumulate(void *ctx, float *y, const float *x, uint64_t n) {
    int nt = cpu_threads_for(ctx, (double)n);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (uint64_t i = 0; i < n; i++) y[i] += x[i];
}

void cpu_scale(void *ctx, float *x, float s, uint64_t n) {
    int nt = cpu_threads_for(ctx, (double)n);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (uint64_t i = 0; i < n; i++) x[i] *= s;
}

#define SUMSQ_BLOCK 65536u

double cpu_sumsq(void *ctx, const float *x, uint64_t n) {
    uint64_t blocks = (n + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
    if (blocks == 0) return 0.0;
    double small[64];
    double *part = blocks <= 64 ? small : malloc(blocks * sizeof(double));
    CPU_CHECK(part != NULL, "sumsq", "out of memory for the partial sums");
    int nt = cpu_threads_for(ctx, (double)n);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (uint64_t bl = 0; bl < blocks; bl++) {
        uint64_t i0 = bl * SUMSQ_BLOCK, i1 = i0 + SUMSQ_BLOCK < n ? i0 + SUMSQ_BLOCK : n;
        double acc = 0.0;
#pragma omp simd reduction(+ : acc)
        for (uint64_t i = i0; i < i1; i++) acc += (double)x[i] * (double)x[i];
        part[bl] = acc;
    }
    double total = 0.0;
    for (uint64_t bl = 0; bl < blocks; bl++) total += part[bl];
    if (part != small) free(part);
    return total;
}
