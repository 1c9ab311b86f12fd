/*
 * process.h — the context of one process: the plugin path, the packs on it, the backend and the
 * host services handed to plugins. Every command builds its plugins and models on one grpo_process
 * (a run keeps its own in grpo_run), so a reward plugin's model (reward_model.score) runs on the
 * command's backend, threads and --plugin-path, and nothing is process-global.
 *
 *   grpo_process_open      the plugin path (--plugin-path dirs first, then the default path:
 *                      registry.h) and the registry of its packs; host = grpo_default_host();
 *                      then, unless backend is NULL, grpo_process_backend
 *   grpo_process_backend   the backend (cpu, cuda or auto: kernels.h; threads <= 0: the default;
 *                      precision GRPO_DTYPE_F32, or GRPO_DTYPE_BF16 on cuda: [model] dtype),
 *                      then host.ops and the frozen-model services (host_model.h) on that
 *                      backend and plugin path (a run opens it once its run file has said how
 *                      many threads and which backend)
 *   grpo_process_close     frees it all, after every plugin instance and model made through it
 *
 * Commands that only read manifests (config check, plugins list) need no backend.
 */
#ifndef GRPO_ENV_H
#define GRPO_ENV_H

#include "grpo/ops.h"
#include "grpo/plugin.h"
#include "host/host_model.h"
#include "host/registry.h"

typedef struct grpo_process {
    char **plugin_dirs;       /* NULL-terminated */
    grpo_registry reg;        /* the packs on plugin_dirs */
    grpo_ops *ops;            /* NULL until grpo_process_backend */
    grpo_host host;           /* what plugins get: defaults, + ops and models after the backend */
    grpo_host_models *models; /* the model services' context (NULL until grpo_process_backend) */
} grpo_process;

int grpo_process_open(grpo_process *e, const char *const *extra_dirs, int n_extra, const char *backend,
                  int32_t threads, grpo_error *err);
int grpo_process_backend(grpo_process *e, const char *backend, int32_t threads, int32_t precision,
                     grpo_error *err);
/* Safe on a zeroed or partly opened env. */
void grpo_process_close(grpo_process *e);

#endif
