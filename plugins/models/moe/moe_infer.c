/*
 * moe_infer.c — the inference path: prefill of left-padded prompts into a KV cache, batched
 * one-token decode (each step routes its R tokens: one matmul per expert over the rows that chose
 * it), and cache row copies.
 *
 * KV cache layout (kv->R rows, kv->S slots): (L, 2, R, S, KV) — for layer l, keys then values,
 * each (R,S,NKV,HD), the layout attention_decode reads; keys after q/k norm and RoPE. Slot s of
 * row r holds the token at column s of the row's left-padded sequence (as the dense pack).
 */
#include "moe.h"

static float *kv_at(const moe_model *m, const grpo_kv_cache *kv, int32_t l, int32_t kind,
                    int32_t r, int32_t s) {
    uint64_t KV = (uint64_t)m->cfg.attn.NKV * m->cfg.attn.HD;
    uint64_t plane = (uint64_t)kv->R * kv->S * KV;
    return kv->data + ((uint64_t)l * 2 + kind) * plane + ((uint64_t)r * kv->S + s) * KV;
}

uint64_t moe_kv_floats(void *model, int32_t R, int32_t S) {
    moe_model *m = model;
    return (uint64_t)m->cfg.L * 2 * R * S * m->cfg.attn.NKV * m->cfg.attn.HD;
}

uint64_t moe_scratch_floats(void *model, int32_t R, int32_t T) {
    return moe_acts_floats(&((moe_model *)model)->cfg, R, T, 0);
}

void moe_kv_copy_row(void *model, const grpo_kv_cache *kv, int32_t dst, int32_t src,
                     int32_t n) {
    moe_model *m = model;
    const grpo_ops *o = m->ops;
    uint64_t bytes = (uint64_t)n * m->cfg.attn.NKV * m->cfg.attn.HD * sizeof(float);
    if (dst == src || n <= 0) return;
    for (int32_t l = 0; l < m->cfg.L; l++)
        for (int32_t kind = 0; kind < 2; kind++)
            o->copy(o->ctx, kv_at(m, kv, l, kind, dst, 0), kv_at(m, kv, l, kind, src, 0), bytes);
}

/* Final norm + head on R rows of x (R,C): logits (R,V). */
static void logits_forward(moe_model *m, float *logits, moe_acts *a, const float *x, int32_t R) {
    const grpo_ops *o = m->ops;
    const moe_config *c = &m->cfg;
    o->rmsnorm_forward(o->ctx, a->lnf, a->lnf_rstd, x, m->wnorm, R, c->attn.C, c->attn.eps);
    o->matmul_forward(o->ctx, logits, a->lnf, m->whead, NULL, R, c->attn.C, c->V);
}

int32_t moe_prefill(void *model, const grpo_kv_cache *kv, const grpo_batch *prompt,
                    float *scratch, float *logits, grpo_error *err) {
    moe_model *m = model;
    const grpo_ops *o = m->ops;
    const moe_config *c = &m->cfg;
    int32_t B = prompt->B, T = prompt->T, C = c->attn.C;
    if (!m->bound) return grpo_error_set(err, GRPO_ERR_INVALID, "moe: prefill before bind");
    if (B <= 0 || T <= 0 || B > kv->R || T > kv->S)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "moe: prefill of (%d,%d) prompts into a cache of %d rows x %d "
                              "slots (expected 0 < B <= rows, 0 < T <= slots)", B, T, kv->R, kv->S);
    moe_acts a;
    moe_acts_carve(&a, m->la, scratch, c, B, T, 0);
    int32_t st = moe_body_forward(m, &a, prompt->ids, prompt->mask, prompt->pos, B, T, kv, err);
    if (st != GRPO_OK) return st;
    for (int32_t b = 0; b < B; b++) /* the router copied the mask to the host */
        if (!m->hmask[(size_t)b * T + T - 1])
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "moe: prefill: prompt row %d is not left-padded (its last "
                                  "column is padding)", b);
    for (int32_t b = 0; b < B; b++) /* the last column of each row into tmp (B,C) */
        o->copy(o->ctx, a.tmp + (uint64_t)b * C, a.xL + ((uint64_t)b * T + T - 1) * C,
                (uint64_t)C * sizeof(float));
    logits_forward(m, logits, &a, a.tmp, B);
    return GRPO_OK;
}

int32_t moe_decode(void *model, const grpo_kv_cache *kv, int32_t R, const int32_t *tokens,
                   const int32_t *pos, const int32_t *cache_mask, const int32_t *len,
                   float *scratch, float *logits, grpo_error *err) {
    moe_model *m = model;
    const grpo_ops *o = m->ops;
    const moe_config *c = &m->cfg;
    if (!m->bound) return grpo_error_set(err, GRPO_ERR_INVALID, "moe: decode before bind");
    if (R <= 0 || R > kv->R)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "moe: decode of %d rows with a cache of %d rows", R, kv->R);
    int32_t *hlen = m->host->alloc((uint64_t)R * sizeof(int32_t));
    if (!hlen) return grpo_error_set(err, GRPO_ERR_NOMEM, "moe: decode: out of memory");
    o->download(o->ctx, hlen, len, (uint64_t)R * sizeof(int32_t));
    int32_t st = GRPO_OK;
    for (int32_t r = 0; r < R && st == GRPO_OK; r++)
        if (hlen[r] < 1 || hlen[r] > kv->S)
            st = grpo_error_set(err, GRPO_ERR_INVALID,
                                "moe: decode: len[%d] = %d, expected 1..%d (cache slots)", r,
                                hlen[r], kv->S);
    moe_acts a;
    moe_acts_carve(&a, m->la, scratch, c, R, 1, 0);
    if (st == GRPO_OK) st = moe_router_begin(m, NULL, R, 1, err);
    if (st == GRPO_OK) o->embedding_forward(o->ctx, a.l[0].at.x, tokens, m->wte, R, c->attn.C);
    for (int32_t l = 0; l < c->L && st == GRPO_OK; l++) {
        moe_layer_acts *la = &a.l[l];
        lm_attn_decode(o, &c->attn, &la->at, a.tmp, m->lp[l].p, kv_at(m, kv, l, 0, 0, 0),
                       kv_at(m, kv, l, 1, 0, 0), kv->S, pos, cache_mask, len, hlen, R);
        st = moe_block_forward(m, l + 1 < c->L ? a.l[l + 1].at.x : a.xL, la, a.tmp, l, R, err);
    }
    m->host->free(hlen);
    if (st != GRPO_OK) return st;
    moe_router_end(m);
    logits_forward(m, logits, &a, a.xL, R);
    return GRPO_OK;
}
