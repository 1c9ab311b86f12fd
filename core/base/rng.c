/* rng.c — xoshiro256** (Blackman & Vigna) seeded with splitmix64, written from the published
 * algorithm description. */
#include "base/rng.h"

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void grpo_rng_seed(grpo_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

void grpo_rng_seed_stream(grpo_rng *r, uint64_t seed, uint64_t a, uint64_t b) {
    /* each coordinate goes through splitmix64's mixer, so nearby (a, b) give unrelated seeds */
    uint64_t x = seed, h = splitmix64(&x);
    x = h ^ a, h = splitmix64(&x);
    x = h ^ b, h = splitmix64(&x);
    grpo_rng_seed(r, h);
}

uint64_t grpo_rng_next(uint64_t s[4]) {
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float grpo_rng_uniform(grpo_rng *r) { return (float)(grpo_rng_next(r->s) >> 40) * 0x1.0p-24f; }
