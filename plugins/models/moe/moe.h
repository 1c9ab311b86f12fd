/*
 * moe.h — the mixture-of-experts decoder (MiniMind2 MoE, Qwen3-MoE): config, parameter table,
 * activation layout, router. Private to the moe pack.
 *
 * Dimension letters: B rows, T time, N = B*T tokens, C hidden, L layers, E routed experts,
 * K experts per token (top-k), M = N*K routed rows, I expert intermediate, NS shared experts,
 * V vocab, R decode rows, S cache positions (attention letters: see common/lm_attn.h).
 *
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

/* The auxiliary (load-balancing) loss forms; each is
 *   aux = sum over groups g of coef_g * sum_e count_{g,e} * psum_{g,e}
 * with count = top-k assignments and psum = summed router probabilities of the real tokens of
 * the group; d aux / d p_{n,e} = coef_g(n) * count_{g(n),e}.                                  */
enum {
    MOE_AUX_SEQ,    /* MiniMind2 seq_aux: group = (layer, row); coef = alpha E / (B' K S_b^2),
                       B' rows with real tokens, S_b real tokens of row b; summed over layers */
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

/* ---- activations (moe_acts.c) -------------------------------------------------------------- */
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

typedef struct moe_acts {
    moe_layer_acts *l; /* [L] */
    float *xL, *lnf, *lnf_rstd, *head_lse; /* (N,C) (N,C) (N) (N) */
    float *tmp;        /* (N,C) */
    /* gradients (train only) */
    lm_attn_grads ag;
    float *dx, *dh;    /* (N,C) */
    float *dey, *dxg;  /* (M,C) */
    float *dmid, *dgate, *dup; /* (max(M*I, N*IS)) */
    float *dw;         /* (M) */
    float *dlogits;    /* (N,E) */
} moe_acts;

uint64_t moe_acts_floats(const moe_config *c, int32_t B, int32_t T, int32_t train);
void moe_acts_carve(moe_acts *a, moe_layer_acts *layers, float *block, const moe_config *c,
                    int32_t B, int32_t T, int32_t train);

/* ---- the model ------------------------------------------------------------------------------ */
typedef struct moe_model {
    const grpo_host *host;
    const grpo_ops *ops;
    moe_config cfg;
    uint32_t n_params;
    grpo_param_desc *descs; /* [n_params] */
    char **names;           /* [n_params] */
    int32_t *slot;          /* [n_params] -1 embed, -2 norm, -3 head, else a layer slot code
                               (moe_params.c) */
    int32_t *layer;         /* [n_params] layer index or -1 */
    float *wte, *dwte, *wnorm, *dwnorm, *whead, *dwhead;
    moe_layer_params *lp;   /* [L] */
    float **wbuf;           /* backing of every lp[].ep/eg/sp/sg array */
    moe_layer_acts *la;     /* [L] activation pointers, re-carved per call */
    int32_t bound;
    /* router state on the host, per forward */
    int32_t B, T;           /* shape of the last forward */
    int32_t *eoff;          /* (L, E+1) first routed row of each expert, per layer */
    float *count;           /* (L, B, E) top-k assignments of real tokens */
    float *psum;            /* (L, B, E) summed probabilities of real tokens */
    int32_t *hmask;         /* (B,T) host copy of the mask */
    float *load;            /* (L, E) expert_load() */
    float aux;              /* coef * aux of the last forward */
    float *hbuf;            /* host scratch, hbuf_floats */
    uint64_t hbuf_floats;
    int32_t cap_B, cap_N;   /* capacity of count/psum (rows) and hmask (tokens) */
} moe_model;

int32_t moe_params_build(moe_model *m, grpo_error *err);
int32_t moe_bind_params(moe_model *m, float *const *params, float *const *grads,
                        grpo_error *err);
void moe_params_free(moe_model *m);

/* ---- router (moe_router.c) ------------------------------------------------------------------ */
/* Makes room for the host router state of a (B,T) forward and copies the mask (NULL: all
 * real); resets counts and the aux loss. */
int32_t moe_router_begin(moe_model *m, const int32_t *mask, int32_t B, int32_t T,
                         grpo_error *err);
/* Layer l: a->probs holds router logits (N,E); writes probs, tok/slot/w (grouped by expert),
 * m->eoff[l], counts and probability sums. */
int32_t moe_router_forward(moe_model *m, moe_layer_acts *a, int32_t l, grpo_error *err);
/* After the last layer: m->aux and m->load. */
void moe_router_end(moe_model *m);
/* dlogits (N,E) = d loss / d router logits of layer l from dw (M) (d loss / d top-k weights)
 * and aux_weight * d aux / d p. */
int32_t moe_router_backward(moe_model *m, float *dlogits, const float *dw,
                            const moe_layer_acts *a, int32_t l, float aux_weight,
                            grpo_error *err);

/* ---- compute (moe_block.c, moe_forward.c, moe_backward.c, moe_infer.c) ---------------------- */
/* MoE block of layer l: a->at.h -> out (N,C). */
int32_t moe_block_forward(moe_model *m, float *out, moe_layer_acts *a, float *tmp, int32_t l,
                          int32_t N, grpo_error *err);
/* ga->dx (N,C) = d loss/d out -> ga->dh (N,C) = d loss/d h (residual included); parameter
 * grads of the block (router, experts, ln2) accumulated. */
int32_t moe_block_backward(moe_model *m, moe_acts *ga, const moe_layer_acts *a, int32_t l,
                           int32_t N, float aux_weight, grpo_error *err);
/* Embedding + all layers over a (B,T) batch: fills a->l[*] and a->xL, the router state and the
 * aux loss. When kv is not NULL (prefill), each layer's rotated keys and values go to cache rows
 * 0..B-1, slots 0..T-1. */
int32_t moe_body_forward(moe_model *m, moe_acts *a, const int32_t *ids, const int32_t *mask,
                         const int32_t *pos, int32_t B, int32_t T, const grpo_kv_cache *kv,
                         grpo_error *err);
int32_t moe_forward(void *model, const grpo_batch *batch, float *acts, float *logp,
                    float *entropy, float scale, grpo_error *err);
int32_t moe_backward(void *model, const grpo_batch *batch, float *acts, const float *dlogp,
                     float scale, grpo_error *err);
uint64_t moe_kv_floats(void *model, int32_t R, int32_t S);
uint64_t moe_scratch_floats(void *model, int32_t R, int32_t T);
int32_t moe_prefill(void *model, const grpo_kv_cache *kv, const grpo_batch *prompt,
                    float *scratch, float *logits, grpo_error *err);
int32_t moe_decode(void *model, const grpo_kv_cache *kv, int32_t R, const int32_t *tokens,
                   const int32_t *pos, const int32_t *cache_mask, const int32_t *len,
                   float *scratch, float *logits, grpo_error *err);
void moe_kv_copy_row(void *model, const grpo_kv_cache *kv, int32_t dst, int32_t src, int32_t n);

#endif
