/*
 * kv_pages.h — the pages of a paged KV cache (grpo/model.h, ABI 1.9): a pool of pages in
 * backend memory, each `page` positions of every layer's keys and values (the pack's
 * kv_page_floats(page) floats), and a page table (row, block) -> page id.
 *
 *   pool    n_pages * page_floats floats of backend memory, its own allocation (not the work
 *           memory): it grows while a rollout runs (a new allocation of more pages, the old
 *           pages copied, page ids unchanged); when the rollout ends it is kept as the spare
 *           (grpo_kv_pages_release), which the next pool takes, zeroed, instead of new memory
 *           when it is large enough (the model's next pool starts with as many pages:
 *           grpo_model.kv_pages_last): every rollout faulting in a fresh pool cost each step
 *           the kernel's zeroing of its pages (on 2 MiB pages in a virtual machine, ~3 ms a
 *           MiB: BENCHMARKS.md, issue 30)
 *   table   (R, nblk) page ids, -1: no page; host copy, uploaded to the backend copy before a
 *           pass reads it (grpo_kv_pages_sync)
 *   ref     [n_pages] how many (row, block) entries hold each page; 0: on the free list
 *
 * The G rows of one prompt share its pages (grpo_kv_pages_share_row); a block is given a page
 * of its own (a copy of the shared one: copy-on-write) before a pass writes to it
 * (grpo_kv_pages_own). A row that ends gives its pages back (grpo_kv_pages_drop_row). in_use
 * counts the pages some row holds; in_use_max its peak since the pool was made.
 */
#ifndef GRPO_CORE_KV_PAGES_H
#define GRPO_CORE_KV_PAGES_H

#include "grpo/ops.h"
#include "grpo/plugin.h"

typedef struct grpo_kv_pages {
    const grpo_ops *ops;
    const char *who;       /* the model's id, for errors */
    int32_t R, page, nblk; /* rows, positions per page, blocks per row (ceil(S / page)) */
    uint64_t page_floats;  /* floats of one page */
    float *pool;           /* backend: n_pages pages */
    int32_t n_pages;
    int32_t *ref;          /* [n_pages] */
    int32_t *free_ids, n_free; /* [n_pages] a stack of the free page ids */
    int32_t *table;        /* host (R, nblk) */
    int32_t *d_table;      /* backend (R, nblk) */
    int dirty;             /* the host table changed since the last upload */
    int32_t in_use, in_use_max;
    int32_t grows;         /* the pool's growths since it was made */
    float *spare;          /* backend: the last pool, kept by grpo_kv_pages_release */
    uint64_t spare_floats;
} grpo_kv_pages;

/* A pool of n0 pages (at least 1) for R rows of S positions in pages of `page`; every block
 * without a page. who: the model's id (borrowed; named in errors). The spare, when it holds
 * n0 pages or more, is the pool (zeroed; all its pages); otherwise it is freed. */
int grpo_kv_pages_init(grpo_kv_pages *p, const grpo_ops *ops, const char *who, int32_t R,
                       int32_t S, int32_t page, uint64_t page_floats, int32_t n0,
                       grpo_error *err);
/* Frees the pool, the spare and the tables (p zeroed; a zeroed p is fine). */
void grpo_kv_pages_free(grpo_kv_pages *p);
/* The same, but the pool becomes the spare (the spare before it freed); without a pool the
 * spare stays. */
void grpo_kv_pages_release(grpo_kv_pages *p);
/* Row r's blocks give their pages back (a page no block holds any more is free). */
void grpo_kv_pages_drop_row(grpo_kv_pages *p, int32_t r);
/* Block blk of row r gets a page no other block holds: a new one when it has none, a copy of
 * its page when that is shared; the pool grows when no page is free (an error names the pool
 * and its size when it cannot). */
int grpo_kv_pages_own(grpo_kv_pages *p, int32_t r, int32_t blk, grpo_error *err);
/* Row dst drops its pages and shares row src's pages of slots [0, n). */
void grpo_kv_pages_share_row(grpo_kv_pages *p, int32_t dst, int32_t src, int32_t n);
/* Row dst drops its pages and takes row src's; src is left without pages. */
void grpo_kv_pages_move_row(grpo_kv_pages *p, int32_t dst, int32_t src);
/* Uploads the table when it changed. */
void grpo_kv_pages_sync(grpo_kv_pages *p);

#endif
