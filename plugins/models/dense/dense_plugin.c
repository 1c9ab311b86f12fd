/*
 * dense_plugin.c — the dense pack's exports: the magic, grpo_plugin_init and the descriptor of
 * dense.causal_lm (grpo/model.h), plus instance lifecycle. Sequence-classification and reward
 * architectures load their score / v_head tensor and serve hidden states (hidden()); the caller
 * applies the head (plugins/rewards/reward_model).
 */
#include <stdlib.h>
#include <string.h>

#include "dense.h"

GRPO_PLUGIN_MAGIC()

static int32_t dense_create(const grpo_host *host, const char *config_json,
                            const grpo_config *cfg, void **out, grpo_error *err) {
    (void)cfg; /* no plugin keys yet */
    *out = NULL;
    if (!host || !GRPO_HAS_FIELD(host, grpo_host, ops) || !host->ops)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "dense.causal_lm: the host provides no compute backend (host->ops)");
    if (host->ops->struct_size < sizeof(grpo_ops))
        return grpo_error_set(err, GRPO_ERR_ABI,
                              "dense.causal_lm: the host's op table is older (%u bytes) than this "
                              "plugin expects (%zu)", host->ops->struct_size, sizeof(grpo_ops));
    dense_model *m = calloc(1, sizeof *m);
    if (!m) return grpo_error_set(err, GRPO_ERR_NOMEM, "dense.causal_lm: out of memory");
    m->host = host;
    m->ops = host->ops;
    int32_t st = dense_config_parse(&m->cfg, config_json, err);
    if (st == GRPO_OK) {
        m->lp = calloc((size_t)m->cfg.L, sizeof *m->lp);
        m->la = calloc((size_t)m->cfg.L, sizeof *m->la);
        st = m->lp && m->la ? dense_params_build(m, err)
                            : grpo_error_set(err, GRPO_ERR_NOMEM, "dense.causal_lm: out of memory");
    }
    if (st != GRPO_OK) {
        dense_params_free(m);
        free(m->lp);
        free(m->la);
        free(m);
        return st;
    }
    *out = m;
    return GRPO_OK;
}

static void dense_destroy(void *model) {
    dense_model *m = model;
    if (!m) return;
    dense_params_free(m);
    free(m->lp);
    free(m->la);
    free(m);
}

static uint32_t dense_n_params(void *model) { return ((dense_model *)model)->n_params; }

static int32_t dense_param(void *model, uint32_t i, grpo_param_desc *out) {
    dense_model *m = model;
    if (i >= m->n_params) return GRPO_ERR_INVALID;
    uint32_t size = out->struct_size < sizeof *out ? out->struct_size : sizeof *out;
    memcpy(out, &m->descs[i], size);
    out->struct_size = size;
    return GRPO_OK;
}

static int32_t dense_bind(void *model, float *const *params, float *const *grads,
                          grpo_error *err) {
    return dense_bind_params(model, params, grads, err);
}

static uint64_t dense_activation_floats(void *model, int32_t B, int32_t T) {
    return dense_acts_floats(&((dense_model *)model)->cfg, B, T, 1);
}

static const char *const architectures[] = {
    "LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MiniMindForCausalLM",
    /* classifiers: hidden states only, the caller applies score / v_head */
    "LlamaForSequenceClassification", "Qwen2ForSequenceClassification",
    "Qwen3ForSequenceClassification", "InternLM2ForRewardModel", NULL};

static const grpo_model_desc dense_desc = {
    /* .struct_size       = */ sizeof(grpo_model_desc),
    /* .id                = */ "dense.causal_lm",
    /* .description       = */
    "dense decoder (Llama, Qwen2, Qwen3, MiniMind2, InternLM2; LM or classifier head): RMSNorm, "
    "RoPE, GQA, SwiGLU",
    /* .architectures     = */ architectures,
    /* .create            = */ dense_create,
    /* .destroy           = */ dense_destroy,
    /* .n_params          = */ dense_n_params,
    /* .param             = */ dense_param,
    /* .bind              = */ dense_bind,
    /* .activation_floats = */ dense_activation_floats,
    /* .forward           = */ dense_forward,
    /* .backward          = */ dense_backward,
    /* .kv_floats         = */ dense_kv_floats,
    /* .scratch_floats    = */ dense_scratch_floats,
    /* .prefill           = */ dense_prefill,
    /* .decode            = */ dense_decode,
    /* .kv_copy_row       = */ dense_kv_copy_row,
    /* .aux_loss          = */ NULL,
    /* .expert_load       = */ NULL,
    /* .hidden_size       = */ dense_hidden_size,
    /* .hidden            = */ dense_hidden,
    /* .relayout          = */ dense_internlm2_relayout,
};

static const grpo_model_desc *get_model(uint32_t index) { return index == 0 ? &dense_desc : NULL; }

GRPO_EXPORT int32_t grpo_plugin_init(const grpo_host *host, grpo_library *lib, grpo_error *err) {
    (void)host, (void)err;
    if (GRPO_HAS_FIELD(lib, grpo_library, get_model)) lib->get_model = get_model;
    return GRPO_OK;
}
