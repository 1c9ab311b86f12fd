/* env_reward.c — builtin.env: the reward an environment gave the episode ([env], grpo/env.h).
 * The host puts each episode's reward (final + step rewards) in the sample's field env_reward;
 * this reward passes it on, so it takes a weight and shows in metrics like any other. A sample
 * without the field (a run without [env]) or with null gets NaN: no opinion. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"

static int32_t env_create(const grpo_host *host, const grpo_config *cfg, void **state,
                          grpo_error *err) {
    (void)host, (void)cfg, (void)err;
    *state = NULL;
    return GRPO_OK;
}

static int32_t env_score(void *state, const grpo_sample *samples, uint32_t n, float *out,
                         grpo_error *err) {
    (void)state;
    for (uint32_t i = 0; i < n; i++) {
        const char *v = grpo_sample_field(&samples[i], "env_reward");
        if (v && !strcmp(v, "null")) v = NULL;
        char *end = NULL;
        double r = v ? strtod(v, &end) : NAN;
        if (v && (end == v || *end))
            return grpo_error_set(err, GRPO_ERR_INVALID, "sample %u: field env_reward is '%.40s'; "
                                  "expected a number or null", i, v);
        out[i] = (float)r;
    }
    return GRPO_OK;
}

static void env_destroy(void *state) {
    (void)state;
}

const grpo_reward_desc builtin_env_reward = {
    .struct_size = sizeof(grpo_reward_desc),
    .id = "builtin.env",
    .description = "the reward the episode's environment gave ([env]; field env_reward)",
    .flags = GRPO_REWARD_THREADSAFE,
    .create = env_create,
    .score = env_score,
    .destroy = env_destroy,
};
