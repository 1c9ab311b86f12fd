/*
 * dense.h — the dense decoder-only transformer (Llama, Qwen2, Qwen3, MiniMind2): config,
 * parameter table, activation layout. Private to the dense pack.
 *
 * Dimension letters: B rows, T time, N = B*T tokens, C hidden, L layers, NH query heads,
 * NKV key/value heads, HD head dim, Q = NH*HD, KV = NKV*HD, I intermediate, V vocab,
 * R decode rows, S cache positions.
 *
 * The model is the decoder skeleton of plugins/models/common/lm_decoder.h (embedding, layer
 * loop, final norm, head, prefill/decode) with a SwiGLU MLP as each layer's feed-forward half
 * (dense_mlp.c). Layer l (pre-norm, Hugging Face LlamaDecoderLayer; the attention half is the
 * shared block of common/lm_attn.h):
 *   a   = ln1(x)
 *   h   = x + o_proj(attn(rope(q_norm?(q_proj(a))), rope(k_norm?(k_proj(a))), v_proj(a)))
 *   x'  = h + down_proj(silu(gate_proj(ln2(h))) * up_proj(ln2(h)))
 * then norm(x_L) and the head (lm_head, or embed_tokens when tied).
 */
#ifndef DENSE_H
#define DENSE_H

#include "grpo/model.h"
#include "grpo/ops.h"
#include "lm_attn.h"
#include "lm_decoder.h"
#include "lm_params.h"

typedef struct dense_config {
    lm_attn_config attn; /* C, NH, NKV, HD, eps, rope_theta; qk_norm (Qwen3), qkv_bias (Qwen2,
                            or attention_bias), o_bias (attention_bias in Llama/Qwen3) */
    int32_t L, I, V;
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

/* Per-layer parameter slots, in the order of the parameter table. The attention slots are the
 * shared block's (lm_attn.h AP_*), so lp->p / lp->g are its parameter arrays. */
enum {
    LP_LN1 = AP_LN1, LP_WQ = AP_WQ, LP_BQ = AP_BQ, LP_WK = AP_WK, LP_BK = AP_BK, LP_WV = AP_WV,
    LP_BV = AP_BV, LP_QNORM = AP_QNORM, LP_KNORM = AP_KNORM, LP_WO = AP_WO, LP_BO = AP_BO,
    LP_LN2 = AP_COUNT, LP_WGATE, LP_WUP, LP_WDOWN, LP_COUNT
};

typedef struct dense_layer_params {
    float *p[LP_COUNT];  /* NULL where the architecture has no such tensor */
    float *g[LP_COUNT];  /* gradients, NULL when unbound or absent */
} dense_layer_params;

/* ---- activations: the skeleton's block (common/lm_decoder.c) plus the MLP's (dense_mlp.c) --- */
typedef struct dense_layer_acts {
    lm_attn_acts at; /* x (layer input, the residual stream) .. h (after attention): lm_attn.h */
    float *ln2;      /* (N,C) (redone) */
    float *ln2_rstd; /* (N) */
    float *gate;     /* (N,I) */
    float *up;       /* (N,I) */
    float *swi;      /* (N,I) silu(gate)*up (redone) */
} dense_layer_acts;

/* The MLP's gradient buffers (written, not accumulated). */
typedef struct dense_grads {
    float *dswi;  /* (N,I) */
    float *dgate; /* (N,I) */
    float *dup;   /* (N,I) */
} dense_grads;

typedef struct dense_model {
    lm_decoder dec;         /* first: the skeleton (embedding, attention, norm, head, loops) */
    dense_config cfg;
    dense_layer_params *lp; /* [L] */
    dense_layer_acts *la;   /* [L] activation pointers, re-carved per call */
    dense_grads ga;         /* re-carved per training call */
} dense_model;

/* Slots of the parameter table outside the layer slots LP_* and lm_params.h's LM_SLOT_*. */
#define SLOT_CLS (-4)      /* classifier head: loaded, never applied by the plugin */
#define SLOT_WQKV (-5)     /* InternLM2 packed wqkv.weight (Q+2KV,C) */
#define SLOT_BQKV (-6)     /* InternLM2 packed wqkv.bias (Q+2KV) */

/* ---- the tensors whatever their names (dense_tensors.c) ------------------------------------ */
/* Shape of layer slot s (ndim 1 or 2), or 0 when the architecture lacks it. */
int32_t dense_layer_shape(const dense_model *m, int32_t s, int64_t shape[2]);
/* Adds the head tensor of m->cfg.head (lm_head, score, v_head) to the parameter table, tied to
 * tensor 0 when tied; the LM head is named lm_head_name. */
int32_t dense_add_head(dense_model *m, const char *lm_head_name);

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

/* Builds the parameter table from m->cfg (dense_params.c). */
int32_t dense_params_build(dense_model *m, grpo_error *err);

/* ---- the skeleton's hooks (common/lm_decoder.h lm_arch): dense_arch ------------------------- */
extern const lm_arch dense_arch;
/* dense_mlp.c: the MLP half of a layer and its activation layout. */
uint64_t dense_layer_layout(const lm_decoder *d, void *la, float *block, uint64_t N,
                            int32_t parts);
uint64_t dense_grads_layout(const lm_decoder *d, void *ga, float *block, uint64_t N);
int32_t dense_kept(const lm_decoder *d, lm_kept *out);
/* out (N,C) = h + down(silu(gate(ln2 h)) * up(ln2 h)); tmp (N,C) is scratch. */
int32_t dense_mlp_forward(lm_decoder *d, float *out, void *la, float *tmp, int32_t l, int32_t N,
                          grpo_error *err);
/* The redone ln2 (from h and ln2_rstd) and swi (from gate and up) of layer l, as forward
 * made them. */
int32_t dense_mlp_redo(lm_decoder *d, void *la, int32_t l, int32_t N, grpo_error *err);
/* a->dx = d/d out (N,C) -> a->dh (N,C) = d loss/d h, including the residual. */
int32_t dense_mlp_backward(lm_decoder *d, lm_decoder_acts *a, const void *la, int32_t l,
                           int32_t N, float aux_weight, grpo_error *err);
/* dense_params.c: bind() of a layer tensor, the classifier head, InternLM2's packed q/k/v. */
void dense_bind_slot(lm_decoder *d, int32_t slot, int32_t layer, float *p, float *g);

#endif
