/*
 * emu_selftest.h — tiny kernels (emu_selftest.cu) that exercise the CUDA host emulation
 * (kernels/cuda/emu) for tests/test_cuda_emu.c. Each function copies its inputs to device
 * memory, launches, copies the results back and returns the cudaGetLastError() code of the
 * launch (0 = success). Built only under the emulation (C++ on the host compiler).
 */
#ifndef GRPO_TEST_EMU_SELFTEST_H
#define GRPO_TEST_EMU_SELFTEST_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[b] = sum of x[b*n .. b*n+n) by a tree in dynamic shared memory, one block of n threads
 * (n a power of two <= 1024) per row b of `blocks`; barrier = 0 leaves out the __syncthreads. */
int emu_block_sum(float *out, const float *x, int n, int blocks, int barrier);

/* The usual block reduction of the kernels: a warp sum (xor shuffles) per warp, the warps' sums
 * through a static __shared__ array and a barrier, then warp 0 sums those. Threads with index
 * >= live return before any barrier (they count as arrived). out[0] = sum of x[0..live). */
int emu_warp_block_sum(float *out, const float *x, int threads, int live);

/* Per lane of `threads` (a multiple of 32), with v = x[i] (float) and k = ix[i] (int):
 *   xor_sum[i]  = grpo_warp_sum(v)          (xor butterfly: every lane has its warp's sum)
 *   down_sum[i] = shfl_down tree of v        (lane 0 of each warp has the warp's sum)
 *   bcast[i]    = __shfl_sync(v, 5)          (lane 5's value)
 *   rot[i]      = __shfl_sync(k, lane + 1)   (int; lane 31 reads lane 0: src is taken mod 32)
 *   imax[i]     = xor butterfly max of k     (int shuffles)
 *   half_sum[i] = xor butterfly sum over the 16-lane half of v (width 16) */
int emu_shuffles(float *xor_sum, float *down_sum, float *bcast, int *rot, int *imax,
                 float *half_sum, const float *x, const int *ix, int threads);

/* Dynamic shared memory of n floats (one block of n threads): first[i] = what thread i read
 * from its slot before writing it (the emulation fills it with NaN), rev[i] = x[n-1-i] passed
 * through the shared array with a barrier. */
int emu_dyn_shared(float *first, float *rev, const float *x, int n);

/* A (gx,gy,gz) grid of (bx,by,bz) blocks: the thread with block-linear index g (blocks in x, y,
 * z order, threads likewise, as the thread computes it from its indices) writes out[6g..6g+6) =
 * blockIdx.xyz, threadIdx.xyz (out: 6 ints per thread, -1 where nothing was written), and
 * dims[0..5] = gridDim.xyz, blockDim.xyz as seen by the thread g = 0. */
int emu_grid_indices(int *out, int *dims, int gx, int gy, int gz, int bx, int by, int bz);

/* atomicAdd(int) of 1 per thread: olds (blocks*threads) are the old values; counts[0] the final
 * int sum, fsum[0] the float sum of 0.5 per thread, counts[1] atomicMax of the global index. */
int emu_atomics(int *olds, int *counts, float *fsum, int blocks, int threads);

/* A launch of a trivial kernel with the given configuration; *ran = number of threads that ran.
 * Returns cudaGetLastError() after it, and *after = cudaGetLastError() called once more. */
int emu_launch_config(int *ran, int *after, unsigned gx, unsigned bx, unsigned by,
                      unsigned shmem);

/* The error string of a runtime error code (cudaGetErrorString). */
const char *emu_error_string(int code);

#ifdef __cplusplus
}
#endif
#endif
