/*
 * lm_params.h — the parameter table of a decoder pack (compiled into each pack that uses it; not
 * part of the SDK): the descriptors the host reads through n_params()/param() (grpo/model.h),
 * with names owned here, and per tensor the pack's slot code and layer, which bind() uses to
 * point the pack's weights at the host's storage.
 */
#ifndef LM_PARAMS_H
#define LM_PARAMS_H

#include "grpo/model.h"

/* Slots of the tensors outside the layers, shared by the packs (layer slots are >= 0). */
#define LM_SLOT_EMBED (-1) /* embed_tokens (V,C) */
#define LM_SLOT_NORM (-2)  /* final norm (C) */
#define LM_SLOT_HEAD (-3)  /* lm_head (V,C), tied to tensor 0 when tie_word_embeddings */

typedef struct lm_param_table {
    uint32_t n, cap;        /* tensors added, room */
    grpo_param_desc *descs; /* [cap] */
    char **names;           /* [cap] owned */
    int32_t *slot;          /* [cap] LM_SLOT_* or a layer slot of the pack */
    int32_t *layer;         /* [cap] layer index, or -1 */
} lm_param_table;

/* Makes room for cap tensors; GRPO_ERR_NOMEM (naming who) on failure. */
int32_t lm_params_alloc(lm_param_table *t, uint32_t cap, const char *who, grpo_error *err);
/* Appends one tensor (name copied); GRPO_ERR_NOMEM when the name cannot be copied. */
int32_t lm_params_add(lm_param_table *t, const char *name, int32_t ndim, const int64_t *shape,
                      uint32_t flags, int32_t tied_to, int32_t slot, int32_t layer);
/* Appends "model.layers.{l}.{name}" at slot of layer l with init hint init
 * (GRPO_PARAM_INIT_*); 1-D tensors (norms, biases) get GRPO_PARAM_NO_DECAY. */
int32_t lm_params_add_layer(lm_param_table *t, int32_t l, const char *name, int32_t ndim,
                            const int64_t *shape, int32_t slot, uint32_t init);
/* The embedding (V,C), named name. Init hints (grpo/model.h): the embedding and an untied head
 * are NORMAL, the final norm ONES. */
int32_t lm_params_add_embed(lm_param_table *t, const char *name, int64_t V, int64_t C);
/* The final norm "model.norm.weight" (C). */
int32_t lm_params_add_norm(lm_param_table *t, int64_t C);
/* The LM head (V,C) named name, tied to tensor 0 (the embedding) when tied. */
int32_t lm_params_add_lm_head(lm_param_table *t, const char *name, int64_t V, int64_t C,
                              int32_t tied);
/* The param() slot: copies descriptor i into out, as much as out->struct_size holds. */
int32_t lm_params_get(const lm_param_table *t, uint32_t i, grpo_param_desc *out);
/* Frees everything the table owns (safe on a zeroed or partly built table). */
void lm_params_free(lm_param_table *t);

#endif
