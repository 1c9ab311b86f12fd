/*
 * moe_plugin.c — the moe pack's exports: the magic, grpo_plugin_init and the descriptor of
 * moe.causal_lm (grpo/model.h), instance lifecycle, aux_loss() and expert_load(). The
 * descriptor's compute slots are the decoder skeleton's (common/lm_decoder.c) with moe_arch,
 * the router and experts, plugged in.
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
#include <math.h>
#include <stdlib.h>

#include "lm_host.h"
#include "moe.h"

GRPO_PLUGIN_MAGIC()

/* The MoE block as the skeleton's feed-forward half; the router works around each pass. */
const lm_arch moe_arch = {
    .layer_layout = moe_layer_layout,
    .grads_layout = moe_grads_layout,
    .begin = moe_router_begin,
    .forward = moe_block_forward,
    .end = moe_router_end,
    .backward = moe_block_backward,
    .bind = moe_bind_slot,
};

static void moe_free(moe_model *m) {
    if (!m) return;
    moe_params_free(m);
    free(m->lp);
    free(m->la);
    free(m->eoff);
    free(m->load);
    free(m->count);
    free(m->psum);
    free(m->hmask), free(m->grp), free(m->gid), free(m->greal);
    free(m->hbuf);
    free(m);
}

/* [model] router_aux_coef: >= 0 replaces config.json's coefficient. */
static int32_t apply_keys(moe_model *m, const grpo_config *cfg, grpo_error *err) {
    double d = -1.0;
    int32_t st = grpo_config_double(cfg, "router_aux_coef", -1.0, -HUGE_VAL, HUGE_VAL, &d, err);
    if (st == GRPO_OK && d >= 0) m->cfg.aux_coef = (float)d;
    return st;
}

static int32_t moe_create(const grpo_host *host, const char *config_json, const grpo_config *cfg,
                          void **out, grpo_error *err) {
    *out = NULL;
    int32_t st = lm_host_check(host, "moe.causal_lm", ": it needs gather_rows/scatter_add_rows",
                               err);
    if (st != GRPO_OK) return st;
    const grpo_ops *o = host->ops;
    if (!grpo_ops_supports(o, gather_rows) || !grpo_ops_supports(o, scatter_add_rows) ||
        !grpo_ops_supports(o, scatter_add_rows_backward))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "moe.causal_lm: the %s backend lacks "
                              "gather_rows/scatter_add_rows (the experts' routing)", o->name);
    moe_model *m = calloc(1, sizeof *m);
    if (!m) return grpo_error_set(err, GRPO_ERR_NOMEM, "moe.causal_lm: out of memory");
    st = moe_config_parse(&m->cfg, config_json, err);
    if (st == GRPO_OK) st = apply_keys(m, cfg, err);
    if (st == GRPO_OK)
        st = lm_decoder_init(&m->dec, "moe", host, &m->cfg.attn, m->cfg.L, m->cfg.V, &moe_arch,
                             err);
    if (st == GRPO_OK) {
        const moe_config *c = &m->cfg;
        m->lp = calloc((size_t)c->L, sizeof *m->lp);
        m->la = calloc((size_t)c->L, sizeof *m->la);
        m->eoff = calloc((size_t)c->L * (c->E + 1), sizeof *m->eoff);
        m->load = calloc((size_t)c->L * c->E, sizeof *m->load);
        st = m->lp && m->la && m->eoff && m->load
                 ? GRPO_OK
                 : grpo_error_set(err, GRPO_ERR_NOMEM, "moe.causal_lm: out of memory");
    }
    if (st == GRPO_OK) {
        lm_decoder *d = &m->dec;
        for (int32_t l = 0; l < m->cfg.L; l++) d->w[l] = (lm_layer_weights){m->lp[l].p, m->lp[l].g};
        d->la = m->la, d->layer_size = sizeof *m->la, d->grads = &m->ga;
        st = moe_params_build(m, err);
    }
    if (st != GRPO_OK) {
        moe_free(m);
        return st;
    }
    *out = m;
    return GRPO_OK;
}

static void moe_destroy(void *model) { moe_free(model); }

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
    .struct_size = sizeof(grpo_model_desc),
    .id = "moe.causal_lm",
    .description = "mixture-of-experts decoder (MiniMind2 MoE, Qwen3-MoE): softmax top-k router, "
                   "aux loss",
    .architectures = architectures,
    .create = moe_create,
    .destroy = moe_destroy,
    LM_DECODER_DESC_SLOTS,
    .aux_loss = moe_aux_loss,
    .expert_load = moe_expert_load,
    /* no hidden_size / hidden (hidden states are not served for MoE models yet), no relayout */
};

static const grpo_model_desc *get_model(uint32_t index) { return index == 0 ? &moe_desc : NULL; }

GRPO_EXPORT int32_t grpo_plugin_init(const grpo_host *host, grpo_library *lib, grpo_error *err) {
    (void)host, (void)err;
    if (GRPO_HAS_FIELD(lib, grpo_library, get_model)) lib->get_model = get_model;
    return GRPO_OK;
}
