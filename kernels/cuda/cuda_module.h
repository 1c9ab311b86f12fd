/*
 * cuda_module.h — what the host (kernels/cuda_loader.c, C) and the CUDA backend module agree on:
 * the options of the module's open function and the names of its two entry points, looked up
 * with dlsym. Plain C: cuda_loader.c includes it without the CUDA headers.
 */
#ifndef GRPO_CUDA_MODULE_H
#define GRPO_CUDA_MODULE_H

#include <stdint.h>

#include "grpo/ops.h"
#include "grpo/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What cuda_loader.c passes to the module's open function (looked up with dlsym by name). */
typedef struct grpo_cuda_options {
    uint32_t struct_size;
    int32_t device;    /* CUDA device ordinal */
    int32_t precision; /* GRPO_DTYPE_F32 or GRPO_DTYPE_BF16 (matmul autocast) */
    int32_t threads;   /* CPU threads the emulation may use (ignored on a GPU) */
} grpo_cuda_options;

#define GRPO_CUDA_OPEN_SYMBOL "grpo_cuda_backend_open"
#define GRPO_CUDA_CLOSE_SYMBOL "grpo_cuda_backend_close"
typedef grpo_ops *(*grpo_cuda_open_fn)(const grpo_cuda_options *opt, grpo_error *err);
typedef void (*grpo_cuda_close_fn)(grpo_ops *ops);

/* The module files: the nvcc build, and the same kernels on the host emulation (tests). */
#define GRPO_CUDA_MODULE_FILE "libgrpo_kernels_cuda.so"
#define GRPO_CUDA_EMU_MODULE_FILE "libgrpo_kernels_cuda_emu.so"

#ifdef __cplusplus
}
#endif
#endif /* GRPO_CUDA_MODULE_H */
