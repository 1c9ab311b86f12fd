/*
 * dense_infer.c — the inference path: prefill of left-padded prompts into a KV cache, batched
 * one-token decode, and cache row copies.
 *
 * KV cache layout (kv->R rows, kv->S slots): (L, 2, R, S, KV) — for layer l, keys then values,
 * each (R,S,NKV,HD), which is the layout attention_decode reads. Keys are stored after q/k norm
 * and RoPE. Slot s of row r holds the token at column s of the row's left-padded sequence.
 */
#include "dense.h"

/* Keys (kind 0) or values (kind 1) of layer l, row r, slot s. */
static float *kv_at(const dense_model *m, const grpo_kv_cache *kv, int32_t l, int32_t kind,
                    int32_t r, int32_t s) {
    uint64_t KV = (uint64_t)m->cfg.NKV * m->cfg.HD;
    uint64_t plane = (uint64_t)kv->R * kv->S * KV;
    return kv->data + ((uint64_t)l * 2 + kind) * plane + ((uint64_t)r * kv->S + s) * KV;
}

uint64_t dense_kv_floats(void *model, int32_t R, int32_t S) {
    dense_model *m = model;
    return (uint64_t)m->cfg.L * 2 * R * S * m->cfg.NKV * m->cfg.HD;
}

uint64_t dense_scratch_floats(void *model, int32_t R, int32_t T) {
    dense_model *m = model;
    return dense_acts_floats(&m->cfg, R, T, 0);
}

void dense_kv_copy_row(void *model, const grpo_kv_cache *kv, int32_t dst, int32_t src,
                       int32_t n) {
    dense_model *m = model;
    const grpo_ops *o = m->ops;
    uint64_t bytes = (uint64_t)n * m->cfg.NKV * m->cfg.HD * sizeof(float);
    if (dst == src || n <= 0) return;
    for (int32_t l = 0; l < m->cfg.L; l++)
        for (int32_t kind = 0; kind < 2; kind++)
            o->copy(o->ctx, kv_at(m, kv, l, kind, dst, 0), kv_at(m, kv, l, kind, src, 0), bytes);
}

void dense_kv_store(dense_model *m, const grpo_kv_cache *kv, int32_t l, const float *k,
                    const float *v, int32_t B, int32_t T) {
    const grpo_ops *o = m->ops;
    uint64_t KV = (uint64_t)m->cfg.NKV * m->cfg.HD, row_bytes = (uint64_t)T * KV * sizeof(float);
    for (int32_t b = 0; b < B; b++) {
        o->copy(o->ctx, kv_at(m, kv, l, 0, b, 0), k + (uint64_t)b * T * KV, row_bytes);
        o->copy(o->ctx, kv_at(m, kv, l, 1, b, 0), v + (uint64_t)b * T * KV, row_bytes);
    }
}

/* Final norm + head on R rows of x (R,C): logits (R,V). */
static void logits_forward(dense_model *m, float *logits, dense_acts *a, const float *x,
                           int32_t R) {
    const grpo_ops *o = m->ops;
    const dense_config *c = &m->cfg;
    o->rmsnorm_forward(o->ctx, a->lnf, a->lnf_rstd, x, m->wnorm, R, c->C, c->eps);
    o->matmul_forward(o->ctx, logits, a->lnf, m->whead, NULL, R, c->C, c->V);
}

int32_t dense_prefill(void *model, const grpo_kv_cache *kv, const grpo_batch *prompt,
                      float *scratch, float *logits, grpo_error *err) {
    dense_model *m = model;
    const grpo_ops *o = m->ops;
    const dense_config *c = &m->cfg;
    int32_t B = prompt->B, T = prompt->T;
    if (!m->bound) return grpo_error_set(err, GRPO_ERR_INVALID, "dense: prefill before bind");
    int32_t st = dense_need_lm_head(m, "prefill", err);
    if (st != GRPO_OK) return st;
    if (B <= 0 || T <= 0 || B > kv->R || T > kv->S)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "dense: prefill of (%d,%d) prompts into a cache of %d rows x %d "
                              "slots (expected 0 < B <= rows, 0 < T <= slots)", B, T, kv->R, kv->S);
    int32_t *mask = m->host->alloc((uint64_t)B * T * sizeof(int32_t));
    if (!mask) return grpo_error_set(err, GRPO_ERR_NOMEM, "dense: prefill: out of memory");
    o->download(o->ctx, mask, prompt->mask, (uint64_t)B * T * sizeof(int32_t));
    int32_t bad = -1;
    for (int32_t b = 0; b < B && bad < 0; b++)
        if (!mask[(size_t)b * T + T - 1]) bad = b;
    m->host->free(mask);
    if (bad >= 0)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "dense: prefill: prompt row %d is not left-padded (its last column "
                              "is padding)", bad);
    dense_acts a;
    dense_acts_carve(&a, m->la, scratch, c, B, T, 0);
    dense_body_forward(m, &a, prompt->ids, prompt->mask, prompt->pos, B, T, kv);
    /* gather the last column of each row into tmp (B,C), then norm + head */
    for (int32_t b = 0; b < B; b++)
        o->copy(o->ctx, a.tmp + (uint64_t)b * c->C, a.xL + ((uint64_t)b * T + T - 1) * c->C,
                (uint64_t)c->C * sizeof(float));
    logits_forward(m, logits, &a, a.tmp, B);
    return GRPO_OK;
}

int32_t dense_decode(void *model, const grpo_kv_cache *kv, int32_t R, const int32_t *tokens,
                     const int32_t *pos, const int32_t *cache_mask, const int32_t *len,
                     float *scratch, float *logits, grpo_error *err) {
    dense_model *m = model;
    const grpo_ops *o = m->ops;
    const dense_config *c = &m->cfg;
    if (!m->bound) return grpo_error_set(err, GRPO_ERR_INVALID, "dense: decode before bind");
    int32_t st = dense_need_lm_head(m, "decode", err);
    if (st != GRPO_OK) return st;
    if (R <= 0 || R > kv->R)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "dense: decode of %d rows with a cache of %d rows", R, kv->R);
    int32_t *hlen = m->host->alloc((uint64_t)R * sizeof(int32_t));
    if (!hlen) return grpo_error_set(err, GRPO_ERR_NOMEM, "dense: decode: out of memory");
    o->download(o->ctx, hlen, len, (uint64_t)R * sizeof(int32_t));
    for (int32_t r = 0; r < R; r++)
        if (hlen[r] < 1 || hlen[r] > kv->S) {
            int32_t bad = hlen[r];
            m->host->free(hlen);
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "dense: decode: len[%d] = %d, expected 1..%d (cache slots)", r,
                                  bad, kv->S);
        }
    int32_t KV = c->NKV * c->HD;
    dense_acts a;
    dense_acts_carve(&a, m->la, scratch, c, R, 1, 0);
    o->embedding_forward(o->ctx, a.l[0].x, tokens, m->wte, R, c->C);
    for (int32_t l = 0; l < c->L; l++) {
        dense_layer_acts *la = &a.l[l];
        const dense_layer_params *lp = &m->lp[l];
        dense_qkv_forward(m, la, lp, pos, R);
        for (int32_t r = 0; r < R; r++) {
            uint64_t bytes = (uint64_t)KV * sizeof(float);
            o->copy(o->ctx, kv_at(m, kv, l, 0, r, hlen[r] - 1), la->k + (uint64_t)r * KV, bytes);
            o->copy(o->ctx, kv_at(m, kv, l, 1, r, hlen[r] - 1), la->v + (uint64_t)r * KV, bytes);
        }
        o->attention_decode(o->ctx, la->att, la->q, kv_at(m, kv, l, 0, 0, 0),
                            kv_at(m, kv, l, 1, 0, 0), cache_mask, len, R, kv->S, c->NH, c->NKV,
                            c->HD);
        dense_post_attention_forward(m, l + 1 < c->L ? a.l[l + 1].x : a.xL, la, a.tmp, lp, R);
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

int32_t dense_hidden_size(void *model) { return ((dense_model *)model)->cfg.C; }

/* out (B,T,C) = norm(x_L): the body over a (B,T) batch through the forward-only scratch. */
int32_t dense_hidden(void *model, const grpo_batch *batch, float *scratch, float *out,
                     grpo_error *err) {
    dense_model *m = model;
    const grpo_ops *o = m->ops;
    const dense_config *c = &m->cfg;
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
    o->rmsnorm_forward(o->ctx, out, a.lnf_rstd, a.xL, m->wnorm, B * T, c->C, c->eps);
    return GRPO_OK;
}
