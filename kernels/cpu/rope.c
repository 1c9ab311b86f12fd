/*
 * rope.c — rotary position embedding in the split-halves (rotate_half) layout of Hugging Face
 * Llama. For head dim HD, h = HD/2 and i in [0,h):
 *   inv_freq[i] = 1 / theta^(2i/HD),  angle = pos * inv_freq[i]  (both rounded to fp32 as HF does)
 *   out[i]   = x[i] cos - x[i+h] sin
 *   out[i+h] = x[i+h] cos + x[i] sin
 * i.e. out = x * cat(cos,cos) + rotate_half(x) * cat(sin,sin). Backward is the inverse rotation
 * (the transpose): dinp[i] = d[i] cos + d[i+h] sin, dinp[i+h] = d[i+h] cos - d[i] sin.
 * x is (N,NH,HD) with position pos[n] for token n; out may equal inp (dinp may equal dout).
 */
#include <math.h>
#include <stdlib.h>

#include "cpu/cpu_backend.h"

/* dir = +1 rotates by +angle (forward), -1 by -angle (backward). */
static void rope_rotate(void *ctx, float *out, const float *inp, const int32_t *pos, int32_t N,
                        int32_t NH, int32_t HD, float theta, float dir, const char *op) {
    CPU_CHECK(HD % 2 == 0, op, "head dim HD must be even");
    int32_t h = HD / 2;
    float *inv_freq = malloc((size_t)h * sizeof(float));
    CPU_CHECK(inv_freq != NULL, op, "out of memory for inv_freq");
    for (int32_t i = 0; i < h; i++) inv_freq[i] = 1.0f / powf(theta, (float)(2 * i) / (float)HD);
    int nt = cpu_threads_for(ctx, (double)N * NH * HD * 4);
#pragma omp parallel num_threads(nt)
    {
        float *cs = malloc((size_t)HD * sizeof(float)); /* cos (h) then sin (h) of this token */
        CPU_CHECK(cs != NULL, op, "out of memory for the cos/sin table");
#pragma omp for schedule(static)
        for (int32_t n = 0; n < N; n++) {
            for (int32_t i = 0; i < h; i++) {
                float angle = (float)pos[n] * inv_freq[i];
                cs[i] = cosf(angle);
                cs[h + i] = dir * sinf(angle);
            }
            for (int32_t hh = 0; hh < NH; hh++) {
                const float *x = inp + ((size_t)n * NH + hh) * HD;
                float *o = out + ((size_t)n * NH + hh) * HD;
                for (int32_t i = 0; i < h; i++) {
                    float x1 = x[i], x2 = x[i + h], c = cs[i], s = cs[h + i];
                    o[i] = x1 * c - x2 * s;
                    o[i + h] = x2 * c + x1 * s;
                }
            }
        }
        free(cs);
    }
    free(inv_freq);
}

void cpu_rope_forward(void *ctx, float *out, const float *inp, const int32_t *pos, int32_t N,
                      int32_t NH, int32_t HD, float theta) {
    rope_rotate(ctx, out, inp, pos, N, NH, HD, theta, 1.0f, "rope_forward");
}

void cpu_rope_backward(void *ctx, float *dinp, const float *dout, const int32_t *pos, int32_t N,
                       int32_t NH, int32_t HD, float theta) {
    if (!dinp) return;
    rope_rotate(ctx, dinp, dout, pos, N, NH, HD, theta, -1.0f, "rope_backward");
}
