/*
 * dense_backward.c — d loss/d logp (B,T) back to every parameter gradient, using the
 * activations of the preceding forward(). Parameter gradients are accumulated (+=) into the
 * bound grads; activation gradients are written (=) into the gradient buffers of the block.
 * a->dx carries d loss/d x (the residual stream) from layer l+1 down to layer l.
 */
#include "dense.h"

/* MLP block backward: dx = d/dout (N,C) -> dh (N,C) = d loss/d h, including the residual. */
static void mlp_backward(dense_model *m, dense_acts *a, dense_layer_acts *la,
                         const dense_layer_params *lp, int32_t N) {
    const grpo_ops *o = m->ops;
    const dense_config *c = &m->cfg;
    o->matmul_backward(o->ctx, a->dswi, lp->g[LP_WDOWN], NULL, a->dx, la->swi, lp->p[LP_WDOWN],
                       N, c->I, c->C);
    o->swiglu_backward(o->ctx, a->dgate, a->dup, a->dswi, la->gate, la->up, N, c->I);
    o->matmul_backward(o->ctx, a->dln, lp->g[LP_WGATE], NULL, a->dgate, la->ln2,
                       lp->p[LP_WGATE], N, c->C, c->I);
    o->matmul_backward(o->ctx, a->dtmp, lp->g[LP_WUP], NULL, a->dup, la->ln2, lp->p[LP_WUP], N,
                       c->C, c->I);
    o->accumulate(o->ctx, a->dln, a->dtmp, (uint64_t)N * c->C);
    o->rmsnorm_backward(o->ctx, a->dh, lp->g[LP_LN2], a->dln, la->h, lp->p[LP_LN2], la->ln2_rstd,
                        N, c->C);
    o->accumulate(o->ctx, a->dh, a->dx, (uint64_t)N * c->C); /* residual path */
}

/* Attention block backward: dh (N,C) -> dx (N,C) = d loss/d x, including the residual. */
static void attention_backward(dense_model *m, dense_acts *a, dense_layer_acts *la,
                               const dense_layer_params *lp, const int32_t *mask,
                               const int32_t *pos, int32_t B, int32_t T) {
    const grpo_ops *o = m->ops;
    const dense_config *c = &m->cfg;
    int32_t N = B * T, Q = c->NH * c->HD, KV = c->NKV * c->HD;
    o->matmul_backward(o->ctx, a->datt, lp->g[LP_WO], lp->g[LP_BO], a->dh, la->att,
                       lp->p[LP_WO], N, Q, c->C);
    o->attention_backward(o->ctx, a->dq, a->dk, a->dv, a->datt, la->att, la->att_lse, la->q,
                          la->k, la->v, mask, B, T, c->NH, c->NKV, c->HD);
    o->rope_backward(o->ctx, a->dq, a->dq, pos, N, c->NH, c->HD, c->rope_theta);
    o->rope_backward(o->ctx, a->dk, a->dk, pos, N, c->NKV, c->HD, c->rope_theta);
    if (c->qk_norm) {
        o->rmsnorm_backward(o->ctx, a->dqraw, lp->g[LP_QNORM], a->dq, la->qraw, lp->p[LP_QNORM],
                            la->q_rstd, N * c->NH, c->HD);
        o->rmsnorm_backward(o->ctx, a->dkraw, lp->g[LP_KNORM], a->dk, la->kraw, lp->p[LP_KNORM],
                            la->k_rstd, N * c->NKV, c->HD);
    }
    o->matmul_backward(o->ctx, a->dln, lp->g[LP_WQ], lp->g[LP_BQ], a->dqraw, la->ln1,
                       lp->p[LP_WQ], N, c->C, Q);
    o->matmul_backward(o->ctx, a->dtmp, lp->g[LP_WK], lp->g[LP_BK], a->dkraw, la->ln1,
                       lp->p[LP_WK], N, c->C, KV);
    o->accumulate(o->ctx, a->dln, a->dtmp, (uint64_t)N * c->C);
    o->matmul_backward(o->ctx, a->dtmp, lp->g[LP_WV], lp->g[LP_BV], a->dv, la->ln1,
                       lp->p[LP_WV], N, c->C, KV);
    o->accumulate(o->ctx, a->dln, a->dtmp, (uint64_t)N * c->C);
    o->rmsnorm_backward(o->ctx, a->dx, lp->g[LP_LN1], a->dln, la->x, lp->p[LP_LN1], la->ln1_rstd,
                        N, c->C);
    o->accumulate(o->ctx, a->dx, a->dh, (uint64_t)N * c->C); /* residual path */
}

int32_t dense_backward(void *model, const grpo_batch *batch, float *acts, const float *dlogp,
                       float scale, grpo_error *err) {
    dense_model *m = model;
    const dense_config *c = &m->cfg;
    if (!m->bound || !m->dwte)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "dense: backward needs bound gradients (this instance is frozen)");
    int32_t B = batch->B, T = batch->T, N = B * T;
    const grpo_ops *o = m->ops;
    dense_acts a;
    dense_acts_carve(&a, m->la, acts, c, B, T, 1);
    o->head_backward(o->ctx, a.dln, m->dhead_grad, dlogp, a.lnf, m->whead, batch->targets,
                     a.head_lse, N, c->C, c->V, scale);
    o->rmsnorm_backward(o->ctx, a.dx, m->dwnorm, a.dln, a.xL, m->wnorm, a.lnf_rstd, N, c->C);
    for (int32_t l = c->L - 1; l >= 0; l--) {
        mlp_backward(m, &a, &a.l[l], &m->lp[l], N);
        attention_backward(m, &a, &a.l[l], &m->lp[l], batch->mask, batch->pos, B, T);
    }
    o->embedding_backward(o->ctx, m->dwte, a.dx, batch->ids, N, c->C);
    return GRPO_OK;
}
