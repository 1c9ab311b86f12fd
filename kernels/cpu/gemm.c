/*
 * gemm.c — a parallel sgemm on the backend's OpenMP threads.
 *
 * OpenBLAS runs single-threaded in this backend (set when it opens): its own thread pool and
 * OpenMP's would otherwise take turns spinning on the same cores. Instead a GEMM is cut here
 * into a grid of tiles of C, one per thread, each computed by a single-threaded cblas_sgemm.
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

void cpu_sgemm(cpu_ctx *ctx, int trans_a, int trans_b, int32_t M, int32_t N, int32_t K,
               float alpha, const float *A, int32_t lda, const float *B, int32_t ldb, float beta,
               float *C, int32_t ldc) {
    if (M <= 0 || N <= 0) return;
    enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
    int nt = cpu_threads_for(ctx, (double)M * N * (K > 0 ? K : 1) / 64.0);
    if (nt <= 1) {
        cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    int32_t tm, tn, pn;
    cpu_tile_grid(nt, M, N, GEMM_ALIGN, GEMM_ALIGN, &tm, &tn, &pn);
    int32_t pm = nt / pn;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int32_t tile = 0; tile < pm * pn; tile++) {
        int32_t m0 = tile / pn * tm, n0 = tile % pn * tn;
        if (m0 >= M || n0 >= N) continue;
        int32_t m = M - m0 < tm ? M - m0 : tm, n = N - n0 < tn ? N - n0 : tn;
        /* A's tile rows start at row m0 of op(A), B's tile columns at column n0 of op(B) */
        const float *a = trans_a ? A + m0 : A + (size_t)m0 * lda;
        const float *b = trans_b ? B + (size_t)n0 * ldb : B + n0;
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, K, alpha, a, lda, b, ldb, beta,
                    C + (size_t)m0 * ldc + n0, ldc);
    }
}
