/*
 * lm_infer.h — the inference plumbing shared by the decoder packs (compiled into each pack that
 * uses it; not part of the SDK): the KV cache layout, the checks of prefill()/decode()
 * arguments, and the last-position logits.
 *
 * KV cache layout (kv->R rows, kv->S slots): (L, 2, R, S, KV) — for layer l, keys then values,
 * each (R,S,NKV,HD), the layout attention_decode reads; keys after q/k norm and RoPE. Slot s of
 * row r holds the token at column s of the row's left-padded sequence. KV = NKV*HD.
 * Paged (ABI 1.9, kv->page > 0): a pool of pages, page p at data + p * L*2*page*KV, each
 * (L, 2, page, KV): for layer l, keys then values of its page positions; slot s of row r is
 * position s % page of page table_host[r * ceil(S/page) + s / page].
 */
#ifndef LM_INFER_H
#define LM_INFER_H

#include "grpo/model.h"
#include "grpo/ops.h"
#include "lm_attn.h"
#include "lm_linear.h"

/* Whether kv is paged (a 1.9 cache with page > 0). */
int lm_kv_paged(const grpo_kv_cache *kv);
/* Keys (kind 0) or values (kind 1) of layer l (of L), row r, slot s: (KV) floats. Paged: the
 * slot's block must have a page. */
float *lm_kv_at(const grpo_kv_cache *kv, uint64_t KV, int32_t L, int32_t l, int32_t kind,
                int32_t r, int32_t s);
/* Where layer l's keys and values lie, for lm_attn_decode. */
lm_kv_layer lm_kv_layer_of(const grpo_kv_cache *kv, uint64_t KV, int32_t L, int32_t l);
/* The kv_floats() slot: L*2*R*S*KV. */
uint64_t lm_kv_floats(int32_t L, uint64_t KV, int32_t R, int32_t S);
/* The kv_page_floats() slot (1.9): L*2*page*KV. */
uint64_t lm_kv_page_floats(int32_t L, uint64_t KV, int32_t page);
/* The kv_copy_row() slot: slots 0..n-1 of row src to row dst, every layer, keys and values. */
void lm_kv_copy_row(const grpo_ops *o, const grpo_kv_cache *kv, uint64_t KV, int32_t L,
                    int32_t dst, int32_t src, int32_t n);
/* Prefill: keys and values (B*T, KV) of layer l into cache rows 0..B-1, slots 0..T-1. */
void lm_kv_store(const grpo_ops *o, const grpo_kv_cache *kv, uint64_t KV, int32_t L, int32_t l,
                 const float *k, const float *v, int32_t B, int32_t T);

/* prefill(): a (B,T) prompt batch must fit the cache (0 < B <= rows, 0 < T <= slots). who names
 * the pack in the error ("dense"). */
int32_t lm_prefill_check(const char *who, const grpo_kv_cache *kv, int32_t B, int32_t T,
                         grpo_error *err);
/* prefill(): every row of the host mask (B,T) must end in a real token (left padding). */
int32_t lm_prefill_left_padded(const char *who, const int32_t *hmask, int32_t B, int32_t T,
                               grpo_error *err);
/* decode(): checks 0 < R <= kv->R, downloads len (R) into *hlen (host->alloc'd; the caller frees
 * it with host->free on GRPO_OK, NULL otherwise) and checks 1 <= len[r] <= kv->S. */
int32_t lm_decode_lengths(const char *who, const grpo_host *host, const grpo_kv_cache *kv,
                          const int32_t *len, int32_t R, int32_t **hlen, grpo_error *err);

/* out (B,C) = x (B,T,C) at column T-1 of each row (the last prompt token). */
void lm_last_columns(const grpo_ops *o, float *out, const float *x, int32_t B, int32_t T,
                     int32_t C);
/* logits (R,V) = head(rmsnorm(x (R,C))); lnf (R,C), lnf_rstd (R) scratch; whead (V,C). */
void lm_logits_forward(const grpo_ops *o, int32_t wtype, float *logits, float *lnf,
                       float *lnf_rstd, const float *x, const float *wnorm, const float *whead,
                       int32_t R, int32_t C, int32_t V, float eps);

#endif
