/* kernels.c — backend selection by name: "cpu" is built in, "cuda" is not built yet. */
#include "kernels.h"

#include <string.h>

#include "cpu/cpu_backend.h"

grpo_ops *grpo_backend_open(const char *name, int32_t threads, grpo_error *err) {
    if (threads > GRPO_MAX_THREADS) { /* libgomp crashes creating tens of thousands */
        grpo_error_set(err, GRPO_ERR_INVALID,
                       "threads = %d: expected at most %d (0: all cores)", threads,
                       GRPO_MAX_THREADS);
        return NULL;
    }
    if (!name || strcmp(name, "cpu") == 0) return cpu_backend_open(threads, err);
    if (strcmp(name, "cuda") == 0) {
        grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                       "backend 'cuda': CUDA backend not built (this build has the 'cpu' "
                       "backend only)");
        return NULL;
    }
    grpo_error_set(err, GRPO_ERR_INVALID,
                   "backend '%s': unknown backend (expected 'cpu' or 'cuda')", name);
    return NULL;
}

void grpo_backend_close(grpo_ops *ops) {
    if (!ops) return;
    if (ops->name && strcmp(ops->name, "cpu") == 0) cpu_backend_close(ops);
}
