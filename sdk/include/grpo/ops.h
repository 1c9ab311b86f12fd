/*
 * grpo/ops.h — the kernel op table every model uses, frozen as ABI 1.x (since 1.3): it grows only
 * at its end, behind struct_size, and comments mark the minor version that added each group, so
 * a plugin tests GRPO_HAS_FIELD(ops, grpo_ops, op) and non-NULL before an op added after 1.0.
 *
 * One table per backend (cpu, cuda), with an opaque context, in the manner of ggml's backends.
 * All float buffers are fp32 and live in the backend's memory (host memory for cpu): a model plugin
 * gets memory and ops from the host and never links a backend itself.
 *
 * Dimension letters: N tokens (= B*T), B rows, T time, C channels, I intermediate (MLP), V vocab,
 * NH query heads, NKV key/value heads, HD head dim, R decode rows, S cache length (max positions).
 * Linear weights use PyTorch's layout: w (OC, IC), y = x @ w^T + b.
 *
 * Accumulation rule: parameter gradients (dw, dbias, dwte) are ACCUMULATED (+=); activation
 * gradients (dinp, dq, ...) are WRITTEN (=). A gradient pointer may be NULL: that gradient is
 * skipped. Calls on one context are issued from one thread; a backend parallelises inside.
 */
#ifndef GRPO_OPS_H
#define GRPO_OPS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct grpo_ops {
    uint32_t struct_size;
    /* -- 1.0 -- */
    const char *name; /* "cpu", "cuda" */
    void *ctx;        /* backend context, passed back as the first argument */

    /* -- memory -- */
    void *(*alloc)(void *ctx, uint64_t bytes); /* zeroed, 64-byte aligned; NULL on failure */
    void (*free)(void *ctx, void *ptr);
    void (*upload)(void *ctx, void *dst, const void *src, uint64_t bytes);   /* host -> backend */
    void (*download)(void *ctx, void *dst, const void *src, uint64_t bytes); /* backend -> host */
    void (*copy)(void *ctx, void *dst, const void *src, uint64_t bytes);     /* backend -> backend */
    void (*zero)(void *ctx, void *dst, uint64_t bytes);
    void (*sync)(void *ctx); /* wait for queued work (no-op on cpu) */

    /* -- embedding: out (N,C) = wte[ids[n]] ; backward dwte += -- */
    void (*embedding_forward)(void *ctx, float *out, const int32_t *ids, const float *wte,
                              int32_t N, int32_t C);
    void (*embedding_backward)(void *ctx, float *dwte, const float *dout, const int32_t *ids,
                               int32_t N, int32_t C);

    /* -- matmul: out (N,OC) = inp (N,IC) @ w (OC,IC)^T + bias (OC) (bias may be NULL) -- */
    void (*matmul_forward)(void *ctx, float *out, const float *inp, const float *w,
                           const float *bias, int32_t N, int32_t IC, int32_t OC);
    void (*matmul_backward)(void *ctx, float *dinp, float *dw, float *dbias, const float *dout,
                            const float *inp, const float *w, int32_t N, int32_t IC, int32_t OC);

    /* -- RMSNorm over the last dim: out (N,C) = inp * rstd * w ; rstd (N) saved for backward -- */
    void (*rmsnorm_forward)(void *ctx, float *out, float *rstd, const float *inp, const float *w,
                            int32_t N, int32_t C, float eps);
    void (*rmsnorm_backward)(void *ctx, float *dinp, float *dw, const float *dout,
                             const float *inp, const float *w, const float *rstd, int32_t N,
                             int32_t C);

    /* -- RoPE, split-halves (rotate_half) layout, on x (N,NH,HD) at positions pos (N);
     *    out may equal inp. Backward applies the inverse rotation. -- */
    void (*rope_forward)(void *ctx, float *out, const float *inp, const int32_t *pos, int32_t N,
                         int32_t NH, int32_t HD, float theta);
    void (*rope_backward)(void *ctx, float *dinp, const float *dout, const int32_t *pos,
                          int32_t N, int32_t NH, int32_t HD, float theta);

    /* -- causal GQA attention with a padding mask.
     *    q (B,T,NH,HD), k/v (B,T,NKV,HD), mask (B,T): 1 = real token, 0 = padding (never attended
     *    to; a padding query gets zeros). out (B,T,NH,HD); lse (B,NH,T) saved for backward,
     *    which recomputes the probabilities instead of storing (B,NH,T,T). scale = 1/sqrt(HD). -- */
    void (*attention_forward)(void *ctx, float *out, float *lse, const float *q, const float *k,
                              const float *v, const int32_t *mask, int32_t B, int32_t T,
                              int32_t NH, int32_t NKV, int32_t HD);
    void (*attention_backward)(void *ctx, float *dq, float *dk, float *dv, const float *dout,
                               const float *out, const float *lse, const float *q,
                               const float *k, const float *v, const int32_t *mask, int32_t B,
                               int32_t T, int32_t NH, int32_t NKV, int32_t HD);
    /* -- one decode step for R rows against a KV cache.
     *    q (R,NH,HD); kcache/vcache (R,S,NKV,HD) already holding this step's k/v at len[r]-1;
     *    cache_mask (R,S): 1 = real; positions >= len[r] are ignored. out (R,NH,HD). -- */
    void (*attention_decode)(void *ctx, float *out, const float *q, const float *kcache,
                             const float *vcache, const int32_t *cache_mask, const int32_t *len,
                             int32_t R, int32_t S, int32_t NH, int32_t NKV, int32_t HD);

    /* -- SwiGLU: out (N,I) = silu(gate) * up -- */
    void (*swiglu_forward)(void *ctx, float *out, const float *gate, const float *up, int32_t N,
                           int32_t I);
    void (*swiglu_backward)(void *ctx, float *dgate, float *dup, const float *dout,
                            const float *gate, const float *up, int32_t N, int32_t I);

    /* -- residual: out = a + b (n floats); accumulate: y += x (used to sum activation grads) -- */
    void (*residual_forward)(void *ctx, float *out, const float *a, const float *b, uint64_t n);
    void (*accumulate)(void *ctx, float *y, const float *x, uint64_t n);

    /* -- fused head: logits = scale * hidden (N,C) @ w (V,C)^T computed chunk by chunk (never
     *    the full (N,V)); logp (N) = log softmax(logits)[targets[n]]; lse (N) saved for
     *    backward; entropy (N) of the softmax (may be NULL). Rows with targets[n] < 0 are
     *    skipped: logp, lse, entropy and dhidden are 0 there.
     *    Backward: dhidden = d/dhidden of sum(dlogp * logp) ; dw +=. -- */
    void (*head_forward)(void *ctx, float *logp, float *lse, float *entropy, const float *hidden,
                         const float *w, const int32_t *targets, int32_t N, int32_t C,
                         int32_t V, float scale);
    void (*head_backward)(void *ctx, float *dhidden, float *dw, const float *dlogp,
                          const float *hidden, const float *w, const int32_t *targets,
                          const float *lse, int32_t N, int32_t C, int32_t V, float scale);

    /* -- optimizer: AdamW with decoupled weight decay on n floats, step t >= 1 (bias-corrected).
     *    Hyperparameters are doubles so that 1 - beta and the bias corrections are formed from
     *    the configured values, as PyTorch forms them from Python floats. -- */
    void (*adamw)(void *ctx, float *param, const float *grad, float *m, float *v, uint64_t n,
                  double lr, double beta1, double beta2, double eps, double weight_decay,
                  int32_t t);
    /* -- sum of squares of n floats (for clip-by-global-norm), returned to the host -- */
    double (*sumsq)(void *ctx, const float *x, uint64_t n);
    /* -- x *= s -- */
    void (*scale)(void *ctx, float *x, float s, uint64_t n);

    /* -- 1.0, added while 1.0 was provisional (a plugin that needs them tests GRPO_HAS_FIELD
     *    and non-NULL, as the moe pack does).
     *    Row routing (mixture of experts): M rows moved between a (N,C) tensor and a (M,C) one
     *    by an index idx (M), each idx[m] in [0,N).
     *    gather_rows:  out (M,C) = inp[idx[m]] (written).
     *    scatter_add_rows: out (N,C)[idx[m]] += w[m] * inp (M,C)[m]; w (M) may be NULL (weight
     *      1); idx may repeat (rows are added in order of m, so the result does not depend on
     *      the thread count).
     *    scatter_add_rows_backward: the gradient of scatter_add_rows: dinp (M,C) =
     *      w[m] * dout[idx[m]] (written; w NULL: weight 1), dw (M) = dot(dout[idx[m]], inp[m])
     *      (written); either output may be NULL. -- */
    void (*gather_rows)(void *ctx, float *out, const float *inp, const int32_t *idx, int32_t M,
                        int32_t C);
    void (*scatter_add_rows)(void *ctx, float *out, const float *inp, const int32_t *idx,
                             const float *w, int32_t M, int32_t C);
    void (*scatter_add_rows_backward)(void *ctx, float *dinp, float *dw, const float *dout,
                                      const float *inp, const int32_t *idx, const float *w,
                                      int32_t M, int32_t C);

    /* -- 1.4: head_backward with an entropy term in the loss (the entropy bonus). With z the
     *    scaled logits of a row, p = softmax(z), H its entropy:
     *      d H / d z_j = -p_j (z_j - lse + H)        (lse and H as head_forward wrote them)
     *    dhidden, dw as head_backward, of sum(dlogp * logp + dentropy * entropy); dentropy (N)
     *    and entropy (N) are read at rows with targets[n] >= 0. dentropy = 0 everywhere gives
     *    head_backward's result. A model tests GRPO_HAS_FIELD and non-NULL. -- */
    void (*head_backward_entropy)(void *ctx, float *dhidden, float *dw, const float *dlogp,
                                  const float *dentropy, const float *entropy,
                                  const float *hidden, const float *w, const int32_t *targets,
                                  const float *lse, int32_t N, int32_t C, int32_t V, float scale);

    /* -- 1.5: weights held in another dtype (GRPO_DTYPE_* below), read as fp32 by the compute
     *    (bf16: a frozen LoRA base, the rollout's copy of the policy). An op's result for a weight
     *    of wtype is the fp32 op's result for the weight widened to fp32 (grpo_bf16_to_f32): the
     *    sums are the same, their order may differ. Such a weight is frozen: these ops form no
     *    gradient for it (no dw), only the activation gradient that passes through it. A model
     *    tests GRPO_HAS_FIELD and non-NULL before binding a weight that is not fp32.
     *    convert: dst (n of dst_type) = src (n of src_type), fp32 -> bf16 rounding to nearest
     *      even (NaN stays NaN), bf16 -> fp32 exact; both in backend memory, may not overlap.
     *    matmul_forward_w: out (N,OC) = inp (N,IC) @ w (OC,IC of wtype)^T + bias (OC, fp32).
     *    matmul_backward_w: dinp (N,IC) = dout (N,OC) @ w (written).
     *    embedding_forward_w: out (N,C) = wte (V,C of wtype)[ids].
     *    head_forward_w, head_backward_w: head_forward and head_backward_entropy (dentropy and
     *      entropy may be NULL: no entropy term) for a head w (V,C) of wtype; dhidden only. -- */
    void (*convert)(void *ctx, void *dst, int32_t dst_type, const void *src, int32_t src_type,
                    uint64_t n);
    void (*matmul_forward_w)(void *ctx, float *out, const float *inp, const void *w,
                             int32_t wtype, const float *bias, int32_t N, int32_t IC, int32_t OC);
    void (*matmul_backward_w)(void *ctx, float *dinp, const float *dout, const void *w,
                              int32_t wtype, int32_t N, int32_t IC, int32_t OC);
    void (*embedding_forward_w)(void *ctx, float *out, const int32_t *ids, const void *wte,
                                int32_t wtype, int32_t N, int32_t C);
    void (*head_forward_w)(void *ctx, float *logp, float *lse, float *entropy,
                           const float *hidden, const void *w, int32_t wtype,
                           const int32_t *targets, int32_t N, int32_t C, int32_t V, float scale);
    void (*head_backward_w)(void *ctx, float *dhidden, const float *dlogp, const float *dentropy,
                            const float *entropy, const float *hidden, const void *w,
                            int32_t wtype, const int32_t *targets, const float *lse, int32_t N,
                            int32_t C, int32_t V, float scale);
    /* -- 1.5: dropout with a mask made from (seed, element index) alone, so a backward pass
     *    regenerates it instead of storing it: out[i] = inp[i] / (1 - p) where
     *    grpo_dropout_keeps(seed, i, p), else 0 (out may equal inp). The gradient of the op is
     *    the op itself applied to dout with the same seed and p. (LoRA's lora_dropout.) -- */
    void (*dropout)(void *ctx, float *out, const float *inp, uint64_t n, float p, uint64_t seed);

    /* -- 1.6: shared-prefix attention (GRPO's G completions of one prompt: the prompt's layers
     *    run once, grpo_batch.shared_prefix). attention_forward for B rows of T columns whose
     *    queries also see, before their own keys, the keys of one of BP prefixes of P columns:
     *      q (B,T,NH,HD), k/v (B,T,NKV,HD), mask (B,T) as in attention_forward;
     *      kp/vp (BP,P,NKV,HD), pmask (BP,P) the prefixes' keys, values and mask (a prefix key
     *      with pmask 0 is never attended to); prefix_of (B), each in [0,BP): row b's prefix.
     *    Query t of row b (mask 1) attends to every prefix key of prefix_of[b] with pmask 1 and
     *    to its own keys s <= t with mask 1, in one softmax: the result is attention_forward's
     *    on the row [prefix | row] of P+T columns, at columns P..P+T-1. out (B,T,NH,HD), lse
     *    (B,NH,T) (padding queries: 0).
     *    Backward: dq (B,T,NH,HD), dk, dv (B,T,NKV,HD) WRITTEN; dkp, dvp (BP,P,NKV,HD)
     *    ACCUMULATED (+=, summed over the rows of each prefix): the exception to the rule above,
     *    because a prefix's keys also get the gradient of the prefix's own attention_backward,
     *    which writes them first. Any gradient may be NULL. A model tests GRPO_HAS_FIELD and
     *    non-NULL, and runs every row in full without them. -- */
    void (*prefix_attention_forward)(void *ctx, float *out, float *lse, const float *q,
                                     const float *k, const float *v, const int32_t *mask,
                                     const float *kp, const float *vp, const int32_t *pmask,
                                     const int32_t *prefix_of, int32_t B, int32_t T, int32_t BP,
                                     int32_t P, int32_t NH, int32_t NKV, int32_t HD);
    void (*prefix_attention_backward)(void *ctx, float *dq, float *dk, float *dv, float *dkp,
                                      float *dvp, const float *dout, const float *out,
                                      const float *lse, const float *q, const float *k,
                                      const float *v, const int32_t *mask, const float *kp,
                                      const float *vp, const int32_t *pmask,
                                      const int32_t *prefix_of, int32_t B, int32_t T, int32_t BP,
                                      int32_t P, int32_t NH, int32_t NKV, int32_t HD);
    /* -- 1.6: sampling on the device (optional: NULL on cpu, where the host draws; a host tests
     *    GRPO_HAS_FIELD and non-NULL). Draws one token for each of R rows of logits (R,V) as
     *    Hugging Face's generate does, so only R ids (and log-probs) come back per decode step.
     *    Every buffer is in backend memory: ids, logp, plogp (R) written; u (R); hist (R,H)
     *    and n_hist (R), each n_hist[r] in [0,H]. The processors run in transformers' order on
     *    a copy of the row (logits is not written):
     *      repetition_penalty != 1: each distinct token of the row's history in [0,V) (others
     *        skipped): x < 0 ? x * penalty : x / penalty (the history is hist[r*H ..
     *        r*H + n_hist[r]));
     *      temperature <= 0: greedy, ids[r] = argmax (lowest id on ties), nothing else applies;
     *      temperature != 1: x / temperature;  top_k in (0,V): x < the k-th largest -> -inf
     *        (ties at the threshold kept);  top_p < 1: in ascending (value, id) order the tail
     *        whose cumulative probability is <= 1 - top_p -> -inf, the most likely token kept;
     *      min_p > 0: probability < min_p * the top probability -> -inf;
     *    then ids[r] = the first token in id order whose cumulative probability exceeds u[r]
     *    (u (R) in [0,1), drawn by the host; ignored when greedy; the last token of nonzero
     *    probability when rounding leaves the total below u). Softmaxes are exp(x - max) with
     *    the sums in double. logp[r] = log softmax(processed row)[ids[r]]; plogp[r] (plogp may
     *    be NULL) = log softmax(logits * (1 / temperature))[ids[r]] of the raw row (temperature
     *    <= 0: 1). Then, when n_hist[r] < H, hist[r*H + n_hist[r]] = ids[r]: a caller keeping
     *    the history in backend memory appends drawn tokens without an upload.
     *    The reference is the host's grpo_sample_row (core/host/sampling.h) with the same u:
     *    ids equal it except where u lies within the rounding of the sums (whose order may
     *    differ) of a cumulative boundary; logp and plogp within an ulp or two. -- */
    void (*sample_rows)(void *ctx, int32_t *ids, float *logp, float *plogp, const float *logits,
                        const float *u, int32_t *hist, const int32_t *n_hist, int32_t H,
                        int32_t R, int32_t V, float temperature, int32_t top_k, float top_p,
                        float min_p, float repetition_penalty);
} grpo_ops;

/* -- 1.5: element types of weights (grpo_model_desc.bind_typed, the *_w ops) -- */
#define GRPO_DTYPE_F32 0  /* IEEE binary32 */
#define GRPO_DTYPE_BF16 1 /* bfloat16: the high 16 bits of a binary32 (8-bit exponent) */

/* Element size in bytes of a GRPO_DTYPE_*, 0 for one this header does not know. */
static inline uint32_t grpo_dtype_size(int32_t dtype) {
    return dtype == GRPO_DTYPE_F32 ? 4u : dtype == GRPO_DTYPE_BF16 ? 2u : 0u;
}

/* fp32 -> bf16, rounding to nearest even as PyTorch's .to(torch.bfloat16) does; a NaN stays a
 * (quiet) NaN, infinities stay infinite. */
static inline uint16_t grpo_bf16_from_f32(float x) {
    union { float f; uint32_t u; } v = {x};
    if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 0x40u); /* NaN */
    return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}

/* 1.5: whether dropout keeps element i under seed at rate p (0 <= p < 1): a splitmix64 hash of
 * seed and i, its top 24 bits as u in [0, 1), kept when u >= p. Every backend draws this mask. */
static inline int grpo_dropout_keeps(uint64_t seed, uint64_t i, float p) {
    uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f) >= p;
}

/* bf16 -> fp32, exact. */
static inline float grpo_bf16_to_f32(uint16_t h) {
    union { uint32_t u; float f; } v = {(uint32_t)h << 16};
    return v.f;
}

#ifdef __cplusplus
}
#endif
#endif /* GRPO_OPS_H */
