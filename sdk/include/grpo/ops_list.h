/*
 * grpo/ops_list.h — every op of the kernel op table (grpo_ops, grpo/ops.h), defined once.
 *
 * GRPO_OPS_LIST is an X-macro: ops.h expands it into the members of grpo_ops, and each backend
 * (kernels/) expands it into its prototypes (cpu_NAME, cuda_NAME) and into its table, so an op
 * is spelled here, in its kernels and at its callers only. Included by ops.h; a plugin includes
 * <grpo/grpo.h>.
 *
 * One entry per op, in ABI order (the order of the struct members: append-only, never
 * reorder), called as X(D, minor, optional, ret, name, params):
 *   D         whatever the expander passed as GRPO_OPS_LIST's second argument (a backend's
 *             prefix, say), handed through unchanged
 *   minor     the ABI minor (1.minor) that added the op
 *   optional  1: a backend may leave the op NULL, and a caller tests grpo_ops_supports(ops,
 *             name) before calling it (and falls back or refuses); 0: every backend has it
 *   ret       the return type
 *   name      the member's name
 *   params    the parameter list in parentheses, the backend context first
 *
 * Dimension letters, the accumulation rule and the threading rule: ops.h's header comment.
 */
#ifndef GRPO_OPS_LIST_H
#define GRPO_OPS_LIST_H

#include <stdint.h> /* the parameter types */

/* clang-format off */
#define GRPO_OPS_LIST(X, D)                                                                        \
    /* -- memory -- */                                                                             \
    /* alloc: zeroed, 64-byte aligned, NULL on failure; upload: host -> backend; download:         \
     * backend -> host; copy: backend -> backend; sync: wait for queued work (no-op on cpu) */     \
    X(D, 0, 0, void *, alloc, (void *ctx, uint64_t bytes))                                         \
    X(D, 0, 0, void, free, (void *ctx, void *ptr))                                                 \
    X(D, 0, 0, void, upload, (void *ctx, void *dst, const void *src, uint64_t bytes))              \
    X(D, 0, 0, void, download, (void *ctx, void *dst, const void *src, uint64_t bytes))            \
    X(D, 0, 0, void, copy, (void *ctx, void *dst, const void *src, uint64_t bytes))                \
    X(D, 0, 0, void, zero, (void *ctx, void *dst, uint64_t bytes))                                 \
    X(D, 0, 0, void, sync, (void *ctx))                                                            \
                                                                                                   \
    /* -- embedding: out (N,C) = wte[ids[n]] ; backward dwte += -- */                              \
    X(D, 0, 0, void, embedding_forward,                                                            \
      (void *ctx, float *out, const int32_t *ids, const float *wte, int32_t N, int32_t C))         \
    X(D, 0, 0, void, embedding_backward,                                                           \
      (void *ctx, float *dwte, const float *dout, const int32_t *ids, int32_t N, int32_t C))       \
                                                                                                   \
    /* -- matmul: out (N,OC) = inp (N,IC) @ w (OC,IC)^T + bias (OC) (bias may be NULL) -- */       \
    X(D, 0, 0, void, matmul_forward,                                                               \
      (void *ctx, float *out, const float *inp, const float *w, const float *bias, int32_t N,      \
       int32_t IC, int32_t OC))                                                                    \
    X(D, 0, 0, void, matmul_backward,                                                              \
      (void *ctx, float *dinp, float *dw, float *dbias, const float *dout, const float *inp,       \
       const float *w, int32_t N, int32_t IC, int32_t OC))                                         \
                                                                                                   \
    /* -- RMSNorm over the last dim: out (N,C) = inp * rstd * w; rstd (N) saved for backward -- */ \
    X(D, 0, 0, void, rmsnorm_forward,                                                              \
      (void *ctx, float *out, float *rstd, const float *inp, const float *w, int32_t N,            \
       int32_t C, float eps))                                                                      \
    X(D, 0, 0, void, rmsnorm_backward,                                                             \
      (void *ctx, float *dinp, float *dw, const float *dout, const float *inp, const float *w,     \
       const float *rstd, int32_t N, int32_t C))                                                   \
                                                                                                   \
    /* -- RoPE, split-halves (rotate_half) layout, on x (N,NH,HD) at positions pos (N);            \
     *    out may equal inp. Backward applies the inverse rotation. -- */                          \
    X(D, 0, 0, void, rope_forward,                                                                 \
      (void *ctx, float *out, const float *inp, const int32_t *pos, int32_t N, int32_t NH,         \
       int32_t HD, float theta))                                                                   \
    X(D, 0, 0, void, rope_backward,                                                                \
      (void *ctx, float *dinp, const float *dout, const int32_t *pos, int32_t N, int32_t NH,       \
       int32_t HD, float theta))                                                                   \
                                                                                                   \
    /* -- causal GQA attention with a padding mask.                                                \
     *    q (B,T,NH,HD), k/v (B,T,NKV,HD), mask (B,T): 1 = real token, 0 = padding (never          \
     *    attended to; a padding query gets zeros). out (B,T,NH,HD); lse (B,NH,T) saved for        \
     *    backward, which recomputes the probabilities instead of storing (B,NH,T,T).              \
     *    scale = 1/sqrt(HD).                                                                      \
     *    Since 1.7 (packed rows) a mask value > 0 is a segment id: query t of row b attends to    \
     *    keys s <= t with mask[b,s] = mask[b,t], each segment as if it were a row of its own      \
     *    (positions and targets are the caller's). 0/1 masks: one segment per row, as before.     \
     *    Since 1.8 (packed rows sharing a prompt) an id c >= 1 << GRPO_ATTN_CHILD_SHIFT (ops.h)   \
     *    is a child of the parent segment p = c >> GRPO_ATTN_CHILD_SHIFT (p in [1, 2^15)): a      \
     *    child's query t attends to every key of p (the last run of id p before the child; a      \
     *    parent is contiguous and precedes its children), then to its own keys s <= t, in one     \
     *    softmax: the result of the row [parent | child] alone; a parent's queries see only the   \
     *    parent. Backward: a parent's dk/dv sum its own queries' and its children's gradients.    \
     *    A child without such a parent is a plain segment.                                        \
     *    The cpu backend implements segments; a backend that does not must be given 0/1. -- */    \
    X(D, 0, 0, void, attention_forward,                                                            \
      (void *ctx, float *out, float *lse, const float *q, const float *k, const float *v,          \
       const int32_t *mask, int32_t B, int32_t T, int32_t NH, int32_t NKV, int32_t HD))            \
    X(D, 0, 0, void, attention_backward,                                                           \
      (void *ctx, float *dq, float *dk, float *dv, const float *dout, const float *out,            \
       const float *lse, const float *q, const float *k, const float *v, const int32_t *mask,      \
       int32_t B, int32_t T, int32_t NH, int32_t NKV, int32_t HD))                                 \
    /* -- one decode step for R rows against a KV cache.                                           \
     *    q (R,NH,HD); kcache/vcache (R,S,NKV,HD) already holding this step's k/v at len[r]-1;     \
     *    cache_mask (R,S): 1 = real; positions >= len[r] are ignored. out (R,NH,HD). -- */        \
    X(D, 0, 0, void, attention_decode,                                                             \
      (void *ctx, float *out, const float *q, const float *kcache, const float *vcache,            \
       const int32_t *cache_mask, const int32_t *len, int32_t R, int32_t S, int32_t NH,            \
       int32_t NKV, int32_t HD))                                                                   \
                                                                                                   \
    /* -- SwiGLU: out (N,I) = silu(gate) * up -- */                                                \
    X(D, 0, 0, void, swiglu_forward,                                                               \
      (void *ctx, float *out, const float *gate, const float *up, int32_t N, int32_t I))           \
    X(D, 0, 0, void, swiglu_backward,                                                              \
      (void *ctx, float *dgate, float *dup, const float *dout, const float *gate,                  \
       const float *up, int32_t N, int32_t I))                                                     \
                                                                                                   \
    /* -- residual: out = a + b (n floats); accumulate: y += x (used to sum activation             \
     *    grads) -- */                                                                             \
    X(D, 0, 0, void, residual_forward,                                                             \
      (void *ctx, float *out, const float *a, const float *b, uint64_t n))                         \
    X(D, 0, 0, void, accumulate, (void *ctx, float *y, const float *x, uint64_t n))                \
                                                                                                   \
    /* -- fused head: logits = scale * hidden (N,C) @ w (V,C)^T computed chunk by chunk (never     \
     *    the full (N,V)); logp (N) = log softmax(logits)[targets[n]]; lse (N) saved for           \
     *    backward; entropy (N) of the softmax (may be NULL). Rows with targets[n] < 0 are         \
     *    skipped: logp, lse, entropy and dhidden are 0 there.                                     \
     *    Backward: dhidden = d/dhidden of sum(dlogp * logp) ; dw +=. -- */                        \
    X(D, 0, 0, void, head_forward,                                                                 \
      (void *ctx, float *logp, float *lse, float *entropy, const float *hidden, const float *w,    \
       const int32_t *targets, int32_t N, int32_t C, int32_t V, float scale))                      \
    X(D, 0, 0, void, head_backward,                                                                \
      (void *ctx, float *dhidden, float *dw, const float *dlogp, const float *hidden,              \
       const float *w, const int32_t *targets, const float *lse, int32_t N, int32_t C,             \
       int32_t V, float scale))                                                                    \
                                                                                                   \
    /* -- optimizer: AdamW with decoupled weight decay on n floats, step t >= 1                    \
     *    (bias-corrected). Hyperparameters are doubles so that 1 - beta and the bias              \
     *    corrections are formed from the configured values, as PyTorch forms them from Python     \
     *    floats. -- */                                                                            \
    X(D, 0, 0, void, adamw,                                                                        \
      (void *ctx, float *param, const float *grad, float *m, float *v, uint64_t n, double lr,      \
       double beta1, double beta2, double eps, double weight_decay, int32_t t))                    \
    /* -- sum of squares of n floats (for clip-by-global-norm), returned to the host -- */         \
    X(D, 0, 0, double, sumsq, (void *ctx, const float *x, uint64_t n))                             \
    /* -- x *= s -- */                                                                             \
    X(D, 0, 0, void, scale, (void *ctx, float *x, float s, uint64_t n))                            \
                                                                                                   \
    /* -- 1.0, added while 1.0 was provisional (optional: a plugin that needs them tests           \
     *    grpo_ops_supports, as the shared-prefix pass does).                                      \
     *    Row routing (mixture of experts): M rows moved between a (N,C) tensor and a (M,C)        \
     *    one by an index idx (M), each idx[m] in [0,N).                                           \
     *    gather_rows:  out (M,C) = inp[idx[m]] (written).                                         \
     *    scatter_add_rows: out (N,C)[idx[m]] += w[m] * inp (M,C)[m]; w (M) may be NULL            \
     *      (weight 1); idx may repeat (rows are added in order of m, so the result does not       \
     *      depend on the thread count).                                                           \
     *    scatter_add_rows_backward: the gradient of scatter_add_rows: dinp (M,C) =                \
     *      w[m] * dout[idx[m]] (written; w NULL: weight 1), dw (M) = dot(dout[idx[m]], inp[m])    \
     *      (written); either output may be NULL. -- */                                            \
    X(D, 0, 1, void, gather_rows,                                                                  \
      (void *ctx, float *out, const float *inp, const int32_t *idx, int32_t M, int32_t C))         \
    X(D, 0, 1, void, scatter_add_rows,                                                             \
      (void *ctx, float *out, const float *inp, const int32_t *idx, const float *w, int32_t M,     \
       int32_t C))                                                                                 \
    X(D, 0, 1, void, scatter_add_rows_backward,                                                    \
      (void *ctx, float *dinp, float *dw, const float *dout, const float *inp,                     \
       const int32_t *idx, const float *w, int32_t M, int32_t C))                                  \
                                                                                                   \
    /* -- 1.4: head_backward with an entropy term in the loss (the entropy bonus). With z the      \
     *    scaled logits of a row, p = softmax(z), H its entropy:                                   \
     *      d H / d z_j = -p_j (z_j - lse + H)        (lse and H as head_forward wrote them)       \
     *    dhidden, dw as head_backward, of sum(dlogp * logp + dentropy * entropy); dentropy (N)    \
     *    and entropy (N) are read at rows with targets[n] >= 0. dentropy = 0 everywhere gives     \
     *    head_backward's result. A model tests grpo_ops_supports. -- */                           \
    X(D, 4, 1, void, head_backward_entropy,                                                        \
      (void *ctx, float *dhidden, float *dw, const float *dlogp, const float *dentropy,            \
       const float *entropy, const float *hidden, const float *w, const int32_t *targets,          \
       const float *lse, int32_t N, int32_t C, int32_t V, float scale))                            \
                                                                                                   \
    /* -- 1.5: weights held in another dtype (GRPO_DTYPE_* in ops.h), read as fp32 by the          \
     *    compute (bf16: a frozen LoRA base, the rollout's copy of the policy). An op's result     \
     *    for a weight of wtype is the fp32 op's result for the weight widened to fp32             \
     *    (grpo_bf16_to_f32): the sums are the same, their order may differ. Such a weight is      \
     *    frozen: these ops form no gradient for it (no dw), only the activation gradient that     \
     *    passes through it. A model tests grpo_ops_supports before binding a weight that is       \
     *    not fp32.                                                                                \
     *    convert: dst (n of dst_type) = src (n of src_type), fp32 -> bf16 rounding to nearest     \
     *      even (NaN stays NaN), bf16 -> fp32 exact; both in backend memory, may not overlap.     \
     *    matmul_forward_w: out (N,OC) = inp (N,IC) @ w (OC,IC of wtype)^T + bias (OC, fp32).      \
     *    matmul_backward_w: dinp (N,IC) = dout (N,OC) @ w (written).                              \
     *    embedding_forward_w: out (N,C) = wte (V,C of wtype)[ids].                                \
     *    head_forward_w, head_backward_w: head_forward and head_backward_entropy (dentropy and    \
     *      entropy may be NULL: no entropy term) for a head w (V,C) of wtype; dhidden             \
     *      only. -- */                                                                            \
    X(D, 5, 1, void, convert,                                                                      \
      (void *ctx, void *dst, int32_t dst_type, const void *src, int32_t src_type, uint64_t n))     \
    X(D, 5, 1, void, matmul_forward_w,                                                             \
      (void *ctx, float *out, const float *inp, const void *w, int32_t wtype, const float *bias,   \
       int32_t N, int32_t IC, int32_t OC))                                                         \
    X(D, 5, 1, void, matmul_backward_w,                                                            \
      (void *ctx, float *dinp, const float *dout, const void *w, int32_t wtype, int32_t N,         \
       int32_t IC, int32_t OC))                                                                    \
    X(D, 5, 1, void, embedding_forward_w,                                                          \
      (void *ctx, float *out, const int32_t *ids, const void *wte, int32_t wtype, int32_t N,       \
       int32_t C))                                                                                 \
    X(D, 5, 1, void, head_forward_w,                                                               \
      (void *ctx, float *logp, float *lse, float *entropy, const float *hidden, const void *w,     \
       int32_t wtype, const int32_t *targets, int32_t N, int32_t C, int32_t V, float scale))       \
    X(D, 5, 1, void, head_backward_w,                                                              \
      (void *ctx, float *dhidden, const float *dlogp, const float *dentropy,                       \
       const float *entropy, const float *hidden, const void *w, int32_t wtype,                    \
       const int32_t *targets, const float *lse, int32_t N, int32_t C, int32_t V, float scale))    \
    /* -- 1.5: dropout with a mask made from (seed, element index) alone, so a backward pass       \
     *    regenerates it instead of storing it: out[i] = inp[i] / (1 - p) where                    \
     *    grpo_dropout_keeps(seed, i, p), else 0 (out may equal inp). The gradient of the op is    \
     *    the op itself applied to dout with the same seed and p. (LoRA's lora_dropout.) -- */     \
    X(D, 5, 1, void, dropout,                                                                      \
      (void *ctx, float *out, const float *inp, uint64_t n, float p, uint64_t seed))               \
                                                                                                   \
    /* -- 1.6: shared-prefix attention (GRPO's G completions of one prompt: the prompt's           \
     *    layers run once, grpo_batch.shared_prefix). attention_forward for B rows of T columns    \
     *    whose queries also see, before their own keys, the keys of one of BP prefixes of P       \
     *    columns:                                                                                 \
     *      q (B,T,NH,HD), k/v (B,T,NKV,HD), mask (B,T) as in attention_forward;                   \
     *      kp/vp (BP,P,NKV,HD), pmask (BP,P) the prefixes' keys, values and mask (a prefix key    \
     *      with pmask 0 is never attended to); prefix_of (B), each in [0,BP): row b's prefix.     \
     *    Query t of row b (mask 1) attends to every prefix key of prefix_of[b] with pmask 1       \
     *    and to its own keys s <= t with mask 1, in one softmax: the result is                    \
     *    attention_forward's on the row [prefix | row] of P+T columns, at columns P..P+T-1.       \
     *    out (B,T,NH,HD), lse (B,NH,T) (padding queries: 0).                                      \
     *    Backward: dq (B,T,NH,HD), dk, dv (B,T,NKV,HD) WRITTEN; dkp, dvp (BP,P,NKV,HD)            \
     *    ACCUMULATED (+=, summed over the rows of each prefix): the exception to the rule         \
     *    above, because a prefix's keys also get the gradient of the prefix's own                 \
     *    attention_backward, which writes them first. Any gradient may be NULL. A model tests     \
     *    grpo_ops_supports, and runs every row in full without them. -- */                        \
    X(D, 6, 1, void, prefix_attention_forward,                                                     \
      (void *ctx, float *out, float *lse, const float *q, const float *k, const float *v,          \
       const int32_t *mask, const float *kp, const float *vp, const int32_t *pmask,                \
       const int32_t *prefix_of, int32_t B, int32_t T, int32_t BP, int32_t P, int32_t NH,          \
       int32_t NKV, int32_t HD))                                                                   \
    X(D, 6, 1, void, prefix_attention_backward,                                                    \
      (void *ctx, float *dq, float *dk, float *dv, float *dkp, float *dvp, const float *dout,      \
       const float *out, const float *lse, const float *q, const float *k, const float *v,         \
       const int32_t *mask, const float *kp, const float *vp, const int32_t *pmask,                \
       const int32_t *prefix_of, int32_t B, int32_t T, int32_t BP, int32_t P, int32_t NH,          \
       int32_t NKV, int32_t HD))                                                                   \
    /* -- 1.6: sampling on the device (optional: NULL on cpu, where the host draws; a host         \
     *    tests grpo_ops_supports). Draws one token for each of R rows of logits (R,V) as          \
     *    Hugging Face's generate does, so only R ids (and log-probs) come back per decode         \
     *    step. Every buffer is in backend memory: ids, logp, plogp (R) written; u (R); hist       \
     *    (R,H) and n_hist (R), each n_hist[r] in [0,H]. The processors run in transformers'       \
     *    order on a copy of the row (logits is not written):                                      \
     *      repetition_penalty != 1: each distinct token of the row's history in [0,V) (others     \
     *        skipped): x < 0 ? x * penalty : x / penalty (the history is hist[r*H ..              \
     *        r*H + n_hist[r]));                                                                   \
     *      temperature <= 0: greedy, ids[r] = argmax (lowest id on ties), nothing else            \
     *        applies;                                                                             \
     *      temperature != 1: x / temperature;  top_k in (0,V): x < the k-th largest -> -inf       \
     *        (ties at the threshold kept);  top_p < 1: in ascending (value, id) order the         \
     *        tail whose cumulative probability is <= 1 - top_p -> -inf, the most likely token     \
     *        kept;                                                                                \
     *      min_p > 0: probability < min_p * the top probability -> -inf;                          \
     *    then ids[r] = the first token in id order whose cumulative probability exceeds u[r]      \
     *    (u (R) in [0,1), drawn by the host; ignored when greedy; the last token of nonzero       \
     *    probability when rounding leaves the total below u). Softmaxes are exp(x - max) with     \
     *    the sums in double. logp[r] = log softmax(processed row)[ids[r]]; plogp[r] (plogp may    \
     *    be NULL) = log softmax(logits * (1 / temperature))[ids[r]] of the raw row                \
     *    (temperature <= 0: 1). Then, when n_hist[r] < H, hist[r*H + n_hist[r]] = ids[r]: a       \
     *    caller keeping the history in backend memory appends drawn tokens without an upload.     \
     *    The reference is the host's grpo_sample_row (core/host/sampling.h) with the same u:      \
     *    ids equal it except where u lies within the rounding of the sums (whose order may        \
     *    differ) of a cumulative boundary; logp and plogp within an ulp or two. -- */             \
    X(D, 6, 1, void, sample_rows,                                                                  \
      (void *ctx, int32_t *ids, float *logp, float *plogp, const float *logits, const float *u,    \
       int32_t *hist, const int32_t *n_hist, int32_t H, int32_t R, int32_t V,                      \
       float temperature, int32_t top_k, float top_p, float min_p, float repetition_penalty))      \
    /* -- 1.7: a drawn token's log-prob by the head's own reduction (optional: without it the      \
     *    host computes it). logp[r] = log softmax(scale * logits[rows[r]])[ids[r]] for r < R:     \
     *    logits (X,V) with rows (R) in [0,X), ids (R) in [0,V), logp (R) written, every buffer    \
     *    in backend memory. The sums are head_forward's, in its order: on a backend whose         \
     *    products do not depend on the batch (cpu) the sampler's log-prob of a token is then      \
     *    the training forward's, bit for bit, when logits are the decode's (R,V) product and      \
     *    scale the forward's. -- */                                                               \
    X(D, 7, 1, void, logits_logp,                                                                  \
      (void *ctx, float *logp, const float *logits, const int32_t *rows, const int32_t *ids,       \
       int32_t R, int32_t V, float scale))                                                         \
    /* -- 1.9: attention_decode against a paged KV cache (grpo_kv_cache.page > 0). Slot s of       \
     *    row r is position s % page of page id = table[r * nblk + s / page] (nblk =               \
     *    ceil(S/page)); its keys (NKV,HD) are at kpool + id * pstride + (s % page) * NKV * HD,    \
     *    its values at the same offset from vpool (a pool of pages pstride floats apart, each     \
     *    holding its (page,NKV,HD) keys and values). q (R,NH,HD), cache_mask (R,S) and len (R)    \
     *    as in attention_decode; table (R,nblk) in backend memory. Only the blocks from the       \
     *    row's first real slot to slot len[r] - 1 are read (the others' ids may be -1).           \
     *    out (R,NH,HD): attention_decode's on the same cache laid out unpaged (cpu, cuda: the     \
     *    same bits: the same keys in the same order, every sum the unpaged op's). Optional: a     \
     *    host tests grpo_ops_supports and keeps the unpaged cache without it. -- */               \
    X(D, 9, 1, void, attention_decode_paged,                                                       \
      (void *ctx, float *out, const float *q, const float *kpool, const float *vpool,              \
       int64_t pstride, const int32_t *table, int32_t nblk, int32_t page,                          \
       const int32_t *cache_mask, const int32_t *len, int32_t R, int32_t S, int32_t NH,            \
       int32_t NKV, int32_t HD))                                                                   \
    /* -- 1.12: parallel_for: host work between ops on the backend's threads (the sampler's        \
     *    draws, one a row). Calls fn(arg, i, part) once for every i in [0, n) and returns when    \
     *    every call has returned; part < min(n, parts), parts the value it returns (the same      \
     *    for every call on one backend: its threads); calls with the same part never overlap      \
     *    (a buffer per part). Each i must compute the same whichever part runs it. work:          \
     *    scalar operations per i, for the backend's rule of when a fork pays (small work runs     \
     *    on the caller as part 0). n = 0: only the parts. fn and arg are host memory; fn may      \
     *    call the memory ops (copy, upload, download, zero), no other op. Optional: without it    \
     *    the caller loops itself (the sampler's draws; a pack's copies of kept rows). -- */       \
    X(D, 12, 1, int32_t, parallel_for,                                                             \
      (void *ctx, int64_t n, double work, void (*fn)(void *arg, int64_t i, int32_t part),          \
       void *arg))
/* clang-format on */

#endif /* GRPO_OPS_LIST_H */
