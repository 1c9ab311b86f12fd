/* keytype.c — parsing and validation of typed configuration values. */
#include "io/keytype.h"

#include <stdio.h>
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

int grpo_key_value_ok(grpo_key_type t, const char *text, char *why, size_t why_size) {
    int64_t i;
    double f;
    int32_t b;
    switch (t) {
    case GRPO_KEY_STRING:
    case GRPO_KEY_LIST: return 1;
    case GRPO_KEY_INT:
        if (grpo_text_int(text, &i)) return 1;
        snprintf(why, why_size, "expected an integer, got '%s'", text);
        return 0;
    case GRPO_KEY_FLOAT:
        if (grpo_text_double(text, &f)) return 1;
        snprintf(why, why_size, "expected a finite number, got '%s'", text);
        return 0;
    case GRPO_KEY_BOOL:
        if (grpo_text_bool(text, &b)) return 1;
        snprintf(why, why_size, "expected true or false, got '%s'", text);
        return 0;
    default: snprintf(why, why_size, "unknown key type %d", (int)t); return 0;
    }
}
