/*
 * emu_selftest.cu — the kernels of emu_selftest.h, built as C++ on the CUDA host emulation.
 * Written as the .cu files of kernels/cuda are (compat.h only), so what passes here is what the
 * backend's kernels may rely on.
 */
#include "compat.h"

#include "emu_selftest.h"

#include <math.h>

/* ---- helpers: device buffers ----------------------------------------------------------------- */

static void *to_dev(const void *h, size_t bytes) {
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) return NULL;
    if (h) cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
    return d;
}

static void to_host(void *h, const void *d, size_t bytes) {
    cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost);
}

/* ---- block tree sum in dynamic shared memory ------------------------------------------------- */

static __global__ void block_sum_kernel(float *out, const float *x, int n, int barrier) {
    GRPO_SHARED_DYN(float, s);
    unsigned t = threadIdx.x;
    s[t] = x[(size_t)blockIdx.x * n + t];
    if (barrier) __syncthreads();
    for (unsigned stride = (unsigned)n / 2; stride > 0; stride /= 2) {
        if (t < stride) s[t] += s[t + stride];
        if (barrier) __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

int emu_block_sum(float *out, const float *x, int n, int blocks, int barrier) {
    float *dx = (float *)to_dev(x, sizeof(float) * n * blocks);
    float *dout = (float *)to_dev(NULL, sizeof(float) * blocks);
    GRPO_LAUNCH(block_sum_kernel, blocks, n, sizeof(float) * n, 0, dout, dx, n, barrier);
    int e = cudaGetLastError();
    to_host(out, dout, sizeof(float) * blocks);
    cudaFree(dx);
    cudaFree(dout);
    return e;
}

/* ---- warp sums combined through static shared memory ----------------------------------------- */

static __global__ void warp_block_sum_kernel(float *out, const float *x, int live) {
    __shared__ float warp_sums[32];
    unsigned t = threadIdx.x, lane = t % 32, warp = t / 32;
    if ((int)t >= live) return; /* returned threads count as arrived at every barrier */
    float v = grpo_warp_sum(x[t]);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        unsigned warps = ((unsigned)live + 31) / 32;
        float w = lane < warps ? warp_sums[lane] : 0.0f;
        w = grpo_warp_sum(w);
        if (lane == 0) out[0] = w;
    }
}

int emu_warp_block_sum(float *out, const float *x, int threads, int live) {
    float *dx = (float *)to_dev(x, sizeof(float) * threads);
    float *dout = (float *)to_dev(NULL, sizeof(float));
    GRPO_LAUNCH(warp_block_sum_kernel, 1, threads, 0, 0, dout, dx, live);
    int e = cudaGetLastError();
    to_host(out, dout, sizeof(float));
    cudaFree(dx);
    cudaFree(dout);
    return e;
}

/* ---- shuffles -------------------------------------------------------------------------------- */

static __global__ void shuffles_kernel(float *xor_sum, float *down_sum, float *bcast, int *rot,
                                       int *imax, float *half_sum, const float *x, const int *ix) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % 32;
    float v = x[i];
    int k = ix[i];
    xor_sum[i] = grpo_warp_sum(v);
    float d = v;
    for (int o = 16; o > 0; o >>= 1) d += __shfl_down_sync(0xffffffffu, d, o);
    down_sum[i] = d;
    bcast[i] = __shfl_sync(0xffffffffu, v, 5);
    rot[i] = __shfl_sync(0xffffffffu, k, (int)lane + 1);
    int m = k;
    for (int o = 16; o > 0; o >>= 1) {
        int other = __shfl_xor_sync(0xffffffffu, m, o);
        m = other > m ? other : m;
    }
    imax[i] = m;
    float h = v;
    for (int o = 8; o > 0; o >>= 1) h += __shfl_xor_sync(0xffffffffu, h, o, 16);
    half_sum[i] = h;
}

int emu_shuffles(float *xor_sum, float *down_sum, float *bcast, int *rot, int *imax,
                 float *half_sum, const float *x, const int *ix, int threads) {
    size_t fb = sizeof(float) * threads, ib = sizeof(int) * threads;
    float *dx = (float *)to_dev(x, fb), *dxor = (float *)to_dev(NULL, fb);
    float *ddown = (float *)to_dev(NULL, fb), *dbc = (float *)to_dev(NULL, fb);
    float *dhalf = (float *)to_dev(NULL, fb);
    int *dix = (int *)to_dev(ix, ib), *drot = (int *)to_dev(NULL, ib);
    int *dmax = (int *)to_dev(NULL, ib);
    /* two blocks, so that warps of different blocks are exercised too */
    int per = threads % 64 == 0 ? threads / 2 : threads;
    GRPO_LAUNCH(shuffles_kernel, threads / per, per, 0, 0, dxor, ddown, dbc, drot, dmax, dhalf,
                dx, dix);
    int e = cudaGetLastError();
    to_host(xor_sum, dxor, fb);
    to_host(down_sum, ddown, fb);
    to_host(bcast, dbc, fb);
    to_host(rot, drot, ib);
    to_host(imax, dmax, ib);
    to_host(half_sum, dhalf, fb);
    void *all[] = {dx, dxor, ddown, dbc, dhalf, dix, drot, dmax};
    for (void *p : all) cudaFree(p);
    return e;
}

/* ---- dynamic shared memory ------------------------------------------------------------------- */

static __global__ void dyn_shared_kernel(float *first, float *rev, const float *x, int n) {
    GRPO_SHARED_DYN(float, s);
    unsigned t = threadIdx.x;
    first[t] = s[t];
    s[t] = x[t];
    __syncthreads();
    rev[t] = s[n - 1 - (int)t];
}

int emu_dyn_shared(float *first, float *rev, const float *x, int n) {
    size_t fb = sizeof(float) * n;
    float *dx = (float *)to_dev(x, fb), *df = (float *)to_dev(NULL, fb);
    float *dr = (float *)to_dev(NULL, fb);
    GRPO_LAUNCH(dyn_shared_kernel, 1, n, fb, 0, df, dr, dx, n);
    int e = cudaGetLastError();
    to_host(first, df, fb);
    to_host(rev, dr, fb);
    cudaFree(dx);
    cudaFree(df);
    cudaFree(dr);
    return e;
}

/* ---- grid and block indices ------------------------------------------------------------------ */

static __global__ void grid_indices_kernel(int *out, int *dims) {
    unsigned bx = blockIdx.x, by = blockIdx.y, bz = blockIdx.z;
    unsigned tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
    unsigned block = (bz * gridDim.y + by) * gridDim.x + bx;
    unsigned g = block * blockDim.x * blockDim.y * blockDim.z +
                 (tz * blockDim.y + ty) * blockDim.x + tx;
    int *o = out + (size_t)g * 6;
    o[0] = (int)bx, o[1] = (int)by, o[2] = (int)bz, o[3] = (int)tx, o[4] = (int)ty,
    o[5] = (int)tz;
    if (g == 0) {
        dims[0] = (int)gridDim.x, dims[1] = (int)gridDim.y, dims[2] = (int)gridDim.z;
        dims[3] = (int)blockDim.x, dims[4] = (int)blockDim.y, dims[5] = (int)blockDim.z;
    }
}

int emu_grid_indices(int *out, int *dims, int gx, int gy, int gz, int bx, int by, int bz) {
    size_t n = (size_t)gx * gy * gz * bx * by * bz;
    int *dout = (int *)to_dev(NULL, 6 * sizeof(int) * n), *ddims = (int *)to_dev(NULL, 6 * 4);
    cudaMemsetAsync(dout, 0xff, 6 * sizeof(int) * n, 0); /* -1: never written */
    GRPO_LAUNCH(grid_indices_kernel, dim3(gx, gy, gz), dim3(bx, by, bz), 0, 0, dout, ddims);
    int e = cudaGetLastError();
    to_host(out, dout, 6 * sizeof(int) * n);
    to_host(dims, ddims, 6 * sizeof(int));
    cudaFree(dout);
    cudaFree(ddims);
    return e;
}

/* ---- atomics --------------------------------------------------------------------------------- */

static __global__ void atomics_kernel(int *olds, int *counts, float *fsum) {
    int g = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    olds[g] = atomicAdd(&counts[0], 1);
    atomicAdd(fsum, 0.5f);
    atomicMax(&counts[1], g);
}

int emu_atomics(int *olds, int *counts, float *fsum, int blocks, int threads) {
    size_t n = (size_t)blocks * threads;
    int *dolds = (int *)to_dev(NULL, sizeof(int) * n), *dcounts = (int *)to_dev(NULL, 8);
    float *dfsum = (float *)to_dev(NULL, 4);
    GRPO_LAUNCH(atomics_kernel, blocks, threads, 0, 0, dolds, dcounts, dfsum);
    int e = cudaGetLastError();
    to_host(olds, dolds, sizeof(int) * n);
    to_host(counts, dcounts, 8);
    to_host(fsum, dfsum, 4);
    cudaFree(dolds);
    cudaFree(dcounts);
    cudaFree(dfsum);
    return e;
}

/* ---- launch configuration checks ------------------------------------------------------------- */

static __global__ void count_kernel(int *ran) { atomicAdd(ran, 1); }

int emu_launch_config(int *ran, int *after, unsigned gx, unsigned bx, unsigned by,
                      unsigned shmem) {
    int *dran = (int *)to_dev(NULL, sizeof(int));
    GRPO_LAUNCH(count_kernel, gx, dim3(bx, by), shmem, 0, dran);
    int e = cudaGetLastError();
    *after = cudaGetLastError();
    to_host(ran, dran, sizeof(int));
    cudaFree(dran);
    return e;
}

const char *emu_error_string(int code) { return cudaGetErrorString((cudaError_t)code); }
