/*
 * dense_forward.c — the training forward pass: embedding, L pre-norm layers, final norm and the
 * fused head (log-probs of the targets; the (N,V) logits are never stored). Every activation
 * the backward pass needs is kept in the host's block (dense_acts.c). The attention half of a
 * layer is the shared block (common/lm_attn.c); the MLP half is here.
 */
#include "dense.h"

void dense_mlp_forward(dense_model *m, float *out, dense_layer_acts *la, float *tmp,
                       const dense_layer_params *lp, int32_t N) {
    const grpo_ops *o = m->ops;
    const dense_config *c = &m->cfg;
    int32_t C = c->attn.C;
    o->rmsnorm_forward(o->ctx, la->ln2, la->ln2_rstd, la->at.h, lp->p[LP_LN2], N, C, c->attn.eps);
    o->matmul_forward(o->ctx, la->gate, la->ln2, lp->p[LP_WGATE], NULL, N, C, c->I);
    o->matmul_forward(o->ctx, la->up, la->ln2, lp->p[LP_WUP], NULL, N, C, c->I);
    o->swiglu_forward(o->ctx, la->swi, la->gate, la->up, N, c->I);
    o->matmul_forward(o->ctx, tmp, la->swi, lp->p[LP_WDOWN], NULL, N, c->I, C);
    o->residual_forward(o->ctx, out, la->at.h, tmp, (uint64_t)N * C);
}

void dense_body_forward(dense_model *m, dense_acts *a, const int32_t *ids, const int32_t *mask,
                        const int32_t *pos, int32_t B, int32_t T, const grpo_kv_cache *kv) {
    const grpo_ops *o = m->ops;
    const dense_config *c = &m->cfg;
    int32_t C = c->attn.C;
    int32_t N = B * T;
    o->embedding_forward(o->ctx, a->l[0].at.x, ids, m->wte, N, C);
    for (int32_t l = 0; l < c->L; l++) {
        dense_layer_acts *la = &a->l[l];
        float *out = l + 1 < c->L ? a->l[l + 1].at.x : a->xL;
        lm_attn_forward(o, &m->cfg.attn, &la->at, a->tmp, m->lp[l].p, mask, pos, B, T);
        if (kv) dense_kv_store(m, kv, l, la->at.k, la->at.v, B, T);
        dense_mlp_forward(m, out, la, a->tmp, &m->lp[l], N);
    }
}

int32_t dense_forward(void *model, const grpo_batch *batch, float *acts, float *logp,
                      float *entropy, float scale, grpo_error *err) {
    dense_model *m = model;
    const dense_config *c = &m->cfg;
    int32_t C = c->attn.C;
    if (!m->bound)
        return grpo_error_set(err, GRPO_ERR_INVALID, "dense: forward before bind");
    int32_t st = dense_need_lm_head(m, "forward (log-probs)", err);
    if (st != GRPO_OK) return st;
    int32_t B = batch->B, T = batch->T, N = B * T;
    if (B <= 0 || T <= 0)
        return grpo_error_set(err, GRPO_ERR_INVALID, "dense: forward: empty batch (%d,%d)", B, T);
    dense_acts a;
    dense_acts_carve(&a, m->la, acts, c, B, T, 1);
    dense_body_forward(m, &a, batch->ids, batch->mask, batch->pos, B, T, NULL);
    const grpo_ops *o = m->ops;
    o->rmsnorm_forward(o->ctx, a.lnf, a.lnf_rstd, a.xL, m->wnorm, N, C, c->attn.eps);
    o->head_forward(o->ctx, logp, a.head_lse, entropy, a.lnf, m->whead, batch->targets, N, C,
                    c->V, scale);
    return GRPO_OK;
}
