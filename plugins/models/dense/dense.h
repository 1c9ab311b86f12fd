/*
 * dense.h — the dense decoder-only transformer (Llama, Qwen2, Qwen3, MiniMind2): config,
 * parameter table, activation layout. Private to the dense pack.
 *
 * Dimension letters: B rows, T time, N = B*T tokens, C hidden, L layers, NH query heads,
 * NKV key/value heads, HD head dim, Q = NH*HD, KV = NKV*HD, I intermediate, V vocab,
 * R decode rows, S cache positions.
 *
 * Layer l (pre-norm, Hugging Face LlamaDecoderLayer):
 *   a   = ln1(x)
 *   h   = x + o_proj(attn(rope(q_norm?(q_proj(a))), rope(k_norm?(k_proj(a))), v_proj(a)))
 *   x'  = h + down_proj(silu(gate_proj(ln2(h))) * up_proj(ln2(h)))
 * then norm(x_L) and the head (lm_head, or embed_tokens when tied).
 */
#ifndef DENSE_H
#define DENSE_H

#include "grpo/model.h"
#include "grpo/ops.h"

typedef struct dense_config {
    int32_t C, L, NH, NKV, HD, I, V;
    float eps, rope_theta;
    int32_t qkv_bias;  /* q/k/v projections have a bias (Qwen2, or attention_bias) */
    int32_t o_bias;    /* o_proj has a bias (attention_bias in Llama/Qwen3) */
    int32_t qk_norm;   /* per-head RMSNorm of q and k before RoPE (Qwen3) */
    int32_t tied;      /* lm_head shares embed_tokens */
    int32_t internlm2; /* InternLM2 naming, packed wqkv (dense_internlm2.c) */
    int32_t head;      /* DENSE_HEAD_*: which head tensor the architecture has */
    int32_t n_labels;  /* rows of the score / v_head tensor (classifier heads) */
    int32_t rope_max;  /* > 0: RoPE is exact only up to this length (dynamic NTK), else 0 */
} dense_config;

/* The head of the architecture. Classifier heads are parameters the plugin loads but does not
 * apply: the caller reads them by name and applies them to hidden() (reward models). */
#define DENSE_HEAD_LM 0    /* lm_head.weight (V,C) (InternLM2: output.weight) */
#define DENSE_HEAD_SCORE 1 /* score.weight (n_labels,C): *ForSequenceClassification */
#define DENSE_HEAD_VALUE 2 /* v_head.weight (1,C): InternLM2ForRewardModel */

/* Parses config.json text. Unsupported features (MoE, rope scaling, sliding window, mlp bias,
 * a non-SiLU activation) are GRPO_ERR_UNSUPPORTED naming the key. */
int32_t dense_config_parse(dense_config *c, const char *json, grpo_error *err);

/* Per-layer parameter slots, in the order of the parameter table. */
enum {
    LP_LN1, LP_WQ, LP_BQ, LP_WK, LP_BK, LP_WV, LP_BV, LP_QNORM, LP_KNORM, LP_WO, LP_BO,
    LP_LN2, LP_WGATE, LP_WUP, LP_WDOWN, LP_COUNT
};

typedef struct dense_layer_params {
    float *p[LP_COUNT];  /* NULL where the architecture has no such tensor */
    float *g[LP_COUNT];  /* gradients, NULL when unbound or absent */
} dense_layer_params;

typedef struct dense_model {
    const grpo_host *host;
    const grpo_ops *ops;
    dense_config cfg;
    /* parameter table: descriptors with names owned here */
    uint32_t n_params;
    grpo_param_desc *descs; /* [n_params] */
    char **names;           /* [n_params] */
    int32_t *slot;          /* [n_params] LP_* for layer tensors, -1 embed, -2 norm, -3 head */
    int32_t *layer;         /* [n_params] layer index or -1 */
    /* bound pointers */
    float *wte, *dwte;         /* (V,C) embed_tokens */
    float *wnorm, *dwnorm;     /* (C) final norm */
    float *whead, *dhead_grad; /* (V,C) lm_head (== wte when tied) */
    dense_layer_params *lp;    /* [L] */
    struct dense_layer_acts *la; /* [L] activation pointers, re-carved per call */
    int32_t bound;
} dense_model;

/* Slots of the parameter table outside the layer slots LP_*. */
#define SLOT_EMBED (-1)
#define SLOT_NORM (-2)
#define SLOT_HEAD (-3)
#define SLOT_CLS (-4)      /* classifier head: loaded, never applied by the plugin */
#define SLOT_WQKV (-5)     /* InternLM2 packed wqkv.weight (Q+2KV,C) */
#define SLOT_BQKV (-6)     /* InternLM2 packed wqkv.bias (Q+2KV) */

/* Adds one tensor to the parameter table (dense_params.c). */
int32_t dense_params_add(dense_model *m, const char *name, int32_t ndim, const int64_t *shape,
                         uint32_t flags, int32_t tied_to, int32_t slot, int32_t layer);
/* The head tensor of m->cfg.head (lm_head, score, v_head), tied to tensor 0 when tied. */
int32_t dense_params_add_head(dense_model *m, const char *lm_head_name);

/* ---- InternLM2 (dense_internlm2.c) ---------------------------------------------------------- */
/* InternLM2's parameter table: model.tok_embeddings, model.layers.N.attention.wqkv / wo,
 * feed_forward.w1 / w3 / w2, attention_norm, ffn_norm, model.norm, then output / v_head. */
int32_t dense_internlm2_params_build(dense_model *m, grpo_error *err);
/* Points q/k/v (weights or biases) of layer l at the packed tensor p (q|k|v after relayout). */
void dense_internlm2_bind(dense_model *m, int32_t l, int32_t slot, float *p, float *g);
/* The relayout slot (grpo/model.h): packed wqkv rows, interleaved per kv group
 * (g query heads, then k, then v, each HD rows), <-> q|k|v. */
int32_t dense_internlm2_relayout(void *model, uint32_t i, float *data, int32_t direction,
                                 grpo_error *err);

/* Builds the parameter table from m->cfg. */
int32_t dense_params_build(dense_model *m, grpo_error *err);
int32_t dense_bind_params(dense_model *m, float *const *params, float *const *grads,
                          grpo_error *err);
void dense_params_free(dense_model *m);

/* ---- activations: one block, carved by a size table (see dense_acts.c) ------------------ */
typedef struct dense_layer_acts {
    float *x;        /* (N,C) layer input (the residual stream) */
    float *ln1;      /* (N,C) */
    float *ln1_rstd; /* (N) */
    float *qraw;     /* (N,Q) q_proj output before q_norm (qk_norm only, else == q) */
    float *q_rstd;   /* (N*NH) (qk_norm only) */
    float *kraw;     /* (N,KV) (qk_norm only, else == k) */
    float *k_rstd;   /* (N*NKV) (qk_norm only) */
    float *q;        /* (N,Q) after norm and RoPE */
    float *k;        /* (N,KV) after norm and RoPE */
    float *v;        /* (N,KV) */
    float *att;      /* (N,Q) attention output (before o_proj) */
    float *att_lse;  /* (B,NH,T) */
    float *h;        /* (N,C) residual after attention */
    float *ln2;      /* (N,C) */
    float *ln2_rstd; /* (N) */
    float *gate;     /* (N,I) */
    float *up;       /* (N,I) */
    float *swi;      /* (N,I) silu(gate)*up */
} dense_layer_acts;

typedef struct dense_acts {
    dense_layer_acts *l; /* [L] (points into a small host array owned by the caller) */
    float *xL;       /* (N,C) output of the last layer */
    float *lnf;      /* (N,C) */
    float *lnf_rstd; /* (N) */
    float *head_lse; /* (N) */
    float *tmp;      /* (N,C) o_proj / down_proj output before the residual add */
    /* activation gradients (written, not accumulated) */
    float *dx;       /* (N,C) gradient of the residual stream */
    float *dh;       /* (N,C) */
    float *dln;      /* (N,C) */
    float *dtmp;     /* (N,C) */
    float *datt;     /* (N,Q) */
    float *dq;       /* (N,Q) */
    float *dqraw;    /* (N,Q) */
    float *dk;       /* (N,KV) */
    float *dkraw;    /* (N,KV) */
    float *dv;       /* (N,KV) */
    float *dswi;     /* (N,I) */
    float *dgate;    /* (N,I) */
    float *dup;      /* (N,I) */
} dense_acts;

/* Floats needed for B rows of T tokens (train = 0: the forward-only subset for prefill/decode). */
uint64_t dense_acts_floats(const dense_config *c, int32_t B, int32_t T, int32_t train);
/* Points a into block; layers is an array of c->L. */
void dense_acts_carve(dense_acts *a, dense_layer_acts *layers, float *block,
                      const dense_config *c, int32_t B, int32_t T, int32_t train);

/* ---- compute (dense_forward.c, dense_backward.c, dense_infer.c) ---------------------------- */
/* Layer pieces shared by the training forward and decode (dense_forward.c). */
void dense_qkv_forward(dense_model *m, struct dense_layer_acts *la, const dense_layer_params *lp,
                       const int32_t *pos, int32_t N);
void dense_post_attention_forward(dense_model *m, float *out, struct dense_layer_acts *la,
                                  float *tmp, const dense_layer_params *lp, int32_t N);
/* Embedding + all layers over a (B,T) batch: fills a->l[*] and a->xL. When kv is not NULL
 * (prefill), each layer's rotated keys and values go to cache rows 0..B-1, slots 0..T-1. */
void dense_body_forward(dense_model *m, dense_acts *a, const int32_t *ids, const int32_t *mask,
                        const int32_t *pos, int32_t B, int32_t T, const grpo_kv_cache *kv);
/* Copies keys/values (B*T, KV) of layer l into cache rows 0..B-1, slots 0..T-1 (dense_infer.c) */
void dense_kv_store(dense_model *m, const grpo_kv_cache *kv, int32_t l, const float *k,
                    const float *v, int32_t B, int32_t T);
int32_t dense_forward(void *model, const grpo_batch *batch, float *acts, float *logp,
                      float *entropy, float scale, grpo_error *err);
int32_t dense_backward(void *model, const grpo_batch *batch, float *acts, const float *dlogp,
                       float scale, grpo_error *err);
uint64_t dense_kv_floats(void *model, int32_t R, int32_t S);
uint64_t dense_scratch_floats(void *model, int32_t R, int32_t T);
int32_t dense_prefill(void *model, const grpo_kv_cache *kv, const grpo_batch *prompt,
                      float *scratch, float *logits, grpo_error *err);
int32_t dense_decode(void *model, const grpo_kv_cache *kv, int32_t R, const int32_t *tokens,
                     const int32_t *pos, const int32_t *cache_mask, const int32_t *len,
                     float *scratch, float *logits, grpo_error *err);
void dense_kv_copy_row(void *model, const grpo_kv_cache *kv, int32_t dst, int32_t src,
                       int32_t n);
/* The hidden-states slots (dense_infer.c): C, and out (B,T,C) = final norm of the last layer. */
int32_t dense_hidden_size(void *model);
int32_t dense_hidden(void *model, const grpo_batch *batch, float *scratch, float *out,
                     grpo_error *err);
/* GRPO_ERR_UNSUPPORTED unless the model has an LM head (classifier models have hidden() only). */
int32_t dense_need_lm_head(const dense_model *m, const char *what, grpo_error *err);

#endif
