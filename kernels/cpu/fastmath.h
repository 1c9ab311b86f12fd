/*
 * fastmath.h — an exp that the compiler can vectorise, for the softmax loops of attention and
 * the head (glibc's expf is a call per element).
 *
 * cpu_expf(x) = 2^k * e^r with k = round(x / ln 2) and r = x - k ln 2 in [-ln2/2, ln2/2]
 * (ln 2 split in a high part exact in fp32 and a low part), e^r by its Taylor series to degree 7:
 * truncation < 0.3466^8 / 8! = 5e-9, so the result is within ~2 ulp of exp(x). Inputs are
 * clamped to [-87.33, 88]: below, the result is ~1e-38 instead of denormal/0 (negligible next to
 * the softmax sums >= 1 it is added to; -inf gives it too); above, 2^k would overflow the exponent
 * field (+inf gives exp(88)). NaN stays NaN. Everything is a select, so loops vectorise.
 *
 * CPU_FMA_CONTRACT lets the compiler fuse a product and a sum into one fma.
 * CPU_VECTOR_CLONES marks a hot function to be compiled for AVX-512, AVX2 and the baseline (SSE2),
 * the best chosen at load time (GCC function multi-versioning), so one binary runs everywhere.
 */
#ifndef GRPO_CPU_FASTMATH_H
#define GRPO_CPU_FASTMATH_H

#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define CPU_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CPU_VECTOR_CLONES
#endif

/* x * w + a as one FMA where the target has it (the build's -std=c11 turns contraction off):
 * on the functions of the per-ISA product kernels (matmul_small.c, gemm_nt_kernel.h) */
#if defined(__GNUC__) && !defined(__clang__)
#define CPU_FMA_CONTRACT __attribute__((optimize("fp-contract=fast")))
#else
#define CPU_FMA_CONTRACT
#endif

/* The bf16 bits (low 16) of the float with bits u: grpo_bf16_from_f32's rounding to nearest
 * even, a NaN kept quiet, written without branches so that loops over it vectorise. */
static inline uint32_t cpu_bf16_bits(uint32_t u) {
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, q = (u >> 16) | 0x40u;
    return (u & 0x7fffffffu) > 0x7f800000u ? q : r;
}

/* a where mask is all ones, b where it is 0 (a select GCC vectorises at -O2; ?: it may not) */
static inline int32_t cpu_blend(int32_t mask, int32_t a, int32_t b) {
    return (a & mask) | (b & ~mask);
}

static inline float cpu_expf(float x) {
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693145751953125f;      /* exact in fp32, 11 trailing zero bits */
    const float ln2_lo = 1.42860682030941723e-6f; /* ln 2 - ln2_hi */
    const float shift = 12582912.0f;              /* 1.5 * 2^23: adding it rounds to an integer */
    const float lo = -87.33654f, hi = 88.0f;
    int32_t xi, loi, hii;
    memcpy(&xi, &x, 4);
    memcpy(&loi, &lo, 4);
    memcpy(&hii, &hi, 4);
    /* The clamps compare bit patterns as integers: between two negative floats the larger
     * magnitude has the larger signed pattern, between two positive ones too. (A float compare
     * is not turned into a vector select under -ftrapping-math.) */
    int32_t ci = cpu_blend(-((xi > loi) & (xi < 0)), loi, xi); /* x < lo */
    ci = cpu_blend(-(ci > hii), hii, ci);                       /* x > hi, and NaN */
    float y;
    memcpy(&y, &ci, 4);
    float kf = (y * log2e + shift) - shift;
    float r = (y - kf * ln2_hi) - kf * ln2_lo;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t ki = ((int32_t)kf + 127) * 8388608, oi; /* (k + 127) << 23, no signed shift */
    float two_k, out;
    memcpy(&two_k, &ki, 4);
    out = p * two_k;
    memcpy(&oi, &out, 4);
    oi = cpu_blend(-((xi & 0x7fffffff) > 0x7f800000), xi, oi); /* NaN in, NaN out */
    memcpy(&out, &oi, 4);
    return out;
}

#endif
