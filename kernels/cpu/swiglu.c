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

void cpu_swiglu_forward(void *ctx, float *out, const float *gate, const float *up, int32_t N,
                        int32_t I) {
    int64_t n = (int64_t)N * I, slices = (n + SWIGLU_SLICE - 1) / SWIGLU_SLICE;
    int nt = cpu_threads_for(ctx, (double)n * 8);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t s = 0; s < slices; s++) {
        int64_t i0 = s * SWIGLU_SLICE, len = n - i0 < SWIGLU_SLICE ? n - i0 : SWIGLU_SLICE;
        swiglu_forward_slice(out + i0, gate + i0, up + i0, len);
    }
}

void cpu_swiglu_backward(void *ctx, float *dgate, float *dup, const float *dout,
                         const float *gate, const float *up, int32_t N, int32_t I) {
    if (!dgate && !dup) return;
    int64_t n = (int64_t)N * I, slices = (n + SWIGLU_SLICE - 1) / SWIGLU_SLICE;
    int nt = cpu_threads_for(ctx, (double)n * 8);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t s = 0; s < slices; s++) {
        int64_t i0 = s * SWIGLU_SLICE, len = n - i0 < SWIGLU_SLICE ? n - i0 : SWIGLU_SLICE;
        swiglu_backward_slice(dgate ? dgate + i0 : NULL, dup ? dup + i0 : NULL, dout + i0,
                              gate + i0, up + i0, len);
    }
}
