/*
 * host/testing.h — entry points of the host layer that only tests and fuzzers call: white-box
 * checks of a module's inner steps (the module itself calls them). They are not part of the
 * layer's interface: no file of core/ outside host/ includes this header (scripts/check_layers.sh
 * checks it).
 */
#ifndef GRPO_HOST_TESTING_H
#define GRPO_HOST_TESTING_H

#include "host/host_model.h"
#include "host/registry.h"
#include "host/sampling.h"

/* ---- host_model.c ------------------------------------------------------------------------------ */
/* The backend the context's models run on. */
const grpo_ops *grpo_host_models_ops(const grpo_host_models *ctx);

/* ---- registry.c -------------------------------------------------------------------------------- */
/* The entry's key definition, or NULL. */
const grpo_key_def *grpo_entry_key(const grpo_entry *e, const char *name);

/* Why an id grpo_registry_find does not find may be missing: the broken pack whose manifest
 * declares it, else the first broken pack whose ids could not be read at all; NULL when no broken
 * pack can explain it. An error for a missing id should quote the pack's message. */
const grpo_broken_pack *grpo_registry_broken_for(const grpo_registry *reg, const char *id);

/* The model entry serving this HF architecture name (config.json "architectures"), or NULL. */
const grpo_entry *grpo_registry_find_architecture(const grpo_registry *reg, const char *arch);

/* ---- sampling.c -------------------------------------------------------------------------------- */
/* Applies the processors to logits (V) in place: filtered tokens become -INFINITY; the rest are
 * the processed logits whose softmax is the sampling distribution. prev (n_prev) are the row's
 * tokens so far. scratch holds V doubles and V int32 (12*V bytes). Greedy settings only apply the
 * repetition penalty. */
void grpo_logits_process(const grpo_sampling *p, float *logits, int32_t V, const int32_t *prev,
                         int32_t n_prev, void *scratch);

#endif
