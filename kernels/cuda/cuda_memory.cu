/*
 * cuda_memory.cu — the CUDA backend's memory ops (alloc ... sync of grpo/ops_list.h). Memory is
 * device memory: alloc is cudaMalloc (256-byte aligned) zeroed on the stream; upload, copy and
 * zero are queued on the stream (an upload from pageable host memory has read its source when
 * it returns); download waits for the stream.
 */
#include "cuda_backend.h"

#include <stdint.h>

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
