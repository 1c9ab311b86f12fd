/* sampling.c — logits processors (transformers' order and semantics) and the token draw. */
#include "host/sampling.h"
#include "host/testing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Each distinct previous token once: negative logits are multiplied, positive divided. */
static void repetition_penalty(float *logits, int32_t V, const int32_t *prev, int32_t n_prev,
                               float penalty, int32_t *seen /* V */) {
    memset(seen, 0, (size_t)V * sizeof *seen);
    for (int32_t i = 0; i < n_prev; i++) {
        int32_t t = prev[i];
        if (t < 0 || t >= V || seen[t]) continue;
        seen[t] = 1;
        logits[t] = logits[t] < 0 ? logits[t] * penalty : logits[t] / penalty;
    }
}

static int cmp_float_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* Keeps every token >= the k-th largest logit (ties at the threshold survive, as torch.topk does). */
static void top_k_filter(float *logits, int32_t V, int32_t k, float *tmp /* V */) {
    if (k <= 0 || k >= V) return;
    memcpy(tmp, logits, (size_t)V * sizeof *tmp);
    qsort(tmp, (size_t)V, sizeof *tmp, cmp_float_desc);
    float threshold = tmp[k - 1];
    for (int32_t i = 0; i < V; i++)
        if (logits[i] < threshold) logits[i] = -INFINITY;
}

/* The softmax's parts: e (V) = exp(logits - mx) in double, mx the max logit, sum their sum in
 * order; the one pass of exps that softmax, pick and log_prob share. */
typedef struct exp_sum {
    float mx;
    double sum;
} exp_sum;

static exp_sum exps(const float *logits, int32_t V, double *e) {
    exp_sum r = {-INFINITY, 0.0};
    for (int32_t i = 0; i < V; i++) r.mx = logits[i] > r.mx ? logits[i] : r.mx;
    for (int32_t i = 0; i < V; i++) r.sum += e[i] = exp((double)logits[i] - r.mx);
    return r;
}

/* log softmax(logits)[t] from its exp_sum. */
static float log_prob_of(const float *logits, exp_sum es, int32_t t) {
    return (float)((double)logits[t] - es.mx - log(es.sum));
}

/* softmax(logits) into probs (V), in double for the sums; returns the max probability. */
static double softmax(const float *logits, int32_t V, double *probs) {
    double sum = exps(logits, V, probs).sum, pmax = 0.0;
    for (int32_t i = 0; i < V; i++) {
        probs[i] /= sum;
        pmax = probs[i] > pmax ? probs[i] : pmax;
    }
    return pmax;
}

static int cmp_index_asc(const void *a, const void *b, void *ctx) {
    const float *v = ctx;
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    if (v[i] != v[j]) return v[i] < v[j] ? -1 : 1;
    return (i > j) - (i < j);
}

/* Removes the low tail whose cumulative probability (ascending order) is <= 1 - top_p; the most
 * likely token always stays. */
static void top_p_filter(float *logits, int32_t V, float top_p, int32_t *order /* V */,
                         double *probs /* V */) {
    if (top_p >= 1.0f) return;
    softmax(logits, V, probs);
    for (int32_t i = 0; i < V; i++) order[i] = i;
    qsort_r(order, (size_t)V, sizeof *order, cmp_index_asc, logits);
    double cum = 0.0;
    for (int32_t r = 0; r < V - 1; r++) {
        cum += probs[order[r]];
        if (cum > 1.0 - (double)top_p) break;
        logits[order[r]] = -INFINITY;
    }
}

/* Removes tokens whose probability is below min_p times the top probability. */
static void min_p_filter(float *logits, int32_t V, float min_p, double *probs /* V */) {
    if (min_p <= 0.0f) return;
    double threshold = (double)min_p * softmax(logits, V, probs);
    for (int32_t i = 0; i < V; i++)
        if (probs[i] < threshold) logits[i] = -INFINITY;
}

void grpo_logits_process(const grpo_sampling *p, float *logits, int32_t V, const int32_t *prev,
                         int32_t n_prev, void *scratch) {
    /* scratch: V doubles (probs) then V int32 (order/seen) = 12*V bytes */
    double *probs = scratch;
    int32_t *ints = (int32_t *)(probs + V);
    if (p->repetition_penalty != 1.0f)
        repetition_penalty(logits, V, prev, n_prev, p->repetition_penalty, ints);
    if (grpo_sampling_greedy(p)) return;
    if (p->temperature != 1.0f)
        for (int32_t i = 0; i < V; i++) logits[i] /= p->temperature;
    top_k_filter(logits, V, p->top_k, (float *)probs);
    top_p_filter(logits, V, p->top_p, ints, probs);
    min_p_filter(logits, V, p->min_p, probs);
}

/* The token of processed logits: argmax when greedy, else the inverse-CDF draw of u over the
 * softmax (each probability divided as it is reached). *logp (if logp): its log-prob, from the
 * same exps. */
static int32_t pick(const grpo_sampling *p, const float *logits, int32_t V, float u,
                    double *probs /* V */, float *logp) {
    if (grpo_sampling_greedy(p)) {
        int32_t best = 0;
        for (int32_t i = 1; i < V; i++)
            if (logits[i] > logits[best]) best = i;
        if (logp) *logp = log_prob_of(logits, exps(logits, V, probs), best);
        return best;
    }
    exp_sum es = exps(logits, V, probs);
    double cum = 0.0;
    int32_t last = 0;
    for (int32_t i = 0; i < V; i++) {
        double pi = probs[i] / es.sum;
        if (pi <= 0.0) continue;
        last = i;
        cum += pi;
        if (cum > u) break;
    }
    /* at the end without a break: rounding left cum just below u, the last possible token */
    if (logp) *logp = log_prob_of(logits, es, last);
    return last;
}

int32_t grpo_sample_token(const grpo_sampling *p, float *logits, int32_t V, const int32_t *prev,
                          int32_t n_prev, grpo_rng *rng, void *scratch) {
    grpo_logits_process(p, logits, V, prev, n_prev, scratch);
    float u = grpo_sampling_greedy(p) ? 0.0f : grpo_rng_uniform(rng);
    return pick(p, logits, V, u, scratch, NULL);
}

/* log softmax(logits)[t] over the V logits (-INFINITY entries are filtered tokens). */
static float log_prob(const float *logits, int32_t V, int32_t t, double *e /* V */) {
    return log_prob_of(logits, exps(logits, V, e), t);
}

/* Whether grpo_logits_process leaves every logit as it is (temperature 1, no penalty, no
 * filter): the drawn token's log-prob is then already the policy's. */
static int unprocessed(const grpo_sampling *p, int32_t V) {
    return p->temperature == 1.0f && p->repetition_penalty == 1.0f &&
           (p->top_k <= 0 || p->top_k >= V) && p->top_p >= 1.0f && p->min_p <= 0.0f;
}

int32_t grpo_sample_row(const grpo_sampling *p, const float *logits, int32_t V,
                        const int32_t *prev, int32_t n_prev, float u, float *logp, float *plogp,
                        float *work, void *scratch) {
    memcpy(work, logits, (size_t)V * sizeof *work);
    grpo_logits_process(p, work, V, prev, n_prev, scratch);
    int32_t t = pick(p, work, V, u, scratch, logp);
    if (plogp && unprocessed(p, V)) {
        *plogp = *logp; /* work holds the logits as they came: the same log-softmax */
    } else if (plogp) {
        float inv = grpo_sampling_logit_scale(p);
        for (int32_t v = 0; v < V; v++) work[v] = logits[v] * inv;
        *plogp = log_prob(work, V, t, scratch);
    }
    return t;
}
