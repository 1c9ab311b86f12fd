/*
 * tok_internal.h — the tokenizer's shared state (struct grpo_tokenizer) and the calls between its
 * upper files. Not a public header.
 *
 * Layers, each file calling only files of lower layers (scripts/check_layers.sh checks it):
 *   0  tok_utf8.c       UTF-8 decode / encode / repair                       tok_utf8.h
 *      tok_vec.c        growable id and text vectors                         tok_vec.h
 *      tok_strmap.c     string -> int32 hash map                             tok_strmap.h
 *      tok_bytelevel.c  the GPT-2 byte-level alphabet                        tok_bytelevel.h
 *      tok_regex.c      regex translation so PCRE2 matches like Oniguruma    tok_regex.h
 *   1  tok_normalize.c  NFC / NFD (tables: tok_unicode_tables.h)             tok_normalize.h
 *      tok_bpe.c        the BPE model: merges, merge loop, word cache        tok_bpe.h
 *   2  tok_split.c      added tokens, pre-tokenizers, the encode loop        this header
 *      tok_decode.c     ids -> text                                          this header
 *      tok_pipeline.c   loading normalizer, pre-tokenizer, post, decoder     this header
 *   3  tokenizer.c      loading tokenizer.json + tokenizer_config.json, the public API (tokenizer.h)
 * Calls between them: tok_normalize -> utf8; tok_bpe -> strmap, bytelevel, utf8, vec;
 * tok_split -> normalize, bpe, utf8, vec; tok_decode -> bytelevel, utf8, vec; tok_pipeline -> regex;
 * tokenizer.c -> every file but tok_regex. Lower files include only the small headers they use;
 * what the upper ones share is here.
 *
 * Dimension letters: V id slots, A added tokens.
 */
#ifndef GRPO_TOK_INTERNAL_H
#define GRPO_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <cjson/cJSON.h>
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "text/tokenizer/tok_bpe.h"
#include "text/tokenizer/tok_bytelevel.h"
#include "text/tokenizer/tok_normalize.h"
#include "text/tokenizer/tok_regex.h"
#include "text/tokenizer/tok_strmap.h"
#include "text/tokenizer/tok_utf8.h"
#include "text/tokenizer/tok_vec.h"
#include "text/tokenizer/tokenizer.h"

/* ---- added tokens ---------------------------------------------------------------------------- */
typedef struct tok_added {
    char *content; /* as written (token_to_id / decode) */
    uint32_t len;
    char *pattern; /* what is matched: content, normalized when the token is normalized */
    uint32_t pattern_len;
    int32_t id;
    uint8_t special, lstrip, rstrip, single_word, normalized;
} tok_added;

/* Leftmost-longest matcher over one set of added tokens (the normalized or the raw ones). */
typedef struct tok_added_set {
    int only_first;         /* the one byte every token starts with (e.g. '<'), or -1 */
    uint8_t first[256];     /* 1 if some token starts with this byte */
    int32_t *by_first[256]; /* indices into tok->added, longest first, -1 terminated (or NULL) */
} tok_added_set;

/* ---- pre-tokenizers -------------------------------------------------------------------------- */
enum { TOK_PRE_BYTELEVEL, TOK_PRE_SPLIT };
enum {
    TOK_SPLIT_REMOVED,
    TOK_SPLIT_ISOLATED,
    TOK_SPLIT_MERGED_PREV,
    TOK_SPLIT_MERGED_NEXT,
    TOK_SPLIT_CONTIGUOUS
};

typedef struct tok_pre {
    int kind;
    pcre2_code *re;       /* NULL: ByteLevel without regex, or an empty String pattern */
    int behavior, invert; /* Split */
    int add_prefix_space; /* ByteLevel */
} tok_pre;

/* ---- the tokenizer --------------------------------------------------------------------------- */
struct grpo_tokenizer {
    char *path; /* tokenizer.json, for messages */
    tok_bpe bpe;
    tok_added *added; /* (A) */
    int32_t n_added;
    tok_strmap added_by_content;     /* content -> index into added */
    int32_t *added_of_id;            /* (V) index into added, or -1 */
    tok_added_set raw_set, norm_set; /* normalized == 0 / normalized == 1 tokens */
    int norm[TOK_MAX_NORMALIZERS];   /* TOK_NORM_*, applied in order */
    int n_norm;
    pcre2_code *re_word_start; /* ^\w (single_word), compiled only when needed */
    tok_pre *pre;              /* (n_pre) applied in order */
    int n_pre;
    int32_t *template_ids; /* (n_template) ids of TemplateProcessing "single"; -2 = $A */
    int n_template;
    int decoder_byte_level; /* 1 ByteLevel decoder, 0 none (join with " ") */
    int32_t bos_id, eos_id, pad_id;
    char *chat_template;
};

/* ---- loading the sections of tokenizer.json (tok_pipeline.c) --------------------------------- */
/* Each appends what json describes to tok, or returns a negative status with err naming the file
 * and what is unsupported. A missing or null section is fine. */
int32_t tok_load_normalizer(grpo_tokenizer *tok, const cJSON *json, grpo_error *err);
int32_t tok_load_pre(grpo_tokenizer *tok, const cJSON *json, grpo_error *err);
int32_t tok_load_post(grpo_tokenizer *tok, const cJSON *json, grpo_error *err);
int32_t tok_load_decoder(grpo_tokenizer *tok, const cJSON *json, grpo_error *err);
/* Compiles pattern for PCRE2 (UTF, plus extra options) after tok_regex_translate, with JIT when
 * available; NULL with err set ("where" names the section) when it does not compile. */
pcre2_code *tok_compile_regex(grpo_tokenizer *tok, const char *pattern, uint32_t extra,
                              const char *where, grpo_error *err);

/* JSON helpers: a bool field (absent or null gives def), the "type" field, null-or-absent. */
static inline int tok_json_bool(const cJSON *o, const char *key, int def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}
static inline const char *tok_json_type(const cJSON *o) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}
static inline int tok_json_null(const cJSON *v) { return !v || cJSON_IsNull(v); }

/* Splits a valid UTF-8 text into pieces and appends its ids (everything but the post-processor,
 * tok_split.c). Returns 0, -1 on nomem, -2 when PCRE2 fails. */
int tok_encode_text(const grpo_tokenizer *tok, const char *s, size_t len, grpo_tok_ids *out);

/* The text of id as written (added tokens: their content; others: the vocab's byte-level
 * spelling), *len its length; NULL for an id out of range or unused. */
static inline const char *tok_id_text(const grpo_tokenizer *tok, int32_t id, size_t *len) {
    if (id < 0 || id >= tok->bpe.n_ids) return NULL;
    int32_t k = tok->added_of_id[id];
    if (k >= 0) return *len = tok->added[k].len, tok->added[k].content;
    return *len = tok->bpe.token_len[id], tok->bpe.token[id];
}
/* 1 when id is a special added token. */
static inline int tok_id_special(const grpo_tokenizer *tok, int32_t id) {
    return id >= 0 && id < tok->bpe.n_ids && tok->added_of_id[id] >= 0 &&
           tok->added[tok->added_of_id[id]].special;
}

#endif
