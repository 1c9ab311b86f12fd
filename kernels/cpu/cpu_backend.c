/*
 * cpu_backend.c — the CPU backend's op table: opened with a context (cpu_ctx.c) and filled from
 * the op list (grpo/ops_list.h) by designated initialisers, one per op, cpu_NAME each. This file
 * only names kernels; what they share lives in cpu_ctx.c and cpu_memory.c.
 */
#include "cpu/cpu_backend.h"

#include <stdlib.h>

/* Optional ops this backend leaves out (NULL in its table; backend_ops.h). */
#define cpu_sample_rows NULL /* the host draws (core/host/sampler.c) */

grpo_ops *cpu_backend_open(int32_t threads, grpo_error *err) {
    cpu_ctx *ctx = cpu_ctx_new(threads);
    grpo_ops *ops = calloc(1, sizeof *ops);
    if (!ctx || !ops) {
        cpu_ctx_free(ctx);
        free(ops);
        grpo_error_set(err, GRPO_ERR_NOMEM, "cpu backend: out of memory opening the backend");
        return NULL;
    }
    *ops = (grpo_ops){
        .struct_size = (uint32_t)sizeof(grpo_ops),
        .name = "cpu",
        .ctx = ctx,
        GRPO_BACKEND_OP_INITIALIZERS(cpu)
    };
    return ops;
}

void cpu_backend_close(grpo_ops *ops) {
    if (!ops) return;
    cpu_ctx_free(ops->ctx);
    free(ops);
}
