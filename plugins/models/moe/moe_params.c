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
#include <string.h>

#include "moe.h"

#define SLOT_EMBED (-1)
#define SLOT_NORM (-2)
#define SLOT_HEAD (-3)

static const char *const slot_names[MP_COUNT] = {
    "input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.q_proj.bias",
    "self_attn.k_proj.weight", "self_attn.k_proj.bias", "self_attn.v_proj.weight",
    "self_attn.v_proj.bias", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
    "self_attn.o_proj.weight", "self_attn.o_proj.bias", "post_attention_layernorm.weight",
    "mlp.gate.weight"};
static const char *const ew_names[EW_COUNT] = {"gate_proj", "up_proj", "down_proj"};

/* Shape of a named layer slot, or 0 when this architecture lacks it (biases: never). */
static int32_t slot_shape(const moe_config *c, int32_t s, int64_t shape[2]) {
    const lm_attn_config *a = &c->attn;
    int64_t Q = (int64_t)a->NH * a->HD, KV = (int64_t)a->NKV * a->HD;
    switch (s) {
    case AP_LN1: case MP_LN2: shape[0] = a->C; return 1;
    case AP_WQ: shape[0] = Q; shape[1] = a->C; return 2;
    case AP_WK: case AP_WV: shape[0] = KV; shape[1] = a->C; return 2;
    case AP_QNORM: case AP_KNORM: shape[0] = a->HD; return a->qk_norm ? 1 : 0;
    case AP_WO: shape[0] = a->C; shape[1] = Q; return 2;
    case MP_ROUTER: shape[0] = c->E; shape[1] = a->C; return 2;
    default: return 0;
    }
}

static int32_t add(moe_model *m, const char *name, int32_t ndim, int64_t d0, int64_t d1,
                   uint32_t flags, int32_t tied_to, int32_t slot, int32_t layer) {
    uint32_t i = m->n_params++;
    m->names[i] = strdup(name);
    if (!m->names[i]) return GRPO_ERR_NOMEM;
    grpo_param_desc *d = &m->descs[i];
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->name = m->names[i];
    d->ndim = ndim;
    d->shape[0] = d0, d->shape[1] = d1;
    d->flags = flags;
    d->tied_to = tied_to;
    m->slot[i] = slot;
    m->layer[i] = layer;
    return GRPO_OK;
}

/* The 3 SwiGLU tensors of expert `index` under prefix (e.g. "mlp.experts.2"). */
static int32_t add_expert(moe_model *m, int32_t l, const char *prefix, int32_t inter,
                          int32_t slot0) {
    char name[160];
    int32_t st = GRPO_OK, C = m->cfg.attn.C;
    for (int32_t w = 0; w < EW_COUNT && st == GRPO_OK; w++) {
        snprintf(name, sizeof name, "model.layers.%d.%s.%s.weight", l, prefix, ew_names[w]);
        st = w == EW_DOWN ? add(m, name, 2, C, inter, 0, -1, slot0 + w, l)
                          : add(m, name, 2, inter, C, 0, -1, slot0 + w, l);
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
        if (!nd) continue;
        snprintf(name, sizeof name, "model.layers.%d.%s", l, slot_names[s]);
        st = add(m, name, nd, shape[0], shape[1], nd == 1 ? GRPO_PARAM_NO_DECAY : 0, -1, s, l);
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
    uint32_t cap = 3 + (uint32_t)c->L * per_layer;
    m->descs = calloc(cap, sizeof *m->descs);
    m->names = calloc(cap, sizeof *m->names);
    m->slot = calloc(cap, sizeof *m->slot);
    m->layer = calloc(cap, sizeof *m->layer);
    /* expert pointer arrays: per layer E*3 + NS*3 params and as many grads */
    m->wbuf = calloc((size_t)c->L * 2 * (c->E + c->NS) * EW_COUNT + 1, sizeof *m->wbuf);
    if (!m->descs || !m->names || !m->slot || !m->layer || !m->wbuf)
        return grpo_error_set(err, GRPO_ERR_NOMEM, "moe: out of memory for the parameter table");
    float **w = m->wbuf;
    for (int32_t l = 0; l < c->L; l++) {
        moe_layer_params *lp = &m->lp[l];
        lp->ep = w, w += c->E * EW_COUNT;
        lp->eg = w, w += c->E * EW_COUNT;
        lp->sp = w, w += c->NS * EW_COUNT;
        lp->sg = w, w += c->NS * EW_COUNT;
    }
    int32_t C = c->attn.C;
    int32_t st = add(m, "model.embed_tokens.weight", 2, c->V, C, 0, -1, SLOT_EMBED, -1);
    for (int32_t l = 0; l < c->L && st == GRPO_OK; l++) st = add_layer(m, l);
    if (st == GRPO_OK)
        st = add(m, "model.norm.weight", 1, C, 0, GRPO_PARAM_NO_DECAY, -1, SLOT_NORM, -1);
    if (st == GRPO_OK)
        st = add(m, "lm_head.weight", 2, c->V, C, c->tied ? GRPO_PARAM_TIED : 0,
                 c->tied ? 0 : -1, SLOT_HEAD, -1);
    if (st != GRPO_OK)
        return grpo_error_set(err, st, "moe: out of memory for the parameter names");
    return GRPO_OK;
}

void moe_params_free(moe_model *m) {
    for (uint32_t i = 0; m->names && i < m->n_params; i++) free(m->names[i]);
    free(m->names);
    free(m->descs);
    free(m->slot);
    free(m->layer);
    free(m->wbuf);
}

/* bind(): points the slots at the host's block. grads may be NULL (frozen model). */
int32_t moe_bind_params(moe_model *m, float *const *params, float *const *grads,
                        grpo_error *err) {
    int32_t E = m->cfg.E;
    for (uint32_t i = 0; i < m->n_params; i++) {
        float *p = params[i], *g = grads ? grads[i] : NULL;
        if (!p)
            return grpo_error_set(err, GRPO_ERR_INVALID, "moe: bind: no storage for %s",
                                  m->names[i]);
        int32_t s = m->slot[i];
        moe_layer_params *lp = m->layer[i] >= 0 ? &m->lp[m->layer[i]] : NULL;
        if (s == SLOT_EMBED) m->wte = p, m->dwte = g;
        else if (s == SLOT_NORM) m->wnorm = p, m->dwnorm = g;
        else if (s == SLOT_HEAD) m->whead = p, m->dwhead = g;
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
