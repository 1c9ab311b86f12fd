/*
 * compat.h — the one header every .cu file of kernels/cuda includes first. It lets the same source
 * build two ways:
 *
 *   nvcc (__CUDACC__): real CUDA. The runtime, bf16 and cuBLAS headers; GRPO_LAUNCH is <<<>>>.
 *   host emulation (GRPO_CUDA_EMU, compiled as C++ by the host compiler): kernels/cuda/emu/emu.h
 *     runs every CUDA thread of a block as a fiber on the calling CPU thread, blocks one after
 *     another, so the kernels' logic (indexing, barriers, shuffles, shared memory) is exercised
 *     by the op parity tests in CI, where no GPU exists.
 *
 * What a kernel source may use (the emulation provides exactly this; anything else is a build
 * error under GRPO_CUDA_EMU, which is the point):
 *   - __global__, __device__, __host__, __forceinline__, __restrict__, __shared__ (static
 *     arrays in a kernel or __device__ function), GRPO_SHARED_DYN(type, name) for the dynamic
 *     shared memory a launch sizes;
 *   - threadIdx, blockIdx, blockDim, gridDim (.x .y .z), dim3, warpSize (32);
 *   - __syncthreads(); __shfl_xor_sync, __shfl_down_sync, __shfl_sync (full-mask, float or int);
 *   - atomicAdd(float *, float), atomicAdd(int *, int), atomicMax(int *, int);
 *   - expf, logf, sqrtf, rsqrtf, fmaxf, fminf, fabsf, tanhf, powf, __expf, __logf, INFINITY,
 *     __float_as_uint, __uint_as_float, __int_as_float, __float_as_int;
 *   - bf16 as uint16_t storage only, through grpo_ld_bf16 / grpo_st_bf16 below (no __nv_bfloat16
 *     arithmetic in kernels: the math is fp32);
 *   - runtime: cudaMalloc, cudaFree, cudaMemcpyAsync, cudaMemsetAsync, cudaMemcpy,
 *     cudaStreamCreateWithFlags, cudaStreamDestroy, cudaStreamSynchronize, cudaGetLastError,
 *     cudaGetErrorString, cudaGetDeviceCount, cudaSetDevice, cudaGetDevice,
 *     cudaDeviceGetAttribute, cudaMemGetInfo, cudaMemcpyHostToDevice/DeviceToHost/
 *     DeviceToDevice/Default, cudaStreamNonBlocking, cudaSuccess, cudaError_t, cudaStream_t;
 *   - launches only through GRPO_LAUNCH (never <<< >>> directly), then CUDA_CHECK_LAUNCH(op).
 * cuBLAS is never called by a kernel file: matmuls go through cuda_gemm (cuda_backend.h), which is
 * cuBLAS under nvcc and OpenBLAS sgemm under the emulation.
 */
#ifndef GRPO_CUDA_COMPAT_H
#define GRPO_CUDA_COMPAT_H

#include <stdint.h>

#if defined(__CUDACC__) && !defined(GRPO_CUDA_EMU)
#include <cuda_runtime.h>
#include <math.h>

#define GRPO_LAUNCH(kernel, grid, block, shmem, stream, ...)                                      \
    kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)
#define GRPO_SHARED_DYN(type, name) extern __shared__ type name[]

#else /* host emulation */
#ifndef GRPO_CUDA_EMU
#define GRPO_CUDA_EMU 1
#endif
#include "emu/emu.h"
#endif

/* bf16 storage <-> fp32, as grpo/ops.h's grpo_bf16_from_f32/_to_f32 (round to nearest even,
 * NaN stays NaN), usable in device code. */
static __device__ __forceinline__ float grpo_ld_bf16(uint16_t h) {
    return __uint_as_float((uint32_t)h << 16);
}
static __device__ __forceinline__ uint16_t grpo_st_bf16(float x) {
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* Warp reductions over the 32 lanes (every lane gets the result). */
static __device__ __forceinline__ float grpo_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ float grpo_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

#endif /* GRPO_CUDA_COMPAT_H */
