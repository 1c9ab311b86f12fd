/*
 * grpo/config.h — typed readers of a plugin's grpo_config (ABI 1.3). Included by grpo/plugin.h.
 *
 * Header-only: the code is compiled into the plugin, so a plugin that uses these readers needs
 * no newer host than it did before (they read grpo_config 1.0 fields only).
 *
 * The host has already checked each value against the type pack.ini declares and filled in the
 * declared defaults; these readers turn the text into a value once more, by the same rules, and
 * add what a type cannot say (a range, a set of words). Rules:
 * - A value is parsed whole: "5 extra", " 5", "" are errors. Numbers are decimal ("0x10", "inf",
 *   "nan", "1e400" are errors); a bool is true/yes/on/1 or false/no/off/0 in any case.
 * - An absent key gives def (a host that fills defaults never leaves a declared key absent).
 *   A list key is read at its first value.
 * - On success *out is set and GRPO_OK returned; on a bad value *out is untouched, err gets one
 *   line naming the section, the key, what was expected and the value as written, e.g.
 *     [reward.fmt] value: expected a finite number, got 'x'
 *     [reward.rm] batch_size: expected an integer in [1, 65536], got '0'
 *     [reward.acc] match: expected one of exact, numeric, got 'fuzzy'
 *   and GRPO_ERR_INVALID returned.
 * - Ranges are closed: lo <= value <= hi. A bound of -HUGE_VAL / HUGE_VAL (doubles) or
 *   INT32_MIN / INT32_MAX (ints) is "no bound" and left out of the message.
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

static inline const char *grpo_config_section_(const grpo_config *cfg) {
    return cfg && cfg->section ? cfg->section : "config";
}

/* A number in [lo, hi]. */
static inline int32_t grpo_config_double(const grpo_config *cfg, const char *key, double def,
                                         double lo, double hi, double *out, grpo_error *err) {
    const char *t = grpo_config_get(cfg, key);
    double v = def;
    if (t && !grpo_text_double(t, &v))
        return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] %s: expected a finite number, got '%s'",
                              grpo_config_section_(cfg), key, t);
    if (t && (v < lo || v > hi)) {
        const char *s = grpo_config_section_(cfg);
        if (lo != -HUGE_VAL && hi != HUGE_VAL)
            return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] %s: expected a number in [%g, %g], "
                                  "got '%s'", s, key, lo, hi, t);
        return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] %s: expected a number %s %g, got '%s'",
                              s, key, v < lo ? ">=" : "<=", v < lo ? lo : hi, t);
    }
    *out = v;
    return GRPO_OK;
}

/* An integer in [lo, hi]. */
static inline int32_t grpo_config_int(const grpo_config *cfg, const char *key, int32_t def,
                                      int32_t lo, int32_t hi, int32_t *out, grpo_error *err) {
    const char *t = grpo_config_get(cfg, key);
    int64_t v = def;
    if (t && !grpo_text_int(t, &v))
        return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] %s: expected an integer, got '%s'",
                              grpo_config_section_(cfg), key, t);
    if (t && (v < lo || v > hi)) {
        const char *s = grpo_config_section_(cfg);
        if (lo != INT32_MIN && hi != INT32_MAX)
            return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] %s: expected an integer in [%ld, "
                                  "%ld], got '%s'", s, key, (long)lo, (long)hi, t);
        return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] %s: expected an integer %s %ld, got "
                              "'%s'", s, key, v < lo ? ">=" : "<=", (long)(v < lo ? lo : hi), t);
    }
    *out = (int32_t)v;
    return GRPO_OK;
}

/* A bool: *out is 1 or 0. */
static inline int32_t grpo_config_bool(const grpo_config *cfg, const char *key, int32_t def,
                                       int32_t *out, grpo_error *err) {
    const char *t = grpo_config_get(cfg, key);
    int32_t v = def;
    if (t && !grpo_text_bool(t, &v))
        return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] %s: expected true or false, got '%s'",
                              grpo_config_section_(cfg), key, t);
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
    char list[512] = "";
    size_t used = 0;
    for (int32_t i = 0; choices[i]; i++) {
        if (strcmp(t, choices[i]) == 0) return *out = i, GRPO_OK;
        int n = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", choices[i]);
        used = n < 0 ? used : used + (size_t)n < sizeof list ? used + (size_t)n : sizeof list - 1;
    }
    return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] %s: expected one of %s, got '%s'",
                          grpo_config_section_(cfg), key, list, t);
}

#ifdef __cplusplus
}
#endif
#endif /* GRPO_SDK_CONFIG_H */
