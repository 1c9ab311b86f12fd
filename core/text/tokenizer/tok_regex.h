/*
 * tok_regex.h — making PCRE2 read tokenizer regexes the way `tokenizers` (Oniguruma) does.
 * Layer 0: calls no other tokenizer file.
 */
#ifndef GRPO_TOK_REGEX_H
#define GRPO_TOK_REGEX_H

#include <stddef.h>

/* A copy of a tokenizer regex that PCRE2 (UTF + UCP) reads as Oniguruma reads the original
 * (tok_regex.c lists each escape); malloc'd. NULL on nomem (why empty) or when an escape has no
 * exact PCRE2 spelling: why (why_size bytes) then says which escape, where and why. */
char *tok_regex_translate(const char *pattern, char *why, size_t why_size);
/* Rust regex's \w (Alphabetic, M, Nd, Pc, Join_Control), used by single_word. */
#define TOK_WORD_CHAR_CLASS                                                                        \
    "[\\p{L}\\p{Nl}\\p{Nd}\\p{M}\\p{Pc}\\x{200c}\\x{200d}\\x{24b6}-\\x{24e9}\\x{1f130}-\\x{1f149}" \
    "\\x{1f150}-\\x{1f169}\\x{1f170}-\\x{1f189}]"

#endif
