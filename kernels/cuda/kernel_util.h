/*
 * kernel_util.h — what several kernels/cuda .cu files share (include after cuda_backend.h):
 * grid sizes for grid-stride loops, deterministic block reductions, and fp32 arithmetic that the
 * compiler may not fuse.
 *
 * Block reductions: every thread of a 1-D block whose size is a multiple of 32 must call them
 * (they hold __syncthreads); every thread gets the total. The order of the sums depends only on
 * blockDim, so a result has the same bits on every run.
 */
#ifndef GRPO_CUDA_KERNEL_UTIL_H
#define GRPO_CUDA_KERNEL_UTIL_H

#include "cuda_backend.h"

/* Threads per block of the elementwise kernels, and the most blocks a grid-stride loop gets
 * (enough to fill a large GPU several times over; more would only add scheduling). */
#define CUDA_EW_THREADS 256
#define CUDA_MAX_BLOCKS 4096u

/* Blocks of `threads` for a grid-stride loop over n items (n > 0). */
static inline unsigned cuda_grid(uint64_t n, unsigned threads) {
    unsigned b = cuda_blocks(n, threads);
    return b < CUDA_MAX_BLOCKS ? b : CUDA_MAX_BLOCKS;
}

/* The sum of v over the block (float; warp sums, then the warp totals by every warp). */
static __device__ __forceinline__ float grpo_block_sum(float v) {
    __shared__ float warp_tot[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = grpo_warp_sum(v);
    __syncthreads(); /* warp_tot may still be read by a previous call */
    if (lane == 0) warp_tot[warp] = v;
    __syncthreads();
    return grpo_warp_sum(lane < warps ? warp_tot[lane] : 0.0f);
}

/* The sum of v over a block of exactly CUDA_DSUM_THREADS threads, in double (shuffles are float
 * or int only, so a tree in shared memory). */
#define CUDA_DSUM_THREADS 256
static __device__ __forceinline__ double grpo_block_sum_double(double v) {
    __shared__ double tree[CUDA_DSUM_THREADS];
    __syncthreads(); /* tree may still be read by a previous call */
    tree[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = CUDA_DSUM_THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) tree[threadIdx.x] += tree[threadIdx.x + s];
        __syncthreads();
    }
    return tree[0];
}

/* rows.cu: out (M,C) = inp (rows of itype, GRPO_DTYPE_*)[idx], widened to fp32; `op` names the
 * caller in errors (gather_rows, embedding_forward, embedding_forward_w). */
void cuda_gather_rows_typed(cuda_ctx *ctx, float *out, const void *inp, int32_t itype,
                            const int32_t *idx, int32_t M, int32_t C, const char *op);

/* fp32 multiply and add, each rounded on its own: nvcc contracts a * b + c into one fma by
 * default, which changes the last bit; ops that promise the CPU backend's bits (adamw) use these.
 * The host compiler of the emulation targets baseline x86-64 (no fma), so plain operators. */
#if defined(__CUDACC__) && !defined(GRPO_CUDA_EMU)
#define CUDA_MUL_RN(a, b) __fmul_rn((a), (b))
#define CUDA_ADD_RN(a, b) __fadd_rn((a), (b))
#define CUDA_SUB_RN(a, b) __fsub_rn((a), (b))
#else
#define CUDA_MUL_RN(a, b) ((a) * (b))
#define CUDA_ADD_RN(a, b) ((a) + (b))
#define CUDA_SUB_RN(a, b) ((a) - (b))
#endif

#endif /* GRPO_CUDA_KERNEL_UTIL_H */
