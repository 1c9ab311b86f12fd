/*
 * tok_regex.c — making PCRE2 read tokenizer regexes the way `tokenizers` (Oniguruma) does.
 *
 * Each escape either means the same in both engines (copied), is spelled out so PCRE2 (UTF + UCP)
 * reads what Oniguruma reads (rewritten), or cannot be spelled exactly and is refused by name:
 *
 *   \s \S   PCRE2 10.42's \s is \p{Z} + \h + \v, which adds U+180E (in PCRE2's \h list) to
 *           Unicode's White_Space, the set Oniguruma uses: written as that explicit set. (Found by
 *           tools/tokenizer_parity.py: "'ve" after U+180E split differently.)
 *   \w \W   Oniguruma: General_Category L|M|N|Pc; PCRE2 10.42: L|N and '_' (no marks).
 *   \b \B   word boundaries on Oniguruma's \w, as lookarounds (in a class \b is backspace).
 *   \h \H   Oniguruma: a hexadecimal digit; PCRE2: horizontal white space.
 *   \v      Oniguruma: vertical tab (U+000B); PCRE2: vertical white space.
 *   \uHHHH  Oniguruma: a code point; PCRE2: an error. Written \x{HHHH}.
 *   \xHH of 0x80 or more   Oniguruma: a raw byte of the encoding; PCRE2: a code point.
 *           Refused (a pattern means U+00HH with \x{HH}, the same in both).
 *   \C      PCRE2: one code unit (a byte, splitting UTF-8 characters); Oniguruma: \C-x, a control
 *           character. Refused (PCRE2_NEVER_BACKSLASH_C also forbids it at compile time).
 *   \W \H \S inside [...]: a negated class inside a class has no exact PCRE2 spelling but \S
 *           (as before: it is the negation of an explicit set PCRE2 reads as Oniguruma does).
 * Copied: \d \D (Nd in both), \t \n \r \f \a \e, \A \z \Z \G \K \R \N \X, \p \P, \k, \c, \Q..\E,
 * backreferences \1-\9, and any escaped punctuation. Any other letter is refused.
 */
#include "text/tokenizer/tok_regex.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Unicode White_Space, as the inside of a character class. */
#define WHITE_SPACE                                                                                \
    "\\t-\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}" \
    "\\x{3000}"
/* Oniguruma's Unicode \w, as the inside of a character class. */
#define WORD "\\p{L}\\p{M}\\p{N}\\p{Pc}"
#define HEX "0-9a-fA-F"
/* Word boundaries on WORD: (?<=w)(?!w) | (?<!w)(?=w), and the opposite. */
#define W "[" WORD "]"
#define BOUNDARY "(?:(?<=" W ")(?!" W ")|(?<!" W ")(?=" W "))"
#define NOT_BOUNDARY "(?:(?<=" W ")(?=" W ")|(?<!" W ")(?!" W "))"

/* Escapes copied as they are: the same meaning in Oniguruma and PCRE2 (UTF, UCP). */
static const char SAME[] = "dDtnrfaeAzZGKRNXpPkcQE123456789";

/* The spelling of escape e (in a class or not), or NULL when it is copied or refused. */
static const char *rewrite(char e, int in_class) {
    switch (e) {
    case 's': return in_class ? WHITE_SPACE : "[" WHITE_SPACE "]";
    case 'S': return in_class ? NULL : "[^" WHITE_SPACE "]";
    case 'w': return in_class ? WORD : "[" WORD "]";
    case 'W': return in_class ? NULL : "[^" WORD "]";
    case 'h': return in_class ? HEX : "[" HEX "]";
    case 'H': return in_class ? NULL : "[^" HEX "]";
    case 'b': return in_class ? "\\x{08}" : BOUNDARY;
    case 'B': return in_class ? NULL : NOT_BOUNDARY;
    case 'v': return "\\x{0b}";
    default: return NULL;
    }
}

/* Why escape \e at p (p[0] is the letter) cannot be translated exactly, or NULL when it can. */
static const char *refusal(const char *p, int in_class) {
    char e = p[0];
    if (e == 'C') return "\\C (PCRE2: one byte, splitting UTF-8 characters)";
    if (in_class && (e == 'W' || e == 'H' || e == 'B'))
        return "a negated class escape inside [...] (no exact PCRE2 spelling)";
    if (e == 'x' && p[1] != '{' && isxdigit((unsigned char)p[1]) &&
        strtol((char[]){p[1], isxdigit((unsigned char)p[2]) ? p[2] : 0, 0}, NULL, 16) >= 0x80)
        return "\\xHH of 0x80 or more (Oniguruma: a raw byte; write \\x{HH} for U+00HH)";
    if (e == 'u') {
        for (int i = 1; i <= 4; i++)
            if (!isxdigit((unsigned char)p[i])) return "\\u not followed by 4 hex digits";
        return NULL;
    }
    if (isalpha((unsigned char)e) && e != 'x' && !rewrite(e, in_class) && !strchr(SAME, e))
        return "an escape whose Oniguruma meaning PCRE2 does not have";
    return NULL;
}

/* Appends n bytes of s to out at *o. */
static void put(char *out, size_t *o, const char *s, size_t n) {
    memcpy(out + *o, s, n);
    *o += n;
}

char *tok_regex_translate(const char *p, char *why, size_t why_size) {
    size_t n = strlen(p), cap = n * (sizeof NOT_BOUNDARY + 4) + 1, o = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    if (why_size) why[0] = '\0';
    int in_class = 0, quoted = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (quoted) { /* \Q...\E: copied verbatim */
            if (c == '\\' && p[i + 1] == 'E') quoted = 0;
            out[o++] = c;
            continue;
        }
        if (c == '\\' && i + 1 < n) {
            char e = p[++i];
            const char *bad = refusal(p + i, in_class), *spelled = rewrite(e, in_class);
            if (bad) {
                snprintf(why, why_size, "\\%c at offset %zu: %s", e, i - 1, bad);
                free(out);
                return NULL;
            }
            if (e == 'Q') quoted = 1;
            if (spelled) {
                put(out, &o, spelled, strlen(spelled));
            } else if (e == 'u') { /* \uHHHH -> \x{HHHH} */
                o += (size_t)sprintf(out + o, "\\x{%.4s}", p + i + 1);
                i += 4;
            } else {
                out[o++] = c, out[o++] = e;
            }
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
                put(out, &o, p + i, len);
                i += len - 1;
                continue;
            }
        }
        if (c == ']' && in_class) in_class = 0;
        out[o++] = c;
    }
    out[o] = 0;
    return out;
}
