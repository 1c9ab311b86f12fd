/*
 * repetition.c — builtin.repetition: MiniMind HEAD's n-gram repetition penalty, as a reward.
 *
 *   tokens  = findall(\w+ | [^\w\s]) of the lower-cased text (PCRE2, Unicode properties)
 *   grams   = the n-grams of tokens, G of them
 *   reward  = -min(cap, (G - distinct(grams)) * cap * 2 / G), 0 when G == 0
 * scope = answer scores only the text after the first </think> (stripped), as MiniMind does when
 * the completion has one; scope = all scores the whole completion.
 * Differences from Python, documented: lower-casing is the C library's per-code-point towlower
 * (Python's str.lower also does the few one-to-many mappings), and PCRE2's \w is letters, numbers
 * and underscore. A tokenizing match that fails (PCRE2 limits, pattern.h) scores the sample NaN
 * with one warning per instance.
 */
#include <ctype.h>
#include <locale.h>
#include <math.h>
#include <string.h>
#include <wctype.h>

#include "builtin.h"
#include "builtin_log.h"
#include "pattern.h"

enum { SCOPE_ANSWER, SCOPE_ALL };

typedef struct repetition_state {
    pcre2_code *token_re;
    pcre2_match_data *match;
    pcre2_match_context *limits;
    const grpo_host *host;
    int warned; /* a failed match was logged */
    char section[128];
    locale_t utf8; /* for towlower_l; (locale_t)0 when C.UTF-8 is missing: ASCII lower-casing */
    int32_t n;    /* n-gram size */
    double cap;
    int32_t scope; /* SCOPE_* */
} repetition_state;

static void repetition_destroy(void *state) {
    repetition_state *s = state;
    if (!s) return;
    pcre2_code_free(s->token_re);
    pcre2_match_data_free(s->match);
    pcre2_match_context_free(s->limits);
    if (s->utf8) freelocale(s->utf8);
    free(s);
}

static int32_t repetition_create(const grpo_host *host, const grpo_config *cfg, void **state,
                                 grpo_error *err) {
    repetition_state *s = calloc(1, sizeof *s);
    if (!s) return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    s->host = host;
    snprintf(s->section, sizeof s->section, "%s", cfg->section);
    static const char *const scopes[] = {"answer", "all", NULL};
    int32_t rc = grpo_config_int(cfg, "n", 3, 1, 16, &s->n, err);
    if (rc == GRPO_OK) rc = grpo_config_double(cfg, "cap", 0.5, -HUGE_VAL, HUGE_VAL, &s->cap, err);
    if (rc == GRPO_OK) rc = grpo_config_choice(cfg, "scope", scopes, SCOPE_ANSWER, &s->scope, err);
    int code;
    PCRE2_SIZE at;
    s->token_re = pcre2_compile((PCRE2_SPTR) "\\w+|[^\\w\\s]", PCRE2_ZERO_TERMINATED,
                                PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code, &at, NULL);
    s->match = pcre2_match_data_create(1, NULL);
    s->limits = builtin_match_context();
    s->utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    if (rc == GRPO_OK && (!s->token_re || !s->match || !s->limits))
        rc = grpo_error_set(err, GRPO_ERR_INTERNAL, "[%s] cannot build the token pattern", cfg->section);
    if (rc != GRPO_OK) return repetition_destroy(s), rc;
    *state = s;
    return GRPO_OK;
}

/* Decodes one UTF-8 code point at p (n bytes left) into *cp; returns its length, 0 if invalid. */
static size_t utf8_decode(const unsigned char *p, size_t n, uint32_t *cp) {
    size_t len = p[0] < 0x80 ? 1 : (p[0] & 0xE0) == 0xC0 ? 2 : (p[0] & 0xF0) == 0xE0 ? 3
               : (p[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (!len || len > n) return 0;
    uint32_t c = len == 1 ? p[0] : p[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        c = c << 6 | (p[i] & 0x3F);
    }
    *cp = c;
    return len;
}

static size_t utf8_encode(uint32_t c, char *out) {
    if (c < 0x80) return out[0] = (char)c, 1;
    if (c < 0x800) return out[0] = (char)(0xC0 | c >> 6), out[1] = (char)(0x80 | (c & 0x3F)), 2;
    if (c < 0x10000) {
        out[0] = (char)(0xE0 | c >> 12), out[1] = (char)(0x80 | (c >> 6 & 0x3F));
        out[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | c >> 18), out[1] = (char)(0x80 | (c >> 12 & 0x3F));
    out[2] = (char)(0x80 | (c >> 6 & 0x3F)), out[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* Lower-cases UTF-8 text code point by code point into a new string; invalid bytes are copied. */
static char *lower_utf8(const repetition_state *s, const char *text) {
    size_t len = strlen(text), o = 0;
    char *out = malloc(len * 2 + 1); /* towlower never more than doubles a UTF-8 sequence */
    if (!out) return NULL;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = utf8_decode((const unsigned char *)text + i, len - i, &cp);
        if (!k) {
            out[o++] = text[i++];
            continue;
        }
        uint32_t low = s->utf8 ? (uint32_t)towlower_l((wint_t)cp, s->utf8)
                               : (cp < 0x80 ? (uint32_t)tolower((int)cp) : cp);
        o += utf8_encode(low, out + o);
        i += k;
    }
    out[o] = 0;
    return out;
}

/* Token spans [start, end) of text by the \w+|[^\w\s] pattern; returns the count, -1 on OOM.
 * *code is the PCRE2 error of a match that failed (a limit), else 0. */
static int tokenize(repetition_state *s, const char *text, size_t **spans, int *code) {
    size_t len = strlen(text), off = 0, cap = 64;
    int n = 0;
    *spans = malloc(cap * 2 * sizeof **spans);
    *code = PCRE2_ERROR_NOMATCH;
    while (*spans && off <= len &&
           (*code = pcre2_match(s->token_re, (PCRE2_SPTR)text, len, off, 0, s->match,
                                s->limits)) >= 0) {
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->match);
        if ((size_t)n == cap) {
            size_t *grown = realloc(*spans, (cap *= 2) * 2 * sizeof **spans);
            if (!grown) break;
            *spans = grown;
        }
        (*spans)[2 * n] = ov[0], (*spans)[2 * n + 1] = ov[1];
        n++;
        off = ov[1] > ov[0] ? ov[1] : ov[1] + 1;
    }
    if (*code >= 0 || *code == PCRE2_ERROR_NOMATCH) *code = 0; /* stopped at the end, or OOM */
    return *spans ? n : -1;
}

/* Number of n-grams that repeat an earlier one (G - distinct), by direct comparison: completions
 * are short, and G^2 token compares on a few hundred tokens is cheaper than a hash set. */
static int repeated_grams(const char *text, const size_t *spans, int n_tokens, int n) {
    int G = n_tokens - n + 1, repeats = 0;
    for (int g = 1; g < G; g++)
        for (int h = 0; h < g; h++) {
            int same = 1;
            for (int t = 0; same && t < n; t++) {
                const size_t *a = spans + 2 * (g + t), *b = spans + 2 * (h + t);
                same = a[1] - a[0] == b[1] - b[0] && !memcmp(text + a[0], text + b[0], a[1] - a[0]);
            }
            if (same) {
                repeats++;
                break;
            }
        }
    return repeats;
}

/* The text MiniMind scores: after the first </think>, stripped, when scope = answer. */
static const char *scored_text(const repetition_state *s, const char *completion) {
    const char *close = s->scope == SCOPE_ANSWER ? strstr(completion, "</think>") : NULL;
    return close ? close + 8 : completion;
}

/* Logs the first sample of this instance whose tokenizing match failed; it scores NaN. */
static void repetition_match_failed(repetition_state *s, const grpo_sample *x, uint32_t k, int code) {
    if (s->warned) return;
    s->warned = 1;
    PCRE2_UCHAR why[256];
    pcre2_get_error_message(code, why, sizeof why);
    builtin_log(s->host, GRPO_LOG_WARN, "builtin.repetition",
                "[%s] sample %u (group %u, member %u): tokenizing failed: %s; the sample scores "
                "NaN (warned once per reward)", s->section, k, x->group, x->member, (const char *)why);
}

static int32_t repetition_score(void *state, const grpo_sample *samples, uint32_t n, float *out,
                                grpo_error *err) {
    repetition_state *s = state;
    int gram = s->n;
    for (uint32_t k = 0; k < n; k++) {
        char *text = lower_utf8(s, scored_text(s, samples[k].completion));
        size_t *spans = NULL;
        int code = 0, n_tokens = text ? tokenize(s, text, &spans, &code) : -1;
        if (code) {
            repetition_match_failed(s, &samples[k], k, code);
            out[k] = NAN;
            free(text);
            free(spans);
            continue;
        }
        if (n_tokens < 0) {
            free(text);
            free(spans);
            return grpo_error_set(err, GRPO_ERR_NOMEM, "builtin.repetition: out of memory");
        }
        int G = n_tokens - gram + 1;
        double penalty = 0.0;
        if (G > 0) {
            penalty = repeated_grams(text, spans, n_tokens, gram) * s->cap * 2.0 / G;
            penalty = penalty < s->cap ? penalty : s->cap;
        }
        out[k] = (float)-penalty;
        free(text);
        free(spans);
    }
    return GRPO_OK;
}

const grpo_reward_desc builtin_repetition_reward = {
    .struct_size = sizeof(grpo_reward_desc),
    .id = "builtin.repetition",
    .description = "N-gram repetition penalty (MiniMind HEAD rep_penalty), as a negative reward",
    .flags = 0, /* one match_data per state */
    .create = repetition_create,
    .score = repetition_score,
    .destroy = repetition_destroy,
};
