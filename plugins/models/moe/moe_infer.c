/*
 * moe_infer.c — the inference path: prefill of left-padded prompts into a KV cache, batched
 * one-token decode (each step routes its R tokens: one matmul per expert over the rows that chose
 * it), and cache row copies.
 *
 * KV cache layout and argument checks: common/lm_infer.h (as the dense pack).
 */
#include "lm_infer.h"
#include "moe.h"

/* Floats of one cache slot of one layer: NKV*HD. */
static uint64_t kv_width(const moe_model *m) {
    return (uint64_t)m->cfg.attn.NKV * m->cfg.attn.HD;
}

uint64_t moe_kv_floats(void *model, int32_t R, int32_t S) {
    moe_model *m = model;
    return lm_kv_floats(m->cfg.L, kv_width(m), R, S);
}

uint64_t moe_scratch_floats(void *model, int32_t R, int32_t T) {
    return moe_acts_floats(&((moe_model *)model)->cfg, R, T, 0);
}

void moe_kv_copy_row(void *model, const grpo_kv_cache *kv, int32_t dst, int32_t src,
                     int32_t n) {
    moe_model *m = model;
    lm_kv_copy_row(m->ops, kv, kv_width(m), m->cfg.L, dst, src, n);
}

void moe_kv_store(moe_model *m, const grpo_kv_cache *kv, int32_t l, const lm_attn_acts *at,
                  int32_t B, int32_t T) {
    lm_kv_store(m->ops, kv, kv_width(m), l, at->k, at->v, B, T);
}

/* Final norm + head on R rows of x (R,C): logits (R,V). */
static void logits_forward(moe_model *m, float *logits, moe_acts *a, const float *x, int32_t R) {
    const moe_config *c = &m->cfg;
    lm_logits_forward(m->ops, logits, a->lnf, a->lnf_rstd, x, m->wnorm, m->whead, R, c->attn.C,
                      c->V, c->attn.eps);
}

int32_t moe_prefill(void *model, const grpo_kv_cache *kv, const grpo_batch *prompt,
                    float *scratch, float *logits, grpo_error *err) {
    moe_model *m = model;
    const moe_config *c = &m->cfg;
    int32_t B = prompt->B, T = prompt->T;
    if (!m->bound) return grpo_error_set(err, GRPO_ERR_INVALID, "moe: prefill before bind");
    int32_t st = lm_prefill_check("moe", kv, B, T, err);
    if (st != GRPO_OK) return st;
    moe_acts a;
    moe_acts_carve(&a, m->la, scratch, c, B, T, 0);
    st = moe_body_forward(m, &a, prompt->ids, prompt->mask, prompt->pos, B, T, kv, err);
    if (st == GRPO_OK) /* the router copied the mask to the host */
        st = lm_prefill_left_padded("moe", m->hmask, B, T, err);
    if (st != GRPO_OK) return st;
    lm_last_columns(m->ops, a.tmp, a.xL, B, T, c->attn.C); /* tmp (B,C) */
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
    int32_t *hlen = NULL, st = lm_decode_lengths("moe", m->host, kv, len, R, &hlen, err);
    if (st != GRPO_OK) return st;
    uint64_t KV = kv_width(m);
    moe_acts a;
    moe_acts_carve(&a, m->la, scratch, c, R, 1, 0);
    st = moe_router_begin(m, NULL, R, 1, err);
    if (st == GRPO_OK) o->embedding_forward(o->ctx, a.l[0].at.x, tokens, m->wte, R, c->attn.C);
    for (int32_t l = 0; l < c->L && st == GRPO_OK; l++) {
        moe_layer_acts *la = &a.l[l];
        lm_attn_decode(o, &c->attn, &la->at, a.tmp, m->lp[l].p, lm_kv_at(kv, KV, l, 0, 0, 0),
                       lm_kv_at(kv, KV, l, 1, 0, 0), kv->S, pos, cache_mask, len, hlen, R);
        st = moe_block_forward(m, l + 1 < c->L ? a.l[l + 1].at.x : a.xL, la, a.tmp, l, R, err);
    }
    m->host->free(hlen);
    if (st != GRPO_OK) return st;
    moe_router_end(m);
    logits_forward(m, logits, &a, a.xL, R);
    return GRPO_OK;
}
