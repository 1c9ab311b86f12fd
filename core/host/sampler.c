/* sampler.c — prefill once per prompt, fan the KV cache out to G rows, batched decode.
 *
 * Two ways to draw a step's tokens, side by side below (draw_tokens_host, draw_tokens_device):
 * the host downloads the live rows' logits (R,V) and draws each row with sampling.h; or, when
 * the backend has grpo_ops.sample_rows, the backend draws: the rows' histories stay in backend
 * memory (the op appends each drawn token; a forced one is uploaded), the host draws the same
 * uniforms from the same RNG streams in the same order and uploads them (R floats), and only R
 * ids, logp (and plogp) come back. The cpu backend has no sample_rows: its rollouts are the host
 * path's, which is also the op's reference (grpo_sample_row). On the host path the policy
 * log-probs (plogp) come from grpo_ops.logits_logp when the backend has it: summed as its head
 * sums the training forward's, so that on cpu they equal the training log-probs bit for bit. */
#include "host/sampler.h"
#include "base/nomem.h"

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
    /* sampling on the device (dev = 1: ops->sample_rows), by live row: uniforms, history
     * lengths, the drawn ids and log-probs (host copies and backend ones); the histories (N,H) */
    int dev;
    float *u, *lp, *plp;
    int32_t *nh, *ids;
    float *d_u, *d_lp, *d_plp;
    int32_t *d_nh, *d_ids, *d_hist;
    /* the host path's policy log-probs by ops->logits_logp (when the backend has it and they
     * are wanted), by drawn row: its logits row, its id, its output row; backend copies */
    int32_t *lrow, *lid, *lout, *d_lrow, *d_lid;
    float *lplp, *d_lplp;
    /* multi-turn (o->turns), by output row: the tokens being forced, where the current turn
     * began in the row, whether the row's last token was forced */
    const int32_t **force; /* (N) */
    int32_t *n_force, *i_force, *turn_start; /* (N) */
    uint8_t *last_forced;                    /* (N) */
    float *end_logits; /* (V) o->end_at: the row's logits as the forced lengths draw from */
} sampler_state;

static void state_free(grpo_model *m, sampler_state *s) {
    free(s->row), free(s->tok), free(s->pos), free(s->len), free(s->cmask), free(s->hist);
    free(s->n_hist), free(s->logits), free(s->row_logits), free(s->scratch);
    free(s->force), free(s->n_force), free(s->i_force), free(s->turn_start), free(s->last_forced);
    free(s->u), free(s->lp), free(s->plp), free(s->nh), free(s->ids);
    free(s->lrow), free(s->lid), free(s->lout), free(s->lplp), free(s->end_logits);
    void *d[] = {s->d_tok, s->d_pos,  s->d_len, s->d_cmask, s->d_logits, s->d_u,  s->d_lp,
                 s->d_plp, s->d_nh,   s->d_ids, s->d_hist,  s->d_lrow,   s->d_lid, s->d_lplp};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (d[i]) m->ops->free(m->ops->ctx, d[i]);
}

/* The device path's buffers (s->dev): host staging and backend copies, by live row. */
static int dev_state_alloc(const grpo_ops *o, sampler_state *s) {
    int32_t N = s->N;
    s->u = malloc(N * sizeof(float)), s->lp = malloc(N * sizeof(float));
    s->plp = malloc(N * sizeof(float)), s->nh = malloc(N * sizeof(int32_t));
    s->ids = malloc(N * sizeof(int32_t));
    s->d_u = o->alloc(o->ctx, N * sizeof(float)), s->d_lp = o->alloc(o->ctx, N * sizeof(float));
    s->d_plp = o->alloc(o->ctx, N * sizeof(float));
    s->d_nh = o->alloc(o->ctx, N * sizeof(int32_t));
    s->d_ids = o->alloc(o->ctx, N * sizeof(int32_t));
    s->d_hist = o->alloc(o->ctx, (uint64_t)N * s->H * sizeof(int32_t));
    return s->u && s->lp && s->plp && s->nh && s->ids && s->d_u && s->d_lp && s->d_plp &&
           s->d_nh && s->d_ids && s->d_hist;
}

/* The host path's logits_logp buffers (host staging and backend copies, by drawn row). */
static int logp_state_alloc(const grpo_ops *o, sampler_state *s) {
    size_t N = (size_t)s->N;
    s->lrow = malloc(N * sizeof(int32_t)), s->lid = malloc(N * sizeof(int32_t));
    s->lout = malloc(N * sizeof(int32_t)), s->lplp = malloc(N * sizeof(float));
    s->d_lrow = o->alloc(o->ctx, N * sizeof(int32_t));
    s->d_lid = o->alloc(o->ctx, N * sizeof(int32_t));
    s->d_lplp = o->alloc(o->ctx, N * sizeof(float));
    return s->lrow && s->lid && s->lout && s->lplp && s->d_lrow && s->d_lid && s->d_lplp;
}

static int state_alloc(grpo_model *m, sampler_state *s, int32_t B, int32_t P, int policy_logp) {
    const grpo_ops *o = m->ops;
    int32_t N = s->N, S = s->S, V = s->V;
    size_t big = (size_t)(B * P > N ? B * P : N);
    s->row = malloc(N * sizeof(int32_t)), s->tok = malloc(N * sizeof(int32_t));
    s->pos = malloc(N * sizeof(int32_t)), s->len = malloc(N * sizeof(int32_t));
    s->cmask = calloc((size_t)N * S, sizeof(int32_t));
    s->hist = malloc((size_t)N * s->H * sizeof(int32_t));
    s->n_hist = calloc((size_t)N, sizeof(int32_t));
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
    if (s->dev && !dev_state_alloc(o, s)) return 0;
    if (!s->dev) { /* the host path's logits and sampling buffers */
        s->logits = malloc((size_t)N * V * sizeof(float));
        s->row_logits = malloc((size_t)V * sizeof(float));
        s->scratch = malloc((size_t)V * 12);
        if (!s->logits || !s->row_logits || !s->scratch) return 0;
        if (policy_logp && grpo_ops_supports(o, logits_logp) && !logp_state_alloc(o, s))
            return 0;
    }
    return s->row && s->tok && s->pos && s->len && s->cmask && s->hist && s->n_hist && s->d_tok &&
           s->d_pos && s->d_len && s->d_cmask && s->d_logits;
}

/* Prefills the B prompts into cache rows 0..B-1; their last logits (B,V) are in d_logits, and
 * on the host path also in s->logits.
 * Positions follow Hugging Face's left-padding rule (cumsum(mask) - 1, pads at 0). */
static int prefill(grpo_model *m, sampler_state *s, const int32_t *prompt, const int32_t *pmask,
                   int32_t B, int32_t P, grpo_error *err) {
    const grpo_ops *o = m->ops;
    int rc = grpo_model_check_ids(m, prompt, (size_t)B * P, "prompt", err);
    if (rc != GRPO_OK) return rc;
    int32_t *ppos = malloc((size_t)B * P * sizeof(int32_t));
    if (!ppos)
        return grpo_nomem(err, "the prompts' positions (prompts x prompt length)",
                          (uint64_t)B * P * sizeof(int32_t));
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
    if (rc == GRPO_OK && !s->dev)
        o->download(o->ctx, s->logits, s->d_logits, (uint64_t)B * s->V * sizeof(float));
    return rc;
}

/* The device path's fan-out: the histories (live row = output row here) go up once, and
 * prompt b's prefill logits are copied to rows b*G .. b*G+G-1 of d_logits (n downwards, as
 * fan_out, never overwrites a prompt row still to be copied: n / G <= n). */
static void dev_fan_out(const grpo_ops *o, sampler_state *s, int32_t B, int32_t G) {
    o->upload(o->ctx, s->d_hist, s->hist, (uint64_t)s->N * s->H * sizeof(int32_t));
    size_t row = (size_t)s->V * sizeof(float);
    for (int32_t n = B * G - 1; n >= 0; n--)
        if (n / G != n)
            o->copy(o->ctx, (char *)s->d_logits + n * row, (char *)s->d_logits + n / G * row,
                    row);
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
    if (s->dev) dev_fan_out(m->ops, s, B, G);
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
    if (s->dev) /* the device histories are by live row */
        m->ops->copy(m->ops->ctx, s->d_hist + (size_t)dst * s->H, s->d_hist + (size_t)src * s->H,
                     (uint64_t)s->n_hist[s->row[dst]] * sizeof(int32_t));
    return GRPO_OK;
}

/* Records a forced token of row n (live row i): attended to, never trained, no RNG draw. */
static void force_token(const grpo_ops *o, sampler_state *s, int32_t i, int32_t n,
                        grpo_rollout *out) {
    int32_t t = s->force[n][s->i_force[n]++];
    if (s->dev) /* over whatever the op drew for the row */
        o->upload(o->ctx, s->d_hist + (size_t)i * s->H + s->n_hist[n], &t, sizeof t);
    s->hist[(size_t)n * s->H + s->n_hist[n]++] = t;
    out->ids[(size_t)n * out->T + out->len[n]] = t; /* mask and logp stay 0 */
    out->len[n]++;
    s->tok[i] = t, s->last_forced[n] = 1;
}

/* Records token t drawn for row n (live row i) with its log-probs (plp: when out->plogp). */
static void record_draw(sampler_state *s, int32_t i, int32_t n, int32_t t, float lp, float plp,
                        grpo_rollout *out) {
    size_t at = (size_t)n * out->T + out->len[n];
    s->last_forced[n] = 0;
    s->hist[(size_t)n * s->H + s->n_hist[n]++] = t;
    out->logp[at] = lp;
    if (out->plogp) out->plogp[at] = plp;
    out->ids[at] = t, out->mask[at] = 1.0f;
    out->len[n]++;
    s->tok[i] = t;
}

/* Whether row n takes a forced (observation) token this step instead of drawing one. */
static int forcing(const sampler_state *s, int32_t n) { return s->i_force[n] < s->n_force[n]; }

/* The uniform row n's draw takes from its RNG stream: none when greedy (as grpo_sample_token). */
static float uniform_for(const grpo_sampler_opts *o, int32_t n, grpo_rng *rng,
                         grpo_rng *row_rng) {
    if (grpo_sampling_greedy(&o->sampling)) return 0.0f;
    return grpo_rng_uniform(row_rng ? &row_rng[n] : rng);
}

/* The policy log-probs of the k tokens just drawn (s->lrow, lid, lout) by ops->logits_logp on
 * the logits in backend memory: summed as the training forward's head sums them. */
static void policy_logps(const grpo_ops *ops, sampler_state *s, const grpo_sampler_opts *o,
                         int32_t k, grpo_rollout *out) {
    ops->upload(ops->ctx, s->d_lrow, s->lrow, (uint64_t)k * sizeof(int32_t));
    ops->upload(ops->ctx, s->d_lid, s->lid, (uint64_t)k * sizeof(int32_t));
    ops->logits_logp(ops->ctx, s->d_lplp, s->d_logits, s->d_lrow, s->d_lid, k, s->V,
                     grpo_sampling_logit_scale(&o->sampling));
    ops->download(ops->ctx, s->lplp, s->d_lplp, (uint64_t)k * sizeof(float));
    for (int32_t j = 0; j < k; j++) { /* the token is the row's last one recorded */
        int32_t n = s->lout[j];
        out->plogp[(size_t)n * out->T + out->len[n] - 1] = s->lplp[j];
    }
}

/* ---- forced lengths (o->end_at: the long-tail benchmark's hook) ------------------------------ */

/* Checks that o->end_at can be kept on this run (an EOS id, no turns, the host path with
 * logits_logp for the policy log-probs) and allocates its logits row. */
static int end_at_setup(sampler_state *s, const grpo_sampler_opts *o, grpo_error *err) {
    if (!o->end_at) return GRPO_OK;
    if (o->n_eos < 1 || o->eos[0] < 0 || o->eos[0] >= s->V)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "sampler: forced completion lengths need an EOS id in [0, %d) to "
                              "end the rows with (got %d ids, the first %d)",
                              s->V, o->n_eos, o->n_eos ? o->eos[0] : -1);
    if (s->dev || o->turns || (o->policy_logp && !s->d_lplp))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "sampler: forced completion lengths work on one-turn rows drawn "
                              "on the host with ops->logits_logp (the cpu backend) only");
    for (int32_t g = 0; g < o->G; g++)
        if (o->end_at[g] < 1)
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "sampler: forced length of group row %d is %d; expected >= 1",
                                  g, o->end_at[g]);
    if (!(s->end_logits = malloc((size_t)s->V * sizeof(float))))
        return grpo_nomem(err, "the forced lengths' logits row (vocab)",
                          (uint64_t)s->V * sizeof(float));
    return GRPO_OK;
}

/* Row n's draw of its token `at` (0-based) from its raw logits (V) under o->end_at: eos[0]
 * from a point mass (*lp = 0) when it is the row's token end_at[n % G], else the row's usual
 * draw with every EOS id's logit at -inf. The policy log-prob stays the model's (logits_logp on
 * the raw logits, policy_logps). */
static int32_t end_at_draw(const grpo_sampler_opts *o, sampler_state *s, const float *logits,
                           int32_t n, int32_t at, float u, float *lp) {
    float *w = s->end_logits;
    if (at + 1 >= o->end_at[n % o->G]) {
        for (int32_t v = 0; v < s->V; v++) w[v] = -INFINITY;
        w[o->eos[0]] = 0.0f;
    } else {
        memcpy(w, logits, (size_t)s->V * sizeof *w);
        for (int32_t i = 0; i < o->n_eos; i++)
            if (o->eos[i] >= 0 && o->eos[i] < s->V) w[o->eos[i]] = -INFINITY;
    }
    return grpo_sample_row(&o->sampling, w, s->V, s->hist + (size_t)n * s->H, s->n_hist[n], u,
                           lp, NULL, s->row_logits, s->scratch);
}

/* Host path: draws one token for each live row from its logits, downloaded into s->logits (the
 * prompt's prefill logits on the first step). A row with observation tokens pending takes its
 * next one instead. */
static void draw_tokens_host(grpo_model *m, sampler_state *s, const grpo_sampler_opts *o,
                             int32_t live, int first, grpo_rng *rng, grpo_rng *row_rng,
                             grpo_rollout *out) {
    int by_op = out->plogp && s->d_lplp; /* policy log-probs by ops->logits_logp */
    int32_t k = 0;
    for (int32_t i = 0; i < live; i++) {
        int32_t n = s->row[i], r = first ? n / o->G : i;
        if (forcing(s, n)) {
            force_token(m->ops, s, i, n, out);
            continue;
        }
        float u = uniform_for(o, n, rng, row_rng), lp, plp = 0.0f;
        int32_t t = o->end_at
                        ? end_at_draw(o, s, s->logits + (size_t)r * s->V, n, out->len[n], u, &lp)
                        : grpo_sample_row(&o->sampling, s->logits + (size_t)r * s->V, s->V,
                                          s->hist + (size_t)n * s->H, s->n_hist[n], u, &lp,
                                          out->plogp && !by_op ? &plp : NULL, s->row_logits,
                                          s->scratch);
        record_draw(s, i, n, t, lp, plp, out);
        if (by_op) s->lrow[k] = r, s->lid[k] = t, s->lout[k++] = n;
    }
    if (k) policy_logps(m->ops, s, o, k, out);
}

/* Device path: the same draws by ops->sample_rows on the live rows' logits in d_logits; the
 * uniforms are taken in the host path's order (live rows, skipping forced ones). The op draws
 * for a forced row too (u 0); the host ignores it and force_token overwrites its history cell. */
static void draw_tokens_device(grpo_model *m, sampler_state *s, const grpo_sampler_opts *o,
                               int32_t live, grpo_rng *rng, grpo_rng *row_rng,
                               grpo_rollout *out) {
    const grpo_ops *ops = m->ops;
    const grpo_sampling *p = &o->sampling;
    for (int32_t i = 0; i < live; i++) {
        int32_t n = s->row[i];
        s->nh[i] = s->n_hist[n];
        s->u[i] = forcing(s, n) ? 0.0f : uniform_for(o, n, rng, row_rng);
    }
    ops->upload(ops->ctx, s->d_u, s->u, (uint64_t)live * sizeof(float));
    ops->upload(ops->ctx, s->d_nh, s->nh, (uint64_t)live * sizeof(int32_t));
    ops->sample_rows(ops->ctx, s->d_ids, s->d_lp, out->plogp ? s->d_plp : NULL, s->d_logits,
                     s->d_u, s->d_hist, s->d_nh, s->H, live, s->V, p->temperature, p->top_k,
                     p->top_p, p->min_p, p->repetition_penalty);
    ops->download(ops->ctx, s->ids, s->d_ids, (uint64_t)live * sizeof(int32_t));
    ops->download(ops->ctx, s->lp, s->d_lp, (uint64_t)live * sizeof(float));
    if (out->plogp) ops->download(ops->ctx, s->plp, s->d_plp, (uint64_t)live * sizeof(float));
    for (int32_t i = 0; i < live; i++) {
        int32_t n = s->row[i];
        if (forcing(s, n))
            force_token(ops, s, i, n, out);
        else
            record_draw(s, i, n, s->ids[i], s->lp[i], out->plogp ? s->plp[i] : 0.0f, out);
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
                         const grpo_sampler_row_end *row_end, int32_t *live, grpo_rollout *out,
                         grpo_error *err) {
    for (int32_t i = *live - 1; i >= 0; i--) {
        int32_t n = s->row[i], last = *live - 1;
        int eos = !s->last_forced[n] && grpo_sampler_is_eos(o, s->tok[i]), rc = GRPO_OK;
        int ended = eos || out->len[n] >= out->T, cut = !eos;
        if (eos && o->turns) rc = end_turn(s, o, n, out, &ended, &cut, err);
        if (rc != GRPO_OK) return rc;
        if (!ended && out->len[n] >= out->T) ended = 1, cut = 1;
        if (!ended) continue;
        out->truncated[n] = (uint8_t)cut;
        if (row_end) rc = row_end->fn(row_end->user, n, err);
        if (rc == GRPO_OK && i != last) rc = move_row(m, s, i, last, s->len[last] - 1, err);
        if (rc != GRPO_OK) return rc;
        (*live)--;
    }
    return GRPO_OK;
}

/* Whether o's token budget is spent (no budget: never). */
static int budget_spent(const grpo_sampler_opts *o) { return o->budget && *o->budget <= 0; }

/* The token budget ran out: every live row ends where it is, truncated (cut by the budget, as
 * a row cut at T is), and goes to row_end; *live becomes 0. */
static int cut_live(const sampler_state *s, const grpo_sampler_row_end *row_end, int32_t *live,
                    grpo_rollout *out, grpo_error *err) {
    for (int32_t i = *live - 1; i >= 0; i--) {
        int32_t n = s->row[i];
        out->truncated[n] = 1, out->budget_cut++;
        int rc = row_end ? row_end->fn(row_end->user, n, err) : GRPO_OK;
        if (rc != GRPO_OK) return rc;
        (*live)--;
    }
    return GRPO_OK;
}

/* After a decode step's draws: its tokens leave the budget, the rows that ended leave the batch,
 * the rest are cut when the budget is spent, and step_end may stop the rollout (*stop). */
static int step_done(grpo_model *m, sampler_state *s, const grpo_sampler_opts *o,
                     const grpo_sampler_row_end *row_end, int32_t *live, grpo_rollout *out,
                     int *stop, grpo_error *err) {
    if (o->budget) *o->budget -= *live; /* one token (drawn or forced) per live row */
    int rc = drop_finished(m, s, o, row_end, live, out, err);
    if (rc == GRPO_OK && budget_spent(o)) rc = cut_live(s, row_end, live, out, err);
    if (rc == GRPO_OK && row_end && row_end->step_end)
        rc = row_end->step_end(row_end->user, stop, err);
    return rc;
}

static int run(grpo_model *m, const grpo_sampler_opts *o, const int32_t *prompt,
               const int32_t *pmask, int32_t B, int32_t P, grpo_rng *rng, grpo_rng *row_rng,
               const grpo_sampler_row_end *row_end, grpo_rollout *out, grpo_error *err) {
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
    s.dev = grpo_ops_supports(ops, sample_rows);
    s.N = B * o->G, s.S = P + o->max_new, s.H = P + o->max_new, s.V = grpo_model_vocab(m);
    int rc = grpo_model_reserve_kv(m, s.N, s.S, P, err);
    if (rc != GRPO_OK) return rc;
    if (!rollout_alloc(out, s.N, o->max_new, o->policy_logp) ||
        !state_alloc(m, &s, B, P, o->policy_logp)) {
        state_free(m, &s);
        /* the (N,T) outputs, (N,S) slot mask and history, (N,V) logits on host and backend */
        uint64_t per_row = (uint64_t)o->max_new * 4 * sizeof(float) +
                           2 * (uint64_t)s.S * sizeof(int32_t) + 2 * (uint64_t)s.V * sizeof(float);
        char what[160];
        snprintf(what, sizeof what, "the sampler's buffers of %d rows x %d tokens (vocab %d)", s.N,
                 o->max_new, s.V);
        return grpo_nomem(err, what, (uint64_t)s.N * per_row);
    }
    for (size_t i = 0; i < (size_t)s.N * o->max_new; i++) out->ids[i] = o->pad_id;
    rc = end_at_setup(&s, o, err);
    if (rc == GRPO_OK) rc = prefill(m, &s, prompt, pmask, B, P, err);
    if (rc == GRPO_OK) rc = fan_out(m, &s, prompt, pmask, B, P, o->G, err);
    for (int32_t n = 0; rc == GRPO_OK && o->turns && n < s.N; n++) {
        const int32_t *obs = NULL;
        int32_t n_obs = 0;
        rc = o->turns->begin(o->turns->user, n, &obs, &n_obs, err);
        queue_force(&s, n, obs, n_obs < o->max_new ? n_obs : o->max_new, out);
    }
    int32_t live = s.N;
    int stop = 0;
    if (rc == GRPO_OK && budget_spent(o)) /* spent by the step's earlier rollouts */
        rc = cut_live(&s, row_end, &live, out, err);
    if (rc == GRPO_OK && live == 0 && row_end && row_end->step_end)
        rc = row_end->step_end(row_end->user, &stop, err);
    for (int first = 1; rc == GRPO_OK && live > 0; first = 0) {
        if (s.dev)
            draw_tokens_device(m, &s, o, live, rng, row_rng, out);
        else
            draw_tokens_host(m, &s, o, live, first, rng, row_rng, out);
        rc = step_done(m, &s, o, row_end, &live, out, &stop, err);
        if (rc != GRPO_OK || live == 0 || stop) break;
        for (int32_t i = 0; i < live; i++) s.cmask[(size_t)i * s.S + s.len[i] - 1] = 1;
        ops->upload(ops->ctx, s.d_tok, s.tok, (uint64_t)live * sizeof(int32_t));
        ops->upload(ops->ctx, s.d_pos, s.pos, (uint64_t)live * sizeof(int32_t));
        ops->upload(ops->ctx, s.d_len, s.len, (uint64_t)live * sizeof(int32_t));
        ops->upload(ops->ctx, s.d_cmask, s.cmask, (uint64_t)live * s.S * sizeof(int32_t));
        rc = grpo_model_decode(m, live, s.d_tok, s.d_pos, s.d_cmask, s.d_len, s.d_logits, err);
        if (rc == GRPO_OK && !s.dev)
            ops->download(ops->ctx, s.logits, s.d_logits, (uint64_t)live * s.V * sizeof(float));
        for (int32_t i = 0; i < live; i++) s.pos[i]++, s.len[i]++;
    }
    state_free(m, &s);
    return rc;
}

int grpo_sampler_run(grpo_model *m, const grpo_sampler_opts *o, const int32_t *prompt,
                     const int32_t *pmask, int32_t B, int32_t P, grpo_rng *rng, grpo_rollout *out,
                     grpo_error *err) {
    return run(m, o, prompt, pmask, B, P, rng, NULL, NULL, out, err);
}

int grpo_sampler_run_rows(grpo_model *m, const grpo_sampler_opts *o, const int32_t *prompt,
                          const int32_t *pmask, int32_t B, int32_t P, grpo_rng *row_rng,
                          grpo_rollout *out, grpo_error *err) {
    return run(m, o, prompt, pmask, B, P, NULL, row_rng, NULL, out, err);
}

int grpo_sampler_run_rows_each(grpo_model *m, const grpo_sampler_opts *o, const int32_t *prompt,
                               const int32_t *pmask, int32_t B, int32_t P, grpo_rng *row_rng,
                               const grpo_sampler_row_end *row_end, grpo_rollout *out,
                               grpo_error *err) {
    return run(m, o, prompt, pmask, B, P, NULL, row_rng, row_end, out, err);
}
