/*
 * matmul_small.c — the linear layer's forward for a few rows (batched decode, M <= CPU_SMALL_M):
 *   out (M,OC) = inp (M,IC) @ w (OC,IC)^T + bias (OC)
 *
 * At M = 16 a GEMM library spends its time packing the weight matrix (OpenBLAS copies all of w
 * on every call), and the product itself is bound by reading w once from memory: 2 * M FLOPs per
 * 4-byte weight. Here every weight is read exactly once and used for all M rows:
 *
 *   1. inp is transposed into xt (IC, MT, L): row i holds inp[m][i] for the MT * L lanes
 *      m = 0..MT*L-1 (L = SMALL_LANES, MT = ceil(M / L) lane tiles, rows >= M are zero).
 *   2. Output columns are cut into blocks of SMALL_OB weight rows, parallel over blocks on the
 *      context's threads. For a block and a lane tile, SMALL_OB vector accumulators (one per
 *      weight row, L rows of out each) take acc[j] += xt[i] * w[o0 + j][i] for i = 0..IC-1:
 *      one vector load of xt and SMALL_OB scalar broadcasts of w per step, no horizontal sums.
 *   3. The accumulators are written to out's columns o0..o0+SMALL_OB-1 with the bias added.
 *
 * Every output is the same sum in the same order whatever the thread count (a block's result
 * does not depend on which thread runs it). The vector type is GCC's generic vector extension:
 * the code is compiled for AVX-512, AVX2 and the baseline (CPU_VECTOR_CLONES) and the compiler
 * chooses the instructions; other compilers get plain loops with the same arithmetic order.
 */
#include <string.h>

#include "cpu/cpu_backend.h"
#include "cpu/fastmath.h"

#define SMALL_LANES 16 /* rows of out per vector accumulator: one AVX-512 register of fp32 */
#define SMALL_OB 16    /* weight rows per block: 16 accumulators + 1 input vector in registers */

/* x * y + acc as one FMA where the target has it (the build's -std=c11 turns contraction off) */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define SMALL_CLONES __attribute__((optimize("fp-contract=fast"))) CPU_VECTOR_CLONES
#else
#define SMALL_CLONES CPU_VECTOR_CLONES
#endif

/* xt (IC, MT, L) from inp (M,IC), zero in the lanes of rows >= M. Written in order; the M
 * input rows are read in parallel, each of their cache lines used for 16 steps of i. */
static void transpose_rows(float *xt, const float *inp, int32_t M, int32_t IC, int32_t MT) {
    const int32_t W = MT * SMALL_LANES;
    for (int32_t i = 0; i < IC; i++) {
        float *x = xt + (size_t)i * W;
        for (int32_t m = 0; m < M; m++) x[m] = inp[(size_t)m * IC + i];
        for (int32_t m = M; m < W; m++) x[m] = 0.0f;
    }
}

#if defined(__GNUC__)
/* L floats, 4-byte aligned (xt comes from malloc'd scratch at any 16-byte offset) */
typedef float small_vec __attribute__((vector_size(SMALL_LANES * sizeof(float)), aligned(4)));

/* acc (SMALL_OB, L): acc[j][l] = sum over i of xt[i][l] * wb[j][i], wb (SMALL_OB, IC).
 * next: the block of w read after this one (SMALL_OB * IC floats), fetched into cache one line
 * per step of i so that it arrives while this block is computed. */
SMALL_CLONES
static void small_block(float *acc, const float *xt, const float *wb, const float *next,
                        int32_t IC, int32_t W) {
    small_vec a[SMALL_OB];
#pragma GCC unroll 16
    for (int32_t j = 0; j < SMALL_OB; j++) a[j] = (small_vec){0};
    for (int32_t i = 0; i < IC; i++) {
        small_vec x;
        __builtin_prefetch(next + (size_t)i * SMALL_OB, 0, 2);
        memcpy(&x, xt + (size_t)i * W, sizeof x);
#pragma GCC unroll 16
        for (int32_t j = 0; j < SMALL_OB; j++) a[j] += x * wb[(size_t)j * IC + i];
    }
    memcpy(acc, a, sizeof a);
}
#else
static void small_block(float *acc, const float *xt, const float *wb, const float *next,
                        int32_t IC, int32_t W) {
    (void)next;
    for (int32_t k = 0; k < SMALL_OB * SMALL_LANES; k++) acc[k] = 0.0f;
    for (int32_t i = 0; i < IC; i++)
        for (int32_t j = 0; j < SMALL_OB; j++)
            for (int32_t l = 0; l < SMALL_LANES; l++)
                acc[j * SMALL_LANES + l] += xt[(size_t)i * W + l] * wb[(size_t)j * IC + i];
}
#endif

/* The SMALL_OB rows of w after the block at row o0, the block's own rows when none follow. */
static const float *next_block(const float *w, const float *wb, int32_t o0, int32_t OC,
                                 int32_t IC) {
    int32_t n0 = o0 + SMALL_OB;
    if (n0 >= OC) return wb;
    if (n0 + SMALL_OB > OC) n0 = OC - SMALL_OB; /* the last block overlaps its predecessor */
    return w + (size_t)n0 * IC;
}

void cpu_matmul_small_forward(cpu_ctx *ctx, float *out, const float *inp, const float *w,
                              const float *bias, int32_t M, int32_t IC, int32_t OC) {
    CPU_CHECK(M >= 1 && M <= CPU_SMALL_M, "matmul_small_forward", "rows must lie in [1, 32]");
    if (OC <= 0) return;
    if (IC < 0) IC = 0;
    const int32_t MT = (M + SMALL_LANES - 1) / SMALL_LANES, W = MT * SMALL_LANES;
    /* scratch: xt (IC, W), then (OC < SMALL_OB only) w padded with zero rows to (SMALL_OB, IC) */
    size_t nx = (size_t)IC * W, np = OC < SMALL_OB ? (size_t)SMALL_OB * IC : 0;
    float *xt = cpu_scratch(ctx, nx + np > 0 ? nx + np : 1);
    CPU_CHECK(xt != NULL, "matmul_small_forward", "out of memory for the transposed input");
    transpose_rows(xt, inp, M, IC, MT);
    if (np) {
        memcpy(xt + nx, w, (size_t)OC * IC * sizeof(float));
        memset(xt + nx + (size_t)OC * IC, 0, (size_t)(SMALL_OB - OC) * IC * sizeof(float));
        w = xt + nx;
    }
    /* Block b covers columns [b * SMALL_OB, ...). The last one, when OC is not a multiple of
     * SMALL_OB, is computed over the SMALL_OB columns ending at OC (so it reads only rows of w)
     * and stores the columns no earlier block has. */
    const int32_t blocks = (OC + SMALL_OB - 1) / SMALL_OB;
    int nt = cpu_threads_for(ctx, (double)M * IC * OC);
    if (nt > blocks) nt = blocks;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int32_t blk = 0; blk < blocks; blk++) {
        const int32_t first = blk * SMALL_OB;
        const int32_t o0 = OC >= SMALL_OB && first + SMALL_OB > OC ? OC - SMALL_OB : first;
        const int32_t o1 = first + SMALL_OB < OC ? first + SMALL_OB : OC;
        float acc[SMALL_OB * SMALL_LANES];
        const float *wb = w + (size_t)o0 * IC;
        /* the next block's rows, or (last block, later lane tiles) this block's again */
        const float *next = next_block(w, wb, o0, OC, IC);
        for (int32_t t = 0; t < MT; t++) {
            small_block(acc, xt + (size_t)t * SMALL_LANES, wb, t + 1 < MT ? wb : next, IC, W);
            int32_t m1 = M - t * SMALL_LANES < SMALL_LANES ? M - t * SMALL_LANES : SMALL_LANES;
            for (int32_t l = 0; l < m1; l++) {
                float *o = out + (size_t)(t * SMALL_LANES + l) * OC;
                for (int32_t c = first; c < o1; c++)
                    o[c] = acc[(c - o0) * SMALL_LANES + l] + (bias ? bias[c] : 0.0f);
            }
        }
    }
}
