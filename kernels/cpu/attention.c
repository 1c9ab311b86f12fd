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
 * dq, dk, dv are written (=). Query heads sharing a key/value head accumulate into private
 * (T,HD) buffers that are then summed in head order, so threads never share an output.
 *
 * Threads: OpenMP over (b, head); every thread calls (single-threaded) sgemm on its own blocks.
 * Keys before a row's first real token are skipped (left padding costs nothing).
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
    float mx = -INFINITY, sum = 0.0f;
#pragma omp simd reduction(max : mx)
    for (int32_t j = 0; j < nvalid; j++) {
        float s = mask[j] ? row[j] : -INFINITY;
        mx = s > mx ? s : mx;
    }
#pragma omp simd reduction(+ : sum)
    for (int32_t j = 0; j < nvalid; j++) {
        float p = mask[j] ? cpu_expf(row[j] - mx) : 0.0f;
        row[j] = p;
        sum += p;
    }
    for (int32_t j = nvalid; j < nk; j++) row[j] = 0.0f;
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
#pragma omp simd
    for (int32_t j = 0; j < nvalid; j++) {
        float pj = mask[j] ? cpu_expf(p[j] - l) : 0.0f;
        p[j] = pj;
        ds[j] = pj * (ds[j] - D) * scale;
    }
    for (int32_t j = nvalid; j < nk; j++) p[j] = ds[j] = 0.0f;
}

void cpu_attention_forward(void *ctx_, float *out, float *lse, const float *q, const float *k,
                           const float *v, const int32_t *mask, int32_t B, int32_t T, int32_t NH,
                           int32_t NKV, int32_t HD) {
    cpu_ctx *ctx = ctx_;
    check_shapes("attention_forward", NH, NKV, HD);
    const int32_t rep = NH / NKV, qs = NH * HD, ks = NKV * HD; /* row strides of q/out, k/v */
    const float scale = 1.0f / sqrtf((float)HD);
    int nt = cpu_threads_for(ctx, (double)B * NH * T * T * HD);
#pragma omp parallel num_threads(nt)
    {
        float *sc = malloc(((size_t)QB * T + 2 * QB) * sizeof(float));
        CPU_CHECK(sc != NULL, "attention_forward", "out of memory for a score block");
        float *blse = sc + (size_t)QB * T, *inv = blse + QB;
#pragma omp for schedule(static)
        for (int32_t bh = 0; bh < B * NH; bh++) {
            int32_t b = bh / NH, h = bh % NH, g = h / rep;
            const int32_t *mask_b = mask + (size_t)b * T;
            const float *qb = q + (size_t)b * T * qs + (size_t)h * HD;
            const float *kb = k + (size_t)b * T * ks + (size_t)g * HD;
            const float *vb = v + (size_t)b * T * ks + (size_t)g * HD;
            float *ob = out + (size_t)b * T * qs + (size_t)h * HD;
            float *lb = lse ? lse + ((size_t)b * NH + h) * T : NULL;
            int32_t k0 = first_real(mask_b, T);
            for (int32_t t0 = 0; t0 < T; t0 += QB) {
                int32_t t1 = t0 + QB < T ? t0 + QB : T, nq = t1 - t0, nk = t1 - k0;
                if (nk <= 0) { /* the whole block is left padding */
                    for (int32_t t = t0; t < t1; t++) {
                        memset(ob + (size_t)t * qs, 0, (size_t)HD * sizeof(float));
                        if (lb) lb[t] = 0.0f;
                    }
                    continue;
                }
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, HD, scale,
                            qb + (size_t)t0 * qs, qs, kb + (size_t)k0 * ks, ks, 0.0f, sc, nk);
                softmax_block(sc, blse, inv, mask_b, t0, nq, k0, nk);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, HD, nk, 1.0f, sc, nk,
                            vb + (size_t)k0 * ks, ks, 0.0f, ob + (size_t)t0 * qs, qs);
                for (int32_t i = 0; i < nq; i++) {
                    float *o = ob + (size_t)(t0 + i) * qs;
                    for (int32_t d = 0; d < HD; d++) o[d] *= inv[i];
                    if (lb) lb[t0 + i] = blse[i];
                }
            }
        }
        free(sc);
    }
}

/* Backward of one (b, h): dq rows written, dkh/dvh (T,HD) private buffers written. */
static void attention_backward_head(float *dqb, float *dkh, float *dvh, const float *dob,
                                    const float *ob, const float *lb, const float *qb,
                                    const float *kb, const float *vb, const int32_t *mask_b,
                                    int32_t T, int32_t qs, int32_t ks, int32_t HD, float scale,
                                    float *sc, float *dp) {
    if (dkh) memset(dkh, 0, (size_t)T * HD * sizeof(float));
    if (dvh) memset(dvh, 0, (size_t)T * HD * sizeof(float));
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
            for (int32_t d = 0; d < HD; d++) D += d_o[d] * o[d];
            dsoftmax_row(p, ds, mask_b + k0, nvalid, nk, lb[t], D, scale);
        }
        if (dqb) /* dQ (nq,HD) = dS K */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, HD, nk, 1.0f, dp, nk,
                        kb + (size_t)k0 * ks, ks, 0.0f, dqb + (size_t)t0 * qs, qs);
        if (dkh) /* dK (nk,HD) += dS^T Q */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, HD, nq, 1.0f, dp, nk, qblk,
                        qs, 1.0f, dkh + (size_t)k0 * HD, HD);
        if (dvh) /* dV (nk,HD) += P^T dO */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, HD, nq, 1.0f, sc, nk, doblk,
                        qs, 1.0f, dvh + (size_t)k0 * HD, HD);
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

void cpu_attention_backward(void *ctx_, float *dq, float *dk, float *dv, const float *dout,
                            const float *out, const float *lse, const float *q, const float *k,
                            const float *v, const int32_t *mask, int32_t B, int32_t T,
                            int32_t NH, int32_t NKV, int32_t HD) {
    cpu_ctx *ctx = ctx_;
    check_shapes("attention_backward", NH, NKV, HD);
    if (!dq && !dk && !dv) return;
    const int32_t rep = NH / NKV, qs = NH * HD, ks = NKV * HD;
    const float scale = 1.0f / sqrtf((float)HD);
    size_t head_floats = (size_t)T * HD, all = (size_t)B * NH * head_floats;
    /* private dk/dv per query head, (B,NH,T,HD) each */
    float *part = cpu_scratch(ctx, (dk ? all : 0) + (dv ? all : 0));
    CPU_CHECK(part != NULL || (!dk && !dv), "attention_backward",
              "out of memory for the per-head dk/dv buffers");
    float *dkp = dk ? part : NULL, *dvp = dv ? part + (dk ? all : 0) : NULL;
    int nt = cpu_threads_for(ctx, (double)B * NH * T * T * HD);
#pragma omp parallel num_threads(nt)
    {
        float *sc = malloc((size_t)2 * QB * T * sizeof(float));
        CPU_CHECK(sc != NULL, "attention_backward", "out of memory for a score block");
#pragma omp for schedule(static)
        for (int32_t bh = 0; bh < B * NH; bh++) {
            int32_t b = bh / NH, h = bh % NH, g = h / rep;
            size_t qoff = (size_t)b * T * qs + (size_t)h * HD;
            size_t koff = (size_t)b * T * ks + (size_t)g * HD;
            attention_backward_head(dq ? dq + qoff : NULL,
                                    dkp ? dkp + (size_t)bh * head_floats : NULL,
                                    dvp ? dvp + (size_t)bh * head_floats : NULL, dout + qoff,
                                    out + qoff, lse + (size_t)bh * T, q + qoff, k + koff,
                                    v + koff, mask + (size_t)b * T, T, qs, ks, HD, scale, sc,
                                    sc + (size_t)QB * T);
        }
        free(sc);
    }
    if (dk) sum_groups(ctx, dk, dkp, B, T, NH, NKV, HD);
    if (dv) sum_groups(ctx, dv, dvp, B, T, NH, NKV, HD);
}

/* ---- decode: one new query per row against the KV cache ---------------------------------- */

void cpu_attention_decode(void *ctx, float *out, const float *q, const float *kcache,
                          const float *vcache, const int32_t *cache_mask, const int32_t *len,
                          int32_t R, int32_t S, int32_t NH, int32_t NKV, int32_t HD) {
    check_shapes("attention_decode", NH, NKV, HD);
    const int32_t rep = NH / NKV, ks = NKV * HD;
    const float scale = 1.0f / sqrtf((float)HD);
    int nt = cpu_threads_for(ctx, (double)R * NH * S * HD * 2);
#pragma omp parallel num_threads(nt)
    {
        float *sc = malloc((size_t)(S > 0 ? S : 1) * sizeof(float));
        CPU_CHECK(sc != NULL, "attention_decode", "out of memory for the scores");
#pragma omp for schedule(static)
        for (int32_t rh = 0; rh < R * NH; rh++) {
            int32_t r = rh / NH, h = rh % NH, g = h / rep;
            int32_t n = len[r];
            CPU_CHECK(n >= 0 && n <= S, "attention_decode", "len[r] must lie in [0, S]");
            const float *qh = q + (size_t)rh * HD;
            const float *kr = kcache + (size_t)r * S * ks + (size_t)g * HD;
            const float *vr = vcache + (size_t)r * S * ks + (size_t)g * HD;
            const int32_t *cm = cache_mask + (size_t)r * S;
            float *o = out + (size_t)rh * HD;
            float mx = -INFINITY;
            for (int32_t s = 0; s < n; s++) {
                if (!cm[s]) continue;
                const float *kv = kr + (size_t)s * ks;
                float dot = 0.0f;
                for (int32_t d = 0; d < HD; d++) dot += qh[d] * kv[d];
                sc[s] = dot * scale;
                if (sc[s] > mx) mx = sc[s];
            }
            for (int32_t d = 0; d < HD; d++) o[d] = 0.0f;
            if (mx == -INFINITY) continue; /* nothing to attend to */
            float sum = 0.0f;
            for (int32_t s = 0; s < n; s++) {
                if (!cm[s]) continue;
                float p = expf(sc[s] - mx);
                sum += p;
                const float *vv = vr + (size_t)s * ks;
                for (int32_t d = 0; d < HD; d++) o[d] += p * vv[d];
            }
            float inv = 1.0f / sum;
            for (int32_t d = 0; d < HD; d++) o[d] *= inv;
        }
        free(sc);
    }
}
