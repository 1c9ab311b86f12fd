/*
 * cuda_ctx.cu — the CUDA backend's context: its device, stream, device sum and cuBLAS handle
 * (none under the emulation), the grow-only scratch slots, and the check that aborts an op on a
 * shape bug or a failed launch. Every kernel calls into this file; it calls none.
 */
#include "cuda_backend.h"

#include <stdio.h>
#include <stdlib.h>

#ifndef GRPO_CUDA_EMU
#include <cublas_v2.h>
#endif

void cuda_check_failed(const char *file, int line, const char *op, const char *what) {
    fprintf(stderr, "grpo: %s:%d: cuda backend: %s: %s\n", file, line, op, what);
    abort();
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

void cuda_ctx_free(cuda_ctx *ctx) {
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

cuda_ctx *cuda_ctx_new(const grpo_cuda_options *opt, grpo_error *err) {
    int32_t precision = opt ? opt->precision : GRPO_DTYPE_F32;
    if (precision != GRPO_DTYPE_F32 && precision != GRPO_DTYPE_BF16) {
        grpo_error_set(err, GRPO_ERR_INVALID,
                       "backend 'cuda': precision %d: expected f32 (%d) or bf16 (%d)", precision,
                       GRPO_DTYPE_F32, GRPO_DTYPE_BF16);
        return NULL;
    }
    cuda_ctx *ctx = (cuda_ctx *)calloc(1, sizeof *ctx);
    if (!ctx) {
        grpo_error_set(err, GRPO_ERR_NOMEM, "backend 'cuda': out of memory opening the backend");
        return NULL;
    }
    ctx->device = opt ? opt->device : 0;
    ctx->precision = precision;
    ctx->threads = opt && opt->threads > 0 ? opt->threads : 1;
    if (open_device(ctx, err) != GRPO_OK) {
        cuda_ctx_free(ctx);
        return NULL;
    }
    return ctx;
}
