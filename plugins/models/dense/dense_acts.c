/*
 * dense_acts.c — the activation block. One allocation (the host's), carved into the tensors of
 * dense_acts by a size table in llm.c's manner: each entry is a pointer field and its size in
 * floats for B rows of T tokens. Per-layer tensors repeat L times, each layer's attention half
 * first (laid out by the shared block, common/lm_attn.c), then its MLP half; the attention
 * block's gradient buffers follow the top-level tensors. Gradient buffers exist only for
 * training (train = 1). Prefill/decode (train = 0) keep nothing for a backward pass, so all L
 * layers share ONE set of layer buffers (layer l+1's input x is layer l's x, overwritten once
 * it is no longer read): their scratch is about 1/L of the training activations.
 */
#include "dense.h"

typedef struct act_entry {
    float **field;
    uint64_t floats;
} act_entry;

#define MAX_ENTRIES 32

/* Fills the table for one layer (or the top-level tensors when l < 0); returns the count. */
static int build_table(act_entry *e, dense_acts *a, dense_layer_acts *la, const dense_config *c,
                       int32_t B, int32_t T, int32_t train) {
    uint64_t N = (uint64_t)B * T, C = c->attn.C, I = c->I;
    int n = 0;
#define ENTRY(f, sz) (e[n].field = &(f), e[n].floats = (sz), n++)
    if (la) { /* the MLP half; the attention half is carved by lm_attn_acts_carve */
        ENTRY(la->ln2, N * C);
        ENTRY(la->ln2_rstd, N);
        ENTRY(la->gate, N * I);
        ENTRY(la->up, N * I);
        ENTRY(la->swi, N * I);
    } else {
        ENTRY(a->xL, N * C);
        ENTRY(a->lnf, N * C);
        ENTRY(a->lnf_rstd, N);
        ENTRY(a->head_lse, N);
        ENTRY(a->tmp, N * C);
        if (train) {
            ENTRY(a->dx, N * C);
            ENTRY(a->dh, N * C);
            ENTRY(a->dswi, N * I);
            ENTRY(a->dgate, N * I);
            ENTRY(a->dup, N * I);
        }
    }
#undef ENTRY
    return n;
}

/* Rounds each tensor up to 16 floats so every one starts 64-byte aligned. */
static uint64_t padded(uint64_t f) { return (f + 15) & ~(uint64_t)15; }

uint64_t dense_acts_floats(const dense_config *c, int32_t B, int32_t T, int32_t train) {
    act_entry e[MAX_ENTRIES];
    dense_acts a;
    dense_layer_acts la;
    uint64_t N = (uint64_t)B * T, total = lm_attn_acts_floats(&c->attn, N);
    int n = build_table(e, &a, &la, c, B, T, train);
    for (int i = 0; i < n; i++) total += padded(e[i].floats);
    if (train) total *= (uint64_t)c->L;
    n = build_table(e, &a, NULL, c, B, T, train);
    for (int i = 0; i < n; i++) total += padded(e[i].floats);
    return total + (train ? lm_attn_grads_floats(&c->attn, N) : 0);
}

void dense_acts_carve(dense_acts *a, dense_layer_acts *layers, float *block,
                      const dense_config *c, int32_t B, int32_t T, int32_t train) {
    act_entry e[MAX_ENTRIES];
    uint64_t N = (uint64_t)B * T;
    *a = (dense_acts){0};
    a->l = layers;
    float *p = block;
    for (int32_t l = 0; l < c->L; l++) {
        dense_layer_acts *la = &layers[l];
        if (!train && l > 0) { /* forward only: every layer uses layer 0's buffers */
            *la = layers[0];
            continue;
        }
        *la = (dense_layer_acts){0};
        p = lm_attn_acts_carve(&la->at, p, &c->attn, N);
        int n = build_table(e, a, la, c, B, T, train);
        for (int i = 0; i < n; i++) *e[i].field = p, p += padded(e[i].floats);
    }
    int n = build_table(e, a, NULL, c, B, T, train);
    for (int i = 0; i < n; i++) *e[i].field = p, p += padded(e[i].floats);
    if (train) lm_attn_grads_carve(&a->ag, p, &c->attn, N);
}
