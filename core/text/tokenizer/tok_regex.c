/*
 * tok_regex.c — making PCRE2 read tokenizer regexes the way `tokenizers` (Oniguruma) does.
 *
 * The one class that differs: with PCRE2_UCP, PCRE2 10.42's \s is \p{Z} + \h + \v, which adds
 * U+180E (MONGOLIAN VOWEL SEPARATOR, in PCRE2's \h list) to Unicode's White_Space property, the set
 * Oniguruma and Rust's regex use. So \s and \S are rewritten to that explicit set before compiling.
 * Found by tools/tokenizer_parity.py: "'ve" after U+180E split differently.
 */
#include "text/tokenizer/tok_regex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Unicode White_Space, as the inside of a character class. */
#define WHITE_SPACE                                                                                \
    "\\t-\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}" \
    "\\x{3000}"

char *tok_regex_translate(const char *p) {
    size_t n = strlen(p), cap = n * (sizeof WHITE_SPACE + 4) + 1, o = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    int in_class = 0, quoted = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (quoted) { /* \Q...\E: copied verbatim */
            if (c == '\\' && p[i + 1] == 'E') quoted = 0;
            out[o++] = c;
            continue;
        }
        if (c == '\\' && i + 1 < n) {
            char e = p[i + 1];
            if (e == 'Q') quoted = 1;
            if (e == 's' || (e == 'S' && !in_class)) {
                const char *open = in_class ? "" : e == 's' ? "[" : "[^";
                o += (size_t)sprintf(out + o, "%s%s%s", open, WHITE_SPACE, in_class ? "" : "]");
                i++;
                continue;
            }
            out[o++] = c, out[o++] = e; /* any other escape (including \S in a class) as is */
            i++;
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = 1;
            out[o++] = c;
            if (p[i + 1] == '^') out[o++] = p[++i];
            if (p[i + 1] == ']') out[o++] = p[++i]; /* a leading ] is a literal */
            continue;
        }
        if (c == '[' && in_class && p[i + 1] == ':') { /* POSIX [:name:] inside a class */
            const char *end = strstr(p + i + 2, ":]");
            if (end) {
                size_t len = (size_t)(end + 2 - (p + i));
                memcpy(out + o, p + i, len);
                o += len, i += len - 1;
                continue;
            }
        }
        if (c == ']' && in_class) in_class = 0;
        out[o++] = c;
    }
    out[o] = 0;
    return out;
}
