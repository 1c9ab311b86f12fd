/* backend_registry.c — the backends this build knows: cpu (built in, cpu/cpu_backend.c) and
 * cuda (a module, cuda_loader.c); see backend_registry.h. */
#include "backend_registry.h"

#include <string.h>

#include "cpu/cpu_backend.h"
#include "cuda_loader.h"

/* ---- cpu ------------------------------------------------------------------------------------ */

static int cpu_probe(const grpo_backend_options *opt) { return opt->precision == GRPO_DTYPE_F32; }

static grpo_ops *cpu_open(const grpo_backend_options *opt, grpo_error *err) {
    if (opt->precision != GRPO_DTYPE_F32) {
        grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                       "backend 'cpu': precision bf16 is not supported (the cpu backend "
                       "computes in f32; bf16 needs backend = cuda)");
        return NULL;
    }
    return cpu_backend_open(opt->threads, err);
}

static int cpu_close(grpo_ops *ops) {
    if (!ops->name || strcmp(ops->name, "cpu") != 0) return 0;
    cpu_backend_close(ops);
    return 1;
}

static int32_t cpu_set_compute(const grpo_ops *ops, int32_t dtype, grpo_error *err) {
    return cpu_set_compute_dtype(ops->ctx, dtype, err);
}

/* ---- the registry --------------------------------------------------------------------------- */

static const grpo_backend_entry entries[] = {
    {"cuda", cuda_module_probe, cuda_module_open, cuda_module_close, NULL},
    {"cpu", cpu_probe, cpu_open, cpu_close, cpu_set_compute},
};

const grpo_backend_entry *grpo_backend_entries(int *n) {
    *n = (int)(sizeof entries / sizeof entries[0]);
    return entries;
}

const grpo_backend_entry *grpo_backend_find(const char *name) {
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
        if (strcmp(entries[i].name, name) == 0) return &entries[i];
    return NULL;
}

int32_t grpo_backend_check_table(const grpo_backend_entry *entry, const grpo_ops *ops,
                                 grpo_error *err) {
    if (ops->struct_size < sizeof(grpo_ops))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "backend '%s': its table is %u bytes, expected %zu", entry->name,
                              ops->struct_size, sizeof(grpo_ops));
#define CHECK_OP(D, minor, optional, ret, op, params)                                           \
    if (!(optional) && !ops->op)                                                                \
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,                                        \
                              "backend '%s': its table lacks the op %s (not optional)",         \
                              entry->name, #op);
    GRPO_OPS_LIST(CHECK_OP, ~)
#undef CHECK_OP
    return GRPO_OK;
}
