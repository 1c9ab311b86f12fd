/*
 * attention.c — causal grouped-query attention with a key padding mask, flash-attention style:
 * scores are made one block of QB queries at a time with a GEMM, turned into probabilities in
 * place, and multiplied into V with a second GEMM; only the log-sum-exp of each query row is
 * kept, and the backward pass recomputes the probabilities from it. No (B,NH,T,T) buffer.
 *
 *   q (B,T,NH,HD), k/v (B,T,NKV,HD), mask (B,T) 1 = real, out (B,T,NH,HD), lse (B,NH,T)
 *   query head h reads key/value head h / (NH/NKV) (Hugging Face's repeat_kv order)
 *   query t attends to keys s <= t with mask[b,s] = 1; padding queries get out = 0, lse = 0
 *   scores are scale * q.k with scale = 1/sqrt(HD); lse = log sum_s exp(score)
 *
 * Backward, per query row t with P = exp(score - lse), D = dout_t . out_t:
 *   dS = P * (dout_t . v_s - D)         dq_t = scale * sum_s dS_ts k_s
 *   dk_s = scale * sum_t dS_ts q_t      dv_s = sum_t P_ts dout_t
 * dq, dk, dv are written (=). Each query head's dk/dv contribution is made in a (T,HD) buffer
 * of its own and the buffers of a group are added in head order, by the thread that owns the
 * group or afterwards (see cpu_attention_backward): threads never share an output, and the
 * result has the same bits whatever the thread count.
 *
 * Threads: OpenMP over (query block, b, head) forward and (b, head) backward; every thread calls
 * (single-threaded) sgemm on its own blocks.
 * Keys before a row's first real token are skipped (left padding costs nothing). Other padded
 * keys enter the GEMMs and get probability 0, so k and v must be finite there too (as they are
 * when computed from padding tokens).
 */
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

/* Turns one score row (nk) into probabilities in place: the first nvalid keys are the causal
 * ones, of which those with mask 0 get 0, and the rest are 0. Writes lse and 1/sum. */
CPU_VECTOR_CLONES
static void softmax_row(float *row, float *lse, float *inv, const int32_t *mask, int32_t nvalid,
                        int32_t nk) {
    /* the loops run over whole vectors when the row has room (the extra keys are in the future,
     * their scores are finite and their mask entries exist), masked by j < nvalid */
    int32_t n = (nvalid + 15) / 16 * 16 < nk ? (nvalid + 15) / 16 * 16 : nk;
    float mx = -INFINITY, sum = 0.0f;
#pragma omp simd reduction(max : mx)
    for (int32_t j = 0; j < n; j++) {
        float s = (mask[j] != 0) & (j < nvalid) ? row[j] : -INFINITY;
        mx = s > mx ? s : mx;
    }
#pragma omp simd reduction(+ : sum)
    for (int32_t j = 0; j < n; j++) {
        float p = cpu_expf(row[j] - mx); /* computed everywhere, kept where real: no branch */
        p *= (float)((mask[j] != 0) & (j < nvalid));
        row[j] = p;
        sum += p;
    }
    for (int32_t j = n; j < nk; j++) row[j] = 0.0f;
    *lse = mx + logf(sum);
    *inv = 1.0f / sum;
}

/* Turns the score block sc (nq, nk) of queries t0.. against keys k0.. into probabilities in
 * place (zero where masked or in the future); writes lse and the row normalisers inv (nq). */
static void softmax_block(float *sc, float *lse, float *inv, const int32_t *mask_b, int32_t t0,
                          int32_t nq, int32_t k0, int32_t nk) {
    for (int32_t i = 0; i < nq; i++) {
        int32_t t = t0 + i;
        float *row = sc + (size_t)i * nk;
        if (!mask_b[t]) {
            memset(row, 0, (size_t)nk * sizeof(float));
            lse[i] = 0.0f;
            inv[i] = 0.0f;
            continue;
        }
        softmax_row(row, &lse[i], &inv[i], mask_b + k0, t - k0 + 1, nk);
    }
}

/* Backward of one score row: p (nk) holds the scores, ds (nk) dout.v; on return p holds the
 * probabilities exp(score - l) and ds the score gradient scale * p * (ds - D). */
CPU_VECTOR_CLONES
static void dsoftmax_row(float *p, float *ds, const int32_t *mask, int32_t nvalid, int32_t nk,
                         float l, float D, float scale) {
    int32_t n = (nvalid + 15) / 16 * 16 < nk ? (nvalid + 15) / 16 * 16 : nk; /* see softmax_row */
#pragma omp simd
    for (int32_t j = 0; j < n; j++) {
        float pj = cpu_expf(p[j] - l);
        pj *= (float)((mask[j] != 0) & (j < nvalid));
        p[j] = pj;
        ds[j] = pj * (ds[j] - D) * scale;
    }
    for (int32_t j = n; j < nk; j++) p[j] = ds[j] = 0.0f;
}

/* Forward of the query block t0..t0+nq-1 of head h in row b, whose first real key is k0.
 * sc: QB * T floats; blse, inv: QB floats. */
static void attention_forward_block(float *out, float *lse, const float *q, const float *k,
                                    const float *v, const int32_t *mask_b, int32_t b, int32_t h,
                                    int32_t t0, int32_t nq, int32_t k0, int32_t T, int32_t NH,
                                    int32_t NKV, int32_t HD, float *sc, float *blse, float *inv) {
    const int32_t g = h / (NH / NKV), qs = NH * HD, ks = NKV * HD; /* row strides */
    const float scale = 1.0f / sqrtf((float)HD);
    const int32_t nk = t0 + nq - k0; /* keys k0 .. t0+nq-1 */
    float *ob = out + ((size_t)b * T + t0) * qs + (size_t)h * HD;
    float *lb = lse ? lse + ((size_t)b * NH + h) * T + t0 : NULL;
    if (nk <= 0) { /* the whole block is left padding */
        for (int32_t i = 0; i < nq; i++) {
            memset(ob + (size_t)i * qs, 0, (size_t)HD * sizeof(float));
            if (lb) lb[i] = 0.0f;
        }
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, HD, scale,
                q + ((size_t)b * T + t0) * qs + (size_t)h * HD, qs,
                k + ((size_t)b * T + k0) * ks + (size_t)g * HD, ks, 0.0f, sc, nk);
    softmax_block(sc, blse, inv, mask_b, t0, nq, k0, nk);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, HD, nk, 1.0f, sc, nk,
                v + ((size_t)b * T + k0) * ks + (size_t)g * HD, ks, 0.0f, ob, qs);
    for (int32_t i = 0; i < nq; i++) {
        float *o = ob + (size_t)i * qs;
        for (int32_t d = 0; d < HD; d++) o[d] *= inv[i];
        if (lb) lb[i] = blse[i];
    }
}

void cpu_attention_forward(void *ctx_, float *out, float *lse, const float *q, const float *k,
                           const float *v, const int32_t *mask, int32_t B, int32_t T, int32_t NH,
                           int32_t NKV, int32_t HD) {
    cpu_ctx *ctx = ctx_;
    check_shapes("attention_forward", NH, NKV, HD);
    const int32_t nblocks = (T + QB - 1) / QB, heads = B * NH;
    int32_t *k0 = malloc((size_t)(B > 0 ? B : 1) * sizeof(int32_t)); /* first real key per row */
    CPU_CHECK(k0 != NULL, "attention_forward", "out of memory");
    for (int32_t b = 0; b < B; b++) k0[b] = first_real(mask + (size_t)b * T, T);
    int nt = cpu_threads_for(ctx, (double)B * NH * T * T * HD);
#pragma omp parallel num_threads(nt)
    {
        float *sc = malloc(((size_t)QB * T + 2 * QB) * sizeof(float));
        CPU_CHECK(sc != NULL, "attention_forward", "out of memory for a score block");
        /* tasks are (query block, b, h), the last blocks (the most keys) handed out first */
#pragma omp for schedule(dynamic, 1)
        for (int32_t task = 0; task < nblocks * heads; task++) {
            int32_t blk = nblocks - 1 - task / heads, b = task % heads / NH, h = task % NH;
            int32_t t0 = blk * QB, nq = t0 + QB < T ? QB : T - t0;
            attention_forward_block(out, lse, q, k, v, mask + (size_t)b * T, b, h, t0, nq, k0[b],
                                    T, NH, NKV, HD, sc, sc + (size_t)QB * T,
                                    sc + (size_t)QB * T + QB);
        }
        free(sc);
    }
    free(k0);
}

/* Backward of one (b, h): dq rows written, dkh/dvh (T rows of HD, row stride ld) accumulated. */
static void attention_backward_head(float *dqb, float *dkh, float *dvh, int32_t ld,
                                    const float *dob, const float *ob, const float *lb,
                                    const float *qb, const float *kb, const float *vb,
                                    const int32_t *mask_b, int32_t T, int32_t qs, int32_t ks,
                                    int32_t HD, float scale, float *sc, float *dp) {
    int32_t k0 = first_real(mask_b, T);
    for (int32_t t0 = 0; t0 < T; t0 += QB) {
        int32_t t1 = t0 + QB < T ? t0 + QB : T, nq = t1 - t0, nk = t1 - k0;
        if (nk <= 0) {
            if (dqb)
                for (int32_t t = t0; t < t1; t++)
                    memset(dqb + (size_t)t * qs, 0, (size_t)HD * sizeof(float));
            continue;
        }
        const float *qblk = qb + (size_t)t0 * qs, *doblk = dob + (size_t)t0 * qs;
        /* P (nq,nk) = exp(scale * Q K^T - lse), masked */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, HD, scale, qblk, qs,
                    kb + (size_t)k0 * ks, ks, 0.0f, sc, nk);
        /* dP (nq,nk) = dO V^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, HD, 1.0f, doblk, qs,
                    vb + (size_t)k0 * ks, ks, 0.0f, dp, nk);
        for (int32_t i = 0; i < nq; i++) {
            int32_t t = t0 + i, nvalid = t - k0 + 1;
            float *p = sc + (size_t)i * nk, *ds = dp + (size_t)i * nk;
            if (!mask_b[t]) {
                memset(p, 0, (size_t)nk * sizeof(float));
                memset(ds, 0, (size_t)nk * sizeof(float));
                continue;
            }
            const float *o = ob + (size_t)t * qs, *d_o = dob + (size_t)t * qs;
            float D = 0.0f;
#pragma omp simd reduction(+ : D)
            for (int32_t d = 0; d < HD; d++) D += d_o[d] * o[d];
            dsoftmax_row(p, ds, mask_b + k0, nvalid, nk, lb[t], D, scale);
        }
        if (dqb) /* dQ (nq,HD) = dS K */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, HD, nk, 1.0f, dp, nk,
                        kb + (size_t)k0 * ks, ks, 0.0f, dqb + (size_t)t0 * qs, qs);
        if (dkh) /* dK (nk,HD) += dS^T Q */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, HD, nq, 1.0f, dp, nk, qblk,
                        qs, 1.0f, dkh + (size_t)k0 * ld, ld);
        if (dvh) /* dV (nk,HD) += P^T dO */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, HD, nq, 1.0f, sc, nk, doblk,
                        qs, 1.0f, dvh + (size_t)k0 * ld, ld);
    }
}

/* dst (B,T,NKV,HD) = sum over the rep query heads of each group of part (B,NH,T,HD). */
static void sum_groups(void *ctx, float *dst, const float *part, int32_t B, int32_t T,
                       int32_t NH, int32_t NKV, int32_t HD) {
    int32_t rep = NH / NKV;
    int nt = cpu_threads_for(ctx, (double)B * T * NH * HD);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int32_t bt = 0; bt < B * T; bt++) {
        int32_t b = bt / T, t = bt % T;
        for (int32_t g = 0; g < NKV; g++) {
            float *o = dst + ((size_t)bt * NKV + g) * HD;
            for (int32_t d = 0; d < HD; d++) o[d] = 0.0f;
            for (int32_t j = 0; j < rep; j++) {
                const float *p = part + (((size_t)b * NH + g * rep + j) * T + t) * HD;
                for (int32_t d = 0; d < HD; d++) o[d] += p[d];
            }
        }
    }
}

/* dst (T rows of HD, row stride ld) += src (T,HD) */
static void add_rows(float *dst, int32_t ld, const float *src, int32_t T, int32_t HD) {
    for (int32_t t = 0; t < T; t++)
        for (int32_t d = 0; d < HD; d++) dst[(size_t)t * ld + d] += src[(size_t)t * HD + d];
}

void cpu_attention_backward(void *ctx_, float *dq, float *dk, float *dv, const float *dout,
                            const float *out, const float *lse, const float *q, const float *k,
                            const float *v, const int32_t *mask, int32_t B, int32_t T,
                            int32_t NH, int32_t NKV, int32_t HD) {
    cpu_ctx *ctx = ctx_;
    check_shapes("attention_backward", NH, NKV, HD);
    if (!dq && !dk && !dv) return;
    const int32_t rep = NH / NKV, qs = NH * HD, ks = NKV * HD;
    const float scale = 1.0f / sqrtf((float)HD);
    const size_t hf = (size_t)T * HD; /* floats of one head's dk or dv */
    int nt = cpu_threads_for(ctx, (double)B * NH * T * T * HD);
    /* Tasks are the B*NKV (row, kv head) groups when there are enough of them: one thread runs
     * the group's query heads in order, each into its own (T,HD) dk/dv buffer that is then added
     * to dk/dv. Otherwise the tasks are the B*NH heads, each into a buffer of the (B,NH,T,HD)
     * scratch, and sum_groups adds them up afterwards, in the same order (the same bits). */
    int by_group = B * NKV >= 2 * nt;
    float *dkp = NULL, *dvp = NULL;
    if (!by_group && (dk || dv)) {
        size_t all = (size_t)B * NH * hf;
        float *part = cpu_scratch(ctx, (dk ? all : 0) + (dv ? all : 0));
        CPU_CHECK(part != NULL, "attention_backward", "out of memory for per-head dk/dv");
        dkp = dk ? part : NULL, dvp = dv ? part + (dk ? all : 0) : NULL;
    }
    int32_t tasks = by_group ? B * NKV : B * NH;
#pragma omp parallel num_threads(nt)
    {
        /* score and dP blocks, then (group tasks) one head's dk and dv */
        float *sc = malloc(((size_t)2 * QB * T + (by_group ? 2 * hf : 0)) * sizeof(float));
        CPU_CHECK(sc != NULL, "attention_backward", "out of memory for a score block");
        float *kbuf = sc + (size_t)2 * QB * T, *vbuf = kbuf + hf;
#pragma omp for schedule(static)
        for (int32_t task = 0; task < tasks; task++) {
            int32_t b = by_group ? task / NKV : task / NH;
            int32_t h0 = by_group ? task % NKV * rep : task % NH;
            int32_t h1 = by_group ? h0 + rep : h0 + 1, g = h0 / rep;
            size_t koff = (size_t)b * T * ks + (size_t)g * HD;
            float *dkh = by_group ? (dk ? kbuf : NULL) : (dkp ? dkp + (size_t)task * hf : NULL);
            float *dvh = by_group ? (dv ? vbuf : NULL) : (dvp ? dvp + (size_t)task * hf : NULL);
            for (int32_t h = h0; h < h1; h++) {
                size_t qoff = (size_t)b * T * qs + (size_t)h * HD;
                if (dkh) memset(dkh, 0, hf * sizeof(float));
                if (dvh) memset(dvh, 0, hf * sizeof(float));
                attention_backward_head(dq ? dq + qoff : NULL, dkh, dvh, HD, dout + qoff,
                                        out + qoff, lse + ((size_t)b * NH + h) * T, q + qoff,
                                        k + koff, v + koff, mask + (size_t)b * T, T, qs, ks, HD,
                                        scale, sc, sc + (size_t)QB * T);
                if (!by_group) continue;
                if (h == h0) { /* the group's dk/dv start at 0 */
                    for (int32_t t = 0; t < T && dk; t++)
                        memset(dk + koff + (size_t)t * ks, 0, (size_t)HD * sizeof(float));
                    for (int32_t t = 0; t < T && dv; t++)
                        memset(dv + koff + (size_t)t * ks, 0, (size_t)HD * sizeof(float));
                }
                if (dk) add_rows(dk + koff, ks, dkh, T, HD);
                if (dv) add_rows(dv + koff, ks, dvh, T, HD);
            }
        }
        free(sc);
    }
    if (dkp) sum_groups(ctx, dk, dkp, B, T, NH, NKV, HD);
    if (dvp) sum_groups(ctx, dv, dvp, B, T, NH, NKV, HD);
}

/* ---- decode: one new query per row against the KV cache ---------------------------------- */

/* Row r, kv head g: the rep query heads of the group as one (rep, HD) matrix against the n
 * cached keys, two small GEMMs, so each cached key and value is read once per group.
 * sc: rep * S floats; lse/inv: rep floats. */
static void attention_decode_group(float *out, const float *q, const float *kcache,
                                   const float *vcache, const int32_t *cache_mask, int32_t n,
                                   int32_t r, int32_t g, int32_t S, int32_t NH, int32_t NKV,
                                   int32_t HD, float *sc, float *lse, float *inv) {
    const int32_t rep = NH / NKV, ks = NKV * HD;
    const float scale = 1.0f / sqrtf((float)HD);
    const float *qg = q + ((size_t)r * NH + (size_t)g * rep) * HD;
    const float *kr = kcache + (size_t)r * S * ks + (size_t)g * HD;
    const float *vr = vcache + (size_t)r * S * ks + (size_t)g * HD;
    const int32_t *cm = cache_mask + (size_t)r * S;
    float *og = out + ((size_t)r * NH + (size_t)g * rep) * HD;
    int32_t s0 = first_real(cm, n); /* skip the left padding */
    if (s0 == n) { /* nothing to attend to */
        memset(og, 0, (size_t)rep * HD * sizeof(float));
        return;
    }
    kr += (size_t)s0 * ks, vr += (size_t)s0 * ks, cm += s0, n -= s0;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rep, n, HD, scale, qg, HD, kr, ks, 0.0f,
                sc, n);
    for (int32_t j = 0; j < rep; j++)
        softmax_row(sc + (size_t)j * n, &lse[j], &inv[j], cm, n, n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rep, HD, n, 1.0f, sc, n, vr, ks, 0.0f,
                og, HD);
    for (int32_t j = 0; j < rep; j++)
        for (int32_t d = 0; d < HD; d++) og[(size_t)j * HD + d] *= inv[j];
}

void cpu_attention_decode(void *ctx, float *out, const float *q, const float *kcache,
                          const float *vcache, const int32_t *cache_mask, const int32_t *len,
                          int32_t R, int32_t S, int32_t NH, int32_t NKV, int32_t HD) {
    check_shapes("attention_decode", NH, NKV, HD);
    const int32_t rep = NH / NKV;
    for (int32_t r = 0; r < R; r++)
        CPU_CHECK(len[r] >= 0 && len[r] <= S, "attention_decode", "len[r] must lie in [0, S]");
    int nt = cpu_threads_for(ctx, (double)R * NH * S * HD * 2);
#pragma omp parallel num_threads(nt)
    {
        float *sc = malloc(((size_t)rep * (S > 0 ? S : 1) + 2 * (size_t)rep) * sizeof(float));
        CPU_CHECK(sc != NULL, "attention_decode", "out of memory for the scores");
        float *lse = sc + (size_t)rep * (S > 0 ? S : 1), *inv = lse + rep;
#pragma omp for schedule(static)
        for (int32_t rg = 0; rg < R * NKV; rg++)
            attention_decode_group(out, q, kcache, vcache, cache_mask, len[rg / NKV], rg / NKV,
                                   rg % NKV, S, NH, NKV, HD, sc, lse, inv);
        free(sc);
    }
}
