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

typedef struct rope_args {
    float *out;
    const float *inp, *inv_freq;
    const int32_t *pos;
    int32_t NH, HD;
    float dir;
    cpu_locals cs; /* per thread: cos (h) then sin (h) of one token */
} rope_args;

static void rope_range(void *arg, int64_t n0, int64_t n1, int32_t tid) {
    rope_args *a = arg;
    const int32_t NH = a->NH, HD = a->HD, h = HD / 2;
    float *cs = cpu_local(&a->cs, tid);
    for (int64_t n = n0; n < n1; n++) {
        for (int32_t i = 0; i < h; i++) {
            float angle = (float)a->pos[n] * a->inv_freq[i];
            cs[i] = cosf(angle);
            cs[h + i] = a->dir * sinf(angle);
        }
        for (int32_t hh = 0; hh < NH; hh++) {
            const float *x = a->inp + ((size_t)n * NH + hh) * HD;
            float *o = a->out + ((size_t)n * NH + hh) * HD;
            for (int32_t i = 0; i < h; i++) {
                float x1 = x[i], x2 = x[i + h], c = cs[i], s = cs[h + i];
                o[i] = x1 * c - x2 * s;
                o[i + h] = x2 * c + x1 * s;
            }
        }
    }
}

/* The scalar operations of N tokens: per token HD/2 angles (a cosf and a sinf, about 8
 * operations apiece), and per element of its NH heads a product and a fused multiply-add (2).
 * A decode step's rows (16 x 8 heads x 64: 24576) stay on the caller: the fork/join would cost
 * about what the few microseconds of work save. */
static double rope_work(int32_t N, int32_t NH, int32_t HD) {
    return (double)N * ((double)HD / 2 * 16 + (double)NH * HD * 2);
}

/* dir = +1 rotates by +angle (forward), -1 by -angle (backward). */
static void rope_rotate(void *ctx, float *out, const float *inp, const int32_t *pos, int32_t N,
                        int32_t NH, int32_t HD, float theta, float dir, const char *op) {
    CPU_CHECK(HD % 2 == 0, op, "head dim HD must be even");
    int32_t h = HD / 2;
    float *inv_freq = malloc((size_t)h * sizeof(float));
    CPU_CHECK(inv_freq != NULL, op, "out of memory for inv_freq");
    for (int32_t i = 0; i < h; i++) inv_freq[i] = 1.0f / powf(theta, (float)(2 * i) / (float)HD);
    rope_args a = {out, inp, inv_freq, pos, NH, HD, dir, {0}};
    cpu_locals_init(&a.cs, ctx, (size_t)HD * sizeof(float), op);
    cpu_parallel_range(ctx, CPU_FAM_NORM, cpu_threads_for(ctx, rope_work(N, NH, HD)), N, 1,
                       rope_range, &a);
    cpu_locals_free(&a.cs);
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
