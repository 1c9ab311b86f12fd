/*
 * host_model.h — the host's frozen-model services (grpo/plugin.h, ABI 1.1: model_load,
 * model_free, model_info, model_hidden, model_tensor, model_encode, model_render), through which
 * a reward plugin loads and runs a model directory while linking nothing but the SDK.
 *
 * A services context holds what loading a model needs: a backend (ops) and a registry of model
 * packs. Each command opens one with its environment (env.h: its backend, threads and plugin
 * path) and points its host table at it with grpo_host_set_models. grpo_default_host() carries
 * the services with model_ctx NULL: there model_load is an error saying the command offers no
 * model services (nothing is process-global).
 *
 * Each loaded model owns: the grpo_model (params only, frozen), its tokenizer (when the
 * directory has tokenizer.json), its compiled chat template (ChatML when it ships none) and
 * backend buffers for hidden-state batches. Not thread-safe per model (see grpo/plugin.h);
 * different models may be used from different threads only when the backend allows it.
 */
#ifndef GRPO_HOST_MODEL_H
#define GRPO_HOST_MODEL_H

#include "grpo/ops.h"
#include "grpo/plugin.h"

typedef struct grpo_host_models grpo_host_models;

/* Opens a context on ops (borrowed, MUST outlive the context; NULL: the context opens and owns
 * a CPU backend) with the model packs found in plugin_dirs (NULL-terminated; NULL: the default
 * plugin path). The caller MUST grpo_host_models_close() it after every model loaded through it
 * is freed. */
int grpo_host_models_open(grpo_host_models **out, const grpo_ops *ops, char *const *plugin_dirs,
                          grpo_error *err);
void grpo_host_models_close(grpo_host_models *ctx); /* NULL is fine */

/* The services themselves (signatures of grpo_host's 1.1 slots; grpo_default_host() uses them). */
int32_t grpo_hm_load(const grpo_host *host, const char *dir, struct grpo_host_model **out,
                     grpo_error *err);
void grpo_hm_free(struct grpo_host_model *model);
int32_t grpo_hm_info(const struct grpo_host_model *model, grpo_host_model_info *out);
int32_t grpo_hm_hidden(struct grpo_host_model *model, const int32_t *ids, const int32_t *mask,
                       int32_t B, int32_t T, const int32_t *at, float *out, grpo_error *err);
int32_t grpo_hm_tensor(struct grpo_host_model *model, const char *name, float *out, uint64_t n,
                       grpo_error *err);
int32_t grpo_hm_encode(struct grpo_host_model *model, const char *text, int32_t add_special,
                       int32_t *ids, int32_t cap, grpo_error *err);
int32_t grpo_hm_render(struct grpo_host_model *model, const struct grpo_message *messages,
                       uint32_t n, int32_t add_generation_prompt, char *out, int32_t cap,
                       grpo_error *err);

/* Sets host's 1.1 model services and model_ctx = ctx (NULL: none; model_load says so). */
void grpo_host_set_models(grpo_host *host, grpo_host_models *ctx);

#endif
