/*
 * lm_params.c — the parameter table of a decoder pack (see lm_params.h).
 */
#include "lm_params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int32_t lm_params_alloc(lm_param_table *t, uint32_t cap, const char *who, grpo_error *err) {
    t->n = 0, t->cap = cap;
    t->descs = calloc(cap, sizeof *t->descs);
    t->names = calloc(cap, sizeof *t->names);
    t->slot = calloc(cap, sizeof *t->slot);
    t->layer = calloc(cap, sizeof *t->layer);
    if (!t->descs || !t->names || !t->slot || !t->layer)
        return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory for the parameter table",
                              who);
    return GRPO_OK;
}

int32_t lm_params_add(lm_param_table *t, const char *name, int32_t ndim, const int64_t *shape,
                      uint32_t flags, int32_t tied_to, int32_t slot, int32_t layer) {
    if (t->n >= t->cap) return GRPO_ERR_NOMEM;
    uint32_t i = t->n++;
    t->names[i] = strdup(name);
    if (!t->names[i]) return GRPO_ERR_NOMEM;
    grpo_param_desc *d = &t->descs[i];
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->name = t->names[i];
    d->ndim = ndim;
    for (int32_t k = 0; k < ndim; k++) d->shape[k] = shape[k];
    d->flags = flags;
    d->tied_to = tied_to;
    t->slot[i] = slot;
    t->layer[i] = layer;
    return GRPO_OK;
}

int32_t lm_params_add_layer(lm_param_table *t, int32_t l, const char *name, int32_t ndim,
                            const int64_t *shape, int32_t slot, uint32_t init) {
    char full[192];
    snprintf(full, sizeof full, "model.layers.%d.%s", l, name);
    uint32_t flags = (ndim == 1 ? GRPO_PARAM_NO_DECAY : 0) | init;
    return lm_params_add(t, full, ndim, shape, flags, -1, slot, l);
}

int32_t lm_params_add_embed(lm_param_table *t, const char *name, int64_t V, int64_t C) {
    int64_t vc[2] = {V, C};
    return lm_params_add(t, name, 2, vc, GRPO_PARAM_INIT_NORMAL, -1, LM_SLOT_EMBED, -1);
}

int32_t lm_params_add_norm(lm_param_table *t, int64_t C) {
    return lm_params_add(t, "model.norm.weight", 1, &C, GRPO_PARAM_NO_DECAY | GRPO_PARAM_INIT_ONES,
                         -1, LM_SLOT_NORM, -1);
}

int32_t lm_params_add_lm_head(lm_param_table *t, const char *name, int64_t V, int64_t C,
                              int32_t tied) {
    int64_t vc[2] = {V, C};
    return lm_params_add(t, name, 2, vc, tied ? GRPO_PARAM_TIED : GRPO_PARAM_INIT_NORMAL,
                         tied ? 0 : -1, LM_SLOT_HEAD, -1);
}

int32_t lm_params_get(const lm_param_table *t, uint32_t i, grpo_param_desc *out) {
    if (i >= t->n) return GRPO_ERR_INVALID;
    uint32_t size = out->struct_size < sizeof *out ? out->struct_size : sizeof *out;
    memcpy(out, &t->descs[i], size);
    out->struct_size = size;
    return GRPO_OK;
}

void lm_params_free(lm_param_table *t) {
    for (uint32_t i = 0; t->names && i < t->n; i++) free(t->names[i]);
    free(t->names);
    free(t->descs);
    free(t->slot);
    free(t->layer);
    *t = (lm_param_table){0};
}
