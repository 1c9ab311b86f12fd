/* sampler.c — prefill once per prompt, fan the KV cache out to G rows, batched decode. */
#include "host/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* 1 when id is one of o's EOS ids. */
static int grpo_sampler_is_eos(const grpo_sampler_opts *o, int32_t id) {
    for (int32_t i = 0; i < o->n_eos; i++)
        if (o->eos[i] == id) return 1;
    return 0;
}

void grpo_rollout_free(grpo_rollout *r) {
    free(r->ids), free(r->mask), free(r->len), free(r->truncated), free(r->logp), free(r->plogp);
    memset(r, 0, sizeof *r);
}

static int rollout_alloc(grpo_rollout *r, int32_t N, int32_t T, int policy_logp) {
    grpo_rollout_free(r);
    if (policy_logp && !(r->plogp = calloc((size_t)N * T, sizeof *r->plogp))) return 0;
    r->N = N, r->T = T;
    r->ids = malloc((size_t)N * T * sizeof *r->ids);
    r->mask = calloc((size_t)N * T, sizeof *r->mask);
    r->len = calloc((size_t)N, sizeof *r->len);
    r->truncated = calloc((size_t)N, sizeof *r->truncated);
    r->logp = calloc((size_t)N * T, sizeof *r->logp);
    return r->ids && r->mask && r->len && r->truncated && r->logp;
}

/* Host state of the decode batch: cache row i (of the live rows) holds output row row[i]. */
typedef struct sampler_state {
    int32_t N, S, H, V; /* rows, cache slots (P+T), history width (P+T), vocab */
    int32_t *row;       /* (N) output row of each live cache row */
    int32_t *tok;       /* (N) next input token */
    int32_t *pos;       /* (N) its RoPE position */
    int32_t *len;       /* (N) cache slots in use once it is written */
    int32_t *cmask;     /* (N,S) 1 = slot attended to */
    int32_t *hist;      /* (N,H) by output row: real prompt tokens, then completion tokens */
    int32_t *n_hist;    /* (N) */
    float *logits;      /* (N,V) host copy of the last logits */
    float *row_logits;  /* (V) the row being sampled (the processors work in place) */
    void *scratch;      /* 12*V bytes for sampling.h */
    int32_t *d_tok, *d_pos, *d_len, *d_cmask; /* backend copies */
    float *d_logits;
    /* multi-turn (o->turns), by output row: the tokens being forced, where the current turn
     * began in the row, whether the row's last token was forced */
    const int32_t **force; /* (N) */
    int32_t *n_force, *i_force, *turn_start; /* (N) */
    uint8_t *last_forced;                    /* (N) */
} sampler_state;

static void state_free(grpo_model *m, sampler_state *s) {
    free(s->row), free(s->tok), free(s->pos), free(s->len), free(s->cmask), free(s->hist);
    free(s->n_hist), free(s->logits), free(s->row_logits), free(s->scratch);
    free(s->force), free(s->n_force), free(s->i_force), free(s->turn_start), free(s->last_forced);
    void *d[] = {s->d_tok, s->d_pos, s->d_len, s->d_cmask, s->d_logits};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (d[i]) m->ops->free(m->ops->ctx, d[i]);
}

static int state_alloc(grpo_model *m, sampler_state *s, int32_t B, int32_t P) {
    const grpo_ops *o = m->ops;
    int32_t N = s->N, S = s->S, V = s->V;
    size_t big = (size_t)(B * P > N ? B * P : N);
    s->row = malloc(N * sizeof(int32_t)), s->tok = malloc(N * sizeof(int32_t));
    s->pos = malloc(N * sizeof(int32_t)), s->len = malloc(N * sizeof(int32_t));
    s->cmask = calloc((size_t)N * S, sizeof(int32_t));
    s->hist = malloc((size_t)N * s->H * sizeof(int32_t));
    s->n_hist = calloc((size_t)N, sizeof(int32_t));
    s->logits = malloc((size_t)N * V * sizeof(float));
    s->row_logits = malloc((size_t)V * sizeof(float));
    s->scratch = malloc((size_t)V * 12);
    s->d_tok = o->alloc(o->ctx, big * sizeof(int32_t));
    s->d_pos = o->alloc(o->ctx, big * sizeof(int32_t));
    s->d_len = o->alloc(o->ctx, (uint64_t)N * sizeof(int32_t));
    s->d_cmask = o->alloc(o->ctx, (uint64_t)(N * S > B * P ? N * S : B * P) * sizeof(int32_t));
    s->d_logits = o->alloc(o->ctx, (uint64_t)N * V * sizeof(float));
    s->force = calloc((size_t)N, sizeof *s->force);
    s->n_force = calloc((size_t)N, sizeof(int32_t)), s->i_force = calloc((size_t)N, sizeof(int32_t));
    s->turn_start = calloc((size_t)N, sizeof(int32_t));
    s->last_forced = calloc((size_t)N, sizeof(uint8_t));
    if (!s->force || !s->n_force || !s->i_force || !s->turn_start || !s->last_forced) return 0;
    return s->row && s->tok && s->pos && s->len && s->cmask && s->hist && s->n_hist && s->logits &&
           s->row_logits && s->scratch && s->d_tok && s->d_pos && s->d_len && s->d_cmask &&
           s->d_logits;
}

/* Prefills the B prompts into cache rows 0..B-1 and leaves their last logits (B,V) in s->logits.
 * Positions follow Hugging Face's left-padding rule (cumsum(mask) - 1, pads at 0). */
static int prefill(grpo_model *m, sampler_state *s, const int32_t *prompt, const int32_t *pmask,
                   int32_t B, int32_t P, grpo_error *err) {
    const grpo_ops *o = m->ops;
    int rc = grpo_model_check_ids(m, prompt, (size_t)B * P, "prompt", err);
    if (rc != GRPO_OK) return rc;
    int32_t *ppos = malloc((size_t)B * P * sizeof(int32_t));
    if (!ppos) return grpo_error_set(err, GRPO_ERR_NOMEM, "sampler: out of memory");
    for (int32_t b = 0; b < B; b++) {
        int32_t real = 0;
        for (int32_t t = 0; t < P; t++)
            ppos[(size_t)b * P + t] = pmask[(size_t)b * P + t] ? real++ : 0;
    }
    o->upload(o->ctx, s->d_tok, prompt, (uint64_t)B * P * sizeof(int32_t));
    o->upload(o->ctx, s->d_pos, ppos, (uint64_t)B * P * sizeof(int32_t));
    o->upload(o->ctx, s->d_cmask, pmask, (uint64_t)B * P * sizeof(int32_t));
    free(ppos);
    grpo_batch pb = {sizeof(grpo_batch), B, P, s->d_tok, s->d_cmask, s->d_pos, NULL, 0.0f};
    rc = grpo_model_prefill(m, &pb, s->d_logits, err);
    if (rc == GRPO_OK)
        o->download(o->ctx, s->logits, s->d_logits, (uint64_t)B * s->V * sizeof(float));
    return rc;
}

/* Copies prompt b's cache row into rows b*G .. b*G+G-1 and sets up each row's host state.
 * Walking b downwards never overwrites a prompt row that is still to be copied (b*G+g >= b). */
static int fan_out(grpo_model *m, sampler_state *s, const int32_t *prompt, const int32_t *pmask,
                   int32_t B, int32_t P, int32_t G, grpo_error *err) {
    for (int32_t b = B - 1; b >= 0; b--)
        for (int32_t g = G - 1; g >= 0; g--) {
            int rc = grpo_model_kv_copy_row(m, b * G + g, b, P, err);
            if (rc != GRPO_OK) return rc;
        }
    for (int32_t n = 0; n < s->N; n++) {
        const int32_t *pr = prompt + (size_t)(n / G) * P, *pm = pmask + (size_t)(n / G) * P;
        int32_t real = 0;
        for (int32_t t = 0; t < P; t++) {
            s->cmask[(size_t)n * s->S + t] = pm[t] != 0;
            if (pm[t]) s->hist[(size_t)n * s->H + real++] = pr[t];
        }
        s->n_hist[n] = real;
        s->row[n] = n, s->pos[n] = real, s->len[n] = P + 1;
    }
    return GRPO_OK;
}

/* Moves live cache row src into row dst (host state and KV cache slots [0,n)). */
static int move_row(grpo_model *m, sampler_state *s, int32_t dst, int32_t src, int32_t n,
                    grpo_error *err) {
    int rc = grpo_model_kv_copy_row(m, dst, src, n, err);
    if (rc != GRPO_OK) return rc;
    s->row[dst] = s->row[src], s->tok[dst] = s->tok[src];
    s->pos[dst] = s->pos[src], s->len[dst] = s->len[src];
    memcpy(s->cmask + (size_t)dst * s->S, s->cmask + (size_t)src * s->S,
           (size_t)s->S * sizeof(int32_t));
    return GRPO_OK;
}

/* log softmax(logits)[t] over the V logits (-INFINITY entries are filtered tokens). */
static float log_prob(const float *logits, int32_t V, int32_t t) {
    float mx = -INFINITY;
    for (int32_t v = 0; v < V; v++) mx = logits[v] > mx ? logits[v] : mx;
    double sum = 0.0;
    for (int32_t v = 0; v < V; v++) sum += exp((double)logits[v] - mx);
    return (float)((double)logits[t] - mx - log(sum));
}

/* log softmax(logits / temperature)[t] of a row of raw logits (grpo_rollout.plogp). */
static float tempered_logp(const float *raw, const grpo_sampler_opts *o, sampler_state *s,
                           int32_t t) {
    float inv = o->sampling.temperature > 0.0f ? 1.0f / o->sampling.temperature : 1.0f;
    for (int32_t v = 0; v < s->V; v++) s->row_logits[v] = raw[v] * inv; /* drawn already */
    return log_prob(s->row_logits, s->V, t);
}

/* Records a forced token of row n (live row i): attended to, never trained, no RNG draw. */
static void force_token(sampler_state *s, int32_t i, int32_t n, grpo_rollout *out) {
    int32_t t = s->force[n][s->i_force[n]++];
    s->hist[(size_t)n * s->H + s->n_hist[n]++] = t;
    out->ids[(size_t)n * out->T + out->len[n]] = t; /* mask and logp stay 0 */
    out->len[n]++;
    s->tok[i] = t, s->last_forced[n] = 1;
}

/* Draws one token for each live row from its logits; logits_of(i) is the host logits row of
 * live row i (the prompt's prefill logits on the first step). Records tokens in out. A row with
 * observation tokens pending takes its next one instead. */
static void draw_tokens(sampler_state *s, const grpo_sampler_opts *o, int32_t live, int first,
                        grpo_rng *rng, grpo_rng *row_rng, grpo_rollout *out) {
    for (int32_t i = 0; i < live; i++) {
        int32_t n = s->row[i];
        if (s->i_force[n] < s->n_force[n]) {
            force_token(s, i, n, out);
            continue;
        }
        s->last_forced[n] = 0;
        grpo_rng *g = row_rng ? &row_rng[n] : rng;
        const float *src = s->logits + (size_t)(first ? n / o->G : i) * s->V;
        memcpy(s->row_logits, src, (size_t)s->V * sizeof(float));
        int32_t *h = s->hist + (size_t)n * s->H;
        int32_t t =
            grpo_sample_token(&o->sampling, s->row_logits, s->V, h, s->n_hist[n], g, s->scratch);
        h[s->n_hist[n]++] = t;
        out->logp[(size_t)n * out->T + out->len[n]] = log_prob(s->row_logits, s->V, t);
        if (out->plogp) out->plogp[(size_t)n * out->T + out->len[n]] = tempered_logp(src, o, s, t);
        out->ids[(size_t)n * out->T + out->len[n]] = t;
        out->mask[(size_t)n * out->T + out->len[n]] = 1.0f;
        out->len[n]++;
        s->tok[i] = t;
    }
}

/* Queues obs[n_obs] to be forced into row n; the next turn starts after them. */
static void queue_force(sampler_state *s, int32_t n, const int32_t *obs, int32_t n_obs,
                        const grpo_rollout *out) {
    s->force[n] = obs, s->n_force[n] = n_obs, s->i_force[n] = 0;
    s->turn_start[n] = out->len[n] + n_obs;
}

/* Multi-turn: row n drew an EOS. *ended 1: the episode is over (*cut: by the token budget). */
static int end_turn(sampler_state *s, const grpo_sampler_opts *o, int32_t n, grpo_rollout *out,
                    int *ended, int *cut, grpo_error *err) {
    const int32_t *obs = NULL;
    int32_t n_obs = 0, room = out->T - out->len[n], at = s->turn_start[n];
    int done = 0;
    int rc = o->turns->turn_end(o->turns->user, n, out->ids + (size_t)n * out->T + at,
                                out->len[n] - at, room, &obs, &n_obs, &done, err);
    if (rc != GRPO_OK) return rc;
    *ended = done || n_obs > room || room == 0, *cut = !done;
    if (!*ended) queue_force(s, n, obs, n_obs, out);
    return GRPO_OK;
}

/* Drops the rows that just ended (EOS or T tokens); *live becomes the new live count. */
static int drop_finished(grpo_model *m, sampler_state *s, const grpo_sampler_opts *o,
                         int32_t *live, grpo_rollout *out, grpo_error *err) {
    for (int32_t i = *live - 1; i >= 0; i--) {
        int32_t n = s->row[i], last = *live - 1;
        int eos = !s->last_forced[n] && grpo_sampler_is_eos(o, s->tok[i]), rc = GRPO_OK;
        int ended = eos || out->len[n] >= out->T, cut = !eos;
        if (eos && o->turns) rc = end_turn(s, o, n, out, &ended, &cut, err);
        if (rc != GRPO_OK) return rc;
        if (!ended && out->len[n] >= out->T) ended = 1, cut = 1;
        if (!ended) continue;
        out->truncated[n] = (uint8_t)cut;
        if (i != last) rc = move_row(m, s, i, last, s->len[last] - 1, err);
        if (rc != GRPO_OK) return rc;
        (*live)--;
    }
    return GRPO_OK;
}

static int run(grpo_model *m, const grpo_sampler_opts *o, const int32_t *prompt,
               const int32_t *pmask, int32_t B, int32_t P, grpo_rng *rng, grpo_rng *row_rng,
               grpo_rollout *out, grpo_error *err) {
    const grpo_ops *ops = m->ops;
    if (B <= 0 || P <= 0 || o->G <= 0 || o->max_new <= 0)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "sampler: need B, P, G, max_completion_length > 0 (got %d %d %d %d)",
                              B, P, o->G, o->max_new);
    for (int32_t b = 0; b < B; b++)
        if (!pmask[(size_t)b * P + P - 1])
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "sampler: prompt row %d is not left-padded (last column is "
                                  "padding)",
                                  b);
    sampler_state s = {0};
    s.N = B * o->G, s.S = P + o->max_new, s.H = P + o->max_new, s.V = grpo_model_vocab(m);
    int rc = grpo_model_reserve_kv(m, s.N, s.S, P, err);
    if (rc != GRPO_OK) return rc;
    if (!rollout_alloc(out, s.N, o->max_new, o->policy_logp) || !state_alloc(m, &s, B, P)) {
        state_free(m, &s);
        return grpo_error_set(err, GRPO_ERR_NOMEM, "sampler: out of memory for %d rows", s.N);
    }
    for (size_t i = 0; i < (size_t)s.N * o->max_new; i++) out->ids[i] = o->pad_id;
    rc = prefill(m, &s, prompt, pmask, B, P, err);
    if (rc == GRPO_OK) rc = fan_out(m, &s, prompt, pmask, B, P, o->G, err);
    for (int32_t n = 0; rc == GRPO_OK && o->turns && n < s.N; n++) {
        const int32_t *obs = NULL;
        int32_t n_obs = 0;
        rc = o->turns->begin(o->turns->user, n, &obs, &n_obs, err);
        queue_force(&s, n, obs, n_obs < o->max_new ? n_obs : o->max_new, out);
    }
    int32_t live = s.N;
    for (int first = 1; rc == GRPO_OK && live > 0; first = 0) {
        draw_tokens(&s, o, live, first, rng, row_rng, out);
        rc = drop_finished(m, &s, o, &live, out, err);
        if (rc != GRPO_OK || live == 0) break;
        for (int32_t i = 0; i < live; i++) s.cmask[(size_t)i * s.S + s.len[i] - 1] = 1;
        ops->upload(ops->ctx, s.d_tok, s.tok, (uint64_t)live * sizeof(int32_t));
        ops->upload(ops->ctx, s.d_pos, s.pos, (uint64_t)live * sizeof(int32_t));
        ops->upload(ops->ctx, s.d_len, s.len, (uint64_t)live * sizeof(int32_t));
        ops->upload(ops->ctx, s.d_cmask, s.cmask, (uint64_t)live * s.S * sizeof(int32_t));
        rc = grpo_model_decode(m, live, s.d_tok, s.d_pos, s.d_cmask, s.d_len, s.d_logits, err);
        if (rc == GRPO_OK)
            ops->download(ops->ctx, s.logits, s.d_logits, (uint64_t)live * s.V * sizeof(float));
        for (int32_t i = 0; i < live; i++) s.pos[i]++, s.len[i]++;
    }
    state_free(m, &s);
    return rc;
}

int grpo_sampler_run(grpo_model *m, const grpo_sampler_opts *o, const int32_t *prompt,
                     const int32_t *pmask, int32_t B, int32_t P, grpo_rng *rng, grpo_rollout *out,
                     grpo_error *err) {
    return run(m, o, prompt, pmask, B, P, rng, NULL, out, err);
}

int grpo_sampler_run_rows(grpo_model *m, const grpo_sampler_opts *o, const int32_t *prompt,
                          const int32_t *pmask, int32_t B, int32_t P, grpo_rng *row_rng,
                          grpo_rollout *out, grpo_error *err) {
    return run(m, o, prompt, pmask, B, P, NULL, row_rng, out, err);
}
