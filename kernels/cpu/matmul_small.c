/*
 * matmul_small.c — the linear layer's forward for a few rows (batched decode, M <= CPU_SMALL_M):
 *   out (M,OC) = inp (M,IC) @ w (OC,IC)^T + bias (OC)
 *
 * At M = 16 a GEMM library spends its time packing the weight matrix (OpenBLAS copies all of w
 * on every call), and the product itself is bound by reading w once from memory: 2 * M FLOPs per
 * 4-byte weight. Here every weight is read exactly once and used for all M rows:
 *
 *   1. inp is transposed into xt (IC, MT, L): row i holds inp[m][i] for the MT * L lanes
 *      m = 0..MT*L-1 (L = SMALL_LANES, MT = ceil(M / L) lane tiles, rows >= M are zero);
 *      with AVX-512 in 16 x 16 tiles transposed in registers.
 *   2. Output columns are cut into blocks of OB weight rows, parallel by work stealing
 *      (cpu_parallel_steal): each thread streams a contiguous range of blocks, then takes
 *      blocks one at a time from the back of the others' ranges. For a block and
 *      a lane tile, OB vector accumulators (one per weight row, L rows of out each) take
 *      acc[j] += xt[i] * w[o0 + j][i] for i = 0..IC-1: one vector load of xt and OB scalar
 *      broadcasts of w per step, no horizontal sums. The range's next block of w is prefetched
 *      meanwhile, one cache line per prefetch (the product is bound by memory bandwidth).
 *      Measured at MiniMind2-small's decode (16 rows, its 8 layers and head, 2 threads):
 *      ranges and stealing 5.4-5.6 ms a step against 6.0-6.2 with 4 fixed chunks a thread
 *      (whose first blocks were not prefetched and whose last chunk one thread ran alone);
 *      the 1-thread step 9.9-10.2 ms.
 *   3. The accumulators are written to out's columns o0..o0+OB-1 with the bias added (with
 *      AVX-512 transposed in registers, a masked vector add and store per row of out).
 *
 * With AVX-512, fp32 weights and compute and at most 8 rows (SMALL_COLS_M) the column kernel
 * runs instead: with rows in the lanes, M <= 8 fills half of each accumulator and every weight
 * still costs one fma (8 chains in flight), so the product was bound by the fmas at ~10 GB/s
 * of weights, under one core's streaming read. The column kernel puts a block's 16 outputs
 * (weight rows) in the lanes: it loads 16 x 16 tiles of w (16 rows, 16 steps of i), transposes
 * them in registers, and for each step i takes acc[m] = fma(w[o0..o0+15][i], inp[m][i]
 * broadcast, acc[m]) for the rows m (copied with zero rows up to a multiple of 4): M / 16 fmas
 * a weight and 4 permutes per 16 weights, the same chain per output as every other path. As a
 * tile's row is loaded the line of the next block's row at the same columns is prefetched.
 * Measured at the Qwen2.5-0.5B shapes from memory (one decode step's 24 layers and head, 1
 * thread): 10.2 -> 13.5 GB/s of weights at 8 rows, 10.2 -> 14.5 at 4, ~10.3 -> 10.4-11.8 at 16.
 * Above 8 rows it no longer pays: its 16 accumulators and the 16 vectors of a transposed tile
 * take all 32 registers, and GCC spills. At MiniMind2-small's decode (8 layers and head, 16
 * rows, 1 thread, weights from L3, Emerald Rapids) a step's products took 10.5-10.7 ms on it
 * against 8.4-9.4 on the lanes kernel; at 10 and 12 rows the two are within noise (8.9-10.0 ms).
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
 *
 * bf16 compute (ctx->compute_dtype = GRPO_DTYPE_BF16, avx512_bf16): the terms go in pairs. xt
 * holds (ceil(IC/2), MT, L) 32-bit pairs of bf16 inputs (rounded to nearest even; an odd last
 * term paired with 0), a block's weight rows are pairs too (bf16 rows of even IC read in place,
 * others rounded into the thread's buffer), and each accumulator continues
 * acc = acc + x[2q+1] w[2q+1] + x[2q] w[2q] for q in order (one VDPBF16PS per pair and weight
 * row): gemm_nt.c's bf16 chain, bit for bit. Where bf16 runs on AMX tiles (ctx->bf16_amx),
 * gemm_amx.c computes these rows too: the chain of gemm_nt's AMX path, bit for bit. Where
 * gemm_nt.c runs the bf16 chain on fp32 fmas (ctx->bf16_fma: Intel cores without AMX), so do
 * these rows (isa.fma): xt holds the inputs rounded to bf16 with each pair's terms high first
 * (xt[2q] = x[2q+1], xt[2q+1] = x[2q]), each block's weight rows are widened so into the
 * thread's buffer, and the fp32 lanes kernel runs on them with MXCSR's FTZ and DAZ: each pair's
 * two fmas make VDPBF16PS's one rounded sum (the products of bf16 values are exact in fp32).
 * Measured on an Emerald Rapids (no AMX), the mm128 step with every pass in bf16 (1 thread,
 * 16 rows from the bf16 rollout copy): rollout 1.98-2.09 CPU s on VDPBF16PS's lanes kernel,
 * 1.77-1.98 so (the widening is 3 % of the step; the fp32 lanes kernel, not the bytes, bounds
 * decode's 16 rows here).
 */
#include <string.h>
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cpu/cpu_backend.h"
#include "cpu/fastmath.h"

#define SMALL_LANES 16  /* rows of out per vector accumulator: one AVX-512 register of fp32 */
#define SMALL_OB_MAX 8  /* the most weight rows per block (AVX-512) */
#define SMALL_LINE 16   /* floats per 64-byte cache line: one prefetch of the next block each */
#define SMALL_COLS 16   /* outputs per block of the column kernel (AVX-512, few rows) */
#define SMALL_COLS_M 8  /* the most rows the column kernel takes */
#define SMALL_COLS_G 4  /* its rows in multiples of this (the input copied with zero rows) */

/* xt[i][m] for i in [i0, IC) (xt (IC, MT, L) from inp (M,IC)), zero in the lanes of rows >= M.
 * Written in order; the M input rows are read in parallel, each of their cache lines used for
 * 16 steps of i. */
static void transpose_tail(float *xt, const float *inp, int32_t M, int32_t IC, int32_t MT,
                           int32_t i0) {
    const int32_t W = MT * SMALL_LANES;
    for (int32_t i = i0; i < IC; i++) {
        float *x = xt + (size_t)i * W;
        for (int32_t m = 0; m < M; m++) x[m] = inp[(size_t)m * IC + i];
        for (int32_t m = M; m < W; m++) x[m] = 0.0f;
    }
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
typedef float small_t16 __attribute__((vector_size(16 * sizeof(float)), aligned(4)));
typedef int32_t small_i16 __attribute__((vector_size(16 * sizeof(int32_t))));

/* One stage of the 16 x 16 transpose in registers: for rows r and r + d (r without bit d),
 * the d x d blocks off the diagonal of each 2d x 2d block swap places (a[j] for j with bit d
 * set takes b[j - d], b[j] for j without it takes a[j + d]). Four stages (d = 8, 4, 2, 1)
 * transpose the tile. */
#define SMALL_T_STAGE(d, ma, mb)                                                              \
    _Pragma("GCC unroll 16") for (int32_t r = 0; r < 16; r++)                                 \
        if (!(r & (d))) {                                                                     \
            small_t16 a = v[r], b = v[r + (d)];                                               \
            v[r] = __builtin_shuffle(a, b, (small_i16)ma);                                    \
            v[r + (d)] = __builtin_shuffle(a, b, (small_i16)mb);                              \
        }

/* v (16 rows of 16) transposed in place: 64 two-source permutes. */
__attribute__((target("avx512f"), always_inline))
static inline void transpose16(small_t16 *v) {
    SMALL_T_STAGE(8, ((small_i16){0, 1, 2, 3, 4, 5, 6, 7,
                                  16, 17, 18, 19, 20, 21, 22, 23}),
                  ((small_i16){8, 9, 10, 11, 12, 13, 14, 15,
                               24, 25, 26, 27, 28, 29, 30, 31}))
    SMALL_T_STAGE(4, ((small_i16){0, 1, 2, 3, 16, 17, 18, 19,
                                  8, 9, 10, 11, 24, 25, 26, 27}),
                  ((small_i16){4, 5, 6, 7, 20, 21, 22, 23,
                               12, 13, 14, 15, 28, 29, 30, 31}))
    SMALL_T_STAGE(2, ((small_i16){0, 1, 16, 17, 4, 5, 20, 21,
                                  8, 9, 24, 25, 12, 13, 28, 29}),
                  ((small_i16){2, 3, 18, 19, 6, 7, 22, 23,
                               10, 11, 26, 27, 14, 15, 30, 31}))
    SMALL_T_STAGE(1, ((small_i16){0, 16, 2, 18, 4, 20, 6, 22,
                                  8, 24, 10, 26, 12, 28, 14, 30}),
                  ((small_i16){1, 17, 3, 19, 5, 21, 7, 23,
                               9, 25, 11, 27, 13, 29, 15, 31}))
}
#undef SMALL_T_STAGE

/* The same with AVX-512: 16 x 16 tiles (16 steps of i, one lane tile of 16 rows) transposed in
 * registers, 16 vector loads and stores each instead of 256 strided scalar ones; the tail of IC
 * (not a multiple of 16) as above. Only data moves: the bits are those of the scalar loop. */
__attribute__((target("avx512f")))
static void transpose_rows_avx512(float *xt, const float *inp, int32_t M, int32_t IC,
                                  int32_t MT) {
    const int32_t W = MT * SMALL_LANES, i16 = IC & ~15;
    for (int32_t i = 0; i < i16; i += 16)
        for (int32_t t = 0; t < MT; t++) {
            small_t16 v[16];
#pragma GCC unroll 16
            for (int32_t l = 0; l < 16; l++) {
                int32_t m = t * SMALL_LANES + l;
                if (m < M)
                    memcpy(&v[l], inp + (size_t)m * IC + i, sizeof v[l]);
                else
                    v[l] = (small_t16){0};
            }
            transpose16(v);
#pragma GCC unroll 16
            for (int32_t k = 0; k < 16; k++)
                memcpy(xt + (size_t)(i + k) * W + t * SMALL_LANES, &v[k], sizeof v[k]);
        }
    transpose_tail(xt, inp, M, IC, MT, i16);
}

/* Rows of a block's outputs into out: out[m][first .. o1) = acc[m][c - o0] + bias[c] (+ 0
 * without bias) for the M rows m, acc[m] the block's outputs o0..o0+15 in lanes, out's rows OC
 * floats apart: one masked add and store a row. */
__attribute__((target("avx512f")))
static void store_rows_avx512(float *out, int32_t OC, const small_t16 *acc, int32_t M,
                              int32_t o0, int32_t first, int32_t o1, const float *bias) {
    const __mmask16 k = (__mmask16)(((1u << (o1 - o0)) - 1) & ~((1u << (first - o0)) - 1));
    const __m512 b = bias ? _mm512_maskz_loadu_ps(k, bias + o0) : _mm512_setzero_ps();
    for (int32_t m = 0; m < M; m++) {
        __m512 r;
        memcpy(&r, &acc[m], sizeof r);
        _mm512_mask_storeu_ps(out + (size_t)m * OC + o0, k, _mm512_add_ps(r, b));
    }
}

/* A block's results into out (column_block's store, AVX-512): acc (ob <= 16, L) transposed in
 * registers, then stored by store_rows_avx512 for the m1 rows: out[l][first .. o1) =
 * acc[c - o0][l] + bias[c] (+ 0 without bias), the sums of the scalar loop, bit for bit. o:
 * out's row of the tile's first lane, rows OC floats apart. */
__attribute__((target("avx512f")))
static void store_block_avx512(float *o, int32_t OC, const float *acc, int32_t ob, int32_t o0,
                               int32_t first, int32_t o1, int32_t m1, const float *bias) {
    small_t16 v[16];
#pragma GCC unroll 16
    for (int32_t j = 0; j < 16; j++) {
        if (j < ob)
            memcpy(&v[j], acc + (size_t)j * SMALL_LANES, sizeof v[j]);
        else
            v[j] = (small_t16){0};
    }
    transpose16(v);
    store_rows_avx512(o, OC, v, m1, o0, first, o1, bias);
}

/* One step of every row's chain: acc[m] = fma(w, x[m * IC], acc[m]) for m < MP (w: the 16
 * outputs' weights of the step, x: the rows' inputs of the step, rows IC floats apart). */
__attribute__((target("avx512f"), always_inline))
static inline void cols_step(__m512 *acc, const small_t16 *w, const float *x, int32_t IC,
                             const int32_t MP) {
    __m512 ws;
    memcpy(&ws, w, sizeof ws);
#pragma GCC unroll 16
    for (int32_t m = 0; m < MP; m++)
        acc[m] = _mm512_fmadd_ps(ws, _mm512_set1_ps(x[(size_t)m * IC]), acc[m]);
}

/* The column kernel's block (AVX-512, MP rows, MP a multiple of SMALL_COLS_G up to
 * SMALL_COLS_M): acc[m] (16 outputs o0..o0+15 in lanes) = the chain over i of
 * fma(wb[.][i], xs[m][i], acc[m]) from 0, wb (16, IC) with rows IC floats apart, xs (MP, IC).
 * Each 16 x 16 tile of wb (16 rows, 16 steps of i) is loaded as 16 row vectors and transposed in
 * registers (v[k] = the 16 rows' weights of step i0 + k); as a row of the tile is loaded, the
 * line of the next block's row at the same columns (next, rows IC floats apart) is prefetched
 * into L2. The tail of IC (IC % 16 terms) is a tile loaded with zeros past IC, of which only the
 * real steps are taken. */
__attribute__((target("avx512f"), always_inline))
static inline void cols_block_v(small_t16 *out, const float *xs, const float *wb,
                                const float *next, int32_t IC, const int32_t MP) {
    __m512 acc[SMALL_COLS_M];
#pragma GCC unroll 16
    for (int32_t m = 0; m < MP; m++) acc[m] = _mm512_setzero_ps();
    for (int32_t i0 = 0; i0 < IC; i0 += 16) {
        const int32_t steps = IC - i0 < 16 ? IC - i0 : 16;
        const __mmask16 k = (__mmask16)((1u << steps) - 1);
        small_t16 v[16];
#pragma GCC unroll 16
        for (int32_t r = 0; r < 16; r++) {
            __m512 t = _mm512_maskz_loadu_ps(k, wb + (size_t)r * IC + i0);
            memcpy(&v[r], &t, sizeof t);
            __builtin_prefetch(next + (size_t)r * IC + i0, 0, 2);
        }
        transpose16(v);
        if (steps == 16) { /* a whole tile: the steps unrolled */
#pragma GCC unroll 16
            for (int32_t s = 0; s < 16; s++) cols_step(acc, &v[s], xs + i0 + s, IC, MP);
        } else {
            for (int32_t s = 0; s < steps; s++) cols_step(acc, &v[s], xs + i0 + s, IC, MP);
        }
    }
#pragma GCC unroll 16
    for (int32_t m = 0; m < MP; m++) memcpy(&out[m], &acc[m], sizeof acc[m]);
}

/* One instance of cols_block_v for each multiple of SMALL_COLS_G rows. */
__attribute__((target("avx512f")))
static void cols_block_avx512(small_t16 *out, const float *xs, const float *wb,
                              const float *next, int32_t IC, int32_t MP) {
    if (MP == 4)
        cols_block_v(out, xs, wb, next, IC, 4);
    else
        cols_block_v(out, xs, wb, next, IC, SMALL_COLS_M);
}

#endif

/* xt (IC, MT, L) from inp (M,IC), zero in the lanes of rows >= M: in 16 x 16 register tiles
 * where the CPU has AVX-512 (level: cpu_simd_level), else element by element. */
static void transpose_rows(float *xt, const float *inp, int32_t M, int32_t IC, int32_t MT,
                           int32_t level) {
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
    if (level == CPU_SIMD_AVX512) {
        transpose_rows_avx512(xt, inp, M, IC, MT);
        return;
    }
#endif
    (void)level;
    transpose_tail(xt, inp, M, IC, MT, 0);
}

/* bf16 element k of a row of IC of dtype (fp32 rounded to nearest even, bf16 as it is), 0
 * past IC. */
static inline uint32_t bf16_at(const void *row, int32_t dtype, int32_t k, int32_t IC) {
    if (k >= IC) return 0;
    return dtype == GRPO_DTYPE_F32 ? grpo_bf16_from_f32(((const float *)row)[k])
                                   : ((const uint16_t *)row)[k];
}

/* Pair q of a row: elements 2q (low half) and 2q + 1 (high half). */
static inline uint32_t pair_at(const void *row, int32_t dtype, int32_t q, int32_t IC) {
    return bf16_at(row, dtype, 2 * q, IC) | bf16_at(row, dtype, 2 * q + 1, IC) << 16;
}

/* xt (ceil(IC/2), MT, L) of bf16 pairs from inp (M,IC), zero in the lanes of rows >= M. */
static void transpose_pairs(uint32_t *xt, const float *inp, int32_t M, int32_t IC, int32_t MT) {
    const int32_t W = MT * SMALL_LANES, kp = (IC + 1) / 2;
    for (int32_t q = 0; q < kp; q++) {
        uint32_t *x = xt + (size_t)q * W;
        for (int32_t m = 0; m < M; m++) x[m] = pair_at(inp + (size_t)m * IC, GRPO_DTYPE_F32, q, IC);
        for (int32_t m = M; m < W; m++) x[m] = 0;
    }
}

/* d (2 ceil(IC/2)) from a row of IC of dtype: rounded to bf16 (and widened back), each pair's
 * terms high first: d[2q] = row[2q + 1] (0 past IC), d[2q + 1] = row[2q]. fp32 rows with
 * cpu_bf16_bits (grpo_bf16_from_f32's rounding, branch-free: the loop vectorises), bf16 rows
 * as they are; an odd last term pair by pair. */
#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx512f")))
#endif
static void swap_pairs_row(float *d, const void *row, int32_t dtype, int32_t IC) {
    const int32_t kf = IC / 2; /* whole pairs */
    cpu_u32a *du = (cpu_u32a *)d;
    if (dtype == GRPO_DTYPE_F32) {
        const cpu_u32a *u = row;
#pragma omp simd
        for (int32_t q = 0; q < kf; q++) {
            du[2 * q] = cpu_bf16_bits(u[2 * q + 1]) << 16;
            du[2 * q + 1] = cpu_bf16_bits(u[2 * q]) << 16;
        }
    } else {
        const uint16_t *h = row;
#pragma omp simd
        for (int32_t q = 0; q < kf; q++) {
            du[2 * q] = (uint32_t)h[2 * q + 1] << 16;
            du[2 * q + 1] = (uint32_t)h[2 * q] << 16;
        }
    }
    if (IC % 2) {
        uint32_t p = pair_at(row, dtype, kf, IC);
        d[2 * kf] = grpo_bf16_to_f32((uint16_t)(p >> 16));
        d[2 * kf + 1] = grpo_bf16_to_f32((uint16_t)p);
    }
}

/* d (M, 2 ceil(IC/2)) from inp (M,IC): each row by swap_pairs_row. */
static void round_swap_rows(float *d, const float *inp, int32_t M, int32_t IC) {
    const int32_t k2 = (IC + 1) / 2 * 2;
    for (int32_t m = 0; m < M; m++)
        swap_pairs_row(d + (size_t)m * k2, inp + (size_t)m * IC, GRPO_DTYPE_F32, IC);
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
    const int32_t u = SMALL_LINE / ob; /* steps per cache line of the next block */
    int32_t i = 0;
    for (; i + u <= IC; i += u) {
        __builtin_prefetch(next + (size_t)i * ob, 0, 2);
#pragma GCC unroll 16
        for (int32_t s = i; s < i + u; s++) {
            small_v16 x;
            memcpy(&x, xt + (size_t)s * W, sizeof x);
#pragma GCC unroll 16
            for (int32_t j = 0; j < ob; j++) a[j] += x * wb[(size_t)j * IC + s];
        }
    }
    for (; i < IC; i++) {
        small_v16 x;
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
        if (i % (SMALL_LINE / ob) == 0) __builtin_prefetch(next + (size_t)i * ob, 0, 2);
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

/* The bf16 block, ob = 8: xt and wb hold bf16 pairs (IC here counts pairs, the rows of wb
 * are IC pairs apart); the pair of weight row j broadcast against 16 lanes of input pairs. */
__attribute__((target("avx512f,avx512bf16")))
static void small_block_bf16(float *acc, const float *xt_, const float *wb_, const float *next,
                             int32_t IC, int32_t W) {
    const cpu_u32a *xt = (const cpu_u32a *)xt_, *wb = (const cpu_u32a *)wb_;
    __m512 a[8];
#pragma GCC unroll 8
    for (int32_t j = 0; j < 8; j++) a[j] = _mm512_setzero_ps();
    for (int32_t q = 0; q < IC; q++) {
        __builtin_prefetch(next + (size_t)q * 8, 0, 2);
        __m512bh x = (__m512bh)_mm512_loadu_si512(xt + (size_t)q * W);
#pragma GCC unroll 8
        for (int32_t j = 0; j < 8; j++)
            a[j] = _mm512_dpbf16_ps(a[j], x,
                                    (__m512bh)_mm512_set1_epi32((int32_t)wb[(size_t)j * IC + q]));
    }
#pragma GCC unroll 8
    for (int32_t j = 0; j < 8; j++) _mm512_storeu_ps(acc + (size_t)j * SMALL_LANES, a[j]);
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

/* The block kernel of this CPU, at most the ISA limit (CPU_SIMD_*), or the bf16 one when cdtype
 * is GRPO_DTYPE_BF16 (refused where the CPU lacks it), its rows per block, and whether it takes
 * bf16 pairs. */
typedef struct small_isa {
    small_block_fn *block;
    int32_t ob, pairs;
    int32_t level; /* CPU_SIMD_*: for the input's transposition and the block's store */
    int32_t cols;  /* the column kernel instead (small_cols): ob = SMALL_COLS, no xt */
    int32_t fma;   /* the bf16 chain on fp32 fmas: xt and the widened rows hold each pair's
                    * terms high first, rounded to bf16 (block_fma_pairs) */
} small_isa;

static small_isa small_pick(int32_t limit, int32_t cdtype, int32_t fma) {
    int32_t level = cpu_simd_level(limit);
#if defined(__GNUC__) && defined(__x86_64__)
    if (cdtype == GRPO_DTYPE_BF16) {
        CPU_CHECK(cpu_bf16_isa(limit), "matmul_small_forward",
                  "bf16 compute without avx512_bf16");
        if (fma) return (small_isa){small_block_avx512, 8, 0, CPU_SIMD_AVX512, 0, 1};
        return (small_isa){small_block_bf16, 8, 1, CPU_SIMD_AVX512, 0, 0};
    }
    if (level == CPU_SIMD_AVX512) return (small_isa){small_block_avx512, 8, 0, level, 0, 0};
    if (level == CPU_SIMD_AVX2) return (small_isa){small_block_avx2, 4, 0, level, 0, 0};
#else
    (void)level, (void)fma;
    CPU_CHECK(cdtype == GRPO_DTYPE_F32, "matmul_small_forward", "bf16 compute without avx512_bf16");
#endif
    return (small_isa){small_block_base, 2, 0, CPU_SIMD_BASE, 0, 0};
}

/* The block kernel's steps over IC inputs: IC, or in bf16 pairs ceil(IC/2), or on fmas two
 * terms per pair. */
static int32_t small_steps(const small_isa *isa, int32_t IC) {
    return isa->pairs ? (IC + 1) / 2 : isa->fma ? (IC + 1) / 2 * 2 : IC;
}

/* Whether the column kernel computes these M rows: AVX-512, fp32 weights and compute, at most
 * SMALL_COLS_M rows (where the lanes kernel would fill at most half a lane tile). */
static int32_t small_cols(const small_isa *isa, int32_t wtype, int32_t M) {
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
    return isa->level == CPU_SIMD_AVX512 && !isa->pairs && !isa->fma &&
           wtype == GRPO_DTYPE_F32 && M <= SMALL_COLS_M;
#else
    (void)isa, (void)wtype, (void)M;
    return 0;
#endif
}

/* The first weight row of the block of ob rows whose outputs start at `first`: first itself,
 * or for the last block, when OC is not a multiple of ob, OC - ob (it overlaps its predecessor
 * so that it reads only rows of w; it stores only the columns no earlier block has). */
static int32_t block_start(int32_t first, int32_t ob, int32_t OC) {
    return OC >= ob && first + ob > OC ? OC - ob : first;
}

/* Where the ob rows of w (esz bytes an element) after the block at row o0 start, for the
 * prefetch; the block's own rows wb when none follow. */
static const float *next_block(const void *w, size_t esz, const float *wb, int32_t o0,
                               int32_t OC, int32_t IC, int32_t ob) {
    if (o0 + ob >= OC) return wb;
    const int32_t n0 = block_start(o0 + ob, ob, OC);
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

/* Block rows o0 .. o0+ob of w as bf16 pairs (ob, ceil(IC/2)): bf16 rows of even IC in place,
 * others paired (fp32 rounded to nearest even) into wl. */
static const float *block_pairs(const void *w, int32_t wtype, int32_t o0, int32_t ob, int32_t IC,
                                float *wl) {
    if (wtype == GRPO_DTYPE_BF16 && IC % 2 == 0)
        return (const float *)((const uint16_t *)w + (size_t)o0 * IC);
    const int32_t kp = (IC + 1) / 2;
    const size_t esz = grpo_dtype_size(wtype);
    uint32_t *d = (uint32_t *)wl;
    for (int32_t j = 0; j < ob; j++) {
        const void *row = (const char *)w + (size_t)(o0 + j) * IC * esz;
        for (int32_t q = 0; q < kp; q++) d[(size_t)j * kp + q] = pair_at(row, wtype, q, IC);
    }
    return wl;
}

/* n bf16 pairs p (low half element 2q) as two floats each, the high term first: d[q] = (p &
 * 0xffff0000) | p << 48 (the low half of the 64 bits is the first float). With AVX-512 eight
 * pairs a step: widened to 64-bit lanes, then one byte shuffle. */
#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx512f,avx512bw")))
#endif
static void widen_swapped_pairs(uint64_t *d, const uint32_t *src, size_t n) {
    size_t q = 0;
#if defined(__GNUC__) && defined(__x86_64__)
    /* per 64-bit lane: bytes 0-1 zero, 2-3 the high term, 4-5 zero, 6-7 the low term */
    const __m512i sh = _mm512_broadcast_i32x4(
        _mm_setr_epi8(-128, -128, 2, 3, -128, -128, 0, 1, -128, -128, 10, 11, -128, -128, 8, 9));
    for (; q + 8 <= n; q += 8) {
        __m512i p = _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)(src + q)));
        _mm512_storeu_si512(d + q, _mm512_shuffle_epi8(p, sh));
    }
#endif
    for (; q < n; q++) {
        uint64_t p = src[q];
        d[q] = (p & 0xffff0000u) | p << 48;
    }
}

/* Block rows o0 .. o0+ob of w for the bf16 chain on fp32 fmas, into wl (ob, 2 ceil(IC/2)):
 * each pair's terms high first, rounded to bf16 and widened back (exact): wl[j][2q] =
 * w[o0+j][2q+1] (0 past IC), wl[j][2q+1] = w[o0+j][2q]. bf16 rows of even IC by
 * widen_swapped_pairs, the rest (fp32 rows rounded on the fly, odd IC) by swap_pairs_row. */
static const float *block_fma_pairs(const void *w, int32_t wtype, int32_t o0, int32_t ob,
                                    int32_t IC, float *wl) {
    const int32_t kp = (IC + 1) / 2;
    if (wtype == GRPO_DTYPE_BF16 && IC % 2 == 0) {
        widen_swapped_pairs((uint64_t *)wl,
                            (const uint32_t *)((const uint16_t *)w + (size_t)o0 * IC),
                            (size_t)ob * kp);
        return wl;
    }
    const size_t esz = grpo_dtype_size(wtype);
    for (int32_t j = 0; j < ob; j++)
        swap_pairs_row(wl + (size_t)j * 2 * kp, (const char *)w + (size_t)(o0 + j) * IC * esz,
                       wtype, IC);
    return wl;
}

/* Block blk of the output columns: out[:, first .. o1) from the ob weight rows at o0
 * (block_start). fetch: whether to prefetch the next block's rows (only when the same thread
 * computes it next). */
static void column_block(const small_isa *isa, float *out, const float *xt, const void *w,
                         int32_t wtype, float *wl, const float *bias, int32_t blk, int32_t M,
                         int32_t IC, int32_t OC, int32_t MT, int fetch) {
    const int32_t ob = isa->ob, W = MT * SMALL_LANES, first = blk * ob;
    const int32_t o0 = block_start(first, ob, OC), o1 = first + ob < OC ? first + ob : OC;
    const int32_t ku = small_steps(isa, IC); /* the block kernel's steps */
    const float *wb = isa->pairs ? block_pairs(w, wtype, o0, ob, IC, wl)
                      : isa->fma ? block_fma_pairs(w, wtype, o0, ob, IC, wl)
                                 : block_rows(w, wtype, o0, ob, IC, wl);
    const float *next = fetch ? next_block(w, grpo_dtype_size(wtype), wb, o0, OC, IC, ob) : wb;
    float acc[SMALL_OB_MAX * SMALL_LANES];
    for (int32_t t = 0; t < MT; t++) {
        const unsigned mxcsr = cpu_flush_begin(isa->fma); /* not while the bias is added */
        /* the next block is fetched during the last lane tile (earlier ones reuse wb) */
        isa->block(acc, xt + (size_t)t * SMALL_LANES, wb, t + 1 < MT ? wb : next, ku, W);
        cpu_flush_end(mxcsr, isa->fma);
        int32_t m1 = M - t * SMALL_LANES < SMALL_LANES ? M - t * SMALL_LANES : SMALL_LANES;
        float *o = out + (size_t)t * SMALL_LANES * OC;
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
        if (isa->level == CPU_SIMD_AVX512) {
            store_block_avx512(o, OC, acc, ob, o0, first, o1, m1, bias);
            continue;
        }
#endif
        for (int32_t c = first; c < o1; c++) { /* column c: its lanes read in order */
            const float b = bias ? bias[c] : 0.0f, *a = acc + (size_t)(c - o0) * SMALL_LANES;
            for (int32_t l = 0; l < m1; l++) o[(size_t)l * OC + c] = a[l] + b;
        }
    }
}

/* cpu_matmul_small_forward_w's column blocks, the items of cpu_parallel_steal: a thread
 * streams its range of w and prefetches only the blocks it computes itself (a range's first as
 * it starts, then each block the next of its range; a stolen block as it is taken). wls: a
 * widened block per thread (bf16) */
typedef struct small_job {
    const small_isa *isa;
    float *out;
    const float *xt;
    const void *w;
    int32_t wtype;
    float *wls;
    const float *bias;
    int32_t ob, M, IC, OC, MT;
    int32_t MP; /* the column kernel's rows, M and the zero rows after them (xt (MP, IC)) */
} small_job;

/* Asks for the weight rows of block b (column_block's o0) to be brought into L2. */
static void prefetch_block(const small_job *j, int32_t b) {
    const int32_t o0 = block_start(b * j->ob, j->ob, j->OC);
    const size_t esz = grpo_dtype_size(j->wtype), n = (size_t)j->ob * j->IC * esz;
    const char *p = (const char *)j->w + (size_t)o0 * j->IC * esz;
    for (size_t q = 0; q < n; q += 64) __builtin_prefetch(p + q, 0, 2);
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
/* Block blk of the column kernel: out[:, first .. o1) from the 16 weight rows at o0
 * (block_start), xt the input rows (MP, IC). fetch: whether to prefetch the next block's rows. */
static void cols_column_block(const small_job *j, int32_t blk, int fetch) {
    const int32_t OC = j->OC, IC = j->IC, first = blk * SMALL_COLS;
    const int32_t o0 = block_start(first, SMALL_COLS, OC);
    const int32_t o1 = first + SMALL_COLS < OC ? first + SMALL_COLS : OC;
    const float *wb = (const float *)j->w + (size_t)o0 * IC;
    const float *next = fetch ? next_block(j->w, sizeof(float), wb, o0, OC, IC, SMALL_COLS) : wb;
    small_t16 acc[SMALL_COLS_M];
    cols_block_avx512(acc, j->xt, wb, next, IC, j->MP);
    store_rows_avx512(j->out, OC, acc, j->M, o0, first, o1, j->bias);
}
#endif

/* One range of the column blocks (cpu_parallel_steal): its blocks in order, each prefetching
 * the next, then blocks taken from the back of the others' ranges. A block nobody prefetched
 * (the range's first, a stolen one) is asked for as it starts. */
static void small_task(void *arg, cpu_steal *s, int32_t part, int32_t tid) {
    const small_job *j = arg;
    int64_t b, next, fetched = -1; /* fetched: the block the one before prefetched */
    while ((b = cpu_steal_claim(s, part, &next)) >= 0) {
        if (b != fetched) prefetch_block(j, (int32_t)b);
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
        if (j->isa->cols)
            cols_column_block(j, (int32_t)b, next >= 0);
        else
#endif
            column_block(j->isa, j->out, j->xt, j->w, j->wtype,
                         j->wls ? j->wls + (size_t)tid * j->ob * small_steps(j->isa, j->IC)
                                : NULL,
                         j->bias,
                         (int32_t)b, j->M, j->IC, j->OC, j->MT, next >= 0);
        fetched = next;
    }
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
    if (cpu_gemm_cdtype(ctx) == CPU_CDTYPE_AMX_BF16) { /* AMX tiles: gemm_amx.c's chain */
        cpu_nt p = {.out = out, .ldo = OC, .x = inp, .ldx = IC, .w = w, .wtype = wtype,
                    .ldw = IC, .bias = bias, .scale = 1.0f, .M = M, .N = OC, .K = IC};
        cpu_amx_gemm(ctx, &p, 0);
        return;
    }
    small_isa isa = small_pick(ctx->simd_limit, ctx->compute_dtype,
                               cpu_gemm_cdtype(ctx) == CPU_CDTYPE_FMA_BF16);
    isa.cols = small_cols(&isa, wtype, M);
    if (isa.cols) isa.ob = SMALL_COLS;
    const int32_t ob = isa.ob, ku = small_steps(&isa, IC);
    const int32_t MT = (M + SMALL_LANES - 1) / SMALL_LANES, W = MT * SMALL_LANES;
    const int32_t MP = (M + SMALL_COLS_G - 1) / SMALL_COLS_G * SMALL_COLS_G;
    /* scratch: xt (ku, W) (floats or bf16 pairs; the column kernel's (MP, IC): the rows as they
     * are, then zero rows), then (OC < ob only) w padded with zero rows to (ob, IC), then (fma
     * only) the rows rounded and swapped (M, ku) before their transposition */
    size_t nx = isa.cols ? (size_t)MP * IC : (size_t)ku * W, np = OC < ob ? (size_t)ob * IC : 0;
    size_t nr = isa.fma ? (size_t)M * ku : 0;
    float *xt = cpu_scratch(ctx, nx + np + nr > 0 ? nx + np + nr : 1);
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
    if (isa.cols) {
        memcpy(xt, inp, (size_t)M * IC * sizeof(float));
        memset(xt + (size_t)M * IC, 0, (size_t)(MP - M) * IC * sizeof(float));
    } else if (isa.pairs) {
        transpose_pairs((uint32_t *)xt, inp, M, IC, MT);
    } else if (isa.fma) {
        round_swap_rows(xt + nx + np, inp, M, IC);
        transpose_rows(xt, xt + nx + np, M, ku, MT, isa.level);
    } else {
        transpose_rows(xt, inp, M, IC, MT, isa.level);
    }
    /* bf16 weights or compute: a widened (or paired) block of ob rows per thread */
    int32_t nb = nt > 1 ? ctx->threads : 1; /* a pool task may run on any thread */
    float *wls = wtype == GRPO_DTYPE_F32 && !isa.pairs && !isa.fma
                     ? NULL
                     : cpu_weight_panel(ctx, (uint64_t)nb * ob * ku);
    small_job j = {&isa, out, xt, w, wtype, wls, bias, ob, M, IC, OC, MT, MP};
    cpu_parallel_steal(ctx, CPU_FAM_GEMM_FWD, nt, blocks, small_task, &j);
}
