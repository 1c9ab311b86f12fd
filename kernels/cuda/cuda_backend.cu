/*
 * cuda_backend.cu — the CUDA backend's context, memory ops, errors, scratch and op table.
 *
 * Memory is device memory: alloc is cudaMalloc (256-byte aligned) zeroed on the stream; upload,
 * copy and zero are queued on the stream (an upload from pageable host memory has read its
 * source when it returns); download waits for the stream. The table is filled with labelled
 * initialisers in grpo_ops order so a missing op stands out.
 * Under the host emulation (GRPO_CUDA_EMU) the same code runs on the emulated runtime of
 * emu/emu.h and there is no cuBLAS handle (gemm.cu multiplies with OpenBLAS).
 */
#include "cuda_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef GRPO_CUDA_EMU
#include <cublas_v2.h>
#endif

/* The module's two entry points are its only exported symbols (the emulated module is built
 * with hidden visibility). */
#define GRPO_CUDA_EXPORT __attribute__((visibility("default")))

void cuda_check_failed(const char *file, int line, const char *op, const char *what) {
    fprintf(stderr, "grpo: %s:%d: cuda backend: %s: %s\n", file, line, op, what);
    abort();
}

/* ---- memory ------------------------------------------------------------------------------ */

void *cuda_alloc(void *ctx_, uint64_t bytes) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    uint64_t size = bytes ? bytes : 1;
    if (size > (uint64_t)SIZE_MAX) return NULL;
    void *p = NULL;
    if (cudaMalloc(&p, (size_t)size) != cudaSuccess) {
        cudaGetLastError(); /* out of memory is the caller's NULL, not a later op's error */
        return NULL;
    }
    CUDA_CHECK(cudaMemsetAsync(p, 0, (size_t)size, ctx->stream), "alloc");
    return p;
}

void cuda_free(void *ctx, void *ptr) {
    (void)ctx;
    if (ptr) CUDA_CHECK(cudaFree(ptr), "free");
}

void cuda_upload(void *ctx_, void *dst, const void *src, uint64_t bytes) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    if (bytes)
        CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyHostToDevice, ctx->stream),
                   "upload");
}

void cuda_download(void *ctx_, void *dst, const void *src, uint64_t bytes) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    if (!bytes) return;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDeviceToHost, ctx->stream),
               "download");
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream), "download");
}

void cuda_copy(void *ctx_, void *dst, const void *src, uint64_t bytes) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    if (bytes && dst != src)
        CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDeviceToDevice,
                                   ctx->stream),
                   "copy");
}

void cuda_zero(void *ctx_, void *dst, uint64_t bytes) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    if (bytes) CUDA_CHECK(cudaMemsetAsync(dst, 0, (size_t)bytes, ctx->stream), "zero");
}

void cuda_sync(void *ctx_) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream), "sync");
}

void *cuda_scratch(cuda_ctx *ctx, int slot, uint64_t bytes) {
    CUDA_REQUIRE(slot >= 0 && slot < CUDA_SCRATCH_SLOTS, "scratch", "no such scratch slot");
    if (bytes <= ctx->scratch_bytes[slot] && ctx->scratch[slot]) return ctx->scratch[slot];
    /* grow by half again so a slowly growing request does not reallocate every call */
    uint64_t want = bytes + bytes / 2 + 256;
    if (ctx->scratch[slot]) {
        CUDA_CHECK(cudaStreamSynchronize(ctx->stream), "scratch"); /* queued ops may use it */
        CUDA_CHECK(cudaFree(ctx->scratch[slot]), "scratch");
        ctx->scratch[slot] = NULL;
        ctx->scratch_bytes[slot] = 0;
    }
    void *p = NULL;
    if (cudaMalloc(&p, (size_t)want) != cudaSuccess) {
        char what[96];
        snprintf(what, sizeof what, "out of device memory for %llu bytes of scratch",
                 (unsigned long long)want);
        cudaGetLastError();
        cuda_check_failed(__FILE__, __LINE__, "scratch", what);
    }
    ctx->scratch[slot] = p;
    ctx->scratch_bytes[slot] = want;
    return p;
}

/* ---- the table --------------------------------------------------------------------------- */

static void fill_table(grpo_ops *ops, cuda_ctx *ctx) {
    *ops = grpo_ops{
        /* .struct_size        = */ (uint32_t)sizeof(grpo_ops),
        /* .name               = */ "cuda",
        /* .ctx                = */ ctx,
        /* .alloc              = */ cuda_alloc,
        /* .free               = */ cuda_free,
        /* .upload             = */ cuda_upload,
        /* .download           = */ cuda_download,
        /* .copy               = */ cuda_copy,
        /* .zero               = */ cuda_zero,
        /* .sync               = */ cuda_sync,
        /* .embedding_forward  = */ cuda_embedding_forward,
        /* .embedding_backward = */ cuda_embedding_backward,
        /* .matmul_forward     = */ cuda_matmul_forward,
        /* .matmul_backward    = */ cuda_matmul_backward,
        /* .rmsnorm_forward    = */ cuda_rmsnorm_forward,
        /* .rmsnorm_backward   = */ cuda_rmsnorm_backward,
        /* .rope_forward       = */ cuda_rope_forward,
        /* .rope_backward      = */ cuda_rope_backward,
        /* .attention_forward  = */ cuda_attention_forward,
        /* .attention_backward = */ cuda_attention_backward,
        /* .attention_decode   = */ cuda_attention_decode,
        /* .swiglu_forward     = */ cuda_swiglu_forward,
        /* .swiglu_backward    = */ cuda_swiglu_backward,
        /* .residual_forward   = */ cuda_residual_forward,
        /* .accumulate         = */ cuda_accumulate,
        /* .head_forward       = */ cuda_head_forward,
        /* .head_backward      = */ cuda_head_backward,
        /* .adamw              = */ cuda_adamw,
        /* .sumsq              = */ cuda_sumsq,
        /* .scale              = */ cuda_scale,
        /* .gather_rows        = */ cuda_gather_rows,
        /* .scatter_add_rows   = */ cuda_scatter_add_rows,
        /* .scatter_add_rows_backward = */ cuda_scatter_add_rows_backward,
        /* .head_backward_entropy = */ cuda_head_backward_entropy,
        /* .convert            = */ cuda_convert,
        /* .matmul_forward_w   = */ cuda_matmul_forward_w,
        /* .matmul_backward_w  = */ cuda_matmul_backward_w,
        /* .embedding_forward_w = */ cuda_embedding_forward_w,
        /* .head_forward_w     = */ cuda_head_forward_w,
        /* .head_backward_w    = */ cuda_head_backward_w,
        /* .dropout            = */ cuda_dropout,
        /* .prefix_attention_forward  = */ cuda_prefix_attention_forward,
        /* .prefix_attention_backward = */ cuda_prefix_attention_backward,
        /* .sample_rows        = */ cuda_sample_rows,
    };
}

static void free_ctx(cuda_ctx *ctx) {
    if (!ctx) return;
    if (ctx->stream) cudaStreamSynchronize(ctx->stream);
    for (int i = 0; i < CUDA_SCRATCH_SLOTS; i++) cudaFree(ctx->scratch[i]);
    cudaFree(ctx->d_sum);
#ifndef GRPO_CUDA_EMU
    if (ctx->blas) cublasDestroy((cublasHandle_t)ctx->blas);
#endif
    if (ctx->stream) cudaStreamDestroy(ctx->stream);
    cudaGetLastError();
    free(ctx);
}

/* The device, stream and cuBLAS handle of a new context; GRPO_OK or an error in err. */
static int32_t open_device(cuda_ctx *ctx, grpo_error *err) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count <= 0) {
        cudaGetLastError();
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "backend 'cuda': no CUDA device (%s)",
                              e != cudaSuccess ? cudaGetErrorString(e)
                                               : "the driver reports 0 devices");
    }
    if (ctx->device < 0 || ctx->device >= count)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "backend 'cuda': device %d: expected 0..%d (%d device%s here)",
                              ctx->device, count - 1, count, count == 1 ? "" : "s");
    if ((e = cudaSetDevice(ctx->device)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaMalloc((void **)&ctx->d_sum, sizeof(double))) != cudaSuccess) {
        cudaGetLastError();
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "backend 'cuda': device %d: %s",
                              ctx->device, cudaGetErrorString(e));
    }
#ifndef GRPO_CUDA_EMU
    cublasHandle_t h = NULL;
    cublasStatus_t s = cublasCreate(&h);
    if (s != CUBLAS_STATUS_SUCCESS)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "backend 'cuda': cuBLAS: %s",
                              cublasGetStatusString(s));
    ctx->blas = h;
    /* fp32 GEMMs stay fp32: no TF32 (CUBLAS_COMPUTE_32F in gemm.cu asks for the same) */
    if ((s = cublasSetStream(h, ctx->stream)) != CUBLAS_STATUS_SUCCESS ||
        (s = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "backend 'cuda': cuBLAS: %s",
                              cublasGetStatusString(s));
#endif
    return GRPO_OK;
}

extern "C" GRPO_CUDA_EXPORT grpo_ops *grpo_cuda_backend_open(const grpo_cuda_options *opt,
                                                             grpo_error *err) {
    int32_t precision = opt ? opt->precision : GRPO_DTYPE_F32;
    if (precision != GRPO_DTYPE_F32 && precision != GRPO_DTYPE_BF16) {
        grpo_error_set(err, GRPO_ERR_INVALID,
                       "backend 'cuda': precision %d: expected f32 (%d) or bf16 (%d)", precision,
                       GRPO_DTYPE_F32, GRPO_DTYPE_BF16);
        return NULL;
    }
    cuda_ctx *ctx = (cuda_ctx *)calloc(1, sizeof *ctx);
    grpo_ops *ops = (grpo_ops *)calloc(1, sizeof *ops);
    if (!ctx || !ops) {
        free(ctx);
        free(ops);
        grpo_error_set(err, GRPO_ERR_NOMEM, "backend 'cuda': out of memory opening the backend");
        return NULL;
    }
    ctx->device = opt ? opt->device : 0;
    ctx->precision = precision;
    ctx->threads = opt && opt->threads > 0 ? opt->threads : 1;
    if (open_device(ctx, err) != GRPO_OK) {
        free_ctx(ctx);
        free(ops);
        return NULL;
    }
    fill_table(ops, ctx);
    return ops;
}

extern "C" GRPO_CUDA_EXPORT void grpo_cuda_backend_close(grpo_ops *ops) {
    if (!ops) return;
    free_ctx((cuda_ctx *)ops->ctx);
    free(ops);
}
