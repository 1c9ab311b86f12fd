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
#include "dense.h"

/* Names of the MLP half's slots (LP_LN2 ..); the attention half's are lm_attn_param_names. */
static const char *const mlp_names[LP_COUNT - AP_COUNT] = {
    "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
    "mlp.down_proj.weight"};

int32_t dense_layer_shape(const dense_model *m, int32_t s, int64_t shape[2]) {
    const dense_config *c = &m->cfg;
    if (s >= 0 && s < AP_COUNT) return lm_attn_param_shape(&m->cfg.attn, s, shape);
    switch (s) {
    case LP_LN2: shape[0] = c->attn.C; return 1;
    case LP_WGATE: case LP_WUP: shape[0] = c->I, shape[1] = c->attn.C; return 2;
    case LP_WDOWN: shape[0] = c->attn.C, shape[1] = c->I; return 2;
    default: return 0;
    }
}

int32_t dense_params_add_head(dense_model *m, const char *lm_head_name) {
    const dense_config *c = &m->cfg;
    int64_t lc[2] = {c->n_labels, c->attn.C};
    if (c->head == DENSE_HEAD_SCORE)
        return lm_params_add(&m->pt, "score.weight", 2, lc, 0, -1, SLOT_CLS, -1);
    if (c->head == DENSE_HEAD_VALUE)
        return lm_params_add(&m->pt, "v_head.weight", 2, lc, 0, -1, SLOT_CLS, -1);
    return lm_params_add_lm_head(&m->pt, lm_head_name, c->V, c->attn.C, c->tied);
}

int32_t dense_params_build(dense_model *m, grpo_error *err) {
    const dense_config *c = &m->cfg;
    if (c->internlm2) return dense_internlm2_params_build(m, err);
    int32_t st = lm_params_alloc(&m->pt, 3 + (uint32_t)c->L * LP_COUNT, "dense", err);
    if (st != GRPO_OK) return st;
    st = lm_params_add_embed(&m->pt, "model.embed_tokens.weight", c->V, c->attn.C);
    for (int32_t l = 0; l < c->L && st == GRPO_OK; l++)
        for (int32_t s = 0; s < LP_COUNT && st == GRPO_OK; s++) {
            int64_t shape[2];
            int32_t nd = dense_layer_shape(m, s, shape);
            const char *name = s < AP_COUNT ? lm_attn_param_names[s] : mlp_names[s - AP_COUNT];
            if (nd) st = lm_params_add_layer(&m->pt, l, name, nd, shape, s);
        }
    if (st == GRPO_OK) st = lm_params_add_norm(&m->pt, c->attn.C);
    if (st == GRPO_OK) st = dense_params_add_head(m, "lm_head.weight");
    if (st != GRPO_OK)
        return grpo_error_set(err, st, "dense: out of memory for the parameter names");
    return GRPO_OK;
}

void dense_params_free(dense_model *m) { lm_params_free(&m->pt); }

/* bind(): points the model's slots at the host's block. grads may be NULL (frozen model). */
int32_t dense_bind_params(dense_model *m, float *const *params, float *const *grads,
                          grpo_error *err) {
    const lm_param_table *t = &m->pt;
    for (uint32_t i = 0; i < t->n; i++) {
        float *p = params[i], *g = grads ? grads[i] : NULL;
        if (!p)
            return grpo_error_set(err, GRPO_ERR_INVALID, "dense: bind: no storage for %s",
                                  t->names[i]);
        int32_t s = t->slot[i], l = t->layer[i];
        switch (s) {
        case LM_SLOT_EMBED: m->wte = p, m->dwte = g; break;
        case LM_SLOT_NORM: m->wnorm = p, m->dwnorm = g; break;
        case LM_SLOT_HEAD: m->whead = p, m->dhead_grad = g; break;
        case SLOT_CLS: break; /* read by the caller through the host, never applied here */
        case SLOT_WQKV: case SLOT_BQKV: dense_internlm2_bind(m, l, s, p, g); break;
        default: m->lp[l].p[s] = p, m->lp[l].g[s] = g;
        }
    }
    m->bound = 1;
    return GRPO_OK;
}
