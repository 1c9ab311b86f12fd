/*
 * cpu_backend.c — the CPU backend's context, memory ops, thread policy and op table.
 *
 * Memory is host memory: alloc is a zeroed 64-byte aligned block, upload/download/copy are
 * memcpy, sync does nothing. The table is filled with labelled initialisers so a missing op
 * stands out.
 */
#include "cpu/cpu_backend.h"

#include "cpu/blas.h"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cpu_check_failed(const char *file, int line, const char *op, const char *what) {
    fprintf(stderr, "grpo: %s:%d: cpu backend: %s: %s\n", file, line, op, what);
    abort();
}

/* ---- memory ----------------------------------------------------------------------------- */

void *cpu_alloc(void *ctx, uint64_t bytes) {
    (void)ctx;
    /* aligned_alloc wants a size that is a multiple of the alignment, and > 0 */
    uint64_t size = bytes ? (bytes + 63u) / 64u * 64u : 64u;
    if (size < bytes || size > (uint64_t)SIZE_MAX) return NULL;
    void *p = aligned_alloc(64, (size_t)size);
    if (p) memset(p, 0, (size_t)size);
    return p;
}

void cpu_free(void *ctx, void *ptr) {
    (void)ctx;
    free(ptr);
}

void cpu_upload(void *ctx, void *dst, const void *src, uint64_t bytes) {
    (void)ctx;
    if (bytes) memcpy(dst, src, (size_t)bytes);
}

void cpu_download(void *ctx, void *dst, const void *src, uint64_t bytes) {
    (void)ctx;
    if (bytes) memcpy(dst, src, (size_t)bytes);
}

void cpu_copy(void *ctx, void *dst, const void *src, uint64_t bytes) {
    (void)ctx;
    if (bytes && dst != src) memmove(dst, src, (size_t)bytes);
}

void cpu_zero(void *ctx, void *dst, uint64_t bytes) {
    (void)ctx;
    if (bytes) memset(dst, 0, (size_t)bytes);
}

void cpu_sync(void *ctx) { (void)ctx; }

float *cpu_scratch(cpu_ctx *ctx, size_t n) {
    if (n <= ctx->scratch_floats) return ctx->scratch;
    free(ctx->scratch);
    ctx->scratch = NULL;
    ctx->scratch_floats = 0;
    size_t bytes = (n * sizeof(float) + 63u) / 64u * 64u;
    float *p = aligned_alloc(64, bytes);
    if (!p) return NULL;
    ctx->scratch = p;
    ctx->scratch_floats = n;
    return p;
}

/* ---- the table -------------------------------------------------------------------------- */

grpo_ops *cpu_backend_open(int32_t threads, grpo_error *err) {
    cpu_ctx *ctx = calloc(1, sizeof *ctx);
    grpo_ops *ops = calloc(1, sizeof *ops);
    if (!ctx || !ops) {
        free(ctx);
        free(ops);
        grpo_error_set(err, GRPO_ERR_NOMEM, "cpu backend: out of memory opening the backend");
        return NULL;
    }
    ctx->threads = threads > 0 ? threads : omp_get_max_threads();
    if (ctx->threads < 1) ctx->threads = 1;
    /* one thread pool: OpenMP's (see cpu_backend.h); this is process-wide */
    openblas_set_num_threads(1);

    *ops = (grpo_ops){
        /* .struct_size        = */ (uint32_t)sizeof(grpo_ops),
        /* .name               = */ "cpu",
        /* .ctx                = */ ctx,
        /* .alloc              = */ cpu_alloc,
        /* .free               = */ cpu_free,
        /* .upload             = */ cpu_upload,
        /* .download           = */ cpu_download,
        /* .copy               = */ cpu_copy,
        /* .zero               = */ cpu_zero,
        /* .sync               = */ cpu_sync,
        /* .embedding_forward  = */ cpu_embedding_forward,
        /* .embedding_backward = */ cpu_embedding_backward,
        /* .matmul_forward     = */ cpu_matmul_forward,
        /* .matmul_backward    = */ cpu_matmul_backward,
        /* .rmsnorm_forward    = */ cpu_rmsnorm_forward,
        /* .rmsnorm_backward   = */ cpu_rmsnorm_backward,
        /* .rope_forward       = */ cpu_rope_forward,
        /* .rope_backward      = */ cpu_rope_backward,
        /* .attention_forward  = */ cpu_attention_forward,
        /* .attention_backward = */ cpu_attention_backward,
        /* .attention_decode   = */ cpu_attention_decode,
        /* .swiglu_forward     = */ cpu_swiglu_forward,
        /* .swiglu_backward    = */ cpu_swiglu_backward,
        /* .residual_forward   = */ cpu_residual_forward,
        /* .accumulate         = */ cpu_accumulate,
        /* .head_forward       = */ cpu_head_forward,
        /* .head_backward      = */ cpu_head_backward,
        /* .adamw              = */ cpu_adamw,
        /* .sumsq              = */ cpu_sumsq,
        /* .scale              = */ cpu_scale,
        /* .gather_rows        = */ cpu_gather_rows,
        /* .scatter_add_rows   = */ cpu_scatter_add_rows,
        /* .scatter_add_rows_backward = */ cpu_scatter_add_rows_backward,
        /* .head_backward_entropy = */ cpu_head_backward_entropy,
        /* .convert            = */ cpu_convert,
        /* .matmul_forward_w   = */ cpu_matmul_forward_w,
        /* .matmul_backward_w  = */ cpu_matmul_backward_w,
        /* .embedding_forward_w = */ cpu_embedding_forward_w,
        /* .head_forward_w     = */ cpu_head_forward_w,
        /* .head_backward_w    = */ cpu_head_backward_w,
        /* .dropout            = */ cpu_dropout,
        /* .prefix_attention_forward  = */ cpu_prefix_attention_forward,
        /* .prefix_attention_backward = */ cpu_prefix_attention_backward,
        /* .sample_rows        = */ NULL, /* the host draws (core/host/sampler.c) */
    };
    return ops;
}

void cpu_backend_close(grpo_ops *ops) {
    if (!ops) return;
    cpu_ctx *ctx = ops->ctx;
    if (ctx) free(ctx->scratch), free(ctx->panel);
    free(ctx);
    free(ops);
}
