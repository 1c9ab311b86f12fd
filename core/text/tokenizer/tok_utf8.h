/*
 * tok_utf8.h — UTF-8 for the tokenizer (layer 0, calls no other tokenizer file): decode and encode
 * one code point, and repair invalid input the way Rust's String::from_utf8_lossy does.
 */
#ifndef GRPO_TOK_UTF8_H
#define GRPO_TOK_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Offset of the first byte of s[0..len) that is not valid UTF-8, or len when all of it is. */
size_t tok_utf8_invalid_at(const char *s, size_t len);
/* Length in bytes of s once every maximal invalid UTF-8 subsequence is replaced by U+FFFD;
 * *valid receives 1 when s is valid UTF-8 (nothing to replace). */
size_t tok_utf8_lossy_len(const char *s, size_t len, int *valid);
/* Writes that replacement of s into dst (tok_utf8_lossy_len bytes). */
void tok_utf8_lossy(char *dst, const char *s, size_t len);
/* The length tok_utf8_decode gives a character that starts with byte lead (1 to 4). */
static inline size_t tok_utf8_len(unsigned char lead) {
    return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}
/* Decodes one code point of valid UTF-8 at s; *n receives its length. */
uint32_t tok_utf8_decode(const unsigned char *s, size_t *n);

/* Writes code point c (<= 0x10FFFF) as UTF-8 into d (room for 4 bytes); returns its length.
 * Inline: the normalizer calls it once per code point. */
static inline size_t tok_utf8_encode(char *d, uint32_t c) {
    if (c < 0x80) return d[0] = (char)c, 1;
    if (c < 0x800) return d[0] = (char)(0xC0 | (c >> 6)), d[1] = (char)(0x80 | (c & 0x3F)), 2;
    if (c < 0x10000)
        return d[0] = (char)(0xE0 | (c >> 12)), d[1] = (char)(0x80 | ((c >> 6) & 0x3F)),
               d[2] = (char)(0x80 | (c & 0x3F)), 3;
    d[0] = (char)(0xF0 | (c >> 18)), d[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    d[2] = (char)(0x80 | ((c >> 6) & 0x3F)), d[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

#endif
