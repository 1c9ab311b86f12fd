/*
 * swiglu.c — the gated MLP activation of Llama: out (N,I) = silu(gate) * up, silu(g) = g*sig(g).
 * backward (written; dgate/dup may alias gate/up):
 *   dup   = dout * silu(gate)
 *   dgate = dout * up * sig(gate) * (1 + gate * (1 - sig(gate)))
 * sig(g) = 1 / (1 + exp(-g)) with the vectorised exp of fastmath.h (within 2 ulp of expf).
 */
#include "cpu/cpu_backend.h"
#include "cpu/fastmath.h"

#define SWIGLU_SLICE 4096 /* elements per task */

CPU_VECTOR_CLONES
static void swiglu_forward_slice(float *out, const float *gate, const float *up, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + cpu_expf(-g)) * up[i];
    }
}

/* d silu(g) / dg = sig(g) * (1 + g * (1 - sig(g))) */
CPU_VECTOR_CLONES
static void swiglu_backward_slice(float *dgate, float *dup, const float *dout, const float *gate,
                                  const float *up, int64_t n) {
    if (dgate && dup) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            float g = gate[i], sig = 1.0f / (1.0f + cpu_expf(-g));
            dgate[i] = dout[i] * up[i] * sig * (1.0f + g * (1.0f - sig));
            dup[i] = dout[i] * g * sig;
        }
    } else if (dgate) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            float g = gate[i], sig = 1.0f / (1.0f + cpu_expf(-g));
            dgate[i] = dout[i] * up[i] * sig * (1.0f + g * (1.0f - sig));
        }
    } else {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            float g = gate[i], sig = 1.0f / (1.0f + cpu_expf(-g));
            dup[i] = dout[i] * g * sig;
        }
    }
}

typedef struct swiglu_args {
    float *out, *dgate, *dup;
    const float *gate, *up, *dout;
    int64_t n;
} swiglu_args;

static void forward_task(void *arg, int64_t s, int32_t tid) {
    const swiglu_args *a = arg;
    (void)tid;
    int64_t i0 = s * SWIGLU_SLICE, len = a->n - i0 < SWIGLU_SLICE ? a->n - i0 : SWIGLU_SLICE;
    swiglu_forward_slice(a->out + i0, a->gate + i0, a->up + i0, len);
}

static void backward_task(void *arg, int64_t s, int32_t tid) {
    const swiglu_args *a = arg;
    (void)tid;
    int64_t i0 = s * SWIGLU_SLICE, len = a->n - i0 < SWIGLU_SLICE ? a->n - i0 : SWIGLU_SLICE;
    swiglu_backward_slice(a->dgate ? a->dgate + i0 : NULL, a->dup ? a->dup + i0 : NULL,
                          a->dout + i0, a->gate + i0, a->up + i0, len);
}

void cpu_swiglu_forward(void *ctx, float *out, const float *gate, const float *up, int32_t N,
                        int32_t I) {
    int64_t n = (int64_t)N * I, slices = (n + SWIGLU_SLICE - 1) / SWIGLU_SLICE;
    swiglu_args a = {out, NULL, NULL, gate, up, NULL, n};
    cpu_parallel(ctx, CPU_FAM_ELEMENT, cpu_threads_for(ctx, (double)n * 8), slices, forward_task,
                 &a);
}

void cpu_swiglu_backward(void *ctx, float *dgate, float *dup, const float *dout,
                         const float *gate, const float *up, int32_t N, int32_t I) {
    if (!dgate && !dup) return;
    int64_t n = (int64_t)N * I, slices = (n + SWIGLU_SLICE - 1) / SWIGLU_SLICE;
    swiglu_args a = {NULL, dgate, dup, gate, up, dout, n};
    cpu_parallel(ctx, CPU_FAM_ELEMENT, cpu_threads_for(ctx, (double)n * 8), slices,
                 backward_task, &a);
}
