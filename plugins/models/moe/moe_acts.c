/*
 * moe_acts.c — the MoE block's part of the activation block, as the decoder skeleton's layout
 * hooks (common/lm_decoder.c carves the rest): per layer after the attention block's tensors,
 * and (train only) the gradient buffers after dx, dh. Integer tensors (tok, slot) take
 * float-sized slots of the block (same size and alignment). Every tensor starts 64-byte aligned.
 * Prefill/decode keep one set of layer buffers for all L layers; the router's grouping per layer
 * lives on the host.
 */
#include "moe.h"

/* The skeleton reads a moe_model as its lm_decoder and a layer struct as its lm_attn_acts. */
_Static_assert(offsetof(moe_model, dec) == 0, "lm_decoder must come first");
_Static_assert(offsetof(moe_layer_acts, at) == 0, "lm_attn_acts must come first");

/* Places (block != NULL) or only counts the MoE part of one layer; returns floats used. The
 * block keeps every tensor (no redo hook): all of them are LM_ACTS_KEPT. */
uint64_t moe_layer_layout(const lm_decoder *d, void *la, float *block, uint64_t N,
                          int32_t parts) {
    const moe_config *c = &((const moe_model *)d)->cfg;
    uint64_t C = c->attn.C, M = N * c->K, I = c->I, used = 0;
    moe_layer_acts *a = la;
    if (!(parts & LM_ACTS_KEPT)) return 0;
#define PLACE(f, sz) \
    ((block ? (void)(a->f = (void *)(block + used)) : (void)0), used += lm_padded(sz))
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
    return used;
}

/* The block's gradient buffers of a training pass. */
uint64_t moe_grads_layout(const lm_decoder *d, void *ga, float *block, uint64_t N) {
    const moe_config *c = &((const moe_model *)d)->cfg;
    uint64_t C = c->attn.C, M = N * c->K, used = 0;
    uint64_t mid = M * c->I > N * c->IS ? M * c->I : N * c->IS;
    moe_grads *a = ga;
    PLACE(dey, M * C);
    PLACE(dxg, M * C);
    PLACE(dmid, mid);
    PLACE(dgate, mid);
    PLACE(dup, mid);
    PLACE(dw, M);
    PLACE(dlogits, N * c->E);
#undef PLACE
    return used;
}
