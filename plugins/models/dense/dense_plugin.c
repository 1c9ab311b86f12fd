/*
 * dense_plugin.c — the dense pack's exports: the magic, grpo_plugin_init and the descriptor of
 * dense.causal_lm (grpo/model.h), plus instance lifecycle. The descriptor's compute slots are
 * the decoder skeleton's (common/lm_decoder.c) with dense_arch, the SwiGLU MLP, plugged in.
 * Sequence-classification and reward architectures load their score / v_head tensor and serve
 * hidden states (hidden()); the caller applies the head (plugins/rewards/reward_model).
 */
#include <stdlib.h>

#include "dense.h"
#include "lm_host.h"

GRPO_PLUGIN_MAGIC()

/* The SwiGLU MLP as the skeleton's feed-forward half. */
const lm_arch dense_arch = {
    .layer_layout = dense_layer_layout,
    .grads_layout = dense_grads_layout,
    .forward = dense_mlp_forward,
    .redo = dense_mlp_redo,
    .backward = dense_mlp_backward,
    .bind = dense_bind_slot,
    .kept = dense_kept,
    .rows_in_order = 1,
};

static void dense_destroy(void *model) {
    dense_model *m = model;
    if (!m) return;
    lm_decoder_free(&m->dec);
    free(m->lp);
    free(m->la);
    free(m);
}

/* The skeleton's storage and the head of the architecture (classifiers serve hidden() only). */
static void setup_decoder(dense_model *m) {
    lm_decoder *d = &m->dec;
    for (int32_t l = 0; l < m->cfg.L; l++) d->w[l] = (lm_layer_weights){m->lp[l].p, m->lp[l].g};
    d->la = m->la, d->layer_size = sizeof *m->la, d->grads = &m->ga;
    d->rope_max = m->cfg.rope_max;
    if (m->cfg.head == DENSE_HEAD_SCORE)
        d->classifier = "sequence-classification", d->classifier_tensor = "score.weight";
    else if (m->cfg.head == DENSE_HEAD_VALUE)
        d->classifier = "reward", d->classifier_tensor = "v_head.weight";
}

static int32_t dense_create(const grpo_host *host, const char *config_json,
                            const grpo_config *cfg, void **out, grpo_error *err) {
    (void)cfg; /* no plugin keys yet */
    *out = NULL;
    int32_t st = lm_host_check(host, "dense.causal_lm", "", err);
    if (st != GRPO_OK) return st;
    dense_model *m = calloc(1, sizeof *m);
    if (!m) return grpo_error_set(err, GRPO_ERR_NOMEM, "dense.causal_lm: out of memory");
    st = dense_config_parse(&m->cfg, config_json, err);
    if (st == GRPO_OK)
        st = lm_decoder_init(&m->dec, "dense", host, &m->cfg.attn, m->cfg.L, m->cfg.V,
                             &dense_arch, err);
    if (st == GRPO_OK) {
        m->lp = calloc((size_t)m->cfg.L, sizeof *m->lp);
        m->la = calloc((size_t)m->cfg.L, sizeof *m->la);
        st = m->lp && m->la ? GRPO_OK
                            : grpo_error_set(err, GRPO_ERR_NOMEM, "dense.causal_lm: out of memory");
    }
    if (st == GRPO_OK) {
        setup_decoder(m);
        st = dense_params_build(m, err);
    }
    if (st != GRPO_OK) {
        dense_destroy(m);
        return st;
    }
    *out = m;
    return GRPO_OK;
}

static const char *const architectures[] = {
    "LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MiniMindForCausalLM",
    /* classifiers: hidden states only, the caller applies score / v_head */
    "LlamaForSequenceClassification", "Qwen2ForSequenceClassification",
    "Qwen3ForSequenceClassification", "InternLM2ForRewardModel", NULL};

static const grpo_model_desc dense_desc = {
    .struct_size = sizeof(grpo_model_desc),
    .id = "dense.causal_lm",
    .description = "dense decoder (Llama, Qwen2, Qwen3, MiniMind2, InternLM2; LM or classifier "
                   "head): RMSNorm, RoPE, GQA, SwiGLU",
    .architectures = architectures,
    .create = dense_create,
    .destroy = dense_destroy,
    LM_DECODER_DESC_SLOTS,
    /* no aux_loss / expert_load: a dense model has no router */
    .hidden_size = lm_decoder_hidden_size,
    .hidden = lm_decoder_hidden,
    .relayout = dense_internlm2_relayout,
};

static const grpo_model_desc *get_model(uint32_t index) { return index == 0 ? &dense_desc : NULL; }

GRPO_EXPORT int32_t grpo_plugin_init(const grpo_host *host, grpo_library *lib, grpo_error *err) {
    (void)host, (void)err;
    if (GRPO_HAS_FIELD(lib, grpo_library, get_model)) lib->get_model = get_model;
    return GRPO_OK;
}
