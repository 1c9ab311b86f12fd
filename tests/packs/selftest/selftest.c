/* selftest.c — rewards for the self-test runner's test (tests/test_pack_selftest.c): st.len and
 * st.answer behave, st.nan has no opinion on anything, st.noisy prints to stdout. */
#include "grpo/grpo.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

GRPO_PLUGIN_MAGIC()

static int32_t st_create(const grpo_host *host, const grpo_config *cfg, void **state,
                         grpo_error *err) {
    (void)host, (void)err;
    const char *scale = grpo_config_get(cfg, "scale");
    float *s = malloc(sizeof *s);
    if (!s) return GRPO_ERR_NOMEM;
    *s = scale ? strtof(scale, NULL) : 1.0f;
    *state = s;
    return GRPO_OK;
}

static void st_destroy(void *state) { free(state); }

static int32_t len_score(void *state, const grpo_sample *s, uint32_t n, float *out,
                         grpo_error *err) {
    (void)err;
    for (uint32_t i = 0; i < n; i++) out[i] = *(float *)state * (float)strlen(s[i].completion);
    return GRPO_OK;
}

static int32_t answer_score(void *state, const grpo_sample *s, uint32_t n, float *out,
                            grpo_error *err) {
    (void)state, (void)err;
    for (uint32_t i = 0; i < n; i++) {
        const char *a = grpo_sample_field(&s[i], "answer");
        out[i] = !a ? NAN : strcmp(a, s[i].completion) == 0 ? 1.0f : 0.0f;
    }
    return GRPO_OK;
}

static int32_t nan_score(void *state, const grpo_sample *s, uint32_t n, float *out,
                         grpo_error *err) {
    (void)state, (void)s, (void)err;
    for (uint32_t i = 0; i < n; i++) out[i] = NAN;
    return GRPO_OK;
}

static int32_t noisy_score(void *state, const grpo_sample *s, uint32_t n, float *out,
                           grpo_error *err) {
    (void)state, (void)s, (void)err;
    printf("scoring %u samples\n", n);
    for (uint32_t i = 0; i < n; i++) out[i] = 1.0f;
    return GRPO_OK;
}

#define ST_REWARD(ID, SCORE, DESC)                                                           \
    {                                                                                        \
        /* .struct_size = */ sizeof(grpo_reward_desc), /* .id = */ ID,                       \
        /* .description = */ DESC, /* .flags = */ 0, /* .create = */ st_create,              \
        /* .score = */ SCORE, /* .destroy = */ st_destroy,                                   \
    }

static const grpo_reward_desc rewards[] = {
    ST_REWARD("st.len", len_score, "the completion's length in bytes, times scale"),
    ST_REWARD("st.answer", answer_score, "1 when the completion equals the answer field"),
    ST_REWARD("st.nan", nan_score, "NaN for every sample"),
    ST_REWARD("st.noisy", noisy_score, "1 for every sample, printing to stdout"),
};

static const grpo_reward_desc *get_reward(uint32_t i) {
    return i < sizeof rewards / sizeof rewards[0] ? &rewards[i] : NULL;
}

GRPO_EXPORT int32_t grpo_plugin_init(const grpo_host *host, grpo_library *lib, grpo_error *err) {
    (void)host, (void)err;
    lib->get_reward = get_reward;
    return GRPO_OK;
}
