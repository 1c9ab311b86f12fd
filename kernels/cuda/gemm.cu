/*
 * gemm.cu — cuda_gemm (the one matrix product of the backend) and the linear-layer ops.
 *   forward:  out (N,OC) = inp (N,IC) @ w (OC,IC)^T + bias (OC)
 *   backward: dinp (N,IC) = dout (N,OC) @ w (OC,IC)          (written)
 *             dw (OC,IC) += dout (N,OC)^T @ inp (N,IC)        (accumulated: beta = 1)
 *             dbias (OC) += sum over N of dout (N,OC)         (accumulated, fixed order)
 *   *_w: the same for a frozen weight held as wtype (no dw, no dbias).
 *
 * cuda_gemm takes row-major operands as the CPU backend's cpu_sgemm does. cuBLAS is
 * column-major, and a row-major (R,C) buffer read column-major is its transpose, so
 * C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T: B and A swap places, their transpose
 * flags and leading dimensions unchanged. Operands of a type other than the product's are
 * converted into scratch first (packed, so their leading dimension becomes their width):
 *   precision f32: the product is fp32; a bf16 operand (a frozen weight) is widened (exact);
 *   precision bf16: the product is bf16 x bf16 with fp32 accumulate (cublasGemmEx,
 *     CUBLAS_COMPUTE_32F); an fp32 operand is rounded to bf16 (nearest even), PyTorch autocast.
 * Under the emulation the same conversion kernels run, then bf16 operands are widened to fp32
 * and OpenBLAS's sgemm multiplies (its fp32 sums of the bf16 values: cuBLAS's up to order).
 */
#include "cuda_backend.h"

#ifdef GRPO_CUDA_EMU
#include <cblas.h>
#undef I /* <complex.h>'s, which would rename ops.h's intermediate size */
#else
#include <cublas_v2.h>
#endif

enum { CONVERT_THREADS = 256, CONVERT_MAX_BLOCKS = 4096 };

/* dst (rows, cols) packed, of dtype = src (rows, cols) with row stride ld, of stype, converted
 * as ops.h's convert does (fp32 -> bf16 rounds to nearest even; bf16 -> fp32 is exact). */
static __global__ void convert_2d_kernel(void *dst, int32_t dtype, const void *src, int32_t stype,
                                         int32_t rows, int32_t cols, int32_t ld) {
    uint64_t n = (uint64_t)rows * (uint64_t)cols;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        uint64_t at = i / (uint64_t)cols * (uint64_t)ld + i % (uint64_t)cols;
        float x = stype == GRPO_DTYPE_BF16 ? grpo_ld_bf16(((const uint16_t *)src)[at])
                                           : ((const float *)src)[at];
        if (dtype == GRPO_DTYPE_BF16)
            ((uint16_t *)dst)[i] = grpo_st_bf16(x);
        else
            ((float *)dst)[i] = x;
    }
}

static void convert_2d(cuda_ctx *ctx, void *dst, int32_t dtype, const void *src, int32_t stype,
                       int32_t rows, int32_t cols, int32_t ld) {
    uint64_t n = (uint64_t)rows * (uint64_t)cols;
    unsigned blocks = cuda_blocks(n, CONVERT_THREADS);
    if (blocks > CONVERT_MAX_BLOCKS) blocks = CONVERT_MAX_BLOCKS;
    GRPO_LAUNCH(convert_2d_kernel, blocks, CONVERT_THREADS, 0, ctx->stream, dst, dtype, src,
                stype, rows, cols, ld);
    CUDA_CHECK_LAUNCH("gemm (operand conversion)");
}

/* An operand stored as (rows, cols) with row stride *ld, of xtype, as the product's type
 * `want`: x itself when it already is, else a packed copy in scratch slot `slot` (then *ld =
 * cols). Under the emulation the result is always fp32 (sgemm), bf16 values widened. */
static const void *operand(cuda_ctx *ctx, int slot, const void *x, int32_t xtype, int32_t want,
                           int32_t rows, int32_t cols, int32_t *ld) {
    uint64_t n = (uint64_t)rows * (uint64_t)cols;
#ifdef GRPO_CUDA_EMU
    if (xtype == GRPO_DTYPE_F32 && want == GRPO_DTYPE_F32) return x;
    uint64_t half = (n * 2 + 255) / 256 * 256; /* the bf16 copy, then the fp32 one */
    unsigned char *buf = (unsigned char *)cuda_scratch(ctx, slot, half + n * 4);
#else
    if (xtype == want) return x;
    unsigned char *buf = (unsigned char *)cuda_scratch(ctx, slot, n * grpo_dtype_size(want));
#endif
    const void *cur = x;
    if (xtype != want) {
        convert_2d(ctx, buf, want, x, xtype, rows, cols, *ld);
        cur = buf;
        *ld = cols;
    }
#ifdef GRPO_CUDA_EMU
    if (want == GRPO_DTYPE_BF16) { /* cur holds bf16 values: widen them for sgemm */
        convert_2d(ctx, buf + half, GRPO_DTYPE_F32, cur, GRPO_DTYPE_BF16, rows, cols, *ld);
        cur = buf + half;
        *ld = cols;
    }
#endif
    return cur;
}

/* C (M,N) *= beta: the product of an empty sum (K = 0), which BLAS would refuse as lda = 0. */
static __global__ void scale_2d_kernel(float *c, float beta, int32_t M, int32_t N, int32_t ldc) {
    uint64_t n = (uint64_t)M * (uint64_t)N;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float *p = c + i / (uint64_t)N * (uint64_t)ldc + i % (uint64_t)N;
        *p = beta == 0.0f ? 0.0f : beta * *p; /* beta 0 overwrites NaN, as BLAS does */
    }
}

void cuda_gemm(cuda_ctx *ctx, int trans_a, int trans_b, int32_t M, int32_t N, int32_t K,
               float alpha, const void *A, int32_t atype, int32_t lda, const void *B,
               int32_t btype, int32_t ldb, float beta, float *C, int32_t ldc) {
    CUDA_REQUIRE(M >= 0 && N >= 0 && K >= 0, "gemm", "negative dimension");
    CUDA_REQUIRE(grpo_dtype_size(atype) && grpo_dtype_size(btype), "gemm", "unknown dtype");
    if (M == 0 || N == 0) return;
    if (K == 0) {
        unsigned blocks = cuda_blocks((uint64_t)M * N, CONVERT_THREADS);
        if (blocks > CONVERT_MAX_BLOCKS) blocks = CONVERT_MAX_BLOCKS;
        GRPO_LAUNCH(scale_2d_kernel, blocks, CONVERT_THREADS, 0, ctx->stream, C, beta, M, N,
                    ldc);
        CUDA_CHECK_LAUNCH("gemm (K = 0)");
        return;
    }
    int32_t want = ctx->precision == GRPO_DTYPE_BF16 ? GRPO_DTYPE_BF16 : GRPO_DTYPE_F32;
    /* stored shapes: A is (M,K), or (K,M) when transposed; B is (K,N), or (N,K) */
    const void *a = operand(ctx, CUDA_SCRATCH_GEMM_A, A, atype, want, trans_a ? K : M,
                            trans_a ? M : K, &lda);
    const void *b = operand(ctx, CUDA_SCRATCH_GEMM_B, B, btype, want, trans_b ? N : K,
                            trans_b ? K : N, &ldb);
#ifdef GRPO_CUDA_EMU
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream), "gemm");
    const void *operands[] = {a, b, C}; /* cuBLAS's operands are device memory too */
    for (int i = 0; i < 3; i++) grpo_emu_check_device("gemm (A, B, C)", i, operands[i]);
    grpo_emu_device_begin(); /* sgemm stands in for the device here (emu.h: strict mode) */
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, (const float *)a, lda,
                (const float *)b, ldb, beta, C, ldc);
    grpo_emu_device_end();
#else
    cudaDataType t = want == GRPO_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasStatus_t s = cublasGemmEx(
        (cublasHandle_t)ctx->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
        trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, b, t, ldb, a, t, lda, &beta, C,
        CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS)
        cuda_check_failed(__FILE__, __LINE__, "gemm (cublasGemmEx)", cublasGetStatusString(s));
#endif
}

/* ---- bias -------------------------------------------------------------------------------- */

/* out (N,OC) = bias in every row: the GEMM then adds the product (beta = 1). */
static __global__ void bias_rows_kernel(float *out, const float *bias, int32_t N, int32_t OC) {
    uint64_t n = (uint64_t)N * (uint64_t)OC;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = bias[i % (uint64_t)OC];
}

enum { BIAS_COLS = 32, BIAS_ROW_GROUPS = 8 };

/* dbias (OC) += column sums of dout (N,OC). Block (32, 8): thread (x, y) sums rows y, y+8, ...
 * of column blockIdx.x*32+x; the 8 partial sums are then added in order of y, so the result
 * does not depend on scheduling (no float atomics). */
static __global__ void bias_backward_kernel(float *dbias, const float *dout, int32_t N,
                                            int32_t OC) {
    __shared__ float part[BIAS_ROW_GROUPS][BIAS_COLS];
    int32_t col = (int32_t)(blockIdx.x * BIAS_COLS + threadIdx.x);
    float acc = 0.0f;
    if (col < OC)
        for (int32_t r = (int32_t)threadIdx.y; r < N; r += BIAS_ROW_GROUPS)
            acc += dout[(uint64_t)r * (uint64_t)OC + (uint64_t)col];
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && col < OC) {
        float sum = 0.0f;
        for (int g = 0; g < BIAS_ROW_GROUPS; g++) sum += part[g][threadIdx.x];
        dbias[col] += sum;
    }
}

static void bias_forward(cuda_ctx *ctx, float *out, const float *bias, int32_t N, int32_t OC) {
    unsigned blocks = cuda_blocks((uint64_t)N * OC, CONVERT_THREADS);
    if (blocks > CONVERT_MAX_BLOCKS) blocks = CONVERT_MAX_BLOCKS;
    GRPO_LAUNCH(bias_rows_kernel, blocks, CONVERT_THREADS, 0, ctx->stream, out, bias, N, OC);
    CUDA_CHECK_LAUNCH("matmul_forward (bias)");
}

/* ---- the ops ----------------------------------------------------------------------------- */

static void matmul_forward_typed(cuda_ctx *ctx, float *out, const float *inp, const void *w,
                                 int32_t wtype, const float *bias, int32_t N, int32_t IC,
                                 int32_t OC) {
    CUDA_REQUIRE(N >= 0 && IC >= 0 && OC >= 0, "matmul_forward", "negative dimension");
    if (N == 0 || OC == 0) return;
    if (bias) bias_forward(ctx, out, bias, N, OC);
    cuda_gemm(ctx, 0, 1, N, OC, IC, 1.0f, inp, GRPO_DTYPE_F32, IC, w, wtype, IC,
              bias ? 1.0f : 0.0f, out, OC);
}

void cuda_matmul_forward(void *ctx, float *out, const float *inp, const float *w,
                         const float *bias, int32_t N, int32_t IC, int32_t OC) {
    matmul_forward_typed((cuda_ctx *)ctx, out, inp, w, GRPO_DTYPE_F32, bias, N, IC, OC);
}

void cuda_matmul_backward(void *ctx_, float *dinp, float *dw, float *dbias, const float *dout,
                          const float *inp, const float *w, int32_t N, int32_t IC, int32_t OC) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    CUDA_REQUIRE(N >= 0 && IC >= 0 && OC >= 0, "matmul_backward", "negative dimension");
    if (N == 0 || IC == 0 || OC == 0) {
        if (dinp && N > 0 && IC > 0) cuda_zero(ctx, dinp, (uint64_t)N * IC * sizeof(float));
        return;
    }
    if (dinp)
        cuda_gemm(ctx, 0, 0, N, IC, OC, 1.0f, dout, GRPO_DTYPE_F32, OC, w, GRPO_DTYPE_F32, IC,
                  0.0f, dinp, IC);
    if (dw)
        cuda_gemm(ctx, 1, 0, OC, IC, N, 1.0f, dout, GRPO_DTYPE_F32, OC, inp, GRPO_DTYPE_F32, IC,
                  1.0f, dw, IC);
    if (dbias) {
        dim3 block(BIAS_COLS, BIAS_ROW_GROUPS);
        GRPO_LAUNCH(bias_backward_kernel, cuda_blocks((uint64_t)OC, BIAS_COLS), block, 0,
                    ctx->stream, dbias, dout, N, OC);
        CUDA_CHECK_LAUNCH("matmul_backward (dbias)");
    }
}

void cuda_matmul_forward_w(void *ctx, float *out, const float *inp, const void *w, int32_t wtype,
                           const float *bias, int32_t N, int32_t IC, int32_t OC) {
    CUDA_REQUIRE(grpo_dtype_size(wtype) != 0, "matmul_forward_w", "unknown weight dtype");
    matmul_forward_typed((cuda_ctx *)ctx, out, inp, w, wtype, bias, N, IC, OC);
}

void cuda_matmul_backward_w(void *ctx_, float *dinp, const float *dout, const void *w,
                            int32_t wtype, int32_t N, int32_t IC, int32_t OC) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    CUDA_REQUIRE(grpo_dtype_size(wtype) != 0, "matmul_backward_w", "unknown weight dtype");
    CUDA_REQUIRE(N >= 0 && IC >= 0 && OC >= 0, "matmul_backward_w", "negative dimension");
    if (N == 0 || IC == 0) return;
    /* OC = 0 is an empty sum: cuda_gemm's K = 0 path writes zeros */
    cuda_gemm(ctx, 0, 0, N, IC, OC, 1.0f, dout, GRPO_DTYPE_F32, OC, w, wtype, IC, 0.0f, dinp, IC);
}
