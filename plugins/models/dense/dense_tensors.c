/*
 * dense_tensors.c — the tensors of a dense model whatever their names (the Llama table,
 * dense_params.c, and InternLM2's, dense_internlm2.c, both build on it): the shape of each
 * layer slot the config has, and the head tensor (lm_head, score or v_head).
 */
#include "dense.h"

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

int32_t dense_add_head(dense_model *m, const char *lm_head_name) {
    const dense_config *c = &m->cfg;
    lm_param_table *t = &m->dec.pt;
    int64_t lc[2] = {c->n_labels, c->attn.C};
    if (c->head == DENSE_HEAD_SCORE)
        return lm_params_add(t, "score.weight", 2, lc, GRPO_PARAM_INIT_NORMAL, -1, SLOT_CLS, -1);
    if (c->head == DENSE_HEAD_VALUE)
        return lm_params_add(t, "v_head.weight", 2, lc, GRPO_PARAM_INIT_NORMAL, -1, SLOT_CLS, -1);
    return lm_params_add_lm_head(t, lm_head_name, c->V, c->attn.C, c->tied);
}
