/*
 * sampling.h — turning one row of next-token logits into a token, as Hugging Face generate does.
 *
 * Processors run in transformers' order: repetition penalty (on the logits, over every distinct
 * token already in the row: prompt and completion so far), then temperature, top-k, top-p, min-p,
 * then a draw from the softmax. temperature == 0 means greedy (argmax of the penalised logits).
 * Disabled values: top_k 0, top_p 1, min_p 0, repetition_penalty 1.
 */
#ifndef GRPO_SAMPLING_H
#define GRPO_SAMPLING_H

#include <stdint.h>

#include "base/rng.h"

typedef struct grpo_sampling {
    float temperature;        /* 0 = greedy */
    int32_t top_k;            /* 0 = off */
    float top_p;              /* 1 = off */
    float min_p;              /* 0 = off */
    float repetition_penalty; /* 1 = off */
} grpo_sampling;

/* Whether p draws nothing: greedy decoding, where no uniform is taken from the RNG. */
static inline int grpo_sampling_greedy(const grpo_sampling *p) { return p->temperature <= 0.0f; }

/* The factor the policy's logits are multiplied by for its log-probs: 1/temperature rounded
 * once to float (1 when greedy). The sampler's log-probs and the training forward's (its head
 * scale) both take it from here, so the two are the same product. */
static inline float grpo_sampling_logit_scale(const grpo_sampling *p) {
    return p->temperature > 0.0f ? (float)(1.0 / (double)p->temperature) : 1.0f;
}

/* Processes logits (V) as above and returns the chosen token: argmax when greedy (lowest id on
 * ties), else the first token whose cumulative probability (in id order) exceeds u ~ U[0,1) drawn
 * from rng. */
int32_t grpo_sample_token(const grpo_sampling *p, float *logits, int32_t V, const int32_t *prev,
                          int32_t n_prev, grpo_rng *rng, void *scratch);

/* One row as the rollout records it (core/host/sampler.c's host path; the reference of the
 * device op grpo_ops.sample_rows): the token grpo_sample_token picks from logits (V, not
 * written; processed in work (V)) had its rng drawn u (u ignored when greedy); *logp = log
 * softmax(processed logits)[token]; *plogp (plogp may be NULL) = log softmax(logits *
 * grpo_sampling_logit_scale)[token] of the raw logits. scratch as above. */
int32_t grpo_sample_row(const grpo_sampling *p, const float *logits, int32_t V,
                        const int32_t *prev, int32_t n_prev, float u, float *logp, float *plogp,
                        float *work, void *scratch);

#endif
