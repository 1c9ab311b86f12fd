/*
 * lm_lora.h — LoRA adapters on the decoder packs' linear layers (grpo/model.h set_lora, ABI 1.4;
 * compiled into each pack, not part of the SDK). Every linear layer of a pack goes through
 * lm_linear_forward / lm_linear_backward (lm_linear.h), which run the base matmul and, when the
 * weight has an adapter and adapters are enabled, PEFT's LoRA term (the *_add functions here):
 *
 *   y  = x W^T + bias + s (x A^T) B^T              x (N,IC), W (OC,IC), A (r,IC), B (OC,r)
 *   backward, with h = s x A^T (N,r) recomputed:
 *     dB += dy^T h          dh = s dy B             dA += dh^T x        dx += dh A
 *
 * Adapters are found by the weight's pointer (the call sites pass W), so a pack needs no other
 * change. Scratch (h, dh (N,r) and t (N, max(IC,OC))) is backend memory grown by lm_lora_reserve
 * at the top of every pass, where N is known.
 */
#ifndef LM_LORA_H
#define LM_LORA_H

#include "grpo/model.h"
#include "grpo/ops.h"
#include "grpo/plugin.h"

typedef struct lm_lora {
    const grpo_ops *o;
    grpo_lora_adapter *a; /* [n] copies of the host's descriptors */
    const float **w;      /* [n] the weight each adapter adds to */
    uint32_t n;
    int32_t enabled;
    float *buf;           /* scratch, cap floats */
    uint64_t cap;
    int64_t width;        /* max over adapters of 2 r + max(IC, OC): floats per row */
    int32_t limited, rows; /* set_lora_rows (1.11): limited = 1: prefill/decode rows >= rows
                            * run the base; 0 (after create and set_lora): every row adapted */
    int64_t on;           /* tokens of the current pass that take the adapters, its first ones;
                           * -1: all (lm_lora_reserve resets it, lm_lora_pass_rows sets it) */
} lm_lora;

/* Sets the adapters (see set_lora): each adapter's param must be a 2-D (OC,IC) tensor; params[i]
 * is the bound pointer and descs[i] the descriptor of parameter i (of n_params). who names the
 * pack. */
int32_t lm_lora_set(lm_lora *l, const grpo_ops *o, const grpo_lora_adapter *adapters, uint32_t n,
                    int32_t enabled, float *const *params, const grpo_param_desc *descs,
                    uint32_t n_params, const char *who, grpo_error *err);
/* Scratch for passes of up to N rows (no-op without active adapters). */
int32_t lm_lora_reserve(lm_lora *l, int64_t N, const char *who, grpo_error *err);
/* A prefill or decode pass of B rows of T tokens (after lm_lora_reserve): under set_lora_rows,
 * only the tokens of its first rows take the adapters. */
void lm_lora_pass_rows(lm_lora *l, int32_t B, int32_t T);
/* The rows of a B-row prefill/decode pass that take the adapters (B without set_lora_rows). */
int32_t lm_lora_adapted_rows(const lm_lora *l, int32_t B);
/* 1 when adapters are set and enabled. */
int32_t lm_lora_active(const lm_lora *l);
/* 1 when some adapter has gradients (a frozen base may then run backward). */
int32_t lm_lora_trains(const lm_lora *l);
/* 1 when adapters are active and some adapter has dropout (its mask is drawn per token). */
int32_t lm_lora_drops(const lm_lora *l);
void lm_lora_free(lm_lora *l);

/* out (N,OC) += w's adapter term s (inp A^T) B^T (nothing without one, or adapters off; under
 * lm_lora_pass_rows, on the pass's first tokens only). */
void lm_lora_forward_add(const grpo_ops *o, const lm_lora *l, float *out, const float *inp,
                         const float *w, int32_t N, int32_t IC, int32_t OC);
/* The adapter's backward: dA, dB accumulated, its share added to dinp (when not NULL). */
void lm_lora_backward_add(const grpo_ops *o, const lm_lora *l, float *dinp, const float *dout,
                          const float *inp, const float *w, int32_t N, int32_t IC, int32_t OC);

#endif
