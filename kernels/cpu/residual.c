/*
 * residual.c — elementwise helpers on flat float arrays of n elements:
 *   residual_forward: out = a + b     accumulate: y += x     scale: x *= s
 *   sumsq: sum of x^2 in double (for clip-by-global-norm), the same bits whatever the thread
 *   count: fixed blocks are summed in parallel, then the block sums in order.
 */
#include <stdlib.h>

#include "cpu/cpu_backend.h"

#define ELEM_GRAIN 16384 /* elements per task at least */

typedef struct elem_args {
    float *y;
    const float *a, *b;
    float s;
} elem_args;

static void add_range(void *arg, int64_t i0, int64_t i1, int32_t tid) {
    const elem_args *e = arg;
    (void)tid;
    for (int64_t i = i0; i < i1; i++) e->y[i] = e->a[i] + e->b[i];
}

static void acc_range(void *arg, int64_t i0, int64_t i1, int32_t tid) {
    const elem_args *e = arg;
    (void)tid;
    for (int64_t i = i0; i < i1; i++) e->y[i] += e->a[i];
}

static void scale_range(void *arg, int64_t i0, int64_t i1, int32_t tid) {
    const elem_args *e = arg;
    (void)tid;
    for (int64_t i = i0; i < i1; i++) e->y[i] *= e->s;
}

void cpu_residual_forward(void *ctx, float *out, const float *a, const float *b, uint64_t n) {
    elem_args e = {out, a, b, 0.0f};
    cpu_parallel_range(ctx, CPU_FAM_ELEMENT, cpu_threads_for(ctx, (double)n), (int64_t)n,
                       ELEM_GRAIN, add_range, &e);
}

void cpu_accumulate(void *ctx, float *y, const float *x, uint64_t n) {
    elem_args e = {y, x, NULL, 0.0f};
    cpu_parallel_range(ctx, CPU_FAM_ELEMENT, cpu_threads_for(ctx, (double)n), (int64_t)n,
                       ELEM_GRAIN, acc_range, &e);
}

void cpu_scale(void *ctx, float *x, float s, uint64_t n) {
    elem_args e = {x, NULL, NULL, s};
    cpu_parallel_range(ctx, CPU_FAM_ELEMENT, cpu_threads_for(ctx, (double)n), (int64_t)n,
                       ELEM_GRAIN, scale_range, &e);
}

#define SUMSQ_BLOCK 65536u

typedef struct sumsq_args {
    const float *x;
    uint64_t n;
    double *part;
} sumsq_args;

static void sumsq_block(void *arg, int64_t bl, int32_t tid) {
    const sumsq_args *a = arg;
    (void)tid;
    uint64_t i0 = (uint64_t)bl * SUMSQ_BLOCK;
    uint64_t i1 = i0 + SUMSQ_BLOCK < a->n ? i0 + SUMSQ_BLOCK : a->n;
    double acc = 0.0;
#pragma omp simd reduction(+ : acc)
    for (uint64_t i = i0; i < i1; i++) acc += (double)a->x[i] * (double)a->x[i];
    a->part[bl] = acc;
}

double cpu_sumsq(void *ctx, const float *x, uint64_t n) {
    uint64_t blocks = (n + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
    if (blocks == 0) return 0.0;
    double small[64];
    double *part = blocks <= 64 ? small : malloc(blocks * sizeof(double));
    CPU_CHECK(part != NULL, "sumsq", "out of memory for the partial sums");
    sumsq_args a = {x, n, part};
    cpu_parallel(ctx, CPU_FAM_ELEMENT, cpu_threads_for(ctx, (double)n), (int64_t)blocks,
                 sumsq_block, &a);
    double total = 0.0;
    for (uint64_t bl = 0; bl < blocks; bl++) total += part[bl];
    if (part != small) free(part);
    return total;
}
