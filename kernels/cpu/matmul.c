/*
 * matmul.c — linear layer in PyTorch's layout. The forward is batch-invariant: at most
 * CPU_SMALL_M rows go to matmul_small.c (each weight read once), more to gemm_nt.c, and both
 * make every output the same chain of sums (a row's outputs do not depend on the batch).
 *   forward:  out (N,OC) = inp (N,IC) @ w (OC,IC)^T + bias (OC)
 *   backward: dinp (N,IC) = dout (N,OC) @ w (OC,IC)          (written)
 *             dw (OC,IC) += dout (N,OC)^T @ inp (N,IC)        (accumulated)
 *             dbias (OC) += sum over N of dout (N,OC)         (accumulated)
 * The backward GEMMs run on the context's threads through cpu_sgemm (gemm.c): OpenBLAS in fp32;
 * with bf16 compute (train.compute_dtype = bf16) gemm_nt.c's / gemm_amx.c's bf16 products with
 * fp32 sums, dout, w and inp read in place and rounded as packed (dw's chain over N starts from
 * dw's value: the accumulation is part of it).
 */
#include "cpu/cpu_backend.h"

void cpu_matmul_forward(void *ctx, float *out, const float *inp, const float *w,
                        const float *bias, int32_t N, int32_t IC, int32_t OC) {
    if (N <= 0 || OC <= 0) return;
    if (N <= CPU_SMALL_M) {
        cpu_matmul_small_forward(ctx, out, inp, w, bias, N, IC, OC);
        return;
    }
    cpu_gemm_nt(ctx, out, OC, inp, w, GRPO_DTYPE_F32, bias, 1.0f, N, IC, OC);
}

/* Column sums of dout, split into column slices so that each thread owns its outputs. */
#define BIAS_SLICE 16 /* one cache line of each row */

typedef struct bias_args {
    float *dbias;
    const float *dout;
    int32_t N, OC;
} bias_args;

static void bias_task(void *arg, int64_t s, int32_t tid) {
    const bias_args *a = arg;
    (void)tid;
    int32_t j0 = (int32_t)s * BIAS_SLICE, j1 = j0 + BIAS_SLICE < a->OC ? j0 + BIAS_SLICE : a->OC;
    float acc[BIAS_SLICE] = {0};
    for (int32_t n = 0; n < a->N; n++) {
        const float *d = a->dout + (size_t)n * a->OC;
        for (int32_t j = j0; j < j1; j++) acc[j - j0] += d[j];
    }
    for (int32_t j = j0; j < j1; j++) a->dbias[j] += acc[j - j0];
}

static void bias_backward(void *ctx, float *dbias, const float *dout, int32_t N, int32_t OC) {
    int32_t slices = (OC + BIAS_SLICE - 1) / BIAS_SLICE;
    bias_args a = {dbias, dout, N, OC};
    cpu_parallel(ctx, CPU_FAM_ELEMENT, cpu_threads_for(ctx, (double)N * OC), slices, bias_task,
                 &a);
}

void cpu_matmul_backward(void *ctx, float *dinp, float *dw, float *dbias, const float *dout,
                         const float *inp, const float *w, int32_t N, int32_t IC, int32_t OC) {
    if (N <= 0 || IC <= 0 || OC <= 0) {
        if (dinp && N > 0 && IC > 0)
            for (int64_t i = 0; i < (int64_t)N * IC; i++) dinp[i] = 0.0f;
        return;
    }
    if (dinp)
        cpu_sgemm(ctx, 0, 0, N, IC, OC, 1.0f, dout, OC, w, IC, 0.0f, dinp, IC);
    if (dw)
        cpu_sgemm(ctx, 1, 0, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dw, IC);
    if (dbias) bias_backward(ctx, dbias, dout, N, OC);
}
