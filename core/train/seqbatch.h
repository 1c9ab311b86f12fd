/*
 * seqbatch.h — a (B,T) batch of token sequences for a model's forward/backward: host arrays the
 * caller fills, their backend copies, and the per-token log-probs that come back.
 *
 * Shapes (B rows, T columns, row-major): ids, mask, targets are filled by the caller; pos is made
 * by grpo_seqbatch_positions (Hugging Face's cumsum(mask) - 1, 0 on padding); logp[b,t] is
 * log p(targets[b,t] | ids[b,0..t]) (0 where targets is -1); entropy[b,t] the entropy of that
 * next-token distribution. Owned by the struct; grpo_seqbatch_free releases it.
 */
#ifndef GRPO_SEQBATCH_H
#define GRPO_SEQBATCH_H

#include <stdint.h>

#include "host/model_instance.h"
#include "host/sampler.h"

typedef struct grpo_seqbatch {
    const grpo_ops *ops;
    int32_t B, T;
    size_t cap;                                  /* cells allocated */
    int32_t *ids, *mask, *pos, *targets;         /* (B,T) host */
    float *logp, *entropy, *dlogp, *dentropy;    /* (B,T) host */
    int32_t *d_ids, *d_mask, *d_pos, *d_targets; /* backend copies */
    float *d_logp, *d_entropy, *d_dlogp, *d_dentropy;
    float aux_weight; /* d loss / d aux_loss() for backward (MoE); 0 = none (grpo_batch) */
    int32_t kept;          /* 1: the next forward takes the activations the rollout of these
                              rows kept (grpo_batch.kept; the model's keep_block) */
    int32_t shared_prefix; /* columns that consecutive rows may share (a prompt and its
                              completions): forward passes it to the model's set_shared_prefix
                              (grpo/model.h, 1.6), which computes equal prefixes once; 0 = none */
    /* The rollout rows in the batch (made by grpo_seqbatch_from_rollout or _pack_rollout): row k's
     * completion token j is predicted at cell row_col[k] + j of the (B,T) arrays, j < row_len[k] */
    int32_t rows;
    size_t rows_cap;
    int32_t *row_col, *row_len; /* (rows) */
} grpo_seqbatch;

/* Sets the shape to (B,T), growing the buffers if needed; the host arrays are cleared:
 * ids 0, mask 0, targets -1, dlogp 0, dentropy 0; shared_prefix 0. */
int grpo_seqbatch_reset(grpo_seqbatch *s, const grpo_ops *ops, int32_t B, int32_t T,
                        grpo_error *err);
void grpo_seqbatch_free(grpo_seqbatch *s);

/* Packed rows sharing a prompt (ABI 1.8, grpo/ops_list.h attention_forward): a segment id >=
 * 1 << GRPO_SEG_CHILD_SHIFT is a child of the parent segment id >> GRPO_SEG_CHILD_SHIFT; parent
 * and plain ids and child indices are below GRPO_SEG_MAX, so a pack holds fewer rows. */
#define GRPO_SEG_CHILD_SHIFT GRPO_ATTN_CHILD_SHIFT /* grpo/ops.h */
#define GRPO_SEG_MAX (1 << 15)

/* pos from mask: the running count of real tokens minus 1, 0 on padding; the count starts over
 * where a segment id (a mask value > 0) differs from the last one of the row (packed rows), at
 * 0, or for a child segment one past its parent's last position (the parent's last cell before
 * it in the row). */
void grpo_seqbatch_positions(grpo_seqbatch *s);

/* The rows [r0, r0+rows) of a rollout as a training batch of width L = P + T: each row is its
 * prompt (prompt/pmask (B,P), left-padded; row i belongs to prompt i / G) followed by its first
 * T completion tokens (pad_id, mask 0 past its length); targets put completion token j at column
 * P-1+j (the position that predicts it), -1 elsewhere. Resets s to (rows, L) with
 * shared_prefix = P (the rows of one prompt share it; the caller may set 0); row_len[k] = T. */
int grpo_seqbatch_from_rollout(grpo_seqbatch *s, const grpo_ops *ops, const int32_t *prompt,
                               const int32_t *pmask, int32_t P, int32_t G, const grpo_rollout *r,
                               int32_t r0, int32_t rows, int32_t T, int32_t pad_id,
                               grpo_error *err);

/* Packed training: the tokens of rollout row i without padding, its prompt's real tokens (pmask
 * != 0) and its r->len[i] completion tokens. */
int32_t grpo_seqbatch_row_tokens(const int32_t *pmask, int32_t P, int32_t G,
                                 const grpo_rollout *r, int32_t i);

/* How many of the rows [r0, r0+rows) fit one pack of at most K tokens (as _pack_rollout with
 * share lays them out), taken in order: at least 1 (a row longer than K alone; the trainer
 * refuses such a K at start), fewer than GRPO_SEG_MAX. */
int32_t grpo_seqbatch_pack_fit(const int32_t *pmask, int32_t P, int32_t G, const grpo_rollout *r,
                               int32_t r0, int32_t rows, int64_t K, int share);

/* The rows [r0, r0+rows) packed back to back into one row (1, n), no padding, shared_prefix 0,
 * row_len[k] = r->len[r0 + k], targets as grpo_seqbatch_from_rollout's (completion token j at
 * the cell before it), positions by grpo_seqbatch_positions.
 * share = 0: row k is segment k + 1 (mask value, since ABI 1.7 the attention's segment id),
 * [its prompt's real tokens | its completion], n the sum of their grpo_seqbatch_row_tokens.
 * share = 1 (train.shared_prefix): the consecutive rows of one prompt in the pack share it: the
 * prompt's real tokens but the last appear once, as parent segment p (1, 2, ... per prompt in the
 * pack), and each of its rows k is the child segment p << GRPO_SEG_CHILD_SHIFT | (k + 1),
 * [the prompt's last token | its completion], its positions continuing the parent's; its
 * queries see the parent's keys, so each log-prob is the padded shared-prefix layout's. A prompt
 * of one token is not shared (its rows are plain segments p). rows < GRPO_SEG_MAX. */
int grpo_seqbatch_pack_rollout(grpo_seqbatch *s, const grpo_ops *ops, const int32_t *prompt,
                               const int32_t *pmask, int32_t P, int32_t G, const grpo_rollout *r,
                               int32_t r0, int32_t rows, int share, grpo_error *err);

/* The completion cells of a (B,T) array of the batch (e.g. s->logp) into out (rows, T): row k's
 * first row_len[k] values, 0 after them. */
void grpo_seqbatch_completion(const grpo_seqbatch *s, const float *src, int32_t T, float *out);

/* The inverse: (rows, T) per-token values src (e.g. d loss / d logp) into the completion cells of
 * dst, a (B,T) array of the batch (e.g. s->dlogp); the other cells are left as they are. */
void grpo_seqbatch_scatter(const grpo_seqbatch *s, const float *src, int32_t T, float *dst);

/* Uploads, runs m's forward (reserving its activations; with s->shared_prefix), downloads logp
 * (and entropy when want_entropy). scale multiplies the logits (1 / sampling temperature). */
int grpo_seqbatch_forward(grpo_seqbatch *s, grpo_model *m, int want_entropy, float scale,
                          grpo_error *err);
/* A MoE policy's router auxiliary loss after a forward of s on m: it enters the training loss as
 * coef * aux_loss() with this micro-batch's share 1/shares, so backward gets aux_weight =
 * coef / shares (grpo_batch.aux_weight). Sets s->aux_weight, stores aux_loss() in *aux and
 * returns 1; returns 0 (nothing set) when m has no auxiliary loss. */
int grpo_seqbatch_aux_loss(grpo_seqbatch *s, const grpo_model *m, double coef, int shares,
                           double *aux);
/* Uploads s->dlogp and runs m's backward (gradients accumulate) after a forward of s on m.
 * with_entropy: the loss also depends on the entropy (the entropy bonus): s->dentropy is
 * uploaded too and m's backward_entropy runs, after a forward of s on m with want_entropy. */
int grpo_seqbatch_backward(grpo_seqbatch *s, grpo_model *m, int with_entropy, float scale,
                           grpo_error *err);

#endif
