/*
 * elementwise.cu — flat-array ops of grpo/ops.h on n elements (kernels/cpu/residual.c, adamw.c,
 * dropout.c, weights.c's convert), each a grid-stride loop:
 *   residual_forward: out = a + b     accumulate: y += x     scale: x *= s
 *   sumsq: sum of x^2 in double, returned to the host (so it syncs the stream): per-block double
 *     sums of a fixed grid, then one block adds those in order; the same bits on every run.
 *   adamw: PyTorch's AdamW in the CPU backend's fp32 operations, order and roundings (the
 *     scalars formed on the host in double by the same expressions), with every multiply and
 *     add rounded on its own (no fma contraction): the CPU backend's bits.
 *   dropout: the mask of grpo_dropout_keeps (its device twin below), out = inp / (1 - p) or 0.
 *   convert: fp32 <-> bf16 through compat.h's grpo_st_bf16 / grpo_ld_bf16 (ops.h's rounding).
 */
#include "kernel_util.h"

#define GRID_STRIDE(i, n)                                                                     \
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);              \
         i += (uint64_t)gridDim.x * blockDim.x)

#define EW_LAUNCH(kernel, n, op, ...)                                                         \
    do {                                                                                      \
        GRPO_LAUNCH(kernel, cuda_grid((n), CUDA_EW_THREADS), CUDA_EW_THREADS, 0, ctx->stream, \
                    __VA_ARGS__);                                                             \
        CUDA_CHECK_LAUNCH(op);                                                                \
    } while (0)

__global__ void residual_kernel(float *out, const float *a, const float *b, uint64_t n) {
    GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ void accumulate_kernel(float *y, const float *x, uint64_t n) {
    GRID_STRIDE(i, n) y[i] += x[i];
}

__global__ void scale_kernel(float *x, float s, uint64_t n) {
    GRID_STRIDE(i, n) x[i] *= s;
}

void cuda_residual_forward(void *ctx_, float *out, const float *a, const float *b, uint64_t n) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    if (n) EW_LAUNCH(residual_kernel, n, "residual_forward", out, a, b, n);
}

void cuda_accumulate(void *ctx_, float *y, const float *x, uint64_t n) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    if (n) EW_LAUNCH(accumulate_kernel, n, "accumulate", y, x, n);
}

void cuda_scale(void *ctx_, float *x, float s, uint64_t n) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    if (n) EW_LAUNCH(scale_kernel, n, "scale", x, s, n);
}

/* ---- sumsq ------------------------------------------------------------------------------- */

#define SUMSQ_MAX_BLOCKS 1024u
#define SUMSQ_PER_THREAD 8u /* elements per thread before a grid gets another block */

/* part[b] = sum over block b's grid-stride share of x^2, in double */
__global__ void sumsq_partial_kernel(double *part, const float *x, uint64_t n) {
    double acc = 0.0;
    GRID_STRIDE(i, n) acc += (double)x[i] * (double)x[i];
    double tot = grpo_block_sum_double(acc);
    if (threadIdx.x == 0) part[blockIdx.x] = tot;
}

/* *sum = the sum of part[0..blocks), one block: thread t adds parts t, t + 256, ... in order */
__global__ void sumsq_final_kernel(double *sum, const double *part, uint32_t blocks) {
    double acc = 0.0;
    for (uint32_t b = threadIdx.x; b < blocks; b += blockDim.x) acc += part[b];
    double tot = grpo_block_sum_double(acc);
    if (threadIdx.x == 0) *sum = tot;
}

double cuda_sumsq(void *ctx_, const float *x, uint64_t n) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    if (n == 0) return 0.0;
    uint64_t want = (n + CUDA_DSUM_THREADS * SUMSQ_PER_THREAD - 1) /
                    (CUDA_DSUM_THREADS * SUMSQ_PER_THREAD);
    uint32_t blocks = want < SUMSQ_MAX_BLOCKS ? (uint32_t)want : SUMSQ_MAX_BLOCKS;
    double *part = (double *)cuda_scratch(ctx, CUDA_SCRATCH_OP, blocks * sizeof(double));
    GRPO_LAUNCH(sumsq_partial_kernel, blocks, CUDA_DSUM_THREADS, 0, ctx->stream, part, x, n);
    CUDA_CHECK_LAUNCH("sumsq");
    GRPO_LAUNCH(sumsq_final_kernel, 1, CUDA_DSUM_THREADS, 0, ctx->stream, ctx->d_sum, part,
                blocks);
    CUDA_CHECK_LAUNCH("sumsq");
    double total = 0.0;
    CUDA_CHECK(cudaMemcpyAsync(&total, ctx->d_sum, sizeof total, cudaMemcpyDeviceToHost,
                               ctx->stream),
               "sumsq");
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream), "sumsq");
    return total;
}

/* ---- adamw ------------------------------------------------------------------------------- */

/* The fp32 scalars of one step, as kernels/cpu/adamw.c forms them. */
typedef struct adamw_scalars {
    float decay, w1, b2, w2, step_size, bc2_sqrt, eps;
} adamw_scalars;

__global__ void adamw_kernel(float *param, const float *grad, float *m, float *v, uint64_t n,
                             adamw_scalars k) {
    GRID_STRIDE(i, n) {
        float g = grad[i], p = CUDA_MUL_RN(param[i], k.decay);
        float mi = CUDA_ADD_RN(m[i], CUDA_MUL_RN(k.w1, CUDA_SUB_RN(g, m[i])));
        float vi = CUDA_ADD_RN(CUDA_MUL_RN(v[i], k.b2), CUDA_MUL_RN(CUDA_MUL_RN(k.w2, g), g));
        m[i] = mi;
        v[i] = vi;
        float denom = CUDA_ADD_RN(sqrtf(vi) / k.bc2_sqrt, k.eps);
        param[i] = CUDA_SUB_RN(p, CUDA_MUL_RN(k.step_size, mi / denom));
    }
}

void cuda_adamw(void *ctx_, float *param, const float *grad, float *m, float *v, uint64_t n,
                double lr, double beta1, double beta2, double eps, double weight_decay,
                int32_t t) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    CUDA_REQUIRE(t >= 1, "adamw", "step t must be >= 1");
    adamw_scalars k;
    k.decay = (float)(1.0 - lr * weight_decay);
    k.w1 = (float)(1.0 - beta1);
    k.b2 = (float)beta2;
    k.w2 = (float)(1.0 - beta2);
    k.step_size = (float)(lr / (1.0 - pow(beta1, (double)t)));
    k.bc2_sqrt = (float)sqrt(1.0 - pow(beta2, (double)t));
    k.eps = (float)eps;
    if (n) EW_LAUNCH(adamw_kernel, n, "adamw", param, grad, m, v, n, k);
}

/* ---- dropout ----------------------------------------------------------------------------- */

/* grpo/ops.h's grpo_dropout_keeps (host-only there), the same integer steps on the device:
 * a splitmix64 hash of seed and i, its top 24 bits as u in [0, 1) (exact in fp32), kept when
 * u >= p. test_cuda_ops checks the masks are equal. */
static __device__ __forceinline__ int cuda_dropout_keeps(uint64_t seed, uint64_t i, float p) {
    uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f) >= p;
}

__global__ void dropout_kernel(float *out, const float *inp, uint64_t n, float p, float scale,
                               uint64_t seed) {
    GRID_STRIDE(i, n) out[i] = cuda_dropout_keeps(seed, i, p) ? inp[i] * scale : 0.0f;
}

void cuda_dropout(void *ctx_, float *out, const float *inp, uint64_t n, float p, uint64_t seed) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    CUDA_REQUIRE(p >= 0.0f && p < 1.0f, "dropout", "p in [0, 1)");
    if (n) EW_LAUNCH(dropout_kernel, n, "dropout", out, inp, n, p, 1.0f / (1.0f - p), seed);
}

/* ---- convert ----------------------------------------------------------------------------- */

__global__ void f32_to_bf16_kernel(uint16_t *dst, const float *src, uint64_t n) {
    GRID_STRIDE(i, n) dst[i] = grpo_st_bf16(src[i]);
}

__global__ void bf16_to_f32_kernel(float *dst, const uint16_t *src, uint64_t n) {
    GRID_STRIDE(i, n) dst[i] = grpo_ld_bf16(src[i]);
}

void cuda_convert(void *ctx_, void *dst, int32_t dst_type, const void *src, int32_t src_type,
                  uint64_t n) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    CUDA_REQUIRE(grpo_dtype_size(dst_type) && grpo_dtype_size(src_type), "convert",
                 "unknown dtype");
    if (n == 0) return;
    if (dst_type == src_type)
        CUDA_CHECK(cudaMemcpyAsync(dst, src, n * grpo_dtype_size(dst_type),
                                   cudaMemcpyDeviceToDevice, ctx->stream),
                   "convert");
    else if (dst_type == GRPO_DTYPE_F32)
        EW_LAUNCH(bf16_to_f32_kernel, n, "convert", (float *)dst, (const uint16_t *)src, n);
    else
        EW_LAUNCH(f32_to_bf16_kernel, n, "convert", (uint16_t *)dst, (const float *)src, n);
}
