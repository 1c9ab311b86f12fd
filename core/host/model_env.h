/*
 * model_env.h — what a command that only runs a model (generate, logprobs) needs: a backend, a
 * host table on it and a registry of the model packs. Above the model host (model.h) and the
 * host table (host.h); nothing below uses it.
 */
#ifndef GRPO_MODEL_ENV_H
#define GRPO_MODEL_ENV_H

#include "host/model.h"

typedef struct grpo_model_env {
    grpo_ops *ops;
    grpo_host host; /* grpo_default_host() with ops set */
    grpo_registry reg;
} grpo_model_env;

/* Opens backend ("cpu") with threads (<= 0: default) and scans the plugin path (extra dirs
 * first, then the default path). The caller MUST grpo_model_env_close() it after closing every
 * model opened through it. */
int grpo_model_env_open(grpo_model_env *env, const char *backend, int32_t threads,
                        const char *const *extra_dirs, int n_extra, grpo_error *err);
void grpo_model_env_close(grpo_model_env *env);

#endif
