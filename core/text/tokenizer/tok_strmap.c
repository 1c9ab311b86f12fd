/*
 * tok_strmap.c — the string -> int32 hash map of the tokenizer (vocab, added tokens by content).
 */
#include "text/tokenizer/tok_strmap.h"

#include <stdlib.h>
#include <string.h>

/* ---- hashing --------------------------------------------------------------------------------- */
uint64_t tok_hash_bytes(const void *p, size_t n) {
    const unsigned char *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        s += 8, n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    return h ? h : 1;
}

/* ---- string -> int32 map --------------------------------------------------------------------- */
static int strmap_grow(tok_strmap *m) {
    uint32_t cap = m->cap ? m->cap * 2 : 64;
    tok_strmap_slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return -1;
    for (uint32_t i = 0; i < m->cap; i++) {
        tok_strmap_slot *s = &m->slots[i];
        if (!s->key) continue;
        uint32_t j = (uint32_t)s->hash & (cap - 1);
        while (slots[j].key) j = (j + 1) & (cap - 1);
        slots[j] = *s;
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

int tok_strmap_put(tok_strmap *m, const char *key, uint32_t len, int32_t val) {
    if ((m->n + 1) * 2 > m->cap && strmap_grow(m) != 0) return -1;
    uint64_t h = tok_hash_bytes(key, len);
    uint32_t j = (uint32_t)h & (m->cap - 1);
    while (m->slots[j].key) {
        tok_strmap_slot *s = &m->slots[j];
        if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0) {
            s->val = val;
            return 0;
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->slots[j] = (tok_strmap_slot){key, len, val, h};
    m->n++;
    return 0;
}

int32_t tok_strmap_get(const tok_strmap *m, const char *key, uint32_t len) {
    if (!m->cap) return -1;
    uint64_t h = tok_hash_bytes(key, len);
    uint32_t j = (uint32_t)h & (m->cap - 1);
    for (; m->slots[j].key; j = (j + 1) & (m->cap - 1)) {
        const tok_strmap_slot *s = &m->slots[j];
        if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0) return s->val;
    }
    return -1;
}

void tok_strmap_free(tok_strmap *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}
