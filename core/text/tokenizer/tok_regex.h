/*
 * tok_regex.h — making PCRE2 read tokenizer regexes the way `tokenizers` (Oniguruma) does.
 * Layer 0: calls no other tokenizer file.
 */
#ifndef GRPO_TOK_REGEX_H
#define GRPO_TOK_REGEX_H

/* A copy of a tokenizer regex with \s and \S spelled as Unicode White_Space (Oniguruma's meaning)
 * for PCRE2; malloc'd, NULL on nomem. */
char *tok_regex_translate(const char *pattern);
/* Rust regex's \w (Alphabetic, M, Nd, Pc, Join_Control), used by single_word. */
#define TOK_WORD_CHAR_CLASS                                                                        \
    "[\\p{L}\\p{Nl}\\p{Nd}\\p{M}\\p{Pc}\\x{200c}\\x{200d}\\x{24b6}-\\x{24e9}\\x{1f130}-\\x{1f149}" \
    "\\x{1f150}-\\x{1f169}\\x{1f170}-\\x{1f189}]"

#endif
