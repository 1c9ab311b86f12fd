/*
 * tags.c — builtin.tags: value for each configured tag that occurs exactly once in the completion.
 * Occurrences are counted like Python's str.count (non-overlapping, left to right), so the defaults
 * reproduce MiniMind's mark_num: 0.25 for each of <think>, </think>, <answer>, </answer>.
 */
#include <math.h>
#include <string.h>

#include "builtin.h"

typedef struct tags_state {
    char **tags; /* [n_tags] owned copies */
    uint32_t n_tags;
    double value;
} tags_state;

static void tags_destroy(void *state) {
    tags_state *s = state;
    if (!s) return;
    for (uint32_t i = 0; i < s->n_tags; i++) free(s->tags[i]);
    free(s->tags);
    free(s);
}

static int32_t tags_create(const grpo_host *host, const grpo_config *cfg, void **state,
                           grpo_error *err) {
    (void)host;
    tags_state *s = calloc(1, sizeof *s);
    if (!s) return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    int32_t rc = grpo_config_double(cfg, "value", 0.25, -HUGE_VAL, HUGE_VAL, &s->value, err);
    uint32_t n = grpo_config_count(cfg, "tag");
    s->tags = calloc(n ? n : 1, sizeof *s->tags);
    if (rc == GRPO_OK && !s->tags) rc = grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    for (uint32_t i = 0; rc == GRPO_OK && i < n; i++, s->n_tags++) {
        const char *tag = grpo_config_nth(cfg, "tag", i);
        if (!*tag) rc = grpo_error_set(err, GRPO_ERR_INVALID, "[%s] tag %u is empty", cfg->section, i + 1);
        else if (!(s->tags[i] = strdup(tag))) rc = grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    }
    if (rc != GRPO_OK) {
        tags_destroy(s);
        return rc;
    }
    *state = s;
    return GRPO_OK;
}

/* Non-overlapping occurrences of needle in text, as Python's str.count. */
static uint32_t count_occurrences(const char *text, const char *needle) {
    size_t len = strlen(needle);
    uint32_t c = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + len, needle)) c++;
    return c;
}

static int32_t tags_score(void *state, const grpo_sample *samples, uint32_t n, float *out,
                          grpo_error *err) {
    (void)err;
    tags_state *s = state;
    for (uint32_t k = 0; k < n; k++) {
        double r = 0.0;
        for (uint32_t i = 0; i < s->n_tags; i++)
            if (count_occurrences(samples[k].completion, s->tags[i]) == 1) r += s->value;
        out[k] = (float)r;
    }
    return GRPO_OK;
}

const grpo_reward_desc builtin_tags_reward = {
    .struct_size = sizeof(grpo_reward_desc),
    .id = "builtin.tags",
    .description = "Tag count reward (MiniMind's mark_num by default)",
    .flags = GRPO_REWARD_THREADSAFE,
    .create = tags_create,
    .score = tags_score,
    .destroy = tags_destroy,
};
