/*
 * work_memory.h — the backend memory a model's passes work in: a training pass's activations
 * (forward to backward), a frozen forward's, a sampler's KV cache and scratch. Several models
 * whose passes never overlap may share one (a training step runs the rollout, the reference
 * and the policy one after another: grpo_model_share_work): one block, grown when a pass needs
 * more (its contents lost), never shrunk, and reused step after step rather than faulted in
 * anew. Whoever reserved it last holds it; a pass checks it still does, so that one whose
 * memory another model's pass took in between fails rather than read another's data.
 * Not thread-safe: the models sharing a block run from one thread.
 */
#ifndef GRPO_HOST_WORK_MEMORY_H
#define GRPO_HOST_WORK_MEMORY_H

#include <stdint.h>

#include "grpo/ops.h"

typedef struct grpo_work {
    const grpo_ops *ops;
    void *buf;          /* backend memory, NULL until reserved */
    uint64_t bytes;     /* of buf */
    const void *holder; /* who reserved it last (a model) */
    int users;          /* models sharing it */
} grpo_work;

/* An empty block on ops for one user, or NULL without memory. */
grpo_work *grpo_work_new(const grpo_ops *ops);
/* w with one more user (the caller shares it). */
grpo_work *grpo_work_share(grpo_work *w);
/* One user less; the block goes with the last (NULL is ignored). */
void grpo_work_release(grpo_work *w);
/* At least bytes for holder: the block, grown (zeroed, what it held lost) when smaller, or NULL
 * when the backend has no memory for it (the block is then empty). */
void *grpo_work_reserve(grpo_work *w, const void *holder, uint64_t bytes);
/* The block while holder holds it and it has at least bytes (> 0), else NULL. */
void *grpo_work_held(const grpo_work *w, const void *holder, uint64_t bytes);
/* Frees the block (reserved for a layout that changed): every user reserves again. */
void grpo_work_drop(grpo_work *w);

#endif
