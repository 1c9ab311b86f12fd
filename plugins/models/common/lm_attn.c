/*
 * lm_attn.c — the shared self-attention block (see lm_attn.h): its parameters, the layout of its
 * activations and gradient buffers, forward, backward and one-token decode against a KV cache.
 */
#include <stddef.h>

#include "lm_attn.h"

const char *const lm_attn_param_names[AP_COUNT] = {
    "input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.q_proj.bias",
    "self_attn.k_proj.weight", "self_attn.k_proj.bias", "self_attn.v_proj.weight",
    "self_attn.v_proj.bias", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
    "self_attn.o_proj.weight", "self_attn.o_proj.bias"};
const uint32_t lm_attn_param_inits[AP_COUNT] = {
    GRPO_PARAM_INIT_ONES,   GRPO_PARAM_INIT_NORMAL,   GRPO_PARAM_INIT_NORMAL,
    GRPO_PARAM_INIT_NORMAL, GRPO_PARAM_INIT_NORMAL,   GRPO_PARAM_INIT_NORMAL,
    GRPO_PARAM_INIT_NORMAL, GRPO_PARAM_INIT_ONES,     GRPO_PARAM_INIT_ONES,
    GRPO_PARAM_INIT_RESIDUAL, GRPO_PARAM_INIT_RESIDUAL};

int32_t lm_attn_param_shape(const lm_attn_config *c, int32_t s, int64_t shape[2]) {
    int64_t Q = (int64_t)c->NH * c->HD, KV = (int64_t)c->NKV * c->HD;
    switch (s) {
    case AP_LN1: shape[0] = c->C; return 1;
    case AP_WQ: shape[0] = Q, shape[1] = c->C; return 2;
    case AP_WK: case AP_WV: shape[0] = KV, shape[1] = c->C; return 2;
    case AP_BQ: shape[0] = Q; return c->qkv_bias ? 1 : 0;
    case AP_BK: case AP_BV: shape[0] = KV; return c->qkv_bias ? 1 : 0;
    case AP_QNORM: case AP_KNORM: shape[0] = c->HD; return c->qk_norm ? 1 : 0;
    case AP_WO: shape[0] = c->C, shape[1] = Q; return 2;
    case AP_BO: shape[0] = c->C; return c->o_bias ? 1 : 0;
    default: return 0;
    }
}

/* Rounds each tensor up to 16 floats so every one starts 64-byte aligned. */
static uint64_t padded(uint64_t f) { return (f + 15) & ~(uint64_t)15; }

/* Carves or sizes the tensors of parts (LM_ACTS_*): with block NULL only counts. Returns floats
 * used. */
static uint64_t acts_layout(lm_attn_acts *a, float *block, const lm_attn_config *c, uint64_t N,
                            int32_t parts) {
    uint64_t Q = (uint64_t)c->NH * c->HD, KV = (uint64_t)c->NKV * c->HD, used = 0;
    int32_t kept = parts & LM_ACTS_KEPT, redone = parts & LM_ACTS_REDONE;
    lm_attn_acts dummy;
    if (!a) a = &dummy;
#define PLACE(part, f, sz) ((part) ? (void)(a->f = block ? block + used : NULL, \
                                            used += padded(sz)) : (void)0)
    PLACE(kept, x, N * c->C);
    PLACE(redone, ln1, N * c->C);
    PLACE(kept, ln1_rstd, N);
    PLACE(kept, q, N * Q);
    PLACE(kept, k, N * KV);
    PLACE(kept, v, N * KV);
    if (c->qk_norm) {
        PLACE(kept, qraw, N * Q);
        PLACE(kept, q_rstd, N * c->NH);
        PLACE(kept, kraw, N * KV);
        PLACE(kept, k_rstd, N * c->NKV);
    } else if (kept) {
        a->qraw = a->q, a->kraw = a->k, a->q_rstd = a->k_rstd = NULL;
    }
    PLACE(kept, att, N * Q);
    PLACE(kept, att_lse, N * c->NH);
    PLACE(kept, h, N * c->C);
#undef PLACE
    return used;
}

uint64_t lm_attn_acts_floats(const lm_attn_config *c, uint64_t N, int32_t parts) {
    return acts_layout(NULL, NULL, c, N, parts);
}

float *lm_attn_acts_carve(lm_attn_acts *a, float *block, const lm_attn_config *c, uint64_t N,
                          int32_t parts) {
    return block + acts_layout(a, block, c, N, parts);
}

static uint64_t grads_layout(lm_attn_grads *g, float *block, const lm_attn_config *c,
                             uint64_t N) {
    uint64_t Q = (uint64_t)c->NH * c->HD, KV = (uint64_t)c->NKV * c->HD, used = 0;
    lm_attn_grads dummy;
    if (!g) g = &dummy;
#define PLACE(f, sz) (g->f = block ? block + used : NULL, used += padded(sz))
    PLACE(dln, N * c->C);
    PLACE(dtmp, N * c->C);
    PLACE(datt, N * Q);
    PLACE(dq, N * Q);
    PLACE(dk, N * KV);
    PLACE(dv, N * KV);
    if (c->qk_norm) {
        PLACE(dqraw, N * Q);
        PLACE(dkraw, N * KV);
    } else {
        g->dqraw = g->dq, g->dkraw = g->dk;
    }
#undef PLACE
    return used;
}

uint64_t lm_attn_grads_floats(const lm_attn_config *c, uint64_t N) {
    return grads_layout(NULL, NULL, c, N);
}

float *lm_attn_grads_carve(lm_attn_grads *g, float *block, const lm_attn_config *c, uint64_t N) {
    return block + grads_layout(g, block, c, N);
}

/* ln1 -> q, k, v (N rows): projections, optional per-head q/k norm, RoPE in place. */
static void qkv_forward(const grpo_ops *o, const lm_attn_config *c, lm_attn_acts *a,
                        float *const *p, const int32_t *pos, int32_t N) {
    int32_t Q = c->NH * c->HD, KV = c->NKV * c->HD;
    o->rmsnorm_forward(o->ctx, a->ln1, a->ln1_rstd, a->x, p[AP_LN1], N, c->C, c->eps);
    lm_linear_forward(o, c->lin, a->qraw, a->ln1, p[AP_WQ], p[AP_BQ], N, c->C, Q);
    lm_linear_forward(o, c->lin, a->kraw, a->ln1, p[AP_WK], p[AP_BK], N, c->C, KV);
    lm_linear_forward(o, c->lin, a->v, a->ln1, p[AP_WV], p[AP_BV], N, c->C, KV);
    if (c->qk_norm) { /* per-head RMSNorm over HD: N*NH rows of HD */
        o->rmsnorm_forward(o->ctx, a->q, a->q_rstd, a->qraw, p[AP_QNORM], N * c->NH, c->HD,
                           c->eps);
        o->rmsnorm_forward(o->ctx, a->k, a->k_rstd, a->kraw, p[AP_KNORM], N * c->NKV, c->HD,
                           c->eps);
    }
    o->rope_forward(o->ctx, a->q, a->q, pos, N, c->NH, c->HD, c->rope_theta);
    o->rope_forward(o->ctx, a->k, a->k, pos, N, c->NKV, c->HD, c->rope_theta);
}

int32_t lm_attn_kept(const lm_attn_config *c, lm_kept *out) {
    uint64_t Q = (uint64_t)c->NH * c->HD, KV = (uint64_t)c->NKV * c->HD;
    int32_t n = 0;
#define KEPT(f, w) (out[n++] = (lm_kept){offsetof(lm_attn_acts, f), (w)})
    KEPT(x, c->C);
    KEPT(ln1_rstd, 1);
    KEPT(q, Q);
    KEPT(k, KV);
    KEPT(v, KV);
    if (c->qk_norm) {
        KEPT(qraw, Q);
        KEPT(q_rstd, c->NH);
        KEPT(kraw, KV);
        KEPT(k_rstd, c->NKV);
    }
    KEPT(h, c->C);
#undef KEPT
    return n;
}

/* Attention over the rows' tokens: plain rows in one call; with shared prefixes the prefix
 * rows first (plain), then the rows against them (lm_prefix.h). */
void lm_attn_core_forward(const grpo_ops *o, const lm_attn_config *c, const lm_attn_acts *a,
                          const lm_rows *r) {
    size_t np = (size_t)r->BP * r->P, Q = (size_t)c->NH * c->HD, KV = (size_t)c->NKV * c->HD;
    int32_t B = r->BP ? r->BP : r->B, T = r->BP ? r->P : r->T;
    o->attention_forward(o->ctx, a->att, a->att_lse, a->q, a->k, a->v, r->mask, B, T, c->NH,
                         c->NKV, c->HD);
    if (!r->BP) return;
    o->prefix_attention_forward(o->ctx, a->att + np * Q, a->att_lse + np * c->NH, a->q + np * Q,
                                a->k + np * KV, a->v + np * KV, r->mask + np, a->k, a->v,
                                r->mask, r->prefix_of, r->B, r->T, r->BP, r->P, c->NH, c->NKV,
                                c->HD);
}

/* Its backward: dq, dk, dv (N tokens) written. The prefixes' dk/dv: written by their own
 * attention, then the rows' gradients added (prefix_attention_backward's dkp/dvp). */
static void core_backward(const grpo_ops *o, const lm_attn_config *c, const lm_attn_grads *gb,
                          const lm_attn_acts *a, const lm_rows *r) {
    size_t np = (size_t)r->BP * r->P, Q = (size_t)c->NH * c->HD, KV = (size_t)c->NKV * c->HD;
    int32_t B = r->BP ? r->BP : r->B, T = r->BP ? r->P : r->T;
    o->attention_backward(o->ctx, gb->dq, gb->dk, gb->dv, gb->datt, a->att, a->att_lse, a->q,
                          a->k, a->v, r->mask, B, T, c->NH, c->NKV, c->HD);
    if (!r->BP) return;
    o->prefix_attention_backward(o->ctx, gb->dq + np * Q, gb->dk + np * KV, gb->dv + np * KV,
                                 gb->dk, gb->dv, gb->datt + np * Q, a->att + np * Q,
                                 a->att_lse + np * c->NH, a->q + np * Q, a->k + np * KV,
                                 a->v + np * KV, r->mask + np, a->k, a->v, r->mask, r->prefix_of,
                                 r->B, r->T, r->BP, r->P, c->NH, c->NKV, c->HD);
}

void lm_attn_forward(const grpo_ops *o, const lm_attn_config *c, lm_attn_acts *a, float *tmp,
                     float *const *p, const lm_rows *rows) {
    int32_t N = rows->N, Q = c->NH * c->HD;
    qkv_forward(o, c, a, p, rows->pos, N);
    lm_attn_core_forward(o, c, a, rows);
    lm_linear_forward(o, c->lin, tmp, a->att, p[AP_WO], p[AP_BO], N, Q, c->C);
    o->residual_forward(o->ctx, a->h, a->x, tmp, (uint64_t)N * c->C);
}

void lm_attn_redo(const grpo_ops *o, const lm_attn_config *c, const lm_attn_acts *a,
                  float *const *p, const lm_rows *rows) {
    o->rmsnorm_forward(o->ctx, a->ln1, a->ln1_rstd, a->x, p[AP_LN1], rows->N, c->C, c->eps);
}

void lm_attn_backward(const grpo_ops *o, const lm_attn_config *c, float *dx, const float *dh,
                      const lm_attn_grads *gb, const lm_attn_acts *a, float *const *p,
                      float *const *g, const lm_rows *rows) {
    int32_t N = rows->N, Q = c->NH * c->HD, KV = c->NKV * c->HD;
    const int32_t *pos = rows->pos;
    lm_linear_backward(o, c->lin, gb->datt, g[AP_WO], g[AP_BO], dh, a->att, p[AP_WO], N, Q, c->C);
    core_backward(o, c, gb, a, rows);
    o->rope_backward(o->ctx, gb->dq, gb->dq, pos, N, c->NH, c->HD, c->rope_theta);
    o->rope_backward(o->ctx, gb->dk, gb->dk, pos, N, c->NKV, c->HD, c->rope_theta);
    if (c->qk_norm) {
        o->rmsnorm_backward(o->ctx, gb->dqraw, g[AP_QNORM], gb->dq, a->qraw, p[AP_QNORM],
                            a->q_rstd, N * c->NH, c->HD);
        o->rmsnorm_backward(o->ctx, gb->dkraw, g[AP_KNORM], gb->dk, a->kraw, p[AP_KNORM],
                            a->k_rstd, N * c->NKV, c->HD);
    }
    lm_linear_backward(o, c->lin, gb->dln, g[AP_WQ], g[AP_BQ], gb->dqraw, a->ln1, p[AP_WQ], N, c->C,
                       Q);
    lm_linear_backward(o, c->lin, gb->dtmp, g[AP_WK], g[AP_BK], gb->dkraw, a->ln1, p[AP_WK], N,
                       c->C, KV);
    o->accumulate(o->ctx, gb->dln, gb->dtmp, (uint64_t)N * c->C);
    lm_linear_backward(o, c->lin, gb->dtmp, g[AP_WV], g[AP_BV], gb->dv, a->ln1, p[AP_WV], N, c->C,
                       KV);
    o->accumulate(o->ctx, gb->dln, gb->dtmp, (uint64_t)N * c->C);
    o->rmsnorm_backward(o->ctx, dx, g[AP_LN1], gb->dln, a->x, p[AP_LN1], a->ln1_rstd, N, c->C);
    o->accumulate(o->ctx, dx, dh, (uint64_t)N * c->C); /* residual path */
}

/* Float offset of slot s of row r from kl->k (or kl->v). */
static uint64_t kv_slot(const lm_kv_layer *kl, int32_t r, int32_t s, uint64_t KV) {
    if (!kl->table) return ((uint64_t)r * kl->S + (uint64_t)s) * KV;
    int32_t pg = kl->table_host[(uint64_t)r * kl->nblk + (uint64_t)(s / kl->page)];
    return (uint64_t)pg * (uint64_t)kl->pstride + (uint64_t)(s % kl->page) * KV;
}

void lm_attn_decode(const grpo_ops *o, const lm_attn_config *c, lm_attn_acts *a, float *tmp,
                    float *const *p, const lm_kv_layer *kl, const int32_t *pos,
                    const int32_t *cache_mask, const int32_t *len, const int32_t *hlen,
                    int32_t R) {
    int32_t Q = c->NH * c->HD, KV = c->NKV * c->HD;
    uint64_t bytes = (uint64_t)KV * sizeof(float);
    qkv_forward(o, c, a, p, pos, R);
    for (int32_t r = 0; r < R; r++) {
        uint64_t slot = kv_slot(kl, r, hlen[r] - 1, (uint64_t)KV);
        o->copy(o->ctx, kl->k + slot, a->k + (uint64_t)r * KV, bytes);
        o->copy(o->ctx, kl->v + slot, a->v + (uint64_t)r * KV, bytes);
    }
    if (kl->table)
        o->attention_decode_paged(o->ctx, a->att, a->q, kl->k, kl->v, kl->pstride, kl->table,
                                  kl->nblk, kl->page, cache_mask, len, R, kl->S, c->NH, c->NKV,
                                  c->HD);
    else
        o->attention_decode(o->ctx, a->att, a->q, kl->k, kl->v, cache_mask, len, R, kl->S, c->NH,
                            c->NKV, c->HD);
    lm_linear_forward(o, c->lin, tmp, a->att, p[AP_WO], p[AP_BO], R, Q, c->C);
    o->residual_forward(o->ctx, a->h, a->x, tmp, (uint64_t)R * c->C);
}
