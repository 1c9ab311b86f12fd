/*
 * kernels.h — compute backends. The op table itself (grpo_ops) is part of the SDK
 * (sdk/include/grpo/ops.h) because model plugins call it; this header is the host's side:
 * how a backend is opened and closed.
 *
 * Backends, the entries of the registry (backend_registry.c): "cpu" (OpenBLAS for GEMMs, its own
 * thread pool for the rest; built in) and "cuda" (kernels/cuda: a module,
 * libgrpo_kernels_cuda.so, built when the build found a CUDA toolkit and loaded with dlopen when
 * opened, so the grpo binary and model packs never link CUDA). "auto" is cuda when its module
 * loads and finds a device, else cpu (quietly).
 *
 * Finding the cuda module, first match wins:
 *   1. $GRPO_CUDA_BACKEND: the module's path (or a directory holding it);
 *   2. the build tree's backends directory, compiled in (GRPO_BACKEND_BUILD_DIR);
 *   3. <dir of the executable>/../<libdir>/grpo/backends (an installed tree).
 * GRPO_CUDA_EMULATION=1 in the environment (tests only) loads libgrpo_kernels_cuda_emu.so
 * instead: the same kernels built by the host compiler on kernels/cuda/emu, which run every CUDA
 * thread on the CPU (slowly), so the op parity tests run where no GPU is.
 *
 * Lifecycle: if grpo_backend_open returns a table, the caller MUST close it with
 * grpo_backend_close after freeing every buffer it allocated through it. Calls on one table are
 * issued from one thread at a time.
 *
 * Threads (cpu): every op runs on one pool of `threads` threads (kernels/cpu/cpu_pool.h); GEMMs
 * are tiled over that pool, each tile a single-threaded OpenBLAS call. Opening the cpu backend
 * therefore sets OpenBLAS to one thread for the whole process (openblas_set_num_threads(1)):
 * host code that wants a parallel GEMM calls ops->matmul_forward rather than cblas directly.
 * Ops with impossible arguments (NH not a multiple of NKV, odd HD for RoPE, a target >= V, ...)
 * abort with file:line and what was expected; the table has no error return.
 */
#ifndef GRPO_KERNELS_H
#define GRPO_KERNELS_H

#include "grpo/ops.h"
#include "grpo/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most CPU threads a backend is opened with (train.threads has the same bound). */
#define GRPO_MAX_THREADS 1024

/* Opens the backend called `name` ("cpu" or "cuda") using `threads` CPU threads (<= 0: the
 * default, i.e. OMP_NUM_THREADS or the number of cores; > GRPO_MAX_THREADS: an error). Returns the op table, owned by
 * the caller, or NULL with err set: GRPO_ERR_UNSUPPORTED for a backend that is not built here,
 * GRPO_ERR_INVALID for an unknown name, GRPO_ERR_NOMEM. */
grpo_ops *grpo_backend_open(const char *name, int32_t threads, grpo_error *err);

/* How grpo_backend_open_with opens a backend. */
typedef struct grpo_backend_options {
    int32_t threads;   /* CPU threads, as grpo_backend_open's */
    int32_t precision; /* GRPO_DTYPE_F32, or GRPO_DTYPE_BF16: matmul operands rounded to bf16
                        * with fp32 accumulate (cuda only; cpu refuses it) */
} grpo_backend_options;

/* grpo_backend_open with options (NULL: threads 0, f32). name "auto": cuda when its module opens
 * a device, else cpu. */
grpo_ops *grpo_backend_open_with(const char *name, const grpo_backend_options *opt,
                                 grpo_error *err);

/* The dtype ops's forward products (matmul_forward, matmul_forward_w, head_forward,
 * head_forward_w: the linear layers and the LM head) compute in from the next call on:
 * GRPO_DTYPE_F32 (every backend; what a table opens with), or GRPO_DTYPE_BF16 (bf16 products,
 * fp32 accumulation) on the cpu backend where the CPU has avx512_bf16. GRPO_OK, or
 * GRPO_ERR_UNSUPPORTED in err (naming the missing instruction set, or the backend) with ops
 * unchanged. Like an op: from one thread at a time. A pass sets it and sets f32 back after. */
int32_t grpo_backend_set_compute(const grpo_ops *ops, int32_t dtype, grpo_error *err);

/* 1 when the buffers of ops are host memory that host code may read directly (the cpu backend:
 * a reader may point at them instead of downloading a copy), 0 when they are reached through
 * upload/download only (cuda; an unknown table). Reads after the ops that wrote them (a cpu op
 * has returned when it is done). */
int grpo_backend_host_memory(const grpo_ops *ops);

/* Closes a table returned by grpo_backend_open or grpo_backend_open_with (NULL is ignored),
 * through the module for a cuda table (the module stays mapped: the CUDA libraries cannot be
 * unloaded safely). */
void grpo_backend_close(grpo_ops *ops);

/* OpenBLAS's kernels for this CPU (kernels/cpu/blas_core.c). Called first thing in a program
 * (main, or a constructor): where OpenBLAS took a CPU with AVX2 and FMA for an older one (a
 * release that does not know the CPU's model) and OPENBLAS_CORETYPE is not set, sets it to the
 * kernels the CPU allows and executes the program again with the same arguments; otherwise
 * returns. */
void grpo_cpu_blas_core_pick(void);
/* The name of the kernels OpenBLAS runs in this process (openblas_get_corename), and the name of
 * those OpenBLAS had chosen itself where grpo_cpu_blas_core_pick chose others (NULL if not). */
const char *grpo_cpu_blas_core(void);
const char *grpo_cpu_blas_core_was(void);

#ifdef __cplusplus
}
#endif
#endif
