/*
 * cpu_ctx.c — the CPU backend's context: its creation with the thread policy (one OpenMP pool,
 * OpenBLAS on one thread; cpu_backend.h), the shared scratch buffer, and the check that aborts
 * an op called with impossible arguments, and the ISA rule of the per-ISA kernels. Every kernel
 * calls into this file; it calls none. Also the compute dtype of the forward products (bf16 where
 * the CPU has avx512_bf16).
 */
#include "cpu/cpu_backend.h"

#include "cpu/blas.h"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cpu_check_failed(const char *file, int line, const char *op, const char *what) {
    fprintf(stderr, "grpo: %s:%d: cpu backend: %s: %s\n", file, line, op, what);
    abort();
}

cpu_ctx *cpu_ctx_new(int32_t threads) {
    cpu_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return NULL;
    ctx->threads = threads > 0 ? threads : omp_get_max_threads();
    if (ctx->threads < 1) ctx->threads = 1;
    /* one thread pool: OpenMP's (see cpu_backend.h); this is process-wide */
    openblas_set_num_threads(1);
    return ctx;
}

void cpu_ctx_free(cpu_ctx *ctx) {
    if (!ctx) return;
    free(ctx->scratch);
    free(ctx->panel);
    free(ctx);
}

float *cpu_scratch(cpu_ctx *ctx, size_t n) {
    if (n <= ctx->scratch_floats) return ctx->scratch;
    free(ctx->scratch);
    ctx->scratch = NULL;
    ctx->scratch_floats = 0;
    size_t bytes = (n * sizeof(float) + 63u) / 64u * 64u;
    float *p = aligned_alloc(64, bytes);
    if (!p) return NULL;
    ctx->scratch = p;
    ctx->scratch_floats = n;
    return p;
}

int32_t cpu_simd_level(int32_t limit) {
#if defined(__GNUC__) && defined(__x86_64__)
    __builtin_cpu_init();
    if ((limit == CPU_SIMD_ANY || limit >= CPU_SIMD_AVX512) && __builtin_cpu_supports("avx512f"))
        return CPU_SIMD_AVX512;
    if ((limit == CPU_SIMD_ANY || limit >= CPU_SIMD_AVX2) && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma"))
        return CPU_SIMD_AVX2;
#else
    (void)limit;
#endif
    return CPU_SIMD_BASE;
}

int cpu_bf16_isa(int32_t limit) {
#if defined(__GNUC__) && defined(__x86_64__)
    return cpu_simd_level(limit) == CPU_SIMD_AVX512 && __builtin_cpu_supports("avx512bf16");
#else
    (void)limit;
    return 0;
#endif
}

int cpu_bf16_compute(int32_t limit) {
    const char *off = getenv("GRPO_TEST_NO_AVX512BF16");
    if (off && *off && strcmp(off, "0") != 0) return 0;
    return cpu_bf16_isa(limit);
}

int32_t cpu_set_compute_dtype(cpu_ctx *ctx, int32_t dtype, grpo_error *err) {
    if (dtype == GRPO_DTYPE_F32) {
        ctx->compute_dtype = dtype;
        return GRPO_OK;
    }
    if (dtype != GRPO_DTYPE_BF16)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "backend 'cpu': compute dtype %d: expected f32 (%d) or bf16 (%d)",
                              dtype, GRPO_DTYPE_F32, GRPO_DTYPE_BF16);
    if (!cpu_bf16_compute(ctx->simd_limit))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "backend 'cpu': bf16 compute needs the AVX-512 BF16 instructions "
                              "(avx512_bf16: VDPBF16PS), which this CPU does not have");
    ctx->compute_dtype = dtype;
    return GRPO_OK;
}
