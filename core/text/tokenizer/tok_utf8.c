/*
 * tok_utf8.c — UTF-8 validation and repair (U+FFFD for each maximal invalid subpart, Unicode's
 * practice and Rust's String::from_utf8_lossy), and decoding one code point.
 */
#include "text/tokenizer/tok_utf8.h"

#include <string.h>

/* Length of the valid UTF-8 character at s[0..n), or 0 when invalid; then *bad receives the length
 * of the maximal subpart to replace by one U+FFFD (Unicode's "maximal subpart" practice). */
static size_t utf8_char(const unsigned char *s, size_t n, size_t *bad) {
    unsigned char c = s[0];
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF)
        need = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        need = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4)
        need = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else {
        *bad = 1;
        return 0;
    }
    size_t i = 1;
    for (; i < need && i < n; i++) {
        unsigned char lo_i = i == 1 ? lo : 0x80, hi_i = i == 1 ? hi : 0xBF;
        if (s[i] < lo_i || s[i] > hi_i) break;
    }
    if (i == need) return need;
    *bad = i;
    return 0;
}

size_t tok_utf8_invalid_at(const char *s, size_t len) {
    size_t bad = 0;
    for (size_t i = 0, k; i < len; i += k)
        if (!(k = utf8_char((const unsigned char *)s + i, len - i, &bad))) return i;
    return len;
}

size_t tok_utf8_lossy_len(const char *s, size_t len, int *valid) {
    size_t out = 0;
    *valid = 1;
    for (size_t i = 0; i < len;) {
        uint64_t w;
        if (i + 8 <= len && (memcpy(&w, s + i, 8), (w & 0x8080808080808080ull) == 0)) {
            out += 8, i += 8; /* eight ASCII bytes */
            continue;
        }
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) { /* ASCII fast path */
            out++, i++;
            continue;
        }
        size_t bad = 0, k = utf8_char((const unsigned char *)s + i, len - i, &bad);
        if (!k) *valid = 0;
        out += k ? k : 3;
        i += k ? k : bad;
    }
    return out;
}

void tok_utf8_lossy(char *dst, const char *s, size_t len) {
    for (size_t i = 0; i < len;) {
        size_t bad = 0, k = utf8_char((const unsigned char *)s + i, len - i, &bad);
        if (k) {
            memcpy(dst, s + i, k);
            dst += k, i += k;
        } else {
            memcpy(dst, "\xEF\xBF\xBD", 3);
            dst += 3, i += bad;
        }
    }
}

uint32_t tok_utf8_decode(const unsigned char *s, size_t *n) {
    if (s[0] < 0x80) return *n = 1, s[0];
    if (s[0] < 0xE0) return *n = 2, ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    if (s[0] < 0xF0)
        return *n = 3,
               ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    return *n = 4, ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
                       ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
}
