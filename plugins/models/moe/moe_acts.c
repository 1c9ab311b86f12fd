/*
 * moe_acts.c — the activation block: one allocation (the host's) carved in order, llm.c style:
 * per layer the attention block's tensors (common/lm_attn.c) then the MoE block's, then the
 * top-level tensors, then (train only) the gradient buffers. Integer tensors (tok, slot) take
 * float-sized slots of the block (same size and alignment). Every tensor starts 64-byte aligned.
 * Prefill/decode (train = 0) keep nothing for a backward pass, so all L layers share ONE set of
 * layer buffers (layer l+1's input x is layer l's x, written once it is no longer read; the
 * router's grouping per layer lives on the host): their scratch is about 1/L of training's.
 */
#include "moe.h"

static uint64_t padded(uint64_t f) { return (f + 15) & ~(uint64_t)15; }

/* Places (block != NULL) or only counts the MoE part of one layer; returns floats used. */
static uint64_t layer_layout(moe_layer_acts *a, float *block, const moe_config *c, uint64_t N) {
    uint64_t C = c->attn.C, M = N * c->K, I = c->I, used = 0;
    moe_layer_acts dummy;
    if (!a) a = &dummy;
#define PLACE(f, sz) (a->f = block ? (void *)(block + used) : NULL, used += padded(sz))
    PLACE(ln2, N * C);
    PLACE(ln2_rstd, N);
    PLACE(probs, N * c->E);
    PLACE(tok, M);
    PLACE(slot, M);
    PLACE(w, M);
    PLACE(xg, M * C);
    PLACE(eg, M * I);
    PLACE(eu, M * I);
    PLACE(es, M * I);
    PLACE(ey, M * C);
    PLACE(sg, (uint64_t)c->NS * N * c->IS);
    PLACE(su, (uint64_t)c->NS * N * c->IS);
    PLACE(ss, (uint64_t)c->NS * N * c->IS);
#undef PLACE
    return used;
}

static uint64_t top_layout(moe_acts *a, float *block, const moe_config *c, uint64_t N,
                           int32_t train) {
    uint64_t C = c->attn.C, M = N * c->K, used = 0;
    uint64_t mid = M * c->I > N * c->IS ? M * c->I : N * c->IS;
    moe_acts dummy;
    if (!a) a = &dummy;
#define PLACE(f, sz) (a->f = block ? block + used : NULL, used += padded(sz))
    PLACE(xL, N * C);
    PLACE(lnf, N * C);
    PLACE(lnf_rstd, N);
    PLACE(head_lse, N);
    PLACE(tmp, N * C);
    if (train) {
        PLACE(dx, N * C);
        PLACE(dh, N * C);
        PLACE(dey, M * C);
        PLACE(dxg, M * C);
        PLACE(dmid, mid);
        PLACE(dgate, mid);
        PLACE(dup, mid);
        PLACE(dw, M);
        PLACE(dlogits, N * c->E);
        used += lm_attn_grads_floats(&c->attn, N);
        if (block) lm_attn_grads_carve(&a->ag, block + used - lm_attn_grads_floats(&c->attn, N),
                                       &c->attn, N);
    }
#undef PLACE
    return used;
}

uint64_t moe_acts_floats(const moe_config *c, int32_t B, int32_t T, int32_t train) {
    uint64_t N = (uint64_t)B * T;
    uint64_t per_layer = lm_attn_acts_floats(&c->attn, N) + layer_layout(NULL, NULL, c, N);
    return per_layer * (train ? c->L : 1) + top_layout(NULL, NULL, c, N, train);
}

void moe_acts_carve(moe_acts *a, moe_layer_acts *layers, float *block, const moe_config *c,
                    int32_t B, int32_t T, int32_t train) {
    uint64_t N = (uint64_t)B * T;
    *a = (moe_acts){0};
    a->l = layers;
    float *p = block;
    for (int32_t l = 0; l < c->L; l++) {
        if (!train && l > 0) { /* forward only: every layer reuses layer 0's buffers */
            layers[l] = layers[0];
            continue;
        }
        layers[l] = (moe_layer_acts){0};
        p = lm_attn_acts_carve(&layers[l].at, p, &c->attn, N);
        p += layer_layout(&layers[l], p, c, N);
    }
    top_layout(a, p, c, N, train);
}
