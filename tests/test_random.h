/*
 * test_random.h — random inputs of the kernel tests: xorshift64 floats uniform in [-1, 1) from
 * the seed the including file defines first (TEST_RNG_SEED, so each test keeps its own
 * sequence), and buffers of them (randv) or of NaN (outv: an output the kernel must write).
 */
#ifndef GRPO_TEST_RANDOM_H
#define GRPO_TEST_RANDOM_H

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef TEST_RNG_SEED
#error "define TEST_RNG_SEED before including test_random.h"
#endif

static uint64_t rng = TEST_RNG_SEED;

/* uniform in [-1, 1) */
static inline float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static inline float *randv(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++) p[i] = frand();
    return p;
}

static inline float *outv(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

#endif
