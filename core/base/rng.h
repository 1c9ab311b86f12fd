/*
 * rng.h — the project's one random number generator: xoshiro256** seeded through splitmix64.
 * Deterministic across platforms, so a run with the same seed samples the same tokens and resume
 * continues the same stream (the 4-word state is saved in checkpoints).
 */
#ifndef GRPO_RNG_H
#define GRPO_RNG_H

#include <stdint.h>

typedef struct grpo_rng {
    uint64_t s[4];
} grpo_rng;

void grpo_rng_seed(grpo_rng *r, uint64_t seed);
/* The independent stream (a, b) of a run seeded with seed: the trainer's completion row b of step
 * a (global row: group index * G + member), so a completion is the same whichever rank draws it. */
void grpo_rng_seed_stream(grpo_rng *r, uint64_t seed, uint64_t a, uint64_t b);
uint64_t grpo_rng_next(uint64_t s[4]); /* advances the state; the host-services entry point */
/* Uniform in [0, 1) with 24 random bits (exactly representable as float). */
float grpo_rng_uniform(grpo_rng *r);

#endif
