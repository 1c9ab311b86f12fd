/*
 * tok_bytelevel.c — the GPT-2 byte-level alphabet (`tokenizers`' bytes_char), both ways.
 */
#include "text/tokenizer/tok_bytelevel.h"

#include "text/tokenizer/tok_utf8.h" /* tok_utf8_encode, inline */

/* Printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for themselves; the other 68 bytes, in
 * order, take code points 256, 257, ... (0x00..0x20 -> 256..288, 0x7F..0xA0 -> 289..322,
 * 0xAD -> 323). */
static uint16_t byte_to_cp(int b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) return (uint16_t)b;
    if (b <= 32) return (uint16_t)(256 + b);
    if (b <= 160) return (uint16_t)(b + 162);
    return 323; /* 0xAD */
}

#define B4(b) byte_to_cp_c(b), byte_to_cp_c(b + 1), byte_to_cp_c(b + 2), byte_to_cp_c(b + 3)
#define byte_to_cp_c(b)                                                                            \
    ((((b) >= 33 && (b) <= 126) || ((b) >= 161 && (b) <= 172) || (b) >= 174) ? (b)                 \
     : (b) <= 32                                                             ? 256 + (b)           \
     : (b) <= 160                                                            ? (b) + 162           \
                                                                             : 323)
#define B16(b) B4(b), B4(b + 4), B4(b + 8), B4(b + 12)
const uint16_t tok_byte_to_cp[256] = {B16(0),   B16(16),  B16(32),  B16(48),  B16(64),  B16(80),
                                      B16(96),  B16(112), B16(128), B16(144), B16(160), B16(176),
                                      B16(192), B16(208), B16(224), B16(240)};

int tok_cp_to_byte(uint32_t cp) {
    if (cp < 256) return byte_to_cp((int)cp) == cp ? (int)cp : -1;
    if (cp <= 288) return (int)cp - 256;
    if (cp <= 322) return (int)cp - 162;
    if (cp == 323) return 0xAD;
    return -1;
}

/* Code points of the alphabet are below 0x800: at most two UTF-8 bytes per byte. */
size_t tok_byte_level_spell(char *dst, const char *s, size_t len) {
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += tok_utf8_encode(dst + n, tok_byte_to_cp[(unsigned char)s[i]]);
    return n;
}

