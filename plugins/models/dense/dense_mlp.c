/*
 * dense_mlp.c — the feed-forward half of a dense layer, the SwiGLU MLP of Hugging Face's
 * LlamaMLP, as the decoder skeleton's hooks (common/lm_decoder.h): its activation layout,
 * forward and backward. Everything around it (embedding, attention, final norm, the fused head,
 * the layer loops of training, prefill and decode) is the skeleton's.
 *   u = ln2(h); out = h + down(silu(gate u) * up u)
 */
#include "dense.h"

/* The skeleton reads a dense_model as its lm_decoder and a layer struct as its lm_attn_acts. */
_Static_assert(offsetof(dense_model, dec) == 0, "lm_decoder must come first");
_Static_assert(offsetof(dense_layer_acts, at) == 0, "lm_attn_acts must come first");

/* Places (block != NULL) or only counts one layer's MLP tensors of parts (LM_ACTS_*: ln2 and
 * swi are redone, the others kept); returns the floats used. */
uint64_t dense_layer_layout(const lm_decoder *d, void *la, float *block, uint64_t N,
                            int32_t parts) {
    const dense_config *c = &((const dense_model *)d)->cfg;
    uint64_t C = c->attn.C, I = c->I, used = 0;
    int32_t kept = parts & LM_ACTS_KEPT, redone = parts & LM_ACTS_REDONE;
    dense_layer_acts *a = la;
#define PLACE_IF(part, f, sz) \
    ((part) ? ((block ? (void)(a->f = block + used) : (void)0), used += lm_padded(sz)) : 0)
    PLACE_IF(redone, ln2, N * C);
    PLACE_IF(kept, ln2_rstd, N);
    PLACE_IF(kept, gate, N * I);
    PLACE_IF(kept, up, N * I);
    PLACE_IF(redone, swi, N * I);
#undef PLACE_IF
    return used;
}

/* The MLP's kept tensors (lm_arch.kept): ln2_rstd, gate, up. */
int32_t dense_kept(const lm_decoder *d, lm_kept *out) {
    uint64_t I = (uint64_t)((const dense_model *)d)->cfg.I;
    out[0] = (lm_kept){offsetof(dense_layer_acts, ln2_rstd), 1};
    out[1] = (lm_kept){offsetof(dense_layer_acts, gate), I};
    out[2] = (lm_kept){offsetof(dense_layer_acts, up), I};
    return 3;
}

/* The MLP's gradient buffers of a training pass. */
uint64_t dense_grads_layout(const lm_decoder *d, void *ga, float *block, uint64_t N) {
    uint64_t I = ((const dense_model *)d)->cfg.I, used = 0;
    dense_grads *a = ga;
#define PLACE(f, sz) ((block ? (void)(a->f = block + used) : (void)0), used += lm_padded(sz))
    PLACE(dswi, N * I);
    PLACE(dgate, N * I);
    PLACE(dup, N * I);
#undef PLACE
    return used;
}

int32_t dense_mlp_forward(lm_decoder *d, float *out, void *layer, float *tmp, int32_t l,
                          int32_t N, grpo_error *err) {
    (void)err;
    dense_model *m = (dense_model *)d;
    const grpo_ops *o = d->ops;
    const dense_config *c = &m->cfg;
    const dense_layer_params *lp = &m->lp[l];
    dense_layer_acts *la = layer;
    int32_t C = c->attn.C;
    o->rmsnorm_forward(o->ctx, la->ln2, la->ln2_rstd, la->at.h, lp->p[LP_LN2], N, C, c->attn.eps);
    lm_linear_forward(o, &d->lin, la->gate, la->ln2, lp->p[LP_WGATE], NULL, N, C, c->I);
    lm_linear_forward(o, &d->lin, la->up, la->ln2, lp->p[LP_WUP], NULL, N, C, c->I);
    o->swiglu_forward(o->ctx, la->swi, la->gate, la->up, N, c->I);
    lm_linear_forward(o, &d->lin, tmp, la->swi, lp->p[LP_WDOWN], NULL, N, c->I, C);
    o->residual_forward(o->ctx, out, la->at.h, tmp, (uint64_t)N * C);
    return GRPO_OK;
}

int32_t dense_mlp_redo(lm_decoder *d, void *layer, int32_t l, int32_t N, grpo_error *err) {
    (void)err;
    dense_model *m = (dense_model *)d;
    const grpo_ops *o = d->ops;
    const dense_config *c = &m->cfg;
    dense_layer_acts *la = layer;
    o->rmsnorm_forward(o->ctx, la->ln2, la->ln2_rstd, la->at.h, m->lp[l].p[LP_LN2], N, c->attn.C,
                       c->attn.eps);
    o->swiglu_forward(o->ctx, la->swi, la->gate, la->up, N, c->I);
    return GRPO_OK;
}

int32_t dense_mlp_backward(lm_decoder *d, lm_decoder_acts *a, const void *layer, int32_t l,
                           int32_t N, float aux_weight, grpo_error *err) {
    (void)aux_weight, (void)err; /* no auxiliary loss; nothing here can fail */
    dense_model *m = (dense_model *)d;
    const grpo_ops *o = d->ops;
    const dense_config *c = &m->cfg;
    const dense_layer_params *lp = &m->lp[l];
    const dense_layer_acts *la = layer;
    const dense_grads *g = a->ffn;
    int32_t C = c->attn.C;
    float *dln = a->ag.dln, *dtmp = a->ag.dtmp; /* (N,C) work buffers shared with attention */
    lm_linear_backward(o, &d->lin, g->dswi, lp->g[LP_WDOWN], NULL, a->dx, la->swi, lp->p[LP_WDOWN],
                       N, c->I, C);
    o->swiglu_backward(o->ctx, g->dgate, g->dup, g->dswi, la->gate, la->up, N, c->I);
    lm_linear_backward(o, &d->lin, dln, lp->g[LP_WGATE], NULL, g->dgate, la->ln2, lp->p[LP_WGATE], N,
                       C, c->I);
    lm_linear_backward(o, &d->lin, dtmp, lp->g[LP_WUP], NULL, g->dup, la->ln2, lp->p[LP_WUP], N, C,
                       c->I);
    o->accumulate(o->ctx, dln, dtmp, (uint64_t)N * C);
    o->rmsnorm_backward(o->ctx, a->dh, lp->g[LP_LN2], dln, la->at.h, lp->p[LP_LN2], la->ln2_rstd,
                        N, C);
    o->accumulate(o->ctx, a->dh, a->dx, (uint64_t)N * C); /* residual path */
    return GRPO_OK;
}
