/*
 * head.c — the fused LM head: log p(target) without ever holding the (N,V) logits.
 *
 *   z (N,V) = scale * hidden (N,C) @ w (V,C)^T, made one (NB,VC) block at a time by sgemm
 *   lse (N) = logsumexp_j z_j, kept with an online (running max) update across vocab chunks
 *   logp (N) = z[target] - lse, 0 where target < 0
 *   entropy (N) = -sum_j p_j log p_j = log s - sum_j e^{z_j-m} (z_j-m) / s, where m is the
 *                 running max and s = sum_j e^{z_j-m} (optional output)
 * Backward recomputes each block and uses d logp / d z_j = delta_{j,target} - p_j:
 *   G (NB,VC) = dlogp * scale * (delta - exp(z - lse)), 0 on rows with target < 0
 *   dhidden (N,C) = sum over chunks of G @ w_chunk      (written)
 *   dw (V,C)     += G^T @ hidden                        (accumulated)
 * GEMMs run outside OpenMP regions with the context's BLAS threads; the per-row softmax work is
 * split over rows with OpenMP. The block buffer is the context's scratch.
 */
#include "cpu/blas.h"
#include <math.h>
#include <stdlib.h>

#include "cpu/cpu_backend.h"

#define NB 512  /* rows per block */
#define VC 1024 /* vocab entries per chunk */

/* Running softmax statistics of one row over the chunks seen so far. */
typedef struct row_stats {
    double m; /* running max of z */
    double s; /* sum e^{z-m} */
    double u; /* sum e^{z-m} (z-m) */
} row_stats;

/* Folds one chunk row z (vc) into st. */
static void stats_update(row_stats *st, const float *z, int32_t vc) {
    float cm = -INFINITY;
    for (int32_t j = 0; j < vc; j++)
        if (z[j] > cm) cm = z[j];
    if (st->s == 0.0) {
        st->m = cm;
    } else if (cm > st->m) { /* rescale to the new max: u' = a (u + (m - m') s), s' = a s */
        double a = exp(st->m - cm);
        st->u = a * (st->u + (st->m - cm) * st->s);
        st->s *= a;
        st->m = cm;
    }
    float m = (float)st->m, s = 0.0f, u = 0.0f;
    for (int32_t j = 0; j < vc; j++) {
        float d = z[j] - m, e = expf(d);
        s += e;
        u += e * d;
    }
    st->s += s;
    st->u += u;
}

void cpu_head_forward(void *ctx_, float *logp, float *lse, float *entropy, const float *hidden,
                      const float *w, const int32_t *targets, int32_t N, int32_t C, int32_t V,
                      float scale) {
    cpu_ctx *ctx = ctx_;
    if (N <= 0) return;
    CPU_CHECK(V > 0 && C > 0, "head_forward", "V and C must be > 0");
    float *z = cpu_scratch(ctx, (size_t)NB * VC);
    row_stats *st = malloc((size_t)NB * sizeof *st);
    float *zt = malloc((size_t)NB * sizeof *zt); /* target logits of the block */
    CPU_CHECK(z && st && zt, "head_forward", "out of memory for the logits block");
    for (int32_t n0 = 0; n0 < N; n0 += NB) {
        int32_t nb = n0 + NB < N ? NB : N - n0;
        for (int32_t i = 0; i < nb; i++) st[i] = (row_stats){0.0, 0.0, 0.0};
        for (int32_t v0 = 0; v0 < V; v0 += VC) {
            int32_t vc = v0 + VC < V ? VC : V - v0;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nb, vc, C, scale,
                        hidden + (size_t)n0 * C, C, w + (size_t)v0 * C, C, 0.0f, z, vc);
            int nt = cpu_threads_for(ctx, (double)nb * vc * 8);
#pragma omp parallel for num_threads(nt) schedule(static)
            for (int32_t i = 0; i < nb; i++) {
                const float *zi = z + (size_t)i * vc;
                stats_update(&st[i], zi, vc);
                int32_t tg = targets ? targets[n0 + i] : -1;
                if (tg >= v0 && tg < v0 + vc) zt[i] = zi[tg - v0];
            }
        }
        for (int32_t i = 0; i < nb; i++) {
            int32_t n = n0 + i, tg = targets ? targets[n] : -1;
            CPU_CHECK(tg < V, "head_forward", "target id >= V");
            double l = st[i].m + log(st[i].s);
            if (lse) lse[n] = (float)l;
            if (logp) logp[n] = tg >= 0 ? (float)((double)zt[i] - l) : 0.0f;
            if (entropy) entropy[n] = (float)(log(st[i].s) - st[i].u / st[i].s);
        }
    }
    free(st);
    free(zt);
}

void cpu_head_backward(void *ctx_, float *dhidden, float *dw, const float *dlogp,
                       const float *hidden, const float *w, const int32_t *targets,
                       const float *lse, int32_t N, int32_t C, int32_t V, float scale) {
    cpu_ctx *ctx = ctx_;
    if (N <= 0 || (!dhidden && !dw)) return;
    CPU_CHECK(V > 0 && C > 0, "head_backward", "V and C must be > 0");
    float *g = cpu_scratch(ctx, (size_t)NB * VC);
    CPU_CHECK(g != NULL, "head_backward", "out of memory for the logits block");
    for (int32_t n0 = 0; n0 < N; n0 += NB) {
        int32_t nb = n0 + NB < N ? NB : N - n0;
        const float *hb = hidden + (size_t)n0 * C;
        for (int32_t v0 = 0; v0 < V; v0 += VC) {
            int32_t vc = v0 + VC < V ? VC : V - v0;
            const float *wc = w + (size_t)v0 * C;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nb, vc, C, scale, hb, C, wc, C,
                        0.0f, g, vc);
            int nt = cpu_threads_for(ctx, (double)nb * vc * 8);
#pragma omp parallel for num_threads(nt) schedule(static)
            for (int32_t i = 0; i < nb; i++) {
                int32_t n = n0 + i, tg = targets[n];
                float *gi = g + (size_t)i * vc;
                float coef = tg >= 0 ? dlogp[n] * scale : 0.0f, l = lse[n];
                for (int32_t j = 0; j < vc; j++) gi[j] = coef == 0.0f ? 0.0f : -coef * expf(gi[j] - l);
                if (tg >= v0 && tg < v0 + vc) gi[tg - v0] += coef;
            }
            if (dhidden)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nb, C, vc, 1.0f, g, vc, wc,
                            C, v0 == 0 ? 0.0f : 1.0f, dhidden + (size_t)n0 * C, C);
            if (dw)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, vc, C, nb, 1.0f, g, vc, hb,
                            C, 1.0f, dw + (size_t)v0 * C, C);
        }
    }
}
