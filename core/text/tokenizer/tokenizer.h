/*
 * tokenizer.h — Hugging Face byte-level BPE tokenizers (tokenizer.json), with exact parity with the
 * Rust `tokenizers` library for the parts listed below.
 *
 * Supported (anything else is refused at load time with a message naming the file and the part):
 *   model          BPE: vocab, merges as "a b" strings or [a, b] pairs, ignore_merges, unk_token,
 *                  fuse_unk, byte_fallback (dropout must be null/0, no subword prefix/suffix)
 *   normalizer     null, NFC, NFD, Sequence of those (tables from tools/make_unicode_tables.py).
 *                  NFKC/NFKD/Lowercase/Replace/... are refused by name.
 *   pre_tokenizer  ByteLevel (GPT-2 regex, add_prefix_space, use_regex), Split (Regex or String
 *                  pattern; behaviours Removed, Isolated, MergedWithPrevious, MergedWithNext,
 *                  Contiguous; invert), Sequence of those. Regexes run in PCRE2 (UTF + UCP).
 *   added tokens   special and non-special; leftmost-longest match; lstrip, rstrip, single_word,
 *                  normalized (matched after the normalizer, before the pre-tokenizer)
 *   post_processor null, ByteLevel (ids unchanged), TemplateProcessing ("single" template),
 *                  Sequence of those
 *   decoder        null (tokens joined by " ") or ByteLevel (bytes, then lossy UTF-8)
 * tokenizer_config.json next to tokenizer.json gives bos/eos/pad (string or {"content": ...}) and
 * the chat template (chat_template.jinja in the same directory wins, as in transformers).
 *
 * Text in is UTF-8. Invalid UTF-8 is not an error: each maximal invalid subsequence is replaced by
 * U+FFFD first (what Python's bytes.decode("utf-8", "replace") and Rust's from_utf8_lossy do),
 * since `tokenizers` itself only ever sees valid strings.
 *
 * Thread-safety: load/free on one thread; encode, decode and the accessors may run concurrently on
 * one tokenizer (the word cache is behind a mutex).
 *
 * Dimension letters: V vocabulary id slots (1 + largest id), N ids, L bytes.
 */
#ifndef GRPO_TOKENIZER_H
#define GRPO_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "grpo/plugin.h"

/* The tokenizer is the opaque `struct grpo_tokenizer` of grpo/plugin.h, so the host can hand it
 * to plugins through grpo_host.tokenizer. */
typedef struct grpo_tokenizer grpo_tokenizer;

/* A growable id array owned by the caller: start zeroed, free with grpo_tok_ids_free. */
typedef struct grpo_tok_ids {
    int32_t *data; /* (n) */
    size_t n, cap;
} grpo_tok_ids;

/* A growable NUL-terminated byte string owned by the caller: start zeroed, free with
 * grpo_tok_text_free. */
typedef struct grpo_tok_text {
    char *data; /* (n + 1), data[n] == 0 */
    size_t n, cap;
} grpo_tok_text;

void grpo_tok_ids_free(grpo_tok_ids *ids);
void grpo_tok_text_free(grpo_tok_text *text);

/* Loads path_or_dir: a tokenizer.json file, or a directory containing one. On success *out owns
 * the tokenizer (free with grpo_tokenizer_free) and GRPO_OK is returned; otherwise a negative
 * status and err says which file and what is wrong or unsupported. */
int32_t grpo_tokenizer_load(const char *path_or_dir, grpo_tokenizer **out, grpo_error *err);
void grpo_tokenizer_free(grpo_tokenizer *tok);

/* Appends the ids of text[0..len) to out (not cleared first). add_special applies the
 * post-processor template (like `tokenizers`' add_special_tokens=True); special tokens written in
 * the text are always recognised. Returns GRPO_OK or a negative status (GRPO_ERR_NOMEM). */
int32_t grpo_tokenizer_encode(const grpo_tokenizer *tok, const char *text, size_t len,
                              int add_special, grpo_tok_ids *out, grpo_error *err);

/* Replaces out's contents with the text of ids[0..n). Unknown ids are dropped (as `tokenizers`
 * does); skip_special drops ids of special added tokens. Returns GRPO_OK or a negative status. */
int32_t grpo_tokenizer_decode(const grpo_tokenizer *tok, const int32_t *ids, size_t n,
                              int skip_special, grpo_tok_text *out, grpo_error *err);

/* Id of a token string (added tokens first, then the model vocab, in its byte-level spelling such
 * as "Ġthe"), or -1. */
int32_t grpo_tokenizer_token_to_id(const grpo_tokenizer *tok, const char *token);
/* The token string of id (borrowed, lives as long as tok), or NULL for an unused id. */
const char *grpo_tokenizer_id_to_token(const grpo_tokenizer *tok, int32_t id);
/* V: 1 + the largest id of the model vocab and the added tokens (an embedding needs V rows). */
int32_t grpo_tokenizer_vocab_size(const grpo_tokenizer *tok);
/* Ids of tokenizer_config.json's bos_token / eos_token / pad_token, or -1 when absent. */
int32_t grpo_tokenizer_bos_id(const grpo_tokenizer *tok);
int32_t grpo_tokenizer_eos_id(const grpo_tokenizer *tok);
int32_t grpo_tokenizer_pad_id(const grpo_tokenizer *tok);
/* The chat template (borrowed), or NULL when the model ships none. */
const char *grpo_tokenizer_chat_template(const grpo_tokenizer *tok);

/* Host services with the exact signatures of grpo_host.tokenize / .detokenize (grpo/plugin.h).
 * tokenize: ids without post-processor tokens (add_special_tokens=False); writes up to cap ids and
 * returns the full count (> cap means truncated) or a negative status.
 * detokenize: keeps special tokens; writes a NUL-terminated string of at most cap bytes (including
 * the NUL, truncated if needed) and returns the full length (without NUL), or a negative status. */
int32_t grpo_host_tokenize(const struct grpo_tokenizer *tok, const char *text, int32_t *ids,
                           int32_t cap, grpo_error *err);
int32_t grpo_host_detokenize(const struct grpo_tokenizer *tok, const int32_t *ids, int32_t n,
                             char *out, int32_t cap, grpo_error *err);

#endif
