/*
 * emu.h — the host emulation of the CUDA subset compat.h allows (GRPO_CUDA_EMU, C++17 by the
 * host compiler; emu.cpp holds the scheduler and the runtime).
 *
 * Execution model: a launch runs synchronously on the calling CPU thread, its blocks one after
 * another. Each CUDA thread of a block runs on a fiber (its own stack); a fiber runs threads to
 * completion one after another and only gives up the CPU at a barrier, so a kernel without
 * barriers runs all its threads back to back on one fiber. At a barrier the thread's fiber is
 * parked and the scheduler starts the next thread on another fiber:
 *   __syncthreads     waits for every thread of the block that has not returned;
 *   warp shuffles     each lane writes its value to a per-warp slot, waits for every lane of its
 *                     warp, then reads its source lane's slot. Full-mask only (the mask is not
 *                     read). Stricter than a GPU, where these are undefined, the process stops
 *                     with a message when a lane returns while others of its warp shuffle, or a
 *                     shuffle reads a lane the block does not have (a block not whole warps).
 * Because fibers are cooperative, atomics are plain read-modify-writes. `__shared__` is `static`:
 * blocks run one at a time, so one block's threads share the variable (it keeps the previous
 * block's values, where a GPU's are undefined: reading before writing is not caught for static
 * shared memory). Blocks run on the calling thread only (the backend's threads option is not
 * used). The dynamic shared
 * memory of a launch (GRPO_SHARED_DYN) is filled with 0xff bytes (NaN as floats) before each
 * block: a kernel must not read it before writing it, as on a GPU.
 * Launch checks as CUDA's: more than 1024 threads per block, a block dimension over
 * (1024, 1024, 64), a grid over (2^31-1, 65535, 65535), an empty grid or block, or more than
 * 48 KiB of dynamic shared memory set cudaErrorInvalidConfiguration / cudaErrorInvalidValue for
 * cudaGetLastError and run nothing.
 */
#ifndef GRPO_CUDA_EMU_H
#define GRPO_CUDA_EMU_H

#ifndef __cplusplus
#error "kernels/cuda/emu/emu.h is C++: compile the .cu sources as C++ (-x c++) with GRPO_CUDA_EMU"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

/* ---- qualifiers ----------------------------------------------------------------------------- */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static

/* ---- index types and the current thread's indices -------------------------------------------- */
struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

/* What the running CUDA thread sees; the scheduler keeps it current across fiber switches. */
struct grpo_emu_view {
    uint3 thread_idx, block_idx;
    dim3 block_dim, grid_dim;
};
extern "C" grpo_emu_view *grpo_emu_view_now(void);

#define threadIdx (grpo_emu_view_now()->thread_idx)
#define blockIdx (grpo_emu_view_now()->block_idx)
#define blockDim (grpo_emu_view_now()->block_dim)
#define gridDim (grpo_emu_view_now()->grid_dim)
static constexpr int warpSize = 32;

/* ---- barriers, shuffles, dynamic shared memory ------------------------------------------------ */
extern "C" void grpo_emu_syncthreads(void);
/* Writes this lane's 32-bit value, waits for the warp, returns lane src's value (src outside the
 * warp's lanes reads its own value, as CUDA's out-of-range shuffles do). */
extern "C" uint32_t grpo_emu_shfl(uint32_t v, int mode, int arg, int width);
extern "C" void *grpo_emu_dyn_shared(void);
enum { GRPO_EMU_SHFL_IDX, GRPO_EMU_SHFL_XOR, GRPO_EMU_SHFL_DOWN };

static inline void __syncthreads(void) { grpo_emu_syncthreads(); }

static inline uint32_t grpo_emu_f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float grpo_emu_u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline unsigned __float_as_uint(float f) { return grpo_emu_f2u(f); }
static inline float __uint_as_float(unsigned u) { return grpo_emu_u2f(u); }
static inline int __float_as_int(float f) { return (int)grpo_emu_f2u(f); }
static inline float __int_as_float(int i) { return grpo_emu_u2f((uint32_t)i); }

static inline float __shfl_xor_sync(unsigned, float v, int m, int w = 32) {
    return grpo_emu_u2f(grpo_emu_shfl(grpo_emu_f2u(v), GRPO_EMU_SHFL_XOR, m, w));
}
static inline int __shfl_xor_sync(unsigned, int v, int m, int w = 32) {
    return (int)grpo_emu_shfl((uint32_t)v, GRPO_EMU_SHFL_XOR, m, w);
}
static inline float __shfl_down_sync(unsigned, float v, unsigned d, int w = 32) {
    return grpo_emu_u2f(grpo_emu_shfl(grpo_emu_f2u(v), GRPO_EMU_SHFL_DOWN, (int)d, w));
}
static inline int __shfl_down_sync(unsigned, int v, unsigned d, int w = 32) {
    return (int)grpo_emu_shfl((uint32_t)v, GRPO_EMU_SHFL_DOWN, (int)d, w);
}
static inline float __shfl_sync(unsigned, float v, int src, int w = 32) {
    return grpo_emu_u2f(grpo_emu_shfl(grpo_emu_f2u(v), GRPO_EMU_SHFL_IDX, src, w));
}
static inline int __shfl_sync(unsigned, int v, int src, int w = 32) {
    return (int)grpo_emu_shfl((uint32_t)v, GRPO_EMU_SHFL_IDX, src, w);
}

#define GRPO_SHARED_DYN(type, name) type *name = (type *)grpo_emu_dyn_shared()

/* ---- atomics: fibers never interleave inside one, so a read-modify-write is atomic ------------- */
static inline float atomicAdd(float *p, float v) {
    float old = *p;
    *p = old + v;
    return old;
}
static inline int atomicAdd(int *p, int v) {
    int old = *p;
    *p = (int)((unsigned)old + (unsigned)v); /* wraps as the hardware does */
    return old;
}
static inline int atomicMax(int *p, int v) {
    int old = *p;
    if (v > old) *p = v;
    return old;
}

/* ---- math ---------------------------------------------------------------------------------- */
/* glibc's math.h declares __expf and __logf itself, so the intrinsics are macros here. */
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline float grpo_emu_expf(float x) { return expf(x); }
static inline float grpo_emu_logf(float x) { return logf(x); }
#define __expf grpo_emu_expf
#define __logf grpo_emu_logf

/* ---- runtime ------------------------------------------------------------------------------- */
typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevice = 101,
    cudaErrorNoDevice = 100,
} cudaError_t;
typedef enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
} cudaMemcpyKind;
typedef enum cudaDeviceAttr {
    cudaDevAttrMaxThreadsPerBlock = 1,
    cudaDevAttrMaxSharedMemoryPerBlock = 8,
    cudaDevAttrWarpSize = 10,
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
} cudaDeviceAttr;
typedef struct grpo_emu_stream *cudaStream_t;
#define cudaStreamNonBlocking 0x01u

extern "C" {
cudaError_t cudaMalloc(void **ptr, size_t bytes);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream);
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);

/* The launch itself: checks the configuration, then runs body(closure) once per CUDA thread. */
void grpo_emu_launch(dim3 grid, dim3 block, size_t shmem, void (*body)(void *), void *closure);

/* Strict mode (GRPO_CUDA_EMU_STRICT=1 in the environment): device memory is mapped inaccessible
 * whenever no emulated device work runs, so host code that dereferences a device pointer — which
 * a real GPU would turn into a crash or garbage — faults here too. The emulation's own device
 * work (launches, copies, memset) opens it; so must any other host code that stands in for the
 * device (gemm.cu's sgemm), between these two calls (they nest). No-ops when not strict. */
void grpo_emu_device_begin(void);
void grpo_emu_device_end(void);

/* Strict mode also checks that device work gets device memory, which a GPU needs and the
 * emulation (whose kernels could read any host address) would otherwise not notice:
 *   - every pointer argument of a launch (GRPO_LAUNCH) is NULL or inside a live cudaMalloc
 *     allocation (its end included: an empty range there is valid);
 *   - cudaMemcpy/cudaMemcpyAsync of kind HostToDevice, DeviceToHost, DeviceToDevice: each device
 *     side's whole range lies in one allocation, each host side outside all of them
 *     (cudaMemcpyDefault is not checked: any pointer is valid there);
 *   - cudaMemsetAsync: the whole range lies in one allocation.
 * A failed check stops the process with a message naming the call (the kernel and the
 * argument's position) and the address. This checks the pointer given, not the bytes a kernel
 * reaches through it, nor pointers inside structs passed by value (the kernels take none).
 * grpo_emu_check_device is the check of one argument; host code that stands in for the device
 * (gemm.cu's sgemm) calls it for its operands too. No-op when not strict. */
void grpo_emu_check_device(const char *what, int index, const void *p);
}

/* cuda_runtime.h's typed overload, so `float *p; cudaMalloc(&p, n)` compiles in both builds. */
template <typename T> static inline cudaError_t cudaMalloc(T **ptr, size_t bytes) {
    return cudaMalloc((void **)ptr, bytes);
}

/* GRPO_LAUNCH: the arguments are converted to the kernel's parameter types once, their
 * pointers checked (strict mode, above), then every thread calls the kernel with copies of
 * them. */
template <typename F> static void grpo_emu_call(void *closure) { (*(F *)closure)(); }

template <typename T> static inline void grpo_emu_check_arg(const char *what, int i, const T &v) {
    if constexpr (std::is_pointer<T>::value) grpo_emu_check_device(what, i, (const void *)v);
}

template <typename Tuple, size_t... I>
static inline void grpo_emu_check_args(const char *what, const Tuple &t,
                                       std::index_sequence<I...>) {
    (grpo_emu_check_arg(what, (int)I, std::get<I>(t)), ...);
}

template <typename... P, typename... A>
static inline void grpo_emu_launch_kernel(const char *what, void (*kernel)(P...), dim3 grid,
                                          dim3 block, size_t shmem, cudaStream_t stream,
                                          A &&...args) {
    (void)stream;
    std::tuple<typename std::decay<P>::type...> bound(std::forward<A>(args)...);
    grpo_emu_check_args(what, bound, std::index_sequence_for<P...>{});
    auto body = [&]() { std::apply(kernel, bound); };
    grpo_emu_launch(grid, block, shmem, &grpo_emu_call<decltype(body)>, &body);
}

#define GRPO_LAUNCH(kernel, grid, block, shmem, stream, ...)                                      \
    grpo_emu_launch_kernel("kernel " #kernel, (kernel), dim3(grid), dim3(block),               \
                           (size_t)(shmem), (stream), ##__VA_ARGS__)

#endif /* GRPO_CUDA_EMU_H */
