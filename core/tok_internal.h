/*
 * tok_internal.h — the parts of the tokenizer shared by its files. Not a public header.
 *   core/tokenizer.c     loading tokenizer.json + tokenizer_config.json, encode entry, accessors
 *   core/tok_pipeline.c  loading the normalizer, pre-tokenizer, post-processor, decoder sections
 *   core/tok_bpe.c       the BPE model: vocab and merge maps, merge loop, word cache
 *   core/tok_split.c     UTF-8 repair, added tokens, pre-tokenizers, the encode loop
 *   core/tok_normalize.c NFC / NFD (tables: tok_unicode_tables.h, tools/make_unicode_tables.py)
 *   core/tok_regex.c     regex translation so PCRE2 matches like Oniguruma
 *   core/tok_decode.c    ids -> text
 *
 * Dimension letters: V id slots, M merges, A added tokens, L bytes of a word.
 */
#ifndef GRPO_TOK_INTERNAL_H
#define GRPO_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <cjson/cJSON.h>
#include <pcre2.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

/* ---- string -> int32 hash map (keys borrowed from storage that outlives the map) ------------- */
typedef struct tok_strmap_slot {
    const char *key; /* NULL = empty */
    uint32_t len;
    int32_t val;
    uint64_t hash;
} tok_strmap_slot;

typedef struct tok_strmap {
    tok_strmap_slot *slots; /* (cap), cap a power of two, load <= 1/2 */
    uint32_t cap, n;
} tok_strmap;

uint64_t tok_hash_bytes(const void *p, size_t n);
int tok_strmap_put(tok_strmap *m, const char *key, uint32_t len, int32_t val); /* 0 or -1 (nomem) */
int32_t tok_strmap_get(const tok_strmap *m, const char *key, uint32_t len);    /* val or -1 */
void tok_strmap_free(tok_strmap *m);

/* ---- the BPE model --------------------------------------------------------------------------- */
typedef struct tok_merge_slot {
    uint64_t pair;  /* (left id << 32) | right id; UINT64_MAX = empty */
    int32_t rank;   /* position in the merges list: lower merges first */
    int32_t new_id; /* id of left+right */
} tok_merge_slot;

/* Words already merged: raw bytes of a pre-token -> its ids. Bounded; full means no inserts. */
/* One cached word; 16 bytes, since the table is probed once per word. */
typedef struct tok_cache_slot {
    uint32_t hash;             /* low 32 bits of the word's hash */
    uint32_t key_off, ids_off; /* into keys, ids */
    uint16_t key_len, ids_len; /* key_len == 0 marks an empty slot */
} tok_cache_slot;

typedef struct tok_cache {
    pthread_mutex_t lock;
    tok_cache_slot *slots; /* (cap), grows by doubling up to a bound */
    uint32_t cap, n;
    char *keys;   /* (keys_n) */
    int32_t *ids; /* (ids_n) */
    size_t keys_n, keys_cap, ids_n, ids_cap;
} tok_cache;

typedef struct tok_bpe {
    int32_t n_ids;          /* V */
    char **token;           /* (V) token text (byte-level spelling), NULL for an unused id */
    uint32_t *token_len;    /* (V) */
    tok_strmap vocab;       /* token text -> id */
    tok_merge_slot *merges; /* (merge_cap) open addressing */
    uint32_t merge_cap, n_merges;
    int32_t byte_id[256]; /* id of the byte-level character of each byte, -1 if not in vocab */
    int byte_level;       /* words are bytes mapped through the GPT-2 byte->char table */
    int ignore_merges;    /* a word that is itself in the vocab is one token */
    int fuse_unk, byte_fallback;
    int32_t unk_id; /* -1 when no unk_token */
    tok_cache cache;
} tok_bpe;

/* The GPT-2 byte-level alphabet: byte b <-> a printable code point. */
extern const uint16_t tok_byte_to_cp[256];
/* Code point -> byte, or -1 when cp is not in the alphabet. */
int tok_cp_to_byte(uint32_t cp);

int tok_bpe_init_cache(tok_bpe *m);
/* Appends the ids of one pre-token (raw bytes s[0..L)) to out. Returns 0 or -1 (nomem). */
int tok_bpe_word(const tok_bpe *m, const char *s, size_t len, grpo_tok_ids *out);
int tok_merge_put(tok_bpe *m, int32_t left, int32_t right, int32_t rank, int32_t new_id);
void tok_bpe_free(tok_bpe *m);

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

/* ---- normalizers (tok_normalize.c) ----------------------------------------------------------- */
enum { TOK_NORM_NFC, TOK_NORM_NFD };
#define TOK_MAX_NORMALIZERS 8
/* Normalizes valid UTF-8 s[0..n) to form. When s is already normalized *out is NULL; otherwise
 * *out is a malloc'd copy of *out_n bytes (caller frees). Returns 0, or -1 on nomem. */
int tok_normalize(int form, const char *s, size_t n, char **out, size_t *out_n);

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

/* A copy of a tokenizer regex with \s and \S spelled as Unicode White_Space (Oniguruma's meaning)
 * for PCRE2 (tok_regex.c); malloc'd, NULL on nomem. */
char *tok_regex_translate(const char *pattern);
/* Rust regex's \w (Alphabetic, M, Nd, Pc, Join_Control), used by single_word. */
#define TOK_WORD_CHAR_CLASS                                                                        \
    "[\\p{L}\\p{Nl}\\p{Nd}\\p{M}\\p{Pc}\\x{200c}\\x{200d}\\x{24b6}-\\x{24e9}\\x{1f130}-\\x{1f149}" \
    "\\x{1f150}-\\x{1f169}\\x{1f170}-\\x{1f189}]"

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

/* Splits a valid UTF-8 text into pieces and appends its ids (everything but the post-processor). */
int tok_encode_text(const grpo_tokenizer *tok, const char *s, size_t len, grpo_tok_ids *out);
int tok_ids_push(grpo_tok_ids *ids, int32_t id);

/* Length in bytes of s once every maximal invalid UTF-8 subsequence is replaced by U+FFFD;
 * *valid receives 1 when s is valid UTF-8 (nothing to replace). */
size_t tok_utf8_lossy_len(const char *s, size_t len, int *valid);
/* Writes that replacement of s into dst (tok_utf8_lossy_len bytes). */
void tok_utf8_lossy(char *dst, const char *s, size_t len);
/* Decodes one code point of valid UTF-8 at s; *n receives its length. */
uint32_t tok_utf8_decode(const unsigned char *s, size_t *n);

#endif
