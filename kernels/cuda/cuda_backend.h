/*
 * cuda_backend.h — the CUDA backend's private interface: its context and one function per op of
 * grpo_ops (sdk/include/grpo/ops.h), each defined in the .cu file named for its family. The same
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

#include "grpo/ops.h"
#include "grpo/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* grpo_cuda_options and the entry points: cuda_module.h (shared with kernels.c). */

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

/* ---- cuda_backend.cu: context, memory, errors -------------------------------------------- */

grpo_ops *grpo_cuda_backend_open(const grpo_cuda_options *opt, grpo_error *err);
void grpo_cuda_backend_close(grpo_ops *ops);

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

/* ---- the ops (signatures of grpo_ops) ---------------------------------------------------- */

void *cuda_alloc(void *ctx, uint64_t bytes);
void cuda_free(void *ctx, void *ptr);
void cuda_upload(void *ctx, void *dst, const void *src, uint64_t bytes);
void cuda_download(void *ctx, void *dst, const void *src, uint64_t bytes);
void cuda_copy(void *ctx, void *dst, const void *src, uint64_t bytes);
void cuda_zero(void *ctx, void *dst, uint64_t bytes);
void cuda_sync(void *ctx);

/* embedding.cu */
void cuda_embedding_forward(void *ctx, float *out, const int32_t *ids, const float *wte, int32_t N,
                            int32_t C);
void cuda_embedding_backward(void *ctx, float *dwte, const float *dout, const int32_t *ids,
                             int32_t N, int32_t C);
void cuda_embedding_forward_w(void *ctx, float *out, const int32_t *ids, const void *wte,
                              int32_t wtype, int32_t N, int32_t C);
/* gemm.cu */
void cuda_matmul_forward(void *ctx, float *out, const float *inp, const float *w,
                         const float *bias, int32_t N, int32_t IC, int32_t OC);
void cuda_matmul_backward(void *ctx, float *dinp, float *dw, float *dbias, const float *dout,
                          const float *inp, const float *w, int32_t N, int32_t IC, int32_t OC);
void cuda_matmul_forward_w(void *ctx, float *out, const float *inp, const void *w, int32_t wtype,
                           const float *bias, int32_t N, int32_t IC, int32_t OC);
void cuda_matmul_backward_w(void *ctx, float *dinp, const float *dout, const void *w,
                            int32_t wtype, int32_t N, int32_t IC, int32_t OC);
/* rmsnorm.cu */
void cuda_rmsnorm_forward(void *ctx, float *out, float *rstd, const float *inp, const float *w,
                          int32_t N, int32_t C, float eps);
void cuda_rmsnorm_backward(void *ctx, float *dinp, float *dw, const float *dout, const float *inp,
                           const float *w, const float *rstd, int32_t N, int32_t C);
/* rope.cu */
void cuda_rope_forward(void *ctx, float *out, const float *inp, const int32_t *pos, int32_t N,
                       int32_t NH, int32_t HD, float theta);
void cuda_rope_backward(void *ctx, float *dinp, const float *dout, const int32_t *pos, int32_t N,
                        int32_t NH, int32_t HD, float theta);
/* attention.cu */
void cuda_attention_forward(void *ctx, float *out, float *lse, const float *q, const float *k,
                            const float *v, const int32_t *mask, int32_t B, int32_t T, int32_t NH,
                            int32_t NKV, int32_t HD);
void cuda_attention_backward(void *ctx, float *dq, float *dk, float *dv, const float *dout,
                             const float *out, const float *lse, const float *q, const float *k,
                             const float *v, const int32_t *mask, int32_t B, int32_t T,
                             int32_t NH, int32_t NKV, int32_t HD);
void cuda_attention_decode(void *ctx, float *out, const float *q, const float *kcache,
                           const float *vcache, const int32_t *cache_mask, const int32_t *len,
                           int32_t R, int32_t S, int32_t NH, int32_t NKV, int32_t HD);
void cuda_prefix_attention_forward(void *ctx, float *out, float *lse, const float *q,
                                   const float *k, const float *v, const int32_t *mask,
                                   const float *kp, const float *vp, const int32_t *pmask,
                                   const int32_t *prefix_of, int32_t B, int32_t T, int32_t BP,
                                   int32_t P, int32_t NH, int32_t NKV, int32_t HD);
void cuda_prefix_attention_backward(void *ctx, float *dq, float *dk, float *dv, float *dkp,
                                    float *dvp, const float *dout, const float *out,
                                    const float *lse, const float *q, const float *k,
                                    const float *v, const int32_t *mask, const float *kp,
                                    const float *vp, const int32_t *pmask,
                                    const int32_t *prefix_of, int32_t B, int32_t T, int32_t BP,
                                    int32_t P, int32_t NH, int32_t NKV, int32_t HD);
/* swiglu.cu */
void cuda_swiglu_forward(void *ctx, float *out, const float *gate, const float *up, int32_t N,
                         int32_t I);
void cuda_swiglu_backward(void *ctx, float *dgate, float *dup, const float *dout,
                          const float *gate, const float *up, int32_t N, int32_t I);
/* elementwise.cu: residual, accumulate, scale, sumsq, adamw, dropout, convert */
void cuda_residual_forward(void *ctx, float *out, const float *a, const float *b, uint64_t n);
void cuda_accumulate(void *ctx, float *y, const float *x, uint64_t n);
void cuda_scale(void *ctx, float *x, float s, uint64_t n);
double cuda_sumsq(void *ctx, const float *x, uint64_t n);
void cuda_adamw(void *ctx, float *param, const float *grad, float *m, float *v, uint64_t n,
                double lr, double beta1, double beta2, double eps, double weight_decay, int32_t t);
void cuda_dropout(void *ctx, float *out, const float *inp, uint64_t n, float p, uint64_t seed);
void cuda_convert(void *ctx, void *dst, int32_t dst_type, const void *src, int32_t src_type,
                  uint64_t n);
/* head.cu */
void cuda_head_forward(void *ctx, float *logp, float *lse, float *entropy, const float *hidden,
                       const float *w, const int32_t *targets, int32_t N, int32_t C, int32_t V,
                       float scale);
void cuda_head_backward(void *ctx, float *dhidden, float *dw, const float *dlogp,
                        const float *hidden, const float *w, const int32_t *targets,
                        const float *lse, int32_t N, int32_t C, int32_t V, float scale);
void cuda_head_backward_entropy(void *ctx, float *dhidden, float *dw, const float *dlogp,
                                const float *dentropy, const float *entropy, const float *hidden,
                                const float *w, const int32_t *targets, const float *lse,
                                int32_t N, int32_t C, int32_t V, float scale);
void cuda_head_forward_w(void *ctx, float *logp, float *lse, float *entropy, const float *hidden,
                         const void *w, int32_t wtype, const int32_t *targets, int32_t N,
                         int32_t C, int32_t V, float scale);
void cuda_head_backward_w(void *ctx, float *dhidden, const float *dlogp, const float *dentropy,
                          const float *entropy, const float *hidden, const void *w, int32_t wtype,
                          const int32_t *targets, const float *lse, int32_t N, int32_t C,
                          int32_t V, float scale);
/* rows.cu: mixture-of-experts routing */
void cuda_gather_rows(void *ctx, float *out, const float *inp, const int32_t *idx, int32_t M,
                      int32_t C);
void cuda_scatter_add_rows(void *ctx, float *out, const float *inp, const int32_t *idx,
                           const float *w, int32_t M, int32_t C);
void cuda_scatter_add_rows_backward(void *ctx, float *dinp, float *dw, const float *dout,
                                    const float *inp, const int32_t *idx, const float *w,
                                    int32_t M, int32_t C);
/* sample.cu: sampling on the device */
void cuda_sample_rows(void *ctx, int32_t *ids, float *logp, float *plogp, const float *logits,
                      const float *u, int32_t *hist, const int32_t *n_hist, int32_t H, int32_t R,
                      int32_t V, float temperature, int32_t top_k, float top_p, float min_p,
                      float repetition_penalty);

#ifdef __cplusplus
}
#endif
#endif /* GRPO_CUDA_BACKEND_H */
