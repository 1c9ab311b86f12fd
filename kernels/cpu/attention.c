/*
 * attention.c — causal grouped-query attention with a key padding mask: the forward, its
 * backward, and one-token decode against the KV cache. Only the log-sum-exp of each query row
 * is kept; the backward recomputes the probabilities from it. No (B,NH,T,T) buffer.
 *
 *   q (B,T,NH,HD), k/v (B,T,NKV,HD), mask (B,T) 1 = real, out (B,T,NH,HD), lse (B,NH,T)
 *   query head h reads key/value head h / (NH/NKV) (Hugging Face's repeat_kv order)
 *   query t attends to keys s <= t with mask[b,s] = 1; padding queries get out = 0, lse = 0
 *   since ABI 1.7 a mask value > 0 is a segment id (packed rows): query t attends to keys
 *   s <= t with mask[b,s] = mask[b,t], each segment as if it were a row of its own (same bits);
 *   0/1 masks are one segment per row, as before (prefix attention: nonzero = real, as before)
 *   since ABI 1.8 a segment id >= 2^16 is a child of the parent segment id >> 16 (packed rows
 *   sharing a prompt, grpo/ops_list.h): its queries attend to every key of the parent (the
 *   last segment of that id before the child: a parent is contiguous and precedes its
 *   children), then to their own segment's keys s <= t, one key sequence [parent | own] as
 *   prefix attention's [prefix | own]: the bits of the row [parent | child] alone
 *   scores are scale * q.k with scale = 1/sqrt(HD); lse = log sum_s exp(score)
 *
 * Forward and decode run one block of queries at a time through cpu_attend (attend.c), whose
 * sums follow the key sequence alone: a query's output and lse have the same bits in a batch
 * of any size and padding, in any query block, with or without a shared prefix, at any thread
 * count, and in decode against the cache (batch invariance: the sampler's log-probs are the
 * training forward's).
 *
 * Backward, per query row t with P = exp(score - lse), D = dout_t . out_t:
 *   dS = P * (dout_t . v_s - D)         dq_t = scale * sum_s dS_ts k_s
 *   dk_s = scale * sum_t dS_ts q_t      dv_s = sum_t P_ts dout_t
 * made one block of QB queries at a time with sgemm. dq, dk, dv are written (=). Each query
 * head's dk/dv contribution is made in a (T,HD) buffer of its own and the buffers of a group
 * are added in head order, by the thread that owns the group or afterwards (see
 * cpu_attention_backward): threads never share an output, and the result has the same bits
 * whatever the thread count.
 *
 * Threads: pool tasks (cpu_pool.h) over (query block, b, head) forward and (b, head) backward.
 * Prefix attention (ABI 1.6, grpo/ops.h) is the same code with a second key segment: a row's
 * keys are [its prefix's keys | its own keys], one sequence for the forward's softmax; the
 * backward's score block holds both side by side (two GEMMs into one block) and splits again;
 * a prefix's dkp/dvp get one (P,HD) part per (row, head), added up per prefix afterwards
 * (add_prefix_parts).
 * A row of segments runs, in each query block, one segment's queries at a time against [its
 * parent's keys | its own from the segment's first] (the same two GEMMs); a parent's dk/dv
 * take its children's gradients in place (each (b, head) owns its row's buffers).
 * Decode against a paged cache (ABI 1.9, attention_decode_paged) is the same code: the key
 * sequence is the row's slots from its first real one, found through the page table, so its
 * sums are the unpaged decode's, bit for bit (a key tile that spans two pages is read key by
 * key, as a tile across the prefix's end is).
 * Keys before a row's first real token are skipped (left padding costs nothing). Other padded
 * keys enter the sums with probability 0, so k and v must be finite there too (as they are
 * when computed from padding tokens). */
#include "cpu/blas.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "cpu/fastmath.h"

#define QB 64 /* queries per block: the score block is (QB, <= T) */

/* First real position of row b, or T when the row is all padding. */
static int32_t first_real(const int32_t *mask_b, int32_t T) {
    int32_t s = 0;
    while (s < T && !mask_b[s]) s++;
    return s;
}

static void check_shapes(const char *op, int32_t NH, int32_t NKV, int32_t HD) {
    CPU_CHECK(NKV > 0 && NH % NKV == 0, op, "NH must be a positive multiple of NKV");
    CPU_CHECK(HD > 0, op, "HD must be > 0");
}

/* Backward of one score row: p (nk) holds the scores, ds (nk) dout.v; on return p holds the
 * probabilities exp(score - l) and ds the score gradient scale * p * (ds - D). */
CPU_VECTOR_CLONES CPU_FMA_CONTRACT
static void dsoftmax_row(float *p, float *ds, const int32_t *mask, int32_t nvalid, int32_t nk,
                         float l, float D, float scale) {
    /* whole vectors where the row has room (the extra keys are in the future, their scores
     * finite, their mask entries there), masked by j < nvalid */
    int32_t n = (nvalid + 15) / 16 * 16 < nk ? (nvalid + 15) / 16 * 16 : nk;
#pragma omp simd
    for (int32_t j = 0; j < n; j++) {
        float pj = cpu_expf(p[j] - l);
        pj *= (float)((mask[j] != 0) & (j < nvalid));
        p[j] = pj;
        ds[j] = pj * (ds[j] - D) * scale;
    }
    for (int32_t j = n; j < nk; j++) p[j] = ds[j] = 0.0f;
}

/* ---- the rows' key sets: own keys, and (prefix attention) the shared prefix before them ----- */

/* The prefix that one row's queries also attend to, before the row's own keys. */
typedef struct att_prefix {
    const float *k, *v; /* the prefix's first real key / value (kv head 0, row stride NKV*HD) */
    int32_t n;          /* keys from that one to the prefix's end */
    int32_t p0;         /* that key's column in the (P) prefix */
} att_prefix;

/* The prefix-attention arguments (NULL in plain attention): kp/vp (BP,P,NKV,HD), pmask (BP,P),
 * prefix_of (B) row b's prefix. */
typedef struct att_prefix_args {
    const float *kp, *vp;
    const int32_t *pmask, *prefix_of;
    int32_t BP, P;
} att_prefix_args;

/* Per row: its first real own key k0, its prefix (pf[b].n = 0 without one), and the mask of the
 * keys its score rows hold, km[b] = [prefix from p0 | own keys from k0] (plain attention: the
 * row's mask from k0, no copy). */
typedef struct att_rows {
    int32_t *k0;
    att_prefix *pf;
    const int32_t **km;
    int32_t *kmbuf; /* (B, P+T) backing store of the prefixed km */
    int32_t PT;     /* the longest key set: T + P */
    int32_t *sg0;   /* (B,T) plain attention, rows with a segment id > 1: the first key of
                     * position t's segment (mask value); NULL row entries elsewhere */
    int32_t **sg;   /* (B) row b's part of sg0, or NULL when the row is one segment (0/1) */
    int32_t *pp0;   /* (B,T,2) with sg: position t's parent keys (a child segment, ABI 1.8):
                     * [2t] the parent's first column, [2t+1] its key count (0: no parent) */
} att_rows;


/* Row b's segment starts when its mask holds an id > 1 (since ABI 1.7), else NULL: st[t] =
 * the first s with mask[s] = mask[t] (mask[t] = 0: t); pp (T,2) each position's parent keys
 * (att_rows.pp0). */
static int32_t *segment_starts(const int32_t *mb, int32_t T, int32_t *st, int32_t *pp) {
    int32_t s = 0;
    while (s < T && mb[s] <= 1) s++;
    if (s == T) return NULL;
    for (int32_t t = 0; t < T; t++) {
        st[t] = t;
        for (int32_t u = t - 1; u >= 0 && mb[t]; u--)
            if (mb[u] == mb[t]) { /* st[u] is already its segment's first */
                st[t] = st[u];
                break;
            }
        pp[2 * t] = t, pp[2 * t + 1] = 0;
        if (st[t] != t) { /* the segment's first position has it */
            pp[2 * t] = pp[2 * st[t]], pp[2 * t + 1] = pp[2 * st[t] + 1];
            continue;
        }
        int32_t pid = mb[t] >> GRPO_ATTN_CHILD_SHIFT;
        for (int32_t u = t - 1; u >= 0 && pid; u--)
            if (mb[u] == pid) { /* the parent's last key: its first is st[u] */
                pp[2 * t] = st[u], pp[2 * t + 1] = u - st[u] + 1;
                break;
            }
    }
    return st;
}

static att_rows rows_make(const char *op, const int32_t *mask, int32_t B, int32_t T,
                          const att_prefix_args *pa, int32_t NKV, int32_t HD) {
    att_rows r = {0};
    size_t nb = (size_t)(B > 0 ? B : 1), P = pa ? (size_t)pa->P : 0;
    r.PT = T + (int32_t)P;
    r.k0 = malloc(nb * sizeof *r.k0), r.pf = calloc(nb, sizeof *r.pf);
    r.km = malloc(nb * sizeof *r.km);
    r.kmbuf = pa ? malloc(nb * (P + (size_t)T) * sizeof(int32_t)) : NULL;
    r.sg = pa ? NULL : calloc(nb, sizeof *r.sg);
    r.sg0 = pa ? NULL : malloc(nb * (size_t)(T > 0 ? T : 1) * sizeof *r.sg0);
    r.pp0 = pa ? NULL : malloc(nb * (size_t)(T > 0 ? T : 1) * 2 * sizeof *r.pp0);
    CPU_CHECK(r.k0 && r.pf && r.km && (!pa || r.kmbuf) && (pa || (r.sg && r.sg0 && r.pp0)), op,
              "out of memory for the row keys");
    for (int32_t b = 0; b < B; b++) {
        const int32_t *mb = mask + (size_t)b * T;
        r.k0[b] = first_real(mb, T);
        r.km[b] = mb + r.k0[b];
        if (!pa)
            r.sg[b] = segment_starts(mb, T, r.sg0 + (size_t)b * T, r.pp0 + (size_t)b * T * 2);
        if (!pa) continue;
        int32_t j = pa->prefix_of[b];
        CPU_CHECK(j >= 0 && j < pa->BP, op, "prefix_of[b] must lie in [0, BP)");
        const int32_t *pm = pa->pmask + (size_t)j * P;
        att_prefix *f = &r.pf[b];
        f->p0 = first_real(pm, pa->P), f->n = pa->P - f->p0;
        f->k = pa->kp + ((size_t)j * P + f->p0) * NKV * HD;
        f->v = pa->vp + ((size_t)j * P + f->p0) * NKV * HD;
        int32_t *km = r.kmbuf + (size_t)b * (P + T);
        memcpy(km, pm + f->p0, (size_t)f->n * sizeof(int32_t));
        memcpy(km + f->n, mb + r.k0[b], (size_t)(T - r.k0[b]) * sizeof(int32_t));
        r.km[b] = km;
    }
    return r;
}

static void rows_free(att_rows *r) {
    free(r->k0), free(r->pf), free(r->km), free(r->kmbuf), free(r->sg), free(r->sg0);
    free(r->pp0);
}

/* Forward of the query block t0..t0+nq-1 of head h in row b, whose first real own key is k0,
 * after pf->n prefix keys (0: plain attention); km: the block's key mask (att_rows), the keys
 * [prefix | own] one sequence for cpu_attend (attend.c). work: cpu_attend_scratch(QB, PT, HD). */
static void attention_forward_block(float *out, float *lse, const float *q, const float *k,
                                    const float *v, const int32_t *mask_b, const att_prefix *pf,
                                    const int32_t *km, int32_t b, int32_t h, int32_t t0,
                                    int32_t nq, int32_t k0, int32_t T, int32_t NH, int32_t NKV,
                                    int32_t HD, float *work) {
    const int32_t g = h / (NH / NKV), qs = NH * HD, ks = NKV * HD; /* row strides */
    const int32_t nk = t0 + nq - k0, np = pf->n, nt = np + nk; /* own keys k0 .. t0+nq-1 */
    float *ob = out + ((size_t)b * T + t0) * qs + (size_t)h * HD;
    float *lb = lse ? lse + ((size_t)b * NH + h) * T + t0 : NULL;
    if (nk <= 0) { /* the whole block is left padding */
        for (int32_t i = 0; i < nq; i++) {
            memset(ob + (size_t)i * qs, 0, (size_t)HD * sizeof(float));
            if (lb) lb[i] = 0.0f;
        }
        return;
    }
    cpu_att_keys K = {pf->k ? pf->k + (size_t)g * HD : NULL, pf->v ? pf->v + (size_t)g * HD : NULL,
                      k + ((size_t)b * T + k0) * ks + (size_t)g * HD,
                      v + ((size_t)b * T + k0) * ks + (size_t)g * HD, np, ks, km, nt,
                      NULL, 0, 0, 0, -1, NULL, NULL};
    int32_t nvalid[QB];
    for (int32_t i = 0; i < nq; i++) nvalid[i] = mask_b[t0 + i] ? np + t0 + i - k0 + 1 : 0;
    cpu_attend(ob, qs, lb, q + ((size_t)b * T + t0) * qs + (size_t)h * HD, qs, &K, nvalid, nq, HD,
               work);
}

/* Forward of the query block t0..t0+nq-1 of head h in a row of several segments (st: its
 * segment starts, pp its parent keys, att_rows): each run of queries of one segment attends to
 * its parent's keys (a child) and its own segment's keys from its first, one sequence for
 * cpu_attend, as if [parent | segment] were a row of its own (the same bits). kmr: T ints of
 * work (the run's key mask, 1 = same segment). */
static void attention_forward_segments(float *out, float *lse, const float *q, const float *k,
                                       const float *v, const int32_t *mask_b, const int32_t *st,
                                       const int32_t *pp, int32_t b, int32_t h, int32_t t0,
                                       int32_t nq, int32_t T, int32_t NH, int32_t NKV, int32_t HD,
                                       int32_t *kmr, float *work) {
    const int32_t g = h / (NH / NKV), qs = NH * HD, ks = NKV * HD;
    for (int32_t a = t0, e; a < t0 + nq; a = e) {
        int32_t id = mask_b[a], s0 = st[a];
        for (e = a + 1; e < t0 + nq && mask_b[e] == id; e++) {}
        float *ob = out + ((size_t)b * T + a) * qs + (size_t)h * HD;
        float *lb = lse ? lse + ((size_t)b * NH + h) * T + a : NULL;
        if (!id) { /* padding queries */
            for (int32_t t = a; t < e; t++) {
                memset(ob + (size_t)(t - a) * qs, 0, (size_t)HD * sizeof(float));
                if (lb) lb[t - a] = 0.0f;
            }
            continue;
        }
        int32_t p0 = pp[2 * a], np = pp[2 * a + 1]; /* the parent's keys (np = 0: none) */
        for (int32_t s = 0; s < np; s++) kmr[s] = 1;
        for (int32_t s = s0; s < e; s++) kmr[np + s - s0] = mask_b[s] == id;
        const float *pk = np ? k + ((size_t)b * T + p0) * ks + (size_t)g * HD : NULL;
        const float *pv = np ? v + ((size_t)b * T + p0) * ks + (size_t)g * HD : NULL;
        cpu_att_keys K = {pk, pv, k + ((size_t)b * T + s0) * ks + (size_t)g * HD,
                          v + ((size_t)b * T + s0) * ks + (size_t)g * HD, np, ks, kmr,
                          np + e - s0, NULL, 0, 0, 0, -1, NULL, NULL};
        int32_t nvalid[QB];
        for (int32_t t = a; t < e; t++) nvalid[t - a] = np + t - s0 + 1;
        cpu_attend(ob, qs, lb, q + ((size_t)b * T + a) * qs + (size_t)h * HD, qs, &K, nvalid,
                   e - a, HD, work);
    }
}

/* forward_rows' tasks: (query block, b, h), the last blocks (the most keys) handed out first;
 * work and kmr per thread */
typedef struct att_fwd_job {
    float *out, *lse;
    const float *q, *k, *v;
    const int32_t *mask;
    const att_rows *r;
    int32_t B, T, NH, NKV, HD, nblocks, heads;
    cpu_locals work, kmr;
} att_fwd_job;

static void att_fwd_task(void *arg, int64_t task, int32_t tid) {
    att_fwd_job *j = arg;
    const att_rows *r = j->r;
    const int32_t T = j->T, NH = j->NH, heads = j->heads;
    float *work = cpu_local(&j->work, tid);
    int32_t *kmr = cpu_local(&j->kmr, tid);
    int32_t blk = j->nblocks - 1 - (int32_t)task / heads, b = (int32_t)task % heads / NH;
    int32_t h = (int32_t)task % NH, t0 = blk * QB, nq = t0 + QB < T ? QB : T - t0;
    if (r->sg && r->sg[b])
        attention_forward_segments(j->out, j->lse, j->q, j->k, j->v, j->mask + (size_t)b * T,
                                   r->sg[b], r->pp0 + (size_t)b * T * 2, b, h, t0, nq, T, NH,
                                   j->NKV, j->HD, kmr, work);
    else
        attention_forward_block(j->out, j->lse, j->q, j->k, j->v, j->mask + (size_t)b * T,
                                &r->pf[b], r->km[b], b, h, t0, nq, r->k0[b], T, NH, j->NKV,
                                j->HD, work);
}

/* attention_forward, or with pa the prefix-attention forward. */
static void forward_rows(cpu_ctx *ctx, const char *op, float *out, float *lse, const float *q,
                         const float *k, const float *v, const int32_t *mask, int32_t B,
                         int32_t T, int32_t NH, int32_t NKV, int32_t HD,
                         const att_prefix_args *pa) {
    check_shapes(op, NH, NKV, HD);
    const int32_t nblocks = (T + QB - 1) / QB, heads = B * NH;
    att_rows r = rows_make(op, mask, B, T, pa, NKV, HD);
    att_fwd_job j = {out, lse, q, k, v, mask, &r, B, T, NH, NKV, HD, nblocks, heads, {0}, {0}};
    cpu_locals_init(&j.work, ctx, cpu_attend_scratch(QB, r.PT, HD) * sizeof(float), op);
    cpu_locals_init(&j.kmr, ctx, (size_t)(T > 0 ? T : 1) * sizeof(int32_t), op);
    cpu_parallel(ctx, CPU_FAM_ATTENTION, cpu_threads_for(ctx, (double)B * NH * T * r.PT * HD),
                 (int64_t)nblocks * heads, att_fwd_task, &j);
    cpu_locals_free(&j.work), cpu_locals_free(&j.kmr);
    rows_free(&r);
}

void cpu_attention_forward(void *ctx, float *out, float *lse, const float *q, const float *k,
                           const float *v, const int32_t *mask, int32_t B, int32_t T, int32_t NH,
                           int32_t NKV, int32_t HD) {
    forward_rows(ctx, "attention_forward", out, lse, q, k, v, mask, B, T, NH, NKV, HD, NULL);
}

void cpu_prefix_attention_forward(void *ctx, float *out, float *lse, const float *q,
                                  const float *k, const float *v, const int32_t *mask,
                                  const float *kp, const float *vp, const int32_t *pmask,
                                  const int32_t *prefix_of, int32_t B, int32_t T, int32_t BP,
                                  int32_t P, int32_t NH, int32_t NKV, int32_t HD) {
    att_prefix_args pa = {kp, vp, pmask, prefix_of, BP, P};
    forward_rows(ctx, "prefix_attention_forward", out, lse, q, k, v, mask, B, T, NH, NKV, HD,
                 &pa);
}

/* One (b, h)'s gradient outputs: dq rows written; dk/dv (T rows of HD, row stride ld) and the
 * prefix's dkp/dvp (P rows of HD, from column p0) accumulated; any may be NULL. */
typedef struct att_head_grads {
    float *dq, *dk, *dv;
    int32_t ld;
    float *dkp, *dvp;
} att_head_grads;

/* The keys of one run of queries t0..t1-1 in a backward: np prefix keys pk/pv (a prefix, or a
 * child segment's parent; row stride ks), then own keys from column k0 with mask km (from k0). */
typedef struct att_bwd_keys {
    const float *pk, *pv, *kb, *vb; /* kb/vb: the row's own keys from column 0 */
    const int32_t *km;
    int32_t np, k0;
} att_bwd_keys;

/* Backward of the queries t0..t1-1 (at most QB) of one (b, h) against the keys K: dq rows
 * written, gr's dk/dv (own keys from K->k0) and dkp/dvp (the np prefix keys) accumulated.
 * sc, dp: QB * (np + t1 - k0) floats each. */
static void backward_block(const att_head_grads *gr, const float *dob, const float *ob,
                           const float *lb, const float *qb, const int32_t *mask_b,
                           const att_bwd_keys *K, int32_t t0, int32_t t1, int32_t qs, int32_t ks,
                           int32_t HD, float scale, float *sc, float *dp) {
    const int32_t nq = t1 - t0, k0 = K->k0, nk = t1 - k0, np = K->np, nt = np + nk;
    const float *pk = K->pk, *pv = K->pv;
    float *dqb = gr->dq;
    if (nk <= 0) {
        if (dqb)
            for (int32_t t = t0; t < t1; t++)
                memset(dqb + (size_t)t * qs, 0, (size_t)HD * sizeof(float));
        return;
    }
    const float *qblk = qb + (size_t)t0 * qs, *doblk = dob + (size_t)t0 * qs;
    const float *kk = K->kb + (size_t)k0 * ks, *vk = K->vb + (size_t)k0 * ks;
    /* P (nq,nt) = exp(scale * Q [Kp|K]^T - lse), masked; dP (nq,nt) = dO [Vp|V]^T */
    if (np) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, np, HD, scale, qblk, qs, pk, ks,
                    0.0f, sc, nt);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, np, HD, 1.0f, doblk, qs, pv, ks,
                    0.0f, dp, nt);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, HD, scale, qblk, qs, kk, ks,
                0.0f, sc + np, nt);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, HD, 1.0f, doblk, qs, vk, ks,
                0.0f, dp + np, nt);
    for (int32_t i = 0; i < nq; i++) {
        int32_t t = t0 + i;
        float *p = sc + (size_t)i * nt, *ds = dp + (size_t)i * nt;
        if (!mask_b[t]) {
            memset(p, 0, (size_t)nt * sizeof(float));
            memset(ds, 0, (size_t)nt * sizeof(float));
            continue;
        }
        const float *o = ob + (size_t)t * qs, *d_o = dob + (size_t)t * qs;
        float D = 0.0f;
#pragma omp simd reduction(+ : D)
        for (int32_t d = 0; d < HD; d++) D += d_o[d] * o[d];
        dsoftmax_row(p, ds, K->km, np + t - k0 + 1, nt, lb[t], D, scale);
    }
    if (dqb) { /* dQ (nq,HD) = dS [Kp|K] */
        if (np)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, HD, np, 1.0f, dp, nt, pk,
                        ks, 0.0f, dqb + (size_t)t0 * qs, qs);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, HD, nk, 1.0f, dp + np, nt, kk,
                    ks, np ? 1.0f : 0.0f, dqb + (size_t)t0 * qs, qs);
    }
    if (gr->dk) /* dK (nk,HD) += dS^T Q */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, HD, nq, 1.0f, dp + np, nt, qblk,
                    qs, 1.0f, gr->dk + (size_t)k0 * gr->ld, gr->ld);
    if (gr->dv) /* dV (nk,HD) += P^T dO */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, HD, nq, 1.0f, sc + np, nt, doblk,
                    qs, 1.0f, gr->dv + (size_t)k0 * gr->ld, gr->ld);
    if (np && gr->dkp) /* the prefix's: dKp (np,HD) += dS^T Q, dVp += P^T dO */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, np, HD, nq, 1.0f, dp, nt, qblk, qs,
                    1.0f, gr->dkp, gr->ld);
    if (np && gr->dvp)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, np, HD, nq, 1.0f, sc, nt, doblk, qs,
                    1.0f, gr->dvp, gr->ld);
}

/* Backward of one (b, h) whose row has prefix pf (pf->n = 0: none) and key mask km (att_rows);
 * kb/vb, pk/pv: kv head g's own and prefix keys and values. sc, dp: QB * PT floats each.
 * st, pp (plain attention, a row of segments; else NULL): the segment starts and parent keys
 * (att_rows); each query block then runs one segment's queries at a time against [its parent's
 * keys | its segment's keys from the first], a parent's gradients added to its own dk/dv; kq
 * (T ints of work) their mask. */
static void attention_backward_head(const att_head_grads *gr, const float *dob, const float *ob,
                                    const float *lb, const float *qb, const float *kb,
                                    const float *vb, const float *pk, const float *pv,
                                    const int32_t *mask_b, const int32_t *km, const int32_t *st,
                                    const int32_t *pp, int32_t np, int32_t krow0, int32_t T,
                                    int32_t qs, int32_t ks, int32_t HD, float scale, float *sc,
                                    float *dp, int32_t *kq) {
    for (int32_t t0 = 0; t0 < T; t0 += QB) {
        int32_t t1 = t0 + QB < T ? t0 + QB : T;
        if (!st) {
            att_bwd_keys K = {pk, pv, kb, vb, km, np, krow0};
            backward_block(gr, dob, ob, lb, qb, mask_b, &K, t0, t1, qs, ks, HD, scale, sc, dp);
            continue;
        }
        for (int32_t a = t0, e; a < t1; a = e) { /* one segment's queries */
            for (e = a + 1; e < t1 && mask_b[e] == mask_b[a]; e++) {}
            int32_t p0 = pp[2 * a], npar = mask_b[a] ? pp[2 * a + 1] : 0;
            int32_t s0 = mask_b[a] ? st[a] : e; /* padding queries: no keys */
            for (int32_t j = 0; j < npar; j++) kq[j] = 1;
            for (int32_t s = s0; s < e; s++) /* a segment need not be contiguous */
                kq[npar + s - s0] = mask_b[s] == mask_b[a];
            att_bwd_keys K = {kb + (size_t)p0 * ks, vb + (size_t)p0 * ks, kb, vb, kq, npar, s0};
            att_head_grads g = *gr;
            g.dkp = gr->dk ? gr->dk + (size_t)p0 * gr->ld : NULL;
            g.dvp = gr->dv ? gr->dv + (size_t)p0 * gr->ld : NULL;
            backward_block(&g, dob, ob, lb, qb, mask_b, &K, a, e, qs, ks, HD, scale, sc, dp);
        }
    }
}

/* The arguments of sum_groups and add_prefix_parts' tasks. */
typedef struct att_sum_job {
    float *dst;
    const float *part;
    const int32_t *prefix_of;
    int32_t B, T, NH, NKV, HD;
} att_sum_job;

static void sum_groups_range(void *arg, int64_t bt0, int64_t bt1, int32_t tid) {
    const att_sum_job *j = arg;
    const int32_t T = j->T, NH = j->NH, NKV = j->NKV, HD = j->HD, rep = NH / NKV;
    (void)tid;
    for (int64_t bt = bt0; bt < bt1; bt++) {
        int32_t b = (int32_t)(bt / T), t = (int32_t)(bt % T);
        for (int32_t g = 0; g < NKV; g++) {
            float *o = j->dst + ((size_t)bt * NKV + g) * HD;
            for (int32_t d = 0; d < HD; d++) o[d] = 0.0f;
            for (int32_t i = 0; i < rep; i++) {
                const float *p = j->part + (((size_t)b * NH + g * rep + i) * T + t) * HD;
                for (int32_t d = 0; d < HD; d++) o[d] += p[d];
            }
        }
    }
}

/* dst (B,T,NKV,HD) = sum over the rep query heads of each group of part (B,NH,T,HD). */
static void sum_groups(void *ctx, float *dst, const float *part, int32_t B, int32_t T,
                       int32_t NH, int32_t NKV, int32_t HD) {
    att_sum_job j = {dst, part, NULL, B, T, NH, NKV, HD};
    cpu_parallel_range(ctx, CPU_FAM_ATTENTION, cpu_threads_for(ctx, (double)B * T * NH * HD),
                       (int64_t)B * T, 1, sum_groups_range, &j);
}

/* rows [jp0, jp1) of add_prefix_parts; j->T is P, j->B the rows */
static void prefix_parts_range(void *arg, int64_t jp0, int64_t jp1, int32_t tid) {
    const att_sum_job *j = arg;
    const int32_t P = j->T, NH = j->NH, NKV = j->NKV, HD = j->HD, rep = NH / NKV;
    (void)tid;
    for (int64_t jp = jp0; jp < jp1; jp++) {
        int32_t jj = (int32_t)(jp / P), p = (int32_t)(jp % P);
        for (int32_t b = 0; b < j->B; b++) {
            if (j->prefix_of[b] != jj) continue;
            for (int32_t g = 0; g < NKV; g++) {
                float *o = j->dst + ((size_t)jp * NKV + g) * HD;
                for (int32_t i = 0; i < rep; i++) {
                    const float *s = j->part + (((size_t)b * NH + g * rep + i) * P + p) * HD;
                    for (int32_t d = 0; d < HD; d++) o[d] += s[d];
                }
            }
        }
    }
}

/* dst (BP,P,NKV,HD) += part (B,NH,P,HD) summed over the rows of each prefix (in row order) and
 * the rep query heads of each group (in head order): the same bits for any thread count. */
static void add_prefix_parts(void *ctx, float *dst, const float *part, const int32_t *prefix_of,
                             int32_t B, int32_t BP, int32_t P, int32_t NH, int32_t NKV,
                             int32_t HD) {
    att_sum_job j = {dst, part, prefix_of, B, P, NH, NKV, HD};
    cpu_parallel_range(ctx, CPU_FAM_ATTENTION, cpu_threads_for(ctx, (double)B * P * NH * HD),
                       (int64_t)BP * P, 1, prefix_parts_range, &j);
}

/* dst (T rows of HD, row stride ld) += src (T,HD) */
static void add_rows(float *dst, int32_t ld, const float *src, int32_t T, int32_t HD) {
    for (int32_t t = 0; t < T; t++)
        for (int32_t d = 0; d < HD; d++) dst[(size_t)t * ld + d] += src[(size_t)t * HD + d];
}

/* The gradient outputs of a backward: dq, dk, dv (B,T,..) written; dkp, dvp (BP,P,NKV,HD)
 * accumulated (prefix attention only). */
typedef struct att_grads_out {
    float *dq, *dk, *dv, *dkp, *dvp;
} att_grads_out;

/* backward_rows' tasks: a (row, kv head) group or a (row, head), see backward_rows. */
typedef struct att_bwd_job {
    float *dq, *dk, *dv, *dkh_all, *dvh_all, *dkp_all, *dvp_all;
    const float *dout, *out, *lse, *q, *k, *v;
    const int32_t *mask;
    const att_rows *r;
    int32_t T, NH, NKV, HD, by_group;
    size_t pf; /* one head's dkp floats */
    float scale;
    cpu_locals sc, kq;
} att_bwd_job;

static void att_bwd_task(void *arg, int64_t task_, int32_t tid) {
    att_bwd_job *j = arg;
    const att_rows *r = j->r;
    const int32_t T = j->T, NH = j->NH, NKV = j->NKV, HD = j->HD, rep = NH / NKV;
    const int32_t qs = NH * HD, ks = NKV * HD, by_group = j->by_group, task = (int32_t)task_;
    const size_t hf = (size_t)T * HD;
    float *sc = cpu_local(&j->sc, tid), *kbuf = sc + (size_t)2 * QB * r->PT, *vbuf = kbuf + hf;
    int32_t *kq = cpu_local(&j->kq, tid);
    float *dk = j->dk, *dv = j->dv;
    int32_t b = by_group ? task / NKV : task / NH;
    int32_t h0 = by_group ? task % NKV * rep : task % NH;
    int32_t h1 = by_group ? h0 + rep : h0 + 1, g = h0 / rep;
    size_t koff = (size_t)b * T * ks + (size_t)g * HD;
    const att_prefix *f = &r->pf[b];
    att_head_grads gr = {NULL, by_group ? (dk ? kbuf : NULL)
                                        : (j->dkh_all ? j->dkh_all + (size_t)task * hf : NULL),
                         by_group ? (dv ? vbuf : NULL)
                                  : (j->dvh_all ? j->dvh_all + (size_t)task * hf : NULL),
                         HD, NULL, NULL};
    for (int32_t h = h0; h < h1; h++) {
        size_t qoff = (size_t)b * T * qs + (size_t)h * HD, po = ((size_t)b * NH + h) * j->pf;
        gr.dq = j->dq ? j->dq + qoff : NULL;
        gr.dkp = j->dkp_all ? j->dkp_all + po + (size_t)f->p0 * HD : NULL;
        gr.dvp = j->dvp_all ? j->dvp_all + po + (size_t)f->p0 * HD : NULL;
        if (gr.dk) memset(gr.dk, 0, hf * sizeof(float));
        if (gr.dv) memset(gr.dv, 0, hf * sizeof(float));
        if (j->dkp_all) memset(j->dkp_all + po, 0, j->pf * sizeof(float));
        if (j->dvp_all) memset(j->dvp_all + po, 0, j->pf * sizeof(float));
        attention_backward_head(&gr, j->dout + qoff, j->out + qoff,
                                j->lse + ((size_t)b * NH + h) * T, j->q + qoff, j->k + koff,
                                j->v + koff, f->k ? f->k + (size_t)g * HD : NULL,
                                f->v ? f->v + (size_t)g * HD : NULL, j->mask + (size_t)b * T,
                                r->km[b], r->sg ? r->sg[b] : NULL,
                                r->sg ? r->pp0 + (size_t)b * T * 2 : NULL, f->n, r->k0[b], T, qs,
                                ks, HD, j->scale, sc, sc + (size_t)QB * r->PT, kq);
        if (!by_group) continue;
        if (h == h0) { /* the group's dk/dv start at 0 */
            for (int32_t t = 0; t < T && dk; t++)
                memset(dk + koff + (size_t)t * ks, 0, (size_t)HD * sizeof(float));
            for (int32_t t = 0; t < T && dv; t++)
                memset(dv + koff + (size_t)t * ks, 0, (size_t)HD * sizeof(float));
        }
        if (dk) add_rows(dk + koff, ks, gr.dk, T, HD);
        if (dv) add_rows(dv + koff, ks, gr.dv, T, HD);
    }
}

/* attention_backward, or with pa the prefix-attention backward. */
static void backward_rows(cpu_ctx *ctx, const char *op, const att_grads_out *go,
                          const float *dout, const float *out, const float *lse, const float *q,
                          const float *k, const float *v, const int32_t *mask, int32_t B,
                          int32_t T, int32_t NH, int32_t NKV, int32_t HD,
                          const att_prefix_args *pa) {
    check_shapes(op, NH, NKV, HD);
    float *dq = go->dq, *dk = go->dk, *dv = go->dv;
    float *dkp = pa ? go->dkp : NULL, *dvp = pa ? go->dvp : NULL;
    if (!dq && !dk && !dv && !dkp && !dvp) return;
    const int32_t P = pa ? pa->P : 0;
    const float scale = 1.0f / sqrtf((float)HD);
    const size_t hf = (size_t)T * HD, pf = (size_t)P * HD; /* one head's dk / dkp floats */
    att_rows r = rows_make(op, mask, B, T, pa, NKV, HD);
    int nt = cpu_threads_for(ctx, (double)B * NH * T * r.PT * HD);
    /* Tasks are the B*NKV (row, kv head) groups when there are enough of them: one thread runs
     * the group's query heads in order, each into its own (T,HD) dk/dv buffer that is then added
     * to dk/dv. Otherwise the tasks are the B*NH heads, each into a buffer of the (B,NH,T,HD)
     * scratch, and sum_groups adds them up afterwards, in the same order (the same bits). A
     * prefix's dkp/dvp come from several rows: each head writes its (P,HD) part and
     * add_prefix_parts adds them up afterwards. */
    int by_group = B * NKV >= 2 * nt;
    size_t all = by_group ? 0 : (size_t)B * NH * hf, pall = (size_t)B * NH * pf;
    size_t n_own = (dk ? all : 0) + (dv ? all : 0), n_pre = (dkp ? pall : 0) + (dvp ? pall : 0);
    float *part = n_own + n_pre ? cpu_scratch(ctx, n_own + n_pre) : NULL;
    CPU_CHECK(n_own + n_pre == 0 || part != NULL, op, "out of memory for per-head dk/dv");
    float *dkh_all = dk && !by_group ? part : NULL;
    float *dvh_all = dv && !by_group ? part + (dk ? all : 0) : NULL;
    float *dkp_all = dkp ? part + n_own : NULL, *dvp_all = dvp ? part + n_own + (dkp ? pall : 0)
                                                               : NULL;
    int32_t tasks = by_group ? B * NKV : B * NH;
    att_bwd_job j = {dq, dk, dv, dkh_all, dvh_all, dkp_all, dvp_all, dout, out, lse, q, k, v,
                     mask, &r, T, NH, NKV, HD, by_group, pf, scale, {0}, {0}};
    /* per thread: score and dP blocks, then (group tasks) one head's dk and dv; a key mask */
    cpu_locals_init(&j.sc, ctx, ((size_t)2 * QB * r.PT + (by_group ? 2 * hf : 0)) * sizeof(float),
                    op);
    cpu_locals_init(&j.kq, ctx, (size_t)(T > 0 ? T : 1) * sizeof(int32_t), op);
    cpu_parallel(ctx, CPU_FAM_ATTENTION, nt, tasks, att_bwd_task, &j);
    cpu_locals_free(&j.sc), cpu_locals_free(&j.kq);
    if (dkh_all) sum_groups(ctx, dk, dkh_all, B, T, NH, NKV, HD);
    if (dvh_all) sum_groups(ctx, dv, dvh_all, B, T, NH, NKV, HD);
    if (dkp_all) add_prefix_parts(ctx, dkp, dkp_all, pa->prefix_of, B, pa->BP, P, NH, NKV, HD);
    if (dvp_all) add_prefix_parts(ctx, dvp, dvp_all, pa->prefix_of, B, pa->BP, P, NH, NKV, HD);
    rows_free(&r);
}

void cpu_attention_backward(void *ctx, float *dq, float *dk, float *dv, const float *dout,
                            const float *out, const float *lse, const float *q, const float *k,
                            const float *v, const int32_t *mask, int32_t B, int32_t T,
                            int32_t NH, int32_t NKV, int32_t HD) {
    att_grads_out go = {dq, dk, dv, NULL, NULL};
    backward_rows(ctx, "attention_backward", &go, dout, out, lse, q, k, v, mask, B, T, NH, NKV,
                  HD, NULL);
}

void cpu_prefix_attention_backward(void *ctx, float *dq, float *dk, float *dv, float *dkp,
                                   float *dvp, const float *dout, const float *out,
                                   const float *lse, const float *q, const float *k,
                                   const float *v, const int32_t *mask, const float *kp,
                                   const float *vp, const int32_t *pmask,
                                   const int32_t *prefix_of, int32_t B, int32_t T, int32_t BP,
                                   int32_t P, int32_t NH, int32_t NKV, int32_t HD) {
    att_prefix_args pa = {kp, vp, pmask, prefix_of, BP, P};
    att_grads_out go = {dq, dk, dv, dkp, dvp};
    backward_rows(ctx, "prefix_attention_backward", &go, dout, out, lse, q, k, v, mask, B, T, NH,
                  NKV, HD, &pa);
}

/* ---- decode: one new query per row against the KV cache ---------------------------------- */

/* A decode call's cache: unpaged (table NULL: k/v (R,S,NKV,HD)) or paged (ABI 1.9: k/v pools
 * of pages pstride floats apart, table (R,nblk) the page of each block of page slots). */
typedef struct att_dec_cache {
    const float *k, *v;
    const int32_t *table;
    int32_t nblk, page;
    int64_t pstride;
    int32_t pgs; /* log2(page) when a power of two, else -1 */
} att_dec_cache;

/* Float offset, from c->k (or c->v), of slot s of row r, kv head 0 (ks = NKV * HD). */
static size_t dec_slot(const att_dec_cache *c, int32_t r, int32_t s, int32_t S, int32_t ks) {
    if (!c->table) return ((size_t)r * S + s) * ks;
    int32_t b = c->pgs >= 0 ? s >> c->pgs : s / c->page, o = s - b * c->page;
    return (size_t)c->table[(size_t)r * c->nblk + b] * (size_t)c->pstride + (size_t)o * ks;
}

/* Row r, kv head g: the rep query heads of the group against the n cached keys from the row's
 * first real slot, by cpu_attend (attend.c): each cached key and value is read once per group,
 * and each head's output has the bits the training forward gives its query (paged or not: the
 * same key sequence, only where each key lies differs). tick/arg: cpu_att_keys's (or NULL).
 * work: cpu_attend_scratch(rep, S, HD). */
static void attention_decode_group(float *out, const float *q, const att_dec_cache *c,
                                   const int32_t *cache_mask, int32_t n, int32_t r, int32_t g,
                                   int32_t S, int32_t NH, int32_t NKV, int32_t HD,
                                   void (*tick)(void *), void *arg, float *work) {
    const int32_t rep = NH / NKV, ks = NKV * HD;
    const int32_t *cm = cache_mask + (size_t)r * S;
    float *og = out + ((size_t)r * NH + (size_t)g * rep) * HD;
    int32_t s0 = first_real(cm, n); /* skip the left padding */
    if (s0 == n) { /* nothing to attend to */
        memset(og, 0, (size_t)rep * HD * sizeof(float));
        return;
    }
    cpu_att_keys K = {NULL, NULL, NULL, NULL, 0, ks, cm + s0, n - s0, NULL, 0, 0, 0, -1,
                      tick, arg};
    if (c->table) { /* key j is slot s0 + j through the row's page table */
        K.k = c->k + (size_t)g * HD, K.v = c->v + (size_t)g * HD;
        K.pt = c->table + (size_t)r * c->nblk, K.pg = c->page, K.off = s0;
        K.pstride = c->pstride, K.pgs = c->pgs;
    } else {
        size_t off = ((size_t)r * S + s0) * ks + (size_t)g * HD;
        K.k = c->k + off, K.v = c->v + off;
    }
    int32_t nvalid[CPU_ATT_REP_MAX];
    for (int32_t j = 0; j < rep; j++) nvalid[j] = n - s0;
    cpu_attend(og, HD, NULL, q + ((size_t)r * NH + (size_t)g * rep) * HD, HD, &K, nvalid, rep,
               HD, work);
}

/* The cached keys and values of one group (row r, kv head g: slots s .. n-1) brought into L2
 * while the group before it is computed, `per` slots at each of that group's key tiles: in a
 * decode step the cache is read from memory (all the weights of the step pass through the
 * caches between two reads of it). Spread over the tiles, the reads overlap the products; all
 * at once, the prefetches wait on memory with nothing to compute beside them. */
typedef struct dec_prefetch {
    const att_dec_cache *c;
    int32_t r, g, s, n, S, NKV, HD, per;
} dec_prefetch;

/* The next `count` slots of p (fewer at its end). */
static void prefetch_slots(dec_prefetch *p, int32_t count) {
    const att_dec_cache *c = p->c;
    const int32_t ks = p->NKV * p->HD, e = p->n - p->s < count ? p->n : p->s + count;
    for (; p->s < e; p->s++) {
        size_t off = dec_slot(c, p->r, p->s, p->S, ks) + (size_t)p->g * p->HD;
        for (int32_t d = 0; d < p->HD; d += 16) { /* one 64-byte line per 16 floats */
            __builtin_prefetch(c->k + off + d, 0, 2);
            __builtin_prefetch(c->v + off + d, 0, 2);
        }
    }
}

static void prefetch_tick(void *arg) {
    dec_prefetch *p = arg;
    prefetch_slots(p, p->per);
}

/* the decode ops' tasks: the (row, kv head) groups; work: the scores per thread */
typedef struct att_dec_job {
    float *out;
    const float *q;
    att_dec_cache c;
    const int32_t *cache_mask, *len;
    int32_t R, S, NH, NKV, HD;
    cpu_locals work;
} att_dec_job;

/* Group rg, with the next group's cache (likely this thread's or a neighbour's task) read in
 * over its key tiles. */
static void att_dec_task(void *arg, int64_t task, int32_t tid) {
    att_dec_job *j = arg;
    const int32_t NKV = j->NKV, rg = (int32_t)task, r = rg / NKV;
    float *work = cpu_local(&j->work, tid);
    dec_prefetch pf = {&j->c, 0, 0, 0, 0, j->S, NKV, j->HD, 0};
    if (rg + 1 < j->R * NKV) {
        const int32_t nr = (rg + 1) / NKV, nn = j->len[nr];
        const int32_t n = j->len[r] - first_real(j->cache_mask + (size_t)r * j->S, j->len[r]);
        pf.r = nr, pf.g = (rg + 1) % NKV, pf.n = nn;
        pf.s = first_real(j->cache_mask + (size_t)nr * j->S, nn);
        const int32_t tiles = (n + 15) / 16; /* the dots pass's tiles of 16 keys (attend.c) */
        pf.per = tiles > 0 ? (pf.n - pf.s + tiles - 1) / tiles : pf.n - pf.s;
    }
    attention_decode_group(j->out, j->q, &j->c, j->cache_mask, j->len[r], r, rg % NKV, j->S,
                           j->NH, NKV, j->HD, pf.per > 0 ? prefetch_tick : NULL, &pf, work);
    prefetch_slots(&pf, pf.n - pf.s); /* what the tiles left (none, or a group with no keys) */
}

/* Both decode ops: checks, then the (row, kv head) groups on the pool. */
static void attention_decode_run(void *ctx, const char *op, float *out, const float *q,
                                 const att_dec_cache *c, const int32_t *cache_mask,
                                 const int32_t *len, int32_t R, int32_t S, int32_t NH,
                                 int32_t NKV, int32_t HD) {
    check_shapes(op, NH, NKV, HD);
    const int32_t rep = NH / NKV;
    for (int32_t r = 0; r < R; r++)
        CPU_CHECK(len[r] >= 0 && len[r] <= S, op, "len[r] must lie in [0, S]");
    CPU_CHECK(rep <= CPU_ATT_REP_MAX, op,
              "at most CPU_ATT_REP_MAX = 64 query heads per key/value head");
    att_dec_job j = {out, q, *c, cache_mask, len, R, S, NH, NKV, HD, {0}};
    cpu_locals_init(&j.work, ctx, cpu_attend_scratch(rep, S > 0 ? S : 1, HD) * sizeof(float),
                    op);
    cpu_parallel(ctx, CPU_FAM_ATTENTION, cpu_threads_for(ctx, (double)R * NH * S * HD * 2),
                 (int64_t)R * NKV, att_dec_task, &j);
    cpu_locals_free(&j.work);
}

void cpu_attention_decode(void *ctx, float *out, const float *q, const float *kcache,
                          const float *vcache, const int32_t *cache_mask, const int32_t *len,
                          int32_t R, int32_t S, int32_t NH, int32_t NKV, int32_t HD) {
    att_dec_cache c = {kcache, vcache, NULL, 0, 0, 0, -1};
    attention_decode_run(ctx, "attention_decode", out, q, &c, cache_mask, len, R, S, NH, NKV,
                         HD);
}

/* The page table must give a page to every block a row reads: from its first real slot to
 * len[r] - 1. */
static void check_table(const int32_t *table, const int32_t *cache_mask, const int32_t *len,
                        int32_t R, int32_t S, int32_t nblk, int32_t page) {
    for (int32_t r = 0; r < R; r++) {
        int32_t n = len[r] < S ? len[r] : S, s0 = first_real(cache_mask + (size_t)r * S, n);
        for (int32_t b = s0 / page; s0 < n && b <= (n - 1) / page; b++)
            CPU_CHECK(table[(size_t)r * nblk + b] >= 0, "attention_decode_paged",
                      "a block a row reads has no page (table id -1)");
    }
}

void cpu_attention_decode_paged(void *ctx, float *out, const float *q, const float *kpool,
                                const float *vpool, int64_t pstride, const int32_t *table,
                                int32_t nblk, int32_t page, const int32_t *cache_mask,
                                const int32_t *len, int32_t R, int32_t S, int32_t NH,
                                int32_t NKV, int32_t HD) {
    CPU_CHECK(page > 0 && (int64_t)nblk * page >= S && pstride >= (int64_t)page * NKV * HD,
              "attention_decode_paged",
              "need page > 0, nblk * page >= S and pstride >= page * NKV * HD");
    for (int32_t r = 0; r < R; r++)
        CPU_CHECK(len[r] >= 0 && len[r] <= S, "attention_decode_paged",
                  "len[r] must lie in [0, S]");
    check_table(table, cache_mask, len, R, S, nblk, page);
    int32_t pgs = -1;
    for (int32_t e = 0; e < 31 && pgs < 0; e++) pgs = (1 << e) == page ? e : -1;
    att_dec_cache c = {kpool, vpool, table, nblk, page, pstride, pgs};
    attention_decode_run(ctx, "attention_decode_paged", out, q, &c, cache_mask, len, R, S, NH,
                         NKV, HD);
}
