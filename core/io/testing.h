/*
 * io/testing.h — entry points of the io layer that only tests and fuzzers call: white-box
 * checks of a module's inner steps (the module itself calls them). They are not part of the
 * layer's interface: no file of core/ outside io/ includes this header (scripts/check_layers.sh
 * checks it).
 */
#ifndef GRPO_IO_TESTING_H
#define GRPO_IO_TESTING_H

#include "io/dataset.h"
#include "io/safetensors.h"

/* ---- dataset.c --------------------------------------------------------------------------------- */
/* Applies the policy to ids[0..*n): returns 1 to keep the example (ids left-truncated in place,
 * *n updated) or 0 to skip it. max_len == 0 means no limit. */
int grpo_prompt_limit(int32_t *ids, size_t *n, size_t max_len, grpo_prompt_policy policy);

/* splitmix64: state += 0x9E3779B97F4A7C15; z = state; z = (z ^ z>>30) * 0xBF58476D1CE4E5B9;
 * z = (z ^ z>>27) * 0x94D049BB133111EB; return z ^ z>>31. */
uint64_t grpo_splitmix64(uint64_t *state);

/* ---- safetensors.c ----------------------------------------------------------------------------- */
/* Exact conversions (the loader's own, checked bit for bit). */
float grpo_f16_to_f32(uint16_t h);
float grpo_bf16_to_f32(uint16_t b);
uint16_t grpo_f32_to_bf16(float f); /* round to nearest even; NaN -> quiet NaN (0x7fc0|sign) */

/* A "__metadata__" string value of the (first) file, e.g. "format" -> "pt", or NULL. */
const char *grpo_st_metadata(const grpo_safetensors *st, const char *key);

#endif
