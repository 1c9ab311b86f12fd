/*
 * lm_attn.h — the pre-norm self-attention block shared by the decoder packs (compiled into each
 * pack that uses it; not part of the SDK):
 *   h = x + o_proj(attn(rope(qnorm?(q_proj(ln1(x)))), rope(knorm?(k_proj(ln1(x)))), v_proj(ln1(x))))
 * as in Hugging Face's Llama/Qwen2/Qwen3 decoder layers, through the op table only.
 *
 * Dimension letters: B rows, T time, N = B*T tokens, C hidden, NH query heads, NKV key/value
 * heads, HD head dim, Q = NH*HD, KV = NKV*HD, R decode rows, S cache slots.
 */
#ifndef LM_ATTN_H
#define LM_ATTN_H

#include "grpo/model.h" /* GRPO_PARAM_INIT_* */
#include "grpo/ops.h"
#include "lm_linear.h"
#include "lm_prefix.h"

typedef struct lm_attn_config {
    int32_t C, NH, NKV, HD;
    float eps, rope_theta;
    int32_t qk_norm;  /* per-head RMSNorm of q and k before RoPE (Qwen3) */
    int32_t qkv_bias; /* q/k/v projections have a bias (parameter table only: the block */
    int32_t o_bias;   /* o_proj has a bias             applies a bias that is not NULL) */
    const lm_linear *lin; /* the instance's linear layers (lm_decoder.lin: weight dtype, LoRA
                             adapters), set by lm_decoder_init; projections use lm_linear_* */
} lm_attn_config;

/* Parameter slots of the block, in table order; a missing tensor (no bias, no q/k norm) is NULL. */
enum { AP_LN1, AP_WQ, AP_BQ, AP_WK, AP_BK, AP_WV, AP_BV, AP_QNORM, AP_KNORM, AP_WO, AP_BO,
       AP_COUNT };

/* Hugging Face name of slot s under model.layers.{l} ("self_attn.q_proj.weight", ...). */
extern const char *const lm_attn_param_names[AP_COUNT];
/* Their init hints (grpo/model.h): norms ONES, o_proj RESIDUAL, the rest NORMAL. */
extern const uint32_t lm_attn_param_inits[AP_COUNT];
/* Shape of slot s (ndim 1 or 2), or 0 when the block has no such tensor (a bias without
 * qkv_bias / o_bias, a q/k norm without qk_norm):
 *   ln1 (C), q_proj (Q,C), k_proj v_proj (KV,C), their biases (Q) (KV), q_norm k_norm (HD),
 *   o_proj (C,Q), its bias (C). */
int32_t lm_attn_param_shape(const lm_attn_config *c, int32_t s, int64_t shape[2]);

/* Which of a layer's activation tensors a layout places (lm_attn_acts_carve, and
 * lm_arch.layer_layout of lm_decoder.h): the kept ones, which a training pass holds for every
 * layer until backward; the redone ones, which backward recomputes from the kept ones by the op
 * that made them (the same inputs, so the same bits) and which all the layers of a training
 * pass share; or both (one set, for every layer of a forward-only or a recomputing pass). */
enum { LM_ACTS_KEPT = 1, LM_ACTS_REDONE = 2, LM_ACTS_ALL = 3 };

/* Activations of one layer's block; with qk_norm off, qraw/kraw alias q/k (RoPE in place).
 * Redone: ln1 (from x and ln1_rstd); the others are kept (att too: attention again would cost
 * more time than its memory is worth). */
typedef struct lm_attn_acts {
    float *x;        /* (N,C) block input (the residual stream) */
    float *ln1;      /* (N,C) (redone) */
    float *ln1_rstd; /* (N) */
    float *qraw;     /* (N,Q) q_proj output (qk_norm only, else == q) */
    float *q_rstd;   /* (N*NH) (qk_norm only) */
    float *kraw;     /* (N,KV) (qk_norm only, else == k) */
    float *k_rstd;   /* (N*NKV) (qk_norm only) */
    float *q;        /* (N,Q) after norm and RoPE */
    float *k;        /* (N,KV) after norm and RoPE */
    float *v;        /* (N,KV) */
    float *att;      /* (N,Q) attention output before o_proj */
    float *att_lse;  /* (B,NH,T) */
    float *h;        /* (N,C) x + attention */
} lm_attn_acts;

/* One kept tensor of a layer struct, token-major: where its pointer lies in the struct and its
 * floats per token (rollout keep, lm_decoder.h). */
typedef struct lm_kept {
    size_t off;
    uint64_t width;
} lm_kept;

/* The attention block's kept tensors that a training forward takes from the rollout's
 * prefill/decode (x, ln1_rstd, q, k, v, with qk_norm qraw q_rstd kraw k_rstd, h) into out (at
 * most 10); returns their count. att and att_lse are not among them: lm_attn_core_forward
 * computes them again from q, k, v. */
int32_t lm_attn_kept(const lm_attn_config *c, lm_kept *out);
/* The attention itself over rows (q, k, v -> att, att_lse; lm_attn_forward's middle step). */
void lm_attn_core_forward(const grpo_ops *o, const lm_attn_config *c, const lm_attn_acts *a,
                          const lm_rows *rows);

/* Gradient work buffers of the backward pass (written, never accumulated across calls);
 * dqraw/dkraw alias dq/dk when qk_norm is off. */
typedef struct lm_attn_grads {
    float *dln, *dtmp;    /* (N,C) */
    float *datt, *dq;     /* (N,Q) */
    float *dk, *dv;       /* (N,KV) */
    float *dqraw, *dkraw; /* (N,Q), (N,KV) */
} lm_attn_grads;

/* Floats of the forward activations of one layer (lm_attn_acts) for N tokens, of the tensors
 * of parts (LM_ACTS_*). */
uint64_t lm_attn_acts_floats(const lm_attn_config *c, uint64_t N, int32_t parts);
/* Points the tensors of parts in a at block (which holds lm_attn_acts_floats floats, 64-byte
 * aligned), leaving the others as they are; returns the end. */
float *lm_attn_acts_carve(lm_attn_acts *a, float *block, const lm_attn_config *c, uint64_t N,
                          int32_t parts);
/* The same for the gradient buffers. */
uint64_t lm_attn_grads_floats(const lm_attn_config *c, uint64_t N);
float *lm_attn_grads_carve(lm_attn_grads *g, float *block, const lm_attn_config *c, uint64_t N);

/* a->x (N,C) -> a->h (N,C) over the tokens of rows (plain or with shared prefixes, lm_prefix.h;
 * att_lse then holds the prefixes' (BP,NH,P) then the rows' (B,NH,T)). p: AP_COUNT parameter
 * pointers; tmp (N,C) scratch. */
void lm_attn_forward(const grpo_ops *o, const lm_attn_config *c, lm_attn_acts *a, float *tmp,
                     float *const *p, const lm_rows *rows);
/* The redone tensor of a (ln1) again from its kept ones, by the op of lm_attn_forward (the
 * same bits; ln1_rstd is written again with the bits it holds). */
void lm_attn_redo(const grpo_ops *o, const lm_attn_config *c, const lm_attn_acts *a,
                  float *const *p, const lm_rows *rows);
/* dh (N,C) = d loss/d h -> dx (N,C) = d loss/d x (written, residual included); parameter grads
 * g (AP_COUNT pointers, NULL entries skipped) accumulated. */
void lm_attn_backward(const grpo_ops *o, const lm_attn_config *c, float *dx, const float *dh,
                      const lm_attn_grads *gb, const lm_attn_acts *a, float *const *p,
                      float *const *g, const lm_rows *rows);
/* Where one layer's keys and values lie in a KV cache (lm_infer.h makes it): unpaged (table
 * NULL: k/v the layer's (R',S,NKV,HD) planes) or paged (ABI 1.9: slot s of row r at position
 * s % page of page table[r * nblk + s / page]; k/v the layer's keys and values in page 0, pages
 * pstride floats apart; table in backend memory for the op, table_host for the writes). */
typedef struct lm_kv_layer {
    float *k, *v;
    int32_t S;
    const int32_t *table, *table_host;
    int32_t nblk, page;
    int64_t pstride;
} lm_kv_layer;
/* One decode step for R rows: a->x (R,C) -> a->h (R,C). This step's k/v are written to cache
 * slot hlen[r]-1 (hlen: host copy of len) of rows 0..R-1 of kl; len/cache_mask as in
 * attention_decode (attention_decode_paged on a paged cache). */
void lm_attn_decode(const grpo_ops *o, const lm_attn_config *c, lm_attn_acts *a, float *tmp,
                    float *const *p, const lm_kv_layer *kl, const int32_t *pos,
                    const int32_t *cache_mask, const int32_t *len, const int32_t *hlen,
                    int32_t R);

#endif
