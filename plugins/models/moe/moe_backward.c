/*
 * moe_backward.c — d loss/d logp (B,T), plus aux_weight * d aux, back to every parameter
 * gradient, using the activations and router state of the preceding forward() of the same batch.
 * Accumulation rule of grpo/ops.h: parameter grads +=, activation grads =; a->dx carries
 * d loss/d x of the residual stream from layer l+1 down to layer l.
 */
#include <stddef.h>

#include "moe.h"

int32_t moe_backward(void *model, const grpo_batch *batch, float *acts, const float *dlogp,
                     float scale, grpo_error *err) {
    moe_model *m = model;
    const moe_config *c = &m->cfg;
    if (!m->bound || !m->dwte)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "moe: backward needs bound gradients (this instance is frozen)");
    int32_t B = batch->B, T = batch->T, N = B * T, C = c->attn.C;
    if (B != m->B || T != m->T)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "moe: backward of a (%d,%d) batch after a forward of (%d,%d): "
                              "backward must follow the forward of the same batch", B, T, m->B,
                              m->T);
    float aux_weight = batch->struct_size >= offsetof(grpo_batch, aux_weight) + sizeof(float)
                           ? batch->aux_weight
                           : 0.0f;
    const grpo_ops *o = m->ops;
    moe_acts a;
    moe_acts_carve(&a, m->la, acts, c, B, T, 1);
    o->head_backward(o->ctx, a.ag.dln, m->dwhead, dlogp, a.lnf, m->whead, batch->targets,
                     a.head_lse, N, C, c->V, scale);
    o->rmsnorm_backward(o->ctx, a.dx, m->dwnorm, a.ag.dln, a.xL, m->wnorm, a.lnf_rstd, N, C);
    for (int32_t l = c->L - 1; l >= 0; l--) {
        int32_t st = moe_block_backward(m, &a, &a.l[l], l, N, aux_weight, err);
        if (st != GRPO_OK) return st;
        lm_attn_backward(o, &c->attn, a.dx, a.dh, &a.ag, &a.l[l].at, m->lp[l].p, m->lp[l].g,
                         batch->mask, batch->pos, B, T);
    }
    o->embedding_backward(o->ctx, m->dwte, a.dx, batch->ids, N, C);
    return GRPO_OK;
}
