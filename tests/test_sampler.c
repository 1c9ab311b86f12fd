/*
 * test_sampler.c — the rollout (core/host/sampler.c) on the tiny dense fixtures of
 * tests/fixtures/dense/ (made by tools/make_dense_fixtures.py).
 *
 * The reference is transformers' greedy generate() stored in each fixture's
 * reference.safetensors: genb.* (a left-padded batch, no EOS) and gene.* (the same batch with an
 * EOS at which rows stop at different steps; transformers pads finished rows with 0). With
 * temperature 0 every one of the G rows of a prompt must equal transformers' row exactly (the
 * fixture script checks a top-1/top-2 margin > 1e-3 at every step, far above fp32 noise).
 * The row_end hook's step_end (abort), a token budget (rows cut truncated) and the forced
 * lengths of the long-tail benchmark (grpo_sampler_opts.end_at) at the end. The host path's
 * draws on the backend's threads (ops->parallel_for, ABI 1.12) give the bits of the draws one
 * row after another.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "kernels.h"
#include "host/model_instance.h"
#include "host/host.h"
#include "host/registry.h"
#include "io/safetensors.h"
#include "host/sampler.h"
#include "host/sampling.h"
#include "train/seqbatch.h"

static const char *const fixtures[] = {"llama", "qwen2", "qwen3"};
#define N_FIXTURES 3
#define PAD 0 /* transformers' pad in the fixtures */

typedef struct fixture {
    grpo_ops *ops;
    grpo_host host;
    grpo_registry reg;
    grpo_model *m;
    grpo_safetensors *ref;
    int32_t R, P, N;        /* prompts, prompt columns, reference new tokens */
    int32_t *prompt, *mask; /* (R,P) */
} fixture;

static void ck_ok(int rc, const grpo_error *err) {
    ck_assert_msg(rc == GRPO_OK, "status %d: %s", rc, err->message);
}

static int32_t *ref_i32(const fixture *f, const char *name) {
    const grpo_st_tensor *t = grpo_st_find(f->ref, name);
    ck_assert_msg(t != NULL && t->dtype == GRPO_ST_I32, "reference tensor %s missing", name);
    int32_t *p = malloc(t->nbytes);
    memcpy(p, t->data, t->nbytes);
    return p;
}

/* The fixture on the cpu backend at `threads` (0: the machine's). */
static void fixture_open_threads(fixture *f, const char *name, int32_t threads) {
    grpo_error err;
    grpo_error_init(&err);
    memset(f, 0, sizeof *f);
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/dense/%s", GRPO_SOURCE_DIR, name);
    f->ops = grpo_backend_open("cpu", threads, &err);
    ck_assert_msg(f->ops != NULL, "%s", err.message);
    f->host = *grpo_default_host();
    f->host.ops = f->ops;
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    ck_ok(grpo_registry_scan(&f->reg, dirs, &err), &err);
    ck_ok(grpo_model_open_dir(&f->m, &f->reg, &f->host, dir, 0, &err), &err);
    snprintf(path, sizeof path, "%s/reference.safetensors", dir);
    ck_ok(grpo_st_open(&f->ref, path, &err), &err);
    const grpo_st_tensor *p = grpo_st_find(f->ref, "genb.prompt");
    f->R = (int32_t)p->shape[0], f->P = (int32_t)p->shape[1];
    f->N = (int32_t)grpo_st_find(f->ref, "genb.out")->shape[1];
    f->prompt = ref_i32(f, "genb.prompt"), f->mask = ref_i32(f, "genb.mask");
}

static void fixture_open(fixture *f, const char *name) { fixture_open_threads(f, name, 0); }

static void fixture_close(fixture *f) {
    free(f->prompt), free(f->mask);
    grpo_st_close(f->ref);
    grpo_model_close(f->m);
    grpo_registry_free(&f->reg);
    grpo_backend_close(f->ops);
}

static grpo_sampler_opts greedy_opts(int32_t G, int32_t T) {
    grpo_sampler_opts o = {{0.0f, 0, 1.0f, 0.0f, 1.0f}, G, T, {0}, 0, PAD, 0, NULL, NULL, NULL, 0, 0};
    return o;
}

/* Greedy: every row of a prompt is transformers' greedy row; no EOS, so all rows are truncated. */
START_TEST(greedy_rows_equal_transformers_generate) {
    fixture f;
    fixture_open(&f, fixtures[_i]);
    grpo_error err;
    grpo_error_init(&err);
    const int32_t G = 3;
    int32_t *want = ref_i32(&f, "genb.out");
    grpo_sampler_opts o = greedy_opts(G, f.N);
    grpo_rng rng;
    grpo_rng_seed(&rng, 1);
    grpo_rollout r = {0};
    ck_ok(grpo_sampler_run(f.m, &o, f.prompt, f.mask, f.R, f.P, &rng, &r, &err), &err);
    ck_assert_int_eq(r.N, f.R * G);
    for (int32_t n = 0; n < r.N; n++) {
        ck_assert_int_eq(r.len[n], f.N);
        ck_assert_int_eq(r.truncated[n], 1);
        for (int32_t t = 0; t < f.N; t++) {
            ck_assert_msg(r.ids[n * f.N + t] == want[(n / G) * f.N + t],
                          "%s row %d step %d: got %d, transformers %d", fixtures[_i], n, t,
                          r.ids[n * f.N + t], want[(n / G) * f.N + t]);
            ck_assert(r.mask[n * f.N + t] == 1.0f);
        }
    }
    grpo_rollout_free(&r);
    free(want);
    fixture_close(&f);
}
END_TEST

/* EOS: rows stop at their first EOS (included, mask 1), then pad with mask 0; a row without an
 * EOS is truncated. The reference is transformers' generate with eos_token_id. A second EOS id
 * that never occurs changes nothing. */
START_TEST(eos_ends_rows_and_cuts_the_mask) {
    fixture f;
    fixture_open(&f, fixtures[_i]);
    grpo_error err;
    grpo_error_init(&err);
    const int32_t G = 2;
    int32_t *want = ref_i32(&f, "gene.out"), *eos = ref_i32(&f, "gene.eos");
    grpo_sampler_opts o = greedy_opts(G, f.N);
    o.eos[0] = -7, o.eos[1] = eos[0], o.n_eos = 2;
    grpo_rng rng;
    grpo_rng_seed(&rng, 1);
    grpo_rollout r = {0};
    ck_ok(grpo_sampler_run(f.m, &o, f.prompt, f.mask, f.R, f.P, &rng, &r, &err), &err);
    int stopped = 0, ran_out = 0;
    for (int32_t n = 0; n < r.N; n++) {
        const int32_t *w = want + (n / G) * f.N;
        int32_t end = f.N;
        for (int32_t t = 0; t < f.N; t++)
            if (w[t] == eos[0]) {
                end = t + 1;
                break;
            }
        ck_assert_int_eq(r.len[n], end);
        ck_assert_int_eq(r.truncated[n], end == f.N && w[f.N - 1] != eos[0]);
        stopped += end < f.N, ran_out += r.truncated[n];
        for (int32_t t = 0; t < f.N; t++) {
            ck_assert_int_eq(r.ids[n * f.N + t], t < end ? w[t] : PAD);
            ck_assert(r.mask[n * f.N + t] == (t < end ? 1.0f : 0.0f));
        }
    }
    ck_assert_msg(stopped > 0, "the fixture's EOS should stop some row early");
    (void)ran_out;
    grpo_rollout_free(&r);
    free(want), free(eos);
    fixture_close(&f);
}
END_TEST

static int rollouts_equal(const grpo_rollout *a, const grpo_rollout *b) {
    return a->N == b->N && a->T == b->T &&
           !memcmp(a->ids, b->ids, (size_t)a->N * a->T * sizeof(int32_t)) &&
           !memcmp(a->len, b->len, (size_t)a->N * sizeof(int32_t));
}

/* Sampling: the same seed gives the same completions, another seed others; siblings differ. */
START_TEST(sampling_is_reproducible_per_seed) {
    fixture f;
    fixture_open(&f, fixtures[_i]);
    grpo_error err;
    grpo_error_init(&err);
    const int32_t G = 4;
    grpo_sampler_opts o = greedy_opts(G, f.N);
    o.sampling.temperature = 1.5f, o.sampling.top_p = 0.95f;
    o.eos[0] = 5, o.n_eos = 1;
    grpo_rollout r[3] = {{0}};
    uint64_t seeds[3] = {42, 42, 43};
    for (int k = 0; k < 3; k++) {
        grpo_rng rng;
        grpo_rng_seed(&rng, seeds[k]);
        ck_ok(grpo_sampler_run(f.m, &o, f.prompt, f.mask, f.R, f.P, &rng, &r[k], &err), &err);
    }
    ck_assert(rollouts_equal(&r[0], &r[1]));
    ck_assert(!rollouts_equal(&r[0], &r[2]));
    int differ = 0;
    for (int32_t g = 1; g < G; g++)
        differ |= memcmp(r[0].ids, r[0].ids + (size_t)g * f.N, (size_t)f.N * sizeof(int32_t));
    ck_assert_msg(differ, "sampled siblings of prompt 0 are all identical");
    for (int k = 0; k < 3; k++) grpo_rollout_free(&r[k]);
    fixture_close(&f);
}
END_TEST

/* Per-row streams (the trainer's, data parallel): a prompt's completions are the same whether it
 * is sampled with the other prompts or alone, although rows end at different steps and the live
 * rows are reordered as they do (the case one stream per batch or per group got wrong). */
START_TEST(row_streams_do_not_depend_on_the_batch) {
    fixture f;
    fixture_open(&f, fixtures[_i]);
    grpo_error err;
    grpo_error_init(&err);
    const int32_t G = 4, N = f.R * G, last = f.R - 1;
    ck_assert_int_ge(f.R, 2);
    grpo_sampler_opts o = greedy_opts(G, f.N);
    o.sampling.temperature = 1.5f, o.sampling.top_p = 0.95f;
    grpo_rng *all = malloc((size_t)N * sizeof *all), alone[4];
    grpo_rollout r = {0}, one = {0};
    /* the EOS: row 0's second token without one, so at least that row ends early */
    for (int32_t i = 0; i < N; i++) grpo_rng_seed_stream(&all[i], 7, 1, (uint64_t)i);
    ck_ok(grpo_sampler_run_rows(f.m, &o, f.prompt, f.mask, f.R, f.P, all, &r, &err), &err);
    o.eos[0] = r.ids[1], o.n_eos = 1;
    for (int32_t i = 0; i < N; i++) grpo_rng_seed_stream(&all[i], 7, 1, (uint64_t)i);
    for (int32_t g = 0; g < G; g++) grpo_rng_seed_stream(&alone[g], 7, 1, (uint64_t)(last * G + g));
    ck_ok(grpo_sampler_run_rows(f.m, &o, f.prompt, f.mask, f.R, f.P, all, &r, &err), &err);
    ck_ok(grpo_sampler_run_rows(f.m, &o, f.prompt + (size_t)last * f.P,
                                f.mask + (size_t)last * f.P, 1, f.P, alone, &one, &err),
          &err);
    int ended_early = 0;
    for (int32_t g = 0; g < G; g++) {
        int32_t n = last * G + g;
        ck_assert_int_eq(one.len[g], r.len[n]);
        ck_assert_int_eq(one.truncated[g], r.truncated[n]);
        ck_assert_mem_eq(one.ids + (size_t)g * f.N, r.ids + (size_t)n * f.N,
                         (size_t)f.N * sizeof(int32_t));
        ended_early |= r.len[n] < f.N;
    }
    for (int32_t n = 0; n < N; n++) ended_early |= r.len[n] < f.N;
    ck_assert_msg(ended_early, "no row hit the EOS: the check would not reorder live rows");
    grpo_rollout_free(&r), grpo_rollout_free(&one);
    free(all);
    fixture_close(&f);
}
END_TEST

/* The trainer's view of a rollout (seqbatch.h: prompt + completion, targets at P-1+j, logits
 * scaled by 1/temperature) gives each sampled token the log-prob it was drawn with. This pins
 * the column alignment between sampling and training. Tolerance 1e-4: the same model through
 * two paths (KV-cached decode vs. one full forward), fp32. */
START_TEST(training_logp_equals_sampling_logp) {
    fixture f;
    fixture_open(&f, fixtures[_i]);
    grpo_error err;
    grpo_error_init(&err);
    const int32_t G = 3;
    const float temp = 0.7f;
    grpo_sampler_opts o = greedy_opts(G, f.N);
    o.sampling.temperature = temp;
    o.eos[0] = 5, o.n_eos = 1;
    grpo_rng rng;
    grpo_rng_seed(&rng, 9);
    grpo_rollout r = {0};
    ck_ok(grpo_sampler_run(f.m, &o, f.prompt, f.mask, f.R, f.P, &rng, &r, &err), &err);
    int32_t T = 1;
    for (int32_t n = 0; n < r.N; n++) T = r.len[n] > T ? r.len[n] : T;
    grpo_seqbatch sb = {0};
    ck_ok(grpo_seqbatch_from_rollout(&sb, f.ops, f.prompt, f.mask, f.P, G, &r, 0, r.N, T, PAD,
                                     &err), &err);
    ck_ok(grpo_seqbatch_forward(&sb, f.m, 0, 1.0f / temp, &err), &err);
    float *logp = malloc((size_t)r.N * T * sizeof(float));
    grpo_seqbatch_completion(&sb, sb.logp, T, logp);
    for (int32_t n = 0; n < r.N; n++)
        for (int32_t j = 0; j < r.len[n]; j++) {
            float want = r.logp[(size_t)n * r.T + j], got = logp[(size_t)n * T + j];
            ck_assert_msg(fabsf(got - want) <= 1e-4f, "%s row %d token %d: training logp %.6f, "
                          "sampling logp %.6f", fixtures[_i], n, j, got, want);
        }
    free(logp);
    grpo_seqbatch_free(&sb);
    grpo_rollout_free(&r);
    fixture_close(&f);
}
END_TEST

START_TEST(right_padded_prompt_is_refused) {
    fixture f;
    fixture_open(&f, fixtures[0]);
    grpo_error err;
    grpo_error_init(&err);
    int32_t prompt[4] = {7, 8, 9, 0}, mask[4] = {1, 1, 1, 0};
    grpo_sampler_opts o = greedy_opts(2, 4);
    grpo_rng rng;
    grpo_rng_seed(&rng, 1);
    grpo_rollout r = {0};
    ck_assert_int_eq(grpo_sampler_run(f.m, &o, prompt, mask, 1, 4, &rng, &r, &err),
                     GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "left-padded") != NULL, "%s", err.message);
    grpo_rollout_free(&r);
    fixture_close(&f);
}
END_TEST

/* An id outside the vocabulary never reaches the embedding: the rollout's prompt and a training
 * batch (e.g. a completion a reward plugin scribbled on) are refused with the id named. */
START_TEST(out_of_vocabulary_ids_are_refused) {
    fixture f;
    fixture_open(&f, fixtures[0]);
    grpo_error err;
    grpo_error_init(&err);
    int32_t V = grpo_model_vocab(f.m);
    int32_t prompt[3] = {7, V, 9}, mask[3] = {1, 1, 1};
    grpo_sampler_opts o = greedy_opts(2, 4);
    grpo_rng rng;
    grpo_rng_seed(&rng, 1);
    grpo_rollout r = {0};
    ck_assert_int_eq(grpo_sampler_run(f.m, &o, prompt, mask, 1, 3, &rng, &r, &err),
                     GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "prompt: token id") && strstr(err.message, "index 1"), "%s",
                  err.message);
    prompt[1] = 8;
    ck_ok(grpo_sampler_run(f.m, &o, prompt, mask, 1, 3, &rng, &r, &err), &err);
    r.ids[1] = -5;
    grpo_seqbatch sb = {0};
    ck_ok(grpo_seqbatch_from_rollout(&sb, f.ops, prompt, mask, 3, 2, &r, 0, 2, r.T, PAD, &err),
          &err);
    ck_assert_int_eq(grpo_seqbatch_forward(&sb, f.m, 0, 1.0f, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "batch: token id -5") != NULL, "%s", err.message);
    grpo_seqbatch_free(&sb);
    grpo_rollout_free(&r);
    fixture_close(&f);
}
END_TEST

/* ---- the device draw path (grpo_ops.sample_rows), on the cpu backend -------------------- */

/* grpo_ops.sample_rows done on the host with grpo_sample_row (its reference), in the cpu
 * backend's memory: with it the sampler takes its device path (histories in backend memory,
 * uniforms uploaded, ids downloaded), which must then give the host path's rollout bit for bit. */
static void host_sample_rows(void *ctx, int32_t *ids, float *logp, float *plogp,
                             const float *logits, const float *u, int32_t *hist,
                             const int32_t *n_hist, int32_t H, int32_t R, int32_t V,
                             float temperature, int32_t top_k, float top_p, float min_p,
                             float repetition_penalty) {
    (void)ctx;
    grpo_sampling p = {temperature, top_k, top_p, min_p, repetition_penalty};
    float *work = malloc((size_t)V * sizeof(float));
    void *scratch = malloc((size_t)V * 12);
    ck_assert(work && scratch);
    for (int32_t r = 0; r < R; r++) {
        float pl = 0.0f;
        ids[r] = grpo_sample_row(&p, logits + (size_t)r * V, V, hist + (size_t)r * H, n_hist[r],
                                 u[r], &logp[r], plogp ? &pl : NULL, work, scratch);
        if (plogp) plogp[r] = pl;
        if (n_hist[r] < H) hist[(size_t)r * H + n_hist[r]] = ids[r];
    }
    free(work), free(scratch);
}

/* A scripted environment: odd rows begin with a 2-token observation, and their first EOS brings
 * a 3-token observation, their second ends the episode; even rows end at their first EOS. */
static const int32_t script_obs[3] = {11, 12, 13};
static int32_t script_eos_seen[64];
static int script_begin(void *user, int32_t row, const int32_t **obs, int32_t *n_obs,
                        grpo_error *err) {
    (void)user, (void)err;
    *obs = script_obs, *n_obs = row % 2 ? 2 : 0;
    return GRPO_OK;
}
static int script_turn_end(void *user, int32_t row, const int32_t *ids, int32_t n_ids,
                           int32_t room, const int32_t **obs, int32_t *n_obs, int *done,
                           grpo_error *err) {
    (void)user, (void)ids, (void)n_ids, (void)room, (void)err;
    *done = row % 2 == 0 || script_eos_seen[row]++ > 0;
    *obs = script_obs, *n_obs = 3;
    return GRPO_OK;
}

static int rollouts_same_bits(const grpo_rollout *a, const grpo_rollout *b) {
    size_t nt = (size_t)a->N * a->T;
    return rollouts_equal(a, b) && !memcmp(a->mask, b->mask, nt * sizeof(float)) &&
           !memcmp(a->logp, b->logp, nt * sizeof(float)) &&
           !memcmp(a->truncated, b->truncated, (size_t)a->N) &&
           (a->plogp == NULL) == (b->plogp == NULL) &&
           (!a->plogp || !memcmp(a->plogp, b->plogp, nt * sizeof(float)));
}

/* One run on f: per-row streams (seed 5) when rows, else one stream (seed 5). */
static void run_seeded(fixture *f, const grpo_sampler_opts *o, int rows, grpo_rollout *r) {
    grpo_error err;
    grpo_error_init(&err);
    int32_t N = f->R * o->G;
    grpo_rng one, *all = malloc((size_t)N * sizeof *all);
    for (int32_t i = 0; i < N; i++) grpo_rng_seed_stream(&all[i], 5, 1, (uint64_t)i);
    grpo_rng_seed(&one, 5);
    memset(script_eos_seen, 0, sizeof script_eos_seen);
    if (rows)
        ck_ok(grpo_sampler_run_rows(f->m, o, f->prompt, f->mask, f->R, f->P, all, r, &err), &err);
    else
        ck_ok(grpo_sampler_run(f->m, o, f->prompt, f->mask, f->R, f->P, &one, r, &err), &err);
    free(all);
}

/* Case k (0..5) of the draw-path comparisons: per-row streams when k is odd; every processor
 * on (k < 2), with multi-turn observations (k 2, 3), or greedy with a repetition penalty
 * (k 4, 5); four EOS ids taken from a first run on f (tokens it drew early), so that rows end
 * at different steps. The case's first rollout on f in *a. */
static grpo_sampler_opts draw_case(fixture *f, int k, int32_t G, grpo_sampler_turns *turns,
                                   grpo_rollout *a) {
    int rows = k % 2, multi = k / 2 == 1, greedy = k / 2 == 2;
    grpo_sampler_opts o = greedy_opts(G, 24);
    if (!greedy) o.sampling = (grpo_sampling){1.3f, 20, 0.9f, 0.02f, 1.2f};
    else o.sampling.repetition_penalty = 1.5f;
    o.policy_logp = 1, o.turns = multi ? turns : NULL;
    run_seeded(f, &o, rows, a);
    o.eos[0] = a->ids[1], o.eos[1] = a->ids[2], o.eos[2] = a->ids[(size_t)a->T + 1];
    o.eos[3] = a->ids[(size_t)a->T + 2], o.n_eos = 4;
    run_seeded(f, &o, rows, a);
    return o;
}

/* The device path (a backend with sample_rows) and the host path give the same rollout, bit for
 * bit, with every processor on, one stream or per-row streams, EOS ids that end rows at
 * different steps (live rows reordered), and multi-turn observations forced mid-row; and the same
 * for greedy decoding with a repetition penalty. */
START_TEST(device_draw_path_equals_host_path) {
    fixture host, dev;
    fixture_open(&host, fixtures[_i]);
    fixture_open(&dev, fixtures[_i]);
    dev.ops->sample_rows = host_sample_rows; /* the model reads its ops table at each call */
    /* the op's reference is grpo_sample_row's own plogp: the host path without logits_logp */
    host.ops->logits_logp = NULL;
    grpo_sampler_turns turns = {NULL, script_begin, script_turn_end};
    const int32_t G = 3;
    ck_assert_int_le(host.R * G, 64);
    for (int k = 0; k < 6; k++) {
        int multi = k / 2 == 1;
        grpo_rollout a = {0}, b = {0};
        grpo_sampler_opts o = draw_case(&host, k, G, &turns, &a);
        run_seeded(&dev, &o, k % 2, &b);
        ck_assert_msg(rollouts_same_bits(&a, &b), "%s case %d: device path != host path",
                      fixtures[_i], k);
        int ended = 0, turned = 0; /* a row ended early; an observation followed a draw */
        for (int32_t n = 0; n < a.N; n++) {
            const float *mk = a.mask + (size_t)n * a.T;
            ended |= a.len[n] < a.T;
            for (int32_t t = 1; t < a.len[n]; t++) turned |= mk[t] == 0.0f && mk[t - 1] == 1.0f;
        }
        ck_assert_msg(ended, "case %d: no row ended early (no live-row moves checked)", k);
        ck_assert_msg(!multi || turned, "case %d: no observation was forced after a turn", k);
        grpo_rollout_free(&a), grpo_rollout_free(&b);
    }
    fixture_close(&dev), fixture_close(&host);
}
END_TEST

/* The host path's draws by ops->parallel_for on 3 threads (one row a call, in any order, on a
 * buffer per part) give the rollout of the draws one row after another (parallel_for NULL),
 * bit for bit: every processor on, one stream or per-row streams, EOS ids that end rows at
 * different steps, multi-turn observations forced mid-row, greedy with a penalty. Enough rows
 * that the draws are worth a fork (the host family forked). */
START_TEST(parallel_draws_equal_serial_draws) {
    fixture par, ser;
    fixture_open_threads(&par, fixtures[_i], 3);
    fixture_open_threads(&ser, fixtures[_i], 3);
    ser.ops->parallel_for = NULL; /* the sampler reads it when a rollout starts */
    grpo_sampler_turns turns = {NULL, script_begin, script_turn_end};
    const int32_t G = 8;
    ck_assert_int_le(par.R * G, 64);
    cpu_ctx_stats st0, st1;
    cpu_ctx_stats_get(par.ops->ctx, &st0, NULL);
    for (int k = 0; k < 6; k++) {
        grpo_rollout a = {0}, b = {0};
        grpo_sampler_opts o = draw_case(&ser, k, G, &turns, &a);
        run_seeded(&par, &o, k % 2, &b);
        ck_assert_msg(rollouts_same_bits(&a, &b), "%s case %d: parallel draws != serial draws",
                      fixtures[_i], k);
        grpo_rollout_free(&a), grpo_rollout_free(&b);
    }
    cpu_ctx_stats_get(par.ops->ctx, &st1, NULL);
    ck_assert_msg(st1.forks[CPU_FAM_HOST] > st0.forks[CPU_FAM_HOST],
                  "the draws never forked (%llu)", (unsigned long long)st1.forks[CPU_FAM_HOST]);
    fixture_close(&ser), fixture_close(&par);
}
END_TEST

/* A token budget (grpo_sampler_opts.budget, the trainer's sampling.max_step_tokens): greedy rows
 * without an EOS all live, so each decode step takes N tokens; a budget of 2N + 1 is spent after
 * the third step, which then ends every row at 3 tokens, truncated, each handed to row_end; the
 * tokens are transformers' first 3. A second rollout on the spent budget ends its rows at 0
 * tokens. The budget is overdrawn by less than one step's rows. */
typedef struct hook_count {
    int ends, steps, stop_after;
} hook_count;

static int count_end(void *user, int32_t n, grpo_error *err) {
    (void)n, (void)err;
    ((hook_count *)user)->ends++;
    return GRPO_OK;
}

static int count_step(void *user, int *stop, grpo_error *err) {
    (void)err;
    hook_count *h = user;
    *stop = ++h->steps == h->stop_after;
    return GRPO_OK;
}

START_TEST(a_token_budget_ends_the_live_rows_truncated) {
    fixture f;
    fixture_open(&f, fixtures[_i]);
    grpo_error err;
    grpo_error_init(&err);
    const int32_t G = 2, N = f.R * G;
    ck_assert_int_ge(f.N, 4);
    int32_t *want = ref_i32(&f, "genb.out");
    int64_t budget = 2 * (int64_t)N + 1;
    grpo_sampler_opts o = greedy_opts(G, f.N);
    o.budget = &budget;
    grpo_rng *rng = malloc((size_t)N * sizeof *rng);
    for (int32_t i = 0; i < N; i++) grpo_rng_seed_stream(&rng[i], 3, 0, (uint64_t)i);
    hook_count h = {0, 0, 0};
    grpo_sampler_row_end hook = {count_end, &h, count_step, NULL, NULL};
    grpo_rollout r = {0};
    ck_ok(grpo_sampler_run_rows_each(f.m, &o, f.prompt, f.mask, f.R, f.P, rng, &hook, &r, &err),
          &err);
    ck_assert_int_eq(r.budget_cut, N);
    ck_assert_int_eq(h.ends, N);
    ck_assert_int_eq(h.steps, 3);
    ck_assert_msg(budget <= 0 && budget > -N, "budget left %lld", (long long)budget);
    for (int32_t n = 0; n < N; n++) {
        ck_assert_int_eq(r.len[n], 3);
        ck_assert_int_eq(r.truncated[n], 1);
        ck_assert_mem_eq(r.ids + (size_t)n * f.N, want + (size_t)(n / G) * f.N,
                         3 * sizeof(int32_t));
        ck_assert(r.mask[(size_t)n * f.N + 3] == 0.0f && r.ids[(size_t)n * f.N + 3] == PAD);
    }
    h = (hook_count){0, 0, 0};
    ck_ok(grpo_sampler_run_rows_each(f.m, &o, f.prompt, f.mask, f.R, f.P, rng, &hook, &r, &err),
          &err);
    ck_assert_int_eq(r.budget_cut, N);
    ck_assert_int_eq(h.ends, N);
    for (int32_t n = 0; n < N; n++) ck_assert(r.len[n] == 0 && r.truncated[n] == 1);
    grpo_rollout_free(&r);
    free(rng), free(want);
    fixture_close(&f);
}
END_TEST

/* step_end's stop (the trainer's over-sampling) aborts the live rows: no row_end for them, and
 * each keeps the tokens it drew (transformers' first 2 after two steps), not truncated. */
START_TEST(step_end_stops_and_aborts_the_live_rows) {
    fixture f;
    fixture_open(&f, fixtures[_i]);
    grpo_error err;
    grpo_error_init(&err);
    const int32_t G = 2, N = f.R * G;
    int32_t *want = ref_i32(&f, "genb.out");
    grpo_sampler_opts o = greedy_opts(G, f.N);
    grpo_rng *rng = malloc((size_t)N * sizeof *rng);
    for (int32_t i = 0; i < N; i++) grpo_rng_seed_stream(&rng[i], 3, 0, (uint64_t)i);
    hook_count h = {0, 0, 2};
    grpo_sampler_row_end hook = {count_end, &h, count_step, NULL, NULL};
    grpo_rollout r = {0};
    ck_ok(grpo_sampler_run_rows_each(f.m, &o, f.prompt, f.mask, f.R, f.P, rng, &hook, &r, &err),
          &err);
    ck_assert_int_eq(h.ends, 0);
    ck_assert_int_eq(h.steps, 2);
    for (int32_t n = 0; n < N; n++) {
        ck_assert(r.len[n] == 2 && r.truncated[n] == 0);
        ck_assert_mem_eq(r.ids + (size_t)n * f.N, want + (size_t)(n / G) * f.N,
                         2 * sizeof(int32_t));
    }
    grpo_rollout_free(&r);
    free(rng), free(want);
    fixture_close(&f);
}
END_TEST

/* Forced lengths (grpo_sampler_opts.end_at, the long-tail benchmark's hook): row n ends with
 * eos[0] exactly at its length end_at[n % G] (mask 1 up to it, PAD and mask 0 after, not
 * truncated), the forced EOS has logp 0 (a point mass) and its plogp is the model's own
 * log-prob of that token (the training forward's, 1e-4 as above). The EOS is a token the
 * unforced run with the same streams drew as row 0's first token: row 0 (forced to the full
 * length) must draw something else there, so no EOS id is drawn before a row's end. A run
 * without an EOS id is refused. */
START_TEST(forced_lengths_end_rows_exactly) {
    fixture f;
    fixture_open(&f, fixtures[_i]);
    grpo_error err;
    grpo_error_init(&err);
    const int32_t G = 4, N = f.R * G, T = f.N;
    ck_assert_int_ge(T, 4);
    const int32_t end_at[4] = {T, 1, 3, 2};
    grpo_sampler_opts o = greedy_opts(G, T);
    o.sampling.temperature = 1.0f, o.policy_logp = 1;
    grpo_rng *rng = malloc((size_t)N * sizeof *rng);
    grpo_rollout free_run = {0}, r = {0};
    for (int32_t i = 0; i < N; i++) grpo_rng_seed_stream(&rng[i], 11, 1, (uint64_t)i);
    ck_ok(grpo_sampler_run_rows(f.m, &o, f.prompt, f.mask, f.R, f.P, rng, &free_run, &err), &err);
    const int32_t eos = free_run.ids[0];
    o.end_at = end_at;
    ck_assert_int_eq(grpo_sampler_run_rows(f.m, &o, f.prompt, f.mask, f.R, f.P, rng, &r, &err),
                     GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "forced completion lengths") != NULL, "%s", err.message);
    o.eos[0] = eos, o.n_eos = 1;
    for (int32_t i = 0; i < N; i++) grpo_rng_seed_stream(&rng[i], 11, 1, (uint64_t)i);
    ck_ok(grpo_sampler_run_rows(f.m, &o, f.prompt, f.mask, f.R, f.P, rng, &r, &err), &err);
    ck_assert_int_ne(r.ids[0], eos);
    for (int32_t n = 0; n < N; n++) {
        int32_t L = end_at[n % G];
        const int32_t *ids = r.ids + (size_t)n * T;
        ck_assert_int_eq(r.len[n], L);
        ck_assert_int_eq(r.truncated[n], 0);
        ck_assert_int_eq(ids[L - 1], eos);
        ck_assert(r.logp[(size_t)n * T + L - 1] == 0.0f);
        ck_assert_msg(r.plogp[(size_t)n * T + L - 1] < -1e-3f, "row %d: the forced EOS's plogp "
                      "is the point mass's, not the model's", n);
        for (int32_t t = 0; t < T; t++) {
            ck_assert_msg(t == L - 1 || ids[t] != eos, "row %d drew the EOS at %d", n, t);
            ck_assert(r.mask[(size_t)n * T + t] == (t < L ? 1.0f : 0.0f));
            ck_assert(t < L || ids[t] == PAD);
        }
    }
    grpo_seqbatch sb = {0};
    ck_ok(grpo_seqbatch_from_rollout(&sb, f.ops, f.prompt, f.mask, f.P, G, &r, 0, N, T, PAD,
                                     &err), &err);
    ck_ok(grpo_seqbatch_forward(&sb, f.m, 0, 1.0f, &err), &err);
    float *logp = malloc((size_t)N * T * sizeof(float));
    grpo_seqbatch_completion(&sb, sb.logp, T, logp);
    for (int32_t n = 0; n < N; n++)
        for (int32_t j = 0; j < r.len[n]; j++)
            ck_assert_msg(fabsf(logp[(size_t)n * T + j] - r.plogp[(size_t)n * T + j]) <= 1e-4f,
                          "%s row %d token %d: training logp %.6f, plogp %.6f", fixtures[_i], n,
                          j, logp[(size_t)n * T + j], r.plogp[(size_t)n * T + j]);
    free(logp);
    grpo_seqbatch_free(&sb);
    grpo_rollout_free(&free_run), grpo_rollout_free(&r);
    free(rng);
    fixture_close(&f);
}
END_TEST

int main(void) {
    Suite *s = suite_create("sampler");
    TCase *tc = tcase_create("rollout");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, greedy_rows_equal_transformers_generate, 0, N_FIXTURES);
    tcase_add_loop_test(tc, eos_ends_rows_and_cuts_the_mask, 0, N_FIXTURES);
    tcase_add_loop_test(tc, sampling_is_reproducible_per_seed, 0, N_FIXTURES);
    tcase_add_loop_test(tc, row_streams_do_not_depend_on_the_batch, 0, N_FIXTURES);
    tcase_add_loop_test(tc, training_logp_equals_sampling_logp, 0, N_FIXTURES);
    tcase_add_test(tc, right_padded_prompt_is_refused);
    tcase_add_test(tc, out_of_vocabulary_ids_are_refused);
    tcase_add_loop_test(tc, device_draw_path_equals_host_path, 0, N_FIXTURES);
    tcase_add_loop_test(tc, parallel_draws_equal_serial_draws, 0, N_FIXTURES);
    tcase_add_loop_test(tc, a_token_budget_ends_the_live_rows_truncated, 0, N_FIXTURES);
    tcase_add_loop_test(tc, step_end_stops_and_aborts_the_live_rows, 0, N_FIXTURES);
    tcase_add_loop_test(tc, forced_lengths_end_rows_exactly, 0, N_FIXTURES);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
