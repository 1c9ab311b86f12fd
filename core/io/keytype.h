/*
 * keytype.h — the types a configuration key can have, shared by run files (config.c) and pack
 * manifests (manifest.c): one parser and one validator for both.
 */
#ifndef GRPO_KEYTYPE_H
#define GRPO_KEYTYPE_H

#include <stddef.h>

#include "grpo/config.h"

typedef enum grpo_key_type {
    GRPO_KEY_STRING = 0,
    GRPO_KEY_INT,
    GRPO_KEY_FLOAT,
    GRPO_KEY_BOOL,
    GRPO_KEY_LIST, /* a list of strings: the key is repeated, one line per element */
    GRPO_KEY_TYPE_COUNT
} grpo_key_type;

/* "string", "int", "float", "bool", "list". */
const char *grpo_key_type_name(grpo_key_type t);
/* Parses a type name; returns -1 when unknown. */
int grpo_key_type_parse(const char *name);
/* Checks that text is a valid value of type t. On failure returns 0 and writes what was expected
 * into why (e.g. "expected a number, got 'abc'"). */
int grpo_key_value_ok(grpo_key_type t, const char *text, char *why, size_t why_size);
/* The typed readers of a value's text are the SDK's (grpo/config.h: grpo_text_int,
 * grpo_text_double, grpo_text_bool), so a plugin parses its keys exactly as the host does. */

#endif
