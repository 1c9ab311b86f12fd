/*
 * work_memory.c — the block of backend memory that models' passes work in, shared by models
 * whose passes never overlap (see work_memory.h).
 */
#include "host/work_memory.h"

#include <stdlib.h>

grpo_work *grpo_work_new(const grpo_ops *ops) {
    grpo_work *w = calloc(1, sizeof *w);
    if (w) w->ops = ops, w->users = 1;
    return w;
}

grpo_work *grpo_work_share(grpo_work *w) {
    w->users++;
    return w;
}

void grpo_work_drop(grpo_work *w) {
    if (w->buf) w->ops->free(w->ops->ctx, w->buf);
    w->buf = NULL, w->bytes = 0, w->holder = NULL;
}

void grpo_work_release(grpo_work *w) {
    if (!w || --w->users > 0) return;
    grpo_work_drop(w);
    free(w);
}

void *grpo_work_reserve(grpo_work *w, const void *holder, uint64_t bytes) {
    if (bytes > w->bytes || !w->buf) {
        grpo_work_drop(w); /* the old one first: never both at once */
        if (!(w->buf = w->ops->alloc(w->ops->ctx, bytes ? bytes : 1))) return NULL;
        w->bytes = bytes;
    }
    w->holder = holder;
    return w->buf;
}

void *grpo_work_held(const grpo_work *w, const void *holder, uint64_t bytes) {
    return bytes && w->holder == holder && w->bytes >= bytes ? w->buf : NULL;
}
