/*
 * gemm_nt.c — the forward product of the linear layer and of the LM head, batch-invariant:
 *   out (N,OC) = scale * (inp (N,IC) @ w (OC,IC)^T + bias (OC))     (bias NULL: + 0)
 *
 * Every output is ONE chain acc = x[i] * w[i] + acc over i = 0..IC-1 from acc = 0 (an fma a
 * term with AVX-512 or AVX2, a product then a sum on the baseline), then scale * (acc + bias):
 * the sum cpu_matmul_small_forward makes (matmul_small.c, same ISA rule cpu_simd_level). So a
 * row's outputs are the same bits whatever N is, which other rows share the batch, how many
 * threads run it, and whether N takes the small path or this one (issue 32).
 *
 * The layout is BLIS's, with the outputs in vector lanes and the inputs broadcast:
 *   for each block of NC outputs (columns of out, rows of w)
 *     for each block of KC terms of the reduction (i), in order
 *       pack w's rows into wp: panels of NR outputs, wp[k][j] (w widened to fp32 here, so
 *       bf16 weights take the same kernel)
 *       for each block of MC rows
 *         pack the block's rows of inp into xp: panels of MR rows, xp[k][r] (in L2: packing
 *         all rows at once wrote megabytes that left L2 before the kernel read them back)
 *         for each panel of NR outputs (KC x NR in L1), for each panel of MR rows: the register
 *         tile (gemm_nt_kernel.h) continues the MR x NR chains in out with the KC terms
 *         after the last KC block: out = scale * (out + bias) on the block (still in cache)
 * The partial chains live in out as fp32 between KC blocks, which continues them exactly. While
 * a tile computes, the next tile's rows of out and a slice of the next w panel are prefetched.
 * The block sizes do not change any sum (each output's chain is the same in any blocking).
 * Register tiles: 12 rows x 32 outputs on AVX-512 (24 zmm accumulators), 6 x 16 on AVX2 (12 ymm),
 * 6 x 8 on the baseline (12 4-float vectors). Tails of rows and outputs are computed on zero
 * padding in a tile-sized buffer and only their real part stored.
 * Threads take tiles of a grid over out (cpu_tile_grid), each running the serial algorithm with
 * its own packing buffers: a tile's outputs do not depend on the grid.
 *
 * bf16 compute (cdtype GRPO_DTYPE_BF16, CPUs with avx512_bf16: cpu_bf16_compute): the same
 * blocking with the terms taken in pairs. Both packed blocks hold bf16 pairs (inputs and fp32
 * weights rounded to nearest even as packed, bf16 weights as they are; an odd last term paired
 * with 0), xp[q][r] and wp[q][j] one 32-bit pair each, and the register tile (12 x 32, 24 zmm)
 * continues acc = acc + x[2q+1] w[2q+1] + x[2q] w[2q] (one VDPBF16PS a pair; fp32 accumulation,
 * the products exact) for q in order. KC blocks are even, so a pair never straddles two of
 * them: each output is again one chain whatever the blocking, the batch or the threads, and the
 * chain matmul_small.c's bf16 block makes.
 * Where the context runs bf16 on AMX tiles (ctx->bf16_amx, cdtype CPU_CDTYPE_AMX_BF16 in the
 * serial form) the product is gemm_amx.c's instead: its own chain, in the decode path too.
 * On Intel cores without AMX (ctx->bf16_fma, cdtype CPU_CDTYPE_FMA_BF16) VDPBF16PS runs at half
 * the rate of the fp32 fmas (bench/bench_gemm: 76 against 151 GFLOP/s at the MiniMind2-small
 * shapes, a Xeon of family 6 model 207), so the same chain runs on the fp32 tile: the operands
 * are rounded and widened as packed, each pair's high term first (pack_fma_pairs), the products
 * of two bf16 values are exact in fp32, and MXCSR flushes denormals as VDPBF16PS does. The
 * bits are VDPBF16PS's (test_gemm_bf16), and matmul_small.c's decode rows make the same
 * chain on the same fmas.
 *
 * The backward's products in bf16 (cpu_sgemm's bf16 form, gemm.c: dX = dY W, dW += dY^T X, the
 * head's) are this product too (cpu_nt): an operand stored transposed, (K, rows), is packed by
 * pack_pairs_t into the same panels (two rows of it rounded and interleaved per pair), and an
 * accumulating product (acc) starts each chain from out's value instead of 0, with no epilogue.
 * The chains keep every property above (one per output, k in order, any grid of threads).
 */
#include <string.h>
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cpu/cpu_backend.h"
#include "cpu/fastmath.h"

/* Block sizes, measured at the MiniMind2-small shapes (bench/bench_gemm.c, 1 thread, AVX-512).
 * KC: every KC block is one more pass over the tile's out (read and written). When out is small
 * (the head's 256 x 512 blocks) it stays in L2 and KC 256 keeps a w panel (32 KiB) in L1: KC 512
 * was 5-10 % slower there. When out is larger than L2 (N x 1408, N x 6400) the passes cost
 * more than L1 misses on w: KC 128 / 256 / 512 gave 0.53 / 0.74 / ~0.8 of OpenBLAS on
 * (3008,512)x(6400,512)^T. So KC_WIDE for tiles of more than WIDE_OUT outputs and more than
 * WIDE_COLS columns (at 512 columns, (3008,512)x(512,512)^T, KC 256 was a few % faster). */
#define GEMM_KC 256        /* reduction terms per block, out's tile in L2 */
#define GEMM_KC_WIDE 512   /* the same for a tile of out larger than GEMM_WIDE_OUT floats */
#define GEMM_WIDE_OUT (1 << 18) /* 1 MiB of fp32: half of L2 */
#define GEMM_WIDE_COLS 1024     /* and more columns than this */
#define GEMM_MC 240  /* rows per block, a multiple of every MR: their xp (<= 480 KiB) in L2 */
#define GEMM_NC 2048 /* outputs per packed block, a multiple of every NR: wp (KC x NC, <= 4 MiB) */
#define GEMM_MR_MAX 12
#define GEMM_NR_MAX 32

/* the register tile: c (MR,NR) = (first ? 0 : c) + xp (ku,MR)^T @ wp (ku,NR) over ku steps
 * (a term each in fp32, a pair of terms each in bf16) */
typedef void gemm_kern_fn(int32_t ku, const float *xp, const float *wp, float *c, int32_t ldc,
                          int first);
/* p = rows r0..r0+rows of m (row stride ld elements of dtype), columns k0..k0+kc, packed in
 * panels of width rows (the last padded with 0) as the kernel reads them */
typedef void gemm_pack_fn(float *p, const void *m, int32_t dtype, int32_t ld, int32_t r0,
                          int32_t rows, int32_t width, int32_t k0, int32_t kc);

#if defined(__GNUC__)
typedef float gemm_v16 __attribute__((vector_size(16 * sizeof(float)), aligned(4)));
typedef float gemm_v8 __attribute__((vector_size(8 * sizeof(float)), aligned(4)));
typedef float gemm_v4 __attribute__((vector_size(4 * sizeof(float)), aligned(4)));

#if defined(__x86_64__)
#define GK_NAME gemm_kern_avx512
#define GK_ATTR CPU_FMA_CONTRACT __attribute__((target("avx512f")))
#define GK_VEC gemm_v16
#define GK_VL 16
#define GK_MR 12
#define GK_NV 2
#include "cpu/gemm_nt_kernel.h"

#define GK_NAME gemm_kern_avx2
#define GK_ATTR CPU_FMA_CONTRACT __attribute__((target("avx2,fma")))
#define GK_VEC gemm_v8
#define GK_VL 8
#define GK_MR 6
#define GK_NV 2
#include "cpu/gemm_nt_kernel.h"

/* The bf16 tile, 12 rows x 32 outputs: xp (ku,12) and wp (ku,32) of bf16 pairs (32 bits each);
 * at every step one pair of x broadcast against two vectors of 16 weight pairs. */
__attribute__((target("avx512f,avx512bf16")))
static void gemm_kern_bf16(int32_t ku, const float *xp_, const float *wp_, float *c, int32_t ldc,
                           int first) {
    const cpu_u32a *xp = (const cpu_u32a *)xp_, *wp = (const cpu_u32a *)wp_;
    __m512 acc[12][2];
#pragma GCC unroll 12
    for (int32_t r = 0; r < 12; r++)
        for (int32_t v = 0; v < 2; v++)
            acc[r][v] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(c + (size_t)r * ldc + 16 * v);
    for (int32_t q = 0; q < ku; q++) {
        __m512bh w0 = (__m512bh)_mm512_loadu_si512(wp), w1 = (__m512bh)_mm512_loadu_si512(wp + 16);
#pragma GCC unroll 12
        for (int32_t r = 0; r < 12; r++) {
            __m512bh x = (__m512bh)_mm512_set1_epi32((int32_t)xp[r]);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], x, w0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], x, w1);
        }
        xp += 12, wp += 32;
    }
#pragma GCC unroll 12
    for (int32_t r = 0; r < 12; r++)
        for (int32_t v = 0; v < 2; v++) _mm512_storeu_ps(c + (size_t)r * ldc + 16 * v, acc[r][v]);
}
#endif

/* the baseline: the build's target (SSE2 on x86-64: no fma, so a product then a sum) */
#define GK_NAME gemm_kern_base
#define GK_ATTR CPU_FMA_CONTRACT
#define GK_VEC gemm_v4
#define GK_VL 4
#define GK_MR 6
#define GK_NV 2
#include "cpu/gemm_nt_kernel.h"
#else
#define GK_NAME gemm_kern_base
#define GK_ATTR
#define GK_VEC float
#define GK_VL 1
#define GK_MR 6
#define GK_NV 8
#include "cpu/gemm_nt_kernel.h"
#endif

typedef struct gemm_isa {
    gemm_kern_fn *kern;
    gemm_pack_fn *pack;   /* an operand stored by rows */
    gemm_pack_fn *pack_t; /* one stored transposed (bf16 only) */
    int32_t mr, nr;       /* rows and outputs of its tile */
    int32_t kstep;        /* terms of the reduction per kernel step: 1 (fp32), 2 (bf16 pairs) */
    int32_t pad2;         /* 1: kc padded to even (bf16 on fp32 fmas: a pair is two steps) */
} gemm_isa;

static gemm_pack_fn pack, pack_pairs, pack_pairs_t, pack_fma_pairs, pack_fma_pairs_t;

/* The register tile of the ISA cpu_simd_level picks under limit (matmul_small.c's rule), or
 * the bf16 tile when cdtype is GRPO_DTYPE_BF16 (refused where the CPU lacks it). */
static gemm_isa gemm_pick(int32_t limit, int32_t cdtype) {
    int32_t level = cpu_simd_level(limit);
#if defined(__GNUC__) && defined(__x86_64__)
    if (cdtype == GRPO_DTYPE_BF16 || cdtype == CPU_CDTYPE_FMA_BF16) {
        CPU_CHECK(cpu_bf16_isa(limit), "gemm_nt", "bf16 compute without avx512_bf16");
        if (cdtype == CPU_CDTYPE_FMA_BF16) /* the fp32 tile on pairs widened, hi term first */
            return (gemm_isa){gemm_kern_avx512, pack_fma_pairs, pack_fma_pairs_t, 12, 32, 1, 1};
        return (gemm_isa){gemm_kern_bf16, pack_pairs, pack_pairs_t, 12, 32, 2, 0};
    }
    if (level == CPU_SIMD_AVX512) return (gemm_isa){gemm_kern_avx512, pack, NULL, 12, 32, 1, 0};
    if (level == CPU_SIMD_AVX2) return (gemm_isa){gemm_kern_avx2, pack, NULL, 6, 16, 1, 0};
#else
    (void)level;
    CPU_CHECK(cdtype == GRPO_DTYPE_F32, "gemm_nt", "bf16 compute without avx512_bf16");
#endif
    return (gemm_isa){gemm_kern_base, pack, NULL, 6, 8, 1, 0};
}

/* Kernel steps of kc terms. */
static int32_t ksteps(const gemm_isa *isa, int32_t kc) {
    return isa->pad2 ? (kc + 1) / 2 * 2 : (kc + isa->kstep - 1) / isa->kstep;
}

/* One product (cpu_backend.h): what every tile of it reads and writes. */
typedef cpu_nt gemm_job;

static int32_t imin(int32_t a, int32_t b) { return a < b ? a : b; }
static int32_t round_up(int32_t x, int32_t a) { return (x + a - 1) / a * a; }

/* ---- packing: panels of rows transposed, d[k][j] = row j's element k ---------------------- */

/* element k of a row of dtype (fp32, or bf16 widened exactly) as fp32; load4: 4 from k */
static inline float elem(const void *row, int32_t dtype, int32_t k) {
    return dtype == GRPO_DTYPE_F32 ? ((const float *)row)[k]
                                   : grpo_bf16_to_f32(((const uint16_t *)row)[k]);
}

#if defined(__GNUC__) && !defined(__clang__)
#define GEMM_PACK_VEC 1
typedef int32_t gemm_i4 __attribute__((vector_size(16)));
typedef uint16_t gemm_h4 __attribute__((vector_size(8), aligned(2)));
typedef uint32_t gemm_u4 __attribute__((vector_size(16)));

static inline gemm_v4 load4(const void *row, int32_t dtype, int32_t k) {
    gemm_v4 v;
    if (dtype == GRPO_DTYPE_F32) {
        memcpy(&v, (const float *)row + k, sizeof v);
    } else {
        gemm_h4 h;
        memcpy(&h, (const uint16_t *)row + k, sizeof h);
        gemm_u4 u = __builtin_convertvector(h, gemm_u4) << 16;
        memcpy(&v, &u, sizeof v); /* the bits of the floats */
    }
    return v;
}

/* d[q * width + 0..3] = element k + q of the rows a, b, c, e (4 rows of 4 transposed in
 * registers: two rounds of interleaving, unpck/shufps) */
static inline void transpose4_store(float *d, int32_t width, gemm_v4 a, gemm_v4 b, gemm_v4 c,
                                    gemm_v4 e) {
    gemm_v4 t0 = __builtin_shuffle(a, b, (gemm_i4){0, 4, 1, 5});
    gemm_v4 t1 = __builtin_shuffle(a, b, (gemm_i4){2, 6, 3, 7});
    gemm_v4 t2 = __builtin_shuffle(c, e, (gemm_i4){0, 4, 1, 5});
    gemm_v4 t3 = __builtin_shuffle(c, e, (gemm_i4){2, 6, 3, 7});
    gemm_v4 o0 = __builtin_shuffle(t0, t2, (gemm_i4){0, 1, 4, 5});
    gemm_v4 o1 = __builtin_shuffle(t0, t2, (gemm_i4){2, 3, 6, 7});
    gemm_v4 o2 = __builtin_shuffle(t1, t3, (gemm_i4){0, 1, 4, 5});
    gemm_v4 o3 = __builtin_shuffle(t1, t3, (gemm_i4){2, 3, 6, 7});
    memcpy(d, &o0, sizeof o0);
    memcpy(d + width, &o1, sizeof o1);
    memcpy(d + 2 * width, &o2, sizeof o2);
    memcpy(d + 3 * width, &o3, sizeof o3);
}
#endif

/* Into L2 ahead of use: the line at element k of each of the nn rows nxt[j] (the next panel's
 * rows; nn = 0: none). A panel's rows are short runs (kc elements each) a row apart, which the
 * hardware prefetcher does not follow: without this the pack waited on every row's first lines
 * (17-22 % of a linear layer's time in a step, its operands coming from L3 or memory). */
__attribute__((always_inline))
static inline void prefetch_rows(const void *const *nxt, int32_t nn, int32_t dtype, int32_t k) {
#if defined(__GNUC__)
    const size_t esz = dtype == GRPO_DTYPE_F32 ? sizeof(float) : sizeof(uint16_t);
    for (int32_t j = 0; j < nn; j++) __builtin_prefetch((const char *)nxt[j] + k * esz, 0, 2);
#else
    (void)nxt, (void)nn, (void)dtype, (void)k;
#endif
}

/* d (kc, width) = the n <= width rows src[j] (kc elements of dtype each) transposed, as fp32;
 * columns n..width of d are 0. Written in order of 16-element chunks of k (a cache line of each
 * row at a time), within one 4 k at a time, each 4 x 4 block of rows and k transposed in
 * registers; meanwhile the same chunk of the next panel's nn rows nxt[j] is prefetched. Only
 * data moves: the order changes no value. Inlined with a constant dtype. */
__attribute__((always_inline))
static inline void pack_panel_t(float *d, const void *const *src, int32_t dtype, int32_t n,
                                int32_t width, int32_t kc, const void *const *nxt, int32_t nn) {
    int32_t k = 0, n4 = 0;
#if defined(GEMM_PACK_VEC)
    n4 = n & ~3;
    int32_t k4 = kc & ~3;
    for (int32_t kk = 0; kk < k4; kk += 16) {
        const int32_t ke = imin(kk + 16, k4);
        prefetch_rows(nxt, nn, dtype, kk);
        for (int32_t j = 0; j < n4; j += 4) {
            const void *a = src[j], *b = src[j + 1], *c = src[j + 2], *e = src[j + 3];
            for (k = kk; k < ke; k += 4)
                transpose4_store(d + (size_t)k * width + j, width, load4(a, dtype, k),
                                 load4(b, dtype, k), load4(c, dtype, k), load4(e, dtype, k));
        }
    }
    for (k = 0; k < k4; k++)
        for (int32_t j = n4; j < n; j++) d[(size_t)k * width + j] = elem(src[j], dtype, k);
    k = k4;
#else
    for (int32_t kk = 0; kk < kc; kk += 16) prefetch_rows(nxt, nn, dtype, kk);
#endif
    for (; k < kc; k++)
        for (int32_t j = 0; j < n; j++) d[(size_t)k * width + j] = elem(src[j], dtype, k);
    (void)n4;
    if (n < width)
        for (k = 0; k < kc; k++)
            for (int32_t j = n; j < width; j++) d[(size_t)k * width + j] = 0.0f;
}

static void pack_panel(float *d, const void *const *src, int32_t dtype, int32_t n,
                       int32_t width, int32_t kc, const void *const *nxt, int32_t nn) {
    if (dtype == GRPO_DTYPE_F32)
        pack_panel_t(d, src, GRPO_DTYPE_F32, n, width, kc, nxt, nn);
    else
        pack_panel_t(d, src, GRPO_DTYPE_BF16, n, width, kc, nxt, nn);
}

/* The n rows of panel q (rows r0 + q .. of m, from column k0) into src. */
static int32_t panel_rows(const void **src, const void *m, size_t esz, int32_t ld, int32_t r0,
                          int32_t rows, int32_t width, int32_t q, int32_t k0) {
    int32_t n = q < rows ? imin(width, rows - q) : 0;
    for (int32_t j = 0; j < n; j++)
        src[j] = (const char *)m + ((size_t)(r0 + q + j) * ld + k0) * esz;
    return n;
}

/* p (ceil(rows/width), kc, width) = rows r0..r0+rows of m (row stride ld elements of dtype),
 * columns k0..k0+kc, in panels of width rows (the last one padded with 0): xp and wp. Each
 * panel's packing prefetches the next one's rows. */
static void pack(float *p, const void *m, int32_t dtype, int32_t ld, int32_t r0, int32_t rows,
                 int32_t width, int32_t k0, int32_t kc) {
    const size_t esz = grpo_dtype_size(dtype);
    const void *src[GEMM_NR_MAX], *nxt[GEMM_NR_MAX];
    int32_t n = panel_rows(src, m, esz, ld, r0, rows, width, 0, k0);
    for (int32_t q = 0; q < rows; q += width) {
        int32_t nn = panel_rows(nxt, m, esz, ld, r0, rows, width, q + width, k0);
        pack_panel(p + (size_t)q * kc, src, dtype, n, width, kc, nxt, nn);
        memcpy(src, nxt, (size_t)nn * sizeof *src);
        n = nn;
    }
}

/* h (n) = src (n of dtype) as bf16: fp32 rounded to nearest even (NaN kept quiet), bit for bit
 * grpo_bf16_from_f32, written without branches so that the compiler vectorises it. */
__attribute__((always_inline))
static inline void bf16_row(uint16_t *h, const void *src, int32_t dtype, int32_t n) {
    if (dtype != GRPO_DTYPE_F32) {
        memcpy(h, src, (size_t)n * sizeof *h);
        return;
    }
    const float *x = src;
#pragma omp simd
    for (int32_t k = 0; k < n; k++) {
        uint32_t u;
        memcpy(&u, &x[k], sizeof u);
        h[k] = (uint16_t)cpu_bf16_bits(u);
    }
}

/* d (ceil(kc/2), width) of 32-bit bf16 pairs from the n <= width rows src[j]: d[q][j] holds
 * elements 2q (low half) and 2q + 1 (high half; 0 past kc) of row j; columns n..width are 0.
 * Each row is rounded into h first, then its pairs stored. */
__attribute__((always_inline))
static inline void pack_pair_panel_t(uint32_t *d, const void *const *src, int32_t dtype,
                                     int32_t n, int32_t width, int32_t kc) {
    const int32_t kp = (kc + 1) / 2;
    uint16_t h[GEMM_KC_WIDE + 2];
    for (int32_t j = 0; j < n; j++) {
        bf16_row(h, src[j], dtype, kc);
        h[kc] = 0;
        for (int32_t q = 0; q < kp; q++)
            d[(size_t)q * width + j] = (uint32_t)h[2 * q] | (uint32_t)h[2 * q + 1] << 16;
    }
    for (int32_t q = 0; q < kp; q++)
        for (int32_t j = n; j < width; j++) d[(size_t)q * width + j] = 0;
}

/* pack's bf16 form (gemm_pack_fn): panels (ceil(kc/2), width) of bf16 pairs. Only the bf16
 * tile uses it, so it is compiled for AVX-512 where the build can. */
#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx512f,avx512bw,avx512vl")))
#endif
static void pack_pairs(float *p, const void *m, int32_t dtype, int32_t ld, int32_t r0,
                       int32_t rows, int32_t width, int32_t k0, int32_t kc) {
    const size_t esz = grpo_dtype_size(dtype), kp = (size_t)(kc + 1) / 2;
    for (int32_t q = 0; q < rows; q += width) {
        const void *src[GEMM_NR_MAX];
        int32_t n = imin(width, rows - q);
        for (int32_t j = 0; j < n; j++)
            src[j] = (const char *)m + ((size_t)(r0 + q + j) * ld + k0) * esz;
        uint32_t *d = (uint32_t *)p + (size_t)q * kp;
        if (dtype == GRPO_DTYPE_F32)
            pack_pair_panel_t(d, src, GRPO_DTYPE_F32, n, width, kc);
        else
            pack_pair_panel_t(d, src, GRPO_DTYPE_BF16, n, width, kc);
    }
}

/* Pair s of a transposed fp32 operand's n columns from column c0 (element (r,k) at
 * m[k * ld + r]): lo = its terms k0 + 2s and hi = k0 + 2s + 1 (0 past kc), rounded to bf16. */
__attribute__((always_inline))
static inline void pair_rows_t(uint16_t *lo, uint16_t *hi, const float *m, int32_t ld,
                               int32_t c0, int32_t n, int32_t k0, int32_t kc, size_t s) {
    const float *a = m + (size_t)(k0 + 2 * s) * ld + c0;
    bf16_row(lo, a, GRPO_DTYPE_F32, n);
    if ((int32_t)(2 * s + 1) < kc)
        bf16_row(hi, a + ld, GRPO_DTYPE_F32, n);
    else
        memset(hi, 0, (size_t)n * sizeof *hi);
}

/* The bf16 chain on fp32 fmas (cdtype CPU_CDTYPE_FMA_BF16): panels of fp32 terms (2 ceil(kc/2),
 * width) in which pair q's terms come high first, d[2q][j] = row j's element 2q + 1 and
 * d[2q + 1][j] = its element 2q, each rounded to bf16 and widened back (exact; 0 past kc and in
 * columns n..width). The fp32 tile then continues acc = fma(x[2q+1], w[2q+1], acc), then
 * fma(x[2q], w[2q], acc): the products of two bf16 values are exact in fp32, so each step is
 * the one rounded sum VDPBF16PS makes, in its order (with its flush of denormals: MXCSR's FTZ
 * and DAZ while the tiles run, block_tiles). */
__attribute__((always_inline))
static inline void pack_fma_panel(float *d, const uint16_t *lo, const uint16_t *hi, int32_t n,
                                  int32_t width) {
    for (int32_t j = 0; j < n; j++) {
        d[j] = grpo_bf16_to_f32(hi[j]);
        d[width + j] = grpo_bf16_to_f32(lo[j]);
    }
    for (int32_t j = n; j < width; j++) d[j] = d[width + j] = 0.0f;
}

#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx512f,avx512bw,avx512vl")))
#endif
static void pack_fma_pairs(float *p, const void *m, int32_t dtype, int32_t ld, int32_t r0,
                           int32_t rows, int32_t width, int32_t k0, int32_t kc) {
    const size_t esz = grpo_dtype_size(dtype);
    const int32_t kc2 = (kc + 1) / 2 * 2; /* fp32 terms a row: pairs of two */
    uint16_t h[GEMM_KC_WIDE + 2];
    float t[GEMM_NR_MAX][GEMM_KC_WIDE + 2]; /* each row's terms rounded, pairs swapped */
    const void *tp[GEMM_NR_MAX];
    for (int32_t q = 0; q < rows; q += width) {
        int32_t n = imin(width, rows - q);
        for (int32_t j = 0; j < n; j++) {
            const void *src = (const char *)m + ((size_t)(r0 + q + j) * ld + k0) * esz;
            if (dtype == GRPO_DTYPE_F32)
                bf16_row(h, src, GRPO_DTYPE_F32, kc);
            else
                bf16_row(h, src, GRPO_DTYPE_BF16, kc);
            h[kc] = 0;
            cpu_u32a *u = (cpu_u32a *)t[j]; /* the floats' bits */
#pragma omp simd
            for (int32_t s = 0; s < kc2 / 2; s++) {
                uint32_t pair;
                memcpy(&pair, h + 2 * s, sizeof pair); /* element 2s low, 2s + 1 high */
                u[2 * s] = pair & 0xffff0000u;
                u[2 * s + 1] = pair << 16;
            }
            tp[j] = t[j];
        }
        /* then the fp32 packing's transpose of the rows */
        pack_panel_t(p + (size_t)q * kc2, tp, GRPO_DTYPE_F32, n, width, kc2, NULL, 0);
    }
}

/* A transposed fp32 operand (element (r,k) at m[k * ld + r]: the backward's operands, cpu_nt's
 * xt and wt) packed into pack_pairs' panels of bf16 pairs (fma 0) or pack_fma_pairs' fp32
 * panels (fma 1), each pair's two terms rounded from rows k and k + 1 of m (contiguous over the
 * panel's rows; 0 past kc). */
__attribute__((always_inline))
static inline void pack_transposed(float *p, const void *m_, int32_t dtype, int32_t ld,
                                   int32_t r0, int32_t rows, int32_t width, int32_t k0,
                                   int32_t kc, int fma) {
    CPU_CHECK(dtype == GRPO_DTYPE_F32, "gemm_nt", "a transposed operand must be fp32");
    const float *m = m_;
    const size_t kp = (size_t)(kc + 1) / 2;
    uint16_t lo[GEMM_NR_MAX], hi[GEMM_NR_MAX];
    for (int32_t q = 0; q < rows; q += width) {
        int32_t n = imin(width, rows - q);
        float *d = p + (size_t)q * kp * (fma ? 2 : 1);
        for (size_t s = 0; s < kp; s++) {
            pair_rows_t(lo, hi, m, ld, r0 + q, n, k0, kc, s);
            if (fma) {
                pack_fma_panel(d + 2 * s * width, lo, hi, n, width);
                continue;
            }
            uint32_t *du = (uint32_t *)d + s * width;
            for (int32_t j = 0; j < n; j++) du[j] = (uint32_t)lo[j] | (uint32_t)hi[j] << 16;
            for (int32_t j = n; j < width; j++) du[j] = 0;
        }
    }
}

#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx512f,avx512bw,avx512vl")))
#endif
static void pack_pairs_t(float *p, const void *m, int32_t dtype, int32_t ld, int32_t r0,
                         int32_t rows, int32_t width, int32_t k0, int32_t kc) {
    pack_transposed(p, m, dtype, ld, r0, rows, width, k0, kc, 0);
}

#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx512f,avx512bw,avx512vl")))
#endif
static void pack_fma_pairs_t(float *p, const void *m, int32_t dtype, int32_t ld, int32_t r0,
                             int32_t rows, int32_t width, int32_t k0, int32_t kc) {
    pack_transposed(p, m, dtype, ld, r0, rows, width, k0, kc, 1);
}

/* Asks for the m rows of n floats at c (rows ldo apart: the next tile of out) to be brought
 * into the cache for writing while the current tile computes: a tile reads its partial sums
 * first, and when out is larger than the caches (N x 6400 logits) that read would stall. */
static void prefetch_tile(const float *c, int32_t ldo, int32_t m, int32_t n) {
    for (int32_t r = 0; r < m; r++) {
        const float *row = c + (size_t)r * ldo;
        for (int32_t j = 0; j < n; j += 16) __builtin_prefetch(row + j, 1, 3);
        __builtin_prefetch(row + n - 1, 1, 3);
    }
}

/* The register tiles of one (mc rows, nc outputs) block at out[r0][c0] over kc terms. A tile
 * that overhangs the block runs in a tile-sized buffer and stores only its real part. Each tile
 * of a panel's column prefetches 1/tiles of the next w panel (into L2), so that it has arrived
 * when the column ends. */
static void block_tiles(const gemm_isa *isa, const gemm_job *jb, const float *xp,
                        const float *wp, int32_t r0, int32_t mc, int32_t c0, int32_t nc,
                        int32_t kc, int first) {
    const int32_t mr = isa->mr, nr = isa->nr, ldo = jb->ldo, ku = ksteps(isa, kc);
    float t[GEMM_MR_MAX * GEMM_NR_MAX] = {0}; /* its padding stays finite (0 or earlier sums) */
    const unsigned mxcsr = cpu_flush_begin(isa->pad2); /* the bf16 chain on fmas */
    const int32_t tiles = (mc + mr - 1) / mr, lines = ku * nr / 16;
    const int32_t per = (lines + tiles - 1) / tiles;
    for (int32_t jr = 0; jr < nc; jr += nr) {
        const float *nextw = wp + (size_t)(jr + nr) * ku; /* the next panel, if any */
        for (int32_t ir = 0, ti = 0; ir < mc; ir += mr, ti++) {
            float *c = jb->out + (size_t)(r0 + ir) * ldo + c0 + jr;
            const float *x = xp + (size_t)ir * ku, *wv = wp + (size_t)jr * ku;
            prefetch_tile(c + (size_t)mr * ldo, ldo, imin(mr, mc - ir - mr), imin(nr, nc - jr));
            for (int32_t l = ti * per; jr + nr < nc && l < lines && l < (ti + 1) * per; l++)
                __builtin_prefetch(nextw + (size_t)l * 16, 0, 2);
            if (ir + mr <= mc && jr + nr <= nc) {
                isa->kern(ku, x, wv, c, ldo, first);
                continue;
            }
            int32_t m = imin(mr, mc - ir), n = imin(nr, nc - jr);
            for (int32_t r = 0; r < m && !first; r++)
                memcpy(t + (size_t)r * nr, c + (size_t)r * ldo, (size_t)n * sizeof(float));
            isa->kern(ku, x, wv, t, nr, first);
            for (int32_t r = 0; r < m; r++)
                memcpy(c + (size_t)r * ldo, t + (size_t)r * nr, (size_t)n * sizeof(float));
        }
    }
    cpu_flush_end(mxcsr, isa->pad2);
}

/* out = scale * (acc + bias) on the block's finished chains: a sum, then a product, lane by
 * lane (omp simd vectorises it; no fma, no reordering: each output is its own two operations). */
static void epilogue(const gemm_job *jb, int32_t r0, int32_t mc, int32_t c0, int32_t nc) {
    if (jb->acc) return; /* out + the chains: nothing after them */
    const float scale = jb->scale, *bias = jb->bias ? jb->bias + c0 : NULL;
    for (int32_t r = r0; r < r0 + mc; r++) {
        float *o = jb->out + (size_t)r * jb->ldo + c0;
        if (bias) {
#pragma omp simd
            for (int32_t c = 0; c < nc; c++) o[c] = scale * (o[c] + bias[c]);
        } else {
#pragma omp simd
            for (int32_t c = 0; c < nc; c++) o[c] = scale * (o[c] + 0.0f);
        }
    }
}

/* Floats of the packed w block (wp), then of the packed input block (xp) of a tile of rows x
 * cols (any ISA: 12 and 32 are multiples of every MR and NR). */
static int32_t kc_block(int32_t rows, int32_t cols) {
    return cols > GEMM_WIDE_COLS && (int64_t)rows * cols > GEMM_WIDE_OUT ? GEMM_KC_WIDE : GEMM_KC;
}
static size_t kc_cap(int32_t rows, int32_t cols, int32_t IC) {
    return (size_t)(IC < 1 ? 2 : round_up(imin(IC, kc_block(rows, cols)), 2)); /* pad2's too */
}
static size_t wp_floats(int32_t rows, int32_t cols, int32_t IC) {
    return kc_cap(rows, cols, IC) * round_up(imin(cols, GEMM_NC), GEMM_NR_MAX);
}
static size_t work_floats(int32_t rows, int32_t cols, int32_t IC) {
    return wp_floats(rows, cols, IC) +
           kc_cap(rows, cols, IC) * round_up(imin(rows, GEMM_MC), GEMM_MR_MAX);
}

/* The tile out[r0..r1, c0..c1) by the serial algorithm (top of the file), work of
 * work_floats(r1 - r0, c1 - c0, K) floats. K = 0 runs one empty block: acc = 0. The chains
 * start from 0, or from out's values when jb->acc. A transposed operand is packed by
 * pack_pairs_t (bf16 tile only: checked by check_job). */
static void gemm_tile(const gemm_isa *isa, const gemm_job *jb, int32_t r0, int32_t r1,
                      int32_t c0, int32_t c1, float *work) {
    const int32_t K = jb->K, KC = kc_block(r1 - r0, c1 - c0);
    gemm_pack_fn *px = jb->xt ? isa->pack_t : isa->pack, *pw = jb->wt ? isa->pack_t : isa->pack;
    float *wp = work, *xp = work + wp_floats(r1 - r0, c1 - c0, K);
    for (int32_t jc = c0; jc < c1; jc += GEMM_NC) {
        int32_t nc = imin(GEMM_NC, c1 - jc);
        for (int32_t pc = 0; pc == 0 || pc < K; pc += KC) {
            int32_t kc = imin(KC, K - pc);
            pw(wp, jb->w, jb->wtype, jb->ldw, jc, nc, isa->nr, pc, kc);
            for (int32_t ic = r0; ic < r1; ic += GEMM_MC) {
                int32_t mc = imin(GEMM_MC, r1 - ic);
                px(xp, jb->x, GRPO_DTYPE_F32, jb->ldx, ic, mc, isa->mr, pc, kc);
                block_tiles(isa, jb, xp, wp, ic, mc, jc, nc, kc, pc == 0 && !jb->acc);
                if (pc + kc >= K) epilogue(jb, ic, mc, jc, nc);
            }
        }
    }
}

size_t cpu_gemm_nt_work(int32_t N, int32_t IC, int32_t OC) {
    size_t f = work_floats(N, OC, IC), a = cpu_amx_work(N, IC, OC);
    return f > a ? f : a;
}

/* What every product is checked for: a known w dtype; transposed operands and accumulation
 * only in bf16 (OpenBLAS computes them in fp32: cpu_sgemm), accumulation without scale or bias. */
static void check_job(const gemm_job *jb, int32_t cdtype) {
    CPU_CHECK(jb->wtype == GRPO_DTYPE_F32 || jb->wtype == GRPO_DTYPE_BF16, "gemm_nt",
              "unknown dtype");
    CPU_CHECK(cdtype != GRPO_DTYPE_F32 || (!jb->xt && !jb->wt && !jb->acc), "gemm_nt",
              "transposed operands or accumulation in fp32");
    CPU_CHECK(!jb->acc || (jb->scale == 1.0f && !jb->bias), "gemm_nt",
              "accumulation with a scale or a bias");
}

void cpu_gemm_nt_run_serial(int32_t simd_limit, int32_t cdtype, const cpu_nt *p, float *work) {
    check_job(p, cdtype);
    if (p->M <= 0 || p->N <= 0) return;
    gemm_job jb = *p;
    jb.K = p->K < 0 ? 0 : p->K;
    if (cdtype == CPU_CDTYPE_AMX_BF16) {
        cpu_amx_gemm_serial(&jb, work);
        return;
    }
    gemm_isa isa = gemm_pick(simd_limit, cdtype);
    gemm_tile(&isa, &jb, 0, jb.M, 0, jb.N, work);
}

void cpu_gemm_nt_serial(int32_t simd_limit, int32_t cdtype, float *out, int32_t ldo,
                        const float *inp, const void *w, int32_t wtype, const float *bias,
                        float scale, int32_t N, int32_t IC, int32_t OC, float *work) {
    cpu_nt p = {.out = out, .ldo = ldo, .x = inp, .ldx = IC, .w = w, .wtype = wtype, .ldw = IC,
                .bias = bias, .scale = scale, .M = N, .N = OC, .K = IC};
    cpu_gemm_nt_run_serial(simd_limit, cdtype, &p, work);
}

/* cpu_gemm_nt's tiles, one pool task each, each with its own packing buffers */
typedef struct nt_grid {
    const gemm_isa *isa;
    const gemm_job *jb;
    int32_t N, OC, tm, tn, pn;
    size_t per;
    float *work;
} nt_grid;

static void nt_tile(void *arg, int64_t tile, int32_t tid) {
    const nt_grid *g = arg;
    (void)tid;
    int32_t r0 = (int32_t)tile / g->pn * g->tm, c0 = (int32_t)tile % g->pn * g->tn;
    if (r0 < g->N && c0 < g->OC)
        gemm_tile(g->isa, g->jb, r0, imin(r0 + g->tm, g->N), c0, imin(c0 + g->tn, g->OC),
                  g->work + g->per * (size_t)tile);
}

void cpu_gemm_nt_run(cpu_ctx *ctx, const cpu_nt *p, int apart) {
    const int32_t cdtype = cpu_gemm_cdtype(ctx);
    check_job(p, cdtype);
    if (p->M <= 0 || p->N <= 0) return;
    gemm_job jb = *p;
    jb.K = p->K < 0 ? 0 : p->K;
    if (cdtype == CPU_CDTYPE_AMX_BF16) { /* AMX tiles: gemm_amx.c */
        cpu_amx_gemm(ctx, &jb, apart);
        return;
    }
    const int32_t N = jb.M, OC = jb.N, IC = jb.K;
    gemm_isa isa = gemm_pick(ctx->simd_limit, cdtype);
    int nt = cpu_threads_for(ctx, (double)N * OC * (IC > 0 ? IC : 1) / 64.0);
    int32_t tm = N, tn = OC, pn = 1;
    if (nt > 1) cpu_tile_grid(nt, N, OC, isa.mr, isa.nr, &tm, &tn, &pn);
    int32_t tiles = nt > 1 ? nt : 1;
    size_t per = work_floats(tm, tn, IC);
    float *work = cpu_work(ctx, per * (size_t)tiles, apart);
    CPU_CHECK(work != NULL, "gemm_nt", "out of memory for the packing buffers");
    nt_grid g = {&isa, &jb, N, OC, tm, tn, pn, per, work};
    cpu_parallel(ctx, CPU_FAM_GEMM_FWD, nt, tiles, nt_tile, &g);
}

void cpu_gemm_nt(cpu_ctx *ctx, float *out, int32_t ldo, const float *inp, const void *w,
                 int32_t wtype, const float *bias, float scale, int32_t N, int32_t IC,
                 int32_t OC) {
    cpu_nt p = {.out = out, .ldo = ldo, .x = inp, .ldx = IC, .w = w, .wtype = wtype, .ldw = IC,
                .bias = bias, .scale = scale, .M = N, .N = OC, .K = IC};
    cpu_gemm_nt_run(ctx, &p, 0);
}
