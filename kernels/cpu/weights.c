/*
 * weights.c — weights held in another dtype than fp32 (grpo/ops.h 1.5: bf16 for a frozen LoRA
 * base or the rollout's copy of the policy), read by the compute as fp32.
 *
 * The forward kernels widen the weight where they copy it anyway (matmul_small's blocks,
 * gemm_nt's packed panels); the backward reads it in panels of whole rows: cpu_weight_rows()
 * (widen.c) hands back the fp32 rows, in place for fp32 and widened into a buffer otherwise, and
 * the fp32 kernels run on the panel. Widening bf16 is exact, so every op here computes the fp32
 * op of the widened weight: the forward bit for bit, the backward up to the order of its sums.
 *   matmul_forward_w:  decode rows (N <= CPU_SMALL_M): matmul_small.c, each thread widening its
 *                      block of weight rows into cache; more rows: gemm_nt.c, widening w as it
 *                      packs it (the same sums as the fp32 forward of the widened weight)
 *   matmul_backward_w: dinp (N,IC) = sum over panels of dout[:, o0:o1] @ w[o0:o1]
 * A decode step then reads 2 bytes per weight from memory instead of 4; a widened panel
 * (OP x IC fp32) stays in cache for the fp32 kernel.
 */
#include <string.h>

#include "cpu/cpu_backend.h"
#include "cpu/fastmath.h"

#define OP 256 /* weight rows per panel */

typedef struct narrow_args {
    void *dst;
    const void *src;
    const int32_t *ids;
    int32_t C;
} narrow_args;

/* fp32 -> bf16 of elements [i0, i1): grpo_bf16_from_f32's bits, in vector lanes (the rollout
 * copy's refresh after each optimizer step converts every weight). */
CPU_VECTOR_CLONES
static void narrow_range(void *arg, int64_t i0, int64_t i1, int32_t tid) {
    const narrow_args *a = arg;
    const uint32_t *f = a->src;
    uint16_t *h = a->dst;
    (void)tid;
#pragma omp simd
    for (int64_t i = i0; i < i1; i++) h[i] = (uint16_t)cpu_bf16_bits(f[i]);
}

void cpu_convert(void *ctx, void *dst, int32_t dst_type, const void *src, int32_t src_type,
                 uint64_t n) {
    CPU_CHECK(grpo_dtype_size(dst_type) && grpo_dtype_size(src_type), "convert", "unknown dtype");
    if (dst_type == src_type) {
        memcpy(dst, src, n * grpo_dtype_size(dst_type));
    } else if (dst_type == GRPO_DTYPE_F32) {
        cpu_widen_rows(ctx, dst, src, src_type, n);
    } else {
        narrow_args a = {dst, src, NULL, 0};
        cpu_parallel_range(ctx, CPU_FAM_WEIGHTS, cpu_threads_for(ctx, (double)n), (int64_t)n,
                           4096, narrow_range, &a);
    }
}

void cpu_matmul_forward_w(void *ctx_, float *out, const float *inp, const void *w, int32_t wtype,
                          const float *bias, int32_t N, int32_t IC, int32_t OC) {
    cpu_ctx *ctx = ctx_;
    if (wtype == GRPO_DTYPE_F32) {
        cpu_matmul_forward(ctx, out, inp, w, bias, N, IC, OC);
        return;
    }
    if (N <= 0 || OC <= 0) return;
    if (N <= CPU_SMALL_M) { /* decode: each thread widens its own blocks (matmul_small.c) */
        cpu_matmul_small_forward_w(ctx, out, inp, w, wtype, bias, N, IC, OC);
        return;
    }
    cpu_gemm_nt(ctx, out, OC, inp, w, wtype, bias, 1.0f, N, IC, OC); /* widened as packed */
}

void cpu_matmul_backward_w(void *ctx_, float *dinp, const float *dout, const void *w,
                           int32_t wtype, int32_t N, int32_t IC, int32_t OC) {
    cpu_ctx *ctx = ctx_;
    if (wtype == GRPO_DTYPE_F32) {
        cpu_matmul_backward(ctx, dinp, NULL, NULL, dout, NULL, w, N, IC, OC);
        return;
    }
    if (N <= 0 || IC <= 0) return;
    if (OC <= 0) {
        memset(dinp, 0, (size_t)N * IC * sizeof(float));
        return;
    }
    float *panel = cpu_weight_panel(ctx, (uint64_t)OP * IC);
    for (int32_t o0 = 0; o0 < OC; o0 += OP) {
        int32_t op = OC - o0 < OP ? OC - o0 : OP;
        const float *wp = cpu_weight_rows(ctx, w, wtype, (uint64_t)o0, (uint64_t)op,
                                          (uint64_t)IC, panel);
        /* dinp (N,IC) (+)= dout[:, o0:o0+op] (N,op) @ wp (op,IC) */
        cpu_sgemm(ctx, 0, 0, N, IC, op, 1.0f, dout + o0, OC, wp, IC, o0 == 0 ? 0.0f : 1.0f, dinp,
                  IC);
    }
}

/* rows [n0, n1) of embedding_forward_w: a->dst the fp32 out, a->src the bf16 table */
static void embedding_range(void *arg, int64_t n0, int64_t n1, int32_t tid) {
    const narrow_args *a = arg;
    (void)tid;
    for (int64_t n = n0; n < n1; n++) {
        CPU_CHECK(a->ids[n] >= 0, "embedding_forward_w", "token id < 0");
        const uint16_t *row = (const uint16_t *)a->src + (size_t)a->ids[n] * a->C;
        float *o = (float *)a->dst + (size_t)n * a->C;
        for (int32_t c = 0; c < a->C; c++) o[c] = grpo_bf16_to_f32(row[c]);
    }
}

void cpu_embedding_forward_w(void *ctx, float *out, const int32_t *ids, const void *wte,
                             int32_t wtype, int32_t N, int32_t C) {
    if (wtype == GRPO_DTYPE_F32) {
        cpu_embedding_forward(ctx, out, ids, wte, N, C);
        return;
    }
    CPU_CHECK(wtype == GRPO_DTYPE_BF16, "embedding_forward_w", "unknown dtype");
    narrow_args a = {out, wte, ids, C};
    cpu_parallel_range(ctx, CPU_FAM_EMBEDDING, cpu_threads_for(ctx, (double)N * C), N, 1,
                       embedding_range, &a);
}
