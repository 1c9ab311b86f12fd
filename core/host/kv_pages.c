/*
 * kv_pages.c — the pool, free list, reference counts and page table of a paged KV cache (see
 * kv_pages.h).
 */
#include "host/kv_pages.h"

#include <stdlib.h>
#include <string.h>

int grpo_kv_pages_init(grpo_kv_pages *p, const grpo_ops *ops, const char *who, int32_t R,
                       int32_t S, int32_t page, uint64_t page_floats, int32_t n0,
                       grpo_error *err) {
    float *spare = p->spare;
    uint64_t spare_floats = p->spare_floats;
    memset(p, 0, sizeof *p);
    p->ops = ops, p->who = who, p->R = R, p->page = page, p->nblk = (S + page - 1) / page;
    p->page_floats = page_floats;
    size_t nt = (size_t)R * p->nblk;
    n0 = n0 > 0 ? n0 : 1;
    if (spare && page_floats && spare_floats / page_floats >= (uint64_t)n0 &&
        spare_floats / page_floats <= INT32_MAX) {
        n0 = (int32_t)(spare_floats / page_floats);
        p->pool = spare; /* the last pool: no fresh pages to fault in */
        ops->zero(ops->ctx, spare, (uint64_t)n0 * page_floats * sizeof(float));
    } else if (spare) {
        ops->free(ops->ctx, spare);
    }
    p->table = malloc(nt * sizeof *p->table);
    p->d_table = ops->alloc(ops->ctx, nt * sizeof *p->d_table);
    p->ref = calloc((size_t)n0, sizeof *p->ref);
    p->free_ids = malloc((size_t)n0 * sizeof *p->free_ids);
    if (!p->pool) p->pool = ops->alloc(ops->ctx, (uint64_t)n0 * page_floats * sizeof(float));
    if (!p->table || !p->d_table || !p->ref || !p->free_ids || !p->pool) {
        uint64_t mib = ((uint64_t)n0 * page_floats * sizeof(float)) >> 20;
        grpo_kv_pages_free(p);
        return grpo_error_set(err, GRPO_ERR_NOMEM,
                              "model %s: cannot allocate a paged KV cache of %d pages of %d "
                              "positions (%llu MiB) and its page table (%d rows x %d blocks)",
                              who, n0, page, (unsigned long long)mib, R, (int)(nt / R));
    }
    for (size_t i = 0; i < nt; i++) p->table[i] = -1;
    p->n_pages = n0, p->n_free = n0;
    for (int32_t i = 0; i < n0; i++) p->free_ids[i] = n0 - 1 - i; /* page 0 on top */
    p->dirty = 1;
    return GRPO_OK;
}

void grpo_kv_pages_free(grpo_kv_pages *p) {
    if (p->spare) p->ops->free(p->ops->ctx, p->spare);
    if (p->pool) p->ops->free(p->ops->ctx, p->pool);
    if (p->d_table) p->ops->free(p->ops->ctx, p->d_table);
    free(p->table), free(p->ref), free(p->free_ids);
    memset(p, 0, sizeof *p);
}

void grpo_kv_pages_release(grpo_kv_pages *p) {
    float *spare = p->spare;
    uint64_t floats = p->spare_floats;
    if (p->pool) { /* the pool replaces the spare */
        if (spare) p->ops->free(p->ops->ctx, spare);
        spare = p->pool, floats = (uint64_t)p->n_pages * p->page_floats;
    }
    const grpo_ops *ops = p->ops;
    p->pool = NULL, p->spare = NULL;
    grpo_kv_pages_free(p);
    p->ops = ops, p->spare = spare, p->spare_floats = floats;
}

/* Makes room for at least one more free page: a pool a quarter larger (at least 16 pages),
 * the old pages copied to the same ids. */
static int grow(grpo_kv_pages *p, grpo_error *err) {
    int32_t n = p->n_pages, add = n / 4 > 16 ? n / 4 : 16, m = n + add;
    uint64_t bytes = (uint64_t)m * p->page_floats * sizeof(float);
    float *pool = p->ops->alloc(p->ops->ctx, bytes);
    int32_t *ref = realloc(p->ref, (size_t)m * sizeof *ref);
    if (ref) p->ref = ref;
    int32_t *ids = ref ? realloc(p->free_ids, (size_t)m * sizeof *ids) : NULL;
    if (ids) p->free_ids = ids;
    if (!pool || !ref || !ids) {
        if (pool) p->ops->free(p->ops->ctx, pool);
        return grpo_error_set(err, GRPO_ERR_NOMEM,
                              "model %s: the paged KV cache cannot grow from %d to %d pages of "
                              "%d positions (%llu MiB): out of memory", p->who, n, m, p->page,
                              (unsigned long long)(bytes >> 20));
    }
    p->ops->copy(p->ops->ctx, pool, p->pool, (uint64_t)n * p->page_floats * sizeof(float));
    p->ops->free(p->ops->ctx, p->pool);
    p->pool = pool;
    for (int32_t i = m - 1; i >= n; i--) p->ref[i] = 0, p->free_ids[p->n_free++] = i;
    p->n_pages = m, p->grows++;
    return GRPO_OK;
}

/* A free page, taken (ref 1); -1 with err set when the pool cannot grow. */
static int32_t take(grpo_kv_pages *p, grpo_error *err) {
    if (p->n_free == 0 && grow(p, err) != GRPO_OK) return -1;
    int32_t id = p->free_ids[--p->n_free];
    p->ref[id] = 1;
    if (++p->in_use > p->in_use_max) p->in_use_max = p->in_use;
    return id;
}

/* One holder less for page id; at none it is free again. */
static void unref(grpo_kv_pages *p, int32_t id) {
    if (id < 0 || --p->ref[id] > 0) return;
    p->free_ids[p->n_free++] = id;
    p->in_use--;
}

void grpo_kv_pages_drop_row(grpo_kv_pages *p, int32_t r) {
    int32_t *t = p->table + (size_t)r * p->nblk;
    for (int32_t b = 0; b < p->nblk; b++)
        if (t[b] >= 0) unref(p, t[b]), t[b] = -1, p->dirty = 1;
}

int grpo_kv_pages_own(grpo_kv_pages *p, int32_t r, int32_t blk, grpo_error *err) {
    int32_t *e = p->table + (size_t)r * p->nblk + blk, old = *e;
    if (old >= 0 && p->ref[old] == 1) return GRPO_OK;
    int32_t id = take(p, err);
    if (id < 0) return GRPO_ERR_NOMEM;
    if (old >= 0) { /* shared: this row's copy (copy-on-write) */
        uint64_t f = p->page_floats;
        p->ops->copy(p->ops->ctx, p->pool + (uint64_t)id * f, p->pool + (uint64_t)old * f,
                     f * sizeof(float));
        unref(p, old);
    }
    *e = id, p->dirty = 1;
    return GRPO_OK;
}

void grpo_kv_pages_share_row(grpo_kv_pages *p, int32_t dst, int32_t src, int32_t n) {
    if (dst == src) return;
    grpo_kv_pages_drop_row(p, dst);
    const int32_t *s = p->table + (size_t)src * p->nblk;
    int32_t *d = p->table + (size_t)dst * p->nblk;
    for (int32_t b = 0; b < (n + p->page - 1) / p->page && b < p->nblk; b++)
        if ((d[b] = s[b]) >= 0) p->ref[s[b]]++;
    p->dirty = 1;
}

void grpo_kv_pages_move_row(grpo_kv_pages *p, int32_t dst, int32_t src) {
    if (dst == src) return;
    grpo_kv_pages_drop_row(p, dst);
    int32_t *s = p->table + (size_t)src * p->nblk, *d = p->table + (size_t)dst * p->nblk;
    memcpy(d, s, (size_t)p->nblk * sizeof *d);
    for (int32_t b = 0; b < p->nblk; b++) s[b] = -1;
    p->dirty = 1;
}

void grpo_kv_pages_sync(grpo_kv_pages *p) {
    if (!p->dirty) return;
    p->ops->upload(p->ops->ctx, p->d_table, p->table,
                   (uint64_t)p->R * p->nblk * sizeof *p->table);
    p->dirty = 0;
}
