/*
 * format.c — builtin.format: a reward for completions whose text matches a PCRE2 pattern.
 *
 * Matching follows Python's re.match as MiniMind uses it: anchored at the start, '$' matches at
 * the end or before a final newline, '.' matches newlines when dotall (re.S). full_match adds an
 * end anchor (re.fullmatch). With the defaults the reward is exactly MiniMind's reasoning-format
 * reward: 0.5 when the completion matches either
 *   ^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$   or the same with \n\n after </think>.
 * A match that hits the PCRE2 limits of pattern.h leaves its sample's value unknown: that sample
 * scores NaN, the first such sample of an instance is logged, and destroy() says how many there were.
 */
#include <math.h>
#include <string.h>

#include "builtin.h"
#include "builtin_log.h"
#include "pattern.h"

typedef struct format_state {
    pcre2_code **patterns; /* [n_patterns] compiled */
    uint32_t n_patterns;
    pcre2_match_data *match;
    pcre2_match_context *limits; /* pattern.h: a completion must not stall or kill the run */
    const grpo_host *host;
    char section[128];
    uint64_t limit_hits; /* samples scored NaN because a match hit a limit */
    double value;
    int sum; /* combine = sum: value per matching pattern; else value once */
    uint32_t match_options;
} format_state;

static void format_destroy(void *state) {
    format_state *s = state;
    if (!s) return;
    if (s->limit_hits > 1)
        builtin_log(s->host, GRPO_LOG_WARN, "builtin.format",
                    "[%s] %llu samples in all scored NaN because a pattern hit PCRE2's limits",
                    s->section, (unsigned long long)s->limit_hits);
    for (uint32_t i = 0; i < s->n_patterns; i++) pcre2_code_free(s->patterns[i]);
    free(s->patterns);
    pcre2_match_data_free(s->match);
    pcre2_match_context_free(s->limits);
    free(s);
}

static int32_t format_compile(format_state *s, const grpo_config *cfg, int32_t dotall,
                              grpo_error *err) {
    uint32_t options = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (dotall ? PCRE2_DOTALL : 0);
    for (uint32_t i = 0; i < s->n_patterns; i++) {
        const char *text = grpo_config_nth(cfg, "pattern", i);
        int code;
        PCRE2_SIZE at;
        s->patterns[i] = pcre2_compile((PCRE2_SPTR)text, PCRE2_ZERO_TERMINATED, options, &code, &at, NULL);
        if (!s->patterns[i]) {
            PCRE2_UCHAR why[256];
            pcre2_get_error_message(code, why, sizeof why);
            return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] pattern %u '%s': %s at offset %zu",
                                  cfg->section, i + 1, text, (const char *)why, (size_t)at);
        }
    }
    return GRPO_OK;
}

static int32_t format_create(const grpo_host *host, const grpo_config *cfg, void **state,
                             grpo_error *err) {
    format_state *s = calloc(1, sizeof *s);
    if (!s) return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    s->host = host;
    snprintf(s->section, sizeof s->section, "%s", cfg->section);
    static const char *const combines[] = {"any", "sum", NULL};
    int32_t dotall = 1, full = 0, combine = 0;
    int32_t rc = grpo_config_double(cfg, "value", 0.5, -HUGE_VAL, HUGE_VAL, &s->value, err);
    if (rc == GRPO_OK) rc = grpo_config_bool(cfg, "dotall", 1, &dotall, err);
    if (rc == GRPO_OK) rc = grpo_config_bool(cfg, "full_match", 0, &full, err);
    if (rc == GRPO_OK) rc = grpo_config_choice(cfg, "combine", combines, 0, &combine, err);
    s->sum = combine == 1;
    s->n_patterns = grpo_config_count(cfg, "pattern");
    if (rc == GRPO_OK && s->n_patterns == 0)
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "[%s] needs at least one pattern", cfg->section);
    s->patterns = calloc(s->n_patterns ? s->n_patterns : 1, sizeof *s->patterns);
    s->match = pcre2_match_data_create(1, NULL);
    s->limits = builtin_match_context();
    if (rc == GRPO_OK && (!s->patterns || !s->match || !s->limits))
        rc = grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    if (rc == GRPO_OK) rc = format_compile(s, cfg, dotall, err);
    s->match_options = PCRE2_ANCHORED | (full ? PCRE2_ENDANCHORED : 0);
    if (rc != GRPO_OK) {
        format_destroy(s);
        return rc;
    }
    *state = s;
    return GRPO_OK;
}

/* 1 when pattern i matches text, 0 when not, negative PCRE2 error (e.g. match limit) otherwise. */
static int format_matches(format_state *s, uint32_t i, const char *text) {
    int rc = pcre2_match(s->patterns[i], (PCRE2_SPTR)text, strlen(text), 0, s->match_options,
                         s->match, s->limits);
    return rc >= 0 ? 1 : rc == PCRE2_ERROR_NOMATCH ? 0 : rc;
}

/* The first sample of this instance scored NaN for a failed match gets a warning; later ones
 * are only counted (destroy() reports the count). */
static void format_limit_hit(format_state *s, const grpo_sample *x, uint32_t k, uint32_t pattern,
                             int code) {
    if (s->limit_hits++) return;
    PCRE2_UCHAR why[256];
    pcre2_get_error_message(code, why, sizeof why);
    builtin_log(s->host, GRPO_LOG_WARN, "builtin.format",
                "[%s] pattern %u on sample %u (group %u, member %u, %zu bytes): %s; the sample "
                "scores NaN (warned once per reward)",
                s->section, pattern + 1, k, x->group, x->member, strlen(x->completion),
                (const char *)why);
}

/* value (any) or value x matching patterns (sum); NaN when a failed match leaves it unknown,
 * with the first failing pattern and its PCRE2 code in *pattern, *code. */
static float format_one(format_state *s, const char *text, uint32_t *pattern, int *code) {
    double r = 0.0;
    *code = 0;
    for (uint32_t i = 0; i < s->n_patterns; i++) {
        int m = format_matches(s, i, text);
        if (m < 0 && !*code) *pattern = i, *code = m;
        if (m > 0) {
            r += s->value;
            if (!s->sum) return *code = 0, (float)r; /* any: one match settles it */
        }
    }
    return *code ? NAN : (float)r;
}

static int32_t format_score(void *state, const grpo_sample *samples, uint32_t n, float *out,
                            grpo_error *err) {
    (void)err;
    format_state *s = state;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t pattern = 0;
        int code;
        out[k] = format_one(s, samples[k].completion, &pattern, &code);
        if (code) format_limit_hit(s, &samples[k], k, pattern, code);
    }
    return GRPO_OK;
}

const grpo_reward_desc builtin_format_reward = {
    .struct_size = sizeof(grpo_reward_desc),
    .id = "builtin.format",
    .description = "Regex format reward (MiniMind's reasoning format by default)",
    .flags = 0, /* one match_data per state: not shareable across threads */
    .create = format_create,
    .score = format_score,
    .destroy = format_destroy,
};
