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

/* Shape of a named layer slot, or 0 when this architecture lacks it. */
static int32_t slot_shape(const moe_config *c, int32_t s, int64_t shape[2]) {
    switch (s) {
    case MP_LN2: shape[0] = c->attn.C; return 1;
    case MP_ROUTER: shape[0] = c->E, shape[1] = c->attn.C; return 2;
    default: return lm_attn_param_shape(&c->attn, s, shape);
    }
}

/* The 3 SwiGLU tensors of expert `index` under prefix (e.g. "mlp.experts.2"). */
static int32_t add_expert(moe_model *m, int32_t l, const char *prefix, int32_t inter,
                          int32_t slot0) {
    char name[160];
    int32_t st = GRPO_OK, C = m->cfg.attn.C;
    for (int32_t w = 0; w < EW_COUNT && st == GRPO_OK; w++) {
        int64_t shape[2] = {w == EW_DOWN ? C : inter, w == EW_DOWN ? inter : C};
        snprintf(name, sizeof name, "%s.%s.weight", prefix, ew_names[w]);
        st = lm_params_add_layer(&m->pt, l, name, 2, shape, slot0 + w);
    }
    return st;
}

static int32_t add_layer(moe_model *m, int32_t l) {
    const moe_config *c = &m->cfg;
    char name[160];
    int32_t st = GRPO_OK;
    for (int32_t s = 0; s < MP_COUNT && st == GRPO_OK; s++) {
        int64_t shape[2] = {0, 0};
        int32_t nd = slot_shape(c, s, shape);
        const char *slot_name = s < AP_COUNT ? lm_attn_param_names[s] : moe_names[s - AP_COUNT];
        if (nd) st = lm_params_add_layer(&m->pt, l, slot_name, nd, shape, s);
    }
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

int32_t moe_params_build(moe_model *m, grpo_error *err) {
    const moe_config *c = &m->cfg;
    uint32_t per_layer = MP_COUNT + (uint32_t)(c->E + c->NS) * EW_COUNT;
    int32_t st = lm_params_alloc(&m->pt, 3 + (uint32_t)c->L * per_layer, "moe", err);
    if (st != GRPO_OK) return st;
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
    st = lm_params_add_embed(&m->pt, "model.embed_tokens.weight", c->V, c->attn.C);
    for (int32_t l = 0; l < c->L && st == GRPO_OK; l++) st = add_layer(m, l);
    if (st == GRPO_OK) st = lm_params_add_norm(&m->pt, c->attn.C);
    if (st == GRPO_OK)
        st = lm_params_add_lm_head(&m->pt, "lm_head.weight", c->V, c->attn.C, c->tied);
    if (st != GRPO_OK)
        return grpo_error_set(err, st, "moe: out of memory for the parameter names");
    return GRPO_OK;
}

void moe_params_free(moe_model *m) {
    lm_params_free(&m->pt);
    free(m->wbuf);
}

/* bind(): points the slots at the host's block. grads may be NULL (frozen model). */
int32_t moe_bind_params(moe_model *m, float *const *params, float *const *grads,
                        grpo_error *err) {
    const lm_param_table *t = &m->pt;
    int32_t E = m->cfg.E;
    for (uint32_t i = 0; i < t->n; i++) {
        float *p = params[i], *g = grads ? grads[i] : NULL;
        if (!p)
            return grpo_error_set(err, GRPO_ERR_INVALID, "moe: bind: no storage for %s",
                                  t->names[i]);
        int32_t s = t->slot[i];
        moe_layer_params *lp = t->layer[i] >= 0 ? &m->lp[t->layer[i]] : NULL;
        if (s == LM_SLOT_EMBED) m->wte = p, m->dwte = g;
        else if (s == LM_SLOT_NORM) m->wnorm = p, m->dwnorm = g;
        else if (s == LM_SLOT_HEAD) m->whead = p, m->dwhead = g;
        else if (s < MP_COUNT) lp->p[s] = p, lp->g[s] = g;
        else if (s < MP_COUNT + E * EW_COUNT) lp->ep[s - MP_COUNT] = p, lp->eg[s - MP_COUNT] = g;
        else {
            int32_t k = s - MP_COUNT - E * EW_COUNT;
            lp->sp[k] = p, lp->sg[k] = g;
        }
    }
    m->bound = 1;
    return GRPO_OK;
}
