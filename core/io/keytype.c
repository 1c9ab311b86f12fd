/* keytype.c — parsing and validation of typed configuration values. */
#include "io/keytype.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const type_names[GRPO_KEY_TYPE_COUNT] = {"string", "int", "float", "bool",
                                                            "list"};

const char *grpo_key_type_name(grpo_key_type t) {
    return (unsigned)t < GRPO_KEY_TYPE_COUNT ? type_names[t] : "?";
}

int grpo_key_type_parse(const char *name) {
    for (int i = 0; i < GRPO_KEY_TYPE_COUNT; i++)
        if (strcasecmp(name, type_names[i]) == 0) return i;
    return -1;
}

int grpo_parse_int(const char *text, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE) return 0;
    *out = v;
    return 1;
}

int grpo_parse_float(const char *text, double *out) {
    char *end;
    if (text[strspn(text, "0123456789+-.eE")] != '\0') return 0; /* decimal only: no 0x10, inf */
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v)) return 0;
    *out = v;
    return 1;
}

int grpo_parse_bool(const char *text, int *out) {
    static const char *const yes[] = {"true", "yes", "on", "1"}, *const no[] = {"false", "no",
                                                                                  "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(text, yes[i]) == 0) return *out = 1, 1;
        if (strcasecmp(text, no[i]) == 0) return *out = 0, 1;
    }
    return 0;
}

int grpo_key_value_ok(grpo_key_type t, const char *text, char *why, size_t why_size) {
    long long i;
    double f;
    int b;
    switch (t) {
    case GRPO_KEY_STRING:
    case GRPO_KEY_LIST: return 1;
    case GRPO_KEY_INT:
        if (grpo_parse_int(text, &i)) return 1;
        snprintf(why, why_size, "expected an integer, got '%s'", text);
        return 0;
    case GRPO_KEY_FLOAT:
        if (grpo_parse_float(text, &f)) return 1;
        snprintf(why, why_size, "expected a finite number, got '%s'", text);
        return 0;
    case GRPO_KEY_BOOL:
        if (grpo_parse_bool(text, &b)) return 1;
        snprintf(why, why_size, "expected true or false, got '%s'", text);
        return 0;
    default: snprintf(why, why_size, "unknown key type %d", (int)t); return 0;
    }
}
