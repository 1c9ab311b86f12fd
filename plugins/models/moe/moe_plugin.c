/*
 * moe_plugin.c — the moe pack's exports: the magic, grpo_plugin_init and the descriptor of
 * moe.causal_lm (grpo/model.h), instance lifecycle, aux_loss() and expert_load().
 *
 * Plugin key ([model] section): router_aux_coef (float, default -1 = the coefficient of
 * config.json: aux_loss_alpha for MiniMind2, router_aux_loss_coef for Qwen3-MoE).
 *
 * The aux loss and the trainer: aux_loss() returns coefficient * aux of the last forward();
 * backward() adds grpo_batch.aux_weight times its gradient. The trainer's loss is
 *   policy loss + [grpo] aux_loss_coef * aux_loss()
 * so it passes aux_weight = [grpo] aux_loss_coef * (the share it gives this micro-batch's dlogp,
 * e.g. 1 / gradient-accumulation steps), and logs aux_loss() (and expert_load()).
 */
#include <stdlib.h>
#include <string.h>

#include "moe.h"

GRPO_PLUGIN_MAGIC()

static void moe_free(moe_model *m) {
    if (!m) return;
    moe_params_free(m);
    free(m->lp);
    free(m->la);
    free(m->eoff);
    free(m->load);
    free(m->count);
    free(m->psum);
    free(m->hmask);
    free(m->hbuf);
    free(m);
}

/* [model] router_aux_coef: >= 0 replaces config.json's coefficient. */
static int32_t apply_keys(moe_model *m, const grpo_config *cfg, grpo_error *err) {
    const char *v = grpo_config_get(cfg, "router_aux_coef");
    if (!v) return GRPO_OK;
    char *end = NULL;
    double d = strtod(v, &end);
    if (end == v || *end)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "[%s] router_aux_coef = \"%s\": expected a number",
                              cfg->section ? cfg->section : "model", v);
    if (d >= 0) m->cfg.aux_coef = (float)d;
    return GRPO_OK;
}

static int32_t moe_create(const grpo_host *host, const char *config_json, const grpo_config *cfg,
                          void **out, grpo_error *err) {
    *out = NULL;
    if (!host || !GRPO_HAS_FIELD(host, grpo_host, ops) || !host->ops)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "moe.causal_lm: the host provides no compute backend (host->ops)");
    if (host->ops->struct_size < sizeof(grpo_ops))
        return grpo_error_set(err, GRPO_ERR_ABI,
                              "moe.causal_lm: the host's op table is older (%u bytes) than this "
                              "plugin expects (%zu: it needs gather_rows/scatter_add_rows)",
                              host->ops->struct_size, sizeof(grpo_ops));
    moe_model *m = calloc(1, sizeof *m);
    if (!m) return grpo_error_set(err, GRPO_ERR_NOMEM, "moe.causal_lm: out of memory");
    m->host = host;
    m->ops = host->ops;
    int32_t st = moe_config_parse(&m->cfg, config_json, err);
    if (st == GRPO_OK) st = apply_keys(m, cfg, err);
    if (st == GRPO_OK) {
        const moe_config *c = &m->cfg;
        m->lp = calloc((size_t)c->L, sizeof *m->lp);
        m->la = calloc((size_t)c->L, sizeof *m->la);
        m->eoff = calloc((size_t)c->L * (c->E + 1), sizeof *m->eoff);
        m->load = calloc((size_t)c->L * c->E, sizeof *m->load);
        st = m->lp && m->la && m->eoff && m->load
                 ? moe_params_build(m, err)
                 : grpo_error_set(err, GRPO_ERR_NOMEM, "moe.causal_lm: out of memory");
    }
    if (st != GRPO_OK) {
        moe_free(m);
        return st;
    }
    *out = m;
    return GRPO_OK;
}

static void moe_destroy(void *model) { moe_free(model); }

static uint32_t moe_n_params(void *model) { return ((moe_model *)model)->n_params; }

static int32_t moe_param(void *model, uint32_t i, grpo_param_desc *out) {
    moe_model *m = model;
    if (i >= m->n_params) return GRPO_ERR_INVALID;
    uint32_t size = out->struct_size < sizeof *out ? out->struct_size : sizeof *out;
    memcpy(out, &m->descs[i], size);
    out->struct_size = size;
    return GRPO_OK;
}

static int32_t moe_bind(void *model, float *const *params, float *const *grads,
                        grpo_error *err) {
    return moe_bind_params(model, params, grads, err);
}

static uint64_t moe_activation_floats(void *model, int32_t B, int32_t T) {
    return moe_acts_floats(&((moe_model *)model)->cfg, B, T, 1);
}

static float moe_aux_loss(void *model) { return ((moe_model *)model)->aux; }

static const float *moe_expert_load(void *model, int32_t *n_layers, int32_t *n_experts) {
    moe_model *m = model;
    *n_layers = m->cfg.L, *n_experts = m->cfg.E;
    return m->B > 0 ? m->load : NULL;
}

/* MiniMind2 MoE checkpoints say "MiniMindForCausalLM", as dense MiniMind ones do: both packs
 * serve the name and each refuses the other's configs as GRPO_ERR_UNSUPPORTED (use_moe), so the
 * host's lookup by architecture (grpo_model_open_dir) lands on the right one. */
static const char *const architectures[] = {"Qwen3MoeForCausalLM", "MiniMindForCausalLM", NULL};

static const grpo_model_desc moe_desc = {
    /* .struct_size       = */ sizeof(grpo_model_desc),
    /* .id                = */ "moe.causal_lm",
    /* .description       = */ "mixture-of-experts decoder (MiniMind2 MoE, Qwen3-MoE): softmax top-k router, aux loss",
    /* .architectures     = */ architectures,
    /* .create            = */ moe_create,
    /* .destroy           = */ moe_destroy,
    /* .n_params          = */ moe_n_params,
    /* .param             = */ moe_param,
    /* .bind              = */ moe_bind,
    /* .activation_floats = */ moe_activation_floats,
    /* .forward           = */ moe_forward,
    /* .backward          = */ moe_backward,
    /* .kv_floats         = */ moe_kv_floats,
    /* .scratch_floats    = */ moe_scratch_floats,
    /* .prefill           = */ moe_prefill,
    /* .decode            = */ moe_decode,
    /* .kv_copy_row       = */ moe_kv_copy_row,
    /* .aux_loss          = */ moe_aux_loss,
    /* .expert_load       = */ moe_expert_load,
    /* .hidden_size       = */ NULL, /* hidden states: not yet for MoE models */
    /* .hidden            = */ NULL,
    /* .relayout          = */ NULL,
};

static const grpo_model_desc *get_model(uint32_t index) { return index == 0 ? &moe_desc : NULL; }

GRPO_EXPORT int32_t grpo_plugin_init(const grpo_host *host, grpo_library *lib, grpo_error *err) {
    (void)host, (void)err;
    if (GRPO_HAS_FIELD(lib, grpo_library, get_model)) lib->get_model = get_model;
    return GRPO_OK;
}
