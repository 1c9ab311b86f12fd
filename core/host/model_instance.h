/*
 * model_instance.h — the host side of a model: a plugin instance (grpo/model.h) plus the memory the host
 * owns for it, loaded from and saved to a Hugging Face directory.
 *
 * Memory (llm.c's plan; all through the backend's ops->alloc):
 *   block   one allocation of P floats per section: params | grads | AdamW m | AdamW v
 *           (a frozen model, e.g. a reference model, has the params section only). P is the sum
 *           of the sizes of the parameter tensors, each rounded up to 16 floats (64 bytes);
 *           a TIED tensor has no storage of its own: it points at the tensor it is tied to, so
 *           its gradient accumulates into that tensor's gradient.
 *   acts    activation_floats(B, T) for the largest micro-batch reserved (grpo_model_reserve_acts);
 *           a frozen model only runs forward, so its block holds only as many rows as fit
 *           fwd_budget and a forward runs the batch in chunks of that many rows (below)
 *   kv      the KV cache for R rows of S slots + the prefill/decode scratch
 *           (grpo_model_reserve_kv); only the functions below touch it (reserve, prefill, decode,
 *           kv_copy_row), and the one decode loop that drives them is the sampler (sampler.h)
 *           paged (grpo_model_reserve_kv_paged, when the pack and backend can, ABI 1.9): the
 *           cache is a pool of pages in memory of its own (kv_pages.h), given to rows as they
 *           grow and freed when they end; only the scratch lies in the work memory
 *   acts and kv are never used at once: they share one block of work memory (work_memory.h),
 *           which models whose passes never overlap may share too (grpo_model_share_work)
 *
 * Ownership: grpo_model_open() returns a model the caller MUST grpo_model_close(); the model
 * owns the plugin instance, every buffer above and a copy of the host table (so the host passed
 * in need not outlive it, but host->ops MUST). Not thread-safe: one thread per model.
 */
#ifndef GRPO_CORE_MODEL_H
#define GRPO_CORE_MODEL_H

#include "grpo/model.h"
#include "grpo/ops.h"
#include "io/hfdir.h"
#include "host/kv_pages.h"
#include "host/work_memory.h"
#include "host/registry.h"

typedef struct grpo_model {
    const grpo_model_desc *desc;
    void *inst;          /* plugin instance */
    grpo_host host;      /* copy of the caller's table; host.ops is the backend */
    const grpo_ops *ops;
    char *dir;           /* the directory it was loaded from */
    char *config_json;   /* text of config.json */
    grpo_hf_files tok_files; /* dir's tokenizer files as they were at open (saved with it) */
    int trainable;
    int adapters_train; /* LoRA adapters with gradients are set (backward runs on a frozen base) */
    int32_t weight_dtype; /* GRPO_DTYPE_* every tensor of 2+ dimensions is held as (1-D: fp32) */
    int32_t compute_dtype; /* GRPO_DTYPE_* its passes compute their products in
                            * (grpo_model_set_compute; f32 when opened) */

    uint32_t n_params;
    grpo_param_desc *params; /* [n_params] names owned by the plugin instance */
    uint64_t *numel;         /* [n_params] */
    uint64_t *offset;        /* [n_params] float offset inside a section (tied: the target's) */
    int32_t *dtype;          /* [n_params] GRPO_DTYPE_* of each tensor's storage */
    uint64_t section;        /* floats per section (P) */
    float *block;            /* (4 or 1) * P */
    float **param_ptr;       /* [n_params] into the params section */
    float **grad_ptr;        /* [n_params] into the grads section, NULL when frozen */
    float *grads, *adam_m, *adam_v; /* section starts, NULL when frozen */

    grpo_work *work;     /* where the activations, KV cache and scratch live, one at a time;
                            maybe shared with other models (work_memory.h) */
    uint64_t acts_bytes; /* of the activation block reserved for (acts_B, acts_T), 0: none */
    int32_t acts_B, acts_T;
    uint64_t fwd_budget; /* frozen: bytes a forward chunk's activation block may take */
    int32_t share_P;     /* the shared prefix of the next forward (set_shared_prefix), 0: none */
    int32_t fwd_chunks;  /* the plugin's forward calls in the last grpo_model_forward */

    grpo_kv_cache kv;   /* kv.data: the work block when reserved, else NULL */
    float *scratch;     /* after the cache in the work block */
    uint64_t kv_bytes;  /* of the cache and scratch, 0 until reserved */
    int32_t scratch_R, scratch_T; /* scratch fits prefill of (scratch_R, scratch_T) */
    grpo_kv_pages pages;          /* the paged cache's pages (pages.pool NULL: not paged) */
    int32_t *kv_hlen;             /* (kv.R) host copy of a paged decode's len */
    int32_t kv_pages_last;        /* the pages the last paged cache had when released: the
                                   * next one starts with as many (no growing, no copies) */
    int kv_unpaged;               /* 1: grpo_model_reserve_kv_paged makes the unpaged cache
                                   * (a test's reference run); 0 when opened */
    float *keep_block;  /* the kept rollout's training activations (grpo_model_keep_for), apart
                           from work: they live through the rollout's cache and other models'
                           passes until the kept forward */
    uint64_t keep_bytes;
    int keep_fwd;       /* the last forward read keep_block (backward then does too) */
    struct grpo_model *keep_into; /* the model whose training forward takes what this one's
                                     rollout keeps (a bf16 rollout copy's policy): the sampler
                                     writes into its keep_block; NULL: this model's own */
} grpo_model;

/* Creates the plugin instance from dir/config.json, allocates the block (params only when
 * !trainable), binds, and loads every non-tied parameter by name as fp32 from
 * dir/model.safetensors (or dir/model.safetensors.index.json). Errors name the file and the
 * tensor: a missing tensor, a wrong shape, an unexpected tensor (one the model does not have). */
int grpo_model_open(grpo_model **out, const grpo_model_desc *desc, const grpo_host *host,
                    const char *dir, const grpo_config *cfg, int trainable, grpo_error *err);

/* Finds the model plugin for dir/config.json's "architectures" in reg, loads it, then
 * grpo_model_open(). host->ops must be set (the backend). */
int grpo_model_open_dir(grpo_model **out, grpo_registry *reg, const grpo_host *host,
                        const char *dir, int trainable, grpo_error *err);

/* The same with the frozen model's tensors of 2+ dimensions held as weight_dtype
 * (GRPO_DTYPE_BF16: half the memory; the pack's bind_typed and the backend's 1.5 typed ops
 * compute with them; 1-D tensors stay fp32). A trainable model is fp32 only. */
int grpo_model_open_as(grpo_model **out, const grpo_model_desc *desc, const grpo_host *host,
                       const char *dir, const grpo_config *cfg, int trainable,
                       int32_t weight_dtype, grpo_error *err);
int grpo_model_open_dir_as(grpo_model **out, grpo_registry *reg, const grpo_host *host,
                           const char *dir, int trainable, int32_t weight_dtype,
                           grpo_error *err);

void grpo_model_close(grpo_model *m); /* NULL is fine */

/* Parameter i to / from fp32 host memory of its numel floats, converted from / to the dtype
 * it is held as (bf16: rounded to nearest even on the way in). */
int grpo_model_write_param(grpo_model *m, uint32_t i, const float *x, grpo_error *err);
int grpo_model_read_param(const grpo_model *m, uint32_t i, float *x, grpo_error *err);
/* dst's weights = src's (the same pack and shapes, e.g. a bf16 rollout copy of the policy
 * opened from the same directory), converted to dst's dtypes on the backend. */
int grpo_model_copy_weights(grpo_model *dst, const grpo_model *src, grpo_error *err);

/* The dtype m's passes (forward, backward, prefill, decode) compute their matmul products in:
 * GRPO_DTYPE_F32 (as opened), or GRPO_DTYPE_BF16 where the backend can (grpo_backend_set_compute:
 * the cpu backend on a CPU with avx512_bf16). The backend is set for each pass and back to f32
 * after it. An error naming what is missing leaves m as it was. */
int grpo_model_set_compute(grpo_model *m, int32_t dtype, grpo_error *err);

/* Index of the parameter called name, or -1. */
int grpo_model_param_index(const grpo_model *m, const char *name);

/* Makes the activation block large enough for (B,T) micro-batches (keeps a larger one).
 * A frozen model (a reference, grpo logprobs) never runs backward, but a pack's forward may keep
 * every layer's activations, and room for their gradients, as for one (lm_decoder's packs keep
 * a forward-only layout for a frozen instance; other packs need not): so its block holds only
 * the rows whose activations fit m->fwd_budget (GRPO_FWD_BUDGET when opened) or, when larger,
 * the work block it shares with the policy (a training step's reference: no new memory), at
 * least one row
 * and at least GRPO_FWD_MIN_TOKENS tokens (so each chunk's matmuls take the same GEMM path as
 * the whole batch would), and grpo_model_forward runs a batch in chunks of up to that many rows,
 * each ending where a prompt does when one ends inside it (with a shared prefix: a prompt's rows
 * in as few chunks as fit, its prefix computed once in each). Rows
 * are independent in forward: the log-probs are the whole batch's, bit for bit (tests/test_dense.c
 * frozen_forward_in_chunks_matches_training_forward). Not for a mixture of experts (a plugin with
 * aux_loss or expert_load): its expert matmuls see the tokens of all rows, and their row count
 * would change the bits, so it keeps the whole micro-batch's block (tests/test_moe.c). */
#define GRPO_FWD_BUDGET (64ull << 20)
#define GRPO_FWD_MIN_TOKENS 256
int grpo_model_reserve_acts(grpo_model *m, int32_t B, int32_t T, grpo_error *err);
/* Makes a KV cache of R rows by S slots (zeroed) and scratch for a prefill of (R, P) prompts. */
int grpo_model_reserve_kv(grpo_model *m, int32_t R, int32_t S, int32_t P, grpo_error *err);
/* Positions per page of a paged cache: the cpu decode attention's key tile (16 keys,
 * kernels/cpu/attend.c), so a row whose first real slot is on a page boundary reads each page
 * as one tile (the cuda decode's tiles of 32 keys read two or three pages each). */
#define GRPO_KV_PAGE 16
/* The same cache paged in pages of `page` positions when the pack (kv_page_floats) and the
 * backend (attention_decode_paged) can run on one, else grpo_model_reserve_kv's; rows start
 * without pages. grpo_model_kv_paged tells which it made. */
int grpo_model_reserve_kv_paged(grpo_model *m, int32_t R, int32_t S, int32_t P, int32_t page,
                                grpo_error *err);
/* Positions per page of the reserved cache; 0: not paged. */
int32_t grpo_model_kv_paged(const grpo_model *m);
/* Frees a paged cache's pool (the scratch stays reserved until another pass takes the work
 * memory); a no-op on an unpaged cache. */
void grpo_model_release_kv(grpo_model *m);

/* From now on m's passes work in with's work memory (its own freed), for models whose passes
 * never overlap: a pass reserves (acts or kv) right before it runs, and a training forward is
 * followed by its backward before another sharing model reserves. A pass whose memory another
 * model took in between fails (work_memory.h). Both on the same backend. */
int grpo_model_share_work(grpo_model *m, grpo_model *with, grpo_error *err);

/* Forward / backward of one micro-batch through the reserved activations (see grpo/model.h);
 * a frozen model's forward runs in row chunks (grpo_model_reserve_acts). */
int grpo_model_forward(grpo_model *m, const grpo_batch *b, float *logp, float *entropy,
                       float scale, grpo_error *err);
int grpo_model_backward(grpo_model *m, const grpo_batch *b, const float *dlogp, float scale,
                        grpo_error *err);
/* backward() of a loss that also depends on the entropy forward() wrote: dentropy (B,T) d loss /
 * d entropy and entropy (B,T), both backend memory. GRPO_ERR_UNSUPPORTED naming the pack when it
 * lacks backward_entropy (built before ABI 1.4): grpo_model_has_entropy_backward asks first. */
int grpo_model_has_entropy_backward(const grpo_model *m);
int grpo_model_backward_entropy(grpo_model *m, const grpo_batch *b, const float *dlogp,
                                const float *dentropy, const float *entropy, float scale,
                                grpo_error *err);
void grpo_model_zero_grad(grpo_model *m);
/* *relaid = 1 when the pack keeps parameter i in another layout than its file's (the relayout
 * slot moves its elements, e.g. InternLM2's packed wqkv); probed on a copy. */
int grpo_model_param_relaid(grpo_model *m, uint32_t i, int *relaid, grpo_error *err);
/* LoRA adapters (grpo/model.h set_lora, ABI 1.4); GRPO_ERR_UNSUPPORTED naming the pack when it
 * has none. enabled = 0: the base alone. */
int grpo_model_set_lora(grpo_model *m, const grpo_lora_adapter *adapters, uint32_t n,
                        int32_t enabled, grpo_error *err);
/* LoRA rows (grpo/model.h set_lora_rows, ABI 1.11): prefill/decode rows n and up run the base
 * (n < 0: every row adapted); GRPO_ERR_UNSUPPORTED naming the pack when it cannot (no slot, or
 * it refuses); n < 0 on a pack without the slot is a no-op. */
int grpo_model_set_lora_rows(grpo_model *m, int32_t n, grpo_error *err);
/* Activation recomputation (grpo/model.h set_gradient_checkpointing, ABI 1.5), before or
 * between steps: the activation block is sized again at the next reserve. on = 1 on a pack
 * without the slot is GRPO_ERR_UNSUPPORTED naming it; on = 0 there is a no-op. */
int grpo_model_set_gradient_checkpointing(grpo_model *m, int on, grpo_error *err);
/* Bytes of the activation block per token of a 1024-token training row, for the setting in
 * force (gradient checkpointing keeps less): the pack's activation_floats(1, 1024) * 4 / 1024. */
double grpo_model_activation_bytes_per_token(const grpo_model *m);
/* Rollout keep (grpo/model.h keep_rollout, 1.10): whether the pack has it; arms it
 * (keep NULL: off, a no-op without the slot). */
int grpo_model_can_keep_rollout(const grpo_model *m);
int grpo_model_keep_rollout(grpo_model *m, const grpo_rollout_keep *keep, grpo_error *err);
/* A keep for the training batch of B rows (prompts of P columns, BP of them, row b's prompt
 * prefix_of[b], completions up to Tc) into *k: m->keep_block grown to its activations (no
 * row_of: the sampler sets it). A forward of a batch with grpo_batch.kept = 1 then reads
 * keep_block, and the backward after it too. */
int grpo_model_keep_for(grpo_model *m, int32_t B, int32_t P, int32_t Tc, int32_t BP,
                        const int32_t *prefix_of, grpo_rollout_keep *k, grpo_error *err);
/* Shared prefixes (grpo/model.h set_shared_prefix, ABI 1.6): the next forward may compute the
 * first P columns of equal consecutive rows once. A pack without the slot computes every row in
 * full: a no-op (GRPO_OK), as is P = 0 there. */
int grpo_model_set_shared_prefix(grpo_model *m, int32_t P, grpo_error *err);

/* Prefill / decode through the reserved cache and scratch (see grpo/model.h). */
int grpo_model_prefill(grpo_model *m, const grpo_batch *prompt, float *logits, grpo_error *err);
int grpo_model_decode(grpo_model *m, int32_t R, const int32_t *tokens, const int32_t *pos,
                      const int32_t *cache_mask, const int32_t *len, float *logits,
                      grpo_error *err);
/* Copies slots [0,n) of cache row src into row dst (every layer, keys and values): a prompt's
 * fan-out to its G rows and the move of the last live row into a finished one. A row copied onto
 * itself is left as it is. Errors name the rows when they lie outside the reserved cache. */
int grpo_model_kv_copy_row(grpo_model *m, int32_t dst, int32_t src, int32_t n, grpo_error *err);
/* Paged: prefill() gives its rows fresh pages; decode() gives each row's written block a page
 * of its own first (copy-on-write). kv_copy_row makes dst share src's pages of slots [0,n);
 * kv_move_row gives dst src's pages (src left empty); kv_drop_row frees row r's. Unpaged:
 * kv_move_row is kv_copy_row and kv_drop_row does nothing. */
int grpo_model_kv_move_row(grpo_model *m, int32_t dst, int32_t src, int32_t n, grpo_error *err);
void grpo_model_kv_drop_row(grpo_model *m, int32_t r);
/* Pages of a paged cache in use at most since it was reserved, and the bytes of one page; 0 and
 * 0 when not paged. */
int32_t grpo_model_kv_pages_max(const grpo_model *m, uint64_t *page_bytes);

/* Saves a Hugging Face directory through grpo_hf_save(): dir/model.safetensors (F32, every
 * non-tied parameter under its HF name), dir/config.json (the loaded text with its dtype set to
 * float32) and the tokenizer files the model was loaded with (read at open, so the directory it
 * came from may be gone by now). Each file is replaced atomically; dir is created if needed. */
int grpo_model_save(const grpo_model *m, const char *dir, grpo_error *err);

/* Refuses ids outside [0, vocab) before they reach the embedding: the error names what
 * (e.g. "prompt"), the index and the id. n ids in host memory. */
int grpo_model_check_ids(const grpo_model *m, const int32_t *ids, size_t n, const char *what,
                         grpo_error *err);

/* Vocabulary size (the first dimension of lm_head.weight, model.embed_tokens.weight or
 * InternLM2's model.tok_embeddings.weight), -1 when the model has none of them. */
int32_t grpo_model_vocab(const grpo_model *m);

/* config.json's eos_token_id (the first one when it is a list), or -1 when it has none. */
int32_t grpo_model_eos(const grpo_model *m);

#endif
