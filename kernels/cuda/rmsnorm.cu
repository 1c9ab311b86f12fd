/*
 * rmsnorm.cu — RMSNorm over the last dim, fp32 throughout (grpo/ops.h, kernels/cpu/rmsnorm.c):
 *   rstd (N) = 1 / sqrt(mean_c inp^2 + eps);  out (N,C) = (inp * rstd) * w (C)
 * backward, with g = dout * w:
 *   dinp (N,C) = rstd * g - inp * rstd^3 * mean_c(g * inp)   (written; may alias dout)
 *   dw (C)    += sum over N of dout * inp * rstd             (accumulated)
 * Forward and dinp: one block per row, the row's sums reduced across the block. dw: a column
 * reduction over rows in two stages with no atomics, as the CPU does it: blocks of RMS_ROWS rows
 * give a partial (C) each (one thread per column, rows in order), then one thread per column adds
 * the partials in block order (deterministic, and the CPU's order).
 */
#include "kernel_util.h"

#define RMS_THREADS 256 /* the most threads per row block */
#define RMS_ROWS 32     /* rows per dw partial (as the CPU backend) */
#define RMS_COLS 128    /* columns per dw block */

/* Threads for a row of C: C rounded up to whole warps, at most RMS_THREADS (a short row leaves
 * no idle warps). */
static unsigned rms_row_threads(int32_t C) {
    unsigned t = ((unsigned)C + 31u) / 32u * 32u;
    return t < RMS_THREADS ? t : RMS_THREADS;
}

__global__ void rmsnorm_forward_kernel(float *out, float *rstd, const float *inp, const float *w,
                                       int32_t C, float eps) {
    int64_t n = blockIdx.x;
    const float *x = inp + n * C;
    float *o = out + n * C;
    float ss = 0.0f;
    for (int32_t c = (int32_t)threadIdx.x; c < C; c += (int32_t)blockDim.x) ss += x[c] * x[c];
    ss = grpo_block_sum(ss);
    float r = 1.0f / sqrtf(ss / (float)C + eps);
    for (int32_t c = (int32_t)threadIdx.x; c < C; c += (int32_t)blockDim.x)
        o[c] = (x[c] * r) * w[c];
    if (rstd && threadIdx.x == 0) rstd[n] = r;
}

void cuda_rmsnorm_forward(void *ctx_, float *out, float *rstd, const float *inp, const float *w,
                          int32_t N, int32_t C, float eps) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    CUDA_REQUIRE(N >= 0 && C >= 0, "rmsnorm_forward", "N and C must be >= 0");
    if (N == 0 || C == 0) return;
    GRPO_LAUNCH(rmsnorm_forward_kernel, (unsigned)N, rms_row_threads(C), 0, ctx->stream, out,
                rstd, inp, w, C, eps);
    CUDA_CHECK_LAUNCH("rmsnorm_forward");
}

/* part (blocks, C): part[b][c] = sum over rows n of block b of dout * inp * rstd, in row order.
 * grid (column tiles, row blocks). */
__global__ void rmsnorm_dw_partial_kernel(float *part, const float *dout, const float *inp,
                                          const float *rstd, int32_t N, int32_t C) {
    int32_t c = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x), b = (int32_t)blockIdx.y;
    if (c >= C) return;
    int32_t n0 = b * RMS_ROWS, n1 = n0 + RMS_ROWS < N ? n0 + RMS_ROWS : N;
    float acc = 0.0f;
    for (int32_t n = n0; n < n1; n++) {
        int64_t i = (int64_t)n * C + c;
        acc += dout[i] * inp[i] * rstd[n];
    }
    part[(int64_t)b * C + c] = acc;
}

/* dw[c] += the partials of column c, in block order. */
__global__ void rmsnorm_dw_final_kernel(float *dw, const float *part, int32_t blocks, int32_t C) {
    int32_t c = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (c >= C) return;
    float acc = 0.0f;
    for (int32_t b = 0; b < blocks; b++) acc += part[(int64_t)b * C + c];
    dw[c] += acc;
}

__global__ void rmsnorm_dinp_kernel(float *dinp, const float *dout, const float *inp,
                                    const float *w, const float *rstd, int32_t C) {
    int64_t n = blockIdx.x;
    const float *x = inp + n * C, *d = dout + n * C;
    float *dx = dinp + n * C, r = rstd[n], dot = 0.0f;
    for (int32_t c = (int32_t)threadIdx.x; c < C; c += (int32_t)blockDim.x)
        dot += d[c] * w[c] * x[c];
    dot = grpo_block_sum(dot); /* every read of d for dot precedes the writes (dinp may be dout) */
    float k = r * r * r * dot / (float)C;
    for (int32_t c = (int32_t)threadIdx.x; c < C; c += (int32_t)blockDim.x)
        dx[c] = r * w[c] * d[c] - x[c] * k;
}

void cuda_rmsnorm_backward(void *ctx_, float *dinp, float *dw, const float *dout,
                           const float *inp, const float *w, const float *rstd, int32_t N,
                           int32_t C) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    CUDA_REQUIRE(N >= 0 && C >= 0, "rmsnorm_backward", "N and C must be >= 0");
    if ((!dinp && !dw) || N == 0 || C == 0) return;
    if (dw) { /* before dinp, which may overwrite dout */
        int32_t blocks = (N + RMS_ROWS - 1) / RMS_ROWS;
        CUDA_REQUIRE(blocks <= 65535, "rmsnorm_backward", "N <= 65535 * 32 rows (grid y)");
        float *part = (float *)cuda_scratch(ctx, CUDA_SCRATCH_OP,
                                            (uint64_t)blocks * C * sizeof(float));
        dim3 grid(cuda_blocks((uint64_t)C, RMS_COLS), (unsigned)blocks);
        GRPO_LAUNCH(rmsnorm_dw_partial_kernel, grid, RMS_COLS, 0, ctx->stream, part, dout, inp,
                    rstd, N, C);
        CUDA_CHECK_LAUNCH("rmsnorm_backward");
        GRPO_LAUNCH(rmsnorm_dw_final_kernel, cuda_blocks((uint64_t)C, RMS_COLS), RMS_COLS, 0,
                    ctx->stream, dw, part, blocks, C);
        CUDA_CHECK_LAUNCH("rmsnorm_backward");
    }
    if (dinp) {
        GRPO_LAUNCH(rmsnorm_dinp_kernel, (unsigned)N, rms_row_threads(C), 0, ctx->stream, dinp,
                    dout, inp, w, rstd, C);
        CUDA_CHECK_LAUNCH("rmsnorm_backward");
    }
}
