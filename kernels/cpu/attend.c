/*
 * attend.c — the batch-invariant core of attention: a few queries against one key sequence,
 * every sum taken in an order fixed by the key sequence alone, so a query's output and
 * log-sum-exp have the same bits in the training forward (any batch, padding, query block,
 * shared prefix or thread count) and in decode against the KV cache (any number of live rows).
 *
 * For a query q (HD) and keys k_j, v_j, j = 0..n-1 (j counts from the first real key: with a
 * shared prefix the prefix's keys come first, then the row's own), with mask km (n):
 *   score s_j   = scale * dot(q, k_j), dot in the fixed order below
 *   m           = max of s_j over the valid keys (j < nvalid, km[j] != 0)
 *   p_j         = exp(s_j - m) for valid keys, 0 for the rest
 *   sum         = sum_j p_j: lane l = j mod 16 sums its keys in order, then tree16
 *   lse         = m + log(sum);   out = (sum over j ascending of p_j * v_j) / sum
 * dot(q, k): lane l of 16 sums q[d] k[d] over d = l, l+16, l+32, ... in order, then tree16.
 * tree16 adds 16 lanes as ((x_l + x_l+8) + (x_l+4 + x_l+12)) ... : h_l = x_l + x_l+8 (l < 8),
 * then h_l + h_l+4 (l < 4), then those l and l+2 (l < 2), then the last two. Sixteen keys'
 * dots are reduced together with shuffles (reduce16) that compute exactly tree16 per key.
 * Keys past nvalid contribute p_j = 0 (exact: adding zeros leaves every sum as it was), so a
 * block of queries with different causal limits can share one pass over the keys.
 * The keys may also lie in the pages of a paged KV cache (cpu_att_keys.pt): where a key lies
 * never changes a sum (a tile of 16 keys within one page is read as contiguous rows, else key
 * by key; both make the same products and sums).
 * A product and the sum it enters are one FMA where the ISA clone has it (the same function
 * makes a sum for the training forward and for decode, so they round alike).
 *
 * Speed without a change of bits: the scores are taken tile by tile, every query on a tile of
 * 16 keys while it is in L1 (dots_tile). With 8 or more queries on a tile (the training
 * forward, a decode of 8+ query heads per kv head; HD <= 256) the tile is transposed once, one
 * float of all 16 keys per vector, and tree16 is taken vector-wide (tree_dots): the lanes' sums
 * and the tree are the same, the shuffles of reduce16 are gone. At HD 64 the transpose is made
 * of register shuffles (AVX-512; elsewhere element by element) and four queries pass over the
 * transposed tile together (tree_dots4), each of its vectors loaded once for the four: one query
 * alone loads a vector of the tile for every four FMAs, as many loads as its broadcasts of q,
 * and the loads, not the FMAs, bound it. Fewer queries (decode) take the lane dots key by key
 * with the shuffle reduction. The values pass reads each value row once for four queries
 * (values_rows4, HD 64), row runs found once per page or prefix, and with more than ATT_QP
 * queries it takes the keys in blocks of ATT_VB, every query on a block while its rows are in
 * L1, each sum continued from block to block in order. The softmax runs on whole vectors (the
 * last tile masked: last_tile) with its products and sums as FMAs, like the dots and values.
 */
#include <math.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "cpu/fastmath.h"

#define ATT_LANES 16 /* the lanes of every dot product and sum */
#define ATT_QP 8     /* queries per pass over the values (one vector register each) */
#define ATT_VB 64    /* keys per block of the values pass (16 KB of HD-64 rows, in L1) */
#define ATT_TRANSPOSE_MIN 8  /* queries on a key tile from which it is transposed */
#define ATT_TRANSPOSE_NCH 16 /* chunks of HD up to which it is (HD <= 256; 16 KB of stack) */

/* Own key j's row in a paged sequence (K->pt): base is K->k or K->v. */
static inline const float *att_paged(const cpu_att_keys *K, const float *base, int32_t j) {
    int32_t s = K->off + j, b, o;
    if (K->pgs >= 0) /* a power-of-two page: no division per key */
        b = s >> K->pgs, o = s & (K->pg - 1);
    else
        b = s / K->pg, o = s % K->pg;
    return base + (size_t)K->pt[b] * (size_t)K->pstride + (size_t)o * K->ks;
}

static inline const float *att_key(const cpu_att_keys *K, int32_t j) {
    if (j >= K->n) j = 0; /* a tile's lanes past the last key: any real memory, unused */
    if (K->pt) return att_paged(K, K->k, j);
    return j < K->np ? K->pk + (size_t)j * K->ks : K->k + (size_t)(j - K->np) * K->ks;
}

static inline const float *att_value(const cpu_att_keys *K, int32_t j) {
    if (K->pt) return att_paged(K, K->v, j);
    return j < K->np ? K->pv + (size_t)j * K->ks : K->v + (size_t)(j - K->np) * K->ks;
}

/* Own key j's position in its page (a paged sequence). */
static inline int32_t att_page_pos(const cpu_att_keys *K, int32_t j) {
    return K->pgs >= 0 ? (K->off + j) & (K->pg - 1) : (K->off + j) % K->pg;
}

/* Whether own keys j0 .. j1-1 of a paged sequence lie in one page (then they are rows ks
 * apart, as unpaged keys are). */
static inline int att_one_page(const cpu_att_keys *K, int32_t j0, int32_t j1) {
    if (K->pgs >= 0) return (K->off + j0) >> K->pgs == (K->off + j1 - 1) >> K->pgs;
    return (K->off + j0) / K->pg == (K->off + j1 - 1) / K->pg;
}

/* The fixed tree over 16 lane sums (see the file comment). */
static inline float tree16(const float *x) {
    float h[8], q[4], e[2];
    for (int32_t l = 0; l < 8; l++) h[l] = x[l] + x[l + 8];
    for (int32_t l = 0; l < 4; l++) q[l] = h[l] + h[l + 4];
    for (int32_t l = 0; l < 2; l++) e[l] = q[l] + q[l + 2];
    return e[0] + e[1];
}

#if defined(__GNUC__) && !defined(__clang__)
/* the vector helpers below are always inlined into their ISA clones: no vector crosses a call,
 * so GCC's note that a 64-byte vector return changes the ABI without AVX-512 does not apply */
#pragma GCC diagnostic ignored "-Wpsabi"
/* x * y + a as one FMA where the target has it (the build's -std=c11 turns contraction off):
 * every sum below is made by one function for training and decode alike, so both contract the
 * same way */
#define ATT_CONTRACT __attribute__((optimize("fp-contract=fast")))
typedef float att_v16 __attribute__((vector_size(ATT_LANES * sizeof(float)), aligned(4)));
typedef int32_t att_i16 __attribute__((vector_size(ATT_LANES * sizeof(int32_t))));

/* Chunk c (floats 16c .. 16c+15) of a row of HD floats, zero past HD. */
__attribute__((always_inline)) static inline att_v16 load_chunk(const float *x, int32_t c,
                                                                int32_t HD) {
    att_v16 v = {0};
    int32_t n = HD - ATT_LANES * c;
    if (n >= ATT_LANES)
        memcpy(&v, x + (size_t)ATT_LANES * c, sizeof v);
    else
        memcpy(&v, x + (size_t)ATT_LANES * c, (size_t)n * sizeof(float));
    return v;
}

/* tree16 of each of the 16 vectors P[j], as lane j of the result: four stages of pairwise
 * shuffles, each halving the lanes per key (16 -> 8 -> 4 -> 2 -> 1) in tree16's order. */
__attribute__((always_inline)) static inline att_v16 reduce16(att_v16 *P) {
    const att_i16 a1 = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23};
    const att_i16 b1 = {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31};
    const att_i16 a2 = {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27};
    const att_i16 b2 = {4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31};
    const att_i16 a3 = {0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29};
    const att_i16 b3 = {2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31};
    const att_i16 a4 = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
    const att_i16 b4 = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31};
    att_v16 s1[8], s2[4], s3[2];
#pragma GCC unroll 8
    for (int32_t j = 0; j < 8; j++) /* lanes 0-7: key 2j's h, 8-15: key 2j+1's */
        s1[j] = __builtin_shuffle(P[2 * j], P[2 * j + 1], a1) +
                __builtin_shuffle(P[2 * j], P[2 * j + 1], b1);
#pragma GCC unroll 4
    for (int32_t j = 0; j < 4; j++) /* four lanes for each of keys 4j .. 4j+3 */
        s2[j] = __builtin_shuffle(s1[2 * j], s1[2 * j + 1], a2) +
                __builtin_shuffle(s1[2 * j], s1[2 * j + 1], b2);
#pragma GCC unroll 2
    for (int32_t j = 0; j < 2; j++) /* two lanes for each of keys 8j .. 8j+7 */
        s3[j] = __builtin_shuffle(s2[2 * j], s2[2 * j + 1], a3) +
                __builtin_shuffle(s2[2 * j], s2[2 * j + 1], b3);
    return __builtin_shuffle(s3[0], s3[1], a4) + __builtin_shuffle(s3[0], s3[1], b4);
}

/* P[i] = the 16 lane sums of q . key i, chunk after chunk in order (nch chunks), key i's row
 * at k0 + i * ks for i < split, else k1 + (i - split) * ks (a paged cache's tile across two
 * pages; split = ATT_LANES: one run of rows, the condition folded away once inlined). */
__attribute__((always_inline)) static inline void lane_dots2(att_v16 *P, const float *qp,
                                                              const float *k0, const float *k1,
                                                              int32_t split, size_t ks,
                                                              int32_t HD, const int32_t nch) {
    if (nch == 4 && HD == 4 * ATT_LANES) { /* key by key, its four chunks in order */
        att_v16 q0, q1, q2, q3;
        memcpy(&q0, qp, sizeof q0), memcpy(&q1, qp + 16, sizeof q1);
        memcpy(&q2, qp + 32, sizeof q2), memcpy(&q3, qp + 48, sizeof q3);
        const float *kr = k0;
#pragma GCC unroll 16
        for (int32_t i = 0; i < ATT_LANES; i++, kr += ks) {
            if (i == split) kr = k1;
            att_v16 a = {0}, k;
            memcpy(&k, kr, sizeof k), a += q0 * k;
            memcpy(&k, kr + 16, sizeof k), a += q1 * k;
            memcpy(&k, kr + 32, sizeof k), a += q2 * k;
            memcpy(&k, kr + 48, sizeof k), a += q3 * k;
            P[i] = a;
        }
        return;
    }
#pragma GCC unroll 16
    for (int32_t i = 0; i < ATT_LANES; i++) P[i] = (att_v16){0};
    for (int32_t c = 0; c < nch; c++) {
        att_v16 qc;
        memcpy(&qc, qp + (size_t)ATT_LANES * c, sizeof qc);
#pragma GCC unroll 16
        for (int32_t i = 0; i < ATT_LANES; i++) {
            const float *kr = i < split ? k0 + i * ks : k1 + (i - split) * ks;
            P[i] += qc * load_chunk(kr, c, HD);
        }
    }
}

/* lane_dots2 on one run of rows: key i's row at k0 + i * ks. */
__attribute__((always_inline)) static inline void lane_dots(att_v16 *P, const float *qp,
                                                             const float *k0, size_t ks,
                                                             int32_t HD, const int32_t nch) {
    lane_dots2(P, qp, k0, k0, ATT_LANES, ks, HD, nch);
}

/* The same with key i's row at kr[i] (a tile across the prefix's end, or past the last key).
 * Inlined like lane_dots, into dots_tile's ISA clone and contraction: both paths must round alike
 * (a separate function here was compiled without fma and gave a partial tile other bits). */
__attribute__((always_inline)) static inline void lane_dots_rows(att_v16 *P, const float *qp,
                                                                  const float *const *kr,
                                                                  int32_t HD) {
    for (int32_t i = 0; i < ATT_LANES; i++) P[i] = (att_v16){0};
    for (int32_t c = 0; c < (HD + ATT_LANES - 1) / ATT_LANES; c++) {
        att_v16 qc;
        memcpy(&qc, qp + (size_t)ATT_LANES * c, sizeof qc);
        for (int32_t i = 0; i < ATT_LANES; i++) P[i] += qc * load_chunk(kr[i], c, HD);
    }
}

/* The rows of one tile's 16 keys j0 .. j0+15: one run of rows from *k0 (*k1 NULL, *split 16),
 * two runs split at *split (a paged tile across two pages), or kr[i] key by key (*k0 NULL: a
 * tile across the prefix's end or past the last key). */
__attribute__((always_inline)) static inline void tile_rows(const cpu_att_keys *K, int32_t j0,
                                                             const float **k0, const float **k1,
                                                             int32_t *split, const float **kr) {
    const int32_t j1 = j0 + ATT_LANES;
    *k0 = NULL, *k1 = NULL, *split = ATT_LANES;
    if (K->pt) { /* paged: a tile within one page is contiguous, one across two is two runs */
        if (j1 <= K->n && att_one_page(K, j0, j1)) {
            *k0 = att_paged(K, K->k, j0);
            return;
        }
        if (j1 <= K->n) {
            *split = K->pg - att_page_pos(K, j0);
            *k1 = att_paged(K, K->k, j0 + *split), *k0 = att_paged(K, K->k, j0);
            return;
        }
    } else if (j1 <= K->np) { /* the whole tile in the prefix, or in the row's own keys */
        *k0 = K->pk + (size_t)j0 * K->ks;
        return;
    } else if (j0 >= K->np && j1 <= K->n) {
        *k0 = K->k + (size_t)(j0 - K->np) * K->ks;
        return;
    }
    for (int32_t i = 0; i < ATT_LANES; i++) kr[i] = att_key(K, j0 + i); /* across, or past */
}

/* The tile's keys transposed: Kt[d * 16 + i] = float d of key i (0 from HD up to nch * 16),
 * so that one vector holds one float of all 16 keys. */
__attribute__((always_inline)) static inline void tile_transpose(float *Kt, const float *k0,
                                                                  const float *k1, int32_t split,
                                                                  const float *const *kr,
                                                                  size_t ks, int32_t HD,
                                                                  const int32_t nch) {
    for (int32_t i = 0; i < ATT_LANES; i++) {
        const float *row = !k0 ? kr[i] : i < split ? k0 + i * ks : k1 + (i - split) * ks;
        for (int32_t d = 0; d < HD; d++) Kt[d * ATT_LANES + i] = row[d];
        for (int32_t d = HD; d < nch * ATT_LANES; d++) Kt[d * ATT_LANES + i] = 0.0f;
    }
}

/* The shuffles of transpose16: stage b swaps bit b of a vector's index (the key) with bit b of
 * a lane's (the float): x[p], x[p | 2^b] (bit b of p clear) become their lanes with that bit
 * clear (lo) and set (hi), each taking the other vector's lanes across the bit. */
static const att_i16 att_tr_lo[4] = {
    {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
    {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
    {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
    {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23}};
static const att_i16 att_tr_hi[4] = {
    {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31},
    {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31},
    {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31},
    {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}};

/* x (16 vectors of 16 floats) transposed in registers: x[d] lane i = the old x[i] lane d. */
__attribute__((always_inline)) static inline void transpose16(att_v16 *x) {
#pragma GCC unroll 4
    for (int32_t b = 0; b < 4; b++)
#pragma GCC unroll 16
        for (int32_t p = 0; p < ATT_LANES; p++) {
            if (p & (1 << b)) continue;
            att_v16 lo = __builtin_shuffle(x[p], x[p | 1 << b], att_tr_lo[b]);
            att_v16 hi = __builtin_shuffle(x[p], x[p | 1 << b], att_tr_hi[b]);
            x[p] = lo, x[p | 1 << b] = hi;
        }
}

/* tile_transpose for HD 64 with vector shuffles (the same Kt): 16 keys' chunk c at a time.
 * Single instructions (vpermt2ps) in the AVX-512 clone only: in the others GCC builds each
 * shuffle from scalar moves, slower than tile_transpose's copy. */
__attribute__((always_inline)) static inline void tile_transpose64(float *Kt, const float *k0,
                                                                    const float *k1,
                                                                    int32_t split,
                                                                    const float *const *kr,
                                                                    size_t ks) {
#pragma GCC unroll 1
    for (int32_t c = 0; c < 4; c++) {
        att_v16 x[ATT_LANES];
#pragma GCC unroll 16
        for (int32_t i = 0; i < ATT_LANES; i++) {
            const float *row = !k0 ? kr[i] : i < split ? k0 + i * ks : k1 + (i - split) * ks;
            memcpy(&x[i], row + ATT_LANES * c, sizeof x[i]);
        }
        transpose16(x);
        memcpy(Kt + (size_t)ATT_LANES * ATT_LANES * c, x, sizeof x);
    }
}

__attribute__((always_inline)) static inline att_v16 kt_row(const float *Kt, int32_t d) {
    att_v16 v;
    memcpy(&v, Kt + (size_t)d * ATT_LANES, sizeof v);
    return v;
}

/* Lane sum l of q (zero-padded to nch chunks) against the 16 keys of Kt, one key per vector
 * lane: q[l + 16c] k[l + 16c] over c = 0 .. nch-1 in order, as lane_dots makes lane l of each
 * key (past HD both are 0 in both, so the sums are the same there too). */
__attribute__((always_inline)) static inline att_v16 leaf_dots(const float *Kt, const float *q,
                                                               int32_t l, const int32_t nch) {
    att_v16 a = {0};
#pragma GCC unroll 16
    for (int32_t c = 0; c < nch; c++)
        a += q[l + ATT_LANES * c] * kt_row(Kt, l + ATT_LANES * c);
    return a;
}

/* The 16 keys' dots with q from the transposed tile: tree16 over the lane sums, taken
 * vector-wide, so the same bits as reduce16 of lane_dots without a shuffle. */
__attribute__((always_inline)) static inline att_v16 tree_dots(const float *Kt, const float *q,
                                                               const int32_t nch) {
#define ATT_H(l) (leaf_dots(Kt, q, l, nch) + leaf_dots(Kt, q, (l) + 8, nch))
    att_v16 e0 = (ATT_H(0) + ATT_H(4)) + (ATT_H(2) + ATT_H(6));
    att_v16 e1 = (ATT_H(1) + ATT_H(5)) + (ATT_H(3) + ATT_H(7));
#undef ATT_H
    return e0 + e1;
}

/* leaf_dots of four queries: each row of Kt loaded once for the four. */
__attribute__((always_inline)) static inline void leaf_dots4(att_v16 *a, const float *Kt,
                                                              const float *const *q, int32_t l,
                                                              const int32_t nch) {
#pragma GCC unroll 4
    for (int32_t t = 0; t < 4; t++) a[t] = (att_v16){0};
#pragma GCC unroll 16
    for (int32_t c = 0; c < nch; c++) {
        att_v16 k = kt_row(Kt, l + ATT_LANES * c);
#pragma GCC unroll 4
        for (int32_t t = 0; t < 4; t++) a[t] += q[t][l + ATT_LANES * c] * k;
    }
}

/* o[t] = the pair sum h_l of tree16 for query t: leaf l + leaf l+8. */
__attribute__((always_inline)) static inline void half_dots4(att_v16 *o, const float *Kt,
                                                              const float *const *q, int32_t l,
                                                              const int32_t nch) {
    att_v16 a[4], b[4];
    leaf_dots4(a, Kt, q, l, nch);
    leaf_dots4(b, Kt, q, l + 8, nch);
#pragma GCC unroll 4
    for (int32_t t = 0; t < 4; t++) o[t] = a[t] + b[t];
}

/* tree_dots of four queries (the same sums, in the same order, for each): one query alone
 * loads a row of Kt for every four FMAs, as many loads as its broadcasts of q, and the loads
 * bound it; four share them. */
__attribute__((always_inline)) static inline void tree_dots4(att_v16 *r, const float *Kt,
                                                              const float *const *q,
                                                              const int32_t nch) {
    att_v16 x[4], y[4], e0[4];
    half_dots4(x, Kt, q, 0, nch), half_dots4(y, Kt, q, 4, nch);
#pragma GCC unroll 4
    for (int32_t t = 0; t < 4; t++) e0[t] = x[t] + y[t];
    half_dots4(x, Kt, q, 2, nch), half_dots4(y, Kt, q, 6, nch);
#pragma GCC unroll 4
    for (int32_t t = 0; t < 4; t++) e0[t] = e0[t] + (x[t] + y[t]);
    half_dots4(x, Kt, q, 1, nch), half_dots4(y, Kt, q, 5, nch);
#pragma GCC unroll 4
    for (int32_t t = 0; t < 4; t++) r[t] = x[t] + y[t];
    half_dots4(x, Kt, q, 3, nch), half_dots4(y, Kt, q, 7, nch);
#pragma GCC unroll 4
    for (int32_t t = 0; t < 4; t++) r[t] = e0[t] + (r[t] + (x[t] + y[t]));
}

/* sc[i * ld + j0 .. +15] = scale * the dots of query i (qp: nch chunks each) with the
 * transposed tile Kt, for the queries with nvalid[i] > j0: four at a time, the rest alone. */
__attribute__((always_inline)) static inline void tree_tile(float *sc, int32_t ld,
                                                             const float *Kt, const float *qp,
                                                             const int32_t *nvalid, int32_t nq,
                                                             int32_t j0, float scale,
                                                             const int32_t nch) {
    int32_t live[4], n = 0; /* the live queries not yet done */
    for (int32_t i = 0; i <= nq; i++) {
        if (i < nq && nvalid[i] > j0) live[n++] = i;
        if (n == 4 && nch == 4) { /* HD 64 (other HD: one query at a time, less code) */
            const float *q[4];
            att_v16 r[4];
            for (int32_t t = 0; t < 4; t++) q[t] = qp + (size_t)live[t] * nch * ATT_LANES;
            tree_dots4(r, Kt, q, nch);
            for (int32_t t = 0; t < 4; t++) {
                r[t] *= scale;
                memcpy(sc + (size_t)live[t] * ld + j0, &r[t], sizeof r[t]);
            }
            n = 0;
        }
        if (n == 4 || i == nq) { /* other HD, or the last one to three */
            for (int32_t t = 0; t < n; t++) {
                att_v16 r = tree_dots(Kt, qp + (size_t)live[t] * nch * ATT_LANES, nch) * scale;
                memcpy(sc + (size_t)live[t] * ld + j0, &r, sizeof r);
            }
            n = 0;
        }
    }
}

/* sc[i * ld + j0 .. +15] = scale * dot(q_i, key j0 + l) for the 16 keys of the tile at j0 and
 * every query i < nq with nvalid[i] > j0; qp: the queries zero-padded to whole chunks (nch * 16
 * floats each). The tile's keys stay in L1 while every query passes over them. avx512: this
 * CPU's level is AVX-512 (cpu_simd_level), so the AVX-512 clone runs (tile_transpose64). */
CPU_VECTOR_CLONES ATT_CONTRACT
static void dots_tile(float *sc, int32_t ld, const float *qp, const int32_t *nvalid, int32_t nq,
                      const cpu_att_keys *K, int32_t j0, int32_t HD, float scale, int avx512) {
    att_v16 P[ATT_LANES];
    const int32_t nch = (HD + ATT_LANES - 1) / ATT_LANES;
    const float *k0, *k1, *kr[ATT_LANES];
    int32_t split;
    const size_t ks = (size_t)K->ks;
    tile_rows(K, j0, &k0, &k1, &split, kr);
    int32_t nlive = 0;
    for (int32_t i = 0; i < nq; i++) nlive += nvalid[i] > j0;
    if (nlive >= ATT_TRANSPOSE_MIN && HD == 4 * ATT_LANES) { /* transpose once: HD 64, */
        float Kt[4 * ATT_LANES * ATT_LANES] __attribute__((aligned(64))); /* unrolled */
        if (avx512)
            tile_transpose64(Kt, k0, k1, split, kr, ks);
        else
            tile_transpose(Kt, k0, k1, split, kr, ks, 4 * ATT_LANES, 4);
        tree_tile(sc, ld, Kt, qp, nvalid, nq, j0, scale, 4);
        return;
    }
    if (nlive >= ATT_TRANSPOSE_MIN && nch <= ATT_TRANSPOSE_NCH) { /* any other HD <= 256 */
        float Kt[ATT_TRANSPOSE_NCH * ATT_LANES * ATT_LANES] __attribute__((aligned(64)));
        tile_transpose(Kt, k0, k1, split, kr, ks, HD, nch);
        tree_tile(sc, ld, Kt, qp, nvalid, nq, j0, scale, nch);
        return;
    }
    for (int32_t i = 0; i < nq; i++) {
        if (nvalid[i] <= j0) continue;
        const float *q = qp + (size_t)i * nch * ATT_LANES;
        if (k1 && nch == 4) /* a paged tile across two pages */
            lane_dots2(P, q, k0, k1, split, ks, HD, 4);
        else if (k1)
            lane_dots2(P, q, k0, k1, split, ks, HD, nch);
        else if (k0 && nch == 4) /* HD 64: the chunk loop with a constant count */
            lane_dots(P, q, k0, ks, HD, 4);
        else if (k0)
            lane_dots(P, q, k0, ks, HD, nch);
        else
            lane_dots_rows(P, q, kr, HD);
        att_v16 r = reduce16(P) * scale;
        memcpy(sc + (size_t)i * ld + j0, &r, sizeof r);
    }
}
#else
/* The same sums with plain loops: each lane, and tree16, in the order above. */
static void dots_tile(float *sc, int32_t ld, const float *qp, const int32_t *nvalid, int32_t nq,
                      const cpu_att_keys *K, int32_t j0, int32_t HD, float scale, int avx512) {
    (void)avx512;
    const int32_t hp = (HD + ATT_LANES - 1) / ATT_LANES * ATT_LANES;
    for (int32_t i = 0; i < nq; i++) {
        if (nvalid[i] <= j0) continue;
        for (int32_t l = 0; l < ATT_LANES; l++) {
            const float *k = att_key(K, j0 + l), *q = qp + (size_t)i * hp;
            float P[ATT_LANES] = {0};
            for (int32_t d = 0; d < HD; d++) P[d % ATT_LANES] += q[d] * k[d];
            sc[(size_t)i * ld + j0 + l] = tree16(P) * scale;
        }
    }
}
#endif

/* The row's whole tiles of keys: nvalid rounded down to a multiple of 16 (returned), and kt the
 * mask of its last, partial tile (keys past nvalid 0). The softmax's loops run over whole
 * vectors only, that tile masked by kt, so they have no scalar tail (up to 15 exps one by one:
 * as long as the vector part of a row of ~270 keys). The tile's scores past nvalid are there
 * and finite: dots_tile writes whole tiles. */
static inline int32_t last_tile(int32_t *kt, const int32_t *km, int32_t nvalid) {
    const int32_t nf = nvalid / ATT_LANES * ATT_LANES;
    for (int32_t l = 0; l < ATT_LANES; l++) kt[l] = nf + l < nvalid ? km[nf + l] : 0;
    return nf;
}

/* The largest score of row p among its valid keys (j < nvalid, km[j] != 0); -inf if none.
 * Its own pass, taken for every row of a block before their softmaxes: its last step is a
 * chain of 16 scalar maxes (GCC's reduction epilogue), which the next row's pass can overlap
 * there (~1 % of the forward's time, bench_kernels). Max is exact: the same bits in any order. */
CPU_VECTOR_CLONES
static float row_max(const float *p, const int32_t *km, int32_t nvalid) {
    int32_t kt[ATT_LANES];
    const int32_t nf = last_tile(kt, km, nvalid);
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int32_t j = 0; j < nf; j++) {
        float s = km[j] ? p[j] : -INFINITY;
        mx = s > mx ? s : mx;
    }
    if (nf < nvalid) {
#pragma omp simd reduction(max : mx)
        for (int32_t l = 0; l < ATT_LANES; l++) {
            float s = kt[l] ? p[nf + l] : -INFINITY;
            mx = s > mx ? s : mx;
        }
    }
    return mx;
}

/* Row p (n16 floats, scores of keys 0..nvalid-1 first, mx their row_max) into probabilities:
 * p_j for the valid keys, 0 for the rest up to n16. Writes lse and 1/sum. */
CPU_VECTOR_CLONES CPU_FMA_CONTRACT
static void softmax_lanes(float *p, float *lse, float *inv, const int32_t *km, int32_t nvalid,
                          int32_t n16, float mx) {
    int32_t kt[ATT_LANES];
    const int32_t nf = last_tile(kt, km, nvalid);
    float lane[ATT_LANES] = {0};
#pragma omp simd
    for (int32_t j = 0; j < nf; j++) {
        float e = cpu_expf(p[j] - mx); /* computed everywhere, kept where real: no branch */
        p[j] = km[j] ? e : 0.0f;
    }
    if (nf < nvalid) {
#pragma omp simd
        for (int32_t l = 0; l < ATT_LANES; l++) {
            float e = cpu_expf(p[nf + l] - mx);
            p[nf + l] = kt[l] ? e : 0.0f;
        }
    }
    for (int32_t j = (nvalid + ATT_LANES - 1) / ATT_LANES * ATT_LANES; j < n16; j++) p[j] = 0.0f;
#if defined(__GNUC__) && !defined(__clang__)
    att_v16 acc = {0}; /* lane l's sum in a register, not stored back per tile */
    for (int32_t j0 = 0; j0 < n16; j0 += ATT_LANES) {
        att_v16 x;
        memcpy(&x, p + j0, sizeof x);
        acc += x;
    }
    memcpy(lane, &acc, sizeof acc);
#else
    for (int32_t j0 = 0; j0 < n16; j0 += ATT_LANES)
        for (int32_t l = 0; l < ATT_LANES; l++) lane[l] += p[j0 + l];
#endif
    float sum = tree16(lane);
    *lse = mx + logf(sum);
    *inv = 1.0f / sum;
}

#if defined(__GNUC__) && !defined(__clang__)
/* acc[i] chunk c (16 floats of HD) continued (first: from 0) by p[i][j] * v_j over j0 <= j <
 * j1, ascending, for the m queries, in m vector registers. */
__attribute__((always_inline)) static inline void values_chunk(float *acc,
                                                                const float *const *p,
                                                                const cpu_att_keys *K, int32_t j0,
                                                                int32_t j1, int32_t HD, int32_t c,
                                                                int first, const int32_t m) {
    att_v16 A[ATT_QP];
    int32_t n = HD - ATT_LANES * c < ATT_LANES ? HD - ATT_LANES * c : ATT_LANES;
#pragma GCC unroll 8
    for (int32_t i = 0; i < m; i++) {
        A[i] = (att_v16){0};
        if (!first)
            memcpy(&A[i], acc + (size_t)i * HD + (size_t)ATT_LANES * c, (size_t)n * sizeof(float));
    }
    for (int32_t j = j0; j < j1; j++) {
        att_v16 v = load_chunk(att_value(K, j), c, HD);
#pragma GCC unroll 8
        for (int32_t i = 0; i < m; i++) A[i] += p[i][j] * v;
    }
    for (int32_t i = 0; i < m; i++)
        memcpy(acc + (size_t)i * HD + (size_t)ATT_LANES * c, &A[i], (size_t)n * sizeof(float));
}

/* The rows of values j .. j + *len - 1 lie ks apart from the one returned (a run within the
 * prefix, the own keys or one page). */
static inline const float *value_run(const cpu_att_keys *K, int32_t j, int32_t jn, int32_t *len) {
    int32_t end = jn;
    if (K->pt)
        end = j + K->pg - att_page_pos(K, j);
    else if (j < K->np)
        end = K->np;
    *len = (end < jn ? end : jn) - j;
    return att_value(K, j);
}

/* HD 64, four queries: acc[i] continued (first: from 0) by p[i][j] * v_j over j0 <= j < j1,
 * ascending, each value row read once for the four (16 accumulators in registers: named, as GCC
 * keeps an array of vectors in memory). The sums of values_chunk. */
__attribute__((always_inline)) static inline void values_rows4(float *acc, const float *const *p,
                                                                const cpu_att_keys *K, int32_t j0,
                                                                int32_t j1, int first) {
    att_v16 a[16] = {{0}};
    if (!first) memcpy(a, acc, sizeof a);
    att_v16 a00 = a[0], a01 = a[1], a02 = a[2], a03 = a[3], a10 = a[4], a11 = a[5], a12 = a[6],
            a13 = a[7], a20 = a[8], a21 = a[9], a22 = a[10], a23 = a[11], a30 = a[12],
            a31 = a[13], a32 = a[14], a33 = a[15];
    const float *p0 = p[0], *p1 = p[1], *p2 = p[2], *p3 = p[3];
    for (int32_t j = j0, len; j < j1; j += len) {
        const float *v = value_run(K, j, j1, &len);
        for (int32_t r = j; r < j + len; r++, v += K->ks) {
            att_v16 v0, v1, v2, v3;
            memcpy(&v0, v, sizeof v0), memcpy(&v1, v + 16, sizeof v1);
            memcpy(&v2, v + 32, sizeof v2), memcpy(&v3, v + 48, sizeof v3);
            a00 += p0[r] * v0, a01 += p0[r] * v1, a02 += p0[r] * v2, a03 += p0[r] * v3;
            a10 += p1[r] * v0, a11 += p1[r] * v1, a12 += p1[r] * v2, a13 += p1[r] * v3;
            a20 += p2[r] * v0, a21 += p2[r] * v1, a22 += p2[r] * v2, a23 += p2[r] * v3;
            a30 += p3[r] * v0, a31 += p3[r] * v1, a32 += p3[r] * v2, a33 += p3[r] * v3;
        }
    }
    const att_v16 out[16] = {a00, a01, a02, a03, a10, a11, a12, a13,
                             a20, a21, a22, a23, a30, a31, a32, a33};
    memcpy(acc, out, sizeof out);
}

/* acc[i] (HD) continued (first: from 0) by p[i][j] * v_j over j0 <= j < j1, ascending, for
 * m <= ATT_QP queries. */
CPU_VECTOR_CLONES ATT_CONTRACT
static void values_pass(float *acc, const float *const *p, int32_t m, const cpu_att_keys *K,
                        int32_t j0, int32_t j1, int32_t HD, int first) {
    if (HD == 4 * ATT_LANES) { /* four queries at a time, every chunk of a row at once */
        for (int32_t i = 0; i < m; i += 4) {
            float part[4 * 64] __attribute__((aligned(64)));
            const float *p4[4];
            const int32_t r = m - i < 4 ? m - i : 4; /* r < 4: spare rows in part */
            for (int32_t t = 0; t < 4; t++) p4[t] = p[i + t < m ? i + t : i];
            float *a = r == 4 ? acc + (size_t)i * 64 : part;
            if (r < 4) memcpy(part, acc + (size_t)i * 64, (size_t)r * 64 * sizeof(float));
            values_rows4(a, p4, K, j0, j1, first);
            if (r < 4) memcpy(acc + (size_t)i * 64, part, (size_t)r * 64 * sizeof(float));
        }
        return;
    }
    for (int32_t c = 0; c < (HD + ATT_LANES - 1) / ATT_LANES; c++) switch (m) {
        case 1: values_chunk(acc, p, K, j0, j1, HD, c, first, 1); break;
        case 2: values_chunk(acc, p, K, j0, j1, HD, c, first, 2); break;
        case 3: values_chunk(acc, p, K, j0, j1, HD, c, first, 3); break;
        case 4: values_chunk(acc, p, K, j0, j1, HD, c, first, 4); break;
        case 5: values_chunk(acc, p, K, j0, j1, HD, c, first, 5); break;
        case 6: values_chunk(acc, p, K, j0, j1, HD, c, first, 6); break;
        case 7: values_chunk(acc, p, K, j0, j1, HD, c, first, 7); break;
        default: values_chunk(acc, p, K, j0, j1, HD, c, first, 8); break;
        }
}
#else
/* acc[i] (HD) continued (first: from 0) by p[i][j] * v_j over j0 <= j < j1, ascending, for
 * m <= ATT_QP queries. */
static void values_pass(float *acc, const float *const *p, int32_t m, const cpu_att_keys *K,
                        int32_t j0, int32_t j1, int32_t HD, int first) {
    if (first) memset(acc, 0, (size_t)m * HD * sizeof(float));
    for (int32_t j = j0; j < j1; j++) {
        const float *v = att_value(K, j);
        for (int32_t i = 0; i < m; i++)
            for (int32_t d = 0; d < HD; d++) acc[(size_t)i * HD + d] += p[i][j] * v[d];
    }
}
#endif

static int32_t round16(int32_t n) { return (n + ATT_LANES - 1) / ATT_LANES * ATT_LANES; }

uint64_t cpu_attend_scratch(int32_t nq, int32_t nkeys, int32_t HD) {
    /* scores (nq, ld), the padded queries, the value accumulators (nq, HD), 1/sum */
    return (uint64_t)nq * round16(nkeys) + (uint64_t)nq * round16(HD) + (uint64_t)nq * HD +
           (uint64_t)nq;
}

void cpu_attend(float *out, int32_t os, float *lse, const float *q, int32_t qs,
                const cpu_att_keys *K, const int32_t *nvalid, int32_t nq, int32_t HD,
                float *work) {
    const float scale = 1.0f / sqrtf((float)HD);
    const int32_t hp = round16(HD);
    int32_t nmax = 0;
    for (int32_t i = 0; i < nq; i++) nmax = nvalid[i] > nmax ? nvalid[i] : nmax;
    const int32_t ld = round16(K->n), n16 = round16(nmax);
    float *sc = work, *qp = sc + (size_t)nq * ld, *acc = qp + (size_t)nq * hp;
    float *inv = acc + (size_t)nq * HD;
    for (int32_t i = 0; i < nq; i++) { /* (nq, hp): each query zero-padded to whole chunks */
        memcpy(qp + (size_t)i * hp, q + (size_t)i * qs, (size_t)HD * sizeof(float));
        memset(qp + (size_t)i * hp + HD, 0, (size_t)(hp - HD) * sizeof(float));
    }
    const int avx512 = cpu_simd_level(CPU_SIMD_ANY) == CPU_SIMD_AVX512;
    for (int32_t j0 = 0; j0 < nmax; j0 += ATT_LANES) { /* tile by tile, every query on each */
        dots_tile(sc, ld, qp, nvalid, nq, K, j0, HD, scale, avx512);
        if (K->tick) K->tick(K->tick_arg);
    }
    for (int32_t i = 0; i < nq; i++) /* inv holds each row's max until its softmax */
        inv[i] = nvalid[i] > 0 ? row_max(sc + (size_t)i * ld, K->km, nvalid[i]) : 0.0f;
    for (int32_t i = 0; i < nq; i++) {
        float *row = sc + (size_t)i * ld, li = 0.0f, mx = inv[i];
        inv[i] = 0.0f;
        if (nvalid[i] > 0)
            softmax_lanes(row, &li, &inv[i], K->km, nvalid[i], n16, mx);
        else
            memset(row, 0, (size_t)n16 * sizeof(float));
        if (lse) lse[i] = li;
    }
    /* the values in blocks of ATT_VB keys, every group of queries on a block while its rows
     * are in L1; each query's sums continue from block to block in order (one group: one
     * block, nothing to share) */
    const int32_t vb = nq > ATT_QP ? ATT_VB : nmax > 0 ? nmax : 1;
    for (int32_t j0 = 0; j0 < (nmax > 0 ? nmax : 1); j0 += vb)
        for (int32_t i0 = 0; i0 < nq; i0 += ATT_QP) {
            int32_t m = nq - i0 < ATT_QP ? nq - i0 : ATT_QP, jn = 0;
            const float *p[ATT_QP];
            for (int32_t i = 0; i < m; i++) {
                p[i] = sc + (size_t)(i0 + i) * ld;
                jn = nvalid[i0 + i] > jn ? nvalid[i0 + i] : jn;
            }
            if (j0 == 0 || j0 < jn)
                values_pass(acc + (size_t)i0 * HD, p, m, K, j0, j0 + vb < jn ? j0 + vb : jn, HD,
                            j0 == 0);
        }
    for (int32_t i = 0; i < nq; i++) {
        float *o = out + (size_t)i * os, s = inv[i];
        for (int32_t d = 0; d < HD; d++) o[d] = acc[(size_t)i * HD + d] * s;
    }
}
