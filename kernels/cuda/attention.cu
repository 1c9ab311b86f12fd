/*
 * attention.cu — causal grouped-query attention with a key padding mask on the GPU, flash style:
 * no (B,NH,T,T) buffer; the forward keeps only the log-sum-exp of each query row and the backward
 * recomputes the probabilities from it. Semantics as kernels/cpu/attention.c (the reference):
 *
 *   q (B,T,NH,HD), k/v (B,T,NKV,HD), mask (B,T) 1 = real, out (B,T,NH,HD), lse (B,NH,T)
 *   query head h reads kv head h / (NH/NKV); query t sees keys s <= t with mask[b,s] = 1;
 *   a padding query gets out = 0, lse = 0 (and dq = 0); score = q.k / sqrt(HD).
 *   since ABI 1.7 (packed rows) a mask value > 0 is a segment id: query t sees keys s <= t with
 *   mask[b,s] = mask[b,t], each segment as if it were a row of its own (0/1 masks: one segment).
 *   since ABI 1.8 (packed rows sharing a prompt) an id c >= 1 << GRPO_ATTN_CHILD_SHIFT is a child
 *   of the parent segment c >> GRPO_ATTN_CHILD_SHIFT: its query t sees every key of the parent
 *   (contiguous, before the child), then its own keys s <= t, one softmax; the parent's queries
 *   see the parent alone; the parent's dk/dv also sum its children's gradients.
 *
 * Segments (plain attention; prefix attention takes mask != 0 as real, as the cpu backend does):
 * a key's tile tag (kmask) is its mask value and a query sees it when the tag is its own or its
 * parent's (att_sees; a parent lies wholly before its children, so causality keeps a child's
 * query to the parent before it). The forward runs the queries of a tile one segment at a time
 * (att_run), each against its segment's keys from their first (att_seq.id), after a child's
 * parent's keys (att_with_parent: [parent | own] as prefix attention's [prefix | own]), so a
 * segment has the bits of the same tokens in a row of their own; dq walks the keys the tile's
 * segments reach (and their parents), dk/dv the queries up to the end of the key tile's segments
 * and of their children (att_reach), not the whole packed row.
 *
 * Tiles: a key tile is 32 keys, one per lane of a warp (ATT_BK), held in shared memory transposed,
 * Kt[d][j] with a row stride of 33 floats so that both "lane = key" reads (scores) and "lane = dim"
 * reads (output accumulation) hit 32 different banks. The head dimension is spread over the lanes
 * as DPL = ceil(HD/32) registers per lane (lane l holds dims l, l+32, ...); HD <= 128.
 *
 *   forward   block (query tile, h, b): each warp owns QPW queries (q, o, running max m and sum l
 *             in registers) and walks its row's key sequence (att_trim: the prefix's keys from
 *             its first real one, then the own keys from the first real one) in tiles of 32 keys
 *             counted from the sequence's first key, with an online softmax in fp32 (att_attend).
 *   backward  D = rowsum(dout * out) first (B,NH,T, a scratch slot), then two passes, so that no
 *             output is shared between blocks (no atomics; the same bits every run):
 *     dq      block (query tile, h, b), like the forward: dS = P * (dout.v - D) * scale,
 *             dq = sum_s dS k_s, accumulated in registers;
 *     dk, dv  block (key tile, kv head g, b): loops over the query heads of the group, in order,
 *             and over the query tiles at or after the key tile; P and dS of a (query tile x key
 *             tile) block go through shared memory, then each thread adds its (key, dims) share of
 *             dk += dS^T q and dv += P^T dout in registers. GQA's sum over the group's heads is
 *             this loop: deterministic. When B * NKV key-tile columns are too few to fill the GPU
 *             (small batches of a model with NKV = 2), blocks are per query head instead, each
 *             writing its share to a scratch (B,NH,T,HD), and a second kernel sums the group's
 *             shares in head order (still deterministic).
 *   decode    block (kv head g, row r) against the KV cache: one warp per query head of the
 *             group (several a warp, and more than one block, when the group has over 16), the
 *             cached keys from the row's first real slot walked by the forward's att_attend.
             On a paged cache (ABI 1.9, attention_decode_paged) the same kernel reads each key
             through the row's page table (att_seq.pg, att_own_off): the same bits.
 *
 * Decode and the training forward give a query the same bits (issue 32): both take the same key
 * sequence (from the first real key, so padding and where the keys lie do not matter), cut it
 * into the same tiles and run one routine (att_attend, then att_finish) on it, whose per-query
 * arithmetic does not depend on how many queries a warp holds. On the GPU each tile's load and
 * compute are in turn (no split of the keys over warps, which would need a merge in another
 * order): decode's latency per (row, head) is its whole cache, where the former kernel split it
 * over four warps; each key tile is read once per kv group instead of once per query head.
 * Prefix attention (grpo/ops.h 1.6: prefix_attention_forward/_backward) is the same kernels on a
 * longer row: a row's key columns are [its prefix's P keys (kp/vp of prefix_of[b], pmask) | its
 * own T keys], its query t is column P + t (att_seq, att_load_kv); the forward walks the sequence
 * [real prefix keys | real own keys] from the first of each, as decode does over a cache holding
 * [prefix | own keys]. Plain attention is P = 0: the same tiles, loads and sums, so the same bits.
 * The backward walks whole columns: its tile edges differ from the forward's, but each score is
 * the same sequential dot, so its P = exp(score - lse) sees the forward's numbers. The own
 * keys' dk/dv pass is unchanged (only a row's own queries see its own keys); dkp/dvp, which the
 * rows sharing a prefix all feed, get a pass of their own, block (prefix key tile, kv head,
 * prefix) looping over the rows of that prefix in row order (or per query head into a scratch,
 * then the group sum), and are ADDED to (+=), as grpo/ops.h asks: one block owns each element,
 * no atomics.
 *
 * Padded keys and queries are never loaded (their probabilities are exactly 0 by a select, their
 * gradients exactly 0), so whatever padding rows of q, k, v and dout hold cannot leak in; decode
 * never loads a position at or after len[r] or with cache_mask 0.
 * len[r] lives on the device: the decode kernel clamps it to [0, S] (the CPU backend checks it on
 * the host; here a check would cost a sync per layer and token).
 */
#include "compat.h"

#include <stdlib.h>

#include "cuda_backend.h"

#define ATT_BK 32       /* keys per tile: one per lane */
#define ATT_LD 33       /* row stride of the transposed tiles Kt/Vt (HD rows of ATT_BK + 1) */
#define ATT_WARPS 4
#define ATT_THREADS (ATT_WARPS * 32)
#define ATT_MAX_HD 128
#define ATT_MAX_WARPS 16 /* decode: the most warps of a block (the query heads of a group) */
#define FULL_MASK 0xffffffffu

/* Loops over the per-lane register arrays are unrolled on the GPU (so the arrays stay in
 * registers); the host compiler of the emulation does not know the pragma. */
#if defined(__CUDACC__) && !defined(GRPO_CUDA_EMU)
#define ATT_UNROLL _Pragma("unroll")
#else
#define ATT_UNROLL
#endif

/* Queries per warp (forward, dq) and per tile of the dk/dv pass, by DPL = ceil(HD/32): fewer for a
 * wide head, so that registers and the shared tiles (under 48 KiB) stay in bounds. */
#define ATT_QPW(dpl) ((dpl) <= 2 ? 8 : 4)
#define ATT_BQ2(dpl) ((dpl) <= 2 ? 32 : (dpl) == 3 ? 16 : 8)

static __device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }
static __device__ __forceinline__ int imax(int a, int b) { return a > b ? a : b; }

/* Where a decode row's keys lie in a paged KV cache (ABI 1.9, attention_decode_paged): own key j
 * of the sequence is slot off + j of the row, at position (off + j) % page of page
 * table[(off + j) / page], pages pstride floats apart from k (v). table NULL: not paged (own
 * key j at k + j * ks). */
struct att_pages {
    const int32_t *table; /* the row's (nblk) page ids */
    int page, off;
    long long pstride;
};

/* A key sequence at kv head g (rows of stride ks = NKV*HD): key j < np is prefix key j (pk, pv,
 * mask pm; pm NULL: none of them is real), key j >= np is own key j - np (k, v, mask m; paged
 * when pg.table is set: att_own_off); n keys in all. The backward walks whole rows (np = P, own
 * keys from column 0: query t is column P + t); the forward and decode walk the sequence from
 * the first real prefix key and the first real own key (att_trim), so that its tiles and lanes
 * depend on the keys alone. */
struct att_seq {
    const float *pk, *pv;
    const int32_t *pm;
    int np;
    const float *k, *v;
    const int32_t *m;
    int n;
    int id; /* 0: an own key is real when its mask is nonzero; else when its mask = id (a segment
             * of a packed row, ABI 1.7); id < 0: when it is a child of segment -id (1.8) */
    att_pages pg; /* decode on a paged cache; zeros elsewhere */
};

/* Float offset from sq.k (sq.v) of own key j's row (ks floats); -1 when its page is missing
 * (an id < 0: a host error; the key then reads as zeros). */
static __device__ __forceinline__ long long att_own_off(const att_seq &sq, int j, int ks) {
    if (!sq.pg.table) return (long long)j * ks;
    const int s = sq.pg.off + j, id = sq.pg.table[s / sq.pg.page];
    return id < 0 ? -1 : id * sq.pg.pstride + (long long)(s % sq.pg.page) * ks;
}

/* The parent segment of segment id (ABI 1.8), or 0 when id is no child. */
static __device__ __forceinline__ int att_parent(int id) { return id >> GRPO_ATTN_CHILD_SHIFT; }

/* Whether key j (< sq.n) of the sequence is real. */
static __device__ __forceinline__ bool att_col_real(const att_seq &sq, int j) {
    if (j < sq.np) return sq.pm && sq.pm[j];
    const int32_t x = sq.m[j - sq.np];
    if (!sq.id) return x != 0;
    return sq.id > 0 ? x == sq.id : x > 0 && att_parent(x) == -sq.id;
}

/* Key j's tag in a tile's kmask: 0 when it is not real (att_col_real), else 1 for a prefix key and
 * its mask value (its segment id) for an own key. */
static __device__ __forceinline__ int att_col_tag(const att_seq &sq, int j) {
    if (j >= sq.n || !att_col_real(sq, j)) return 0;
    return j < sq.np ? 1 : sq.m[j - sq.np];
}

/* Whether a query of mask value qid (nonzero) sees a key of tag kt (att_col_tag), causality
 * aside: seg (plain attention, ABI 1.7): kt = qid, the same segment, or (1.8) qid's parent;
 * else any real key. */
static __device__ __forceinline__ bool att_sees(int kt, int qid, bool seg) {
    return seg ? kt == qid || (kt != 0 && kt == att_parent(qid)) : kt != 0;
}

/* The real span of the sequence: first real key and last real + 1 (sq.n and 0 when none),
 * computed by the whole block (whole warps, at most ATT_MAX_WARPS). red: shared
 * int[2 * ATT_MAX_WARPS]. */
static __device__ void att_real_span(const att_seq &sq, int *red, int *first, int *end) {
    int lo = sq.n, hi = 0;
    for (int s = threadIdx.x; s < sq.n; s += blockDim.x)
        if (att_col_real(sq, s)) lo = imin(lo, s), hi = imax(hi, s + 1);
    for (int o = 16; o > 0; o >>= 1) {
        lo = imin(lo, __shfl_xor_sync(FULL_MASK, lo, o));
        hi = imax(hi, __shfl_xor_sync(FULL_MASK, hi, o));
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
    if (lane == 0) red[warp] = lo, red[ATT_MAX_WARPS + warp] = hi;
    __syncthreads();
    lo = red[0], hi = red[ATT_MAX_WARPS];
    for (int w = 1; w < nw; w++) lo = imin(lo, red[w]), hi = imax(hi, red[ATT_MAX_WARPS + w]);
    __syncthreads(); /* red may be reused */
    *first = lo, *end = hi;
}

/* Kt, Vt (HD rows of ATT_LD) = the key/value tile of keys s0.. of the sequence (0 for padding and
 * keys >= sq.n, which are never read), kmask (ATT_BK) their tags (att_col_tag: 0 = not real).
 * Coalesced reads. */
static __device__ void att_load_kv(float *Kt, float *Vt, int *kmask, const att_seq &sq, int s0,
                                   int ks, int HD) {
    for (int i = threadIdx.x; i < ATT_BK * HD; i += blockDim.x) {
        int j = i / HD, d = i % HD, s = s0 + j;
        const float *ksrc = s < sq.np ? sq.pk : sq.k, *vsrc = s < sq.np ? sq.pv : sq.v;
        /* a key's place is read only when it is real (a paged row's table ends at its len) */
        long long off = s < sq.n && att_col_real(sq, s)
                            ? s < sq.np ? (long long)s * ks : att_own_off(sq, s - sq.np, ks)
                            : -1;
        if (Kt) Kt[d * ATT_LD + j] = off >= 0 ? ksrc[off + d] : 0.0f;
        if (Vt) Vt[d * ATT_LD + j] = off >= 0 ? vsrc[off + d] : 0.0f;
    }
    if (threadIdx.x < ATT_BK) kmask[threadIdx.x] = att_col_tag(sq, s0 + threadIdx.x);
}

/* The prefix-attention arguments (grpo/ops.h): kp/vp (BP,P,NKV,HD), pmask (BP,P), prefix_of (B).
 * Plain attention passes P = 0 (and NULLs). */
struct att_prefix_args {
    const float *kp, *vp;
    const int32_t *pmask, *prefix_of;
    int BP, P;
};

/* Row b's keys at kv head g as whole columns: [its prefix's P keys | its own first lim keys]
 * (k, v (B,T,NKV,HD), mask (B,T)). prefix_of lives on the device (a host check would cost a sync
 * per layer): a row whose prefix_of[b] is outside [0, BP) sees no prefix key. */
static __device__ att_seq att_row_keys(const att_prefix_args &pa, const float *k, const float *v,
                                       const int32_t *mask, int b, int g, int T, int lim,
                                       int ks, int HD) {
    const size_t own = (size_t)b * T * ks + (size_t)g * HD;
    att_seq r = {NULL, NULL, NULL, pa.P, k ? k + own : NULL, v ? v + own : NULL,
                 mask + (size_t)b * T, pa.P + lim, 0, {}};
    const int j = pa.P > 0 ? pa.prefix_of[b] : -1;
    if (j >= 0 && j < pa.BP) {
        r.pk = pa.kp + (size_t)j * pa.P * ks + (size_t)g * HD;
        r.pv = pa.vp + (size_t)j * pa.P * ks + (size_t)g * HD;
        r.pm = pa.pmask + (size_t)j * pa.P;
    }
    return r;
}

/* The sequence a query sees, as attend.c (kernels/cpu) takes it: the prefix part of `row` from
 * its first real key, then the own part from its first real key, *k0 (row.n - row.np when none);
 * *kend: the last real own key + 1 (0 when none). Holes after the first real key stay (they are
 * masked). Computed by the whole block. */
static __device__ att_seq att_trim(const att_seq &row, int ks, int *red, int *k0, int *kend) {
    const att_seq pre = {row.pk, row.pv, row.pm, row.np, NULL, NULL, NULL, row.np, 0, {}};
    const att_seq own = {NULL, NULL, NULL, 0, row.k, row.v, row.m, row.n - row.np, row.id,
                         {}};
    int p0, pend;
    att_real_span(pre, red, &p0, &pend);
    att_real_span(own, red, k0, kend);
    att_seq r = {NULL, NULL, NULL, row.np - p0, NULL, NULL, row.m + *k0, 0, row.id, row.pg};
    if (r.np > 0) r.pk = row.pk + (size_t)p0 * ks, r.pv = row.pv + (size_t)p0 * ks;
    if (r.np > 0) r.pm = row.pm + p0;
    if (row.pg.table) { /* paged: the keys stay where they are, counted from slot k0 */
        r.k = row.k, r.v = row.v, r.pg.off += *k0;
    } else {
        if (row.k) r.k = row.k + (size_t)*k0 * ks;
        if (row.v) r.v = row.v + (size_t)*k0 * ks;
    }
    r.n = r.np + own.n - *k0;
    return r;
}

/* A child's sequence (ABI 1.8): *sq (att_trim's of a plain row: no prefix keys) gains, as its
 * prefix part, the keys of segment id's parent among the row's own keys before the child's first,
 * k0: the parent whole (a parent is contiguous and precedes its children), so a child's queries
 * walk [parent | own keys] as prefix attention's walk [prefix | own keys]. *sq is left as it is
 * when id is no child or its parent is not there. Computed by the whole block. */
static __device__ void att_with_parent(att_seq *sq, const att_seq &row, int id, int k0, int ks,
                                       int *red) {
    if (!att_parent(id)) return; /* block-uniform */
    att_seq par = row;
    par.n = k0, par.id = att_parent(id);
    int f, e;
    att_real_span(par, red, &f, &e);
    if (e == 0) return;
    sq->pk = row.k + (size_t)f * ks, sq->pv = row.v + (size_t)f * ks, sq->pm = row.m + f;
    sq->np = e - f, sq->n += e - f;
}

/* The run of queries from a (< tend) of one class: with seg (plain attention) one mask value,
 * else (prefix attention) real or padding alike. Returns its end; *id: the class (0: padding;
 * with seg the segment id, else 1). Block-uniform: every thread reads the same mask entries. */
static __device__ __forceinline__ int att_run(const int32_t *mb, int a, int tend, bool seg,
                                              int *id) {
    const int c = seg ? mb[a] : mb[a] != 0;
    int e = a + 1;
    while (e < tend && (seg ? mb[e] : mb[e] != 0) == c) e++;
    *id = c;
    return e;
}

/* What att_reach spans: the keys that queries see (dq), or the queries that see keys (dk/dv). */
enum att_reach_dir { ATT_REACH_KEYS, ATT_REACH_QUERIES };

/* The columns [*first, *end) of `cols` (a row's [prefix | own keys]) that the positions
 * t0 .. tend-1 of the row (mask mb) reach: without seg, the real span of cols; with seg (plain
 * attention, cols the own keys) the union of the real spans of the segments of those positions
 * and, ABI 1.8, of their parents (dir ATT_REACH_KEYS: the keys a child's queries see) or of
 * their children (ATT_REACH_QUERIES: the queries that see a parent's keys); first = n, end = 0
 * when they are all padding. Computed by the whole block. */
static __device__ void att_reach(att_seq cols, const int32_t *mb, int t0, int tend, bool seg,
                                 att_reach_dir dir, int *red, int *first, int *end) {
    if (!seg) {
        att_real_span(cols, red, first, end);
        return;
    }
    int lo = cols.n, hi = 0;
    for (int a = t0, e, id; a < tend; a = e) { /* block-uniform */
        e = att_run(mb, a, tend, true, &id);
        if (!id) continue;
        const int kin = dir == ATT_REACH_KEYS ? att_parent(id) : att_parent(id) ? 0 : id;
        for (int pass = 0; pass < (kin ? 2 : 1); pass++) {
            cols.id = !pass ? id : dir == ATT_REACH_KEYS ? kin : -kin;
            int f, x;
            att_real_span(cols, red, &f, &x);
            lo = imin(lo, f), hi = imax(hi, x);
        }
    }
    *first = lo, *end = hi;
}

/* acc[i] += x_i . tile[:, lane] for the QPW register-held vectors x (DPL per lane, lane l holding
 * dims l, l+32, ...): lane = key. The dims are broadcast by shuffles, the tile is read once per
 * dim. */
template <int DPL, int QPW>
static __device__ __forceinline__ void att_dots(float acc[QPW], const float x[QPW][DPL],
                                                const float *tile, int HD, int lane) {
    ATT_UNROLL
    for (int c = 0; c < DPL; c++)
        for (int dl = 0; dl < 32; dl++) {
            int d = c * 32 + dl;
            if (d >= HD) break; /* warp-uniform */
            float td = tile[d * ATT_LD + lane];
            ATT_UNROLL
            for (int i = 0; i < QPW; i++) acc[i] += __shfl_sync(FULL_MASK, x[i][c], dl) * td;
        }
}

/* acc[i][c] += sum_j w_i[j] * tile[c*32 + lane][j]: lane = dim, w_i held by lane j. */
template <int DPL, int QPW>
static __device__ __forceinline__ void att_accum(float acc[QPW][DPL], const float w[QPW],
                                                 const float *tile, int HD, int lane) {
    for (int j = 0; j < ATT_BK; j++) {
        float td[DPL];
        ATT_UNROLL
        for (int c = 0; c < DPL; c++) {
            int d = c * 32 + lane;
            td[c] = d < HD ? tile[d * ATT_LD + j] : 0.0f;
        }
        ATT_UNROLL
        for (int i = 0; i < QPW; i++) {
            float wj = __shfl_sync(FULL_MASK, w[i], j);
            ATT_UNROLL
            for (int c = 0; c < DPL; c++) acc[i][c] += wj * td[c];
        }
    }
}

/* x (DPL per lane) = row[0..HD) or zeros. */
template <int DPL>
static __device__ __forceinline__ void att_load_row(float x[DPL], const float *row, bool real,
                                                    int HD, int lane) {
    ATT_UNROLL
    for (int c = 0; c < DPL; c++) {
        int d = c * 32 + lane;
        x[c] = real && d < HD ? row[d] : 0.0f;
    }
}

/* ---- one query against a key sequence: the forward's and decode's shared arithmetic ------ */

/* The QPW queries of a warp (qr, DPL per lane) against the key sequence sq, in 32-key tiles from
 * key 0 up to key jend (block-uniform, >= every lim): query i sees the real keys j < lim[i]
 * (lim 0: none). Per tile: scores by att_dots (lane = key; one sequential dot per key over the
 * dims in order), an online softmax update (max and sum over the lanes by the warp's xor tree),
 * then o += p V by att_accum (keys in order). A query's bits depend on its q, its keys and lim
 * alone: not on QPW, the other queries, the block or where the keys lie in memory, so the
 * forward (a tile of queries of a row) and decode (the heads of a kv group against the cache)
 * give a query the same bits. Called by the whole block: the tiles are loaded into Kt, Vt, kmask
 * by all its threads. o, m, l: the unnormalised output, running max and sum (att_finish). */
template <int DPL, int QPW>
static __device__ void att_attend(float (&o)[QPW][DPL], float (&m)[QPW], float (&l)[QPW],
                                  const float (&qr)[QPW][DPL], const int (&lim)[QPW],
                                  const att_seq &sq, int jend, float *Kt, float *Vt, int *kmask,
                                  int ks, int HD, float scale) {
    const int lane = threadIdx.x % 32;
    ATT_UNROLL
    for (int i = 0; i < QPW; i++) {
        m[i] = -INFINITY, l[i] = 0.0f;
        ATT_UNROLL
        for (int c = 0; c < DPL; c++) o[i][c] = 0.0f;
    }
    for (int s0 = 0; s0 < jend; s0 += ATT_BK) {
        __syncthreads(); /* the previous tile is no longer read */
        att_load_kv(Kt, Vt, kmask, sq, s0, ks, HD);
        __syncthreads();
        float sc[QPW], p[QPW];
        ATT_UNROLL
        for (int i = 0; i < QPW; i++) sc[i] = 0.0f;
        att_dots<DPL, QPW>(sc, qr, Kt, HD, lane);
        const int s = s0 + lane;
        ATT_UNROLL
        for (int i = 0; i < QPW; i++) {
            bool valid = kmask[lane] && s < lim[i];
            float x = valid ? sc[i] * scale : -INFINITY;
            float mnew = fmaxf(m[i], grpo_warp_max(x));
            if (mnew == -INFINITY) { /* nothing seen yet (warp-uniform) */
                p[i] = 0.0f;
                continue;
            }
            float alpha = expf(m[i] - mnew); /* 0 while m was -inf */
            p[i] = valid ? expf(x - mnew) : 0.0f;
            l[i] = l[i] * alpha + grpo_warp_sum(p[i]);
            m[i] = mnew;
            ATT_UNROLL
            for (int c = 0; c < DPL; c++) o[i][c] *= alpha;
        }
        att_accum<DPL, QPW>(o, p, Vt, HD, lane);
    }
}

/* orow (HD) = o / l and *lse = m + log l (lse may be NULL), or 0 and 0 when the query saw no key
 * (l = 0: a padding query, or nothing real before it). */
template <int DPL>
static __device__ __forceinline__ void att_finish(float *orow, float *lse, const float (&o)[DPL],
                                                  float m, float l, int HD) {
    const int lane = threadIdx.x % 32;
    const bool seen = l > 0.0f;
    const float inv = seen ? 1.0f / l : 0.0f;
    ATT_UNROLL
    for (int c = 0; c < DPL; c++) {
        int d = c * 32 + lane;
        if (d < HD) orow[d] = seen ? o[c] * inv : 0.0f;
    }
    if (lse && lane == 0) *lse = seen ? m + logf(l) : 0.0f;
}

/* ---- forward --------------------------------------------------------------------------------- */

/* Block (query tile, h, b): each warp owns QPW queries of the tile; query t (real) sees the keys
 * j < lim = np + t - k0 + 1 of its row's sequence (att_trim: np real-from-the-first prefix keys,
 * then the own keys from the first real one, k0). Plain attention (seg): the sequence of a
 * query's segment (att_seq.id = its mask value), from that segment's first key, so a segment
 * computes as a row of its own (the same bits), a child's after its parent's keys (ABI 1.8:
 * att_with_parent, the bits of the row [parent | child]); the tile's queries run one pass per run
 * of one segment (att_run), which changes no query's bits (att_attend). Padding queries get
 * zeros. */
template <int DPL>
__global__ void attention_forward_kernel(float *out, float *lse, const float *q, const float *k,
                                         const float *v, const int32_t *mask,
                                         att_prefix_args pa, int T, int NH, int NKV, int HD,
                                         float scale) {
    constexpr int QPW = ATT_QPW(DPL), BQ = QPW * ATT_WARPS;
    GRPO_SHARED_DYN(float, att_sm);
    __shared__ int kmask[ATT_BK];
    __shared__ int red[2 * ATT_MAX_WARPS];
    float *Kt = att_sm, *Vt = att_sm + HD * ATT_LD;
    /* the last query tiles (the most keys) first: no long block at the end of the grid */
    const int b = blockIdx.z, h = blockIdx.y, t0 = (gridDim.x - 1 - blockIdx.x) * BQ;
    const int g = h / (NH / NKV), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int qs = NH * HD, ks = NKV * HD;
    const int32_t *mb = mask + (size_t)b * T;
    const int tend = imin(T, t0 + BQ);
    const bool seg = pa.P == 0; /* a mask value is a segment id (ABI 1.7) */

    float qr[QPW][DPL], o[QPW][DPL], m[QPW], l[QPW];
    int tq[QPW], lim[QPW];
    ATT_UNROLL
    for (int i = 0; i < QPW; i++) {
        tq[i] = t0 + warp * QPW + i;
        bool real = tq[i] < T && mb[imin(tq[i], T - 1)];
        att_load_row<DPL>(qr[i], q + ((size_t)b * T + tq[i]) * qs + (size_t)h * HD, real, HD,
                          lane);
        m[i] = -INFINITY, l[i] = 0.0f; /* what a padding query finishes with: zeros */
        ATT_UNROLL
        for (int c = 0; c < DPL; c++) o[i][c] = 0.0f;
    }
    for (int a = t0, e, id; a < tend; a = e) { /* block-uniform */
        e = att_run(mb, a, tend, seg, &id);
        if (!id) continue; /* padding queries */
        /* the keys of the queries < tend; k0, kend: the first and last + 1 real own key of the
         * run's segment (seg) or of the row before tend */
        att_seq row = att_row_keys(pa, k, v, mask, b, g, T, tend, ks, HD);
        row.id = seg ? id : 0;
        int k0, kend;
        att_seq sq = att_trim(row, ks, red, &k0, &kend);
        if (seg) att_with_parent(&sq, row, id, k0, ks, red); /* a child: [parent | own] */
        ATT_UNROLL
        for (int i = 0; i < QPW; i++) /* in the run: real, k0 <= tq */
            lim[i] = tq[i] >= a && tq[i] < e ? sq.np + tq[i] - k0 + 1 : 0;
        att_attend<DPL, QPW>(o, m, l, qr, lim, sq, kend > 0 ? sq.np + kend - k0 : 0, Kt, Vt,
                             kmask, ks, HD, scale);
        ATT_UNROLL
        for (int i = 0; i < QPW; i++) {
            if (tq[i] < a || tq[i] >= e) continue;
            att_finish<DPL>(out + ((size_t)b * T + tq[i]) * qs + (size_t)h * HD,
                            lse ? lse + ((size_t)b * NH + h) * T + tq[i] : NULL, o[i], m[i], l[i],
                            HD);
        }
    }
    ATT_UNROLL
    for (int i = 0; i < QPW; i++) {
        if (tq[i] >= T || mb[tq[i]]) continue;
        att_finish<DPL>(out + ((size_t)b * T + tq[i]) * qs + (size_t)h * HD,
                        lse ? lse + ((size_t)b * NH + h) * T + tq[i] : NULL, o[i], m[i], l[i],
                        HD);
    }
}

static void check_shapes(const char *op, int32_t NH, int32_t NKV, int32_t HD) {
    CUDA_REQUIRE(NKV > 0 && NH > 0 && NH % NKV == 0, op, "NH must be a positive multiple of NKV");
    CUDA_REQUIRE(HD > 0 && HD <= ATT_MAX_HD, op, "HD must lie in [1, 128]");
}

static size_t kv_tiles_bytes(int32_t HD) { return (size_t)2 * HD * ATT_LD * sizeof(float); }

template <int DPL>
static void launch_forward(cuda_ctx *ctx, float *out, float *lse, const float *q, const float *k,
                           const float *v, const int32_t *mask, const att_prefix_args &pa,
                           int32_t B, int32_t T, int32_t NH, int32_t NKV, int32_t HD) {
    const int bq = ATT_QPW(DPL) * ATT_WARPS;
    dim3 grid(cuda_blocks((uint64_t)T, (unsigned)bq), (unsigned)NH, (unsigned)B);
    GRPO_LAUNCH(attention_forward_kernel<DPL>, grid, ATT_THREADS, kv_tiles_bytes(HD),
                ctx->stream, out, lse, q, k, v, mask, pa, T, NH, NKV, HD,
                1.0f / sqrtf((float)HD));
    CUDA_CHECK_LAUNCH(pa.P > 0 ? "prefix_attention_forward" : "attention_forward");
}

/* attention_forward, or with pa.P > 0 the prefix-attention forward. */
static void forward_rows(cuda_ctx *ctx, const char *op, float *out, float *lse, const float *q,
                         const float *k, const float *v, const int32_t *mask,
                         const att_prefix_args &pa, int32_t B, int32_t T, int32_t NH,
                         int32_t NKV, int32_t HD) {
    check_shapes(op, NH, NKV, HD);
    if (B <= 0 || T <= 0) return;
    /* by dims per lane, (HD + 31) / 32 */
    static decltype(&launch_forward<1>) const launch[4] = {launch_forward<1>, launch_forward<2>,
                                                          launch_forward<3>, launch_forward<4>};
    launch[(HD - 1) / 32](ctx, out, lse, q, k, v, mask, pa, B, T, NH, NKV, HD);
}

static const att_prefix_args no_prefix = {NULL, NULL, NULL, NULL, 0, 0};

void cuda_attention_forward(void *ctx, float *out, float *lse, const float *q, const float *k,
                            const float *v, const int32_t *mask, int32_t B, int32_t T, int32_t NH,
                            int32_t NKV, int32_t HD) {
    forward_rows((cuda_ctx *)ctx, "attention_forward", out, lse, q, k, v, mask, no_prefix, B, T,
                 NH, NKV, HD);
}

/* The prefix ops' own shape checks (prefix_of's values are the kernels' business: see
 * att_row_prefix). */
static void check_prefix(const char *op, int32_t BP, int32_t P) {
    CUDA_REQUIRE(BP > 0, op, "BP (the number of prefixes) must be > 0");
    CUDA_REQUIRE(P >= 0, op, "P (the prefix length) must be >= 0");
}

void cuda_prefix_attention_forward(void *ctx, float *out, float *lse, const float *q,
                                   const float *k, const float *v, const int32_t *mask,
                                   const float *kp, const float *vp, const int32_t *pmask,
                                   const int32_t *prefix_of, int32_t B, int32_t T, int32_t BP,
                                   int32_t P, int32_t NH, int32_t NKV, int32_t HD) {
    check_prefix("prefix_attention_forward", BP, P);
    const att_prefix_args pa = {kp, vp, pmask, prefix_of, BP, P};
    forward_rows((cuda_ctx *)ctx, "prefix_attention_forward", out, lse, q, k, v, mask, pa, B, T,
                 NH, NKV, HD);
}

/* ---- backward -------------------------------------------------------------------------------- */

/* D (B,NH,T) = dout . out per query row: one warp per (b, t, h). */
__global__ void attention_rowdot_kernel(float *D, const float *dout, const float *out, int B,
                                        int T, int NH, int HD) {
    const int lane = threadIdx.x % 32;
    const long row = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; /* (b, t, h) */
    if (row >= (long)B * T * NH) return; /* warp-uniform */
    const float *a = dout + row * HD, *o = out + row * HD;
    float s = 0.0f;
    for (int d = lane; d < HD; d += 32) s += a[d] * o[d];
    s = grpo_warp_sum(s);
    int h = (int)(row % NH), t = (int)(row / NH % T), b = (int)(row / NH / T);
    if (lane == 0) D[((size_t)b * NH + h) * T + t] = s;
}

template <int DPL>
__global__ void attention_dq_kernel(float *dq, const float *dout, const float *D,
                                    const float *lse, const float *q, const float *k,
                                    const float *v, const int32_t *mask, att_prefix_args pa,
                                    int T, int NH, int NKV, int HD, float scale) {
    constexpr int QPW = ATT_QPW(DPL), BQ = QPW * ATT_WARPS;
    GRPO_SHARED_DYN(float, att_sm);
    __shared__ int kmask[ATT_BK];
    __shared__ int red[2 * ATT_MAX_WARPS];
    float *Kt = att_sm, *Vt = att_sm + HD * ATT_LD;
    /* the last query tiles (the most keys) first: no long block at the end of the grid */
    const int b = blockIdx.z, h = blockIdx.y, t0 = (gridDim.x - 1 - blockIdx.x) * BQ;
    const int g = h / (NH / NKV), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int qs = NH * HD, ks = NKV * HD;
    const int32_t *mb = mask + (size_t)b * T;
    const int tend = imin(T, t0 + BQ);
    const bool seg = pa.P == 0; /* a mask value is a segment id (ABI 1.7) */
    /* whole columns [prefix | own keys]: query t is column P + t; [first, end) the columns before
     * tend that the tile's queries reach (att_reach) */
    const att_seq row = att_row_keys(pa, k, v, mask, b, g, T, T, ks, HD);
    att_seq upto = row;
    upto.n = row.np + tend;
    int first, end;
    att_reach(upto, mb, t0, tend, seg, ATT_REACH_KEYS, red, &first, &end);

    float qr[QPW][DPL], dor[QPW][DPL], acc[QPW][DPL], lq[QPW], Dq[QPW];
    int tq[QPW], qid[QPW];
    bool real[QPW];
    ATT_UNROLL
    for (int i = 0; i < QPW; i++) {
        tq[i] = t0 + warp * QPW + i;
        qid[i] = tq[i] < T ? mb[imin(tq[i], T - 1)] : 0;
        real[i] = qid[i] != 0;
        size_t off = ((size_t)b * T + tq[i]) * qs + (size_t)h * HD;
        att_load_row<DPL>(qr[i], q + off, real[i], HD, lane);
        att_load_row<DPL>(dor[i], dout + off, real[i], HD, lane);
        size_t lo = ((size_t)b * NH + h) * T + imin(tq[i], T - 1);
        lq[i] = real[i] ? lse[lo] : 0.0f;
        Dq[i] = real[i] ? D[lo] : 0.0f;
        ATT_UNROLL
        for (int c = 0; c < DPL; c++) acc[i][c] = 0.0f;
    }
    for (int s0 = first / ATT_BK * ATT_BK; s0 < end; s0 += ATT_BK) {
        __syncthreads();
        att_load_kv(Kt, Vt, kmask, row, s0, ks, HD);
        __syncthreads();
        float sc[QPW], dp[QPW];
        ATT_UNROLL
        for (int i = 0; i < QPW; i++) sc[i] = 0.0f, dp[i] = 0.0f;
        att_dots<DPL, QPW>(sc, qr, Kt, HD, lane);
        att_dots<DPL, QPW>(dp, dor, Vt, HD, lane);
        const int s = s0 + lane;
        ATT_UNROLL
        for (int i = 0; i < QPW; i++) {
            bool valid = real[i] && att_sees(kmask[lane], qid[i], seg) && s <= row.np + tq[i];
            float p = valid ? expf(sc[i] * scale - lq[i]) : 0.0f;
            sc[i] = p * (dp[i] - Dq[i]) * scale; /* dS */
        }
        att_accum<DPL, QPW>(acc, sc, Kt, HD, lane);
    }
    ATT_UNROLL
    for (int i = 0; i < QPW; i++) {
        if (tq[i] >= T) continue;
        float *row = dq + ((size_t)b * T + tq[i]) * qs + (size_t)h * HD;
        ATT_UNROLL
        for (int c = 0; c < DPL; c++) {
            int d = c * 32 + lane;
            if (d < HD) row[d] = acc[i][c]; /* exactly 0 for a padding query */
        }
    }
}

/* The dk/dv passes' shared buffers: the key tile (Kt, Vt, kmask), a query tile's q and dout
 * (Qs, dOs: BQ2 rows of HD), its P and dS against the key tile (Ps, dSs: BQ2 rows of ATT_LD),
 * and its queries' lse, D and mask values (qreal: 0 = padding; BQ2 each). */
struct att_dkdv_sm {
    const float *Kt, *Vt;
    const int *kmask;
    float *Qs, *dOs, *Ps, *dSs, *lq, *Dq;
    int *qreal;
};

/* dka, dva += the share of query head h of row b, queries [tb, te), in query tiles of BQ2 from tb,
 * for the key tile loaded in sm (key s0 + j; own keys when causal: query t sees it when
 * s0 + j <= t, and with seg (plain attention) when it is of t's segment or its parent; a
 * prefix's keys otherwise: every real query sees them). Thread (warp w, lane j) owns key j of the
 * tile and the dims w, w + 4, ... of dka/dva. */
template <int DPL>
static __device__ __forceinline__ void
att_dkdv_accum(float (&dka)[8 * DPL], float (&dva)[8 * DPL], const att_dkdv_sm &sm,
               const float *dout, const float *D, const float *lse, const float *q,
               const int32_t *mb, int b, int h, int tb, int te, int s0, bool causal, bool seg,
               int T, int NH, int HD, float scale) {
    constexpr int BQ2 = ATT_BQ2(DPL), RPW = BQ2 / ATT_WARPS, NE = 8 * DPL;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, qs = NH * HD;
    for (int t0 = tb; t0 < te; t0 += BQ2) {
        __syncthreads(); /* K/V loaded; the previous query tile no longer read */
        for (int i = threadIdx.x; i < BQ2 * HD; i += blockDim.x) {
            int qi = i / HD, d = i % HD, t = t0 + qi;
            bool in = t < T && mb[imin(t, T - 1)]; /* padding queries are not read */
            size_t off = ((size_t)b * T + t) * qs + (size_t)h * HD + d;
            sm.Qs[i] = in ? q[off] : 0.0f;
            sm.dOs[i] = in ? dout[off] : 0.0f;
        }
        if (threadIdx.x < BQ2) {
            int t = t0 + threadIdx.x;
            int id = t < T ? mb[imin(t, T - 1)] : 0;
            bool r = id != 0;
            size_t lo = ((size_t)b * NH + h) * T + imin(t, T - 1);
            sm.qreal[threadIdx.x] = id;
            sm.lq[threadIdx.x] = r ? lse[lo] : 0.0f;
            sm.Dq[threadIdx.x] = r ? D[lo] : 0.0f;
        }
        __syncthreads();
        /* P and dS of queries warp + 4r against key lane */
        float sc[RPW], dp[RPW];
        ATT_UNROLL
        for (int r = 0; r < RPW; r++) sc[r] = 0.0f, dp[r] = 0.0f;
        for (int d = 0; d < HD; d++) {
            float kd = sm.Kt[d * ATT_LD + lane], vd = sm.Vt[d * ATT_LD + lane];
            ATT_UNROLL
            for (int r = 0; r < RPW; r++) {
                int qi = warp + ATT_WARPS * r;
                sc[r] += sm.Qs[qi * HD + d] * kd;
                dp[r] += sm.dOs[qi * HD + d] * vd;
            }
        }
        ATT_UNROLL
        for (int r = 0; r < RPW; r++) {
            int qi = warp + ATT_WARPS * r, s = s0 + lane;
            bool valid = sm.qreal[qi] && att_sees(sm.kmask[lane], sm.qreal[qi], seg) &&
                         (!causal || s <= t0 + qi);
            float p = valid ? expf(sc[r] * scale - sm.lq[qi]) : 0.0f;
            sm.Ps[qi * ATT_LD + lane] = p;
            sm.dSs[qi * ATT_LD + lane] = p * (dp[r] - sm.Dq[qi]) * scale;
        }
        __syncthreads();
        for (int qi = 0; qi < BQ2; qi++) {
            float pj = sm.Ps[qi * ATT_LD + lane], dsj = sm.dSs[qi * ATT_LD + lane];
            ATT_UNROLL
            for (int e = 0; e < NE; e++) {
                int d = warp + ATT_WARPS * e;
                if (d < HD) {
                    dva[e] += pj * sm.dOs[qi * HD + d];
                    dka[e] += dsj * sm.Qs[qi * HD + d];
                }
            }
        }
    }
}

/* Rows s0 .. s0 + 31 (those < n) of dst (row stride rs) = the threads' shares a (or, with add,
 * += them), through shared memory stage (the K/V tiles' room, 2*HD*33 >= 32*(HD+1) floats) so
 * that the global writes are whole rows. Called by the whole block. */
template <int NE>
static __device__ __forceinline__ void att_dkdv_store(float *dst, const float (&a)[NE],
                                                      float *stage, int s0, int n, int rs,
                                                      int HD, bool add) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, ld = HD + 1;
    __syncthreads();
    ATT_UNROLL
    for (int e = 0; e < NE; e++) {
        int d = warp + ATT_WARPS * e;
        if (d < HD) stage[lane * ld + d] = a[e];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < ATT_BK * HD; i += blockDim.x) {
        int j = i / HD, d = i % HD;
        if (s0 + j >= n) continue;
        float *o = dst + (size_t)(s0 + j) * rs + d;
        *o = add ? *o + stage[j * ld + d] : stage[j * ld + d];
    }
}

/* The dk/dv kernels' shared buffers, in dynamic shared memory att_sm (launch_backward sizes it) and
 * the static arrays of the kernel. */
#define ATT_DKDV_SHARED(DPL)                                                                      \
    constexpr int BQ2 = ATT_BQ2(DPL), NE = 8 * DPL;                                              \
    GRPO_SHARED_DYN(float, att_sm);                                                               \
    __shared__ int kmask[ATT_BK];                                                                 \
    __shared__ int red[2 * ATT_MAX_WARPS];                                                        \
    __shared__ float lq[BQ2], Dq[BQ2];                                                            \
    __shared__ int qreal[BQ2];                                                                    \
    float *Kt = att_sm, *Vt = Kt + HD * ATT_LD;                                                   \
    float *Qs = Vt + HD * ATT_LD, *dOs = Qs + BQ2 * HD;                                           \
    float *Ps = dOs + BQ2 * HD, *dSs = Ps + BQ2 * ATT_LD;                                         \
    const att_dkdv_sm sm = {Kt, Vt, kmask, Qs, dOs, Ps, dSs, lq, Dq, qreal};                      \
    float dka[NE], dva[NE];                                                                       \
    ATT_UNROLL                                                                                    \
    for (int e = 0; e < NE; e++) dka[e] = 0.0f, dva[e] = 0.0f

/* dk, dv (either may be NULL) for the own-key tile blockIdx.x of row blockIdx.z, from
 *   split = 0: the query heads of kv head g = blockIdx.y, in order: dk/dv (B,T,NKV,HD) themselves;
 *   split = 1: query head h = blockIdx.y alone: its share into (B,NH,T,HD), summed afterwards.
 * Thread (warp w, lane j) owns key s0 + j and the dims w, w + 4, ... (NE = ceil(HD/4) <= 8*DPL).
 * A row's own keys are seen by its own queries alone, prefix or not; with seg (plain attention)
 * by the queries of their segment and (a parent's keys, ABI 1.8) of its children alone, those up
 * to the last of the tile's segments and their children: a parent's dk/dv sum its own queries'
 * gradients and its children's, in query order. */
template <int DPL>
__global__ void attention_dkdv_kernel(float *dk, float *dv, const float *dout, const float *D,
                                      const float *lse, const float *q, const float *k,
                                      const float *v, const int32_t *mask, int T, int NH,
                                      int NKV, int HD, float scale, int split, int seg) {
    ATT_DKDV_SHARED(DPL);
    const int rep = NH / NKV;
    const int b = blockIdx.z, s0 = blockIdx.x * ATT_BK;
    const int h0 = split ? blockIdx.y : blockIdx.y * rep, nh = split ? 1 : rep, g = h0 / rep;
    const int ks = NKV * HD;
    const int32_t *mb = mask + (size_t)b * T;
    const size_t own = (size_t)b * T * ks + (size_t)g * HD;
    const att_seq row = {NULL, NULL, NULL, 0, k + own, v + own, mb, T, 0, {}}; /* own keys */
    int first, end; /* the real span of the row, or (seg) of the segments of the tile's keys */
    att_reach(row, mb, s0, imin(T, s0 + ATT_BK), seg != 0, ATT_REACH_QUERIES, red, &first,
              &end);
    att_load_kv(Kt, Vt, kmask, row, s0, ks, HD);
    /* queries after the last real token, and key tiles wholly before the first, give nothing */
    const bool live = s0 + ATT_BK > first && s0 < end;
    for (int hh = 0; live && hh < nh; hh++)
        att_dkdv_accum<DPL>(dka, dva, sm, dout, D, lse, q, mb, b, h0 + hh, s0, end, s0, true,
                            seg != 0, T, NH, HD, scale);
    const int rs = split ? HD : ks; /* row stride of dst */
    const size_t base = split ? ((size_t)b * NH + h0) * T * HD : (size_t)b * T * ks + g * HD;
    if (dk) att_dkdv_store<NE>(dk + base, dka, att_sm, s0, T, rs, HD, false);
    if (dv) att_dkdv_store<NE>(dv + base, dva, att_sm, s0, T, rs, HD, false);
}

/* dkp, dvp (either may be NULL) for the key tile blockIdx.x of prefix j = blockIdx.z: the rows b
 * with prefix_of[b] = j, in row order, each over its real queries (all of which see every prefix
 * key), for
 *   split = 0: the query heads of kv head g = blockIdx.y, in order: ADDED to dkp/dvp
 *              (BP,P,NKV,HD) (one block owns each element: no atomics);
 *   split = 1: query head h = blockIdx.y alone: its share WRITTEN to (BP,NH,P,HD), added to
 *              dkp/dvp afterwards by the group sum.
 * Threads as attention_dkdv_kernel's. */
template <int DPL>
__global__ void attention_prefix_dkdv_kernel(float *dkp, float *dvp, const float *dout,
                                             const float *D, const float *lse, const float *q,
                                             const int32_t *mask, att_prefix_args pa, int B,
                                             int T, int NH, int NKV, int HD, float scale,
                                             int split) {
    ATT_DKDV_SHARED(DPL);
    const int rep = NH / NKV, P = pa.P;
    const int j = blockIdx.z, s0 = blockIdx.x * ATT_BK;
    const int h0 = split ? blockIdx.y : blockIdx.y * rep, nh = split ? 1 : rep, g = h0 / rep;
    const int ks = NKV * HD;
    const size_t poff = (size_t)j * P * ks + (size_t)g * HD;
    const att_seq pre = {pa.kp + poff, pa.vp + poff, pa.pmask + (size_t)j * P, P,
                         NULL, NULL, NULL, P, 0, {}}; /* the prefix's keys alone */
    att_load_kv(Kt, Vt, kmask, pre, s0, ks, HD);
    for (int b = 0; b < B; b++) {
        if (pa.prefix_of[b] != j) continue; /* block-uniform */
        const int32_t *mb = mask + (size_t)b * T;
        const att_seq row = {NULL, NULL, NULL, 0, NULL, NULL, mb, T, 0, {}};
        int first, end; /* the row's real queries lie in [first, end) */
        att_real_span(row, red, &first, &end);
        for (int hh = 0; hh < nh; hh++)
            att_dkdv_accum<DPL>(dka, dva, sm, dout, D, lse, q, mb, b, h0 + hh, first, end, s0,
                                false, false, T, NH, HD, scale);
    }
    const int rs = split ? HD : ks;
    const size_t base = split ? ((size_t)j * NH + h0) * P * HD : poff;
    if (dkp) att_dkdv_store<NE>(dkp + base, dka, att_sm, s0, P, rs, HD, !split);
    if (dvp) att_dkdv_store<NE>(dvp + base, dva, att_sm, s0, P, rs, HD, !split);
}

/* dst (B,T,NKV,HD) = (add: dst +) the sum over the rep query heads of each kv head of part
 * (B,NH,T,HD), in head order: the same bits every run. */
__global__ void attention_group_sum_kernel(float *dst, const float *part, int B, int T, int NH,
                                           int NKV, int HD, int add) {
    const int rep = NH / NKV;
    const size_t n = (size_t)B * T * NKV * HD;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t d = i % HD, g = i / HD % NKV, t = i / HD / NKV % T, b = i / HD / NKV / T;
        const float *p = part + (((size_t)b * NH + g * rep) * T + t) * HD + d;
        float acc = 0.0f;
        for (int j = 0; j < rep; j++) acc += p[(size_t)j * T * HD];
        dst[i] = add ? dst[i] + acc : acc;
    }
}

/* Whether the dk/dv pass runs per query head (then summed) rather than per kv head: when the
 * grouped pass would have too few blocks to fill the GPU (B * NKV key-tile columns, each looping
 * over rep heads; Qwen2.5-0.5B has NKV = 2). GRPO_CUDA_ATTENTION_SPLIT=0/1 forces it (tests). */
static int dkdv_split(cuda_ctx *ctx, int32_t B, int32_t T, int32_t NH, int32_t NKV) {
    if (NH == NKV) return 0;
    const char *force = getenv("GRPO_CUDA_ATTENTION_SPLIT");
    if (force && (force[0] == '0' || force[0] == '1') && !force[1]) return force[0] == '1';
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        sms = 0;
    (void)cudaGetLastError(); /* an attribute query that failed is no launch error */
    return (uint64_t)B * NKV * cuda_blocks((uint64_t)T, ATT_BK) < 4 * (uint64_t)(sms > 0 ? sms : 1);
}

/* Launches attention_group_sum_kernel: dst (or with add dst +) = part summed over each group. */
static void group_sum(cuda_ctx *ctx, float *dst, const float *part, int32_t B, int32_t T,
                      int32_t NH, int32_t NKV, int32_t HD, int add) {
    const uint64_t n = (uint64_t)B * T * NKV * HD;
    unsigned blocks = cuda_blocks(n, 256) < 4096 ? cuda_blocks(n, 256) : 4096;
    GRPO_LAUNCH(attention_group_sum_kernel, blocks, 256, 0, ctx->stream, dst, part, B, T, NH, NKV,
                HD, add);
    CUDA_CHECK_LAUNCH("attention_backward (group sum)");
}

/* The dk/dv kernels' dynamic shared memory. */
static size_t dkdv_shmem(int bq2, int32_t HD) {
    return kv_tiles_bytes(HD) + ((size_t)2 * bq2 * HD + (size_t)2 * bq2 * ATT_LD) * sizeof(float);
}

/* dkp/dvp += the prefixes' key gradients: a pass per (prefix, kv head or query head, key tile),
 * after the own keys' pass (its split scratch is then free: same stream). */
template <int DPL>
static void launch_prefix_dkdv(cuda_ctx *ctx, float *dkp, float *dvp, const float *dout,
                               const float *D, const float *lse, const float *q,
                               const int32_t *mask, const att_prefix_args &pa, int32_t B,
                               int32_t T, int32_t NH, int32_t NKV, int32_t HD, float scale) {
    const int BP = pa.BP, P = pa.P;
    const int split = dkdv_split(ctx, BP, P, NH, NKV);
    float *pk = dkp, *pv = dvp; /* split: per-head shares (BP,NH,P,HD) in CUDA_SCRATCH_OP2 */
    const uint64_t part = (uint64_t)BP * NH * P * HD;
    if (split) {
        float *buf = (float *)cuda_scratch(ctx, CUDA_SCRATCH_OP2, 2 * part * sizeof(float));
        pk = dkp ? buf : NULL, pv = dvp ? buf + part : NULL;
    }
    dim3 grid(cuda_blocks((uint64_t)P, ATT_BK), (unsigned)(split ? NH : NKV), (unsigned)BP);
    GRPO_LAUNCH(attention_prefix_dkdv_kernel<DPL>, grid, ATT_THREADS,
                dkdv_shmem(ATT_BQ2(DPL), HD), ctx->stream, pk, pv, dout, D, lse, q, mask, pa, B,
                T, NH, NKV, HD, scale, split);
    CUDA_CHECK_LAUNCH("prefix_attention_backward (dkp, dvp)");
    if (split && dkp) group_sum(ctx, dkp, pk, BP, P, NH, NKV, HD, 1);
    if (split && dvp) group_sum(ctx, dvp, pv, BP, P, NH, NKV, HD, 1);
}

template <int DPL>
static void launch_backward(cuda_ctx *ctx, float *dq, float *dk, float *dv, float *dkp,
                            float *dvp, const float *dout, const float *D, const float *lse,
                            const float *q, const float *k, const float *v, const int32_t *mask,
                            const att_prefix_args &pa, int32_t B, int32_t T, int32_t NH,
                            int32_t NKV, int32_t HD) {
    const float scale = 1.0f / sqrtf((float)HD);
    if (dq) {
        dim3 grid(cuda_blocks((uint64_t)T, (unsigned)(ATT_QPW(DPL) * ATT_WARPS)), (unsigned)NH,
                  (unsigned)B);
        GRPO_LAUNCH(attention_dq_kernel<DPL>, grid, ATT_THREADS, kv_tiles_bytes(HD), ctx->stream,
                    dq, dout, D, lse, q, k, v, mask, pa, T, NH, NKV, HD, scale);
        CUDA_CHECK_LAUNCH("attention_backward (dq)");
    }
    if (dk || dv) {
        const int split = dkdv_split(ctx, B, T, NH, NKV);
        float *pk = dk, *pv = dv; /* split: per-head shares (B,NH,T,HD) in CUDA_SCRATCH_OP2 */
        const uint64_t part = (uint64_t)B * NH * T * HD;
        if (split) {
            float *buf = (float *)cuda_scratch(ctx, CUDA_SCRATCH_OP2, 2 * part * sizeof(float));
            pk = dk ? buf : NULL, pv = dv ? buf + part : NULL;
        }
        dim3 grid(cuda_blocks((uint64_t)T, ATT_BK), (unsigned)(split ? NH : NKV), (unsigned)B);
        GRPO_LAUNCH(attention_dkdv_kernel<DPL>, grid, ATT_THREADS, dkdv_shmem(ATT_BQ2(DPL), HD),
                    ctx->stream, pk, pv, dout, D, lse, q, k, v, mask, T, NH, NKV, HD, scale,
                    split, pa.P == 0);
        CUDA_CHECK_LAUNCH("attention_backward (dk, dv)");
        if (split && dk) group_sum(ctx, dk, pk, B, T, NH, NKV, HD, 0);
        if (split && dv) group_sum(ctx, dv, pv, B, T, NH, NKV, HD, 0);
    }
    if ((dkp || dvp) && pa.P > 0)
        launch_prefix_dkdv<DPL>(ctx, dkp, dvp, dout, D, lse, q, mask, pa, B, T, NH, NKV, HD,
                                scale);
}

/* attention_backward, or with pa.P > 0 the prefix-attention backward. */
static void backward_rows(cuda_ctx *ctx, const char *op, float *dq, float *dk, float *dv,
                          float *dkp, float *dvp, const float *dout, const float *out,
                          const float *lse, const float *q, const float *k, const float *v,
                          const int32_t *mask, const att_prefix_args &pa, int32_t B, int32_t T,
                          int32_t NH, int32_t NKV, int32_t HD) {
    check_shapes(op, NH, NKV, HD);
    if ((!dq && !dk && !dv && !dkp && !dvp) || B <= 0 || T <= 0) return;
    uint64_t rows = (uint64_t)B * T * NH;
    float *D = (float *)cuda_scratch(ctx, CUDA_SCRATCH_OP, rows * sizeof(float));
    GRPO_LAUNCH(attention_rowdot_kernel, cuda_blocks(rows, 8), 256, 0, ctx->stream, D, dout, out,
                B, T, NH, HD);
    CUDA_CHECK_LAUNCH("attention_backward (rowdot)");
    /* by dims per lane, (HD + 31) / 32 */
    static decltype(&launch_backward<1>) const launch[4] = {launch_backward<1>, launch_backward<2>,
                                                            launch_backward<3>, launch_backward<4>};
    launch[(HD - 1) / 32](ctx, dq, dk, dv, dkp, dvp, dout, D, lse, q, k, v, mask, pa, B, T, NH,
                          NKV, HD);
}

void cuda_attention_backward(void *ctx, float *dq, float *dk, float *dv, const float *dout,
                             const float *out, const float *lse, const float *q, const float *k,
                             const float *v, const int32_t *mask, int32_t B, int32_t T,
                             int32_t NH, int32_t NKV, int32_t HD) {
    backward_rows((cuda_ctx *)ctx, "attention_backward", dq, dk, dv, NULL, NULL, dout, out, lse,
                  q, k, v, mask, no_prefix, B, T, NH, NKV, HD);
}

void cuda_prefix_attention_backward(void *ctx, float *dq, float *dk, float *dv, float *dkp,
                                    float *dvp, const float *dout, const float *out,
                                    const float *lse, const float *q, const float *k,
                                    const float *v, const int32_t *mask, const float *kp,
                                    const float *vp, const int32_t *pmask,
                                    const int32_t *prefix_of, int32_t B, int32_t T, int32_t BP,
                                    int32_t P, int32_t NH, int32_t NKV, int32_t HD) {
    check_prefix("prefix_attention_backward", BP, P);
    const att_prefix_args pa = {kp, vp, pmask, prefix_of, BP, P};
    backward_rows((cuda_ctx *)ctx, "prefix_attention_backward", dq, dk, dv, dkp, dvp, dout, out,
                  lse, q, k, v, mask, pa, B, T, NH, NKV, HD);
}

/* ---- decode ---------------------------------------------------------------------------------- */

/* Block (blockIdx.x = g * chunks + c, blockIdx.y = r): query heads c * HPB .. of kv group g
 * (HPB = warps * QPW, QPW a warp) of row r against the row's cached keys, as the sequence from
 * its first real slot up to len (att_trim): the keys the forward's query at position len - 1
 * sees, walked by the same att_attend, so the same bits. Each key tile is read from the cache
 * once per block, for all its heads. Paged (pg.table set: the (R,nblk) page table, ABI 1.9):
 * kcache/vcache are the pools and slot s of row r lies at position s % page of page
 * table[r * nblk + s / page] (att_own_off); the same sequence, tiles and sums, so the unpaged
 * bits. */
template <int DPL, int QPW>
__global__ void attention_decode_kernel(float *out, const float *q, const float *kcache,
                                        const float *vcache, att_pages pg, int nblk,
                                        const int32_t *cache_mask, const int32_t *len, int S,
                                        int NH, int NKV, int HD, int chunks, float scale) {
    GRPO_SHARED_DYN(float, att_sm);
    __shared__ int kmask[ATT_BK];
    __shared__ int red[2 * ATT_MAX_WARPS];
    float *Kt = att_sm, *Vt = att_sm + HD * ATT_LD;
    const int rep = NH / NKV, g = blockIdx.x / chunks, r = blockIdx.y;
    const int hb = blockIdx.x % chunks * (blockDim.x / 32 * QPW); /* the block's first head */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, ks = NKV * HD;
    const int n = imax(0, imin(len[r], S));
    const size_t base = (pg.table ? 0 : (size_t)r * S * ks) + (size_t)g * HD;
    att_seq row = {NULL, NULL, NULL, 0, kcache + base, vcache + base,
                   cache_mask + (size_t)r * S, n, 0, pg};
    if (pg.table) row.pg.table = pg.table + (size_t)r * nblk;
    int s0, send; /* the first and last + 1 real slots */
    const att_seq sq = att_trim(row, ks, red, &s0, &send);

    float qr[QPW][DPL], o[QPW][DPL], m[QPW], l[QPW];
    int hq[QPW], lim[QPW];
    ATT_UNROLL
    for (int i = 0; i < QPW; i++) {
        hq[i] = hb + warp * QPW + i; /* head g * rep + hq[i], when hq[i] < rep */
        const bool real = hq[i] < rep;
        lim[i] = real ? sq.n : 0;
        att_load_row<DPL>(qr[i], q + ((size_t)r * NH + (size_t)g * rep + imin(hq[i], rep - 1)) * HD,
                          real, HD, lane);
    }
    att_attend<DPL, QPW>(o, m, l, qr, lim, sq, send > 0 ? send - s0 : 0, Kt, Vt, kmask, ks, HD,
                         scale);
    ATT_UNROLL
    for (int i = 0; i < QPW; i++)
        if (hq[i] < rep)
            att_finish<DPL>(out + ((size_t)r * NH + (size_t)g * rep + hq[i]) * HD, NULL, o[i], m[i],
                            l[i], HD);
}

/* A group's rep query heads: one a warp while they fit in ATT_MAX_WARPS warps, else ATT_QPW a
 * warp in blocks of at most ATT_MAX_WARPS / 2 warps (8 queries a warp take up to 123 registers a
 * thread at sm_90; 16 such warps would need all of an SM's 64K), in as many blocks (chunks) as it
 * takes. */
template <int DPL>
static void launch_decode(cuda_ctx *ctx, const char *op, float *out, const float *q,
                          const float *kcache, const float *vcache, att_pages pg, int nblk,
                          const int32_t *cache_mask, const int32_t *len, int32_t R, int32_t S,
                          int32_t NH, int32_t NKV, int32_t HD) {
    const int rep = NH / NKV, qpw = rep <= ATT_MAX_WARPS ? 1 : ATT_QPW(DPL);
    const int cap = qpw == 1 ? ATT_MAX_WARPS : ATT_MAX_WARPS / 2, need = (rep + qpw - 1) / qpw;
    const int warps = need < cap ? need : cap;
    const int chunks = (rep + warps * qpw - 1) / (warps * qpw);
    const dim3 grid((unsigned)(NKV * chunks), (unsigned)R);
    const float scale = 1.0f / sqrtf((float)HD);
    const auto decode_kernel = qpw == 1 ? attention_decode_kernel<DPL, 1>
                                        : attention_decode_kernel<DPL, ATT_QPW(DPL)>;
    GRPO_LAUNCH(decode_kernel, grid, warps * 32, kv_tiles_bytes(HD), ctx->stream, out, q, kcache,
                vcache, pg, nblk, cache_mask, len, S, NH, NKV, HD, chunks, scale);
    CUDA_CHECK_LAUNCH(op);
}

/* Either decode (pg.table NULL: unpaged), launched by dims per lane, (HD + 31) / 32. */
static void decode(cuda_ctx *ctx, const char *op, float *out, const float *q, const float *k,
                   const float *v, att_pages pg, int nblk, const int32_t *cache_mask,
                   const int32_t *len, int32_t R, int32_t S, int32_t NH, int32_t NKV,
                   int32_t HD) {
    check_shapes(op, NH, NKV, HD);
    if (R <= 0) return;
    static decltype(&launch_decode<1>) const launch[4] = {launch_decode<1>, launch_decode<2>,
                                                         launch_decode<3>, launch_decode<4>};
    launch[(HD - 1) / 32](ctx, op, out, q, k, v, pg, nblk, cache_mask, len, R, S, NH, NKV, HD);
}

void cuda_attention_decode(void *ctx, float *out, const float *q, const float *kcache,
                           const float *vcache, const int32_t *cache_mask, const int32_t *len,
                           int32_t R, int32_t S, int32_t NH, int32_t NKV, int32_t HD) {
    const att_pages none = {NULL, 0, 0, 0};
    decode((cuda_ctx *)ctx, "attention_decode", out, q, kcache, vcache, none, 0, cache_mask, len,
           R, S, NH, NKV, HD);
}

/* The table's ids and len live on the device: a missing page (id < 0) in the slots a row reads
 * reads as zeros (att_own_off), len is clamped to [0, S] (no check here: it would cost a sync
 * per layer and token; the cpu backend checks both). */
void cuda_attention_decode_paged(void *ctx, float *out, const float *q, const float *kpool,
                                 const float *vpool, int64_t pstride, const int32_t *table,
                                 int32_t nblk, int32_t page, const int32_t *cache_mask,
                                 const int32_t *len, int32_t R, int32_t S, int32_t NH,
                                 int32_t NKV, int32_t HD) {
    CUDA_REQUIRE(page > 0 && (int64_t)nblk * page >= S && pstride >= (int64_t)page * NKV * HD,
                 "attention_decode_paged",
                 "need page > 0, nblk * page >= S and pstride >= page * NKV * HD");
    const att_pages pg = {table, page, 0, (long long)pstride};
    decode((cuda_ctx *)ctx, "attention_decode_paged", out, q, kpool, vpool, pg, nblk, cache_mask,
           len, R, S, NH, NKV, HD);
}
