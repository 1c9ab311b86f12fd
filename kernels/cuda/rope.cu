/*
 * rope.cu — rotary position embedding, split-halves (rotate_half) layout (grpo/ops.h,
 * kernels/cpu/rope.c). For head dim HD, h = HD/2 and i in [0,h):
 *   inv_freq[i] = 1 / theta^(2i/HD),  angle = pos * inv_freq[i]  (both rounded to fp32)
 *   out[i]   = x[i] cos - x[i+h] sin,   out[i+h] = x[i+h] cos + x[i] sin
 * Backward is the inverse rotation (angle negated). x is (N,NH,HD); out may equal inp.
 *
 * inv_freq is formed on the host by the CPU backend's very expression (host powf) and passed by
 * value in the launch, so both backends rotate by the same fp32 angles; only cosf/sinf may differ
 * in the last bit between the device's and the host's libm. One thread per (token, head, i) pair:
 * it reads x[i] and x[i+h] and writes both, so in place is safe.
 */
#include "kernel_util.h"

#define ROPE_MAX_HALF 256 /* HD <= 512 */

typedef struct rope_freqs {
    float inv_freq[ROPE_MAX_HALF];
} rope_freqs;

__global__ void rope_kernel(float *out, const float *inp, const int32_t *pos, int32_t N,
                            int32_t NH, int32_t half, rope_freqs f, float dir) {
    uint64_t total = (uint64_t)N * NH * half;
    for (uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t i = t % (uint64_t)half, row = t / (uint64_t)half; /* row = n * NH + head */
        uint64_t n = row / (uint64_t)NH;
        float angle = (float)pos[n] * f.inv_freq[i];
        float c = cosf(angle), s = dir * sinf(angle);
        const float *x = inp + row * 2 * half;
        float *o = out + row * 2 * half;
        float x1 = x[i], x2 = x[i + half];
        o[i] = x1 * c - x2 * s;
        o[i + half] = x2 * c + x1 * s;
    }
}

static void rope_rotate(cuda_ctx *ctx, float *out, const float *inp, const int32_t *pos,
                        int32_t N, int32_t NH, int32_t HD, float theta, float dir,
                        const char *op) {
    CUDA_REQUIRE(HD % 2 == 0, op, "head dim HD must be even");
    CUDA_REQUIRE(HD > 0 && HD <= 2 * ROPE_MAX_HALF, op, "head dim HD in [2, 512]");
    CUDA_REQUIRE(N >= 0 && NH >= 0, op, "N and NH must be >= 0");
    int32_t half = HD / 2;
    rope_freqs f;
    for (int32_t i = 0; i < half; i++)
        f.inv_freq[i] = 1.0f / powf(theta, (float)(2 * i) / (float)HD);
    uint64_t total = (uint64_t)N * NH * half;
    if (total == 0) return;
    GRPO_LAUNCH(rope_kernel, cuda_grid(total, CUDA_EW_THREADS), CUDA_EW_THREADS, 0, ctx->stream,
                out, inp, pos, N, NH, half, f, dir);
    CUDA_CHECK_LAUNCH(op);
}

void cuda_rope_forward(void *ctx, float *out, const float *inp, const int32_t *pos, int32_t N,
                       int32_t NH, int32_t HD, float theta) {
    rope_rotate((cuda_ctx *)ctx, out, inp, pos, N, NH, HD, theta, 1.0f, "rope_forward");
}

void cuda_rope_backward(void *ctx, float *dinp, const float *dout, const int32_t *pos, int32_t N,
                        int32_t NH, int32_t HD, float theta) {
    if (!dinp) return;
    rope_rotate((cuda_ctx *)ctx, dinp, dout, pos, N, NH, HD, theta, -1.0f, "rope_backward");
}
