/*
 * moe_forward.c — the training forward pass: embedding, L layers of attention (common/lm_attn.c)
 * + MoE block (moe_block.c), final norm, fused head (log-probs of the targets, never the (N,V)
 * logits). The body is shared with prefill; the router statistics end in aux_loss()/expert_load().
 */
#include "moe.h"

/* Copies the rotated keys and values (B*T, KV) of layer l into cache rows 0..B-1, slots 0..T-1
 * (the layout of moe_infer.c). */
static void kv_store(moe_model *m, const grpo_kv_cache *kv, int32_t l, const lm_attn_acts *at,
                     int32_t B, int32_t T) {
    const grpo_ops *o = m->ops;
    uint64_t KV = (uint64_t)m->cfg.attn.NKV * m->cfg.attn.HD, S = (uint64_t)kv->S;
    uint64_t plane = (uint64_t)kv->R * S * KV, row_bytes = (uint64_t)T * KV * sizeof(float);
    float *kc = kv->data + (uint64_t)l * 2 * plane, *vc = kc + plane;
    for (int32_t b = 0; b < B; b++) {
        o->copy(o->ctx, kc + (uint64_t)b * S * KV, at->k + (uint64_t)b * T * KV, row_bytes);
        o->copy(o->ctx, vc + (uint64_t)b * S * KV, at->v + (uint64_t)b * T * KV, row_bytes);
    }
}

int32_t moe_body_forward(moe_model *m, moe_acts *a, const int32_t *ids, const int32_t *mask,
                         const int32_t *pos, int32_t B, int32_t T, const grpo_kv_cache *kv,
                         grpo_error *err) {
    const grpo_ops *o = m->ops;
    const moe_config *c = &m->cfg;
    int32_t N = B * T, st = moe_router_begin(m, mask, B, T, err);
    if (st != GRPO_OK) return st;
    o->embedding_forward(o->ctx, a->l[0].at.x, ids, m->wte, N, c->attn.C);
    for (int32_t l = 0; l < c->L && st == GRPO_OK; l++) {
        moe_layer_acts *la = &a->l[l];
        float *out = l + 1 < c->L ? a->l[l + 1].at.x : a->xL;
        lm_attn_forward(o, &c->attn, &la->at, a->tmp, m->lp[l].p, mask, pos, B, T);
        if (kv) kv_store(m, kv, l, &la->at, B, T);
        st = moe_block_forward(m, out, la, a->tmp, l, N, err);
    }
    if (st == GRPO_OK) moe_router_end(m);
    return st;
}

int32_t moe_forward(void *model, const grpo_batch *batch, float *acts, float *logp,
                    float *entropy, float scale, grpo_error *err) {
    moe_model *m = model;
    const moe_config *c = &m->cfg;
    if (!m->bound) return grpo_error_set(err, GRPO_ERR_INVALID, "moe: forward before bind");
    int32_t B = batch->B, T = batch->T, N = B * T;
    if (B <= 0 || T <= 0)
        return grpo_error_set(err, GRPO_ERR_INVALID, "moe: forward: empty batch (%d,%d)", B, T);
    moe_acts a;
    moe_acts_carve(&a, m->la, acts, c, B, T, 1);
    int32_t st = moe_body_forward(m, &a, batch->ids, batch->mask, batch->pos, B, T, NULL, err);
    if (st != GRPO_OK) return st;
    const grpo_ops *o = m->ops;
    o->rmsnorm_forward(o->ctx, a.lnf, a.lnf_rstd, a.xL, m->wnorm, N, c->attn.C, c->attn.eps);
    o->head_forward(o->ctx, logp, a.head_lse, entropy, a.lnf, m->whead, batch->targets, N,
                    c->attn.C, c->V, scale);
    return GRPO_OK;
}
