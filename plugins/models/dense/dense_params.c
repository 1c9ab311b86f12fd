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
 * Norm weights and biases carry GRPO_PARAM_NO_DECAY. The shapes and the head tensor are
 * dense_tensors.c's (shared with InternLM2's names, dense_internlm2.c); dense_params_build and
 * dense_bind_slot pick InternLM2's table and packed q/k/v when the config says so.
 */
#include "dense.h"

/* Names of the MLP half's slots (LP_LN2 ..); the attention half's are lm_attn_param_names. */
static const char *const mlp_names[LP_COUNT - AP_COUNT] = {
    "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
    "mlp.down_proj.weight"};
static const uint32_t mlp_inits[LP_COUNT - AP_COUNT] = {
    GRPO_PARAM_INIT_ONES, GRPO_PARAM_INIT_NORMAL, GRPO_PARAM_INIT_NORMAL, GRPO_PARAM_INIT_RESIDUAL};

/* Layer l: the attention block's tensors, then the MLP half's. */
static int32_t add_layer(lm_decoder *d, int32_t l) {
    dense_model *m = (dense_model *)d;
    int32_t st = lm_decoder_add_attn(d, l);
    for (int32_t s = AP_COUNT; s < LP_COUNT && st == GRPO_OK; s++) {
        int64_t shape[2];
        int32_t nd = dense_layer_shape(m, s, shape);
        if (nd)
            st = lm_params_add_layer(&d->pt, l, mlp_names[s - AP_COUNT], nd, shape, s,
                                     mlp_inits[s - AP_COUNT]);
    }
    return st;
}

static int32_t add_head(lm_decoder *d) {
    return dense_add_head((dense_model *)d, "lm_head.weight");
}

int32_t dense_params_build(dense_model *m, grpo_error *err) {
    if (m->cfg.internlm2) return dense_internlm2_params_build(m, err);
    return lm_decoder_params_build(&m->dec, LP_COUNT, "model.embed_tokens.weight", add_layer,
                                   add_head, err);
}

/* bind() of the tensors the skeleton does not own. */
void dense_bind_slot(lm_decoder *d, int32_t slot, int32_t layer, float *p, float *g) {
    dense_model *m = (dense_model *)d;
    switch (slot) {
    case SLOT_CLS: break; /* read by the caller through the host, never applied here */
    case SLOT_WQKV: case SLOT_BQKV: dense_internlm2_bind(m, layer, slot, p, g); break;
    default: m->lp[layer].p[slot] = p, m->lp[layer].g[slot] = g;
    }
}
