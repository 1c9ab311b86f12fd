/*
 * tok_bpe.h — the BPE model: vocab, merges, the merge loop, a bounded cache of merged words.
 * Layer 1: calls tok_strmap, tok_bytelevel, tok_utf8, tok_vec.
 *
 * Dimension letters: V id slots, M merges, L bytes of a word.
 */
#ifndef GRPO_TOK_BPE_H
#define GRPO_TOK_BPE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "text/tokenizer/tok_strmap.h"
#include "text/tokenizer/tokenizer.h"

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

int tok_bpe_init_cache(tok_bpe *m);
/* Appends the ids of one pre-token (raw bytes s[0..L)) to out. Returns 0 or -1 (nomem). */
int tok_bpe_word(const tok_bpe *m, const char *s, size_t len, grpo_tok_ids *out);
int tok_merge_put(tok_bpe *m, int32_t left, int32_t right, int32_t rank, int32_t new_id);
void tok_bpe_free(tok_bpe *m);

#endif
