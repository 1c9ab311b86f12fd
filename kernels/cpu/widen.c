/*
 * widen.c — weights of another dtype (GRPO_DTYPE_*) read as fp32: bf16 rows widened (exactly)
 * into fp32, and the context's grow-only buffer for a widened weight panel. The kernels of
 * weights.c, matmul_small.c and head.c read such weights through these.
 */
#include <string.h>

#include "cpu/cpu_backend.h"

/* dst (n) = the bf16 src widened, 16 at a time as GCC vectors (RelWithDebInfo's -O2 does not
 * vectorise the plain loop; a widening is a zero-extension and a shift, which every SIMD ISA
 * has), the tail one by one. */
static void widen_bf16(float *dst, const uint16_t *src, uint64_t n) {
    uint64_t i = 0;
#if defined(__GNUC__)
    typedef uint16_t u16x16 __attribute__((vector_size(32), aligned(2)));
    typedef uint32_t u32x16 __attribute__((vector_size(64), aligned(4)));
    for (; i + 16 <= n; i += 16) {
        u16x16 h;
        memcpy(&h, src + i, sizeof h);
        u32x16 u = __builtin_convertvector(h, u32x16) << 16;
        memcpy(dst + i, &u, sizeof u); /* the bits of the floats */
    }
#endif
    for (; i < n; i++) dst[i] = grpo_bf16_to_f32(src[i]);
}

#define WIDEN_SLICE 4096 /* elements per task of a parallel widening */

typedef struct widen_args {
    float *dst;
    const uint16_t *src;
} widen_args;

static void widen_range(void *arg, int64_t i0, int64_t i1, int32_t tid) {
    const widen_args *a = arg;
    (void)tid;
    widen_bf16(a->dst + i0, a->src + i0, (uint64_t)(i1 - i0));
}

void cpu_widen_rows(void *ctx, float *dst, const void *src, int32_t dtype, uint64_t n) {
    CPU_CHECK(dtype == GRPO_DTYPE_BF16 || dtype == GRPO_DTYPE_F32, "widen", "unknown dtype");
    if (dtype == GRPO_DTYPE_F32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    int nt = ctx ? cpu_threads_for(ctx, (double)n) : 1;
    if (nt <= 1) {
        widen_bf16(dst, src, n);
        return;
    }
    widen_args a = {dst, src};
    cpu_parallel_range(ctx, CPU_FAM_WEIGHTS, nt, (int64_t)n, WIDEN_SLICE, widen_range, &a);
}

const float *cpu_weight_rows(void *ctx, const void *w, int32_t dtype, uint64_t row0,
                             uint64_t rows, uint64_t cols, float *buf) {
    if (dtype == GRPO_DTYPE_F32) return (const float *)w + row0 * cols;
    cpu_widen_rows(ctx, buf, (const uint16_t *)w + row0 * cols, dtype, rows * cols);
    return buf;
}

/* A buffer of `need` floats for a widened panel (and its product), or the decode kernel's
 * per-thread blocks, apart from the context's scratch (the fp32 kernels use that). Grows only. */
float *cpu_weight_panel(cpu_ctx *ctx, uint64_t need) {
    if (need > ctx->panel_floats) {
        cpu_free(ctx, ctx->panel);
        ctx->panel = cpu_alloc(ctx, need * sizeof(float));
        ctx->panel_floats = ctx->panel ? need : 0;
    }
    CPU_CHECK(ctx->panel != NULL, "weights", "out of memory for a weight panel");
    return ctx->panel;
}
