/*
 * lm_decoder.h — the decoder skeleton shared by the model packs (compiled into each pack that
 * uses it; not part of the SDK): embedding, L pre-norm layers, final norm and the fused head, for
 * training (forward/backward), inference (prefill/decode) and hidden states. A layer is the
 * shared attention block (lm_attn.h) followed by the pack's feed-forward half, which the pack
 * plugs in through lm_arch hooks (dense: a SwiGLU MLP; moe: router + experts):
 *   x_0 = embed(ids)
 *   h_l = x_l + attn(ln1(x_l))          lm_attn.c
 *   x_{l+1} = ffn_l(h_l)                 the pack (it adds the residual h_l itself)
 *   logp = log_softmax(head(norm(x_L)))[targets]
 *
 * Dimension letters: B rows, T time, N = B*T tokens, C hidden, L layers, V vocab, R decode rows,
 * S cache slots, KV = NKV*HD (attention letters: lm_attn.h).
 *
 * A pack's model struct begins with an lm_decoder, so the void *model of grpo/model.h is also
 * the decoder, and the lm_decoder_* slot functions below go straight into the descriptor. The
 * pack's per-layer activation struct begins with lm_attn_acts (the skeleton reads x .. h there).
 */
#ifndef LM_DECODER_H
#define LM_DECODER_H

#include <stddef.h>

#include "grpo/model.h"
#include "grpo/ops.h"
#include "lm_attn.h"
#include "lm_params.h"
#include "lm_prefix.h"

typedef struct lm_decoder lm_decoder;

/* The top-level activations of one pass; the per-layer ones are the pack's structs. */
typedef struct lm_decoder_acts {
    void *l;          /* [L] the pack's layer structs (lm_decoder.layer_size bytes each) */
    float *xL;        /* (N,C) output of the last layer */
    float *lnf;       /* (N,C) final norm */
    float *lnf_rstd;  /* (N) */
    float *head_lse;  /* (N) log-sum-exp of the head's logits */
    float *tmp;       /* (N,C) attention / feed-forward output before its residual add */
    float *xr;        /* (N,C) recomputation only: a recomputed layer's output (dropped: the
                         next layer's input is kept) */
    /* gradients (train only; written, never accumulated) */
    float *dx;        /* (N,C) d loss/d x of the residual stream, layer l+1 down to layer l */
    float *dh;        /* (N,C) d loss/d h (after attention) */
    lm_attn_grads ag; /* the attention block's work buffers (dln, dtmp (N,C) are shared) */
    void *ffn;        /* the pack's gradient buffers (lm_arch.grads_layout), NULL without */
} lm_decoder_acts;

/* What a pack plugs into the skeleton. Every hook gets the decoder (the pack's model). */
typedef struct lm_arch {
    /* Places (block != NULL) or only counts the pack's part of one layer's activations for N
     * tokens, its tensors of parts (LM_ACTS_* of lm_attn.h: kept, redone or both), into the
     * layer struct la (lm_attn_acts first), leaving its other tensors as they are; returns the
     * floats used, each tensor rounded up with lm_padded(). A pack without redo() keeps all. */
    uint64_t (*layer_layout)(const lm_decoder *d, void *la, float *block, uint64_t N,
                             int32_t parts);
    /* (optional) The same for the pack's gradient buffers of a training pass (into
     * lm_decoder.grads). */
    uint64_t (*grads_layout)(const lm_decoder *d, void *ga, float *block, uint64_t N);
    /* (optional) Before the layers of a pass over (B,T) tokens; mask (B,T) is on the device,
     * NULL when every token is real (decode). */
    int32_t (*begin)(lm_decoder *d, const int32_t *mask, int32_t B, int32_t T, grpo_error *err);
    /* Layer l's feed-forward half: la's h (N,C) -> out (N,C), residual included, keeping what
     * backward needs in la; tmp (N,C) scratch. */
    int32_t (*forward)(lm_decoder *d, float *out, void *la, float *tmp, int32_t l, int32_t N,
                       grpo_error *err);
    /* (optional) After the last layer of a pass that succeeded. */
    void (*end)(lm_decoder *d);
    /* (optional) Before its backward in a training pass without recomputation: layer l's
     * redone tensors (LM_ACTS_REDONE) again from its kept ones, by the ops of forward (the
     * same bits). */
    int32_t (*redo)(lm_decoder *d, void *la, int32_t l, int32_t N, grpo_error *err);
    /* Its backward: a->dx (N,C) = d loss/d out -> a->dh (N,C) = d loss/d h (residual
     * included); parameter grads accumulated. aux_weight: grpo_batch.aux_weight (0 without). */
    int32_t (*backward)(lm_decoder *d, lm_decoder_acts *a, const void *la, int32_t l,
                        int32_t N, float aux_weight, grpo_error *err);
    /* bind() of one parameter outside embedding/norm/head: table slot `slot` of layer `layer`
     * (-1 outside the layers); g is NULL when frozen. */
    void (*bind)(lm_decoder *d, int32_t slot, int32_t layer, float *p, float *g);
    /* (optional) The pack's kept tensors of a layer struct (lm_kept, at most 6) into out;
     * returns their count. Without it the pack cannot keep a rollout (keep_rollout). */
    int32_t (*kept)(const lm_decoder *d, lm_kept *out);
    /* 1: every linear layer of the pack runs on a pass's tokens in their order, so
     * set_lora_rows (1.11) can leave a pass's last rows to the base; 0 (MoE experts run on
     * rows gathered by expert): set_lora_rows is refused. */
    int32_t rows_in_order;
} lm_arch;

/* Rollout keep (keep_rollout, 1.10): where prefill and decode write what the training
 * forward of keep's batch keeps; that forward then runs only the attention (att, att_lse), the
 * final norm and the head. */
typedef struct lm_keep {
    int32_t on;
    grpo_rollout_keep k;  /* the caller's (row_of read at each decode) */
    int32_t *prefix_of;   /* (B) host copy */
    int32_t *steps;       /* (B) completion tokens kept so far per row (decode writes them in
                             order); the rest are zeroed before the forward reads them */
    void *la;             /* [L] layer structs carved on k.acts (the training layout) */
    lm_decoder_acts top;  /* its top-level tensors (xL) */
    lm_kept kept[16];     /* the attention block's kept tensors [0, n_attn), the pack's [.., n) */
    int32_t n_attn, n;
    int32_t lora;         /* the LoRA adapters were on when it was armed (lm_lora_active) */
    int32_t adopted;      /* written by another instance (grpo_rollout_keep.written, 1.11) */
    void *moves;          /* [L * n + 1] work of a forward narrower than the keep */
} lm_keep;

/* A layer's parameter and gradient slots, the attention block's AP_* first (the pack's arrays). */
typedef struct lm_layer_weights {
    float *const *p, *const *g;
} lm_layer_weights;

struct lm_decoder {
    const char *who;            /* the pack in error messages ("dense") */
    const grpo_host *host;
    const grpo_ops *ops;
    const lm_attn_config *attn; /* the pack's (in its config) */
    int32_t L, V;
    int32_t rope_max;           /* > 0: RoPE is exact only up to this length, else 0 */
    const char *classifier;     /* NULL: an LM head; else the kind of classifier model
                                   ("sequence-classification") whose head tensor, ... */
    const char *classifier_tensor; /* ... e.g. "score.weight", only hidden() serves */
    const lm_arch *arch;
    lm_param_table pt;          /* slot: LM_SLOT_* outside the layers, else the pack's */
    lm_layer_weights *w;        /* [L] */
    void *la;                   /* [L] the pack's layer activation structs, re-carved per call */
    size_t layer_size;          /* bytes of one */
    void *grads;                /* the pack's gradient-buffer struct, re-carved per call */
    /* bound pointers */
    float *wte, *dwte;          /* (V,C) embed_tokens (held as lin.wtype, as every 2-D tensor) */
    float *wnorm, *dwnorm;      /* (C) final norm */
    float *whead, *dwhead;      /* (V,C) lm_head (== wte when tied) */
    int32_t bound;
    int32_t B, T;               /* shape of the last forward(); 0 after any other pass */
    float **params;             /* [pt.n] the bound parameter pointers (set_lora finds W) */
    lm_linear lin;              /* the linear layers: weight dtype (bind_typed, 1.5) and LoRA
                                   adapters (set_lora, 1.4) */
    int32_t recompute;          /* gradient checkpointing (ABI 1.5): training keeps only each
                                   layer's input; backward recomputes one layer at a time */
    int32_t share_P;            /* set_shared_prefix (ABI 1.6): the columns rows may share */
    lm_prefix pfx;              /* the last training forward's shared-prefix layout
                                   (lm_prefix.h): rows sharing a prompt compute it once */
    lm_keep keep;               /* keep_rollout (1.10) */
};

/* Rounds a tensor up to 16 floats so every one starts 64-byte aligned. */
static inline uint64_t lm_padded(uint64_t floats) { return (floats + 15) & ~(uint64_t)15; }

/* Sets up d (zeroed by the caller's calloc) for L layers; allocates d->w. The pack then fills
 * d->w[l] with its layers' slot arrays and d->la/layer_size/grads with its own storage. attn
 * (the pack's, in its config) gets attn->lora = &d->lora. */
int32_t lm_decoder_init(lm_decoder *d, const char *who, const grpo_host *host,
                        lm_attn_config *attn, int32_t L, int32_t V, const lm_arch *arch,
                        grpo_error *err);
/* Frees what lm_decoder_init and the parameter table own (safe on a partly set up d). */
void lm_decoder_free(lm_decoder *d);

/* The parameter table in Hugging Face order: embedding (V,C) named embed, per layer
 * add_layer(d, l) (which starts with lm_decoder_add_attn), "model.norm.weight" (C), add_head(d).
 * per_layer: the most tensors add_layer adds. Fails only for memory, naming d->who. */
int32_t lm_decoder_params_build(lm_decoder *d, uint32_t per_layer, const char *embed,
                                int32_t (*add_layer)(lm_decoder *d, int32_t l),
                                int32_t (*add_head)(lm_decoder *d), grpo_error *err);
/* The attention block's tensors of layer l, "model.layers.{l}.self_attn.*" (slots AP_*). */
int32_t lm_decoder_add_attn(lm_decoder *d, int32_t l);

/* Floats of the activations of a (B,T) pass (train = 0: the forward-only subset for
 * prefill/decode/hidden, where all L layers share one set of layer buffers; train with
 * d->recompute: that one set, plus each layer's input x (N,C) kept apart; train without: each
 * layer's kept tensors, plus one set of redone tensors (LM_ACTS_REDONE) all layers share). */
uint64_t lm_decoder_acts_floats(const lm_decoder *d, int32_t B, int32_t T, int32_t train);
/* Points a (and d->la, d->grads) into block, in order: (train without recompute) the shared
 * redone tensors, then per layer the attention block's tensors then the pack's (its kept ones
 * only when the redone are shared; one such layer when all are), then (train with recompute)
 * the L layer inputs,
 * then xL lnf lnf_rstd head_lse tmp, then (train) dx dh, the pack's gradient buffers, the
 * attention block's. */
void lm_decoder_acts_carve(lm_decoder *d, lm_decoder_acts *a, float *block, int32_t B,
                           int32_t T, int32_t train);
/* The pack's layer struct l of a (its lm_attn_acts). */
static inline lm_attn_acts *lm_decoder_layer(const lm_decoder *d, const lm_decoder_acts *a,
                                             int32_t l) {
    return (lm_attn_acts *)((char *)a->l + (size_t)l * d->layer_size);
}

/* ---- the descriptor slots (grpo/model.h); model is the lm_decoder ---------------------------- */
uint32_t lm_decoder_n_params(void *model);
int32_t lm_decoder_param(void *model, uint32_t i, grpo_param_desc *out);
int32_t lm_decoder_bind(void *model, float *const *params, float *const *grads, grpo_error *err);
/* bind_typed (1.5): fp32 1-D tensors, one dtype (fp32 or bf16) for the others (lm_linear.h). */
int32_t lm_decoder_bind_typed(void *model, void *const *params, const int32_t *dtypes,
                              float *const *grads, grpo_error *err);
uint64_t lm_decoder_activation_floats(void *model, int32_t B, int32_t T);
int32_t lm_decoder_forward(void *model, const grpo_batch *batch, float *acts, float *logp,
                           float *entropy, float scale, grpo_error *err);
int32_t lm_decoder_backward(void *model, const grpo_batch *batch, float *acts,
                            const float *dlogp, float scale, grpo_error *err);
/* set_lora (1.4): adapters on the pack's linear layers (lm_lora.h). */
int32_t lm_decoder_set_lora(void *model, const grpo_lora_adapter *adapters, uint32_t n,
                            int32_t enabled, grpo_error *err);
/* set_gradient_checkpointing (1.5): d->recompute; a backward must follow a forward under the
 * same setting. */
int32_t lm_decoder_set_gradient_checkpointing(void *model, int32_t on, grpo_error *err);
/* set_shared_prefix (1.6): d->share_P; the next training forward runs packed where it can
 * (lm_prefix.h). */
int32_t lm_decoder_set_shared_prefix(void *model, int32_t P, grpo_error *err);
/* backward() of a loss with an entropy term (grpo_model_desc.backward_entropy, 1.4). */
int32_t lm_decoder_backward_entropy(void *model, const grpo_batch *batch, float *acts,
                                    const float *dlogp, const float *dentropy,
                                    const float *entropy, float scale, grpo_error *err);
uint64_t lm_decoder_kv_floats(void *model, int32_t R, int32_t S);
uint64_t lm_decoder_scratch_floats(void *model, int32_t R, int32_t T);
int32_t lm_decoder_prefill(void *model, const grpo_kv_cache *kv, const grpo_batch *prompt,
                           float *scratch, float *logits, grpo_error *err);
int32_t lm_decoder_decode(void *model, const grpo_kv_cache *kv, int32_t R, const int32_t *tokens,
                          const int32_t *pos, const int32_t *cache_mask, const int32_t *len,
                          float *scratch, float *logits, grpo_error *err);
/* The kv_page_floats() slot (ABI 1.9): L*2*page*NKV*HD; 0 on a backend without
 * attention_decode_paged. */
uint64_t lm_decoder_kv_page_floats(void *model, int32_t page);
void lm_decoder_kv_copy_row(void *model, const grpo_kv_cache *kv, int32_t dst, int32_t src,
                            int32_t n);
/* keep_rollout (1.10): lm_keep above. */
int32_t lm_decoder_keep_rollout(void *model, const grpo_rollout_keep *keep, grpo_error *err);
/* set_lora_rows (1.11): prefill/decode rows from n on run the base (lm_lora_pass_rows). */
int32_t lm_decoder_set_lora_rows(void *model, int32_t n, grpo_error *err);
/* hidden_size() = C; hidden(): out (B,T,C) = norm(x_L) over the forward-only scratch. */
int32_t lm_decoder_hidden_size(void *model);
/* The vocabulary: rows of the embedding (grpo_model_desc.vocab_size, 1.3). */
int32_t lm_decoder_vocab_size(void *model);

/* The grpo_model_desc slots every decoder pack serves with the skeleton, as designated
 * initializers: a pack's descriptor lists its id, architectures, create/destroy and its own
 * slots (aux_loss, hidden, relayout, ...), then LM_DECODER_DESC_SLOTS. */
#define LM_DECODER_DESC_SLOTS                                                                      \
    .n_params = lm_decoder_n_params, .param = lm_decoder_param, .bind = lm_decoder_bind,          \
    .activation_floats = lm_decoder_activation_floats, .forward = lm_decoder_forward,             \
    .backward = lm_decoder_backward, .kv_floats = lm_decoder_kv_floats,                          \
    .scratch_floats = lm_decoder_scratch_floats, .prefill = lm_decoder_prefill,                  \
    .decode = lm_decoder_decode, .kv_copy_row = lm_decoder_kv_copy_row,                          \
    .vocab_size = lm_decoder_vocab_size, .backward_entropy = lm_decoder_backward_entropy,       \
    .set_lora = lm_decoder_set_lora, .bind_typed = lm_decoder_bind_typed,                       \
    .set_gradient_checkpointing = lm_decoder_set_gradient_checkpointing,                       \
    .set_shared_prefix = lm_decoder_set_shared_prefix,                                         \
    .kv_page_floats = lm_decoder_kv_page_floats, .keep_rollout = lm_decoder_keep_rollout,         \
    .set_lora_rows = lm_decoder_set_lora_rows
int32_t lm_decoder_hidden(void *model, const grpo_batch *batch, float *scratch, float *out,
                          grpo_error *err);

#endif
