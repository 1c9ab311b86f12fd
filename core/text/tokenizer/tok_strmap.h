/*
 * tok_strmap.h — a string -> int32 hash map (open addressing; keys are borrowed from storage that
 * outlives the map), and the byte hash it uses. Layer 0: calls no other tokenizer file.
 */
#ifndef GRPO_TOK_STRMAP_H
#define GRPO_TOK_STRMAP_H

#include <stddef.h>
#include <stdint.h>

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

uint64_t tok_hash_bytes(const void *p, size_t n);                              /* never 0 */
int tok_strmap_put(tok_strmap *m, const char *key, uint32_t len, int32_t val); /* 0 or -1 (nomem) */
int32_t tok_strmap_get(const tok_strmap *m, const char *key, uint32_t len);    /* val or -1 */
void tok_strmap_free(tok_strmap *m);

#endif
