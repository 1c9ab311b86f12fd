/* process.c — the plugin path, registry, backend and host services of a process (see process.h). */
#include "host/process.h"

#include <string.h>

#include "host/host.h"
#include "kernels.h"

int grpo_process_open(grpo_process *e, const char *const *extra_dirs, int n_extra, const char *backend,
                  int32_t threads, grpo_error *err) {
    memset(e, 0, sizeof *e);
    e->host = *grpo_default_host();
    if (!(e->plugin_dirs = grpo_plugin_path(extra_dirs, n_extra)))
        return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory reading the plugin path");
    int rc = grpo_registry_scan(&e->reg, e->plugin_dirs, err);
    return rc == GRPO_OK && backend ? grpo_process_backend(e, backend, threads, GRPO_DTYPE_F32, err)
                                    : rc;
}

int grpo_process_backend(grpo_process *e, const char *backend, int32_t threads, int32_t precision,
                     grpo_error *err) {
    grpo_backend_options o = {threads, precision};
    if (!(e->ops = grpo_backend_open_with(backend, &o, err)))
        return err->status ? err->status : GRPO_ERR_INVALID;
    e->host.ops = e->ops;
    int rc = grpo_host_models_open(&e->models, e->ops, e->plugin_dirs, err);
    if (rc == GRPO_OK) grpo_host_set_models(&e->host, e->models);
    return rc;
}

void grpo_process_close(grpo_process *e) {
    grpo_host_models_close(e->models); /* after the plugins and models that use it */
    grpo_backend_close(e->ops);
    grpo_registry_free(&e->reg);
    if (e->plugin_dirs) grpo_plugin_path_free(e->plugin_dirs);
    memset(e, 0, sizeof *e);
}
