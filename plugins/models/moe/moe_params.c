/*
 * moe_params.c — the parameter table, with Hugging Face names and shapes:
 *   model.embed_tokens.weight                              (V,C)
 *   model.layers.{l}.input_layernorm.weight                (C)
 *   model.layers.{l}.self_attn.{q,k,v}_proj.weight          (Q,C) (KV,C) (KV,C)
 *   model.layers.{l}.self_attn.{q,k}_norm.weight           (HD)   Qwen3-MoE only
 *   model.layers.{l}.self_attn.o_proj.weight               (C,Q)
 *   model.layers.{l}.post_attention_layernorm.weight       (C)
 *   model.layers.{l}.mlp.gate.weight                       (E,C)  the router
 *   model.layers.{l}.mlp.experts.{e}.{gate,up}_proj.weight (I,C)  down_proj (C,I)
 *   model.layers.{l}.mlp.shared_experts.{s}.{gate,up}_proj.weight (IS,C) down_proj (C,IS)
 *   model.norm.weight                                      (C)
 *   lm_head.weight                                         (V,C)  TIED to embed_tokens when tied
 * Layer tensors get slot codes: 0..MP_COUNT-1 the named slots, then MP_COUNT + e*3 + w for routed
 * expert e, MP_COUNT + E*3 + s*3 + w for shared expert s (w = EW_GATE/UP/DOWN).
 */
#include <stdio.h>
#include <stdlib.h>

#include "moe.h"

/* Names of the MoE block's named slots (MP_LN2 ..); the attention's are lm_attn_param_names. */
static const char *const moe_names[MP_COUNT - AP_COUNT] = {"post_attention_layernorm.weight",
                                                           "mlp.gate.weight"};
static const char *const ew_names[EW_COUNT] = {"gate_proj", "up_proj", "down_proj"};

/* The 3 SwiGLU tensors of expert `index` under prefix (e.g. "mlp.experts.2"). */
static int32_t add_expert(moe_model *m, int32_t l, const char *prefix, int32_t inter,
                          int32_t slot0) {
    char name[160];
    int32_t st = GRPO_OK, C = m->cfg.attn.C;
    for (int32_t w = 0; w < EW_COUNT && st == GRPO_OK; w++) {
        int64_t shape[2] = {w == EW_DOWN ? C : inter, w == EW_DOWN ? inter : C};
        snprintf(name, sizeof name, "%s.%s.weight", prefix, ew_names[w]);
        uint32_t init = w == EW_DOWN ? GRPO_PARAM_INIT_RESIDUAL : GRPO_PARAM_INIT_NORMAL;
        st = lm_params_add_layer(&m->dec.pt, l, name, 2, shape, slot0 + w, init);
    }
    return st;
}

/* Layer l: the attention block's tensors, ln2, the router, routed then shared experts. */
static int32_t add_layer(lm_decoder *d, int32_t l) {
    moe_model *m = (moe_model *)d;
    const moe_config *c = &m->cfg;
    char name[160];
    int64_t C = c->attn.C, router[2] = {c->E, C};
    int32_t st = lm_decoder_add_attn(d, l);
    if (st == GRPO_OK)
        st = lm_params_add_layer(&d->pt, l, moe_names[0], 1, &C, MP_LN2, GRPO_PARAM_INIT_ONES);
    if (st == GRPO_OK)
        st = lm_params_add_layer(&d->pt, l, moe_names[1], 2, router, MP_ROUTER,
                                 GRPO_PARAM_INIT_NORMAL);
    for (int32_t e = 0; e < c->E && st == GRPO_OK; e++) {
        snprintf(name, sizeof name, "mlp.experts.%d", e);
        st = add_expert(m, l, name, c->I, MP_COUNT + e * EW_COUNT);
    }
    for (int32_t s = 0; s < c->NS && st == GRPO_OK; s++) {
        snprintf(name, sizeof name, "mlp.shared_experts.%d", s);
        st = add_expert(m, l, name, c->IS, MP_COUNT + (c->E + s) * EW_COUNT);
    }
    return st;
}

static int32_t add_head(lm_decoder *d) {
    const moe_config *c = &((moe_model *)d)->cfg;
    return lm_params_add_lm_head(&d->pt, "lm_head.weight", c->V, c->attn.C, c->tied);
}

int32_t moe_params_build(moe_model *m, grpo_error *err) {
    const moe_config *c = &m->cfg;
    /* expert pointer arrays: per layer E*3 + NS*3 params and as many grads */
    m->wbuf = calloc((size_t)c->L * 2 * (c->E + c->NS) * EW_COUNT + 1, sizeof *m->wbuf);
    if (!m->wbuf)
        return grpo_error_set(err, GRPO_ERR_NOMEM, "moe: out of memory for the parameter table");
    float **w = m->wbuf;
    for (int32_t l = 0; l < c->L; l++) {
        moe_layer_params *lp = &m->lp[l];
        lp->ep = w, w += c->E * EW_COUNT;
        lp->eg = w, w += c->E * EW_COUNT;
        lp->sp = w, w += c->NS * EW_COUNT;
        lp->sg = w, w += c->NS * EW_COUNT;
    }
    uint32_t per_layer = MP_COUNT + (uint32_t)(c->E + c->NS) * EW_COUNT;
    return lm_decoder_params_build(&m->dec, per_layer, "model.embed_tokens.weight", add_layer,
                                   add_head, err);
}

void moe_params_free(moe_model *m) {
    lm_decoder_free(&m->dec);
    free(m->wbuf);
}

/* bind() of a layer tensor: a named slot, a routed or a shared expert's weight. */
void moe_bind_slot(lm_decoder *d, int32_t s, int32_t layer, float *p, float *g) {
    moe_model *m = (moe_model *)d;
    moe_layer_params *lp = &m->lp[layer];
    int32_t E = m->cfg.E;
    if (s < MP_COUNT) lp->p[s] = p, lp->g[s] = g;
    else if (s < MP_COUNT + E * EW_COUNT) lp->ep[s - MP_COUNT] = p, lp->eg[s - MP_COUNT] = g;
    else {
        int32_t k = s - MP_COUNT - E * EW_COUNT;
        lp->sp[k] = p, lp->sg[k] = g;
    }
}
