/* model_env.c — a backend, host table and registry for the model commands (see model_env.h). */
#include "host/model_env.h"

#include <string.h>

#include "host/host.h"
#include "kernels.h"

int grpo_model_env_open(grpo_model_env *env, const char *backend, int32_t threads,
                        const char *const *extra_dirs, int n_extra, grpo_error *err) {
    memset(env, 0, sizeof *env);
    env->ops = grpo_backend_open(backend, threads, err);
    if (!env->ops) return err->status ? err->status : GRPO_ERR_INVALID;
    env->host = *grpo_default_host();
    env->host.ops = env->ops;
    char **dirs = grpo_plugin_path(extra_dirs, n_extra);
    int rc = dirs ? grpo_registry_scan(&env->reg, dirs, err)
                  : grpo_error_set(err, GRPO_ERR_NOMEM, "model: out of memory");
    grpo_plugin_path_free(dirs);
    if (rc != GRPO_OK) grpo_model_env_close(env);
    return rc;
}

void grpo_model_env_close(grpo_model_env *env) {
    grpo_registry_free(&env->reg);
    grpo_backend_close(env->ops);
    memset(env, 0, sizeof *env);
}

