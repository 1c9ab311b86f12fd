/* backend_registry.h — the backends this build knows, one entry each (backend_registry.c):
 * kernels.c opens a backend by name, or "auto" by walking the entries in order, and closes a
 * table through the entry that owns it. Adding a backend is adding an entry. */
#ifndef GRPO_BACKEND_REGISTRY_H
#define GRPO_BACKEND_REGISTRY_H

#include "kernels.h"

typedef struct grpo_backend_entry {
    const char *name; /* as [train] backend names it */
    /* 1 when open may succeed here (cheap: no device is opened); "auto" skips the entry if 0 */
    int (*probe)(const grpo_backend_options *opt);
    /* a table, or NULL with err set */
    grpo_ops *(*open)(const grpo_backend_options *opt, grpo_error *err);
    /* closes ops if this backend opened it; 0 when ops is not one of its tables */
    int (*close)(grpo_ops *ops);
    /* sets the compute dtype of ops, one of its tables (grpo_backend_set_compute); NULL: the
     * backend computes its forward products in f32 only */
    int32_t (*set_compute)(const grpo_ops *ops, int32_t dtype, grpo_error *err);
} grpo_backend_entry;

/* The entries in "auto"'s order of preference, the last the one that always opens (cpu); n
 * gets their count. */
const grpo_backend_entry *grpo_backend_entries(int *n);
/* The entry called name; NULL when there is none. */
const grpo_backend_entry *grpo_backend_find(const char *name);
/* GRPO_OK when ops, as `entry` opened it, holds every op of grpo/ops_list.h that is not
 * optional; else GRPO_ERR_UNSUPPORTED in err, naming the op. */
int32_t grpo_backend_check_table(const grpo_backend_entry *entry, const grpo_ops *ops,
                                 grpo_error *err);

#endif
