/*
 * dense_forward.c — the training forward pass: embedding, L pre-norm layers, final norm and the
 * fused head (log-probs of the targets; the (N,V) logits are never stored). Every activation
 * the backward pass needs is kept in the host's block (dense_acts.c).
 */
#include "dense.h"

/* ln1 and the q/k/v projections of x (N,C), with q/k norm and RoPE at pos (N):
 * fills ln1, qraw/kraw, q, k (N,Q)/(N,KV) rotated, v. Shared by training and decode. */
void dense_qkv_forward(dense_model *m, dense_layer_acts *la, const dense_layer_params *lp,
                       const int32_t *pos, int32_t N) {
    const grpo_ops *o = m->ops;
    const dense_config *c = &m->cfg;
    int32_t Q = c->NH * c->HD, KV = c->NKV * c->HD;
    o->rmsnorm_forward(o->ctx, la->ln1, la->ln1_rstd, la->x, lp->p[LP_LN1], N, c->C, c->eps);
    o->matmul_forward(o->ctx, la->qraw, la->ln1, lp->p[LP_WQ], lp->p[LP_BQ], N, c->C, Q);
    o->matmul_forward(o->ctx, la->kraw, la->ln1, lp->p[LP_WK], lp->p[LP_BK], N, c->C, KV);
    o->matmul_forward(o->ctx, la->v, la->ln1, lp->p[LP_WV], lp->p[LP_BV], N, c->C, KV);
    if (c->qk_norm) { /* per-head RMSNorm over HD: N*NH rows of HD */
        o->rmsnorm_forward(o->ctx, la->q, la->q_rstd, la->qraw, lp->p[LP_QNORM], N * c->NH,
                           c->HD, c->eps);
        o->rmsnorm_forward(o->ctx, la->k, la->k_rstd, la->kraw, lp->p[LP_KNORM], N * c->NKV,
                           c->HD, c->eps);
    }
    o->rope_forward(o->ctx, la->q, la->q, pos, N, c->NH, c->HD, c->rope_theta);
    o->rope_forward(o->ctx, la->k, la->k, pos, N, c->NKV, c->HD, c->rope_theta);
}

/* After attention: h (N,C) = x + o_proj(att); then the MLP block:
 * out (N,C) = h + down(silu(gate(ln2 h)) * up(ln2 h)). tmp (N,C) is scratch. */
void dense_post_attention_forward(dense_model *m, float *out, dense_layer_acts *la, float *tmp,
                                  const dense_layer_params *lp, int32_t N) {
    const grpo_ops *o = m->ops;
    const dense_config *c = &m->cfg;
    o->matmul_forward(o->ctx, tmp, la->att, lp->p[LP_WO], lp->p[LP_BO], N, c->NH * c->HD, c->C);
    o->residual_forward(o->ctx, la->h, la->x, tmp, (uint64_t)N * c->C);
    o->rmsnorm_forward(o->ctx, la->ln2, la->ln2_rstd, la->h, lp->p[LP_LN2], N, c->C, c->eps);
    o->matmul_forward(o->ctx, la->gate, la->ln2, lp->p[LP_WGATE], NULL, N, c->C, c->I);
    o->matmul_forward(o->ctx, la->up, la->ln2, lp->p[LP_WUP], NULL, N, c->C, c->I);
    o->swiglu_forward(o->ctx, la->swi, la->gate, la->up, N, c->I);
    o->matmul_forward(o->ctx, tmp, la->swi, lp->p[LP_WDOWN], NULL, N, c->I, c->C);
    o->residual_forward(o->ctx, out, la->h, tmp, (uint64_t)N * c->C);
}

void dense_body_forward(dense_model *m, dense_acts *a, const int32_t *ids, const int32_t *mask,
                        const int32_t *pos, int32_t B, int32_t T, const grpo_kv_cache *kv) {
    const grpo_ops *o = m->ops;
    const dense_config *c = &m->cfg;
    int32_t N = B * T;
    o->embedding_forward(o->ctx, a->l[0].x, ids, m->wte, N, c->C);
    for (int32_t l = 0; l < c->L; l++) {
        dense_layer_acts *la = &a->l[l];
        float *out = l + 1 < c->L ? a->l[l + 1].x : a->xL;
        dense_qkv_forward(m, la, &m->lp[l], pos, N);
        if (kv) dense_kv_store(m, kv, l, la->k, la->v, B, T);
        o->attention_forward(o->ctx, la->att, la->att_lse, la->q, la->k, la->v, mask, B, T,
                             c->NH, c->NKV, c->HD);
        dense_post_attention_forward(m, out, la, a->tmp, &m->lp[l], N);
    }
}

int32_t dense_forward(void *model, const grpo_batch *batch, float *acts, float *logp,
                      float *entropy, float scale, grpo_error *err) {
    dense_model *m = model;
    const dense_config *c = &m->cfg;
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
    o->rmsnorm_forward(o->ctx, a.lnf, a.lnf_rstd, a.xL, m->wnorm, N, c->C, c->eps);
    o->head_forward(o->ctx, logp, a.head_lse, entropy, a.lnf, m->whead, batch->targets, N, c->C,
                    c->V, scale);
    return GRPO_OK;
}
