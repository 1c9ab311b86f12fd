/*
 * dense_internlm2.c — InternLM2 (internlm/internlm2-*) as a dense model: the same math as Llama
 * under other names, with q/k/v packed in one tensor. Served for InternLM2ForRewardModel (tested
 * against a reference); InternLM2ForCausalLM (output.weight) is laid out below but not listed
 * in the pack's architectures until a test checks its log-probs.
 *
 *   model.tok_embeddings.weight                    (V,C)       = embed_tokens
 *   model.layers.{l}.attention_norm.weight         (C)         = input_layernorm
 *   model.layers.{l}.attention.wqkv.weight         (Q+2KV,C)   packed q/k/v (below)
 *   model.layers.{l}.attention.wqkv.bias           (Q+2KV)     when "bias"
 *   model.layers.{l}.attention.wo.weight           (C,Q)       = o_proj (.bias when "bias")
 *   model.layers.{l}.ffn_norm.weight               (C)         = post_attention_layernorm
 *   model.layers.{l}.feed_forward.w1/w3/w2.weight  (I,C),(I,C),(C,I) = gate, up, down
 *   model.norm.weight                              (C)
 *   output.weight (V,C) | v_head.weight (1,C)      LM head | reward head
 *
 * wqkv's rows are interleaved by kv group: for kv head h (0..NKV-1), the g = NH/NKV query heads
 * of its group (heads h*g .. h*g+g-1), then its key head, then its value head, HD rows each,
 * i.e. row ((h*(g+2) + j)*HD + d). The relayout slot turns this into q|k|v on load (rows
 * [0,Q) q heads in order, [Q,Q+KV) k, [Q+KV,Q+2KV) v), so the layer code sees three contiguous
 * projections, and back on save, so a saved directory is InternLM2's layout again.
 */
#include <string.h>

#include "dense.h"

#define ONES GRPO_PARAM_INIT_ONES
#define NORMAL GRPO_PARAM_INIT_NORMAL
#define RESIDUAL GRPO_PARAM_INIT_RESIDUAL
static const struct {
    int32_t slot;
    const char *name;
    uint32_t init; /* hint (grpo/model.h): wo and w2 write into the residual stream */
} names[] = {
    {LP_LN1, "attention_norm.weight", ONES},      {SLOT_WQKV, "attention.wqkv.weight", NORMAL},
    {SLOT_BQKV, "attention.wqkv.bias", NORMAL},   {LP_WO, "attention.wo.weight", RESIDUAL},
    {LP_BO, "attention.wo.bias", RESIDUAL},       {LP_LN2, "ffn_norm.weight", ONES},
    {LP_WGATE, "feed_forward.w1.weight", NORMAL}, {LP_WUP, "feed_forward.w3.weight", NORMAL},
    {LP_WDOWN, "feed_forward.w2.weight", RESIDUAL},
};
#undef ONES
#undef NORMAL
#undef RESIDUAL

/* Shape of a layer tensor, or 0 when the config lacks it: the packed q/k/v here, the rest as
 * the Llama-named layer (dense_tensors.c). */
static int32_t layer_shape(const dense_model *m, int32_t slot, int64_t shape[2]) {
    const dense_config *c = &m->cfg;
    int64_t QKV = (int64_t)(c->attn.NH + 2 * c->attn.NKV) * c->attn.HD;
    switch (slot) {
    case SLOT_WQKV: shape[0] = QKV, shape[1] = c->attn.C; return 2;
    case SLOT_BQKV: shape[0] = QKV; return c->attn.qkv_bias ? 1 : 0;
    default: return dense_layer_shape(m, slot, shape);
    }
}

/* Layer l's tensors under InternLM2's names. */
static int32_t add_layer(lm_decoder *d, int32_t l) {
    int32_t st = GRPO_OK;
    for (uint32_t k = 0; k < sizeof names / sizeof names[0] && st == GRPO_OK; k++) {
        int64_t shape[2];
        int32_t nd = layer_shape((dense_model *)d, names[k].slot, shape);
        if (nd)
            st = lm_params_add_layer(&d->pt, l, names[k].name, nd, shape, names[k].slot,
                                     names[k].init);
    }
    return st;
}

static int32_t add_head(lm_decoder *d) {
    return dense_add_head((dense_model *)d, "output.weight");
}

int32_t dense_internlm2_params_build(dense_model *m, grpo_error *err) {
    return lm_decoder_params_build(&m->dec, sizeof names / sizeof names[0],
                                   "model.tok_embeddings.weight", add_layer, add_head, err);
}

void dense_internlm2_bind(dense_model *m, int32_t l, int32_t slot, float *p, float *g) {
    const dense_config *c = &m->cfg;
    uint64_t w = slot == SLOT_WQKV ? (uint64_t)c->attn.C : 1; /* floats per row */
    uint64_t Q = (uint64_t)c->attn.NH * c->attn.HD, KV = (uint64_t)c->attn.NKV * c->attn.HD;
    int32_t sq = slot == SLOT_WQKV ? LP_WQ : LP_BQ, sk = slot == SLOT_WQKV ? LP_WK : LP_BK,
            sv = slot == SLOT_WQKV ? LP_WV : LP_BV;
    dense_layer_params *lp = &m->lp[l];
    lp->p[sq] = p, lp->p[sk] = p + Q * w, lp->p[sv] = p + (Q + KV) * w;
    lp->g[sq] = g, lp->g[sk] = g ? g + Q * w : NULL, lp->g[sv] = g ? g + (Q + KV) * w : NULL;
}

/* Row of the q|k|v layout that packed row r holds. */
static uint64_t unpacked_row(const dense_config *c, uint64_t r) {
    uint64_t HD = (uint64_t)c->attn.HD, g = (uint64_t)(c->attn.NH / c->attn.NKV);
    uint64_t Q = (uint64_t)c->attn.NH * HD, KV = (uint64_t)c->attn.NKV * HD;
    uint64_t d = r % HD, head = r / HD, h = head / (g + 2), j = head % (g + 2);
    if (j < g) return (h * g + j) * HD + d;
    return (j == g ? Q : Q + KV) + h * HD + d;
}

int32_t dense_internlm2_relayout(void *model, uint32_t i, float *data, int32_t direction,
                                 grpo_error *err) {
    dense_model *m = model;
    const lm_param_table *t = &m->dec.pt;
    if (i >= t->n || (t->slot[i] != SLOT_WQKV && t->slot[i] != SLOT_BQKV)) return GRPO_OK;
    const dense_config *c = &m->cfg;
    uint64_t rows = (uint64_t)(c->attn.NH + 2 * c->attn.NKV) * c->attn.HD;
    uint64_t w = t->slot[i] == SLOT_WQKV ? (uint64_t)c->attn.C : 1;
    float *tmp = m->dec.host->alloc(rows * w * sizeof(float));
    if (!tmp)
        return grpo_error_set(err, GRPO_ERR_NOMEM, "dense: out of memory unpacking %s",
                              t->names[i]);
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t u = unpacked_row(c, r);
        if (direction == GRPO_RELAYOUT_LOAD)
            memcpy(tmp + u * w, data + r * w, w * sizeof(float));
        else
            memcpy(tmp + r * w, data + u * w, w * sizeof(float));
    }
    memcpy(data, tmp, rows * w * sizeof(float));
    m->dec.host->free(tmp);
    return GRPO_OK;
}
