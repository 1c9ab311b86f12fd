/*
 * lm_linear.h — the decoder packs' linear layers (compiled into each pack, not part of the SDK):
 * every projection of a pack goes through lm_linear_forward / lm_linear_backward, the one place
 * that knows how the weights are held and what is added to them:
 *
 *   y = x W^T + bias (+ the LoRA term of W's adapter, lm_lora.h)    x (N,IC), W (OC,IC)
 *
 * W is held as wtype (grpo/ops.h GRPO_DTYPE_*: fp32, or bf16 for a frozen base / rollout copy,
 * bound through bind_typed). An fp32 weight runs the fp32 ops (matmul_forward/_backward); any
 * other dtype runs their 1.5 typed forms, which form no weight gradient (such a weight is
 * frozen). Bound pointers stay `float *` in the packs' slot arrays whatever they hold: only the
 * ops read them.
 */
#ifndef LM_LINEAR_H
#define LM_LINEAR_H

#include "grpo/ops.h"
#include "lm_lora.h"

typedef struct lm_linear {
    int32_t wtype; /* GRPO_DTYPE_* of every weight with 2 or more dimensions (bind_typed) */
    lm_lora lora;  /* adapters on the weights (set_lora) */
} lm_linear;

/* out (N,OC) = inp (N,IC) @ w^T + bias for a weight held as wtype: the base product alone (no
 * adapter), e.g. the logits of a decode step. */
void lm_weight_matmul(const grpo_ops *o, int32_t wtype, float *out, const float *inp,
                      const float *w, const float *bias, int32_t N, int32_t IC, int32_t OC);
/* out (N,OC) = inp (N,IC) @ w^T + bias (+ w's adapter); l may be NULL (fp32, no adapters). */
void lm_linear_forward(const grpo_ops *o, const lm_linear *l, float *out, const float *inp,
                       const float *w, const float *bias, int32_t N, int32_t IC, int32_t OC);
/* matmul_backward (dinp written, dw/dbias accumulated, NULL skipped; dw and dbias must be NULL
 * for a weight that is not fp32) plus the adapter's dA, dB (accumulated) and its share of dinp. */
void lm_linear_backward(const grpo_ops *o, const lm_linear *l, float *dinp, float *dw,
                        float *dbias, const float *dout, const float *inp, const float *w,
                        int32_t N, int32_t IC, int32_t OC);
/* 1 when the backend has the typed ops (1.5) a weight held as wtype needs. */
int32_t lm_linear_supports(const grpo_ops *o, int32_t wtype);

#endif
