/*
 * moe_block.c — the mixture-of-experts MLP block of one layer, forward and backward:
 *   u = ln2(h); router (moe_router.c) groups the M = N*K assignments by expert;
 *   xg = u[tok] (M,C); per expert e, rows [eoff[e], eoff[e+1]): ey = down(silu(gate xg) * up xg);
 *   out = h + sum_s shared_s(u) + scatter_add(ey weighted by w, at tok).
 * Each expert is one matmul per weight over all of its tokens.
 */
#include "moe.h"

/* SwiGLU MLP forward on n rows: x (n,C) -> y (n,C); g/u/s (n,I) kept; w = {gate, up, down}. */
static void swiglu_mlp_forward(const grpo_ops *o, const lm_linear *l, float *y, float *g,
                               float *u, float *s, const float *x, float *const *w, int32_t n,
                               int32_t C, int32_t I) {
    lm_linear_forward(o, l, g, x, w[EW_GATE], NULL, n, C, I);
    lm_linear_forward(o, l, u, x, w[EW_UP], NULL, n, C, I);
    o->swiglu_forward(o->ctx, s, g, u, n, I);
    lm_linear_forward(o, l, y, s, w[EW_DOWN], NULL, n, I, C);
}

/* Its backward: dy (n,C) -> dx (n,C) (written); dtmp (n,C), ds/dg/du (n,I) work buffers;
 * weight grads dw (NULL entries skipped) accumulated. */
static void swiglu_mlp_backward(const grpo_ops *o, const lm_linear *l, float *dx, float *dtmp,
                                float *ds, float *dg, float *du, const float *dy, const float *x,
                                const float *g, const float *u, const float *s, float *const *w,
                                float *const *dw, int32_t n, int32_t C, int32_t I) {
    lm_linear_backward(o, l, ds, dw[EW_DOWN], NULL, dy, s, w[EW_DOWN], n, I, C);
    o->swiglu_backward(o->ctx, dg, du, ds, g, u, n, I);
    lm_linear_backward(o, l, dx, dw[EW_GATE], NULL, dg, x, w[EW_GATE], n, C, I);
    lm_linear_backward(o, l, dtmp, dw[EW_UP], NULL, du, x, w[EW_UP], n, C, I);
    o->accumulate(o->ctx, dx, dtmp, (uint64_t)n * C);
}

int32_t moe_block_forward(lm_decoder *d, float *out, void *la, float *tmp, int32_t l, int32_t N,
                          grpo_error *err) {
    moe_model *m = (moe_model *)d;
    moe_layer_acts *a = la;
    const grpo_ops *o = d->ops;
    const moe_config *c = &m->cfg;
    const moe_layer_params *lp = &m->lp[l];
    int32_t C = c->attn.C, I = c->I, M = N * c->K;
    o->rmsnorm_forward(o->ctx, a->ln2, a->ln2_rstd, a->at.h, lp->p[MP_LN2], N, C, c->attn.eps);
    lm_linear_forward(o, &d->lin, a->probs, a->ln2, lp->p[MP_ROUTER], NULL, N, C, c->E);
    int32_t st = moe_router_forward(m, a, l, err);
    if (st != GRPO_OK) return st;
    o->gather_rows(o->ctx, a->xg, a->ln2, a->tok, M, C);
    const int32_t *off = m->eoff + (size_t)l * (c->E + 1);
    for (int32_t e = 0; e < c->E; e++) {
        int32_t r0 = off[e], n = off[e + 1] - off[e];
        if (n == 0) continue;
        uint64_t ri = (uint64_t)r0 * I, rc = (uint64_t)r0 * C;
        swiglu_mlp_forward(o, &d->lin, a->ey + rc, a->eg + ri, a->eu + ri, a->es + ri, a->xg + rc,
                           lp->ep + e * EW_COUNT, n, C, I);
    }
    if (c->NS == 0) o->copy(o->ctx, out, a->at.h, (uint64_t)N * C * sizeof(float));
    for (int32_t s = 0; s < c->NS; s++) {
        uint64_t si = (uint64_t)s * N * c->IS;
        swiglu_mlp_forward(o, &d->lin, tmp, a->sg + si, a->su + si, a->ss + si, a->ln2,
                           lp->sp + s * EW_COUNT, N, C, c->IS);
        if (s == 0) o->residual_forward(o->ctx, out, a->at.h, tmp, (uint64_t)N * C);
        else o->accumulate(o->ctx, out, tmp, (uint64_t)N * C);
    }
    o->scatter_add_rows(o->ctx, out, a->ey, a->tok, a->w, M, C);
    return GRPO_OK;
}

int32_t moe_block_backward(lm_decoder *d, lm_decoder_acts *ga, const void *la, int32_t l,
                           int32_t N, float aux_weight, grpo_error *err) {
    moe_model *m = (moe_model *)d;
    const moe_layer_acts *a = la;
    const moe_grads *gb = ga->ffn;
    const grpo_ops *o = d->ops;
    const moe_config *c = &m->cfg;
    const moe_layer_params *lp = &m->lp[l];
    int32_t C = c->attn.C, I = c->I, M = N * c->K;
    /* routed experts: d out -> d ey (weighted) and d w, then each expert back to d xg */
    o->scatter_add_rows_backward(o->ctx, gb->dey, gb->dw, ga->dx, a->ey, a->tok, a->w, M, C);
    const int32_t *off = m->eoff + (size_t)l * (c->E + 1);
    for (int32_t e = 0; e < c->E; e++) {
        int32_t r0 = off[e], n = off[e + 1] - off[e];
        if (n == 0) continue;
        uint64_t ri = (uint64_t)r0 * I, rc = (uint64_t)r0 * C;
        /* dey's rows of this expert are consumed first, then reused as the up-proj scratch */
        swiglu_mlp_backward(o, &d->lin, gb->dxg + rc, gb->dey + rc, gb->dmid + ri, gb->dgate + ri,
                            gb->dup + ri, gb->dey + rc, a->xg + rc, a->eg + ri, a->eu + ri,
                            a->es + ri, lp->ep + e * EW_COUNT, lp->eg + e * EW_COUNT, n, C, I);
    }
    /* router: d w (+ aux) -> d logits -> d u (written into dln) */
    int32_t st = moe_router_backward(m, gb->dlogits, gb->dw, a, l, aux_weight, err);
    if (st != GRPO_OK) return st;
    float *dln = ga->ag.dln, *dtmp = ga->ag.dtmp;
    lm_linear_backward(o, &d->lin, dln, lp->g[MP_ROUTER], NULL, gb->dlogits, a->ln2,
                       lp->p[MP_ROUTER], N, C, c->E);
    /* shared experts see every token, unweighted */
    for (int32_t s = 0; s < c->NS; s++) {
        uint64_t si = (uint64_t)s * N * c->IS;
        swiglu_mlp_backward(o, &d->lin, ga->dh, dtmp, gb->dmid, gb->dgate, gb->dup, ga->dx, a->ln2,
                            a->sg + si, a->su + si, a->ss + si, lp->sp + s * EW_COUNT,
                            lp->sg + s * EW_COUNT, N, C, c->IS);
        o->accumulate(o->ctx, dln, ga->dh, (uint64_t)N * C);
    }
    o->scatter_add_rows(o->ctx, dln, gb->dxg, a->tok, NULL, M, C);
    o->rmsnorm_backward(o->ctx, ga->dh, lp->g[MP_LN2], dln, a->at.h, lp->p[MP_LN2], a->ln2_rstd,
                        N, C);
    o->accumulate(o->ctx, ga->dh, ga->dx, (uint64_t)N * C); /* residual path */
    return GRPO_OK;
}
