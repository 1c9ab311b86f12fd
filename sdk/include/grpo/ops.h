/*
 * grpo/ops.h — the kernel op table every model uses, frozen as ABI 1.x (since 1.3): it grows only
 * at its end, behind struct_size. Its ops are listed, documented and marked with the minor
 * version that added each in grpo/ops_list.h; a plugin tests grpo_ops_supports(ops, op) (below)
 * before an optional op (one added after 1.0, or one a backend may leave NULL). What each minor
 * added, for every SDK header: the ABI history table in grpo/plugin.h.
 *
 * One table per backend (cpu, cuda), with an opaque context, in the manner of ggml's backends.
 * All float buffers are fp32 and live in the backend's memory (host memory for cpu): a model plugin
 * gets memory and ops from the host and never links a backend itself.
 *
 * Dimension letters: N tokens (= B*T), B rows, T time, C channels, I intermediate (MLP), V vocab,
 * NH query heads, NKV key/value heads, HD head dim, R decode rows, S cache length (max positions).
 * Linear weights use PyTorch's layout: w (OC, IC), y = x @ w^T + b.
 *
 * Accumulation rule: parameter gradients (dw, dbias, dwte) are ACCUMULATED (+=); activation
 * gradients (dinp, dq, ...) are WRITTEN (=). A gradient pointer may be NULL: that gradient is
 * skipped. Calls on one context are issued from one thread; a backend parallelises inside.
 */
#ifndef GRPO_OPS_H
#define GRPO_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "grpo/ops_list.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct grpo_ops {
    uint32_t struct_size;
    /* -- 1.0 -- */
    const char *name; /* "cpu", "cuda" */
    void *ctx;        /* backend context, passed back as the first argument */

    /* the ops, one member per entry of GRPO_OPS_LIST (grpo/ops_list.h, which documents each) */
#define GRPO_OP_MEMBER(D, minor, optional, ret, name, params) ret(*name) params;
    GRPO_OPS_LIST(GRPO_OP_MEMBER, ~)
#undef GRPO_OP_MEMBER
} grpo_ops;

/* Whether the table `ops` has the op `op` (a member name): the table is new enough to hold it
 * (struct_size, as GRPO_HAS_FIELD of grpo/plugin.h) and the backend filled it. Callers test it
 * before every optional op of ops_list.h instead of reading the member themselves. */
#define grpo_ops_supports(ops, op)                                                              \
    ((ops)->struct_size >= offsetof(grpo_ops, op) + sizeof((ops)->op) && (ops)->op != NULL)

/* -- 1.8: attention_forward/_backward's mask: a segment id >= 1 << GRPO_ATTN_CHILD_SHIFT is a
 * child of the parent segment id >> GRPO_ATTN_CHILD_SHIFT (grpo/ops_list.h, packed rows that
 * share a prompt) -- */
#define GRPO_ATTN_CHILD_SHIFT 16

/* -- 1.5: element types of weights (grpo_model_desc.bind_typed, the *_w ops) -- */
#define GRPO_DTYPE_F32 0  /* IEEE binary32 */
#define GRPO_DTYPE_BF16 1 /* bfloat16: the high 16 bits of a binary32 (8-bit exponent) */

/* Element size in bytes of a GRPO_DTYPE_*, 0 for one this header does not know. */
static inline uint32_t grpo_dtype_size(int32_t dtype) {
    return dtype == GRPO_DTYPE_F32 ? 4u : dtype == GRPO_DTYPE_BF16 ? 2u : 0u;
}

/* fp32 -> bf16, rounding to nearest even as PyTorch's .to(torch.bfloat16) does; a NaN stays a
 * (quiet) NaN, infinities stay infinite. */
static inline uint16_t grpo_bf16_from_f32(float x) {
    union { float f; uint32_t u; } v = {x};
    if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 0x40u); /* NaN */
    return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}

/* 1.5: whether dropout keeps element i under seed at rate p (0 <= p < 1): a splitmix64 hash of
 * seed and i, its top 24 bits as u in [0, 1), kept when u >= p. Every backend draws this mask. */
static inline int grpo_dropout_keeps(uint64_t seed, uint64_t i, float p) {
    uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f) >= p;
}

/* bf16 -> fp32, exact. */
static inline float grpo_bf16_to_f32(uint16_t h) {
    union { uint32_t u; float f; } v = {(uint32_t)h << 16};
    return v.f;
}

#ifdef __cplusplus
}
#endif
#endif /* GRPO_OPS_H */
