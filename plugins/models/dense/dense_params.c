/*
 * dense_params.c — the parameter table, with Hugging Face names and shapes:
 *   model.embed_tokens.weight                      (V,C)
 *   model.layers.{l}.input_layernorm.weight        (C)
 *   model.layers.{l}.self_attn.q_proj.weight       (Q,C)   .bias (Q) when qkv_bias
 *   model.layers.{l}.self_attn.k_proj.weight       (KV,C)  .bias (KV) when qkv_bias
 *   model.layers.{l}.self_attn.v_proj.weight       (KV,C)  .bias (KV) when qkv_bias
 *   model.layers.{l}.self_attn.q_norm.weight       (HD)    when qk_norm
 *   model.layers.{l}.self_attn.k_norm.weight       (HD)    when qk_norm
 *   model.layers.{l}.self_attn.o_proj.weight       (C,Q)   .bias (C) when o_bias
 *   model.layers.{l}.post_attention_layernorm.weight (C)
 *   model.layers.{l}.mlp.gate_proj.weight          (I,C)
 *   model.layers.{l}.mlp.up_proj.weight            (I,C)
 *   model.layers.{l}.mlp.down_proj.weight          (C,I)
 *   model.norm.weight                              (C)
 *   lm_head.weight                                 (V,C)   TIED to embed_tokens when tied
 * Norm weights and biases carry GRPO_PARAM_NO_DECAY.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dense.h"

static const char *const slot_names[LP_COUNT] = {
    "input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.q_proj.bias",
    "self_attn.k_proj.weight", "self_attn.k_proj.bias", "self_attn.v_proj.weight",
    "self_attn.v_proj.bias", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
    "self_attn.o_proj.weight", "self_attn.o_proj.bias", "post_attention_layernorm.weight",
    "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"};

/* Shape of a layer tensor (ndim 1 or 2), or 0 when the architecture lacks it. */
static int32_t slot_shape(const dense_config *c, int32_t s, int64_t shape[2]) {
    int64_t Q = (int64_t)c->NH * c->HD, KV = (int64_t)c->NKV * c->HD;
    switch (s) {
    case LP_LN1: case LP_LN2: shape[0] = c->C; return 1;
    case LP_WQ: shape[0] = Q; shape[1] = c->C; return 2;
    case LP_WK: case LP_WV: shape[0] = KV; shape[1] = c->C; return 2;
    case LP_BQ: shape[0] = Q; return c->qkv_bias ? 1 : 0;
    case LP_BK: case LP_BV: shape[0] = KV; return c->qkv_bias ? 1 : 0;
    case LP_QNORM: case LP_KNORM: shape[0] = c->HD; return c->qk_norm ? 1 : 0;
    case LP_WO: shape[0] = c->C; shape[1] = Q; return 2;
    case LP_BO: shape[0] = c->C; return c->o_bias ? 1 : 0;
    case LP_WGATE: case LP_WUP: shape[0] = c->I; shape[1] = c->C; return 2;
    case LP_WDOWN: shape[0] = c->C; shape[1] = c->I; return 2;
    default: return 0;
    }
}

int32_t dense_params_add(dense_model *m, const char *name, int32_t ndim, const int64_t *shape,
                   uint32_t flags, int32_t tied_to, int32_t slot, int32_t layer) {
    uint32_t i = m->n_params++;
    m->names[i] = strdup(name);
    if (!m->names[i]) return GRPO_ERR_NOMEM;
    grpo_param_desc *d = &m->descs[i];
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->name = m->names[i];
    d->ndim = ndim;
    for (int32_t k = 0; k < ndim; k++) d->shape[k] = shape[k];
    d->flags = flags;
    d->tied_to = tied_to;
    m->slot[i] = slot;
    m->layer[i] = layer;
    return GRPO_OK;
}

int32_t dense_params_add_head(dense_model *m, const char *lm_head_name) {
    const dense_config *c = &m->cfg;
    int64_t vc[2] = {c->V, c->C}, lc[2] = {c->n_labels, c->C};
    if (c->head == DENSE_HEAD_SCORE)
        return dense_params_add(m, "score.weight", 2, lc, 0, -1, SLOT_CLS, -1);
    if (c->head == DENSE_HEAD_VALUE)
        return dense_params_add(m, "v_head.weight", 2, lc, 0, -1, SLOT_CLS, -1);
    return dense_params_add(m, lm_head_name, 2, vc, c->tied ? GRPO_PARAM_TIED : 0,
                            c->tied ? 0 : -1, SLOT_HEAD, -1);
}

int32_t dense_params_build(dense_model *m, grpo_error *err) {
    const dense_config *c = &m->cfg;
    if (c->internlm2) return dense_internlm2_params_build(m, err);
    uint32_t cap = 3 + (uint32_t)c->L * LP_COUNT;
    m->descs = calloc(cap, sizeof *m->descs);
    m->names = calloc(cap, sizeof *m->names);
    m->slot = calloc(cap, sizeof *m->slot);
    m->layer = calloc(cap, sizeof *m->layer);
    if (!m->descs || !m->names || !m->slot || !m->layer)
        return grpo_error_set(err, GRPO_ERR_NOMEM, "dense: out of memory for the parameter table");
    int64_t vc[2] = {c->V, c->C}, cc[1] = {c->C};
    int32_t st = dense_params_add(m, "model.embed_tokens.weight", 2, vc, 0, -1, SLOT_EMBED, -1);
    char name[128];
    for (int32_t l = 0; l < c->L && st == GRPO_OK; l++)
        for (int32_t s = 0; s < LP_COUNT && st == GRPO_OK; s++) {
            int64_t shape[2];
            int32_t nd = slot_shape(c, s, shape);
            if (!nd) continue;
            snprintf(name, sizeof name, "model.layers.%d.%s", l, slot_names[s]);
            st = dense_params_add(m, name, nd, shape, nd == 1 ? GRPO_PARAM_NO_DECAY : 0, -1, s, l);
        }
    if (st == GRPO_OK)
        st = dense_params_add(m, "model.norm.weight", 1, cc, GRPO_PARAM_NO_DECAY, -1, SLOT_NORM,
                              -1);
    if (st == GRPO_OK) st = dense_params_add_head(m, "lm_head.weight");
    if (st != GRPO_OK)
        return grpo_error_set(err, st, "dense: out of memory for the parameter names");
    return GRPO_OK;
}

void dense_params_free(dense_model *m) {
    for (uint32_t i = 0; m->names && i < m->n_params; i++) free(m->names[i]);
    free(m->names);
    free(m->descs);
    free(m->slot);
    free(m->layer);
}

/* bind(): points the model's slots at the host's block. grads may be NULL (frozen model). */
int32_t dense_bind_params(dense_model *m, float *const *params, float *const *grads,
                          grpo_error *err) {
    for (uint32_t i = 0; i < m->n_params; i++) {
        float *p = params[i], *g = grads ? grads[i] : NULL;
        if (!p)
            return grpo_error_set(err, GRPO_ERR_INVALID, "dense: bind: no storage for %s",
                                  m->names[i]);
        switch (m->slot[i]) {
        case SLOT_EMBED: m->wte = p, m->dwte = g; break;
        case SLOT_NORM: m->wnorm = p, m->dwnorm = g; break;
        case SLOT_HEAD: m->whead = p, m->dhead_grad = g; break;
        case SLOT_CLS: break; /* read by the caller through the host, never applied here */
        case SLOT_WQKV: case SLOT_BQKV:
            dense_internlm2_bind(m, m->layer[i], m->slot[i], p, g);
            break;
        default: m->lp[m->layer[i]].p[m->slot[i]] = p, m->lp[m->layer[i]].g[m->slot[i]] = g;
        }
    }
    m->bound = 1;
    return GRPO_OK;
}
