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
 *   2. Output columns are cut into blocks of OB weight rows, parallel over blocks on the
 *      context's threads. For a block and a lane tile, OB vector accumulators (one per weight
 *      row, L rows of out each) take acc[j] += xt[i] * w[o0 + j][i] for i = 0..IC-1: one
 *      vector load of xt and OB scalar broadcasts of w per step, no horizontal sums. The next
 *      block of w is prefetched meanwhile (the product is bound by memory bandwidth).
 *   3. The accumulators are written to out's columns o0..o0+OB-1 with the bias added.
 *
 * OB is 8 with AVX-512 (8 zmm accumulators + 1 input; 16 would fit the vector registers, but
 * its 16 weight-row addresses do not fit the general registers: GCC spilled them and the
 * kernel ran at 75 instead of 100 GFLOP/s with the weights in cache, 1.1-1.2x slower from
 * memory; BENCHMARKS.md), 4 with AVX2 (each accumulator two ymm), 2 otherwise (four 4-float
 * vectors each). The block kernels are
 * written with GCC's generic vector extension (the compiler picks the instructions; no
 * intrinsics), compiled for their ISA and chosen by the CPU at run time; compilers other than
 * GCC/clang get plain loops. Every output is
 * the same sum in the same order whatever the thread count: a block's result does not depend
 * on which thread runs it.
 */
#include <string.h>

#include "cpu/cpu_backend.h"
#include "cpu/fastmath.h"

#define SMALL_LANES 16  /* rows of out per vector accumulator: one AVX-512 register of fp32 */
#define SMALL_OB_MAX 8  /* the most weight rows per block (AVX-512) */

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

/* One block: acc (ob, L) with acc[j][l] = sum over i of xt[i][l] * wb[j][i], wb (ob, IC) with
 * rows IC floats apart. next: the ob * IC floats of w read after this block, prefetched into
 * L2 one cache line per step of i so that they arrive while this block is computed. */
typedef void small_block_fn(float *acc, const float *xt, const float *wb, const float *next,
                            int32_t IC, int32_t W);

#if defined(__GNUC__)
/* 16 and 8 floats, 4-byte aligned (xt comes from malloc'd scratch at any 16-byte offset) */
typedef float small_v16 __attribute__((vector_size(16 * sizeof(float)), aligned(4)));
typedef float small_v8 __attribute__((vector_size(8 * sizeof(float)), aligned(4)));

/* The block kernel for a constant ob with one 16-float vector per accumulator (AVX-512),
 * inlined into the function of its ISA below. */
CPU_FMA_CONTRACT __attribute__((always_inline))
static inline void small_block_v16(float *acc, const float *xt, const float *wb,
                                   const float *next, int32_t IC, int32_t W, const int32_t ob) {
    small_v16 a[SMALL_OB_MAX];
#pragma GCC unroll 16
    for (int32_t j = 0; j < ob; j++) a[j] = (small_v16){0};
    for (int32_t i = 0; i < IC; i++) {
        small_v16 x;
        __builtin_prefetch(next + (size_t)i * ob, 0, 2);
        memcpy(&x, xt + (size_t)i * W, sizeof x);
#pragma GCC unroll 16
        for (int32_t j = 0; j < ob; j++) a[j] += x * wb[(size_t)j * IC + i];
    }
    memcpy(acc, a, (size_t)ob * sizeof(small_v16));
}

/* The same with each accumulator as two 8-float halves (lanes 0-7, 8-15): AVX2 registers hold
 * 8 floats, and a 16-float generic vector would live on the stack there. */
CPU_FMA_CONTRACT __attribute__((always_inline))
static inline void small_block_v8(float *acc, const float *xt, const float *wb,
                                  const float *next, int32_t IC, int32_t W, const int32_t ob) {
    small_v8 lo[SMALL_OB_MAX], hi[SMALL_OB_MAX];
#pragma GCC unroll 16
    for (int32_t j = 0; j < ob; j++) lo[j] = hi[j] = (small_v8){0};
    for (int32_t i = 0; i < IC; i++) {
        small_v8 xl, xh;
        __builtin_prefetch(next + (size_t)i * ob, 0, 2);
        memcpy(&xl, xt + (size_t)i * W, sizeof xl);
        memcpy(&xh, xt + (size_t)i * W + 8, sizeof xh);
#pragma GCC unroll 16
        for (int32_t j = 0; j < ob; j++) {
            float wj = wb[(size_t)j * IC + i];
            lo[j] += xl * wj, hi[j] += xh * wj;
        }
    }
    for (int32_t j = 0; j < ob; j++) {
        memcpy(acc + (size_t)j * SMALL_LANES, &lo[j], sizeof lo[j]);
        memcpy(acc + (size_t)j * SMALL_LANES + 8, &hi[j], sizeof hi[j]);
    }
}

#if defined(__x86_64__)
CPU_FMA_CONTRACT __attribute__((target("avx512f")))
static void small_block_avx512(float *acc, const float *xt, const float *wb, const float *next,
                               int32_t IC, int32_t W) {
    small_block_v16(acc, xt, wb, next, IC, W, 8);
}

CPU_FMA_CONTRACT __attribute__((target("avx2,fma")))
static void small_block_avx2(float *acc, const float *xt, const float *wb, const float *next,
                             int32_t IC, int32_t W) {
    small_block_v8(acc, xt, wb, next, IC, W, 4);
}
#endif

/* The baseline (SSE2, or any other GCC target such as NEON): ob = 2, 4-float vectors, the
 * register width every SIMD ISA has. */
typedef float small_v4 __attribute__((vector_size(4 * sizeof(float)), aligned(4)));
CPU_FMA_CONTRACT
static void small_block_base(float *acc, const float *xt, const float *wb, const float *next,
                             int32_t IC, int32_t W) {
    small_v4 a[2][4];
    for (int32_t j = 0; j < 2; j++)
        for (int32_t q = 0; q < 4; q++) a[j][q] = (small_v4){0};
    for (int32_t i = 0; i < IC; i++) {
        small_v4 x[4];
        __builtin_prefetch(next + (size_t)i * 2, 0, 2);
        memcpy(x, xt + (size_t)i * W, sizeof x);
#pragma GCC unroll 2
        for (int32_t j = 0; j < 2; j++) {
            float wj = wb[(size_t)j * IC + i];
#pragma GCC unroll 4
            for (int32_t q = 0; q < 4; q++) a[j][q] += x[q] * wj;
        }
    }
    memcpy(acc, a, sizeof a);
}
#else
static void small_block_base(float *acc, const float *xt, const float *wb, const float *next,
                             int32_t IC, int32_t W) {
    (void)next;
    for (int32_t k = 0; k < 2 * SMALL_LANES; k++) acc[k] = 0.0f;
    for (int32_t i = 0; i < IC; i++)
        for (int32_t j = 0; j < 2; j++)
            for (int32_t l = 0; l < SMALL_LANES; l++)
                acc[j * SMALL_LANES + l] += xt[(size_t)i * W + l] * wb[(size_t)j * IC + i];
}
#endif

/* The block kernel of this CPU, at most the ISA limit (CPU_SIMD_*), and its rows per block. */
static small_block_fn *small_pick(int32_t limit, int32_t *ob) {
    int32_t level = cpu_simd_level(limit);
#if defined(__GNUC__) && defined(__x86_64__)
    if (level == CPU_SIMD_AVX512) {
        *ob = 8;
        return small_block_avx512;
    }
    if (level == CPU_SIMD_AVX2) {
        *ob = 4;
        return small_block_avx2;
    }
#else
    (void)level;
#endif
    *ob = 2;
    return small_block_base;
}

/* Where the ob rows of w (esz bytes an element) after the block at row o0 start, for the
 * prefetch; the block's own rows wb when none follow. */
static const float *next_block(const void *w, size_t esz, const float *wb, int32_t o0,
                               int32_t OC, int32_t IC, int32_t ob) {
    int32_t n0 = o0 + ob;
    if (n0 >= OC) return wb;
    if (n0 + ob > OC) n0 = OC - ob; /* the last block overlaps its predecessor */
    return (const float *)((const char *)w + (size_t)n0 * IC * esz);
}

/* Block rows o0 .. o0+ob of w as fp32: w's own rows, or (bf16) widened into wl (ob,IC), which
 * stays in L1/L2 for the block kernel: the widening reads 2 bytes a weight from memory. */
static const float *block_rows(const void *w, int32_t wtype, int32_t o0, int32_t ob, int32_t IC,
                               float *wl) {
    if (wtype == GRPO_DTYPE_F32) return (const float *)w + (size_t)o0 * IC;
    cpu_widen_rows(NULL, wl, (const uint16_t *)w + (size_t)o0 * IC, wtype, (uint64_t)ob * IC);
    return wl;
}

/* Block blk of the output columns: out[:, first .. o1) from the ob weight rows at o0 (the last
 * block, when OC is not a multiple of ob, is computed over the ob columns ending at OC so that
 * it reads only rows of w, and stores the columns no earlier block has). */
static void column_block(small_block_fn *block, float *out, const float *xt, const void *w,
                         int32_t wtype, float *wl, const float *bias, int32_t blk, int32_t ob,
                         int32_t M, int32_t IC, int32_t OC, int32_t MT) {
    const int32_t W = MT * SMALL_LANES, first = blk * ob;
    const int32_t o0 = OC >= ob && first + ob > OC ? OC - ob : first;
    const int32_t o1 = first + ob < OC ? first + ob : OC;
    const float *wb = block_rows(w, wtype, o0, ob, IC, wl);
    const float *next = next_block(w, grpo_dtype_size(wtype), wb, o0, OC, IC, ob);
    float acc[SMALL_OB_MAX * SMALL_LANES];
    for (int32_t t = 0; t < MT; t++) {
        /* the next block is fetched during the last lane tile (earlier ones reuse wb) */
        block(acc, xt + (size_t)t * SMALL_LANES, wb, t + 1 < MT ? wb : next, IC, W);
        int32_t m1 = M - t * SMALL_LANES < SMALL_LANES ? M - t * SMALL_LANES : SMALL_LANES;
        for (int32_t l = 0; l < m1; l++) {
            float *o = out + (size_t)(t * SMALL_LANES + l) * OC;
            for (int32_t c = first; c < o1; c++)
                o[c] = acc[(c - o0) * SMALL_LANES + l] + (bias ? bias[c] : 0.0f);
        }
    }
}

/* cpu_matmul_small_forward_w's column blocks, one pool task each; wls: a widened block per
 * thread (bf16) */
typedef struct small_job {
    small_block_fn *block;
    float *out;
    const float *xt;
    const void *w;
    int32_t wtype;
    float *wls;
    const float *bias;
    int32_t ob, M, IC, OC, MT;
} small_job;

static void small_task(void *arg, int64_t blk, int32_t tid) {
    const small_job *j = arg;
    column_block(j->block, j->out, j->xt, j->w, j->wtype,
                 j->wls ? j->wls + (size_t)tid * j->ob * j->IC : NULL, j->bias, (int32_t)blk,
                 j->ob, j->M, j->IC, j->OC, j->MT);
}

void cpu_matmul_small_forward(cpu_ctx *ctx, float *out, const float *inp, const float *w,
                              const float *bias, int32_t M, int32_t IC, int32_t OC) {
    cpu_matmul_small_forward_w(ctx, out, inp, w, GRPO_DTYPE_F32, bias, M, IC, OC);
}

void cpu_matmul_small_forward_w(cpu_ctx *ctx, float *out, const float *inp, const void *w,
                                int32_t wtype, const float *bias, int32_t M, int32_t IC,
                                int32_t OC) {
    CPU_CHECK(M >= 1 && M <= CPU_SMALL_M, "matmul_small_forward",
              "rows must lie in [1, CPU_SMALL_M = 48]");
    if (OC <= 0) return;
    if (IC < 0) IC = 0;
    int32_t ob;
    small_block_fn *block = small_pick(ctx->simd_limit, &ob);
    const int32_t MT = (M + SMALL_LANES - 1) / SMALL_LANES, W = MT * SMALL_LANES;
    /* scratch: xt (IC, W), then (OC < ob only) w padded with zero rows to (ob, IC) */
    size_t nx = (size_t)IC * W, np = OC < ob ? (size_t)ob * IC : 0;
    float *xt = cpu_scratch(ctx, nx + np > 0 ? nx + np : 1);
    CPU_CHECK(xt != NULL, "matmul_small_forward", "out of memory for the transposed input");
    if (np) { /* the padded copy is fp32 whatever w is */
        cpu_widen_rows(NULL, xt + nx, w, wtype, (uint64_t)OC * IC);
        memset(xt + nx + (size_t)OC * IC, 0, (size_t)(ob - OC) * IC * sizeof(float));
        w = xt + nx, wtype = GRPO_DTYPE_F32;
    }
    /* block b covers columns [b * ob, ...) (column_block) */
    const int32_t blocks = (OC + ob - 1) / ob;
    int nt = cpu_threads_for(ctx, (double)M * IC * OC);
    if (nt > blocks) nt = blocks;
    /* on one thread: split, it would add a barrier, and with a core busy elsewhere every sync
     * point waits for a time slice (measured slower so) */
    transpose_rows(xt, inp, M, IC, MT);
    /* bf16: a widened block of ob rows per thread */
    int32_t nb = nt > 1 ? ctx->threads : 1; /* a pool task may run on any thread */
    float *wls = wtype == GRPO_DTYPE_F32 ? NULL : cpu_weight_panel(ctx, (uint64_t)nb * ob * IC);
    small_job j = {block, out, xt, w, wtype, wls, bias, ob, M, IC, OC, MT};
    cpu_parallel(ctx, CPU_FAM_GEMM_FWD, nt, blocks, small_task, &j);
}
