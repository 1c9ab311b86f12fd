/*
 * dense_backward.c — d loss/d logp (B,T) back to every parameter gradient, using the
 * activations of the preceding forward(). Parameter gradients are accumulated (+=) into the
 * bound grads; activation gradients are written (=) into the gradient buffers of the block.
 * a->dx carries d loss/d x (the residual stream) from layer l+1 down to layer l; the attention
 * half of each layer is the shared block's backward (common/lm_attn.c).
 */
#include "dense.h"

/* MLP block backward: dx = d/dout (N,C) -> dh (N,C) = d loss/d h, including the residual. */
static void mlp_backward(dense_model *m, dense_acts *a, dense_layer_acts *la,
                         const dense_layer_params *lp, int32_t N) {
    const grpo_ops *o = m->ops;
    const dense_config *c = &m->cfg;
    int32_t C = c->attn.C;
    float *dln = a->ag.dln, *dtmp = a->ag.dtmp; /* (N,C) work buffers shared with attention */
    o->matmul_backward(o->ctx, a->dswi, lp->g[LP_WDOWN], NULL, a->dx, la->swi, lp->p[LP_WDOWN],
                       N, c->I, C);
    o->swiglu_backward(o->ctx, a->dgate, a->dup, a->dswi, la->gate, la->up, N, c->I);
    o->matmul_backward(o->ctx, dln, lp->g[LP_WGATE], NULL, a->dgate, la->ln2, lp->p[LP_WGATE], N,
                       C, c->I);
    o->matmul_backward(o->ctx, dtmp, lp->g[LP_WUP], NULL, a->dup, la->ln2, lp->p[LP_WUP], N, C,
                       c->I);
    o->accumulate(o->ctx, dln, dtmp, (uint64_t)N * C);
    o->rmsnorm_backward(o->ctx, a->dh, lp->g[LP_LN2], dln, la->at.h, lp->p[LP_LN2], la->ln2_rstd,
                        N, C);
    o->accumulate(o->ctx, a->dh, a->dx, (uint64_t)N * C); /* residual path */
}

int32_t dense_backward(void *model, const grpo_batch *batch, float *acts, const float *dlogp,
                       float scale, grpo_error *err) {
    dense_model *m = model;
    const dense_config *c = &m->cfg;
    int32_t C = c->attn.C;
    if (!m->bound || !m->dwte)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "dense: backward needs bound gradients (this instance is frozen)");
    int32_t B = batch->B, T = batch->T, N = B * T;
    const grpo_ops *o = m->ops;
    dense_acts a;
    dense_acts_carve(&a, m->la, acts, c, B, T, 1);
    o->head_backward(o->ctx, a.ag.dln, m->dhead_grad, dlogp, a.lnf, m->whead, batch->targets,
                     a.head_lse, N, C, c->V, scale);
    o->rmsnorm_backward(o->ctx, a.dx, m->dwnorm, a.ag.dln, a.xL, m->wnorm, a.lnf_rstd, N, C);
    for (int32_t l = c->L - 1; l >= 0; l--) {
        mlp_backward(m, &a, &a.l[l], &m->lp[l], N);
        lm_attn_backward(o, &m->cfg.attn, a.dx, a.dh, &a.ag, &a.l[l].at, m->lp[l].p, m->lp[l].g,
                         batch->mask, batch->pos, B, T);
    }
    o->embedding_backward(o->ctx, m->dwte, a.dx, batch->ids, N, C);
    return GRPO_OK;
}
