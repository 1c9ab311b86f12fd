/*
 * swiglu.c — the gated MLP activation of Llama: out (N,I) = silu(gate) * up, silu(g) = g*sig(g).
 * backward (written; dgate/dup may alias gate/up):
 *   dup   = dout * silu(gate)
 *   dgate = dout * up * sig(gate) * (1 + gate * (1 - sig(gate)))
 */
#include <math.h>

#include "cpu/cpu_backend.h"

void cpu_swiglu_forward(void *ctx, float *out, const float *gate, const float *up, int32_t N,
                        int32_t I) {
    int64_t n = (int64_t)N * I;
    int nt = cpu_threads_for(ctx, (double)n * 8);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

void cpu_swiglu_backward(void *ctx, float *dgate, float *dup, const float *dout,
                         const float *gate, const float *up, int32_t N, int32_t I) {
    int64_t n = (int64_t)N * I;
    int nt = cpu_threads_for(ctx, (double)n * 8);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i], u = up[i], d = dout[i];
        float sig = 1.0f / (1.0f + expf(-g));
        if (dgate) dgate[i] = d * u * sig * (1.0f + g * (1.0f - sig));
        if (dup) dup[i] = d * g * sig;
    }
}
