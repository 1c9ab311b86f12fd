/* kernels.c — opening and closing a backend by name (kernels.h): the names, "auto" and the
 * closing go through the registry (backend_registry.c). */
#include "kernels.h"

#include <string.h>

#include "backend_registry.h"

/* Opens entry e and checks its table; NULL with err set. */
static grpo_ops *open_entry(const grpo_backend_entry *e, const grpo_backend_options *o,
                            grpo_error *err) {
    grpo_ops *ops = e->open(o, err);
    if (ops && grpo_backend_check_table(e, ops, err) != GRPO_OK) {
        e->close(ops);
        return NULL;
    }
    return ops;
}

/* "auto": the first entry whose probe passes and which opens (quietly), else the last entry,
 * whose error is the caller's. */
static grpo_ops *open_auto(const grpo_backend_options *o, grpo_error *err) {
    int n;
    const grpo_backend_entry *e = grpo_backend_entries(&n);
    for (int i = 0; i + 1 < n; i++) {
        grpo_error quiet;
        grpo_error_init(&quiet);
        grpo_ops *ops = e[i].probe(o) ? open_entry(&e[i], o, &quiet) : NULL;
        if (ops) return ops;
    }
    return open_entry(&e[n - 1], o, err);
}

grpo_ops *grpo_backend_open_with(const char *name, const grpo_backend_options *opt,
                                 grpo_error *err) {
    grpo_backend_options o = opt ? *opt : (grpo_backend_options){0, GRPO_DTYPE_F32};
    if (o.threads > GRPO_MAX_THREADS) { /* a thread each: tens of thousands exhaust the process */
        grpo_error_set(err, GRPO_ERR_INVALID,
                       "threads = %d: expected at most %d (0: all cores)", o.threads,
                       GRPO_MAX_THREADS);
        return NULL;
    }
    if (o.precision != GRPO_DTYPE_F32 && o.precision != GRPO_DTYPE_BF16) {
        grpo_error_set(err, GRPO_ERR_INVALID, "precision %d: expected f32 (%d) or bf16 (%d)",
                       o.precision, GRPO_DTYPE_F32, GRPO_DTYPE_BF16);
        return NULL;
    }
    if (!name) name = "cpu";
    const grpo_backend_entry *e = grpo_backend_find(name);
    if (e) return open_entry(e, &o, err);
    if (strcmp(name, "auto") == 0) return open_auto(&o, err);
    grpo_error_set(err, GRPO_ERR_INVALID,
                   "backend '%s': unknown backend (expected 'cpu', 'cuda' or 'auto')", name);
    return NULL;
}

grpo_ops *grpo_backend_open(const char *name, int32_t threads, grpo_error *err) {
    grpo_backend_options o = {threads, GRPO_DTYPE_F32};
    return grpo_backend_open_with(name, &o, err);
}

int32_t grpo_backend_set_compute(const grpo_ops *ops, int32_t dtype, grpo_error *err) {
    const grpo_backend_entry *e = ops->name ? grpo_backend_find(ops->name) : NULL;
    if (e && e->set_compute) return e->set_compute(ops, dtype, err);
    if (dtype == GRPO_DTYPE_F32) return GRPO_OK;
    return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                          "backend '%s': bf16 compute per pass is not supported (its forward "
                          "products are f32 unless the whole backend runs bf16: model.dtype)",
                          ops->name ? ops->name : "?");
}

void grpo_backend_close(grpo_ops *ops) {
    if (!ops) return;
    int n;
    const grpo_backend_entry *e = grpo_backend_entries(&n);
    for (int i = 0; i < n; i++)
        if (e[i].close(ops)) return;
}
