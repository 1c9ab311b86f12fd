/*
 * cuda_backend.h — the CUDA backend's private interface: its context, the helpers its kernels
 * share, and one function per op of grpo_ops, cuda_NAME, declared from the op list
 * (grpo/ops_list.h, through backend_ops.h) and defined in the .cu file named for its family.
 * Files, bottom up: cuda_ctx.cu (context, scratch, checks), cuda_memory.cu, gemm.cu, the
 * kernels, and cuda_backend.cu (the module's entry points and the table). The same
 * sources build with nvcc (the real backend, libgrpo_kernels_cuda.so) and with the host compiler
 * under the emulation of compat.h (libgrpo_kernels_cuda_emu.so, what CI tests).
 *
 * Every op takes the context (cuda_ctx *) as a void * first argument, as the table demands, and
 * queues its work on ctx->stream: ops return before the GPU finishes; download and sync wait.
 * Buffers are device memory (cudaMalloc); the host never dereferences them.
 *
 * Precision (ctx->precision, [model] dtype): GRPO_DTYPE_F32 computes every matmul in fp32
 * (cuBLAS with CUBLAS_COMPUTE_32F and no TF32: the CPU backend's results to rounding order);
 * GRPO_DTYPE_BF16 is autocast as PyTorch does it: the operands of each matmul (activations and
 * fp32 master weights) are rounded to bf16 on the way into cuBLAS, which accumulates in fp32 and
 * writes fp32. Everything else (norms, softmax, log-probs, losses, gradients, AdamW) stays fp32.
 *
 * Shapes use the letters of ops.h: N tokens, B rows, T time, C channels, I intermediate, V vocab,
 * NH query heads, NKV key/value heads, HD head dim, R decode rows, S cache length.
 */
#ifndef GRPO_CUDA_BACKEND_H
#define GRPO_CUDA_BACKEND_H

#include "compat.h"
#include "cuda_module.h"

#include <stddef.h>
#include <stdint.h>

#include "backend_ops.h"
#include "grpo/ops.h"
#include "grpo/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* grpo_cuda_options and the entry points: cuda_module.h (shared with cuda_loader.c). */

/* Scratch slots: grow-only device buffers an op may use for the duration of one call. Distinct
 * slots may be held at once (a bf16 gemm holds A and B while the head holds its logits chunk). */
enum { CUDA_SCRATCH_GEMM_A, CUDA_SCRATCH_GEMM_B, CUDA_SCRATCH_OP, CUDA_SCRATCH_OP2,
       CUDA_SCRATCH_SLOTS };

typedef struct cuda_ctx {
    cudaStream_t stream;                      /* every op's queue */
    void *blas;                               /* cublasHandle_t (NULL under the emulation) */
    int32_t device;
    int32_t precision;                        /* GRPO_DTYPE_F32 / GRPO_DTYPE_BF16 */
    int32_t threads;                          /* emulation only */
    void *scratch[CUDA_SCRATCH_SLOTS];        /* device buffers, grow-only */
    uint64_t scratch_bytes[CUDA_SCRATCH_SLOTS];
    double *d_sum;                            /* device double for sumsq's result */
} cuda_ctx;

/* ---- cuda_backend.cu: the table (the module's two entry points, cuda_module.h) ----------- */

grpo_ops *grpo_cuda_backend_open(const grpo_cuda_options *opt, grpo_error *err);
void grpo_cuda_backend_close(grpo_ops *ops);

/* ---- cuda_ctx.cu: context, scratch, errors ---------------------------------------------- */

/* A context on device opt->device (opt NULL: device 0, f32) with its stream, device sum and
 * cuBLAS handle; NULL with err set when the precision is unknown or the device cannot open. */
cuda_ctx *cuda_ctx_new(const grpo_cuda_options *opt, grpo_error *err);
/* Waits for the stream, then frees the context and everything it holds (NULL is ignored). */
void cuda_ctx_free(cuda_ctx *ctx);

/* A device buffer of at least `bytes` in slot `slot`, valid until the next call for that slot
 * (growing syncs the stream before freeing the old one). Aborts when out of memory. */
void *cuda_scratch(cuda_ctx *ctx, int slot, uint64_t bytes);

/* Aborts with file:line, the op and what was wrong: the op table has no error return, and a
 * shape bug or a failed launch must not become silent garbage. */
void cuda_check_failed(const char *file, int line, const char *op, const char *what);
#define CUDA_REQUIRE(cond, op, what)                                                            \
    do {                                                                                        \
        if (!(cond)) cuda_check_failed(__FILE__, __LINE__, (op), (what));                       \
    } while (0)
#define CUDA_CHECK(call, op)                                                                    \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess) cuda_check_failed(__FILE__, __LINE__, (op), cudaGetErrorString(e_)); \
    } while (0)
#define CUDA_CHECK_LAUNCH(op) CUDA_CHECK(cudaGetLastError(), (op))

/* Blocks of `threads` covering n items. */
static inline unsigned cuda_blocks(uint64_t n, unsigned threads) {
    return (unsigned)((n + threads - 1) / threads);
}

/* ---- gemm.cu: the one way to multiply matrices (cuBLAS; sgemm under the emulation) -------- */

/* C (M,N) = alpha * op(A) (M,K) @ op(B) (K,N) + beta * C, all ROW-major as the CPU backend's
 * cpu_sgemm: op = transpose when trans_* is nonzero; lda/ldb/ldc are row strides as stored.
 * A and B are of type atype/btype (GRPO_DTYPE_*), C is fp32. Under ctx->precision = bf16, fp32
 * operands are rounded to bf16 first (autocast); fp32 accumulate always. */
void cuda_gemm(cuda_ctx *ctx, int trans_a, int trans_b, int32_t M, int32_t N, int32_t K,
               float alpha, const void *A, int32_t atype, int32_t lda, const void *B,
               int32_t btype, int32_t ldb, float beta, float *C, int32_t ldc);

/* ---- the ops: cuda_alloc ... cuda_sample_rows, one per entry of grpo/ops_list.h ----------
 * Memory ops in cuda_memory.cu; the others in the .cu file of their family: embedding, gemm
 * (matmul), rmsnorm, rope, attention, swiglu, elementwise (residual, accumulate, scale, sumsq,
 * adamw, dropout, convert), head, rows (mixture-of-experts routing), sample. */
GRPO_BACKEND_DECLARE_OPS(cuda)

#ifdef __cplusplus
}
#endif
#endif /* GRPO_CUDA_BACKEND_H */
