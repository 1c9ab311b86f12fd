/*
 * tok_bytelevel.h — the GPT-2 byte-level alphabet: each byte b <-> one printable code point, so
 * that any byte string can be spelled as text in the vocab. Layer 0: calls no other tokenizer file.
 */
#ifndef GRPO_TOK_BYTELEVEL_H
#define GRPO_TOK_BYTELEVEL_H

#include <stddef.h>
#include <stdint.h>

/* Byte -> its code point. */
extern const uint16_t tok_byte_to_cp[256];
/* Code point -> byte, or -1 when cp is not in the alphabet. */
int tok_cp_to_byte(uint32_t cp);
/* Writes the byte-level spelling (UTF-8) of s[0..len) into dst (room for 2*len bytes); returns
 * its length. */
size_t tok_byte_level_spell(char *dst, const char *s, size_t len);

#endif
