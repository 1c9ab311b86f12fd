/*
 * grpo/model.h — the model interface, frozen as ABI 1.x (since 1.3): every struct grows only at
 * its end, behind struct_size, and comments mark the minor version that added each group, so a
 * host tests GRPO_HAS_FIELD (and non-NULL for optional slots) before using anything past 1.0.
 * What each minor added: the ABI history table in grpo/plugin.h.
 *
 * A model plugin describes its parameter tensors; the HOST owns memory: it allocates parameters,
 * gradients and the two AdamW moments in one block and activations in another (llm.c's plan),
 * loads the weights by the names the plugin gives, and hands pointers back through bind().
 * All compute goes through host->ops (grpo/ops.h).
 *
 * Lifecycle (MUST sentences):
 * - The host calls create() on the main thread; if it returns GRPO_OK the host MUST call
 *   destroy() exactly once. bind() comes before any forward/backward/decode call.
 * - forward(), backward(), prefill() and decode() on one instance are never called concurrently.
 * - backward() uses the activations of the immediately preceding forward() on the same batch.
 * - The host table passed to create() MUST outlive the instance (the plugin keeps the pointer
 *   to reach host->ops); config_json and cfg are borrowed for the call.
 * - A host MUST accept a grpo_model_desc whose struct_size ends anywhere at or after
 *   expert_load (the 1.0 slots): every slot after it is tested with GRPO_HAS_FIELD, never
 *   required by size.
 *
 * Fill grpo_model_desc with designated initializers (.id = ..., .vocab_size = ...; see
 * grpo/reward.h): optional slots left out are NULL, and a slot appended later needs no edit.
 */
#ifndef GRPO_MODEL_H
#define GRPO_MODEL_H

#include "grpo/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* grpo_param_desc.flags -- 1.0 -- */
#define GRPO_PARAM_NO_DECAY 1u /* excluded from weight decay (norms, biases) */
#define GRPO_PARAM_TIED 2u     /* shares storage with another tensor; not written on save */

/* -- 1.3: init hints, how a host that makes a fresh model (`grpo init-model`) fills the tensor.
 *    A 3-bit field, not independent bits: flags & GRPO_PARAM_INIT_MASK is one of the values
 *    below. std is the host's (grpo init-model: 0.02, transformers' initializer_range default);
 *    L is config.json's num_hidden_layers. A TIED tensor is not filled (its target is).
 *    0, GRPO_PARAM_INIT_DEFAULT, means "no hint": what every pack built before 1.3 reports. The
 *    host then falls back to its pre-1.3 rule by Hugging Face name: a name containing "norm" is
 *    ONES, one containing "o_proj" or "down_proj" is RESIDUAL, anything else NORMAL. A value
 *    the host does not know (one a later minor adds) is treated as no hint too.
 *    grpo_param_init() below is that rule, for hosts. A 1.3 pack SHOULD give every tensor a
 *    hint, so that no host guesses by name. -- */
#define GRPO_PARAM_INIT_MASK (7u << 2)
#define GRPO_PARAM_INIT_DEFAULT (0u << 2)  /* no hint: the host's rule by name (above) */
#define GRPO_PARAM_INIT_NORMAL (1u << 2)   /* N(0, std^2): embeddings, projections, heads */
#define GRPO_PARAM_INIT_RESIDUAL (2u << 2) /* N(0, (std / sqrt(2 L))^2): a projection that writes
                                            * into the residual stream (o_proj, down_proj), so
                                            * its variance does not grow with depth (GPT-2) */
#define GRPO_PARAM_INIT_ONES (3u << 2)     /* every element 1: norm weights */
#define GRPO_PARAM_INIT_ZEROS (4u << 2)    /* every element 0: biases, zero-init heads */

typedef struct grpo_param_desc {
    uint32_t struct_size;
    /* -- 1.0 -- */
    const char *name;  /* Hugging Face tensor name, e.g. "model.layers.0.self_attn.q_proj.weight" */
    int32_t ndim;      /* 1..4 */
    int64_t shape[4];
    uint32_t flags;    /* GRPO_PARAM_* */
    int32_t tied_to;   /* index of the tensor it shares storage with when TIED, else -1 */
} grpo_param_desc;

/* 1.3, for hosts: how to fill tensor d (GRPO_PARAM_INIT_NORMAL, _RESIDUAL, _ONES or _ZEROS):
 * its hint, else (no hint, or one this header does not know) the pre-1.3 rule by name. */
static inline uint32_t grpo_param_init(const grpo_param_desc *d) {
    uint32_t hint = d->flags & GRPO_PARAM_INIT_MASK;
    if (hint >= GRPO_PARAM_INIT_NORMAL && hint <= GRPO_PARAM_INIT_ZEROS) return hint;
    if (strstr(d->name, "norm")) return GRPO_PARAM_INIT_ONES;
    if (strstr(d->name, "o_proj") || strstr(d->name, "down_proj")) return GRPO_PARAM_INIT_RESIDUAL;
    return GRPO_PARAM_INIT_NORMAL;
}

/* A training batch, all arrays in backend memory, shape (B,T). */
typedef struct grpo_batch {
    uint32_t struct_size;
    /* -- 1.0 -- */
    int32_t B, T;
    const int32_t *ids;     /* (B,T) input token ids */
    const int32_t *mask;    /* (B,T) 1 = real token, 0 = padding */
    const int32_t *pos;     /* (B,T) RoPE positions (left-padded rows start at 0 at their first
                               real token) */
    const int32_t *targets; /* (B,T) next-token targets, -1 = no log-prob wanted */
    /* d loss / d aux_loss(): backward() adds aux_weight times the gradient of the auxiliary
     * loss (MoE load balancing) of this batch. With a training loss of policy loss +
     * [grpo] aux_loss_coef * aux_loss(), the trainer passes aux_loss_coef times the share it
     * gives this micro-batch's dlogp (e.g. 1 / gradient-accumulation steps). 0, or a
     * struct_size that ends before this field: no aux gradient. Unused by forward. */
    float aux_weight;
    /* -- 1.10: 1: forward() takes this batch's activations from the rollout that
     *    keep_rollout() armed (grpo_model_desc.keep_rollout); 0: computes them. -- */
    int32_t kept;
} grpo_batch;

/* -- 1.4: a LoRA adapter (PEFT's), on one (OC,IC) linear weight W of the model:
 *      y = x W^T + bias + scale * (x A^T) B^T
 *    scale = lora_alpha / r (rsLoRA: lora_alpha / sqrt(r)). A, B and their gradients live in
 *    the host's memory for the backend; the host owns them and initialises them (PEFT: A
 *    kaiming-uniform, B zeros). -- */
typedef struct grpo_lora_adapter {
    uint32_t struct_size;
    uint32_t param;  /* index (param()) of the weight W the adapter adds to */
    int32_t r;       /* rank */
    float scale;
    float *A, *B;    /* (r,IC), (OC,r) */
    float *dA, *dB;  /* their gradients, accumulated (+=) by backward(); NULL: not trained */
    /* -- 1.5: lora_dropout on the adapter's input, y = ... + s (drop(x) A^T) B^T, in every pass
     *    until the next set_lora (the host sets it for a training forward and its backward,
     *    with a fresh seed each time, and 0 otherwise); drop is grpo_ops.dropout with this p
     *    and seed (the pack derives nothing else from it). A pack reads these only when
     *    struct_size covers them (a 1.4 host's adapters have no dropout). -- */
    float dropout;   /* p in [0, 1); 0: none */
    uint64_t seed;
} grpo_lora_adapter;

/* -- 1.10: what a rollout keeps for the training forward of its rows (keep_rollout).
 *    The batch: B rows, prompts left-padded to P columns, completions right-padded to Tc; the
 *    prompts are prefilled as BP rows, and batch row b's prompt is prefill row prefix_of[b]
 *    (consecutive rows share one). Decode row r of a decode() call holds batch row row_of[r]
 *    (-1: kept nowhere); its new token is completion token len[r] - 1 - P. prefix_of and
 *    row_of are host arrays the caller keeps alive and current while keeping is on. -- */
typedef struct grpo_rollout_keep {
    uint32_t struct_size;
    float *acts;
    int32_t B, P, Tc, BP;
    const int32_t *prefix_of; /* (B) */
    const int32_t *row_of;    /* (decode rows) */
    /* -- 1.11: (B) host array, or NULL. Not NULL: acts already holds the batch's activations,
     *    written by the prefill and decode of another instance of this pack and configuration
     *    whose weights compute alike (the rollout copy of a bf16 run: bf16 weights under bf16
     *    compute, as this instance's bf16 training forward): row b's first written[b]
     *    completion tokens. This instance's kept forward() takes them; its own prefill() and
     *    decode() drop them. (Another instance, frozen or not, may write a keep for this.) A
     *    pack reads it only when GRPO_HAS_FIELD says the host's struct has it. -- */
    const int32_t *written;
} grpo_rollout_keep;

/* A KV cache: kv_floats(R, S) floats of backend memory owned by the host; or, since 1.9, paged
 * (page > 0, only for a pack with kv_page_floats): a pool of pages of `page` positions each.
 * A pack reads the 1.9 fields only when GRPO_HAS_FIELD(kv, grpo_kv_cache, table_host); a
 * cache whose struct_size ends before them is not paged. */
typedef struct grpo_kv_cache {
    uint32_t struct_size;
    /* -- 1.0 -- */
    float *data;  /* not paged: kv_floats(R, S) floats; paged: the pool, n_pages pages of
                   * kv_page_floats(page) floats, page p at data + p * kv_page_floats(page) */
    int32_t R, S; /* rows and positions it was sized for */
    /* -- 1.9: paging. Slot s of row r lies in block s / page, held by page
     *    table[r * ceil(S / page) + s / page] at position s % page of the page; -1: the block
     *    has no page (never read or written). The host owns the pages: before prefill() and
     *    decode() it gives every slot they write a page of its own (one no other block holds),
     *    and blocks that only hold slots to be read may share a page (the G rows of one prompt
     *    share its full pages). It copies a page as a whole (kv_page_floats(page) floats), never
     *    calls kv_copy_row() on a paged cache, and may grow the pool between calls (data and
     *    n_pages change; page ids do not). -- */
    int32_t page;              /* positions per page; 0: not paged */
    int32_t n_pages;           /* pages in the pool */
    const int32_t *table;      /* (R, ceil(S/page)) page ids, backend memory (the op reads it) */
    const int32_t *table_host; /* the same, host memory (the pack's copies read it) */
} grpo_kv_cache;

typedef struct grpo_model_desc {
    uint32_t struct_size;
    /* -- 1.0 -- */
    const char *id;          /* namespaced: "pack.name"; must match the manifest */
    const char *description; /* one line */
    const char *const *architectures; /* NULL-terminated HF "architectures" names served */

    /* Parses config.json text (borrowed) and the [model] section's plugin keys. */
    int32_t (*create)(const grpo_host *host, const char *config_json, const grpo_config *cfg,
                      void **model, grpo_error *err);
    void (*destroy)(void *model);

    /* -- parameters -- */
    uint32_t (*n_params)(void *model);
    int32_t (*param)(void *model, uint32_t i, grpo_param_desc *out);
    /* params[i] / grads[i] point into the host's block, one per tensor (grads may be NULL when
     * the model is frozen, e.g. a reference model). */
    int32_t (*bind)(void *model, float *const *params, float *const *grads, grpo_error *err);

    /* -- training path -- */
    uint64_t (*activation_floats)(void *model, int32_t B, int32_t T); /* size of acts */
    /* logp (B,T) log p(targets); entropy (B,T) may be NULL (both are 0 where targets < 0);
     * scale multiplies the logits (1/temperature). acts is the host's activation block of
     * activation_floats() floats. */
    int32_t (*forward)(void *model, const grpo_batch *batch, float *acts, float *logp,
                       float *entropy, float scale, grpo_error *err);
    /* dlogp (B,T): d loss / d logp. Accumulates (+=) into the bound gradients. */
    int32_t (*backward)(void *model, const grpo_batch *batch, float *acts, const float *dlogp,
                        float scale, grpo_error *err);

    /* -- inference path: a KV cache of kv->R rows by kv->S positions, laid out by the plugin.
     *    The live rows of a decode batch are rows 0..R-1 of the cache (R <= kv->R): when a row
     *    finishes, the host moves the last live row into its slot with kv_copy_row and shrinks R.
     *    Cache slot s of a row holds the token at column s of its (left-padded) sequence. -- */
    uint64_t (*kv_floats)(void *model, int32_t R, int32_t S);
    uint64_t (*scratch_floats)(void *model, int32_t R, int32_t T); /* for prefill/decode */
    /* Runs the prompt rows (B,T), B <= kv->R, T <= kv->S (left-padded: column T-1 must be real
     * in every row; mask/pos as in grpo_batch; targets unused) into cache rows 0..B-1, slots
     * 0..T-1, and writes the last column's logits (B,V). */
    int32_t (*prefill)(void *model, const grpo_kv_cache *kv, const grpo_batch *prompt,
                       float *scratch, float *logits, grpo_error *err);
    /* One token per row for rows 0..R-1: tokens (R), pos (R) RoPE positions; the cache slot
     * len[r]-1 is written and slots [0,len[r]) with cache_mask (R,kv->S) = 1 are attended to.
     * Writes logits (R,V). scratch holds scratch_floats(R, 1) floats. */
    int32_t (*decode)(void *model, const grpo_kv_cache *kv, int32_t R, const int32_t *tokens,
                      const int32_t *pos, const int32_t *cache_mask, const int32_t *len,
                      float *scratch, float *logits, grpo_error *err);
    /* Copies cache row src to row dst for slots [0,n) (to fan a prompt out to G rows, or to
     * compact live rows). To fan B prefilled rows out to G rows each (row b -> rows
     * b*G..b*G+G-1), go from b = B-1 down to 0 so no source row is overwritten before it is
     * read. */
    void (*kv_copy_row)(void *model, const grpo_kv_cache *kv, int32_t dst, int32_t src,
                        int32_t n);
    /* (optional) auxiliary loss of the last forward() (MoE load balancing), ALREADY multiplied
     * by the model's own coefficient (config.json's aux_loss_alpha / router_aux_loss_coef);
     * 0 when none. Its gradient enters backward() through grpo_batch.aux_weight. */
    float (*aux_loss)(void *model);
    /* (optional) expert load of the last forward(), prefill() or decode(): (*n_layers,
     * *n_experts) floats, the number of real (mask = 1) tokens routed to each expert of each MoE
     * layer (top-k assignments, so a row sums to K * tokens). Host memory owned by the plugin,
     * valid until the next call into the instance; NULL before the first forward. */
    const float *(*expert_load)(void *model, int32_t *n_layers, int32_t *n_experts);

    /* -- 1.1: (optional) hidden states, for heads the caller applies itself (reward models,
     *    value heads): the host's model_hidden service (grpo/plugin.h) needs both slots. -- */
    /* (optional) C, the floats per token that hidden() writes. */
    int32_t (*hidden_size)(void *model);
    /* (optional) Final hidden states, after the final norm, of batch (ids, mask, pos as in
     * grpo_batch; targets unused): out (B,T,C) in backend memory; scratch holds
     * scratch_floats(B, T) floats. Padding columns hold unspecified values. */
    int32_t (*hidden)(void *model, const grpo_batch *batch, float *scratch, float *out,
                      grpo_error *err);
    /* (optional) Converts parameter i between the file's layout and the plugin's, in place on
     * host memory of the parameter's numel floats: direction GRPO_RELAYOUT_LOAD after the host
     * read it (before upload), GRPO_RELAYOUT_SAVE on the host's copy before writing a file. A
     * plugin whose file layout is its compute layout leaves this NULL. (E.g. InternLM2's packed
     * wqkv, interleaved by kv group, becomes q|k|v.) */
    int32_t (*relayout)(void *model, uint32_t i, float *data, int32_t direction, grpo_error *err);

    /* -- 1.3 -- */
    /* V: rows of the token embedding, and columns of the logits prefill() and decode() write;
     * callable any time after create() (before bind()).
     * A host MUST test GRPO_HAS_FIELD(desc, grpo_model_desc, vocab_size) and non-NULL; a pack
     * built before 1.3 lacks it, and the host then takes the first dimension of the tensor named
     * lm_head.weight, model.embed_tokens.weight or model.tok_embeddings.weight. */
    int32_t (*vocab_size)(void *model);

    /* -- 1.4 -- */
    /* (optional) backward() of a loss that also depends on the entropy forward() wrote (the
     * entropy bonus): dentropy (B,T) d loss / d entropy, entropy (B,T) the values forward()
     * wrote for this batch, both backend memory (read where targets >= 0). Same accumulation as
     * backward(); dentropy = 0 everywhere gives backward()'s gradients. A host that needs it
     * tests GRPO_HAS_FIELD and non-NULL, and refuses the run otherwise (naming the pack). */
    int32_t (*backward_entropy)(void *model, const grpo_batch *batch, float *acts,
                                const float *dlogp, const float *dentropy, const float *entropy,
                                float scale, grpo_error *err);
    /* (optional) LoRA: from now on every pass adds adapters[0..n-1] (borrowed until the next
     * call) to their weights when enabled != 0; enabled = 0 runs the base model alone (the
     * reference of a LoRA run: one copy of the weights). n = 0 removes them. With adapters
     * set, backward() and backward_entropy() also run on an instance bound with grads = NULL
     * (a frozen base): only the adapters' gradients accumulate. GRPO_ERR_UNSUPPORTED for a
     * weight the pack does not run as a plain linear layer. */
    int32_t (*set_lora)(void *model, const grpo_lora_adapter *adapters, uint32_t n,
                        int32_t enabled, grpo_error *err);

    /* -- 1.5 -- */
    /* (optional) bind() with element types: params[i] holds parameter i as dtypes[i]
     * (GRPO_DTYPE_*, grpo/ops.h); grads as in bind(), and NULL for every tensor that is not
     * fp32 (such a tensor is frozen). The host calls it instead of bind() when some tensor is
     * not fp32, and refuses to hold other dtypes for a pack that lacks it. GRPO_ERR_UNSUPPORTED
     * (naming the tensor) for a dtype the pack cannot compute with on tensor i. */
    int32_t (*bind_typed)(void *model, void *const *params, const int32_t *dtypes,
                          float *const *grads, grpo_error *err);

    /* (optional) Activation recomputation (gradient checkpointing): on != 0 makes forward()
     * keep only what backward() cannot cheaply recompute (e.g. each layer's input) and
     * backward() recompute the rest one layer at a time; same gradients as on = 0.
     * activation_floats() answers for the setting in force, so the host calls this before it
     * sizes the activation block (and sizes it again after a change). */
    int32_t (*set_gradient_checkpointing)(void *model, int32_t on, grpo_error *err);

    /* -- 1.6 -- */
    /* (optional) Shared prefixes (GRPO's G completions of one prompt): from now on, in a
     * forward() (and the backward() that follows it), consecutive rows equal in their first P
     * columns (ids, mask and pos; a left-padded prompt and its completions) may have those
     * columns computed once (with grpo_ops.prefix_attention_*) instead of once per row. logp,
     * entropy, aux_loss and every gradient equal those of the rows computed apart, up to fp32
     * rounding. P = 0 (the state after create()): every row in full. Rows that are not equal
     * are never shared, so a P that does not fit a batch costs nothing but the check; a pack
     * may also run any batch in full (a backend without the 1.6 ops, LoRA dropout, ...). */
    int32_t (*set_shared_prefix)(void *model, int32_t P, grpo_error *err);

    /* -- 1.9 -- */
    /* (optional) A paged KV cache (grpo_kv_cache.page > 0): the floats of one page of `page`
     * positions (every layer's keys and values; the layout inside a page is the pack's), or 0
     * when it cannot run on one now (e.g. its backend lacks grpo_ops.attention_decode_paged). A
     * pack that answers > 0 runs prefill() and decode() on a paged cache; without the slot, or
     * on 0, the host gives the pack the unpaged cache of kv_floats(R, S). */
    uint64_t (*kv_page_floats)(void *model, int32_t page);

    /* -- 1.10 -- */
    /* (optional) Rollout keep: from now on, prefill() and decode() also write the activations
     * a training forward() of the batch keep describes would keep (its layout: the acts block
     * of activation_floats(keep->B, keep->P + keep->Tc), shared prefixes on) into keep->acts,
     * as they compute them. A forward() with grpo_batch.kept = 1 of those rows (prompts in the
     * first P columns, each completion's tokens after them, at most Tc completion columns and
     * at least each row's kept tokens) on keep->acts then takes them instead of computing its
     * layers again: the same bits, as decode and the training forward compute every token
     * alike; backward() follows as after any forward(). GRPO_ERR_INVALID from that forward()
     * when nothing matching is kept. keep NULL: off. Consumed by that forward(), dropped by any
     * other forward() or a prefill() of other prompts, but for a forward() of the base under
     * LoRA adapters switched off (set_lora enabled = 0: a LoRA run's KL reference, which reads
     * only frozen weights); a kept forward() is refused when the adapters are not as they were
     * at the rollout or drop (LoRA dropout). GRPO_ERR_UNSUPPORTED when the instance cannot
     * (recomputation, a pack without it). */
    int32_t (*keep_rollout)(void *model, const grpo_rollout_keep *keep, grpo_error *err);

    /* -- 1.11 -- */
    /* (optional) LoRA rows: from now on prefill() and decode() add the adapters (set_lora,
     * enabled) to the tokens of their rows 0..n-1 only; rows n and up run the base alone, as
     * with enabled = 0, and a rollout keep takes only rows below n. One call so decodes a LoRA
     * run's rollout and its KL reference (the base, fed the same tokens) together, reading each
     * weight once. n < 0: every row (the state after create() and after each set_lora()).
     * forward(), backward() and hidden() are unaffected. GRPO_ERR_UNSUPPORTED when the pack
     * cannot (e.g. it runs adapted weights on rows gathered out of order, MoE experts). */
    int32_t (*set_lora_rows)(void *model, int32_t n, grpo_error *err);
} grpo_model_desc;

#define GRPO_RELAYOUT_LOAD 0 /* file -> plugin */
#define GRPO_RELAYOUT_SAVE 1 /* plugin -> file */

#ifdef __cplusplus
}
#endif
#endif /* GRPO_MODEL_H */
