/*
 * gemm.c — a parallel sgemm on the backend's threads (its pool, cpu_pool.h).
 *
 * OpenBLAS runs single-threaded in this backend (set when it opens): its own thread pool and
 * ours would otherwise take turns spinning on the same cores. Instead a GEMM is cut here into a
 * grid of tiles of C, one per thread, each computed by a single-threaded cblas_sgemm (a task of
 * the pool: a thread whose core is busy elsewhere leaves its tile to another).
 * The grid is chosen so that tiles are as square as possible, since every thread packs its own
 * rows of A and columns of B: the packing each thread repeats is (tm + tn) * K for tm * tn * K
 * of arithmetic (cpu_tile_grid, which gemm_nt.c uses too).
 */
#include "cpu/blas.h"
#include "cpu/cpu_backend.h"

#define GEMM_ALIGN 16 /* tile edges are multiples of this (the SIMD width of AVX-512 fp32) */

static int32_t round_up(int32_t x, int32_t a) { return (x + a - 1) / a * a; }

void cpu_tile_grid(int nt, int32_t M, int32_t N, int32_t am, int32_t an, int32_t *tm,
                   int32_t *tn, int32_t *pn) {
    int32_t best = -1;
    for (int32_t p = 1; p <= nt; p++) { /* p tiles down, nt / p across */
        if (nt % p) continue;
        int32_t m = round_up((M + p - 1) / p, am), n = round_up((N + nt / p - 1) / (nt / p), an);
        if (best < 0 || m + n < best) best = m + n, *tm = m, *tn = n, *pn = nt / p;
    }
}

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

void cpu_sgemm(cpu_ctx *ctx, int trans_a, int trans_b, int32_t M, int32_t N, int32_t K,
               float alpha, const float *A, int32_t lda, const float *B, int32_t ldb, float beta,
               float *C, int32_t ldc) {
    if (M <= 0 || N <= 0) return;
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
