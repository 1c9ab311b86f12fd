/* sampler.c — prefill once per prompt, fan the KV cache out to G rows, batched decode.
 *
 * Two ways to draw a step's tokens, side by side below (draw_tokens_host, draw_tokens_device):
 * the host downloads the live rows' logits (R,V) and draws each row with sampling.h; or, when
 * the backend has grpo_ops.sample_rows, the backend draws: the rows' histories stay in backend
 * memory (the op appends each drawn token; a forced one is uploaded), the host draws the same
 * uniforms from the same RNG streams in the same order and uploads them (R floats), and only R
 * ids, logp (and plogp) come back. The cpu backend has no sample_rows: its rollouts are the host
 * path's, which is also the op's reference (grpo_sample_row); its rows draw on the backend's
 * threads when the backend has grpo_ops.parallel_for (ABI 1.12: a row's draw reads the whole
 * vocabulary, and a step's draws were the serial part of a multi-threaded decode), with the
 * uniforms taken in row order first, so the bits are the one-thread draws'. On the host path
 * the policy log-probs (plogp) come from grpo_ops.logits_logp when the backend has it: summed
 * as its head sums the training forward's, so that on cpu they equal the training log-probs
 * bit for bit. */
#include "host/sampler.h"
#include "base/nomem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 when id is one of o's EOS ids. */
static int grpo_sampler_is_eos(const grpo_sampler_opts *o, int32_t id) {
    for (int32_t i = 0; i < o->n_eos; i++)
        if (o->eos[i] == id) return 1;
    return 0;
}

void grpo_rollout_copy_row(grpo_rollout *dst, int32_t dn, const grpo_rollout *src, int32_t sn) {
    size_t T = (size_t)src->T, d = (size_t)dn * T, f = (size_t)sn * T;
    memmove(dst->ids + d, src->ids + f, T * sizeof *dst->ids);
    memmove(dst->mask + d, src->mask + f, T * sizeof *dst->mask);
    memmove(dst->logp + d, src->logp + f, T * sizeof *dst->logp);
    if (dst->plogp) memmove(dst->plogp + d, src->plogp + f, T * sizeof *dst->plogp);
    if (dst->rlogp) memmove(dst->rlogp + d, src->rlogp + f, T * sizeof *dst->rlogp);
    dst->len[dn] = src->len[sn], dst->truncated[dn] = src->truncated[sn];
}

void grpo_rollout_free(grpo_rollout *r) {
    free(r->ids), free(r->mask), free(r->len), free(r->truncated), free(r->logp), free(r->plogp);
    free(r->rlogp);
    memset(r, 0, sizeof *r);
}

static int rollout_alloc(grpo_rollout *r, int32_t N, int32_t T, int policy_logp, int ref_logp) {
    grpo_rollout_free(r);
    if (policy_logp && !(r->plogp = calloc((size_t)N * T, sizeof *r->plogp))) return 0;
    if (ref_logp && !(r->rlogp = calloc((size_t)N * T, sizeof *r->rlogp))) return 0;
    r->N = N, r->T = T;
    r->ids = malloc((size_t)N * T * sizeof *r->ids);
    r->mask = calloc((size_t)N * T, sizeof *r->mask);
    r->len = calloc((size_t)N, sizeof *r->len);
    r->truncated = calloc((size_t)N, sizeof *r->truncated);
    r->logp = calloc((size_t)N * T, sizeof *r->logp);
    return r->ids && r->mask && r->len && r->truncated && r->logp;
}

/* Host state of the decode batch: cache row i (of the live rows) holds output row row[i].
 * With the reference rows (Ns = N: grpo_sampler_opts.ref_logp), live rows [0, live) are the
 * completions and rows [live, 2 live) the base's copies of them, one each in any order, row[]
 * naming the completion a copy follows; the per-row arrays hold N + Ns rows. */
typedef struct sampler_state {
    int32_t N, S, H, V; /* cache rows, cache slots (P+T), history width (P+T), vocab */
    int32_t Nout;       /* output rows (N, or a queue's rows: continuous decode) */
    int32_t Ns, B;      /* reference rows (0 or N); prompts (prefill row B + b: prompt b's base
                           row, with reference rows) */
    int32_t *row;       /* (N) output row of each live cache row */
    int32_t *tok;       /* (N) next input token */
    int32_t *pos;       /* (N) its RoPE position */
    int32_t *len;       /* (N) cache slots in use once it is written */
    int32_t *cmask;     /* (N,S) 1 = slot attended to */
    int32_t *hist;      /* (Nout,H) by output row: real prompt tokens, then completion tokens */
    int32_t *n_hist;    /* (Nout) */
    float *logits;      /* (N,V) host copy of the last logits */
    /* the host path's draws run on ops->parallel_for (one a row) when the backend has it, in
     * `parts` parts at most, each with its buffers: */
    int32_t parts;
    float *row_logits;  /* (parts,V) the row being sampled (the processors work in place) */
    void *scratch;      /* parts x 12*V bytes for sampling.h */
    int32_t *drawing;   /* (N) the live rows that draw this step (host path) */
    int32_t *d_tok, *d_pos, *d_len, *d_cmask; /* backend copies */
    float *d_logits;
    /* sampling on the device (dev = 1: ops->sample_rows), by live row: uniforms, history
     * lengths, the drawn ids and log-probs (host copies and backend ones); the histories (N,H).
     * The host path draws into u, lp, plp and ids too. */
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
    const int32_t **force; /* (Nout) */
    int32_t *n_force, *i_force, *turn_start; /* (Nout) */
    uint8_t *last_forced;                    /* (Nout) */
    float *end_logits; /* (parts,V) o->end_at: a row's logits as the forced lengths draw from */
} sampler_state;

static void state_free(grpo_model *m, sampler_state *s) {
    free(s->row), free(s->tok), free(s->pos), free(s->len), free(s->cmask), free(s->hist);
    free(s->n_hist), free(s->logits), free(s->row_logits), free(s->scratch), free(s->drawing);
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
    int32_t N = s->N + s->Ns, S = s->S, V = s->V, No = s->Nout;
    if (s->Ns) B *= 2; /* the prompts prefilled twice: adapted, then the base */
    size_t big = (size_t)(B * P > N ? B * P : N);
    s->row = malloc(N * sizeof(int32_t)), s->tok = malloc(N * sizeof(int32_t));
    s->pos = malloc(N * sizeof(int32_t)), s->len = malloc(N * sizeof(int32_t));
    s->cmask = calloc((size_t)N * S, sizeof(int32_t));
    s->hist = malloc((size_t)No * s->H * sizeof(int32_t));
    s->n_hist = calloc((size_t)No, sizeof(int32_t));
    s->d_tok = o->alloc(o->ctx, big * sizeof(int32_t));
    s->d_pos = o->alloc(o->ctx, big * sizeof(int32_t));
    s->d_len = o->alloc(o->ctx, (uint64_t)N * sizeof(int32_t));
    s->d_cmask = o->alloc(o->ctx, (uint64_t)(N * S > B * P ? N * S : B * P) * sizeof(int32_t));
    s->d_logits = o->alloc(o->ctx, (uint64_t)N * V * sizeof(float));
    s->force = calloc((size_t)No, sizeof *s->force);
    s->n_force = calloc((size_t)No, sizeof(int32_t));
    s->i_force = calloc((size_t)No, sizeof(int32_t));
    s->turn_start = calloc((size_t)No, sizeof(int32_t));
    s->last_forced = calloc((size_t)No, sizeof(uint8_t));
    if (!s->force || !s->n_force || !s->i_force || !s->turn_start || !s->last_forced) return 0;
    if (s->dev && !dev_state_alloc(o, s)) return 0;
    if (!s->dev) { /* the host path's logits and sampling buffers (a set per part) */
        s->parts = grpo_ops_supports(o, parallel_for) ? o->parallel_for(o->ctx, 0, 0, NULL, NULL)
                                                      : 1;
        s->parts = s->parts < 1 ? 1 : s->parts > N ? N : s->parts;
        size_t np = (size_t)s->parts;
        s->logits = malloc((size_t)N * V * sizeof(float));
        s->row_logits = malloc(np * V * sizeof(float));
        s->scratch = malloc(np * V * 12);
        s->drawing = malloc((size_t)N * sizeof(int32_t));
        s->u = malloc(N * sizeof(float)), s->lp = malloc(N * sizeof(float));
        s->plp = malloc(N * sizeof(float)), s->ids = malloc(N * sizeof(int32_t));
        if (!s->logits || !s->row_logits || !s->scratch || !s->drawing || !s->u || !s->lp ||
            !s->plp || !s->ids)
            return 0;
        if ((policy_logp || s->Ns) && grpo_ops_supports(o, logits_logp) &&
            !logp_state_alloc(o, s))
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
    grpo_batch pb = {sizeof(grpo_batch), B, P, s->d_tok, s->d_cmask, s->d_pos, NULL, 0.0f, 0};
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

/* Moves live cache row src into row dst (host state and KV cache slots [0,n); a paged cache
 * hands src's pages to dst, whose own go back to the pool). */
static int move_row(grpo_model *m, sampler_state *s, int32_t dst, int32_t src, int32_t n,
                    grpo_error *err) {
    int rc = grpo_model_kv_move_row(m, dst, src, n, err);
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
 * the logits (rows lrow of d_logits, backend memory): summed as the training forward's head
 * sums them. */
static void policy_logps(const grpo_ops *ops, sampler_state *s, const grpo_sampler_opts *o,
                         const float *d_logits, int32_t k, grpo_rollout *out) {
    ops->upload(ops->ctx, s->d_lrow, s->lrow, (uint64_t)k * sizeof(int32_t));
    ops->upload(ops->ctx, s->d_lid, s->lid, (uint64_t)k * sizeof(int32_t));
    ops->logits_logp(ops->ctx, s->d_lplp, d_logits, s->d_lrow, s->d_lid, k, s->V,
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
    if (!(s->end_logits = malloc((size_t)s->parts * s->V * sizeof(float))))
        return grpo_nomem(err, "the forced lengths' logits rows (vocab, one a draw part)",
                          (uint64_t)s->parts * s->V * sizeof(float));
    return GRPO_OK;
}

/* Draw part `part`'s work row (V floats) and sampling.h scratch (12 V bytes). */
static float *part_logits(const sampler_state *s, int32_t part) {
    return s->row_logits + (size_t)part * s->V;
}
static void *part_scratch(const sampler_state *s, int32_t part) {
    return (char *)s->scratch + (size_t)part * s->V * 12;
}

/* Row n's draw of its token `at` (0-based) from its raw logits (V) under o->end_at: eos[0]
 * from a point mass (*lp = 0) when it is the row's token end_at[n % G], else the row's usual
 * draw with every EOS id's logit at -inf. The policy log-prob stays the model's (logits_logp on
 * the raw logits, policy_logps). part: whose buffers (draw_row). */
static int32_t end_at_draw(const grpo_sampler_opts *o, sampler_state *s, const float *logits,
                           int32_t n, int32_t at, float u, float *lp, int32_t part) {
    float *w = s->end_logits + (size_t)part * s->V;
    if (at + 1 >= o->end_at[n % o->G]) {
        for (int32_t v = 0; v < s->V; v++) w[v] = -INFINITY;
        w[o->eos[0]] = 0.0f;
    } else {
        memcpy(w, logits, (size_t)s->V * sizeof *w);
        for (int32_t i = 0; i < o->n_eos; i++)
            if (o->eos[i] >= 0 && o->eos[i] < s->V) w[o->eos[i]] = -INFINITY;
    }
    return grpo_sample_row(&o->sampling, w, s->V, s->hist + (size_t)n * s->H, s->n_hist[n], u,
                           lp, NULL, part_logits(s, part), part_scratch(s, part));
}

/* The rows that draw in one step of the host path (draw_row's argument). */
typedef struct draw_step {
    const grpo_sampler_opts *o;
    sampler_state *s;
    const grpo_rollout *out;
    int first;    /* the first step: the rows draw from their prompt's logits */
    int want_plp; /* the policy log-prob from the draw's exps (no logits_logp) */
} draw_step;

/* The j-th drawing row of the step (live row drawing[j]): its token and log-probs from its
 * logits and uniform s->u into s->ids, lp, plp; on part's buffers. A row reads only its own
 * history: the rows draw in any order, on any thread, with the bits of a draw in row order. */
static void draw_row(void *arg, int64_t j, int32_t part) {
    const draw_step *d = arg;
    sampler_state *s = d->s;
    const grpo_sampler_opts *o = d->o;
    int32_t i = s->drawing[j], n = s->row[i], r = d->first ? n / o->G : i;
    const float *logits = s->logits + (size_t)r * s->V;
    s->plp[i] = 0.0f;
    s->ids[i] = o->end_at
                    ? end_at_draw(o, s, logits, n, d->out->len[n], s->u[i], &s->lp[i], part)
                    : grpo_sample_row(&o->sampling, logits, s->V, s->hist + (size_t)n * s->H,
                                      s->n_hist[n], s->u[i], &s->lp[i],
                                      d->want_plp ? &s->plp[i] : NULL, part_logits(s, part),
                                      part_scratch(s, part));
}

/* Host path: draws one token for each live row from its logits, downloaded into s->logits (the
 * prompt's prefill logits on the first step). A row with observation tokens pending takes its
 * next one instead. The uniforms are taken in row order, then the rows draw (on the backend's
 * threads by ops->parallel_for: a draw reads the whole vocabulary), then record in row order. */
static void draw_tokens_host(grpo_model *m, sampler_state *s, const grpo_sampler_opts *o,
                             int32_t live, int first, grpo_rng *rng, grpo_rng *row_rng,
                             grpo_rollout *out) {
    const grpo_ops *ops = m->ops;
    int by_op = out->plogp && s->d_lplp; /* policy log-probs by ops->logits_logp */
    int32_t k = 0, nd = 0;
    for (int32_t i = 0; i < live; i++) {
        int32_t n = s->row[i];
        if (forcing(s, n))
            force_token(ops, s, i, n, out);
        else
            s->u[i] = uniform_for(o, n, rng, row_rng), s->drawing[nd++] = i;
    }
    draw_step d = {o, s, out, first, out->plogp && !by_op};
    if (s->parts > 1) /* a draw: a few passes over the V logits (exps, sums, the CDF) */
        ops->parallel_for(ops->ctx, nd, 16.0 * s->V, draw_row, &d);
    else
        for (int32_t j = 0; j < nd; j++) draw_row(&d, j, 0);
    for (int32_t j = 0; j < nd; j++) {
        int32_t i = s->drawing[j], n = s->row[i], r = first ? n / o->G : i;
        record_draw(s, i, n, s->ids[i], s->lp[i], s->plp[i], out);
        if (by_op) s->lrow[k] = r, s->lid[k] = s->ids[i], s->lout[k++] = n;
    }
    if (k) policy_logps(ops, s, o, s->d_logits, k, out);
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

/* Live row n's reference row leaves with it (L rows were live, the completion's slot L-1 is
 * free): the last reference row takes its place, and the one before it moves to L-1, so that
 * the L-1 left fill [L-1, 2L-2) (two row moves at most). */
static int drop_ref_row(grpo_model *m, sampler_state *s, int32_t n, int32_t L, grpo_error *err) {
    int32_t p = L;
    while (p < 2 * L - 1 && s->row[p] != n) p++;
    int rc = p == 2 * L - 1 ? GRPO_OK : move_row(m, s, p, 2 * L - 1, s->len[2 * L - 1] - 1, err);
    if (rc != GRPO_OK) return rc;
    grpo_model_kv_drop_row(m, 2 * L - 1);
    if (L < 2) return GRPO_OK;
    rc = move_row(m, s, L - 1, 2 * L - 2, s->len[2 * L - 2] - 1, err);
    if (rc == GRPO_OK) grpo_model_kv_drop_row(m, 2 * L - 2);
    return rc;
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
        if (row_end && row_end->fn) rc = row_end->fn(row_end->user, n, err);
        if (rc == GRPO_OK && i != last) rc = move_row(m, s, i, last, s->len[last] - 1, err);
        if (rc != GRPO_OK) return rc;
        grpo_model_kv_drop_row(m, last); /* moved into i, or the row that ended */
        if (s->Ns && (rc = drop_ref_row(m, s, n, last + 1, err)) != GRPO_OK) return rc;
        (*live)--;
    }
    return GRPO_OK;
}

/* Whether o's token budget is spent (no budget: never). */
static int budget_spent(const grpo_sampler_opts *o) { return o->budget && *o->budget <= 0; }

/* The token budget ran out: every live row ends where it is, truncated (cut by the budget, as
 * a row cut at T is), and goes to row_end; *live becomes 0. */
static int cut_live(grpo_model *m, const sampler_state *s, const grpo_sampler_row_end *row_end,
                    int32_t *live, grpo_rollout *out, grpo_error *err) {
    for (int32_t j = *live; s->Ns && j < 2 * *live; j++) /* the reference rows leave too */
        grpo_model_kv_drop_row(m, j);
    for (int32_t i = *live - 1; i >= 0; i--) {
        int32_t n = s->row[i];
        out->truncated[n] = 1, out->budget_cut++;
        int rc = row_end && row_end->fn ? row_end->fn(row_end->user, n, err) : GRPO_OK;
        if (rc != GRPO_OK) return rc;
        grpo_model_kv_drop_row(m, i);
        (*live)--;
    }
    return GRPO_OK;
}

/* After a decode step's draws (drawn tokens: one, drawn or forced, per row that took one): they
 * leave the budget, the rows that ended leave the batch, the rest are cut when the budget is
 * spent, and step_end may stop the rollout (*stop). */
static int step_done(grpo_model *m, sampler_state *s, const grpo_sampler_opts *o,
                     const grpo_sampler_row_end *row_end, int32_t drawn, int32_t *live,
                     grpo_rollout *out, int *stop, grpo_error *err) {
    if (o->budget) *o->budget -= drawn;
    int rc = drop_finished(m, s, o, row_end, live, out, err);
    if (rc == GRPO_OK && budget_spent(o)) rc = cut_live(m, s, row_end, live, out, err);
    if (rc == GRPO_OK && row_end && row_end->step_end)
        rc = row_end->step_end(row_end->user, stop, err);
    return rc;
}

/* One decode step of the live rows 0..live-1 (and their reference rows after them, the base
 * alone): each row's last token goes into its next cache slot; their logits land in d_logits
 * (and the live rows' in s->logits on the host path). */
static int decode_live(grpo_model *m, sampler_state *s, int32_t live, grpo_error *err) {
    const grpo_ops *ops = m->ops;
    int32_t R = s->Ns ? 2 * live : live;
    for (int32_t i = 0; i < R; i++) s->cmask[(size_t)i * s->S + s->len[i] - 1] = 1;
    ops->upload(ops->ctx, s->d_tok, s->tok, (uint64_t)R * sizeof(int32_t));
    ops->upload(ops->ctx, s->d_pos, s->pos, (uint64_t)R * sizeof(int32_t));
    ops->upload(ops->ctx, s->d_len, s->len, (uint64_t)R * sizeof(int32_t));
    ops->upload(ops->ctx, s->d_cmask, s->cmask, (uint64_t)R * s->S * sizeof(int32_t));
    int rc = s->Ns ? grpo_model_set_lora_rows(m, live, err) : GRPO_OK;
    if (rc == GRPO_OK)
        rc = grpo_model_decode(m, R, s->d_tok, s->d_pos, s->d_cmask, s->d_len, s->d_logits, err);
    if (rc == GRPO_OK && !s->dev)
        ops->download(ops->ctx, s->logits, s->d_logits, (uint64_t)live * s->V * sizeof(float));
    for (int32_t i = 0; i < R; i++) s->pos[i]++, s->len[i]++;
    return rc;
}

/* The run's KV cache memory into st: the most pages in use at once and their bytes when paged,
 * else the whole cache of rows x S positions (as the pack sizes it). */
static void kv_stats(const grpo_model *m, grpo_sampler_stats *st, int32_t rows, int32_t S) {
    uint64_t page_bytes = 0;
    int32_t pages = grpo_model_kv_pages_max(m, &page_bytes);
    double bytes = grpo_model_kv_paged(m)
                       ? (double)pages * (double)page_bytes
                       : (double)m->desc->kv_floats(m->inst, rows, S) * sizeof(float);
    if (pages > st->kv_pages_max) st->kv_pages_max = pages;
    if (bytes > st->kv_bytes_max) st->kv_bytes_max = bytes;
}

/* ---- the reference rows (grpo_sampler_opts.ref_logp) -------------------------------------- */

/* Whether this run decodes the base beside its rows: asked for, the host path with
 * ops->logits_logp, and a pack that can leave rows to the base (set_lora_rows, 1.11; the probe
 * leaves it set until ref_rows_off). */
static int ref_rows_on(grpo_model *m, const grpo_sampler_opts *o, const sampler_state *s) {
    if (!o->ref_logp || s->dev || !grpo_ops_supports(m->ops, logits_logp)) return 0;
    grpo_error probe;
    grpo_error_init(&probe);
    return grpo_model_set_lora_rows(m, s->N, &probe) == GRPO_OK;
}

static void ref_rows_off(grpo_model *m, const sampler_state *s) {
    grpo_error ignored; /* every row adapted again: a pack that took the limit takes this */
    grpo_error_init(&ignored);
    if (s->Ns) grpo_model_set_lora_rows(m, -1, &ignored);
}

/* The B prompts prefilled as 2B rows: 0..B-1 adapted, B..2B-1 the base alone (set_lora_rows);
 * without reference rows, the B rows alone. */
static int prefill_rows(grpo_model *m, sampler_state *s, const int32_t *prompt,
                        const int32_t *pmask, int32_t B, int32_t P, grpo_error *err) {
    if (!s->Ns) return prefill(m, s, prompt, pmask, B, P, err);
    size_t n = (size_t)B * P;
    int32_t *two = malloc(4 * n * sizeof *two); /* (2B,P) ids, then (2B,P) mask */
    if (!two) return grpo_nomem(err, "the prompts twice (ids and mask)", 16 * (uint64_t)n);
    memcpy(two, prompt, n * sizeof *two), memcpy(two + n, prompt, n * sizeof *two);
    memcpy(two + 2 * n, pmask, n * sizeof *two), memcpy(two + 3 * n, pmask, n * sizeof *two);
    int rc = grpo_model_set_lora_rows(m, B, err);
    if (rc == GRPO_OK) rc = prefill(m, s, two, two + 2 * n, 2 * B, P, err);
    free(two);
    return rc;
}

/* The base's prompt rows B..2B-1 into cache rows N + b*G + g, before fan_out overwrites them
 * (N >= 2B when G >= 2; with G = 1 each is already in place). */
static int fan_out_ref(grpo_model *m, const sampler_state *s, int32_t B, int32_t P, int32_t G,
                       grpo_error *err) {
    for (int32_t b = B - 1; s->Ns && b >= 0; b--)
        for (int32_t g = G - 1; g >= 0; g--) {
            int32_t dst = s->N + b * G + g;
            int rc = dst == B + b ? GRPO_OK : grpo_model_kv_copy_row(m, dst, B + b, P, err);
            if (rc != GRPO_OK) return rc;
        }
    return GRPO_OK;
}

/* After fan_out: reference row N + n starts as completion row n (its slots, position). */
static void ref_rows_state(sampler_state *s) {
    for (int32_t n = 0; n < s->Ns; n++) {
        int32_t i = s->N + n;
        s->row[i] = n, s->pos[i] = s->pos[n], s->len[i] = s->len[n];
        memcpy(s->cmask + (size_t)i * s->S, s->cmask + (size_t)n * s->S,
               (size_t)s->S * sizeof(int32_t));
    }
}

/* The base's log-probs of the tokens the live rows just took (drawn or forced) into
 * out->rlogp, by ops->logits_logp on the reference rows' logits (on the first step, their
 * prompt's base row of the prefill); each reference row takes that token as its next input. */
static void ref_logps(grpo_model *m, sampler_state *s, const grpo_sampler_opts *o, int32_t live,
                      int first, grpo_rollout *out) {
    const grpo_ops *ops = m->ops;
    for (int32_t j = 0; j < live; j++) {
        int32_t i = live + j, n = s->row[i];
        s->tok[i] = out->ids[(size_t)n * out->T + out->len[n] - 1];
        s->lrow[j] = first ? s->B + n / o->G : i, s->lid[j] = s->tok[i], s->lout[j] = n;
    }
    ops->upload(ops->ctx, s->d_lrow, s->lrow, (uint64_t)live * sizeof(int32_t));
    ops->upload(ops->ctx, s->d_lid, s->lid, (uint64_t)live * sizeof(int32_t));
    ops->logits_logp(ops->ctx, s->d_lplp, s->d_logits, s->d_lrow, s->d_lid, live, s->V,
                     grpo_sampling_logit_scale(&o->sampling));
    ops->download(ops->ctx, s->lplp, s->d_lplp, (uint64_t)live * sizeof(float));
    for (int32_t j = 0; j < live; j++) {
        int32_t n = s->lout[j];
        out->rlogp[(size_t)n * out->T + out->len[n] - 1] = s->lplp[j];
    }
}

/* grpo_sampler_opts.keep: the batch's rows keep their training activations (the model's
 * keep_block, its live rows mapped by s->row) where the model can, st->kept saying so; else any
 * keep of the model is dropped. */
static int keep_arm(grpo_model *m, const grpo_sampler_opts *o, sampler_state *s, int32_t B,
                    int32_t P, grpo_sampler_stats *st, grpo_error *err) {
    if (st) st->kept = 0;
    if (!o->keep || !grpo_model_can_keep_rollout(m)) return grpo_model_keep_rollout(m, NULL, err);
    int32_t *prefix_of = malloc((size_t)s->N * sizeof *prefix_of);
    if (!prefix_of) return grpo_nomem(err, "the kept rows' prompts", (uint64_t)s->N * 4);
    for (int32_t n = 0; n < s->N; n++) prefix_of[n] = n / o->G;
    grpo_rollout_keep k;
    grpo_model *into = m->keep_into ? m->keep_into : m; /* whose forward takes them */
    int rc = grpo_model_keep_for(into, s->N, P, o->max_new, B, prefix_of, &k, err);
    k.row_of = s->row; /* live row -> output row, as rows end and move */
    if (rc == GRPO_OK) rc = grpo_model_keep_rollout(m, &k, err);
    free(prefix_of);
    if (rc == GRPO_ERR_NOMEM) /* the forward computes them, in memory it shares with the cache */
        fprintf(stderr, "warning: %s: the training forward computes them again\n", err->message);
    if (rc == GRPO_ERR_UNSUPPORTED || rc == GRPO_ERR_NOMEM) { /* (UNSUPPORTED: LoRA on, ...) */
        grpo_error_init(err);
        return grpo_model_keep_rollout(m, NULL, err);
    }
    if (rc == GRPO_OK && st) st->kept = 1;
    return rc;
}

/* The static schedule of one batch (st: its KV memory joins it; NULL: not wanted). */
static int run(grpo_model *m, const grpo_sampler_opts *o, const int32_t *prompt,
               const int32_t *pmask, int32_t B, int32_t P, grpo_rng *rng, grpo_rng *row_rng,
               const grpo_sampler_row_end *row_end, grpo_rollout *out, grpo_sampler_stats *st,
               grpo_error *err) {
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
    s.N = s.Nout = B * o->G, s.S = P + o->max_new, s.H = P + o->max_new;
    s.V = grpo_model_vocab(m), s.B = B;
    s.Ns = ref_rows_on(m, o, &s) ? s.N : 0;
    int rc = grpo_model_reserve_kv_paged(m, s.N + s.Ns, s.S, P, GRPO_KV_PAGE, err);
    if (rc != GRPO_OK) return ref_rows_off(m, &s), rc;
    if (!rollout_alloc(out, s.N, o->max_new, o->policy_logp, s.Ns > 0) ||
        !state_alloc(m, &s, B, P, o->policy_logp)) {
        ref_rows_off(m, &s), state_free(m, &s), grpo_model_release_kv(m);
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
    if (rc == GRPO_OK) rc = keep_arm(m, o, &s, B, P, st, err);
    if (rc == GRPO_OK) rc = prefill_rows(m, &s, prompt, pmask, B, P, err);
    if (rc == GRPO_OK) rc = fan_out_ref(m, &s, B, P, o->G, err);
    if (rc == GRPO_OK) rc = fan_out(m, &s, prompt, pmask, B, P, o->G, err);
    if (rc == GRPO_OK) ref_rows_state(&s);
    for (int32_t n = 0; rc == GRPO_OK && o->turns && n < s.N; n++) {
        const int32_t *obs = NULL;
        int32_t n_obs = 0;
        rc = o->turns->begin(o->turns->user, n, &obs, &n_obs, err);
        queue_force(&s, n, obs, n_obs < o->max_new ? n_obs : o->max_new, out);
    }
    int32_t live = s.N;
    int stop = 0;
    if (rc == GRPO_OK && budget_spent(o)) /* spent by the step's earlier rollouts */
        rc = cut_live(m, &s, row_end, &live, out, err);
    if (rc == GRPO_OK && live == 0 && row_end && row_end->step_end)
        rc = row_end->step_end(row_end->user, &stop, err);
    for (int first = 1; rc == GRPO_OK && live > 0; first = 0) {
        if (s.dev)
            draw_tokens_device(m, &s, o, live, rng, row_rng, out);
        else
            draw_tokens_host(m, &s, o, live, first, rng, row_rng, out);
        if (s.Ns) ref_logps(m, &s, o, live, first, out);
        rc = step_done(m, &s, o, row_end, live, &live, out, &stop, err);
        if (rc != GRPO_OK || live == 0 || stop) break;
        rc = decode_live(m, &s, live, err);
    }
    if (st) kv_stats(m, st, s.N + s.Ns, s.S);
    if (st) st->ref_rows = s.Ns > 0;
    ref_rows_off(m, &s);
    grpo_model_release_kv(m);
    state_free(m, &s);
    return rc;
}

int grpo_sampler_run(grpo_model *m, const grpo_sampler_opts *o, const int32_t *prompt,
                     const int32_t *pmask, int32_t B, int32_t P, grpo_rng *rng, grpo_rollout *out,
                     grpo_error *err) {
    return run(m, o, prompt, pmask, B, P, rng, NULL, NULL, out, NULL, err);
}

int grpo_sampler_run_rows(grpo_model *m, const grpo_sampler_opts *o, const int32_t *prompt,
                          const int32_t *pmask, int32_t B, int32_t P, grpo_rng *row_rng,
                          grpo_rollout *out, grpo_error *err) {
    return run(m, o, prompt, pmask, B, P, NULL, row_rng, NULL, out, NULL, err);
}

int grpo_sampler_run_rows_each(grpo_model *m, const grpo_sampler_opts *o, const int32_t *prompt,
                               const int32_t *pmask, int32_t B, int32_t P, grpo_rng *row_rng,
                               const grpo_sampler_row_end *row_end, grpo_rollout *out,
                               grpo_error *err) {
    return run(m, o, prompt, pmask, B, P, NULL, row_rng, row_end, out, NULL, err);
}

/* ---- continuous decode (grpo_sampler_run_queue) -------------------------------------------
 *
 * Cache rows [0, cap) are decode rows (live rows 0..live-1, as above); rows [cap, cap+spare)
 * are prompt rows: a group's prompt KV, prefilled when its first row enters and copied into
 * the cache row of each of its rows as it enters. Every row is named by its queue row gn
 * (batch b's row n is base[b] + n; its group gn / G). The rows' outputs are written to `all`
 * (by queue row) and copied to their batch's rollout as they end. A row that enters draws its
 * first token at once from its prompt's logits (kept with the prompt row), so every live row
 * has a token to decode. */

typedef struct queue {
    const grpo_sampler_batch *q;
    int32_t nq, G, cap, spare, total; /* batches, G, decode rows, prompt rows, queue rows */
    int32_t *base;                    /* [nq+1] first queue row of each batch */
    grpo_rollout all;                 /* (total,T) every row's outputs by queue row */
    grpo_rng *rng;                    /* [total] the batches' row streams, copied back at end */
    int32_t next;                     /* the next queue row to enter */
    int32_t head;                     /* the batch whose callbacks fire */
    int32_t *left;                    /* [nq] rows of batch b not ended yet (0 once stopped) */
    uint8_t *stopped;                 /* [nq] b's step_end stopped it */
    int32_t *held, n_held;            /* [total] rows of batches after head that ended */
    int32_t *slot_group;              /* [spare] the group in prompt row cap+j, -1: free */
    float *plog, *d_plog;             /* (spare,V) its prompt's last logits: host, backend */
    int32_t budget_cut_seen;          /* all.budget_cut already counted to a batch */
    int32_t steps;                    /* decode steps so far */
    grpo_sampler_stats *stats;
} queue;

static int32_t batch_of(const queue *q, int32_t gn) {
    int32_t b = 0;
    while (gn >= q->base[b + 1]) b++;
    return b;
}

/* Copies queue row gn's outputs (ids, mask, log-probs, length, truncation) to its batch's. */
static void hand_over_row(queue *q, int32_t gn) {
    int32_t b = batch_of(q, gn);
    grpo_rollout_copy_row(q->q[b].out, gn - q->base[b], &q->all, gn);
}

/* Fires batch b's row_end for its row n (none: nothing to call). */
static int batch_row_end(const queue *q, int32_t b, int32_t n, grpo_error *err) {
    const grpo_sampler_row_end *re = q->q[b].row_end;
    return re && re->fn ? re->fn(re->user, n, err) : GRPO_OK;
}

/* The engine's row_end: queue row gn ended (EOS, T tokens or the budget). It goes to its batch
 * now when that batch is the head, else it is held until it is. */
static int queue_row_ended(void *user, int32_t gn, grpo_error *err) {
    queue *q = user;
    int32_t b = batch_of(q, gn);
    hand_over_row(q, gn);
    if (q->all.budget_cut != q->budget_cut_seen) /* cut_live counted it just before the call */
        q->q[b].out->budget_cut++, q->budget_cut_seen = q->all.budget_cut;
    q->left[b]--;
    if (b == q->head) return batch_row_end(q, b, gn - q->base[b], err);
    q->held[q->n_held++] = gn;
    return GRPO_OK;
}

/* The prompt row holding group grp, or -1. */
static int32_t prompt_row_of(const queue *q, int32_t grp) {
    for (int32_t j = 0; j < q->spare; j++)
        if (q->slot_group[j] == grp) return j;
    return -1;
}

static int32_t free_prompt_rows(const queue *q) {
    int32_t k = 0;
    for (int32_t j = 0; j < q->spare; j++) k += q->slot_group[j] < 0;
    return k;
}

/* Prefills groups k0 .. k0+k-1 of batch b (one prefill, the batch's P) into prompt rows. The
 * prefill writes cache rows 0..k-1: the live rows there are moved past the live ones first
 * (k <= the free decode rows) and back after. */
static int prefill_groups(grpo_model *m, sampler_state *s, queue *q, int32_t b, int32_t k0,
                          int32_t k, int32_t live, grpo_error *err) {
    const grpo_sampler_batch *bt = &q->q[b];
    int32_t lo = live < k ? live : k, hi = live > k ? live : k, P = bt->P, rc = GRPO_OK;
    for (int32_t j = 0; rc == GRPO_OK && j < lo; j++)
        rc = move_row(m, s, hi + j, j, s->len[j] - 1, err);
    if (rc == GRPO_OK)
        rc = prefill(m, s, bt->prompt + (size_t)k0 * P, bt->pmask + (size_t)k0 * P, k, P, err);
    for (int32_t j = 0, slot = 0; rc == GRPO_OK && j < k; j++) {
        while (q->slot_group[slot] >= 0) slot++;
        q->slot_group[slot] = (q->base[b] / q->G) + k0 + j;
        rc = grpo_model_kv_move_row(m, q->cap + slot, j, P, err);
        memcpy(q->plog + (size_t)slot * s->V, s->logits + (size_t)j * s->V,
               (size_t)s->V * sizeof(float));
        if (q->d_plog) /* the policy log-probs of first tokens read the backend's copy */
            m->ops->copy(m->ops->ctx, q->d_plog + (size_t)slot * s->V,
                         s->d_logits + (size_t)j * s->V, (uint64_t)s->V * sizeof(float));
    }
    for (int32_t j = 0; rc == GRPO_OK && j < lo; j++)
        rc = move_row(m, s, j, hi + j, s->len[hi + j] - 1, err);
    return rc;
}

/* Queue row gn enters decode row i from prompt row slot and draws its first token from the
 * prompt's logits (its policy log-prob, by ops->logits_logp, is queued as the k-th). */
static int enter_row(grpo_model *m, sampler_state *s, queue *q, const grpo_sampler_opts *o,
                     int32_t i, int32_t gn, int32_t slot, int32_t *k, grpo_error *err) {
    int32_t b = batch_of(q, gn), n = gn - q->base[b], P = q->q[b].P, real = 0;
    const int32_t *pr = q->q[b].prompt + (size_t)(n / q->G) * P;
    const int32_t *pm = q->q[b].pmask + (size_t)(n / q->G) * P;
    int rc = grpo_model_kv_copy_row(m, i, q->cap + slot, P, err);
    if (rc != GRPO_OK) return rc;
    int32_t *cm = s->cmask + (size_t)i * s->S, *h = s->hist + (size_t)gn * s->H;
    memset(cm, 0, (size_t)s->S * sizeof *cm);
    for (int32_t t = 0; t < P; t++) {
        cm[t] = pm[t] != 0;
        if (pm[t]) h[real++] = pr[t];
    }
    s->n_hist[gn] = real;
    s->row[i] = gn, s->pos[i] = real, s->len[i] = P + 1;
    int by_op = q->all.plogp && q->d_plog;
    float u = uniform_for(o, gn, NULL, q->rng), lp, plp = 0.0f;
    const float *logits = q->plog + (size_t)slot * s->V;
    int32_t t = o->end_at ? end_at_draw(o, s, logits, gn, 0, u, &lp, 0)
                          : grpo_sample_row(&o->sampling, logits, s->V, h, real, u, &lp,
                                            q->all.plogp && !by_op ? &plp : NULL,
                                            part_logits(s, 0), part_scratch(s, 0));
    record_draw(s, i, gn, t, lp, plp, &q->all);
    if (by_op) s->lrow[*k] = slot, s->lid[*k] = t, s->lout[(*k)++] = gn;
    return GRPO_OK;
}

/* The policy log-probs of the first tokens drawn since the last flush (prompt rows' logits). */
static void flush_first_logps(grpo_model *m, sampler_state *s, queue *q,
                              const grpo_sampler_opts *o, int32_t *k) {
    if (*k) policy_logps(m->ops, s, o, q->d_plog, *k, &q->all);
    *k = 0;
}

/* Skips the waiting rows of stopped batches. */
static void skip_stopped(queue *q) {
    while (q->next < q->total && q->stopped[batch_of(q, q->next)])
        q->next = q->base[batch_of(q, q->next) + 1];
}

/* Enters waiting rows into the free decode rows live..cap-1 (prefilling groups as needed);
 * returns the count in *entered. */
static int enter_rows(grpo_model *m, sampler_state *s, queue *q, const grpo_sampler_opts *o,
                      int32_t live, int32_t *entered, grpo_error *err) {
    int32_t e = 0, k = 0, G = q->G;
    int rc = GRPO_OK;
    for (skip_stopped(q); rc == GRPO_OK && q->next < q->total && live + e < q->cap;
         skip_stopped(q)) {
        int32_t gn = q->next, grp = gn / G, slot = prompt_row_of(q, grp);
        if (slot < 0) { /* prefill this group and the next ones the free rows will take */
            int32_t b = batch_of(q, gn), k0 = grp - q->base[b] / G;
            int32_t want = (q->cap - live - e + G - 1) / G, left = q->q[b].B - k0;
            int32_t kn = want < left ? want : left, room = free_prompt_rows(q);
            kn = kn < room ? kn : room;
            flush_first_logps(m, s, q, o, &k); /* prefill reuses the rows the op reads */
            rc = prefill_groups(m, s, q, b, k0, kn, live + e, err);
            slot = prompt_row_of(q, grp);
        }
        if (rc == GRPO_OK) rc = enter_row(m, s, q, o, live + e, gn, slot, &k, err);
        if (rc != GRPO_OK) break;
        if (q->steps > 0) q->stats->refills++;
        e++, q->next++;
        if (q->next % G == 0) { /* the group's last row entered: its prompt row is free */
            q->slot_group[slot] = -1;
            grpo_model_kv_drop_row(m, q->cap + slot);
        }
    }
    if (rc == GRPO_OK) flush_first_logps(m, s, q, o, &k);
    *entered = e;
    return rc;
}

/* The budget is spent: the rows still waiting end at once, truncated and empty. */
static int cut_waiting(queue *q, grpo_error *err) {
    int rc = GRPO_OK;
    for (skip_stopped(q); rc == GRPO_OK && q->next < q->total; skip_stopped(q)) {
        q->all.truncated[q->next] = 1, q->all.budget_cut++;
        rc = queue_row_ended(q, q->next++, err);
    }
    return rc;
}

/* Fills the free decode rows while rows wait; rows that end at their first token free their
 * row again. */
static int refill(grpo_model *m, sampler_state *s, queue *q, const grpo_sampler_opts *o,
                  const grpo_sampler_row_end *re, int32_t *live, grpo_error *err) {
    int rc = GRPO_OK, stop = 0;
    while (rc == GRPO_OK && *live < q->cap) {
        if (budget_spent(o)) return cut_waiting(q, err);
        int32_t e = 0;
        rc = enter_rows(m, s, q, o, *live, &e, err);
        if (rc != GRPO_OK || e == 0) break;
        *live += e;
        if (*live > q->stats->live_rows_max) q->stats->live_rows_max = *live;
        rc = step_done(m, s, o, re, e, live, &q->all, &stop, err);
    }
    return rc;
}

/* Batch b stopped (its step_end): its live rows leave the cache unended (aborted: their outputs
 * hold what they generated), its waiting rows never enter, its prompt rows are freed. */
static int stop_batch(grpo_model *m, sampler_state *s, queue *q, int32_t b, int32_t *live,
                      grpo_error *err) {
    int rc = GRPO_OK;
    q->stopped[b] = 1, q->left[b] = 0;
    for (int32_t i = *live - 1; rc == GRPO_OK && i >= 0; i--) {
        if (batch_of(q, s->row[i]) != b) continue;
        int32_t last = *live - 1;
        if (i != last) rc = move_row(m, s, i, last, s->len[last] - 1, err);
        grpo_model_kv_drop_row(m, last);
        (*live)--;
    }
    for (int32_t j = 0; j < q->spare; j++)
        if (q->slot_group[j] >= q->base[b] / q->G && q->slot_group[j] < q->base[b + 1] / q->G)
            q->slot_group[j] = -1, grpo_model_kv_drop_row(m, q->cap + j);
    return rc;
}

/* Batch b becomes the head: begin, then the rows of b that ended before, in order. */
static int head_begin(queue *q, int32_t b, grpo_error *err) {
    const grpo_sampler_row_end *re = q->q[b].row_end;
    int rc = re && re->begin ? re->begin(re->user, err) : GRPO_OK;
    int32_t kept = 0;
    for (int32_t j = 0; j < q->n_held; j++) {
        int32_t gn = q->held[j];
        if (batch_of(q, gn) != b) q->held[kept++] = gn;
        else if (rc == GRPO_OK) rc = batch_row_end(q, b, gn - q->base[b], err);
    }
    q->n_held = kept;
    return rc;
}

/* Batch b is over: every row's outputs (aborted ones: what they generated) go to its rollout
 * and its finish is called. */
static int head_finish(queue *q, int32_t b, grpo_error *err) {
    for (int32_t gn = q->base[b]; gn < q->base[b + 1]; gn++) hand_over_row(q, gn);
    const grpo_sampler_row_end *re = q->q[b].row_end;
    return re && re->finish ? re->finish(re->user, err) : GRPO_OK;
}

/* After a step: the head batch's step_end (which may stop it); a finished head hands over to
 * the next batch (begin, its held rows, its step_end), and so on. */
static int after_step(grpo_model *m, sampler_state *s, queue *q, int32_t *live,
                      grpo_error *err) {
    int rc = GRPO_OK;
    while (rc == GRPO_OK && q->head < q->nq) {
        int32_t b = q->head;
        const grpo_sampler_row_end *re = q->q[b].row_end;
        int stop = 0;
        if (!q->stopped[b] && re && re->step_end) rc = re->step_end(re->user, &stop, err);
        if (rc == GRPO_OK && stop) rc = stop_batch(m, s, q, b, live, err);
        if (rc != GRPO_OK || q->left[b] > 0) break;
        rc = head_finish(q, b, err);
        if (rc == GRPO_OK && ++q->head < q->nq) rc = head_begin(q, q->head, err);
    }
    return rc;
}

static void queue_free(grpo_model *m, queue *q) {
    if (q->rng) /* the streams advance as the batches' own would */
        for (int32_t b = 0; b < q->nq; b++)
            memcpy(q->q[b].row_rng, q->rng + q->base[b],
                   (size_t)(q->base[b + 1] - q->base[b]) * sizeof *q->rng);
    free(q->base), free(q->rng), free(q->left), free(q->stopped), free(q->held);
    free(q->slot_group), free(q->plog);
    if (q->d_plog) m->ops->free(m->ops->ctx, q->d_plog);
    grpo_rollout_free(&q->all);
}

/* The queue's tables, its outputs (all, and each batch's own), its streams. */
static int queue_alloc(grpo_model *m, queue *q, const grpo_sampler_opts *o, int32_t V) {
    int32_t nq = q->nq;
    q->base = malloc((size_t)(nq + 1) * sizeof *q->base);
    q->left = malloc((size_t)nq * sizeof *q->left), q->stopped = calloc((size_t)nq, 1);
    if (!q->base || !q->left || !q->stopped) return 0;
    q->base[0] = 0;
    for (int32_t b = 0; b < nq; b++) {
        q->left[b] = q->q[b].B * q->G, q->base[b + 1] = q->base[b] + q->left[b];
        if (!rollout_alloc(q->q[b].out, q->left[b], o->max_new, o->policy_logp, 0)) return 0;
        for (size_t i = 0; i < (size_t)q->left[b] * o->max_new; i++)
            q->q[b].out->ids[i] = o->pad_id;
    }
    q->total = q->base[nq];
    q->held = malloc((size_t)q->total * sizeof *q->held);
    if (!(q->rng = malloc((size_t)q->total * sizeof *q->rng))) return 0;
    for (int32_t b = 0; b < nq; b++)
        memcpy(q->rng + q->base[b], q->q[b].row_rng,
               (size_t)(q->base[b + 1] - q->base[b]) * sizeof *q->rng);
    q->slot_group = malloc((size_t)q->spare * sizeof *q->slot_group);
    q->plog = malloc((size_t)q->spare * V * sizeof *q->plog);
    if (!q->held || !q->slot_group || !q->plog) return 0;
    for (int32_t j = 0; j < q->spare; j++) q->slot_group[j] = -1;
    if (o->policy_logp && grpo_ops_supports(m->ops, logits_logp) &&
        !(q->d_plog = m->ops->alloc(m->ops->ctx, (uint64_t)q->spare * V * sizeof(float))))
        return 0;
    if (!rollout_alloc(&q->all, q->total, o->max_new, o->policy_logp, 0)) return 0;
    for (size_t i = 0; i < (size_t)q->total * o->max_new; i++) q->all.ids[i] = o->pad_id;
    return 1;
}

/* Whether rows wait to enter (stopped batches' rows never do). */
static int rows_waiting(queue *q) {
    skip_stopped(q);
    return q->next < q->total;
}

/* Refills and hands the head on until the decode rows are full or nothing waits (a batch its
 * step_end stopped frees rows that refill again). */
static int fill(grpo_model *m, sampler_state *s, queue *q, const grpo_sampler_opts *o,
                const grpo_sampler_row_end *re, int32_t *live, grpo_error *err) {
    int rc;
    do {
        rc = refill(m, s, q, o, re, live, err);
        if (rc == GRPO_OK) rc = after_step(m, s, q, live, err);
    } while (rc == GRPO_OK && *live < q->cap && rows_waiting(q) && !budget_spent(o));
    return rc;
}

/* The continuous schedule: fill, then decode steps until no row is live or waiting. */
static int run_continuous(grpo_model *m, sampler_state *s, queue *q, const grpo_sampler_opts *o,
                          grpo_error *err) {
    grpo_sampler_row_end re = {queue_row_ended, q, NULL, NULL, NULL};
    int32_t live = 0;
    int stop = 0;
    int rc = head_begin(q, 0, err);
    if (rc == GRPO_OK) rc = fill(m, s, q, o, &re, &live, err);
    while (rc == GRPO_OK && live > 0) {
        rc = decode_live(m, s, live, err);
        if (rc != GRPO_OK) break;
        q->steps++;
        draw_tokens_host(m, s, o, live, 0, NULL, q->rng, &q->all);
        rc = step_done(m, s, o, &re, live, &live, &q->all, &stop, err);
        if (rc == GRPO_OK) rc = fill(m, s, q, o, &re, &live, err);
    }
    if (rc == GRPO_OK && q->head < q->nq)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "sampler: the queue ended with batch %d of %d unfinished",
                              q->head, q->nq);
    return rc;
}

/* Checks q's batches (as run() does) and the cap; sets the cache's size. */
static int queue_check(const queue *q, const grpo_sampler_opts *o, int32_t *maxP,
                       grpo_error *err) {
    *maxP = 0;
    for (int32_t b = 0; b < q->nq; b++) {
        const grpo_sampler_batch *bt = &q->q[b];
        if (bt->B <= 0 || bt->P <= 0 || !bt->row_rng || !bt->out)
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "sampler: queue batch %d needs B, P > 0, row streams and an "
                                  "output (got B %d, P %d)", b, bt->B, bt->P);
        for (int32_t k = 0; k < bt->B; k++)
            if (!bt->pmask[(size_t)k * bt->P + bt->P - 1])
                return grpo_error_set(err, GRPO_ERR_INVALID,
                                      "sampler: queue batch %d prompt row %d is not left-padded "
                                      "(last column is padding)", b, k);
        *maxP = bt->P > *maxP ? bt->P : *maxP;
    }
    if (o->G <= 0 || o->max_new <= 0 || q->cap <= 0)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "sampler: need G, max_completion_length, max live rows > 0 (got "
                              "%d %d %d)", o->G, o->max_new, q->cap);
    return GRPO_OK;
}

/* The static schedule: each batch alone, as grpo_sampler_run_rows_each, with its callbacks. */
static int run_static(grpo_model *m, const grpo_sampler_opts *o, const grpo_sampler_batch *q,
                      int32_t nq, grpo_sampler_stats *st, grpo_error *err) {
    int rc = GRPO_OK;
    for (int32_t b = 0; rc == GRPO_OK && b < nq; b++) {
        const grpo_sampler_row_end *re = q[b].row_end;
        if (re && re->begin) rc = re->begin(re->user, err);
        if (rc == GRPO_OK)
            rc = run(m, o, q[b].prompt, q[b].pmask, q[b].B, q[b].P, NULL, q[b].row_rng, re,
                     q[b].out, st, err);
        if (rc == GRPO_OK && re && re->finish) rc = re->finish(re->user, err);
        if (q[b].B * o->G > st->live_rows_max) st->live_rows_max = q[b].B * o->G;
    }
    return rc;
}

int grpo_sampler_run_queue(grpo_model *m, const grpo_sampler_opts *o, const grpo_sampler_batch *q,
                           int32_t nq, int32_t max_live, grpo_sampler_stats *stats,
                           grpo_error *err) {
    grpo_sampler_stats own = {0};
    grpo_sampler_stats *st = stats ? stats : &own;
    memset(st, 0, sizeof *st);
    if (nq <= 0) return GRPO_OK;
    queue qu = {.q = q, .nq = nq, .G = o->G, .stats = st};
    qu.cap = max_live > 0 ? max_live : q[0].B * o->G;
    int32_t maxP = 0;
    int rc = queue_check(&qu, o, &maxP, err);
    if (rc != GRPO_OK) return rc;
    int continuous = !grpo_ops_supports(m->ops, sample_rows) && !o->turns &&
                     (nq > 1 || q[0].B * o->G > qu.cap);
    if (!continuous) return run_static(m, o, q, nq, st, err);
    st->continuous = 1;
    int32_t groups = 0;
    for (int32_t b = 0; b < nq; b++) groups += q[b].B;
    qu.cap = qu.cap < groups * o->G ? qu.cap : groups * o->G; /* no room for rows never there */
    qu.spare = (qu.cap + o->G - 1) / o->G;
    qu.spare = qu.spare < groups ? qu.spare : groups;
    sampler_state s = {0};
    s.N = qu.cap + qu.spare, s.S = s.H = maxP + o->max_new, s.V = grpo_model_vocab(m);
    s.Nout = groups * o->G;
    rc = grpo_model_reserve_kv_paged(m, s.N, s.S, maxP, GRPO_KV_PAGE, err);
    if (rc != GRPO_OK) return rc;
    if (!queue_alloc(m, &qu, o, s.V) || !state_alloc(m, &s, s.N, maxP, o->policy_logp)) {
        state_free(m, &s), queue_free(m, &qu), grpo_model_release_kv(m);
        return grpo_nomem(err, "the continuous sampler's buffers (rows x tokens, cache rows x "
                               "vocab)",
                          (uint64_t)s.Nout * (o->max_new * 32 + s.H * 8) +
                              (uint64_t)s.N * s.V * 8);
    }
    rc = end_at_setup(&s, o, err);
    if (rc == GRPO_OK) rc = grpo_model_keep_rollout(m, NULL, err); /* the static schedule's only */
    if (rc == GRPO_OK) rc = run_continuous(m, &s, &qu, o, err);
    kv_stats(m, st, s.N, s.S);
    grpo_model_release_kv(m);
    state_free(m, &s);
    queue_free(m, &qu);
    return rc;
}
