/*
 * example_rewards.c — two rewards of a third-party pack. Only <grpo/grpo.h> is included: a pack
 * sees the SDK, never grpo's core. The host has already checked the config values against the
 * types in pack.ini; create() checks what the types cannot say (target > 0, unit's spelling).
 * Error messages say what is wrong and what was expected; the host puts the run file's section
 * and the plugin id in front of them ("[reward.len] (plugin example.length_target): ...").
 */
#include <grpo/grpo.h>

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

GRPO_PLUGIN_MAGIC()

/* ---- example.length_target ------------------------------------------------------------- */

typedef struct length_target {
    int32_t target;    /* length that scores 1 */
    int32_t in_tokens; /* count completion_ids instead of bytes */
} length_target;

static int32_t length_create(const grpo_host *host, const grpo_config *cfg, void **state,
                             grpo_error *err) {
    static const char *const units[] = {"chars", "tokens", NULL};
    length_target t;
    (void)host;
    /* the SDK's typed getters (grpo/config.h) parse strictly and name the key on a bad value */
    int32_t rc = grpo_config_int(cfg, "target", 200, 1, INT32_MAX, &t.target, err);
    if (rc == GRPO_OK) rc = grpo_config_choice(cfg, "unit", units, 0, &t.in_tokens, err);
    if (rc != GRPO_OK) return rc;
    length_target *s = malloc(sizeof *s);
    if (!s) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    *s = t;
    *state = s;
    return GRPO_OK;
}

static int32_t length_score(void *state, const grpo_sample *samples, uint32_t n, float *out,
                            grpo_error *err) {
    (void)err;
    const length_target *s = state;
    for (uint32_t i = 0; i < n; i++) {
        double len = s->in_tokens ? samples[i].n_completion_ids : strlen(samples[i].completion);
        double off = (len - (double)s->target) / (double)s->target;
        out[i] = (float)(1.0 - (off < 0 ? -off : off));
        if (out[i] < 0) out[i] = 0;
    }
    return GRPO_OK;
}

/* ---- example.contains_keyword ---------------------------------------------------------- */

typedef struct contains_keyword {
    char **keywords; /* [n] copies: config strings are borrowed only during create() */
    uint32_t n;
    int case_sensitive;
} contains_keyword;

static void keyword_destroy(void *state);

static int32_t keyword_create(const grpo_host *host, const grpo_config *cfg, void **state,
                              grpo_error *err) {
    contains_keyword *s = calloc(1, sizeof *s);
    uint32_t n = grpo_config_count(cfg, "keywords");
    if (s) s->keywords = calloc(n ? n : 1, sizeof *s->keywords);
    if (!s || !s->keywords) {
        free(s);
        return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    }
    for (uint32_t k = 0; k < n; k++) {
        const char *word = grpo_config_nth(cfg, "keywords", k);
        if (!*word) continue;
        s->keywords[s->n] = malloc(strlen(word) + 1);
        if (!s->keywords[s->n]) {
            keyword_destroy(s);
            return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
        }
        strcpy(s->keywords[s->n++], word);
    }
    const char *cs = grpo_config_get(cfg, "case_sensitive");
    s->case_sensitive = cs && (strcmp(cs, "true") == 0 || strcmp(cs, "yes") == 0 ||
                               strcmp(cs, "on") == 0 || strcmp(cs, "1") == 0);
    if (s->n == 0) host->log(GRPO_LOG_WARN, cfg->section, "no keywords: every score will be 0");
    *state = s;
    return GRPO_OK;
}

static int same_char(char a, char b, int case_sensitive) {
    return case_sensitive ? a == b : tolower((unsigned char)a) == tolower((unsigned char)b);
}

/* 1 when needle occurs in hay (ASCII case folded unless case_sensitive). */
static int contains(const char *hay, const char *needle, int case_sensitive) {
    size_t m = strlen(needle);
    for (; *hay; hay++) {
        size_t j = 0;
        while (j < m && hay[j] && same_char(hay[j], needle[j], case_sensitive)) j++;
        if (j == m) return 1;
    }
    return 0;
}

static int32_t keyword_score(void *state, const grpo_sample *samples, uint32_t n, float *out,
                             grpo_error *err) {
    (void)err;
    const contains_keyword *s = state;
    for (uint32_t i = 0; i < n; i++) {
        out[i] = 0.0f;
        for (uint32_t k = 0; k < s->n && out[i] == 0.0f; k++)
            if (contains(samples[i].completion, s->keywords[k], s->case_sensitive)) out[i] = 1.0f;
    }
    return GRPO_OK;
}

static void keyword_destroy(void *state) {
    contains_keyword *s = state;
    for (uint32_t k = 0; k < s->n; k++) free(s->keywords[k]);
    free(s->keywords);
    free(s);
}

/* ---- the library ------------------------------------------------------------------------ */

static void length_destroy(void *state) { free(state); }

static const grpo_reward_desc rewards[] = {
    {
        .struct_size = sizeof(grpo_reward_desc),
        .id = "example.length_target",
        .description = "1 at the target length, falling linearly to 0",
        .flags = GRPO_REWARD_THREADSAFE,
        .create = length_create,
        .score = length_score,
        .destroy = length_destroy,
    },
    {
        .struct_size = sizeof(grpo_reward_desc),
        .id = "example.contains_keyword",
        .description = "1 when the completion contains a keyword",
        .flags = GRPO_REWARD_THREADSAFE,
        .create = keyword_create,
        .score = keyword_score,
        .destroy = keyword_destroy,
    },
};

static const grpo_reward_desc *get_reward(uint32_t i) {
    return i < sizeof rewards / sizeof rewards[0] ? &rewards[i] : NULL;
}

GRPO_EXPORT int32_t grpo_plugin_init(const grpo_host *host, grpo_library *lib, grpo_error *err) {
    if (!GRPO_HAS_FIELD(host, grpo_host, log) || !host->log)
        return grpo_error_set(err, GRPO_ERR_ABI, "example pack: the host has no log service");
    lib->get_reward = get_reward;
    return GRPO_OK;
}
