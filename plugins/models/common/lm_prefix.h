/*
 * lm_prefix.h — the token layout of a training pass, and the shared-prefix layout
 * (grpo_model_desc.set_shared_prefix, ABI 1.6; compiled into each pack, not part of the SDK).
 *
 * Design. A (B,T) batch whose consecutive rows repeat their first P columns (set_shared_prefix)
 * (GRPO: the G completions of one prompt, the prompt left-padded to P) runs as BP prefix rows
 * of P tokens followed by the B rows' last Tc = T - P columns, N' = BP*P + B*Tc tokens in all
 * ("packed"), instead of N = B*T:
 *   - every per-token op (norms, projections, MLP, LoRA's adapters) runs on the N' tokens as on
 *     any N tokens: the prompt's layers run once per group, not once per row;
 *   - attention runs the prefix rows as plain causal rows (attention_forward, B = BP, T = P),
 *     and the B completion rows with prefix_attention_forward against their prefix rows' keys
 *     and values of the same layer;
 *   - backward: attention_backward writes the prefix rows' dk/dv, then
 *     prefix_attention_backward adds the completions' gradients into them (dkp/dvp +=), so the
 *     prefix's layers run backward once, with the sum over its rows;
 *   - the head reads the (B,T) layout back with gather_rows (idx (B*T) -> packed token), and
 *     its gradient goes back with scatter_add_rows (a shared column's rows add up);
 *   - positions: the prefix's are the rows' (equal in its rows), the rest the rows' own; masks
 *     likewise, so a left-padded prefix and right-padded completions are plain masks.
 * The host's activation block for (B,T) is carved as for (B,T) and the first N' tokens of every
 * tensor used (N' <= N). Results equal the plain path's up to fp32 rounding: the same sums,
 * formed in another order (a prefix's weight gradient sums its rows' contributions before
 * multiplying, an attention row's softmax runs over two key segments).
 * The pack runs a batch packed only when it can (else the plain path, as before 1.6): the
 * backend has the 1.6 prefix attention ops and gather_rows/scatter_add_rows, the pack keeps no
 * per-row statistics (the MoE router's aux loss counts each row's tokens: it runs plain), no
 * LoRA adapter has dropout (its mask is drawn per token: packed tokens would share draws), and
 * some rows actually share (BP < B).
 */
#ifndef LM_PREFIX_H
#define LM_PREFIX_H

#include "grpo/model.h"
#include "grpo/ops.h"

/* The token layout of a pass, all device arrays. Plain: B rows of T, N = B*T. Packed (BP > 0):
 * BP prefix rows of P tokens, then B rows of T (the completion width Tc), N = BP*P + B*T. */
typedef struct lm_rows {
    int32_t N, B, T;
    const int32_t *mask, *pos; /* (N) [prefixes | rows] */
    int32_t BP, P;             /* 0, 0: plain */
    const int32_t *prefix_of;  /* (B) row b's prefix, in [0, BP) (packed only) */
} lm_rows;

/* The packed layout of the last training forward (owned by the decoder). */
typedef struct lm_prefix {
    int32_t active;        /* the last forward ran packed; backward uses rows/ids/idx */
    lm_rows rows;
    const int32_t *ids;    /* (N') device, packed ids */
    const int32_t *idx;    /* (B*T) device: the packed token of column t of row b */
    const int32_t *host_prefix_of; /* (B) host copy of rows.prefix_of */
    int32_t *dev;          /* device block: ids mask pos idx (cap each) prefix_of (capB) */
    int32_t *host;         /* host block: the batch's ids mask pos, packed ids mask pos idx,
                              prefix_of */
    uint64_t cap, capB;
} lm_prefix;

/* The plain layout of a batch. */
lm_rows lm_rows_plain(const grpo_batch *b);
/* Whether a pass may run packed (above) for batch b with prefix P: 1 or 0, before looking at
 * the data. */
int32_t lm_prefix_possible(const grpo_ops *o, const grpo_batch *b, int32_t P,
                           int32_t per_row_stats, int32_t lora_dropout);
/* Downloads b's ids/mask/pos, finds the runs of rows equal in their first P columns, and when
 * some rows share (BP < B) uploads the packed layout into p (p->active = 1); else
 * p->active = 0. Fails only for memory. */
int32_t lm_prefix_build(lm_prefix *p, const grpo_ops *o, const grpo_batch *b, int32_t P,
                        const char *who, grpo_error *err);
void lm_prefix_free(lm_prefix *p, const grpo_ops *o);

#endif
