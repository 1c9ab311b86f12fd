/*
 * swiglu.cu — the gated MLP activation of Llama (grpo/ops.h, kernels/cpu/swiglu.c):
 *   out (N,I) = silu(gate) * up,  silu(g) = g * sig(g),  sig(g) = 1 / (1 + exp(-g))
 * backward (written; dgate/dup may alias gate/up, each element is read before it is written):
 *   dup   = dout * silu(gate)
 *   dgate = dout * up * sig(gate) * (1 + gate * (1 - sig(gate)))
 * Elementwise, grid-stride; expf is the device's full-precision one (the CPU's vector exp is
 * within 2 ulp of it).
 */
#include "kernel_util.h"

__global__ void swiglu_forward_kernel(float *out, const float *gate, const float *up,
                                      uint64_t n) {
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

__global__ void swiglu_backward_kernel(float *dgate, float *dup, const float *dout,
                                       const float *gate, const float *up, uint64_t n) {
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        float g = gate[i], u = up[i], d = dout[i], sig = 1.0f / (1.0f + expf(-g));
        if (dgate) dgate[i] = d * u * sig * (1.0f + g * (1.0f - sig));
        if (dup) dup[i] = d * g * sig;
    }
}

void cuda_swiglu_forward(void *ctx_, float *out, const float *gate, const float *up, int32_t N,
                         int32_t I) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    CUDA_REQUIRE(N >= 0 && I >= 0, "swiglu_forward", "N and I must be >= 0");
    uint64_t n = (uint64_t)N * I;
    if (n == 0) return;
    GRPO_LAUNCH(swiglu_forward_kernel, cuda_grid(n, CUDA_EW_THREADS), CUDA_EW_THREADS, 0,
                ctx->stream, out, gate, up, n);
    CUDA_CHECK_LAUNCH("swiglu_forward");
}

void cuda_swiglu_backward(void *ctx_, float *dgate, float *dup, const float *dout,
                          const float *gate, const float *up, int32_t N, int32_t I) {
    cuda_ctx *ctx = (cuda_ctx *)ctx_;
    CUDA_REQUIRE(N >= 0 && I >= 0, "swiglu_backward", "N and I must be >= 0");
    uint64_t n = (uint64_t)N * I;
    if ((!dgate && !dup) || n == 0) return;
    GRPO_LAUNCH(swiglu_backward_kernel, cuda_grid(n, CUDA_EW_THREADS), CUDA_EW_THREADS, 0,
                ctx->stream, dgate, dup, dout, gate, up, n);
    CUDA_CHECK_LAUNCH("swiglu_backward");
}
