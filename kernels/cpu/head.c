/*
 * head.c — the fused LM head: log p(target) without ever holding the (N,V) logits.
 *
 *   z (N,V) = scale * hidden (N,C) @ w (V,C)^T, made one (NB,VC) block at a time by the
 *             batch-invariant product of gemm_nt.c: z of a row is scale times matmul_forward's
 *             output for it, the same bits whichever rows share its block (in bf16 products
 *             with fp32 sums when the context computes in bf16: cpu_set_compute_dtype)
 *   lse (N) = logsumexp_j z_j, kept with an online (running max) update across vocab chunks
 *   logp (N) = z[target] - lse
 *   entropy (N) = -sum_j p_j log p_j = log s - sum_j e^{z_j-m} (z_j-m) / s, where m is the
 *                 running max and s = sum_j e^{z_j-m} (optional output)
 * logits_logp folds rows of logits the decode made (R,V) through the same row_stats, chunk by
 * chunk: the sampler's log-prob of a drawn token is this file's logp of the row, bit for bit.
 * Rows with target < 0 (prompt and padding positions) are skipped: logp, lse, entropy and
 * dhidden are 0 there. The rows that are computed are gathered first, so the GEMMs stay dense.
 * Backward recomputes each block and uses d logp / d z_j = delta_{j,target} - p_j and, for a
 * loss with an entropy term (head_backward_entropy), d H / d z_j = -p_j (z_j - lse + H):
 *   G (NB,VC) = dlogp * scale * (delta - exp(z - lse))
 *             - dentropy * scale * exp(z - lse) * (z - lse + H)     (entropy term, when asked)
 *   dhidden (N,C) = sum over chunks of G @ w_chunk      (written)
 *   dw (V,C)     += G^T @ hidden                        (accumulated)
 * Forward: each pool task takes blocks of rows through all vocab chunks on its own (its own
 * single-threaded product and (NB,VC) buffer): no synchronisation. Backward: per vocab chunk,
 * the threads fill G for up to NS rows (and their dhidden rows) in row blocks, then dw's chunk
 * is one parallel GEMM over those rows; G lives in the context's scratch. The backward's
 * products, z's recomputation included, are OpenBLAS's in fp32 (z may differ from the
 * forward's in the last bits there); with bf16 compute they are cpu_sgemm's bf16 form
 * (gemm_nt.c or gemm_amx.c, each thread with its own packing buffers), and z is then the
 * forward's bit for bit (the same NT product of the same rows and chunk).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "cpu/fastmath.h"

#define NB 256  /* at most this many rows per forward task (rows of a logits block) */
#define VC 512  /* vocab entries per chunk */
#define NS 2048 /* rows whose gradient block G (NS,VC) the backward keeps at a time */

/* Running softmax statistics of one row over the chunks seen so far. */
typedef struct row_stats {
    double m; /* running max of z */
    double s; /* sum e^{z-m} */
    double u; /* sum e^{z-m} (z-m) */
} row_stats;

/* Folds one chunk row z (vc) into st. */
CPU_VECTOR_CLONES CPU_FMA_CONTRACT
static void stats_update(row_stats *st, const float *z, int32_t vc) {
    float cm = -INFINITY;
#pragma omp simd reduction(max : cm)
    for (int32_t j = 0; j < vc; j++) cm = z[j] > cm ? z[j] : cm;
    if (st->s == 0.0) {
        st->m = cm;
    } else if (cm > st->m) { /* rescale to the new max: u' = a (u + (m - m') s), s' = a s */
        double a = exp(st->m - cm);
        st->u = a * (st->u + (st->m - cm) * st->s);
        st->s *= a;
        st->m = cm;
    }
    float m = (float)st->m, s = 0.0f, u = 0.0f;
#pragma omp simd reduction(+ : s, u)
    for (int32_t j = 0; j < vc; j++) {
        float d = z[j] - m, e = cpu_expf(d);
        s += e;
        u += e * d;
    }
    st->s += s;
    st->u += u;
}

/* The log-sum-exp of a row whose chunks are all folded into st. */
static double row_lse(const row_stats *st) { return st->m + log(st->s); }

/* log p(target) from its logit zt and the row's log-sum-exp l. */
static float target_logp(float zt, double l) { return (float)((double)zt - l); }

/* One row of the backward block: g (vc) holds the logits z on entry and
 * coef * (delta_{j,tg} - exp(z_j - l)) on return (tg relative to the chunk, may be outside). */
CPU_VECTOR_CLONES CPU_FMA_CONTRACT
static void grad_row(float *g, int32_t vc, float coef, float l, int32_t tg) {
    if (coef == 0.0f) {
        for (int32_t j = 0; j < vc; j++) g[j] = 0.0f;
        return;
    }
#pragma omp simd
    for (int32_t j = 0; j < vc; j++) g[j] = -coef * cpu_expf(g[j] - l);
    if (tg >= 0 && tg < vc) g[tg] += coef;
}

/* grad_row plus the entropy term: g (vc) holds z on entry and, on return,
 * coef * (delta_{j,tg} - p_j) - ecoef * p_j * (z_j - l + h) with p_j = exp(z_j - l). */
CPU_VECTOR_CLONES CPU_FMA_CONTRACT
static void grad_row_entropy(float *g, int32_t vc, float coef, float ecoef, float l, float h,
                             int32_t tg) {
#pragma omp simd
    for (int32_t j = 0; j < vc; j++) {
        float d = g[j] - l, p = cpu_expf(d);
        g[j] = -coef * p - ecoef * p * (d + h);
    }
    if (tg >= 0 && tg < vc) g[tg] += coef;
}

/* Rows per task: up to NB, fewer when N is small so that every thread gets work. */
static int32_t rows_per_task(int32_t N, int nt) {
    int32_t nb = (N + nt - 1) / nt;
    nb = (nb + 15) / 16 * 16;
    return nb < 16 ? 16 : nb > NB ? NB : nb;
}

/* The rows with a target (all rows when targets is NULL) into idx (N); returns their count. */
static int32_t wanted_rows(int32_t *idx, const int32_t *targets, int32_t N, int32_t V,
                           const char *op) {
    int32_t nv = 0;
    for (int32_t n = 0; n < N; n++) {
        if (targets && targets[n] < 0) continue;
        CPU_CHECK(!targets || targets[n] < V, op, "target id >= V");
        idx[nv++] = n;
    }
    return nv;
}

/* hb (m,C) = hidden rows idx[0..m-1] */
static void gather_rows(float *hb, const float *hidden, const int32_t *idx, int32_t m, int32_t C) {
    for (int32_t i = 0; i < m; i++)
        memcpy(hb + (size_t)i * C, hidden + (size_t)idx[i] * C, (size_t)C * sizeof(float));
}

/* logp, lse, entropy of the m rows idx[0..m-1]; hb (NB,C) and z (NB,VC) are work buffers, gw
 * too (cpu_gemm_nt_work(NB, C, VC) floats: the product packs each chunk of w into it, widened
 * when w is not fp32), ctx's ISA limit and compute dtype (bf16: bf16 products). */
static void head_forward_rows(float *logp, float *lse, float *entropy, const float *hidden,
                              const void *w, int32_t wtype, const int32_t *targets,
                              const int32_t *idx, int32_t m, int32_t C, int32_t V, float scale,
                              const cpu_ctx *ctx, float *hb, float *z, float *gw) {
    row_stats st[NB];
    float zt[NB]; /* target logits */
    for (int32_t i = 0; i < m; i++) st[i] = (row_stats){0.0, 0.0, 0.0}, zt[i] = 0.0f;
    gather_rows(hb, hidden, idx, m, C);
    for (int32_t v0 = 0; v0 < V; v0 += VC) {
        int32_t vc = v0 + VC < V ? VC : V - v0;
        const void *wc = (const char *)w + (size_t)v0 * C * grpo_dtype_size(wtype);
        cpu_gemm_nt_serial(ctx->simd_limit, cpu_gemm_cdtype(ctx), z, vc, hb, wc, wtype, NULL,
                           scale, m, C, vc, gw);
        for (int32_t i = 0; i < m; i++) {
            const float *zi = z + (size_t)i * vc;
            stats_update(&st[i], zi, vc);
            int32_t tg = targets ? targets[idx[i]] : -1;
            if (tg >= v0 && tg < v0 + vc) zt[i] = zi[tg - v0];
        }
    }
    for (int32_t i = 0; i < m; i++) {
        int32_t n = idx[i];
        double l = row_lse(&st[i]);
        if (lse) lse[n] = (float)l;
        if (logp) logp[n] = targets ? target_logp(zt[i], l) : 0.0f;
        if (entropy) entropy[n] = (float)(log(st[i].s) - st[i].u / st[i].s);
    }
}

/* head_forward_w's row blocks, one pool task each; z: a logits block, the gathered rows and
 * the product's buffers per thread */
typedef struct head_fwd_job {
    float *logp, *lse, *entropy;
    const float *hidden;
    const void *w;
    int32_t wtype;
    const int32_t *targets, *idx;
    int32_t nv, nb, C, V;
    float scale;
    const cpu_ctx *ctx;
    size_t gwf;
    cpu_locals z;
} head_fwd_job;

static void head_fwd_task(void *arg, int64_t task, int32_t tid) {
    head_fwd_job *j = arg;
    float *z = cpu_local(&j->z, tid);
    float *hb = z + (size_t)j->nb * VC, *gw = hb + (size_t)j->nb * j->C;
    int32_t r0 = (int32_t)task * j->nb, m = r0 + j->nb < j->nv ? j->nb : j->nv - r0;
    head_forward_rows(j->logp, j->lse, j->entropy, j->hidden, j->w, j->wtype, j->targets,
                      j->idx + r0, m, j->C, j->V, j->scale, j->ctx, hb, z, gw);
}

void cpu_head_forward_w(void *ctx_, float *logp, float *lse, float *entropy, const float *hidden,
                        const void *w, int32_t wtype, const int32_t *targets, int32_t N, int32_t C,
                        int32_t V, float scale) {
    cpu_ctx *ctx = ctx_;
    CPU_CHECK(grpo_dtype_size(wtype), "head_forward", "unknown weight dtype");
    if (N <= 0) return;
    CPU_CHECK(V > 0 && C > 0, "head_forward", "V and C must be > 0");
    int32_t *idx = malloc((size_t)N * sizeof(int32_t));
    CPU_CHECK(idx != NULL, "head_forward", "out of memory for the row list");
    int32_t nv = wanted_rows(idx, targets, N, V, "head_forward");
    for (int32_t n = 0; n < N; n++) { /* rows without a target stay 0 */
        if (logp) logp[n] = 0.0f;
        if (lse) lse[n] = 0.0f;
        if (entropy) entropy[n] = 0.0f;
    }
    int nt = cpu_threads_for(ctx, (double)nv * V * C);
    int32_t nb = rows_per_task(nv, nt), tasks = (nv + nb - 1) / nb;
    size_t gwf = cpu_gemm_nt_work(nb, C, VC); /* the product's packing buffers */
    head_fwd_job j = {logp, lse, entropy, hidden, w, wtype, targets, idx, nv, nb, C, V, scale,
                      ctx, gwf, {0}};
    cpu_locals_init(&j.z, ctx, ((size_t)nb * (VC + C) + gwf) * sizeof(float), "head_forward");
    cpu_parallel(ctx, CPU_FAM_HEAD, nt, tasks, head_fwd_task, &j);
    cpu_locals_free(&j.z);
    free(idx);
}

/* The row's log-prob of target tg: its logits z = scale * lrow (V), folded VC at a time in
 * the order head_forward_rows folds its chunks. zc: VC floats. */
static float row_logp(const float *lrow, int32_t V, int32_t tg, float scale, float *zc) {
    row_stats st = {0.0, 0.0, 0.0};
    for (int32_t v0 = 0; v0 < V; v0 += VC) {
        int32_t vc = v0 + VC < V ? VC : V - v0;
        for (int32_t j = 0; j < vc; j++) zc[j] = scale * lrow[v0 + j];
        stats_update(&st, zc, vc);
    }
    return target_logp(scale * lrow[tg], row_lse(&st));
}

typedef struct logp_job {
    float *logp;
    const float *logits;
    const int32_t *rows, *ids;
    int32_t V;
    float scale;
    cpu_locals zc; /* a chunk of VC floats per thread */
} logp_job;

static void logp_range(void *arg, int64_t r0, int64_t r1, int32_t tid) {
    logp_job *j = arg;
    float *zc = cpu_local(&j->zc, tid);
    for (int64_t r = r0; r < r1; r++) {
        CPU_CHECK(j->ids[r] >= 0 && j->ids[r] < j->V, "logits_logp", "ids[r] must lie in [0, V)");
        j->logp[r] = row_logp(j->logits + (size_t)j->rows[r] * j->V, j->V, j->ids[r], j->scale, zc);
    }
}

void cpu_logits_logp(void *ctx, float *logp, const float *logits, const int32_t *rows,
                     const int32_t *ids, int32_t R, int32_t V, float scale) {
    if (R <= 0) return;
    CPU_CHECK(V > 0, "logits_logp", "V must be > 0");
    logp_job j = {logp, logits, rows, ids, V, scale, {0}};
    cpu_locals_init(&j.zc, ctx, (size_t)VC * sizeof(float), "logits_logp");
    cpu_parallel_range(ctx, CPU_FAM_HEAD, cpu_threads_for(ctx, (double)R * V * 8), R, 1,
                       logp_range, &j);
    cpu_locals_free(&j.zc);
}

void cpu_head_forward(void *ctx, float *logp, float *lse, float *entropy, const float *hidden,
                      const float *w, const int32_t *targets, int32_t N, int32_t C, int32_t V,
                      float scale) {
    cpu_head_forward_w(ctx, logp, lse, entropy, hidden, w, GRPO_DTYPE_F32, targets, N, C, V,
                       scale);
}

/* head_backward's row blocks of one slice of rows (and one vocab chunk, head_grad_task) */
typedef struct head_bwd_job {
    float *g, *hb, *dh;
    const float *hidden, *wc, *dlogp, *dentropy, *entropy, *lse;
    const int32_t *targets, *ix;
    int32_t rows, nb, C, v0, vc;
    float scale;
    int dhidden;
    int32_t simd_limit, cdtype; /* the products' (cpu_sgemm_serial) */
    cpu_locals work;            /* their packing buffers per thread (bf16 compute only) */
} head_bwd_job;

static void head_gather_task(void *arg, int64_t task, int32_t tid) {
    const head_bwd_job *j = arg;
    (void)tid;
    int32_t r0 = (int32_t)task * j->nb, m = r0 + j->nb < j->rows ? j->nb : j->rows - r0;
    gather_rows(j->hb + (size_t)r0 * j->C, j->hidden, j->ix + r0, m, j->C);
}

static void head_grad_task(void *arg, int64_t task, int32_t tid) {
    head_bwd_job *j = arg;
    const int32_t C = j->C, vc = j->vc, v0 = j->v0;
    const float scale = j->scale;
    int32_t r0 = (int32_t)task * j->nb, m = r0 + j->nb < j->rows ? j->nb : j->rows - r0;
    float *gb = j->g + (size_t)r0 * vc;
    float *work = j->cdtype == GRPO_DTYPE_F32 ? NULL : cpu_local(&j->work, tid);
    cpu_sgemm_serial(j->simd_limit, j->cdtype, 0, 1, m, vc, C, scale, j->hb + (size_t)r0 * C, C,
                     j->wc, C, 0.0f, gb, vc, work);
    for (int32_t i = 0; i < m; i++) {
        int32_t n = j->ix[r0 + i];
        float *gi = gb + (size_t)i * vc;
        if (j->dentropy && j->dentropy[n] != 0.0f)
            grad_row_entropy(gi, vc, j->dlogp[n] * scale, j->dentropy[n] * scale, j->lse[n],
                             j->entropy[n], j->targets[n] - v0);
        else
            grad_row(gi, vc, j->dlogp[n] * scale, j->lse[n], j->targets[n] - v0);
    }
    if (j->dhidden) /* dh (m,C) (+)= G (m,vc) @ w_chunk (vc,C) */
        cpu_sgemm_serial(j->simd_limit, j->cdtype, 0, 0, m, C, vc, 1.0f, gb, vc, j->wc, C,
                         v0 == 0 ? 0.0f : 1.0f, j->dh + (size_t)r0 * C, C, work);
}

/* Every backward op: dentropy and entropy NULL for head_backward; w of wtype (dw NULL unless
 * fp32). */
static void head_backward(cpu_ctx *ctx, float *dhidden, float *dw, const float *dlogp,
                          const float *dentropy, const float *entropy, const float *hidden,
                          const void *w, int32_t wtype, const int32_t *targets, const float *lse,
                          int32_t N, int32_t C, int32_t V, float scale) {
    if (N <= 0 || (!dhidden && !dw)) return;
    CPU_CHECK(V > 0 && C > 0 && targets, "head_backward", "V, C > 0 and targets required");
    CPU_CHECK(grpo_dtype_size(wtype) && (!dw || wtype == GRPO_DTYPE_F32), "head_backward",
              "a known weight dtype, and no dw for a weight that is not fp32");
    if (dhidden) memset(dhidden, 0, (size_t)N * C * sizeof(float)); /* rows without a target */
    int32_t *idx = malloc((size_t)N * sizeof(int32_t));
    CPU_CHECK(idx != NULL, "head_backward", "out of memory for the row list");
    int32_t nv = wanted_rows(idx, targets, N, V, "head_backward");
    int nt = cpu_threads_for(ctx, (double)nv * V * C);
    int32_t ns = nv < NS ? nv : NS, nb = rows_per_task(ns, nt);
    /* G (ns,VC), then the gathered hidden rows hb (ns,C) and their gradient dh (ns,C) */
    float *g = cpu_scratch(ctx, (size_t)ns * (VC + 2 * C));
    CPU_CHECK(g != NULL || nv == 0, "head_backward", "out of memory for the gradient block");
    float *hb = g + (size_t)ns * VC, *dh = hb + (size_t)ns * C;
    float *wb = NULL; /* (VC,C): a chunk of w widened to fp32 */
    if (wtype != GRPO_DTYPE_F32) {
        wb = malloc((size_t)VC * C * sizeof(float));
        CPU_CHECK(wb != NULL, "head_backward", "out of memory for a weight chunk");
    }
    for (int32_t s0 = 0; s0 < nv; s0 += ns) {
        int32_t rows = s0 + ns < nv ? ns : nv - s0, tasks = (rows + nb - 1) / nb;
        const int32_t *ix = idx + s0;
        head_bwd_job j = {.g = g, .hb = hb, .dh = dh, .hidden = hidden, .dlogp = dlogp,
                          .dentropy = dentropy, .entropy = entropy, .lse = lse,
                          .targets = targets, .ix = ix, .rows = rows, .nb = nb, .C = C,
                          .scale = scale, .dhidden = dhidden != NULL,
                          .simd_limit = ctx->simd_limit, .cdtype = cpu_gemm_cdtype(ctx)};
        size_t wf = cpu_gemm_nt_work(nb, C, VC), wf2 = cpu_gemm_nt_work(nb, VC, C);
        cpu_locals_init(&j.work, ctx, (wf > wf2 ? wf : wf2) * sizeof(float), "head_backward");
        cpu_parallel(ctx, CPU_FAM_HEAD, nt, tasks, head_gather_task, &j);
        for (int32_t v0 = 0; v0 < V; v0 += VC) {
            int32_t vc = v0 + VC < V ? VC : V - v0;
            const float *wc = cpu_weight_rows(ctx, w, wtype, (uint64_t)v0, (uint64_t)vc,
                                              (uint64_t)C, wb);
            j.wc = wc, j.v0 = v0, j.vc = vc;
            cpu_parallel(ctx, CPU_FAM_HEAD, nt, tasks, head_grad_task, &j);
            if (dw) /* dw_chunk (vc,C) += G^T (vc,rows) @ hb (rows,C) */
                cpu_sgemm(ctx, 1, 0, vc, C, rows, 1.0f, g, vc, hb, C, 1.0f, dw + (size_t)v0 * C,
                          C);
        }
        cpu_locals_free(&j.work);
        if (dhidden)
            for (int32_t i = 0; i < rows; i++)
                memcpy(dhidden + (size_t)ix[i] * C, dh + (size_t)i * C, (size_t)C * sizeof(float));
    }
    free(wb);
    free(idx);
}

void cpu_head_backward(void *ctx, float *dhidden, float *dw, const float *dlogp,
                       const float *hidden, const float *w, const int32_t *targets,
                       const float *lse, int32_t N, int32_t C, int32_t V, float scale) {
    head_backward(ctx, dhidden, dw, dlogp, NULL, NULL, hidden, w, GRPO_DTYPE_F32, targets, lse, N,
                  C, V, scale);
}

void cpu_head_backward_entropy(void *ctx, float *dhidden, float *dw, const float *dlogp,
                               const float *dentropy, const float *entropy, const float *hidden,
                               const float *w, const int32_t *targets, const float *lse,
                               int32_t N, int32_t C, int32_t V, float scale) {
    CPU_CHECK(dentropy && entropy, "head_backward_entropy", "dentropy and entropy required");
    head_backward(ctx, dhidden, dw, dlogp, dentropy, entropy, hidden, w, GRPO_DTYPE_F32, targets,
                  lse, N, C, V, scale);
}

void cpu_head_backward_w(void *ctx, float *dhidden, const float *dlogp, const float *dentropy,
                         const float *entropy, const float *hidden, const void *w, int32_t wtype,
                         const int32_t *targets, const float *lse, int32_t N, int32_t C, int32_t V,
                         float scale) {
    CPU_CHECK(!dentropy == !entropy, "head_backward_w", "dentropy and entropy together");
    head_backward(ctx, dhidden, NULL, dlogp, dentropy, entropy, hidden, w, wtype, targets, lse, N,
                  C, V, scale);
}
