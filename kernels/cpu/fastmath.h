/*
 * fastmath.h — an exp that the compiler can vectorise, for the softmax loops of attention and
 * the head (glibc's expf is a call per element).
 *
 * cpu_expf(x) = 2^k * e^r with k = round(x / ln 2) and r = x - k ln 2 in [-ln2/2, ln2/2]
 * (ln 2 split in a high part exact in fp32 and a low part), e^r by its Taylor series to degree 7:
 * truncation < 0.3466^8 / 8! = 5e-9, so the result is within ~2 ulp of exp(x). Inputs are
 * clamped to [-87.33, 88]: below, the result is ~1e-38 instead of denormal/0 (negligible next to
 * the softmax sums >= 1 it is added to); above, 2^k would overflow the exponent field.
 *
 * CPU_VECTOR_CLONES marks a hot function to be compiled for AVX-512, AVX2 and the baseline (SSE2),
 * the best chosen at load time (GCC function multi-versioning), so one binary runs everywhere.
 */
#ifndef GRPO_CPU_FASTMATH_H
#define GRPO_CPU_FASTMATH_H

#include <stdint.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define CPU_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CPU_VECTOR_CLONES
#endif

#pragma omp declare simd notinbranch
static inline float cpu_expf(float x) {
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693145751953125f;      /* exact in fp32, 11 trailing zero bits */
    const float ln2_lo = 1.42860682030941723e-6f; /* ln 2 - ln2_hi */
    const float shift = 12582912.0f;              /* 1.5 * 2^23: adding it rounds to an integer */
    x = x < -87.33654f ? -87.33654f : x;
    x = x > 88.0f ? 88.0f : x;
    float kf = (x * log2e + shift) - shift;
    float r = (x - kf * ln2_hi) - kf * ln2_lo;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    union {
        int32_t i;
        float f;
    } two_k = {((int32_t)kf + 127) * 8388608}; /* (k + 127) << 23 without shifting a signed int */
    return p * two_k.f;
}

#endif
