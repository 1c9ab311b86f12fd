/* lm_linear.c — the packs' linear layers by weight dtype, with LoRA (see lm_linear.h). */
#include "lm_linear.h"

int32_t lm_linear_supports(const grpo_ops *o, int32_t wtype) {
    if (wtype == GRPO_DTYPE_F32) return 1;
    return wtype == GRPO_DTYPE_BF16 && grpo_ops_supports(o, convert) &&
           grpo_ops_supports(o, matmul_forward_w) && grpo_ops_supports(o, matmul_backward_w) &&
           grpo_ops_supports(o, embedding_forward_w) && grpo_ops_supports(o, head_forward_w) &&
           grpo_ops_supports(o, head_backward_w);
}

void lm_weight_matmul(const grpo_ops *o, int32_t wtype, float *out, const float *inp,
                      const float *w, const float *bias, int32_t N, int32_t IC, int32_t OC) {
    if (wtype == GRPO_DTYPE_F32)
        o->matmul_forward(o->ctx, out, inp, w, bias, N, IC, OC);
    else
        o->matmul_forward_w(o->ctx, out, inp, w, wtype, bias, N, IC, OC);
}

void lm_linear_forward(const grpo_ops *o, const lm_linear *l, float *out, const float *inp,
                       const float *w, const float *bias, int32_t N, int32_t IC, int32_t OC) {
    lm_weight_matmul(o, l ? l->wtype : GRPO_DTYPE_F32, out, inp, w, bias, N, IC, OC);
    if (l) lm_lora_forward_add(o, &l->lora, out, inp, w, N, IC, OC);
}

void lm_linear_backward(const grpo_ops *o, const lm_linear *l, float *dinp, float *dw,
                        float *dbias, const float *dout, const float *inp, const float *w,
                        int32_t N, int32_t IC, int32_t OC) {
    if (!l || l->wtype == GRPO_DTYPE_F32)
        o->matmul_backward(o->ctx, dinp, dw, dbias, dout, inp, w, N, IC, OC);
    else if (dinp) /* a frozen weight: no dw, dbias */
        o->matmul_backward_w(o->ctx, dinp, dout, w, l->wtype, N, IC, OC);
    if (l) lm_lora_backward_add(o, &l->lora, dinp, dout, inp, w, N, IC, OC);
}
