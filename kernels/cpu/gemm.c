/*
 * gemm.c — a parallel sgemm on the backend's threads (its pool, cpu_pool.h).
 *
 * OpenBLAS runs single-threaded in this backend (set when it opens): its own thread pool and
 * ours would otherwise take turns spinning on the same cores. Instead a GEMM is cut here into a
 * grid of tiles of C, one per thread, each computed by a single-threaded cblas_sgemm (a task of
 * the pool: a thread whose core is busy elsewhere leaves its tile to another).
 * The grid is chosen so that tiles are as square as possible, since every thread packs its own
 * rows of A and columns of B: the packing each thread repeats is (tm + tn) * K for tm * tn * K
 * of arithmetic (cpu_tile_grid, cpu_ctx.c, which gemm_nt.c uses too).
 *
 * With bf16 compute (ctx->compute_dtype BF16: train.compute_dtype = bf16, the policy's backward)
 * the same product is gemm_nt.c's (or gemm_amx.c's) NT product instead, its operands read in
 * place, transposed or not (cpu_nt), and rounded to bf16 as they are packed: fp32 sums of
 * bf16 products, each output one chain over k in order (thread- and batch-invariant).
 */
#include "cpu/blas.h"
#include "cpu/cpu_backend.h"

#define GEMM_ALIGN 16 /* tile edges are multiples of this (the SIMD width of AVX-512 fp32) */

typedef struct sgemm_args {
    enum CBLAS_TRANSPOSE ta, tb;
    int trans_a, trans_b;
    int32_t M, N, K, lda, ldb, ldc, tm, tn, pn;
    float alpha, beta;
    const float *A, *B;
    float *C;
} sgemm_args;

static void sgemm_tile(void *arg, int64_t tile, int32_t tid) {
    const sgemm_args *g = arg;
    (void)tid;
    int32_t m0 = (int32_t)tile / g->pn * g->tm, n0 = (int32_t)tile % g->pn * g->tn;
    if (m0 >= g->M || n0 >= g->N) return;
    int32_t m = g->M - m0 < g->tm ? g->M - m0 : g->tm, n = g->N - n0 < g->tn ? g->N - n0 : g->tn;
    /* A's tile rows start at row m0 of op(A), B's tile columns at column n0 of op(B) */
    const float *a = g->trans_a ? g->A + m0 : g->A + (size_t)m0 * g->lda;
    const float *b = g->trans_b ? g->B + (size_t)n0 * g->ldb : g->B + n0;
    cblas_sgemm(CblasRowMajor, g->ta, g->tb, m, n, g->K, g->alpha, a, g->lda, b, g->ldb, g->beta,
                g->C + (size_t)m0 * g->ldc + n0, g->ldc);
}

/* cpu_sgemm's product as the NT product of gemm_nt.c: x = op(A) (M rows of K terms: A's rows,
 * or its columns when trans_a), w = op(B)^T (N rows of K: B's rows when trans_b, else its
 * columns, i.e. B read transposed). */
static cpu_nt blas_nt(int trans_a, int trans_b, int32_t M, int32_t N, int32_t K, float alpha,
                      const float *A, int32_t lda, const float *B, int32_t ldb, float beta,
                      float *C, int32_t ldc) {
    CPU_CHECK(beta == 0.0f || (beta == 1.0f && alpha == 1.0f), "sgemm",
              "bf16 compute: beta 0, or beta 1 with alpha 1");
    return (cpu_nt){.out = C, .ldo = ldc, .x = A, .ldx = lda, .xt = trans_a != 0, .w = B,
                    .wtype = GRPO_DTYPE_F32, .ldw = ldb, .wt = !trans_b, .scale = alpha, .M = M,
                    .N = N, .K = K, .acc = beta == 1.0f};
}

void cpu_sgemm_serial(int32_t simd_limit, int32_t cdtype, int trans_a, int trans_b, int32_t M,
                      int32_t N, int32_t K, float alpha, const float *A, int32_t lda,
                      const float *B, int32_t ldb, float beta, float *C, int32_t ldc,
                      float *work) {
    if (M <= 0 || N <= 0) return;
    if (cdtype == GRPO_DTYPE_F32) {
        cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                    trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C,
                    ldc);
        return;
    }
    cpu_nt p = blas_nt(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    cpu_gemm_nt_run_serial(simd_limit, cdtype, &p, work);
}

void cpu_sgemm(cpu_ctx *ctx, int trans_a, int trans_b, int32_t M, int32_t N, int32_t K,
               float alpha, const float *A, int32_t lda, const float *B, int32_t ldb, float beta,
               float *C, int32_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (ctx->compute_dtype != GRPO_DTYPE_F32) { /* bf16: gemm_nt.c's product, scratch kept */
        cpu_nt p = blas_nt(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        cpu_gemm_nt_run(ctx, &p, 1);
        return;
    }
    enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
    int nt = cpu_threads_for(ctx, (double)M * N * (K > 0 ? K : 1) / 64.0);
    if (nt <= 1) {
        ctx->stats.inline_runs[CPU_FAM_GEMM_BLAS]++;
        cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    /* the grid of nt tiles the results were always computed on (a tile's sums are OpenBLAS's
     * for its shape: the grid stays a function of nt alone) */
    int32_t tm, tn, pn;
    cpu_tile_grid(nt, M, N, GEMM_ALIGN, GEMM_ALIGN, &tm, &tn, &pn);
    int32_t pm = nt / pn;
    sgemm_args g = {ta, tb, trans_a, trans_b, M, N, K, lda, ldb, ldc, tm, tn, pn,
                    alpha, beta, A, B, C};
    cpu_parallel(ctx, CPU_FAM_GEMM_BLAS, nt, (int64_t)pm * pn, sgemm_tile, &g);
}
