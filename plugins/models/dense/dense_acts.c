/*
 * dense_acts.c — the activation block. One allocation (the host's), carved into the tensors of
 * dense_acts by a size table in llm.c's manner: each entry is a pointer field and its size in
 * floats for B rows of T tokens. Per-layer tensors repeat L times; with qk_norm off, qraw/kraw
 * alias q/k (RoPE runs in place) and dqraw/dkraw alias dq/dk. Gradient buffers exist only for
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
    uint64_t N = (uint64_t)B * T, C = c->C, I = c->I;
    uint64_t Q = (uint64_t)c->NH * c->HD, KV = (uint64_t)c->NKV * c->HD;
    int n = 0;
#define ENTRY(f, sz) (e[n].field = &(f), e[n].floats = (sz), n++)
    if (la) {
        ENTRY(la->x, N * C);
        ENTRY(la->ln1, N * C);
        ENTRY(la->ln1_rstd, N);
        ENTRY(la->q, N * Q);
        ENTRY(la->k, N * KV);
        ENTRY(la->v, N * KV);
        if (c->qk_norm) {
            ENTRY(la->qraw, N * Q);
            ENTRY(la->q_rstd, N * c->NH);
            ENTRY(la->kraw, N * KV);
            ENTRY(la->k_rstd, N * c->NKV);
        }
        ENTRY(la->att, N * Q);
        ENTRY(la->att_lse, N * c->NH);
        ENTRY(la->h, N * C);
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
            ENTRY(a->dln, N * C);
            ENTRY(a->dtmp, N * C);
            ENTRY(a->datt, N * Q);
            ENTRY(a->dq, N * Q);
            ENTRY(a->dk, N * KV);
            ENTRY(a->dv, N * KV);
            if (c->qk_norm) {
                ENTRY(a->dqraw, N * Q);
                ENTRY(a->dkraw, N * KV);
            }
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
    uint64_t total = 0;
    int n = build_table(e, &a, &la, c, B, T, train);
    for (int i = 0; i < n; i++) total += padded(e[i].floats);
    if (train) total *= (uint64_t)c->L;
    n = build_table(e, &a, NULL, c, B, T, train);
    for (int i = 0; i < n; i++) total += padded(e[i].floats);
    return total;
}

void dense_acts_carve(dense_acts *a, dense_layer_acts *layers, float *block,
                      const dense_config *c, int32_t B, int32_t T, int32_t train) {
    act_entry e[MAX_ENTRIES];
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
        int n = build_table(e, a, la, c, B, T, train);
        for (int i = 0; i < n; i++) *e[i].field = p, p += padded(e[i].floats);
        if (!c->qk_norm) la->qraw = la->q, la->kraw = la->k;
    }
    int n = build_table(e, a, NULL, c, B, T, train);
    for (int i = 0; i < n; i++) *e[i].field = p, p += padded(e[i].floats);
    if (!c->qk_norm) a->dqraw = a->dq, a->dkraw = a->dk;
}
