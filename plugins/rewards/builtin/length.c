/*
 * length.c — length rewards.
 *
 * builtin.length (MiniMind HEAD's window reward): `inside` when the completion, stripped of
 * surrounding whitespace, has between min_chars and max_chars characters (Unicode code points, as
 * Python's len), else `outside`. Defaults: 20..800 -> +0.5 / -0.5.
 *
 * builtin.overlong (DAPO's soft overlong punishment, on completion tokens |y|):
 *   0                               when |y| <= max_length - cache
 *   (max_length - cache - |y|)/cache when max_length - cache < |y| <= max_length
 *   -1                              when |y| > max_length
 */
#include <ctype.h>
#include <math.h>
#include <string.h>

#include "builtin.h"

typedef struct length_state {
    double min_chars, max_chars, inside, outside; /* builtin.length */
    double max_length, cache;                     /* builtin.overlong */
} length_state;

static int32_t length_create(const grpo_host *host, const grpo_config *cfg, void **state,
                             grpo_error *err) {
    (void)host;
    length_state *s = calloc(1, sizeof *s);
    if (!s) return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    int32_t rc = grpo_config_double(cfg, "min_chars", 20, -HUGE_VAL, HUGE_VAL, &s->min_chars, err);
    if (rc == GRPO_OK)
        rc = grpo_config_double(cfg, "max_chars", 800, -HUGE_VAL, HUGE_VAL, &s->max_chars, err);
    if (rc == GRPO_OK)
        rc = grpo_config_double(cfg, "inside", 0.5, -HUGE_VAL, HUGE_VAL, &s->inside, err);
    if (rc == GRPO_OK)
        rc = grpo_config_double(cfg, "outside", -0.5, -HUGE_VAL, HUGE_VAL, &s->outside, err);
    if (rc != GRPO_OK) return free(s), rc;
    *state = s;
    return GRPO_OK;
}

/* Code points of text with leading/trailing ASCII whitespace removed (Python's str.strip also
 * strips Unicode spaces; completions rarely end in them). */
static size_t stripped_chars(const char *text) {
    const char *b = text, *e = text + strlen(text);
    while (b < e && isspace((unsigned char)*b)) b++;
    while (e > b && isspace((unsigned char)e[-1])) e--;
    size_t n = 0;
    for (; b < e; b++) n += ((unsigned char)*b & 0xC0) != 0x80; /* count lead bytes */
    return n;
}

static int32_t length_score(void *state, const grpo_sample *samples, uint32_t n, float *out,
                            grpo_error *err) {
    (void)err;
    const length_state *s = state;
    for (uint32_t k = 0; k < n; k++) {
        double len = (double)stripped_chars(samples[k].completion);
        out[k] = (float)(len >= s->min_chars && len <= s->max_chars ? s->inside : s->outside);
    }
    return GRPO_OK;
}

static int32_t overlong_create(const grpo_host *host, const grpo_config *cfg, void **state,
                               grpo_error *err) {
    (void)host;
    length_state *s = calloc(1, sizeof *s);
    if (!s) return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    int32_t rc =
        grpo_config_double(cfg, "max_length", 1024, -HUGE_VAL, HUGE_VAL, &s->max_length, err);
    if (rc == GRPO_OK)
        rc = grpo_config_double(cfg, "cache", 256, -HUGE_VAL, HUGE_VAL, &s->cache, err);
    if (rc == GRPO_OK && !(s->cache > 0 && s->cache <= s->max_length))
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "[%s] cache: expected 0 < cache <= max_length (%g), got %g",
                            cfg->section, s->max_length, s->cache);
    if (rc != GRPO_OK) return free(s), rc;
    *state = s;
    return GRPO_OK;
}

static int32_t overlong_score(void *state, const grpo_sample *samples, uint32_t n, float *out,
                              grpo_error *err) {
    (void)err;
    const length_state *s = state;
    double start = s->max_length - s->cache;
    for (uint32_t k = 0; k < n; k++) {
        double len = samples[k].n_completion_ids;
        out[k] = (float)(len <= start ? 0.0 : len <= s->max_length ? (start - len) / s->cache : -1.0);
    }
    return GRPO_OK;
}

const grpo_reward_desc builtin_length_reward = {
    .struct_size = sizeof(grpo_reward_desc),
    .id = "builtin.length",
    .description = "Length window reward (MiniMind HEAD): inside/outside [min_chars, max_chars]",
    .flags = GRPO_REWARD_THREADSAFE,
    .create = length_create,
    .score = length_score,
    .destroy = free,
};

const grpo_reward_desc builtin_overlong_reward = {
    .struct_size = sizeof(grpo_reward_desc),
    .id = "builtin.overlong",
    .description = "DAPO soft overlong punishment on completion tokens",
    .flags = GRPO_REWARD_THREADSAFE,
    .create = overlong_create,
    .score = overlong_score,
    .destroy = free,
};
