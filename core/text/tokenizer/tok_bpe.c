/*
 * tok_bpe.c — the BPE model: the merges map, the merge loop (a binary heap of candidate merges,
 * lowest rank then leftmost first, as in `tokenizers`' Word::merge_all) and a bounded cache of
 * merged words.
 *
 * Dimension letters: V id slots, L symbols of a word (bytes for byte-level models).
 */
#include "text/tokenizer/tok_bpe.h"

#include "text/tokenizer/tok_bytelevel.h"
#include "text/tokenizer/tok_utf8.h"
#include "text/tokenizer/tok_vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- merges: (left, right) -> (rank, new id) ------------------------------------------------- */
static uint64_t hash_pair(uint64_t pair) {
    pair *= 0x9E3779B97F4A7C15ull;
    return pair ^ (pair >> 31);
}

static int merge_grow(tok_bpe *m) {
    uint32_t cap = m->merge_cap ? m->merge_cap * 2 : 1024;
    tok_merge_slot *slots = malloc((size_t)cap * sizeof *slots);
    if (!slots) return -1;
    for (uint32_t i = 0; i < cap; i++) slots[i].pair = UINT64_MAX;
    for (uint32_t i = 0; i < m->merge_cap; i++) {
        if (m->merges[i].pair == UINT64_MAX) continue;
        uint32_t j = (uint32_t)hash_pair(m->merges[i].pair) & (cap - 1);
        while (slots[j].pair != UINT64_MAX) j = (j + 1) & (cap - 1);
        slots[j] = m->merges[i];
    }
    free(m->merges);
    m->merges = slots;
    m->merge_cap = cap;
    return 0;
}

/* A pair listed twice keeps its last rank: `tokenizers` collects the merges into a HashMap, where
 * the later insert wins. */
int tok_merge_put(tok_bpe *m, int32_t left, int32_t right, int32_t rank, int32_t new_id) {
    if ((m->n_merges + 1) * 2 > m->merge_cap && merge_grow(m) != 0) return -1;
    uint64_t pair = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    uint32_t j = (uint32_t)hash_pair(pair) & (m->merge_cap - 1);
    while (m->merges[j].pair != UINT64_MAX && m->merges[j].pair != pair)
        j = (j + 1) & (m->merge_cap - 1);
    if (m->merges[j].pair == UINT64_MAX) m->n_merges++;
    m->merges[j] = (tok_merge_slot){pair, rank, new_id};
    return 0;
}

static const tok_merge_slot *merge_get(const tok_bpe *m, int32_t left, int32_t right) {
    if (!m->merge_cap) return NULL;
    uint64_t pair = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    uint32_t j = (uint32_t)hash_pair(pair) & (m->merge_cap - 1);
    for (; m->merges[j].pair != UINT64_MAX; j = (j + 1) & (m->merge_cap - 1))
        if (m->merges[j].pair == pair) return &m->merges[j];
    return NULL;
}

/* ---- the word cache -------------------------------------------------------------------------- */
#define CACHE_MIN_SLOTS 1024u
#define CACHE_MAX_SLOTS (1u << 17) /* at most CACHE_MAX_SLOTS/2 words are cached */
#define CACHE_MAX_WORD 256         /* longer words (bytes) are not cached */

int tok_bpe_init_cache(tok_bpe *m) {
    tok_cache *c = &m->cache;
    memset(c, 0, sizeof *c);
    if (pthread_mutex_init(&c->lock, NULL) != 0) return -1;
    c->slots = calloc(CACHE_MIN_SLOTS, sizeof *c->slots);
    c->cap = CACHE_MIN_SLOTS;
    return c->slots ? 0 : -1;
}

/* Doubles the slot table (caller holds the lock); -1 when at the bound or out of memory. */
static int cache_grow(tok_cache *c) {
    if (c->cap >= CACHE_MAX_SLOTS) return -1;
    uint32_t cap = c->cap * 2;
    tok_cache_slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return -1;
    for (uint32_t i = 0; i < c->cap; i++) {
        if (!c->slots[i].key_len) continue;
        uint32_t j = c->slots[i].hash & (cap - 1);
        while (slots[j].key_len) j = (j + 1) & (cap - 1);
        slots[j] = c->slots[i];
    }
    free(c->slots);
    c->slots = slots;
    c->cap = cap;
    return 0;
}

/* Appends the cached ids of word s to out; returns 1 on a hit, 0 on a miss, -1 on nomem. */
static int cache_get(tok_cache *c, const char *s, uint32_t len, uint32_t h, grpo_tok_ids *out) {
    int found = 0;
    pthread_mutex_lock(&c->lock);
    for (uint32_t j = (uint32_t)h & (c->cap - 1); c->slots[j].key_len; j = (j + 1) & (c->cap - 1)) {
        tok_cache_slot *e = &c->slots[j];
        if (e->hash == h && e->key_len == len && memcmp(c->keys + e->key_off, s, len) == 0) {
            found = 1;
            for (uint32_t k = 0; k < e->ids_len && found == 1; k++)
                if (tok_ids_push(out, c->ids[e->ids_off + k]) != 0) found = -1;
            break;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return found;
}

static int pool_reserve(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t ncap = *cap ? *cap : 4096;
    while (ncap < need) ncap *= 2;
    void *q = realloc(*p, ncap * elem);
    if (!q) return -1;
    *p = q, *cap = ncap;
    return 0;
}

/* Remembers word s -> ids[0..n); silently does nothing when the cache is full. */
static void cache_put(tok_cache *c, const char *s, uint32_t len, uint32_t h, const int32_t *ids,
                      size_t n) {
    if (len == 0 || len > CACHE_MAX_WORD || n > UINT16_MAX) return;
    pthread_mutex_lock(&c->lock);
    if (((c->n + 1) * 2 > c->cap && cache_grow(c) != 0) ||
        pool_reserve((void **)&c->keys, &c->keys_cap, c->keys_n + len, 1) != 0 ||
        pool_reserve((void **)&c->ids, &c->ids_cap, c->ids_n + n, sizeof(int32_t)) != 0)
        goto done;
    uint32_t j = (uint32_t)h & (c->cap - 1);
    for (; c->slots[j].key_len; j = (j + 1) & (c->cap - 1)) {
        tok_cache_slot *e = &c->slots[j];
        if (e->hash == h && e->key_len == len && memcmp(c->keys + e->key_off, s, len) == 0)
            goto done; /* another thread got there first */
    }
    memcpy(c->keys + c->keys_n, s, len);
    memcpy(c->ids + c->ids_n, ids, n * sizeof(int32_t));
    c->slots[j] = (tok_cache_slot){h, (uint32_t)c->keys_n, (uint32_t)c->ids_n, (uint16_t)len,
                                          (uint16_t)n};
    c->keys_n += len, c->ids_n += n, c->n++;
done:
    pthread_mutex_unlock(&c->lock);
}

/* ---- the merge loop -------------------------------------------------------------------------- */
typedef struct sym {
    int32_t id;
    int32_t prev, next; /* neighbours, -1 at the ends */
    uint32_t len;       /* 0 once merged into its left neighbour */
} sym;

typedef struct cand {
    int32_t rank, pos, new_id;
    int32_t right; /* position of the right symbol when pushed */
    int32_t left_id,
        right_id; /* the pair when pushed: a changed symbol makes the candidate stale */
} cand;

static int cand_less(const cand *a, const cand *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(cand *h, size_t *n, cand c) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static cand heap_pop(cand *h, size_t *n) {
    cand top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, best = i;
        cand *bc = &last;
        if (l < *n && cand_less(&h[l], bc)) best = l, bc = &h[l];
        if (l + 1 < *n && cand_less(&h[l + 1], bc)) best = l + 1;
        if (best == i) break;
        h[i] = h[best];
        i = best;
    }
    if (*n) h[i] = last;
    return top;
}

static void push_pair(const tok_bpe *m, const sym *w, int32_t pos, cand *heap, size_t *nh) {
    int32_t next = w[pos].next;
    if (next < 0) return;
    const tok_merge_slot *mg = merge_get(m, w[pos].id, w[next].id);
    if (mg) heap_push(heap, nh, (cand){mg->rank, pos, mg->new_id, next, w[pos].id, w[next].id});
}

/* Initial symbols of a word: one per byte (byte-level) or per UTF-8 character, with unk_token,
 * fuse_unk and byte_fallback handled as `tokenizers`' BPE::merge_word does. Returns the count. */
static int32_t initial_symbols(const tok_bpe *m, const char *s, size_t len, sym *w) {
    int32_t n = 0, unk_len = 0;
    char buf[8];
    for (size_t i = 0; i < len;) {
        size_t cl = 1;
        int32_t id;
        if (m->byte_level) {
            id = m->byte_id[(unsigned char)s[i]];
        } else {
            cl = tok_utf8_len((unsigned char)s[i]);
            if (cl > len - i) cl = len - i; /* a word cut inside a character: never read past */
            id = tok_strmap_get(&m->vocab, s + i, (uint32_t)cl);
        }
        if (id >= 0) {
            if (unk_len) w[n] = (sym){m->unk_id, n - 1, n + 1, (uint32_t)unk_len}, n++, unk_len = 0;
            w[n] = (sym){id, n - 1, n + 1, (uint32_t)cl}, n++;
        } else {
            int fell_back = 0;
            if (m->byte_fallback) {
                int32_t bid[4];
                size_t k = 0;
                for (; k < cl; k++) {
                    snprintf(buf, sizeof buf, "<0x%02X>", (unsigned char)s[i + k]);
                    if ((bid[k] = tok_strmap_get(&m->vocab, buf, 6)) < 0) break;
                }
                if (k == cl) {
                    for (k = 0; k < cl; k++) w[n] = (sym){bid[k], n - 1, n + 1, 1}, n++;
                    fell_back = 1;
                }
            }
            if (!fell_back && m->unk_id >= 0) {
                if (unk_len && !m->fuse_unk)
                    w[n] = (sym){m->unk_id, n - 1, n + 1, (uint32_t)unk_len}, n++, unk_len = 0;
                unk_len += (int32_t)cl;
            }
        }
        i += cl;
    }
    if (unk_len) w[n] = (sym){m->unk_id, n - 1, n + 1, (uint32_t)unk_len}, n++;
    if (n) w[n - 1].next = -1;
    return n;
}

/* Merges the symbols w[0..n) in place: always the lowest-rank pair, leftmost first. */
static void merge_all(const tok_bpe *m, sym *w, int32_t n, cand *heap) {
    size_t nh = 0;
    for (int32_t i = 0; i + 1 < n; i++) push_pair(m, w, i, heap, &nh);
    while (nh) {
        cand c = heap_pop(heap, &nh);
        sym *a = &w[c.pos];
        if (a->len == 0 || a->next < 0) continue;
        sym *b = &w[a->next];
        /* A candidate whose pair changed since the push is stale unless the new pair makes the
         * same token: `tokenizers` checks exactly that, so the unchanged case skips the lookup. */
        if (a->next != c.right || a->id != c.left_id || b->id != c.right_id) {
            const tok_merge_slot *mg = merge_get(m, a->id, b->id);
            if (!mg || mg->new_id != c.new_id) continue;
        }
        a->id = c.new_id;
        a->len += b->len;
        b->len = 0;
        a->next = b->next;
        if (a->next >= 0) w[a->next].prev = c.pos;
        if (a->prev >= 0) push_pair(m, w, a->prev, heap, &nh);
        push_pair(m, w, c.pos, heap, &nh);
    }
}

int tok_bpe_word(const tok_bpe *m, const char *s, size_t len, grpo_tok_ids *out) {
    if (len == 0) return 0;
    if (len == 1 && m->byte_level && m->byte_id[(unsigned char)s[0]] >= 0)
        return tok_ids_push(out, m->byte_id[(unsigned char)s[0]]);
    uint32_t h = (uint32_t)tok_hash_bytes(s, len);
    tok_cache *cache = (tok_cache *)&m->cache; /* the cache is the one mutable part */
    int hit = cache_get(cache, s, (uint32_t)len, h, out);
    if (hit) return hit < 0 ? -1 : 0;

    /* scratch: symbols (L), heap (L-1 initial pairs + 2 per merge < 3L), spelled word (2L) */
    enum { SMALL = 64 };
    sym w_small[SMALL];
    cand heap_small[3 * SMALL];
    char spell_small[2 * SMALL];
    sym *w = len <= SMALL ? w_small : malloc(len * sizeof *w);
    cand *heap = len <= SMALL ? heap_small : malloc(3 * len * sizeof *heap);
    char *spell = len <= SMALL ? spell_small : malloc(2 * len);
    int rc = -1;
    if (!w || !heap || !spell) goto out;

    size_t start = out->n;
    int32_t whole = -1;
    if (m->ignore_merges) {
        size_t sl = m->byte_level ? tok_byte_level_spell(spell, s, len) : len;
        whole = tok_strmap_get(&m->vocab, m->byte_level ? spell : s, (uint32_t)sl);
    }
    if (whole >= 0) {
        if (tok_ids_push(out, whole) != 0) goto out;
    } else {
        int32_t n = initial_symbols(m, s, len, w);
        merge_all(m, w, n, heap);
        for (int32_t i = 0; n > 0 && i >= 0; i = w[i].next)
            if (tok_ids_push(out, w[i].id) != 0) goto out;
    }
    /* a word of symbols all outside the vocabulary (no unk token) encodes to nothing */
    if (out->n > start) cache_put(cache, s, (uint32_t)len, h, out->data + start, out->n - start);
    rc = 0;
out:
    if (w != w_small) free(w);
    if (heap != heap_small) free(heap);
    if (spell != spell_small) free(spell);
    return rc;
}

void tok_bpe_free(tok_bpe *m) {
    for (int32_t i = 0; i < m->n_ids; i++) free(m->token[i]);
    free(m->token);
    free(m->token_len);
    tok_strmap_free(&m->vocab);
    free(m->merges);
    if (m->cache.slots) pthread_mutex_destroy(&m->cache.lock);
    free(m->cache.slots);
    free(m->cache.keys);
    free(m->cache.ids);
    memset(m, 0, sizeof *m);
}
