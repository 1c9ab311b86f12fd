/*
 * moe_router.c — the router, on the host: softmax over the E router logits of each token, top-k
 * (ties to the lower expert index), optional renormalisation of the k weights, the grouping of
 * the M = N*K assignments by expert (a counting sort: expert e owns routed rows
 * [eoff[e], eoff[e+1])), the load-balancing statistics, and the backward of all of it.
 *
 * Only real tokens (mask != 0) enter the counts and probability sums of the aux loss and the
 * expert load; padding tokens are routed (their rows are computed) but never counted. The aux
 * loss's sequences are the rows, or the segments of packed rows (a mask value > 0 is a segment
 * id, ABI 1.7): a packed row's sequences weigh as they would in rows of their own.
 *
 * Backward, per token with chosen experts e_k, probabilities p, weights w_k and upstream dw_k:
 *   norm_topk: w_k = p_{e_k} / s, s = sum_j p_{e_j} + eps  =>  dp_{e_j} += (dw_j - sum_k dw_k w_k) / s
 *   else:      w_k = p_{e_k}                                =>  dp_{e_k} += dw_k
 *   aux:       dp_{n,e} += aux_weight * coef_g * count_{g,e}   (moe.h, MOE_AUX_*)
 *   softmax:   dlogit = p * (dp - sum_e p dp)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "moe.h"

/* Host scratch of at least n floats (grow-only). */
static float *hbuf(moe_model *m, uint64_t n, grpo_error *err) {
    if (n > m->hbuf_floats) {
        float *p = realloc(m->hbuf, n * sizeof(float));
        if (!p) {
            grpo_error_set(err, GRPO_ERR_NOMEM, "moe: router: out of host memory (%llu floats)",
                           (unsigned long long)n);
            return NULL;
        }
        m->hbuf = p, m->hbuf_floats = n;
    }
    return m->hbuf;
}

/* The groups of the host mask (moe.h): each real token's group (row, segment id), numbered in
 * order of first appearance, and each group's real tokens. Returns the group count. */
static int32_t groups_make(moe_model *m, int32_t B, int32_t T) {
    int32_t NG = 0;
    for (int32_t b = 0; b < B; b++) {
        int32_t first = NG, last_id = 0, g = -1;
        for (int32_t t = 0; t < T; t++) {
            size_t n = (size_t)b * T + t;
            int32_t id = m->hmask[n];
            m->grp[n] = -1;
            if (!id) continue;
            if (id != last_id) { /* the row's group of this id, or a new one */
                for (g = first; g < NG && m->gid[g] != id; g++) {}
                if (g == NG) m->gid[NG] = id, m->greal[NG++] = 0;
                last_id = id;
            }
            m->grp[n] = g, m->greal[g]++;
        }
    }
    return NG;
}

/* Room for N tokens (hmask, grp, and at most N groups' gid, greal). */
static int32_t tokens_reserve(moe_model *m, int32_t N, grpo_error *err) {
    if (N <= m->cap_N) return GRPO_OK;
    int32_t *hm = realloc(m->hmask, (size_t)N * sizeof(int32_t));
    if (hm) m->hmask = hm;
    int32_t *gr = realloc(m->grp, (size_t)N * sizeof(int32_t));
    if (gr) m->grp = gr;
    int32_t *gi = realloc(m->gid, (size_t)N * sizeof(int32_t));
    if (gi) m->gid = gi;
    int32_t *re = realloc(m->greal, (size_t)N * sizeof(int32_t));
    if (re) m->greal = re;
    if (!hm || !gr || !gi || !re)
        return grpo_error_set(err, GRPO_ERR_NOMEM, "moe: router: out of memory");
    m->cap_N = N;
    return GRPO_OK;
}

int32_t moe_router_begin(lm_decoder *d, const int32_t *mask, int32_t B, int32_t T,
                         grpo_error *err) {
    moe_model *m = (moe_model *)d;
    const moe_config *c = &m->cfg;
    int32_t N = B * T;
    if (tokens_reserve(m, N, err) != GRPO_OK) return err->status;
    if (mask)
        m->dec.ops->download(m->dec.ops->ctx, m->hmask, mask, (uint64_t)N * sizeof(int32_t));
    else
        for (int32_t n = 0; n < N; n++) m->hmask[n] = 1;
    m->NG = groups_make(m, B, T);
    int32_t G = m->NG > 0 ? m->NG : 1;
    if (G > m->cap_G) {
        float *cnt = realloc(m->count, (size_t)c->L * G * c->E * sizeof(float));
        if (cnt) m->count = cnt;
        float *ps = realloc(m->psum, (size_t)c->L * G * c->E * sizeof(float));
        if (ps) m->psum = ps;
        if (!cnt || !ps) return grpo_error_set(err, GRPO_ERR_NOMEM, "moe: router: out of memory");
        m->cap_G = G;
    }
    memset(m->count, 0, (size_t)c->L * G * c->E * sizeof(float));
    memset(m->psum, 0, (size_t)c->L * G * c->E * sizeof(float));
    m->B = B, m->T = T, m->aux = 0.0f;
    return GRPO_OK;
}

/* Softmax of one row of E logits in place. */
static void softmax_row(float *x, int32_t E) {
    float mx = x[0];
    for (int32_t e = 1; e < E; e++) mx = x[e] > mx ? x[e] : mx;
    double sum = 0.0;
    for (int32_t e = 0; e < E; e++) sum += (x[e] = expf(x[e] - mx));
    for (int32_t e = 0; e < E; e++) x[e] = (float)(x[e] / sum);
}

/* Top-k of one probability row: experts idx (K) in descending order, weights w (K). */
static void topk_row(int32_t *idx, float *w, const float *p, const moe_config *c) {
    double s = 0.0;
    for (int32_t k = 0; k < c->K; k++) {
        int32_t best = -1;
        for (int32_t e = 0; e < c->E; e++) {
            int32_t taken = 0;
            for (int32_t j = 0; j < k; j++) taken |= idx[j] == e;
            if (!taken && (best < 0 || p[e] > p[best])) best = e;
        }
        idx[k] = best, w[k] = p[best], s += p[best];
    }
    if (c->norm_topk)
        for (int32_t k = 0; k < c->K; k++) w[k] = (float)(w[k] / (s + c->norm_eps));
}

int32_t moe_router_forward(moe_model *m, moe_layer_acts *a, int32_t l, grpo_error *err) {
    const moe_config *c = &m->cfg;
    const grpo_ops *o = m->dec.ops;
    int32_t E = c->E, K = c->K, N = m->B * m->T, M = N * K;
    /* host layout: probs (N,E) | top idx (M) | top w (M) | tok (M) | slot (M) | w (M) */
    float *p = hbuf(m, (uint64_t)N * E + 5 * (uint64_t)M, err);
    if (!p) return err->status;
    int32_t *tidx = (int32_t *)(p + (size_t)N * E), *tok = tidx + 2 * (size_t)M;
    float *tw = p + (size_t)N * E + M, *w = p + (size_t)N * E + 4 * (size_t)M;
    int32_t *slot = tok + M, *off = m->eoff + (size_t)l * (E + 1);
    o->download(o->ctx, p, a->probs, (uint64_t)N * E * sizeof(float));
    float *count = m->count + (size_t)l * m->NG * E, *psum = m->psum + (size_t)l * m->NG * E;
    memset(off, 0, (size_t)(E + 1) * sizeof(int32_t));
    /* layer l's statistics start over: a layer recomputed in backward (gradient checkpointing)
     * counts its tokens once, with the bits of the forward */
    memset(count, 0, (size_t)m->NG * E * sizeof(float));
    memset(psum, 0, (size_t)m->NG * E * sizeof(float));
    for (int32_t n = 0; n < N; n++) {
        float *pn = p + (size_t)n * E;
        softmax_row(pn, E);
        topk_row(tidx + (size_t)n * K, tw + (size_t)n * K, pn, c);
        for (int32_t k = 0; k < K; k++) off[tidx[(size_t)n * K + k] + 1]++;
        if (!m->hmask[n]) continue;
        int32_t b = m->grp[n];
        for (int32_t k = 0; k < K; k++) count[(size_t)b * E + tidx[(size_t)n * K + k]] += 1.0f;
        for (int32_t e = 0; e < E; e++) psum[(size_t)b * E + e] += pn[e];
    }
    for (int32_t e = 0; e < E; e++) off[e + 1] += off[e];
    int32_t fill[E]; /* next free routed row of each expert */
    memcpy(fill, off, (size_t)E * sizeof(int32_t));
    for (int32_t n = 0; n < N; n++)
        for (int32_t k = 0; k < K; k++) {
            int32_t r = fill[tidx[(size_t)n * K + k]]++;
            tok[r] = n, slot[r] = n * K + k, w[r] = tw[(size_t)n * K + k];
        }
    o->upload(o->ctx, a->probs, p, (uint64_t)N * E * sizeof(float));
    o->upload(o->ctx, a->tok, tok, (uint64_t)M * sizeof(int32_t));
    o->upload(o->ctx, a->slot, slot, (uint64_t)M * sizeof(int32_t));
    o->upload(o->ctx, a->w, w, (uint64_t)M * sizeof(float));
    return GRPO_OK;
}

/* Real tokens of the pass (the groups' sum). */
static int32_t real_tokens(const moe_model *m) {
    int32_t Nr = 0;
    for (int32_t g = 0; g < m->NG; g++) Nr += m->greal[g];
    return Nr;
}

/* coef_g * count_{g,e} for token group b of layer l: d aux / d p_{n,e} (moe.h). Fills g (E). */
static void aux_grad_row(const moe_model *m, float *g, int32_t l, int32_t b) {
    const moe_config *c = &m->cfg;
    int32_t E = c->E, B = m->NG, rows = m->NG, Nr = real_tokens(m);
    for (int32_t e = 0; e < E; e++) g[e] = 0.0f;
    if (Nr == 0) return;
    const float *cnt = m->count;
    if (c->aux_kind == MOE_AUX_SEQ) {
        double Sb = m->greal[b];
        double coef = c->aux_coef * E / ((double)rows * c->K * Sb * Sb);
        for (int32_t e = 0; e < E; e++)
            g[e] = (float)(coef * cnt[((size_t)l * B + b) * E + e]);
    } else if (c->aux_kind == MOE_AUX_TOKEN) {
        double coef = c->aux_coef * E / ((double)c->K * Nr * Nr);
        for (int32_t r = 0; r < B; r++)
            for (int32_t e = 0; e < E; e++) g[e] += (float)(coef * cnt[((size_t)l * B + r) * E + e]);
    } else {
        double LN = (double)c->L * Nr, coef = c->aux_coef * E / (LN * LN);
        for (int32_t ll = 0; ll < c->L; ll++)
            for (int32_t r = 0; r < B; r++)
                for (int32_t e = 0; e < E; e++)
                    g[e] += (float)(coef * cnt[((size_t)ll * B + r) * E + e]);
    }
}

void moe_router_end(lm_decoder *d) {
    moe_model *m = (moe_model *)d;
    const moe_config *c = &m->cfg;
    int32_t E = c->E, B = m->NG, rows = m->NG, Nr = real_tokens(m);
    for (int32_t l = 0; l < c->L; l++)
        for (int32_t e = 0; e < E; e++) {
            float s = 0.0f;
            for (int32_t b = 0; b < B; b++) s += m->count[((size_t)l * B + b) * E + e];
            m->load[(size_t)l * E + e] = s;
        }
    double aux = 0.0;
    if (Nr > 0 && c->aux_coef > 0) {
        /* sum_e count * psum per group, with the group's coefficient (moe.h) */
        double tot_c[E], tot_p[E];
        memset(tot_c, 0, sizeof tot_c), memset(tot_p, 0, sizeof tot_p);
        for (int32_t l = 0; l < c->L; l++) {
            double lc[E], lpp[E];
            memset(lc, 0, sizeof lc), memset(lpp, 0, sizeof lpp);
            for (int32_t b = 0; b < B; b++) {
                const float *cn = m->count + ((size_t)l * B + b) * E;
                const float *ps = m->psum + ((size_t)l * B + b) * E;
                double Sb = m->greal[b], dot = 0.0;
                for (int32_t e = 0; e < E; e++) {
                    dot += (double)cn[e] * ps[e];
                    lc[e] += cn[e], lpp[e] += ps[e];
                }
                if (c->aux_kind == MOE_AUX_SEQ && Sb > 0)
                    aux += c->aux_coef * E * dot / ((double)rows * c->K * Sb * Sb);
            }
            double dot = 0.0;
            for (int32_t e = 0; e < E; e++) {
                dot += lc[e] * lpp[e];
                tot_c[e] += lc[e], tot_p[e] += lpp[e];
            }
            if (c->aux_kind == MOE_AUX_TOKEN)
                aux += c->aux_coef * E * dot / ((double)c->K * Nr * Nr);
        }
        if (c->aux_kind == MOE_AUX_GLOBAL) {
            double LN = (double)c->L * Nr, dot = 0.0;
            for (int32_t e = 0; e < E; e++) dot += tot_c[e] * tot_p[e];
            aux = c->aux_coef * E * dot / (LN * LN);
        }
    }
    m->aux = (float)aux;
}

int32_t moe_router_backward(moe_model *m, float *dlogits, const float *dw,
                            const moe_layer_acts *a, int32_t l, float aux_weight,
                            grpo_error *err) {
    const moe_config *c = &m->cfg;
    const grpo_ops *o = m->dec.ops;
    int32_t E = c->E, K = c->K, N = m->B * m->T, M = N * K;
    /* host layout: probs (N,E) | dp (N,E) | dw (M) | tok (M) | slot (M) | w (M) |
     *              per slot: expert (M), dw (M), w (M) */
    float *p = hbuf(m, 2 * (uint64_t)N * E + 7 * (uint64_t)M, err);
    if (!p) return err->status;
    float *dp = p + (size_t)N * E, *hdw = dp + (size_t)N * E, *w = hdw + 3 * (size_t)M;
    int32_t *tok = (int32_t *)(hdw + M), *slot = tok + M, *se = (int32_t *)(w + M);
    float *sdw = w + 2 * (size_t)M, *sw = w + 3 * (size_t)M;
    const int32_t *off = m->eoff + (size_t)l * (E + 1);
    o->download(o->ctx, p, a->probs, (uint64_t)N * E * sizeof(float));
    o->download(o->ctx, hdw, dw, (uint64_t)M * sizeof(float));
    o->download(o->ctx, tok, a->tok, (uint64_t)M * sizeof(int32_t));
    o->download(o->ctx, slot, a->slot, (uint64_t)M * sizeof(int32_t));
    o->download(o->ctx, w, a->w, (uint64_t)M * sizeof(float));
    for (int32_t e = 0; e < E; e++)
        for (int32_t r = off[e]; r < off[e + 1]; r++)
            se[slot[r]] = e, sdw[slot[r]] = hdw[r], sw[slot[r]] = w[r];
    memset(dp, 0, (size_t)N * E * sizeof(float));
    float g[E];
    int32_t g_row = -1;
    for (int32_t n = 0; n < N; n++) {
        float *pn = p + (size_t)n * E, *dn = dp + (size_t)n * E;
        const int32_t *ek = se + (size_t)n * K;
        const float *dwk = sdw + (size_t)n * K, *wk = sw + (size_t)n * K;
        if (c->norm_topk) {
            double s = c->norm_eps, dot = 0.0;
            for (int32_t k = 0; k < K; k++) s += pn[ek[k]], dot += (double)dwk[k] * wk[k];
            for (int32_t k = 0; k < K; k++) dn[ek[k]] += (float)((dwk[k] - dot) / s);
        } else {
            for (int32_t k = 0; k < K; k++) dn[ek[k]] += dwk[k];
        }
        if (aux_weight != 0.0f && c->aux_coef > 0 && m->hmask[n]) {
            int32_t b = m->grp[n];
            if (b != g_row) aux_grad_row(m, g, l, b), g_row = b;
            for (int32_t e = 0; e < E; e++) dn[e] += aux_weight * g[e];
        }
        double dot = 0.0;
        for (int32_t e = 0; e < E; e++) dot += (double)pn[e] * dn[e];
        for (int32_t e = 0; e < E; e++) dn[e] = (float)(pn[e] * (dn[e] - dot));
    }
    o->upload(o->ctx, dlogits, dp, (uint64_t)N * E * sizeof(float));
    return GRPO_OK;
}
