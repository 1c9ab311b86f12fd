/* progress.c — rewards that read the training progress of a sample (grpo_sample step and
 * total_steps, appended in ABI 1.3), as a curriculum reward would: pg.step scores the optimizer
 * steps taken before the batch, pg.total scores train.steps. A host whose samples predate the
 * fields gets "no opinion" (NaN), found with GRPO_HAS_FIELD rather than read past the struct. */
#include "grpo/grpo.h"

#include <math.h>

static int32_t pg_create(const grpo_host *host, const grpo_config *cfg, void **state,
                         grpo_error *err) {
    (void)host, (void)cfg, (void)err;
    *state = NULL;
    return GRPO_OK;
}

static float progress(const grpo_sample *s, int total) {
    if (!GRPO_HAS_FIELD(s, grpo_sample, total_steps)) return NAN;
    return (float)(total ? s->total_steps : s->step);
}

static int32_t pg_step(void *state, const grpo_sample *samples, uint32_t n, float *out,
                       grpo_error *err) {
    (void)state, (void)err;
    for (uint32_t i = 0; i < n; i++) out[i] = progress(&samples[i], 0);
    return GRPO_OK;
}

static int32_t pg_total(void *state, const grpo_sample *samples, uint32_t n, float *out,
                        grpo_error *err) {
    (void)state, (void)err;
    for (uint32_t i = 0; i < n; i++) out[i] = progress(&samples[i], 1);
    return GRPO_OK;
}

static void pg_destroy(void *state) { (void)state; }

static const grpo_reward_desc rewards[] = {
    {.struct_size = sizeof(grpo_reward_desc), .id = "pg.step", .description = "steps taken",
     .create = pg_create, .score = pg_step, .destroy = pg_destroy},
    {.struct_size = sizeof(grpo_reward_desc), .id = "pg.total", .description = "train.steps",
     .create = pg_create, .score = pg_total, .destroy = pg_destroy},
};

static const grpo_reward_desc *get_reward(uint32_t i) {
    return i < sizeof rewards / sizeof rewards[0] ? &rewards[i] : NULL;
}

GRPO_PLUGIN_MAGIC()

GRPO_EXPORT int32_t grpo_plugin_init(const grpo_host *host, grpo_library *lib, grpo_error *err) {
    (void)host, (void)err;
    lib->get_reward = get_reward;
    return GRPO_OK;
}
