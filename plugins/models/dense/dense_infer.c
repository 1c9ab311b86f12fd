/*
 * dense_infer.c — the inference path: prefill of left-padded prompts into a KV cache, batched
 * one-token decode, cache row copies (KV cache layout and argument checks: common/lm_infer.h),
 * and the hidden states of classifier models.
 */
#include "dense.h"
#include "lm_infer.h"

/* Floats of one cache slot of one layer: NKV*HD. */
static uint64_t kv_width(const dense_model *m) {
    return (uint64_t)m->cfg.attn.NKV * m->cfg.attn.HD;
}

uint64_t dense_kv_floats(void *model, int32_t R, int32_t S) {
    dense_model *m = model;
    return lm_kv_floats(m->cfg.L, kv_width(m), R, S);
}

uint64_t dense_scratch_floats(void *model, int32_t R, int32_t T) {
    dense_model *m = model;
    return dense_acts_floats(&m->cfg, R, T, 0);
}

void dense_kv_copy_row(void *model, const grpo_kv_cache *kv, int32_t dst, int32_t src,
                       int32_t n) {
    dense_model *m = model;
    lm_kv_copy_row(m->ops, kv, kv_width(m), m->cfg.L, dst, src, n);
}

void dense_kv_store(dense_model *m, const grpo_kv_cache *kv, int32_t l, const float *k,
                    const float *v, int32_t B, int32_t T) {
    lm_kv_store(m->ops, kv, kv_width(m), l, k, v, B, T);
}

/* Final norm + head on R rows of x (R,C): logits (R,V). */
static void logits_forward(dense_model *m, float *logits, dense_acts *a, const float *x,
                           int32_t R) {
    const dense_config *c = &m->cfg;
    int32_t C = c->attn.C;
    lm_logits_forward(m->ops, logits, a->lnf, a->lnf_rstd, x, m->wnorm, m->whead, R, C, c->V,
                      c->attn.eps);
}

/* The prompt mask (B,T) must be left-padded: downloaded and checked on the host. */
static int32_t check_left_padded(dense_model *m, const int32_t *mask, int32_t B, int32_t T,
                                 grpo_error *err) {
    const grpo_ops *o = m->ops;
    int32_t *hmask = m->host->alloc((uint64_t)B * T * sizeof(int32_t));
    if (!hmask) return grpo_error_set(err, GRPO_ERR_NOMEM, "dense: prefill: out of memory");
    o->download(o->ctx, hmask, mask, (uint64_t)B * T * sizeof(int32_t));
    int32_t st = lm_prefill_left_padded("dense", hmask, B, T, err);
    m->host->free(hmask);
    return st;
}

int32_t dense_prefill(void *model, const grpo_kv_cache *kv, const grpo_batch *prompt,
                      float *scratch, float *logits, grpo_error *err) {
    dense_model *m = model;
    const dense_config *c = &m->cfg;
    int32_t C = c->attn.C;
    int32_t B = prompt->B, T = prompt->T;
    if (!m->bound) return grpo_error_set(err, GRPO_ERR_INVALID, "dense: prefill before bind");
    int32_t st = dense_need_lm_head(m, "prefill", err);
    if (st == GRPO_OK) st = lm_prefill_check("dense", kv, B, T, err);
    if (st == GRPO_OK) st = check_left_padded(m, prompt->mask, B, T, err);
    if (st != GRPO_OK) return st;
    dense_acts a;
    dense_acts_carve(&a, m->la, scratch, c, B, T, 0);
    dense_body_forward(m, &a, prompt->ids, prompt->mask, prompt->pos, B, T, kv);
    lm_last_columns(m->ops, a.tmp, a.xL, B, T, C); /* tmp (B,C) */
    logits_forward(m, logits, &a, a.tmp, B);
    return GRPO_OK;
}

int32_t dense_decode(void *model, const grpo_kv_cache *kv, int32_t R, const int32_t *tokens,
                     const int32_t *pos, const int32_t *cache_mask, const int32_t *len,
                     float *scratch, float *logits, grpo_error *err) {
    dense_model *m = model;
    const grpo_ops *o = m->ops;
    const dense_config *c = &m->cfg;
    int32_t C = c->attn.C;
    if (!m->bound) return grpo_error_set(err, GRPO_ERR_INVALID, "dense: decode before bind");
    int32_t *hlen = NULL, st = dense_need_lm_head(m, "decode", err);
    if (st == GRPO_OK) st = lm_decode_lengths("dense", m->host, kv, len, R, &hlen, err);
    if (st != GRPO_OK) return st;
    uint64_t KV = kv_width(m);
    dense_acts a;
    dense_acts_carve(&a, m->la, scratch, c, R, 1, 0);
    o->embedding_forward(o->ctx, a.l[0].at.x, tokens, m->wte, R, C);
    for (int32_t l = 0; l < c->L; l++) {
        dense_layer_acts *la = &a.l[l];
        lm_attn_decode(o, &m->cfg.attn, &la->at, a.tmp, m->lp[l].p, lm_kv_at(kv, KV, l, 0, 0, 0),
                       lm_kv_at(kv, KV, l, 1, 0, 0), kv->S, pos, cache_mask, len, hlen, R);
        dense_mlp_forward(m, l + 1 < c->L ? a.l[l + 1].at.x : a.xL, la, a.tmp, &m->lp[l], R);
    }
    m->host->free(hlen);
    logits_forward(m, logits, &a, a.xL, R);
    return GRPO_OK;
}

int32_t dense_need_lm_head(const dense_model *m, const char *what, grpo_error *err) {
    if (m->cfg.head == DENSE_HEAD_LM) return GRPO_OK;
    return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                          "dense: %s needs an LM head, but this is a %s model (it has %s and "
                          "serves hidden states only)", what,
                          m->cfg.head == DENSE_HEAD_SCORE ? "sequence-classification"
                                                          : "reward",
                          m->cfg.head == DENSE_HEAD_SCORE ? "score.weight" : "v_head.weight");
}

int32_t dense_hidden_size(void *model) { return ((dense_model *)model)->cfg.attn.C; }

/* out (B,T,C) = norm(x_L): the body over a (B,T) batch through the forward-only scratch. */
int32_t dense_hidden(void *model, const grpo_batch *batch, float *scratch, float *out,
                     grpo_error *err) {
    dense_model *m = model;
    const grpo_ops *o = m->ops;
    const dense_config *c = &m->cfg;
    int32_t C = c->attn.C;
    int32_t B = batch->B, T = batch->T;
    if (!m->bound) return grpo_error_set(err, GRPO_ERR_INVALID, "dense: hidden before bind");
    if (B <= 0 || T <= 0)
        return grpo_error_set(err, GRPO_ERR_INVALID, "dense: hidden: empty batch (%d,%d)", B, T);
    if (c->rope_max > 0 && T > c->rope_max)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "dense: %d tokens exceed max_position_embeddings (%d), past which "
                              "dynamic NTK RoPE scaling (not implemented) applies", T, c->rope_max);
    dense_acts a;
    dense_acts_carve(&a, m->la, scratch, c, B, T, 0);
    dense_body_forward(m, &a, batch->ids, batch->mask, batch->pos, B, T, NULL);
    o->rmsnorm_forward(o->ctx, out, a.lnf_rstd, a.xL, m->wnorm, B * T, C, c->attn.eps);
    return GRPO_OK;
}
