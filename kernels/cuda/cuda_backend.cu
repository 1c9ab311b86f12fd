/*
 * cuda_backend.cu — the CUDA backend's op table and the module's two entry points: a context
 * (cuda_ctx.cu) and a table filled from the op list (grpo/ops_list.h) by designated
 * initialisers, one per op, cuda_NAME each, in grpo_ops order. This file only names kernels.
 * Under the host emulation (GRPO_CUDA_EMU) the same code runs on the emulated runtime of
 * emu/emu.h and there is no cuBLAS handle (gemm.cu multiplies with OpenBLAS).
 */
#include "cuda_backend.h"

#include <stdlib.h>

/* The module's two entry points are its only exported symbols (the emulated module is built
 * with hidden visibility). */
#define GRPO_CUDA_EXPORT __attribute__((visibility("default")))

/* Optional ops this backend leaves out (NULL in its table; backend_ops.h). */
#define cuda_logits_logp NULL /* its sampler is sample_rows, which computes plogp on the device */
#define cuda_parallel_for NULL /* its host work is the sampler's bookkeeping: nothing to split */

extern "C" GRPO_CUDA_EXPORT grpo_ops *grpo_cuda_backend_open(const grpo_cuda_options *opt,
                                                             grpo_error *err) {
    cuda_ctx *ctx = cuda_ctx_new(opt, err);
    if (!ctx) return NULL;
    grpo_ops *ops = (grpo_ops *)calloc(1, sizeof *ops);
    if (!ops) {
        cuda_ctx_free(ctx);
        grpo_error_set(err, GRPO_ERR_NOMEM, "backend 'cuda': out of memory opening the backend");
        return NULL;
    }
    *ops = grpo_ops{
        .struct_size = (uint32_t)sizeof(grpo_ops),
        .name = "cuda",
        .ctx = ctx,
        GRPO_BACKEND_OP_INITIALIZERS(cuda)
    };
    return ops;
}

extern "C" GRPO_CUDA_EXPORT void grpo_cuda_backend_close(grpo_ops *ops) {
    if (!ops) return;
    cuda_ctx_free((cuda_ctx *)ops->ctx);
    free(ops);
}
