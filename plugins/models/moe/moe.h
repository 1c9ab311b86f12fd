/*
 * moe.h — the mixture-of-experts decoder (MiniMind2 MoE, Qwen3-MoE): config, parameter table,
 * activation layout, router. Private to the moe pack.
 *
 * Dimension letters: B rows, T time, N = B*T tokens, C hidden, L layers, E routed experts,
 * K experts per token (top-k), M = N*K routed rows, I expert intermediate, NS shared experts,
 * V vocab, R decode rows, S cache positions (attention letters: see common/lm_attn.h).
 *
 * The model is the decoder skeleton of common/lm_decoder.h (embedding, layer loop, final norm,
 * head, prefill/decode) with the MoE block below as each layer's feed-forward half.
 * Layer l (pre-norm; attention as in common/lm_attn.h):
 *   h  = x + attn(ln1(x))
 *   u  = ln2(h); p = softmax(u @ gate^T) (N,E); (w, i) = top-k of p; w /= sum(w) + norm_eps
 *        when norm_topk
 *   x' = h + sum_k w_k expert_{i_k}(u) + sum_s shared_s(u)      expert(u) = SwiGLU MLP
 * Tokens are grouped per expert (a counting sort of the M assignments on the host), so each
 * expert is one gather -> three matmuls -> one weighted scatter-add, never a loop per token.
 *
 * Router on the host: the (N,E) router logits are downloaded, softmax/top-k/normalisation, the
 * grouping and the aux-loss statistics computed there (N*E floats a layer: small next to the
 * matmuls), and the grouping uploaded. Backward does the same with d weights -> d logits.
 */
#ifndef MOE_H
#define MOE_H

#include "grpo/model.h"
#include "grpo/ops.h"
#include "lm_attn.h"
#include "lm_decoder.h"
#include "lm_params.h"

/* The auxiliary (load-balancing) loss forms; each is
 *   aux = sum over groups g of coef_g * sum_e count_{g,e} * psum_{g,e}
 * with count = top-k assignments and psum = summed router probabilities of the real tokens of
 * the group; d aux / d p_{n,e} = coef_g(n) * count_{g(n),e}.                                  */
enum {
    MOE_AUX_SEQ,    /* MiniMind2 seq_aux: group = (layer, sequence); coef =
                       alpha E / (B' K S_b^2),
                       B' sequences with real tokens, S_b real tokens of sequence b; summed over
                       layers. A sequence is a row, or a segment of a packed row (mask value) */
    MOE_AUX_TOKEN,  /* MiniMind2 seq_aux = false: group = layer; coef = alpha E / (K N_r^2) */
    MOE_AUX_GLOBAL  /* Qwen3-MoE (transformers load_balancing_loss_func): one group over every
                       layer; coef = coef E / (L N_r)^2 */
};

/* Per-token router work lives in small arrays of E on the stack. */
#define MOE_MAX_EXPERTS 1024

typedef struct moe_config {
    lm_attn_config attn;
    int32_t L, V, tied;
    int32_t E, K, I;   /* routed experts, top-k, expert intermediate size */
    int32_t NS, IS;    /* shared experts and their intermediate size */
    int32_t norm_topk; /* divide the top-k weights by their sum (+ norm_eps) */
    float norm_eps;    /* 1e-20 (MiniMind2), 0 (Qwen3-MoE) */
    int32_t aux_kind;  /* MOE_AUX_* */
    float aux_coef;    /* aux_loss_alpha / router_aux_loss_coef ([model] router_aux_coef) */
    int32_t qwen;      /* 1: Qwen3-MoE naming/defaults, 0: MiniMind2 */
} moe_config;

/* Parses config.json text (model_type "qwen3_moe" or "minimind" with use_moe). Unsupported
 * features are GRPO_ERR_UNSUPPORTED naming the key. */
int32_t moe_config_parse(moe_config *c, const char *json, grpo_error *err);

/* Per-layer parameter slots: the attention block's AP_* first, then the MoE block. */
enum { MP_LN2 = AP_COUNT, MP_ROUTER, MP_COUNT };
/* Expert tensors: per routed/shared expert, gate, up, down. */
enum { EW_GATE, EW_UP, EW_DOWN, EW_COUNT };

typedef struct moe_layer_params {
    float *p[MP_COUNT], *g[MP_COUNT];   /* NULL where absent / unbound */
    float **ep, **eg;                   /* [E*EW_COUNT] routed expert weights / grads */
    float **sp, **sg;                   /* [NS*EW_COUNT] shared expert weights / grads */
} moe_layer_params;

/* ---- activations: the skeleton's block (common/lm_decoder.c) plus the MoE block's ---------- */
typedef struct moe_layer_acts {
    lm_attn_acts at;  /* x .. h */
    float *ln2;       /* (N,C) router and expert input u */
    float *ln2_rstd;  /* (N) */
    float *probs;     /* (N,E) router probabilities (router logits before the host softmax) */
    int32_t *tok;     /* (M) token of each routed row, rows grouped by expert */
    int32_t *slot;    /* (M) n*K + k of each routed row */
    float *w;         /* (M) its top-k weight */
    float *xg;        /* (M,C) gathered expert inputs */
    float *eg, *eu, *es; /* (M,I) expert gate, up, silu(gate)*up */
    float *ey;        /* (M,C) expert outputs (unweighted) */
    float *sg, *su, *ss; /* (NS,N,IS) shared experts' gate, up, silu(gate)*up */
} moe_layer_acts;

/* The MoE block's gradient buffers (train only; written, not accumulated). */
typedef struct moe_grads {
    float *dey, *dxg;  /* (M,C) */
    float *dmid, *dgate, *dup; /* (max(M*I, N*IS)) */
    float *dw;         /* (M) */
    float *dlogits;    /* (N,E) */
} moe_grads;

/* The skeleton's layout hooks (moe_acts.c). Integer tensors (tok, slot) take float-sized slots. */
uint64_t moe_layer_layout(const lm_decoder *d, void *la, float *block, uint64_t N,
                          int32_t parts);
uint64_t moe_grads_layout(const lm_decoder *d, void *ga, float *block, uint64_t N);

/* ---- the model ------------------------------------------------------------------------------ */
typedef struct moe_model {
    lm_decoder dec;         /* first: the skeleton (embedding, attention, norm, head, loops) */
    moe_config cfg;
    moe_layer_params *lp;   /* [L] */
    float **wbuf;           /* backing of every lp[].ep/eg/sp/sg array */
    moe_layer_acts *la;     /* [L] activation pointers, re-carved per call */
    moe_grads ga;           /* re-carved per training call */
    /* router state on the host, per pass (forward, prefill or decode) */
    int32_t B, T;           /* shape of the last pass */
    int32_t *eoff;          /* (L, E+1) first routed row of each expert, per layer */
    float *count;           /* (L, NG, E) top-k assignments of real tokens */
    float *psum;            /* (L, NG, E) summed probabilities of real tokens */
    int32_t *hmask;         /* (B,T) host copy of the mask */
    /* The aux loss's sequences: one per row, or per segment of a packed row (a mask value > 0 is
     * a segment id, ABI 1.7): group g = (row, segment id) with real tokens, in order */
    int32_t NG;             /* groups of the last pass */
    int32_t *grp;           /* (B,T) each real token's group, -1 on padding */
    int32_t *gid, *greal;   /* (NG) the group's segment id, its real tokens */
    float *load;            /* (L, E) expert_load() */
    float aux;              /* coef * aux of the last forward */
    float *hbuf;            /* host scratch, hbuf_floats */
    uint64_t hbuf_floats;
    int32_t cap_G, cap_N;   /* capacity of count/psum (groups) and of hmask, grp (tokens) */
} moe_model;

/* The MoE block as the skeleton's feed-forward half (moe_plugin.c). */
extern const lm_arch moe_arch;

int32_t moe_params_build(moe_model *m, grpo_error *err);
void moe_params_free(moe_model *m);
/* bind() of the MoE block's tensors (the skeleton binds embedding, norm and head). */
void moe_bind_slot(lm_decoder *d, int32_t slot, int32_t layer, float *p, float *g);

/* ---- router (moe_router.c) ------------------------------------------------------------------ */
/* Makes room for the host router state of a (B,T) forward and copies the mask (NULL: all
 * real); resets counts and the aux loss. */
int32_t moe_router_begin(lm_decoder *d, const int32_t *mask, int32_t B, int32_t T,
                         grpo_error *err);
/* Layer l: a->probs holds router logits (N,E); writes probs, tok/slot/w (grouped by expert),
 * m->eoff[l], counts and probability sums. */
int32_t moe_router_forward(moe_model *m, moe_layer_acts *a, int32_t l, grpo_error *err);
/* After the last layer: m->aux and m->load. */
void moe_router_end(lm_decoder *d);
/* dlogits (N,E) = d loss / d router logits of layer l from dw (M) (d loss / d top-k weights)
 * and aux_weight * d aux / d p. */
int32_t moe_router_backward(moe_model *m, float *dlogits, const float *dw,
                            const moe_layer_acts *a, int32_t l, float aux_weight,
                            grpo_error *err);

/* ---- compute (moe_block.c): the skeleton's forward/backward hooks -------------------------- */
/* MoE block of layer l: la's h (N,C) -> out (N,C), residual included; tmp (N,C) scratch. */
int32_t moe_block_forward(lm_decoder *d, float *out, void *la, float *tmp, int32_t l, int32_t N,
                          grpo_error *err);
/* a->dx (N,C) = d loss/d out -> a->dh (N,C) = d loss/d h (residual included); parameter grads
 * of the block (router, experts, ln2) accumulated, the router's with aux_weight * d aux. */
int32_t moe_block_backward(lm_decoder *d, lm_decoder_acts *a, const void *la, int32_t l,
                           int32_t N, float aux_weight, grpo_error *err);

#endif
