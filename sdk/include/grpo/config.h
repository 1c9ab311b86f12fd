/*
 * grpo/config.h — typed readers of a plugin's grpo_config (ABI 1.3; history: grpo/plugin.h).
 * Included by grpo/plugin.h.
 *
 * Header-only: the code is compiled into the plugin, so a plugin that uses these readers needs
 * no newer host than it did before (they read grpo_config 1.0 fields only).
 *
 * The host has already checked each value against the type pack.ini declares and filled in the
 * declared defaults; these readers turn the text into a value once more, by the same rules, and
 * add what a type cannot say (a range, a set of words). Rules:
 * - A value is parsed whole: "5 extra", " 5", "" are errors. Numbers are decimal ("0x10", "inf",
 *   "nan", "1e400" are errors); a bool is true/yes/on/1 or false/no/off/0 in any case.
 * - An absent key gives def, as is (not range-checked); a host that fills defaults never leaves
 *   a declared key absent, so def matters to other callers (tests, older hosts). A list key is
 *   read at its first value.
 * - On success *out is set and GRPO_OK returned; on a bad value *out is untouched, err gets one
 *   line naming the section, the key, what was expected and the value as written, e.g.
 *     [reward.fmt] value: expected a finite number, got 'x'
 *     [reward.rm] batch_size: expected an integer in [1, 65536], got '0'
 *     [reward.acc] match: expected one of exact, numeric, got 'fuzzy'
 *   and GRPO_ERR_INVALID returned.
 * - Ranges are closed: lo <= value <= hi. A bound of -HUGE_VAL / HUGE_VAL (doubles) or
 *   INT32_MIN / INT32_MAX (ints) is "no bound" and left out of the message (an int beyond the
 *   int32 limits is refused with them). Exclusive and cross-key bounds are the plugin's own.
 */
#ifndef GRPO_SDK_CONFIG_H /* not GRPO_CONFIG_H: core/config.h has that guard */
#define GRPO_SDK_CONFIG_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grpo/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* -- 1.3: strict parsers of one value's text (the host's own rules for run-file values).
 *    Each returns 1 and sets *out when all of text is one value of its type, else 0. -- */

/* A finite decimal number: digits, sign, '.', exponent; nothing else. */
static inline int grpo_text_double(const char *text, double *out) {
    char *end;
    if (!text || !*text || text[strspn(text, "0123456789+-.eE")] != '\0') return 0;
    errno = 0;
    double v = strtod(text, &end);
    /* v - v is 0 only for a finite v (NaN and infinities give NaN); needs no C99 isfinite */
    if (end == text || *end != '\0' || errno == ERANGE || v - v != 0) return 0;
    *out = v;
    return 1;
}

/* A base-10 integer with an optional sign that fits in 64 bits. */
static inline int grpo_text_int(const char *text, int64_t *out) {
    char *end;
    if (!text || !*text || text[strspn(text, "0123456789+-")] != '\0') return 0;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE) return 0; /* long long: >= 64 bits */
    *out = (int64_t)v;
    return 1;
}

/* true/yes/on/1 -> 1, false/no/off/0 -> 0, ASCII case ignored. */
static inline int grpo_text_bool(const char *text, int32_t *out) {
    static const char *const words[8] = {"false", "no", "off", "0", "true", "yes", "on", "1"};
    for (int w = 0; text && w < 8; w++) {
        const char *a = text, *b = words[w];
        while (*a && (*a == *b || (*a >= 'A' && *a <= 'Z' && *a - 'A' + 'a' == *b))) a++, b++;
        if (!*a && !*b) return *out = w >= 4, 1;
    }
    return 0;
}

/* -- 1.3: readers of one key of a plugin's section -- */

/* Refuses key's text t: err gets "[section] key: expected <what>, got 't'". */
static inline int32_t grpo_config_refuse_(const grpo_config *cfg, const char *key,
                                          const char *what, const char *t, grpo_error *err) {
    return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] %s: expected %s, got '%s'",
                          cfg && cfg->section ? cfg->section : "config", key, what, t);
}

/* "<kind> in [lo, hi]", or "<kind> >= lo" / "<kind> <= hi" when the other bound is NULL (none),
 * into buf; returns buf. */
static inline const char *grpo_config_range_(char *buf, size_t cap, const char *kind,
                                             const char *lo, const char *hi) {
    if (lo && hi) snprintf(buf, cap, "%s in [%s, %s]", kind, lo, hi);
    else if (lo) snprintf(buf, cap, "%s >= %s", kind, lo);
    else if (hi) snprintf(buf, cap, "%s <= %s", kind, hi);
    else snprintf(buf, cap, "%s", kind); /* no bound: never out of range */
    return buf;
}

/* A number in [lo, hi]. */
static inline int32_t grpo_config_double(const grpo_config *cfg, const char *key, double def,
                                         double lo, double hi, double *out, grpo_error *err) {
    const char *t = grpo_config_get(cfg, key);
    double v = def;
    if (t && !grpo_text_double(t, &v))
        return grpo_config_refuse_(cfg, key, "a finite number", t, err);
    if (t && (v < lo || v > hi)) {
        char l[32], h[32], what[96];
        snprintf(l, sizeof l, "%g", lo), snprintf(h, sizeof h, "%g", hi);
        return grpo_config_refuse_(cfg, key, grpo_config_range_(what, sizeof what, "a number",
                                   lo != -HUGE_VAL ? l : NULL, hi != HUGE_VAL ? h : NULL), t, err);
    }
    *out = v;
    return GRPO_OK;
}

/* An integer in [lo, hi]. */
static inline int32_t grpo_config_int(const grpo_config *cfg, const char *key, int32_t def,
                                      int32_t lo, int32_t hi, int32_t *out, grpo_error *err) {
    const char *t = grpo_config_get(cfg, key);
    int64_t v = def;
    if (t && !grpo_text_int(t, &v)) return grpo_config_refuse_(cfg, key, "an integer", t, err);
    if (t && (v < lo || v > hi)) {
        char l[16], h[16], what[64];
        snprintf(l, sizeof l, "%ld", (long)lo), snprintf(h, sizeof h, "%ld", (long)hi);
        /* the int32 limits are "no bound" unless the value is beyond them */
        return grpo_config_refuse_(cfg, key, grpo_config_range_(what, sizeof what, "an integer",
                                   lo != INT32_MIN || v < lo ? l : NULL,
                                   hi != INT32_MAX || v > hi ? h : NULL), t, err);
    }
    *out = (int32_t)v;
    return GRPO_OK;
}

/* A bool: *out is 1 or 0. */
static inline int32_t grpo_config_bool(const grpo_config *cfg, const char *key, int32_t def,
                                       int32_t *out, grpo_error *err) {
    const char *t = grpo_config_get(cfg, key);
    int32_t v = def;
    if (t && !grpo_text_bool(t, &v)) return grpo_config_refuse_(cfg, key, "true or false", t, err);
    *out = v;
    return GRPO_OK;
}

/* One word of choices (NULL-terminated, matched exactly): *out is its index; def is the index an
 * absent key gives. */
static inline int32_t grpo_config_choice(const grpo_config *cfg, const char *key,
                                         const char *const *choices, int32_t def, int32_t *out,
                                         grpo_error *err) {
    const char *t = grpo_config_get(cfg, key);
    if (!t) return *out = def, GRPO_OK;
    char what[512] = "one of ";
    size_t used = strlen(what);
    for (int32_t i = 0; choices[i]; i++) {
        if (strcmp(t, choices[i]) == 0) return *out = i, GRPO_OK;
        int n = snprintf(what + used, sizeof what - used, "%s%s", i ? ", " : "", choices[i]);
        used = n < 0 ? used : used + (size_t)n < sizeof what ? used + (size_t)n : sizeof what - 1;
    }
    return grpo_config_refuse_(cfg, key, what, t, err);
}

#ifdef __cplusplus
}
#endif
#endif /* GRPO_SDK_CONFIG_H */
