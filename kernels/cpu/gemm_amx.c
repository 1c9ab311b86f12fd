/*
 * gemm_amx.c — bf16 compute on Intel AMX tiles (TDPBF16PS), batch-invariant:
 *   out (N,OC) = scale * (inp (N,IC) @ w (OC,IC)^T + bias (OC))     (bias NULL: + 0)
 * the forward product of gemm_nt.c and matmul_small.c when ctx->compute_dtype is bf16 and
 * cpu_amx_bf16_ready() (the CPU has amx_bf16 and amx_tile and Linux granted the tile data).
 *
 * The product is computed transposed, out^T = w @ inp^T, so that w is the A operand read by
 * rows (a bf16 weight row of IC % 32 == 0 is loaded in place, others are rounded to bf16 into
 * a padded copy: once per product, also when its rows span several input blocks; with one
 * input group, decode, the next group of in-place rows is prefetched into L2 while a group
 * computes) and the inputs the B operand, packed once per block of rows as 32-bit pairs
 * (VNNI): xv[group of 16 rows][pair q][row l] = bf16(x[l][2q]) | bf16(x[l][2q+1]) << 16,
 * rounded by VCVTNE2PS2BF16 (nearest even, as grpo_bf16_from_f32, except that a denormal
 * becomes 0: TDPBF16PS reads bf16 denormals as 0 anyway), zero past IC and the last row.
 * A k-tile is 32 terms (16 pairs); IC is padded with zeros to a multiple of 32.
 *
 * Each output is ONE chain: acc = 0, then acc = TDPBF16PS(acc, k-tile t) for t = 0, 1, ... in
 * order (fp32 accumulation of exact bf16 products; the instruction's order inside a k-tile
 * depends only on that output's own row of w and row of inp), then scale * (acc + bias). The
 * register blocking (2 x 2 or 2 x 1 tiles of 16 x 16), the row blocks, the thread grid
 * (partitioned over rows and columns of out, never over IC) and the batch size change which
 * tiles share an instruction, never that chain: the same bits whatever N, the row's place in
 * the batch, the thread count, and whether the decode path (matmul_small.c) or the prefill
 * path (gemm_nt.c) runs it. The bits differ from the VDPBF16PS chain (another order).
 *
 * The backward's bf16 products (cpu_nt with transposed operands, gemm.c) run here too: a
 * transposed input is packed from two of its rows per pair (tile_pairs_t), a transposed w is
 * transposed in registers into wa (w_rows_t), and an accumulating product adds the finished
 * chain to out (out + acc, no scale or bias).
 *
 * Built with -mamx-tile -mamx-bf16 on this file alone (CMake: GRPO_HAVE_AMX, where the
 * compiler takes them); elsewhere cpu_amx_bf16_ready() (amx_detect.c) is 0 and these are never
 * called.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_backend.h"

#if defined(GRPO_HAVE_AMX) && defined(__x86_64__) && defined(__linux__)
#include <immintrin.h>
#define AMX_BUILT 1
#endif

#define AMX_RB 512 /* rows per packed input block (xv: AMX_RB * IC * 2 bytes, in L2) */
#define AMX_NB 256 /* outputs per block of w (its bf16 rows: AMX_NB * IC * 2 bytes, in L2): a
                    * block of 32 rows of out is written as AMX_NB contiguous floats a row */
/* Pairs of the padded reduction: IC rounded up to a multiple of 32 terms, halved. */
static int32_t kpairs(int32_t IC) { return (IC + 31) / 32 * 16; }
static int32_t imin(int32_t a, int32_t b) { return a < b ? a : b; }

/* Rows of w packed at once for a task of rows x cols of out: a block of AMX_NB when the task is
 * one block of inputs, else all its cols (32-row groups), packed once for every input block. */
static int32_t amx_wrows(int32_t rows, int32_t cols) {
    return rows > AMX_RB ? (cols + 31) / 32 * 32 : AMX_NB;
}

/* 32-bit words of one task's work: xv for min(rows, AMX_RB) rows (16-row groups) and the packed
 * rows of w (amx_wrows). */
static size_t amx_words(int32_t rows, int32_t cols, int32_t IC) {
    size_t r = (size_t)(imin(rows, AMX_RB) + 15) / 16 * 16;
    return (r + (size_t)amx_wrows(rows, cols)) * (size_t)kpairs(IC);
}

size_t cpu_amx_work(int32_t N, int32_t IC, int32_t OC) {
    return amx_words(N, OC, IC); /* floats: one 32-bit word each */
}

#if defined(AMX_BUILT)
/* One product (cpu_backend.h): what every task reads and writes. */
typedef cpu_nt amx_job;

/* palette 1, all eight tiles 16 rows of 64 bytes (fp32 16 x 16, bf16 16 x 32, pairs 16 x 16) */
typedef struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

static void amx_config(void) {
    amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) c.colsb[t] = 64, c.rows[t] = 16;
    _tile_loadconfig(&c);
}

/* One stage of the 16 x 16 transpose in registers (matmul_small.c's): for rows r and r + d,
 * the d x d blocks off the diagonal of each 2d x 2d block swap places. */
#define AMX_T_STAGE(d, ma, mb)                                                                \
    _Pragma("GCC unroll 16") for (int32_t r = 0; r < 16; r++) if (!(r & (d))) {               \
        __m512 a = v[r], b = v[r + (d)];                                                      \
        v[r] = _mm512_permutex2var_ps(a, _mm512_setr_epi32 ma, b);                            \
        v[r + (d)] = _mm512_permutex2var_ps(a, _mm512_setr_epi32 mb, b);                      \
    }

/* v (16 rows of 16) transposed in place. */
__attribute__((target("avx512f"), always_inline))
static inline void transpose16(__m512 *v) {
    AMX_T_STAGE(8, (0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23),
                (8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31))
    AMX_T_STAGE(4, (0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27),
                (4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31))
    AMX_T_STAGE(2, (0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29),
                (2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31))
    AMX_T_STAGE(1, (0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30),
                (1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31))
}
#undef AMX_T_STAGE

/* The 16 pairs of k-tile t of an fp32 row of IC (terms 32t .. 32t+31, zero past IC), rounded
 * to bf16 by VCVTNE2PS2BF16 (nearest even; a denormal becomes 0, as TDPBF16PS reads one). */
__attribute__((target("avx512f,avx512bf16"), always_inline))
static inline __m512 tile_pairs(const float *row, int32_t IC, int32_t t) {
    const int32_t rem = IC - 32 * t;
    const __mmask16 lo = rem >= 16 ? 0xffff : (__mmask16)((1u << rem) - 1);
    const __mmask16 hi = rem >= 32 ? 0xffff : rem > 16 ? (__mmask16)((1u << (rem - 16)) - 1) : 0;
    __m512 a = _mm512_maskz_loadu_ps(lo, row + 32 * t);
    __m512 b = _mm512_maskz_loadu_ps(hi, row + 32 * t + 16);
    return (__m512)_mm512_cvtne2ps_pbh(b, a);
}

/* The 16 pairs q of k-tile t for the 16 rows r .. r+16 of a transposed fp32 operand (K, ?)
 * (element (r,k) at m[k * ld + r]), as 16 words (one per row l: terms 32t + 2q, 32t + 2q + 1;
 * zero past K and past the n rows there are), into d[q][l]: two rows of m loaded, rounded by
 * VCVTNEPS2BF16 and interleaved. */
__attribute__((target("avx512f,avx512bf16"), always_inline))
static inline void tile_pairs_t(float *d, const float *m, int32_t ld, int32_t r, int32_t n,
                                int32_t K, int32_t t) {
    const __mmask16 rows = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
    for (int32_t q = 0; q < 16; q++) {
        const int32_t k = 32 * t + 2 * q;
        __m512 a = k < K ? _mm512_maskz_loadu_ps(rows, m + (size_t)k * ld + r)
                         : _mm512_setzero_ps();
        __m512 b = k + 1 < K ? _mm512_maskz_loadu_ps(rows, m + (size_t)(k + 1) * ld + r)
                             : _mm512_setzero_ps();
        __m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(a));
        __m512i hi = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(b));
        _mm512_storeu_si512(d + 16 * q, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
}

/* xv (groups of 16 rows, kp, 16) of pairs from rows r0 .. r0+n of x (M,K); the rows of the
 * last group past n are zero. A group's k-tile: 16 rows of 16 pairs, transposed in registers
 * (x by rows), or read across 16 rows at once (x transposed: tile_pairs_t). */
__attribute__((target("avx512f,avx512bf16")))
static void pack_x(uint32_t *xv, const amx_job *jb, int32_t r0, int32_t n, int32_t kp) {
    for (int32_t g = 0; g * 16 < n; g++)
        for (int32_t t = 0; t < kp / 16; t++) {
            float *d = (float *)(xv + ((size_t)g * kp + (size_t)t * 16) * 16);
            if (jb->xt) {
                tile_pairs_t(d, jb->x, jb->ldx, r0 + g * 16, n - g * 16, jb->K, t);
                continue;
            }
            __m512 v[16];
            for (int32_t l = 0; l < 16; l++)
                v[l] = g * 16 + l < n ? tile_pairs(jb->x + (size_t)(r0 + g * 16 + l) * jb->ldx,
                                                   jb->K, t)
                                      : _mm512_setzero_ps();
            transpose16(v);
#pragma GCC unroll 16
            for (int32_t q = 0; q < 16; q++) _mm512_storeu_ps(d + 16 * q, v[q]);
        }
}

/* wa's 32 rows (2 * kp bf16 each) from the columns c .. c+32 of a transposed fp32 w (K, N):
 * per k-tile, two 16 x 16 blocks of 16 rows each loaded across (zero past K and N),
 * transposed in registers and rounded in pairs (tile_pairs's rounding). */
__attribute__((target("avx512f,avx512bf16")))
static void w_rows_t(const amx_job *jb, int32_t c, uint16_t *wa, int32_t kp) {
    const float *w = jb->w;
    for (int32_t h = 0; h < 2; h++) {
        const int32_t cols = imin(16, jb->N - c - 16 * h);
        const __mmask16 m = cols >= 16 ? 0xffff : cols <= 0 ? 0 : (__mmask16)((1u << cols) - 1);
        for (int32_t t = 0; t < kp / 16; t++) {
            __m512 lo[16], hi[16];
            for (int32_t l = 0; l < 16; l++) {
                const int32_t k = 32 * t + l;
                lo[l] = k < jb->K ? _mm512_maskz_loadu_ps(m, w + (size_t)k * jb->ldw + c + 16 * h)
                                  : _mm512_setzero_ps();
                hi[l] = k + 16 < jb->K
                            ? _mm512_maskz_loadu_ps(m, w + (size_t)(k + 16) * jb->ldw + c + 16 * h)
                            : _mm512_setzero_ps();
            }
            transpose16(lo);
            transpose16(hi);
            for (int32_t j = 0; j < 16; j++)
                _mm512_storeu_ps((float *)(wa + (size_t)(16 * h + j) * 2 * kp + 32 * t),
                                 (__m512)_mm512_cvtne2ps_pbh(hi[j], lo[j]));
        }
    }
}

/* The A operand for w's rows c .. c+32: in place (bf16 rows, K % 32 == 0, all 32 rows in w),
 * else as bf16 into wa (32, 2 * kp) with zero rows past N, written when pack (else wa already
 * holds them). *stride: bytes between rows. */
__attribute__((target("avx512f,avx512bf16")))
static const uint16_t *w_rows(const amx_job *jb, int32_t c, uint16_t *wa, int32_t kp,
                              size_t *stride, int pack) {
    const int32_t K = jb->K;
    *stride = (size_t)kp * 4;
    if (!jb->wt && jb->wtype == GRPO_DTYPE_BF16 && K % 32 == 0 && c + 32 <= jb->N) {
        *stride = (size_t)jb->ldw * 2;
        return (const uint16_t *)jb->w + (size_t)c * jb->ldw;
    }
    if (!pack) return wa;
    if (jb->wt) {
        w_rows_t(jb, c, wa, kp);
        return wa;
    }
    for (int32_t j = 0; j < 32; j++) {
        uint16_t *d = wa + (size_t)j * 2 * kp;
        memset(d, 0, (size_t)2 * kp * sizeof *d);
        if (c + j >= jb->N) continue;
        if (jb->wtype == GRPO_DTYPE_BF16) {
            memcpy(d, (const uint16_t *)jb->w + (size_t)(c + j) * jb->ldw, (size_t)K * sizeof *d);
            continue;
        }
        const float *row = (const float *)jb->w + (size_t)(c + j) * jb->ldw;
        for (int32_t t = 0; t < kp / 16; t++) _mm512_storeu_ps(d + 32 * t, tile_pairs(row, K, t));
    }
    return wa;
}

/* Into L2, ahead of use: k-tile t's line of each of the 32 rows of the next group of w (pf,
 * sp bytes between rows; NULL: none), while one input group streams w (decode: every group of
 * w is read once, from L3 or memory). */
static inline void amx_prefetch(const uint16_t *pf, size_t sp, int32_t t) {
    if (!pf) return;
    const char *b = (const char *)(pf + (size_t)t * 32);
    for (int32_t i = 0; i < 32; i++) _mm_prefetch(b + i * sp, _MM_HINT_T1);
}

/* ct[i][j] (16 w rows x 16 input rows, fp32) for w groups a0, a1 (i) and input groups b0, b1
 * (j; nb = 1: b0 alone) over kt k-tiles, each chain from 0 in the order of t; pf as
 * amx_prefetch's. */
static void amx_kern(const uint16_t *a0, const uint16_t *a1, size_t sa, const uint32_t *b0,
                     const uint32_t *b1, int32_t nb, int32_t kt, float *ct, const uint16_t *pf,
                     size_t sp) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    if (nb == 2) {
        for (int32_t t = 0; t < kt; t++) {
            amx_prefetch(pf, sp, t);
            _tile_loadd(4, a0 + (size_t)t * 32, sa);
            _tile_loadd(5, a1 + (size_t)t * 32, sa);
            _tile_loadd(6, b0 + (size_t)t * 256, 64);
            _tile_loadd(7, b1 + (size_t)t * 256, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    } else {
        for (int32_t t = 0; t < kt; t++) {
            amx_prefetch(pf, sp, t);
            _tile_loadd(4, a0 + (size_t)t * 32, sa);
            _tile_loadd(5, a1 + (size_t)t * 32, sa);
            _tile_loadd(6, b0 + (size_t)t * 256, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(2, 5, 6);
        }
    }
    _tile_stored(0, ct, 64);
    _tile_stored(1, ct + 256, 64);
    _tile_stored(2, ct + 512, 64);
    _tile_stored(3, ct + 768, 64);
}

/* out[r + l][c + n] = scale * (acc + bias[c + n]) (+ 0 without bias), or out + acc (jb->acc),
 * for l < m, n < nc: acc from ct, tile (n / 16, l / 16), element [n % 16][l % 16]; each
 * 16 x 16 tile transposed in registers, then a sum and a product lane by lane (no fma) and a
 * masked store a row. */
__attribute__((target("avx512f")))
static void store_tiles(const amx_job *jb, const float *ct, int32_t r, int32_t m, int32_t c,
                        int32_t nc) {
    const __m512 s = _mm512_set1_ps(jb->scale);
    for (int32_t i = 0; i < 2 && 16 * i < nc; i++) {
        const int32_t n = imin(16, nc - 16 * i);
        const __mmask16 k = (__mmask16)((1u << n) - 1);
        const __m512 b = jb->bias ? _mm512_maskz_loadu_ps(k, jb->bias + c + 16 * i)
                                  : _mm512_setzero_ps();
        for (int32_t j = 0; j < 2 && 16 * j < m; j++) {
            __m512 v[16];
            const float *t = ct + (size_t)(2 * i + j) * 256;
#pragma GCC unroll 16
            for (int32_t q = 0; q < 16; q++) v[q] = _mm512_loadu_ps(t + 16 * q);
            transpose16(v);
            for (int32_t l = 0; l < imin(16, m - 16 * j); l++) {
                float *o = jb->out + (size_t)(r + 16 * j + l) * jb->ldo + c + 16 * i;
                __m512 y = jb->acc ? _mm512_add_ps(_mm512_maskz_loadu_ps(k, o), v[l])
                                   : _mm512_mul_ps(s, _mm512_add_ps(v[l], b));
                _mm512_mask_storeu_ps(o, k, y);
            }
        }
    }
}

/* out[r0..r1, c0..c1) on the calling thread with work of amx_words(r1 - r0, c1 - c0, IC)
 * words: for each block of AMX_RB rows (packed once), each block of AMX_NB outputs (w's rows as
 * bf16: packed for the block, or all of them once before the first row block when there are
 * several, amx_wrows), each 32 rows, each 32 outputs: one call of the tiles. */
static void amx_block(const amx_job *jb, int32_t r0, int32_t r1, int32_t c0, int32_t c1,
                      uint32_t *work) {
    const int32_t kp = kpairs(jb->K), kt = kp / 16, whole = r1 - r0 > AMX_RB;
    uint16_t *wa = (uint16_t *)work;
    uint32_t *xv = work + (size_t)amx_wrows(r1 - r0, c1 - c0) * kp;
    float ct[1024];
    const uint16_t *a[AMX_NB / 32];
    size_t sa[AMX_NB / 32];
    amx_config();
    for (int32_t c = c0; whole && c < c1; c += 32) /* every group of w's rows, once */
        w_rows(jb, c, wa + (size_t)(c - c0) * 2 * kp, kp, &sa[0], 1);
    for (int32_t rb = r0; rb < r1; rb += AMX_RB) {
        const int32_t n = imin(AMX_RB, r1 - rb);
        pack_x(xv, jb, rb, n, kp);
        for (int32_t cb = c0; cb < c1; cb += AMX_NB) {
            const int32_t pairs = (imin(AMX_NB, c1 - cb) + 31) / 32;
            for (int32_t p = 0; p < pairs; p++) {
                const int32_t c = cb + 32 * p;
                a[p] = whole ? w_rows(jb, c, wa + (size_t)(c - c0) * 2 * kp, kp, &sa[p], 0)
                             : w_rows(jb, c, wa + (size_t)p * 64 * kp, kp, &sa[p], 1);
            }
            for (int32_t r = 0; r < n; r += 32) {
                const int32_t m = imin(32, n - r);
                const uint32_t *b0 = xv + (size_t)(r / 16) * kp * 16;
                for (int32_t p = 0; p < pairs; p++) {
                    const int32_t c = cb + 32 * p;
                    /* one input group: the next group of w, in place, fetched ahead */
                    const uint16_t *pf = n > 32 ? NULL : p + 1 < pairs ? a[p + 1] : NULL;
                    size_t sp = p + 1 < pairs ? sa[p + 1] : 0;
                    if (n <= 32 && p + 1 == pairs && cb + AMX_NB < c1) {
                        pf = w_rows(jb, cb + AMX_NB, wa, kp, &sp, 0);
                        if (pf == wa) pf = NULL; /* not in place: packed later, nothing to fetch */
                    }
                    amx_kern(a[p], a[p] + sa[p] / 2 * 16, sa[p], b0, b0 + (size_t)kp * 16,
                             m > 16 ? 2 : 1, kt, ct, pf, sp);
                    store_tiles(jb, ct, rb + r, m, c, imin(32, c1 - c));
                }
            }
        }
    }
    _tile_release();
}

void cpu_amx_gemm_serial(const cpu_nt *p, float *work) {
    CPU_CHECK(cpu_amx_bf16_ready(), "gemm_amx", "AMX tiles used without cpu_amx_bf16_ready");
    if (p->M <= 0 || p->N <= 0) return;
    amx_job jb = *p;
    jb.K = p->K < 0 ? 0 : p->K;
    amx_block(&jb, 0, jb.M, 0, jb.N, (uint32_t *)work);
}

/* cpu_amx_gemm's tiles of a grid over out, one pool task each with its own work */
typedef struct amx_grid {
    const amx_job *jb;
    int32_t tm, tn, pn;
    size_t per;
    uint32_t *work;
} amx_grid;

static void amx_task(void *arg, int64_t tile, int32_t tid) {
    const amx_grid *g = arg;
    (void)tid;
    int32_t r0 = (int32_t)tile / g->pn * g->tm, c0 = (int32_t)tile % g->pn * g->tn;
    if (r0 < g->jb->M && c0 < g->jb->N)
        amx_block(g->jb, r0, imin(r0 + g->tm, g->jb->M), c0, imin(c0 + g->tn, g->jb->N),
                  g->work + g->per * (size_t)tile);
}

void cpu_amx_gemm(cpu_ctx *ctx, const cpu_nt *p, int apart) {
    CPU_CHECK(cpu_amx_bf16_ready(), "gemm_amx", "AMX tiles used without cpu_amx_bf16_ready");
    CPU_CHECK(p->wtype == GRPO_DTYPE_F32 || p->wtype == GRPO_DTYPE_BF16, "gemm_amx",
              "unknown dtype");
    CPU_CHECK(!p->wt || p->wtype == GRPO_DTYPE_F32, "gemm_amx", "a transposed w must be fp32");
    if (p->M <= 0 || p->N <= 0) return;
    amx_job jb = *p;
    jb.K = p->K < 0 ? 0 : p->K;
    const int32_t N = jb.M, OC = jb.N, IC = jb.K;
    int nt = cpu_threads_for(ctx, (double)N * OC * (IC > 0 ? IC : 1) / 64.0); /* gemm_nt.c's */
    int32_t tm = N, tn = OC, pn = 1;
    if (nt > 1) cpu_tile_grid(nt, N, OC, 32, 32, &tm, &tn, &pn);
    int32_t tiles = nt > 1 ? nt : 1;
    size_t per = amx_words(tm, tn, IC);
    uint32_t *work = (uint32_t *)cpu_work(ctx, per * (size_t)tiles, apart);
    CPU_CHECK(work != NULL, "gemm_amx", "out of memory for the packing buffers");
    amx_grid g = {&jb, tm, tn, pn, per, work};
    cpu_parallel(ctx, CPU_FAM_GEMM_FWD, nt, tiles, amx_task, &g);
}
#else
void cpu_amx_gemm_serial(const cpu_nt *p, float *work) {
    (void)p, (void)work;
    CPU_CHECK(0, "gemm_amx", "AMX tiles: not built with -mamx-tile -mamx-bf16");
}

void cpu_amx_gemm(cpu_ctx *ctx, const cpu_nt *p, int apart) {
    (void)ctx;
    cpu_amx_gemm_serial(p, NULL);
}
#endif
