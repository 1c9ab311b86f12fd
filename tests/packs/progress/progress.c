/* progress.c — rewards that read the training progress of a sample (grpo_sample step and
 * total_steps, appended in ABI 1.3), as a curriculum reward would: PACK.step scores the optimizer
 * steps taken before the batch, PACK.total scores train.steps, PACK.member the sample's index in
 * its group. A host whose samples predate the fields gets "no opinion" (NaN), found with
 * GRPO_HAS_FIELD rather than read past the struct.
 *
 * Built twice (tests/progress_pack.cmake): as pack pg against this SDK, and with PG_SDK_1_2 as
 * pack pg12, a library that claims SDK 1.2 in its magic and steps through the samples array with
 * 1.2's sizeof(grpo_sample), as a pack compiled before 1.3 does: the host must lay the array out
 * at that stride for it (core/train/rewards.c). */
#include "grpo/grpo.h"

#include <math.h>
#include <stddef.h>

#ifdef PG_SDK_1_2
#define PG_ID(name) "pg12." name
#define PG_SAMPLE_SIZE offsetof(grpo_sample, step) /* sizeof(grpo_sample) in SDK 1.2 */
#else
#define PG_ID(name) "pg." name
#define PG_SAMPLE_SIZE sizeof(grpo_sample)
#endif

/* samples[i] as a library built with PG_SAMPLE_SIZE-byte samples indexes it. */
static const grpo_sample *sample_at(const grpo_sample *samples, uint32_t i) {
    return (const grpo_sample *)((const char *)samples + (size_t)i * PG_SAMPLE_SIZE);
}

static int32_t pg_create(const grpo_host *host, const grpo_config *cfg, void **state,
                         grpo_error *err) {
    (void)host, (void)cfg, (void)err;
    *state = NULL;
    return GRPO_OK;
}

enum { PG_STEP, PG_TOTAL, PG_MEMBER };

static float value(const grpo_sample *s, int what) {
    if (what == PG_MEMBER) return (float)s->member;
    if (!GRPO_HAS_FIELD(s, grpo_sample, total_steps)) return NAN;
    return (float)(what == PG_TOTAL ? s->total_steps : s->step);
}

static int32_t score(const grpo_sample *samples, uint32_t n, float *out, int what) {
    for (uint32_t i = 0; i < n; i++) out[i] = value(sample_at(samples, i), what);
    return GRPO_OK;
}

static int32_t pg_step(void *state, const grpo_sample *samples, uint32_t n, float *out,
                       grpo_error *err) {
    (void)state, (void)err;
    return score(samples, n, out, PG_STEP);
}

static int32_t pg_total(void *state, const grpo_sample *samples, uint32_t n, float *out,
                        grpo_error *err) {
    (void)state, (void)err;
    return score(samples, n, out, PG_TOTAL);
}

static int32_t pg_member(void *state, const grpo_sample *samples, uint32_t n, float *out,
                         grpo_error *err) {
    (void)state, (void)err;
    return score(samples, n, out, PG_MEMBER);
}

static void pg_destroy(void *state) { (void)state; }

#define PG_REWARD(NAME, FN, DESC)                                                              \
    {.struct_size = sizeof(grpo_reward_desc), .id = PG_ID(NAME), .description = DESC,          \
     .create = pg_create, .score = FN, .destroy = pg_destroy}

static const grpo_reward_desc rewards[] = {
    PG_REWARD("step", pg_step, "steps taken"),
    PG_REWARD("total", pg_total, "train.steps"),
    PG_REWARD("member", pg_member, "index in the group"),
};

static const grpo_reward_desc *get_reward(uint32_t i) {
    return i < sizeof rewards / sizeof rewards[0] ? &rewards[i] : NULL;
}

#ifdef PG_SDK_1_2
GRPO_EXPORT const grpo_magic *grpo_plugin_magic(void) {
    static const grpo_magic magic = {(uint32_t)sizeof(grpo_magic), GRPO_ABI_MAJOR, 2,
                                     (uint32_t)sizeof(void *), (uint32_t)sizeof(float),
                                     GRPO_MAGIC_TAG};
    return &magic;
}
#else
GRPO_PLUGIN_MAGIC()
#endif

GRPO_EXPORT int32_t grpo_plugin_init(const grpo_host *host, grpo_library *lib, grpo_error *err) {
    (void)host, (void)err;
    lib->get_reward = get_reward;
    return GRPO_OK;
}
