/*
 * test_continuous_decode.c — the sampler's continuous decode (grpo_sampler_run_queue,
 * core/host/sampler.c) gives every row the completion the static schedule gives it.
 *
 * Two prompt batches of different prompt widths (3 prompts x P 9, 2 prompts x P 7), G = 4
 * rows each, temperature 0.8, one RNG stream per row, EOS ids taken from a first run so that
 * rows end at different lengths (ragged). The reference: each batch alone through
 * grpo_sampler_run_rows (the static schedule: all rows of the batch decode together, finished
 * ones leave). Then the queue with max_live 1, 3, 5, 12 (the first batch's rows) and 64 (all
 * rows at once): every batch's ids, mask, logp, plogp, len and truncated must equal the
 * reference byte for byte (memcmp), the streams must have advanced alike, no more than max_live
 * rows decoded together, rows entered mid-rollout (refills) when rows waited, and the KV cache
 * has max_live + ceil(max_live / G) rows. On the dense fixtures (head dims 8, 16) and a
 * generated model of head dim 64 (one full key block of the cpu attention).
 * The KV cache is paged (the default on cpu): completions are the unpaged cache's, and on a
 * long-tail schedule the pages held at once stay within bounds counted by reasoning.
 * A shared token budget cuts rows to prefixes of their static selves (the cut ones counted),
 * rows still waiting end empty.
 * The callbacks: a batch's rows reach row_end once each, after its begin and before its
 * finish, batches in order, with the row's final outputs; a step_end stop of the first batch
 * aborts its rest and leaves the second batch's completions as they were.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/host.h"
#include "host/model_instance.h"
#include "host/registry.h"
#include "host/sampler.h"
#include "kernels.h"

enum { NB = 2, G = 4, TN = 10, MAXB = 3, MAXP = 9, ROWS = (3 + 2) * G };
static const int32_t Bs[NB] = {3, 2}, Ps[NB] = {9, 7};
static const int32_t plens[NB][MAXB] = {{6, 3, 9}, {7, 4, 0}};

typedef struct fixture {
    grpo_ops *ops;
    grpo_host host;
    grpo_registry reg;
    grpo_model *m;
    int32_t prompt[NB][MAXB * MAXP], pmask[NB][MAXB * MAXP];
    grpo_sampler_opts o;
} fixture;

static void ck_ok(int rc, const grpo_error *err) {
    ck_assert_msg(rc == GRPO_OK, "status %d: %s", rc, err->message);
}

static uint32_t lcg(uint32_t *s) { return (*s = *s * 1103515245u + 12345u) >> 8; }

/* A model `grpo init-model` makes into the build tree (head dim 64). */
static const char *model_hd64(void) {
    static char d[4096];
    char cmd[12288];
    snprintf(d, sizeof d, "%s/tests/continuous_decode_models/hd64", GRPO_BINARY_DIR);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && '%s/grpo' init-model '%s' --hidden 128 --heads 2 "
             "--kv-heads 1 --layers 2 --seed 5 >/dev/null", d, GRPO_BINARY_DIR, d);
    ck_assert_msg(system(cmd) == 0, "%s: failed", cmd);
    return d;
}

/* Row streams of batch b, seeded as the trainer seeds a step's. */
static void seed_streams(grpo_rng *rng, int32_t b) {
    int32_t first = b == 0 ? 0 : Bs[0] * G;
    for (int32_t i = 0; i < Bs[b] * G; i++)
        grpo_rng_seed_stream(&rng[i], 11, 3, (uint64_t)(first + i));
}

static void fixture_open(fixture *f, int which) {
    grpo_error err;
    grpo_error_init(&err);
    memset(f, 0, sizeof *f);
    f->ops = grpo_backend_open("cpu", 2, &err);
    ck_assert_msg(f->ops != NULL, "%s", err.message);
    f->host = *grpo_default_host();
    f->host.ops = f->ops;
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    ck_ok(grpo_registry_scan(&f->reg, dirs, &err), &err);
    char dir[4096];
    if (which < 2)
        snprintf(dir, sizeof dir, "%s/tests/fixtures/dense/%s", GRPO_SOURCE_DIR,
                 which == 0 ? "llama" : "qwen3");
    else
        snprintf(dir, sizeof dir, "%s", model_hd64());
    ck_ok(grpo_model_open_dir(&f->m, &f->reg, &f->host, dir, 1, &err), &err);
    uint32_t r = 77;
    for (int32_t b = 0; b < NB; b++)
        for (int32_t k = 0; k < Bs[b]; k++)
            for (int32_t c = Ps[b] - plens[b][k]; c < Ps[b]; c++) {
                f->prompt[b][k * Ps[b] + c] =
                    (int32_t)(lcg(&r) % (uint32_t)(grpo_model_vocab(f->m) - 1)) + 1;
                f->pmask[b][k * Ps[b] + c] = 1;
            }
    grpo_sampler_opts o = {{0.8f, 0, 1.0f, 0.0f, 1.0f}, G, TN, {0}, 0, 0, 1, NULL, NULL, NULL, 0, 0};
    f->o = o;
}

static void fixture_close(fixture *f) {
    grpo_model_close(f->m);
    grpo_registry_free(&f->reg);
    grpo_backend_close(f->ops);
}

/* The static reference: each batch alone; its streams after. */
static void run_static(fixture *f, grpo_rollout *ref, grpo_rng rng[NB][MAXB * G]) {
    grpo_error err;
    grpo_error_init(&err);
    for (int32_t b = 0; b < NB; b++) {
        seed_streams(rng[b], b);
        ck_ok(grpo_sampler_run_rows(f->m, &f->o, f->prompt[b], f->pmask[b], Bs[b], Ps[b], rng[b],
                                    &ref[b], &err),
              &err);
    }
}

/* EOS ids that rows draw early, so the rows end at different lengths. */
static void ragged_eos(fixture *f) {
    grpo_rollout ref[NB] = {{0}};
    grpo_rng rng[NB][MAXB * G];
    run_static(f, ref, rng);
    f->o.eos[0] = ref[0].ids[3], f->o.eos[1] = ref[1].ids[(size_t)TN + 5], f->o.n_eos = 2;
    for (int32_t b = 0; b < NB; b++) grpo_rollout_free(&ref[b]);
}

static void ck_same(const grpo_rollout *a, const grpo_rollout *b, const char *what, int32_t cap,
                    int32_t batch) {
    size_t nt = (size_t)a->N * a->T;
    ck_assert_int_eq(a->N, b->N);
    ck_assert_msg(!memcmp(a->ids, b->ids, nt * 4), "%s cap %d batch %d: ids differ", what, cap,
                  batch);
    ck_assert_msg(!memcmp(a->mask, b->mask, nt * 4), "%s cap %d batch %d: mask", what, cap, batch);
    ck_assert_msg(!memcmp(a->logp, b->logp, nt * 4), "%s cap %d batch %d: logp", what, cap, batch);
    ck_assert_msg(a->plogp && b->plogp && !memcmp(a->plogp, b->plogp, nt * 4),
                  "%s cap %d batch %d: plogp", what, cap, batch);
    ck_assert_msg(!memcmp(a->len, b->len, (size_t)a->N * 4), "%s cap %d batch %d: len", what,
                  cap, batch);
    ck_assert_msg(!memcmp(a->truncated, b->truncated, (size_t)a->N), "%s cap %d batch %d: "
                  "truncated", what, cap, batch);
}

/* The continuous run of both batches at cap: out[NB] and rng[NB] filled, its stats returned. */
static grpo_sampler_stats run_queue(fixture *f, int32_t cap, grpo_rollout *out,
                                    grpo_rng rng[NB][MAXB * G]) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_sampler_batch q[NB];
    for (int32_t b = 0; b < NB; b++) {
        seed_streams(rng[b], b);
        q[b] = (grpo_sampler_batch){f->prompt[b], f->pmask[b], Bs[b], Ps[b], rng[b], NULL,
                                    &out[b]};
    }
    grpo_sampler_stats st;
    ck_ok(grpo_sampler_run_queue(f->m, &f->o, q, NB, cap, &st, &err), &err);
    ck_assert(st.continuous);
    return st;
}

static const char *names[] = {"llama", "qwen3", "hd64"};

START_TEST(continuous_rows_equal_the_static_schedules) {
    fixture f;
    fixture_open(&f, _i);
    ragged_eos(&f);
    grpo_rollout ref[NB] = {{0}};
    grpo_rng ref_rng[NB][MAXB * G];
    run_static(&f, ref, ref_rng);
    int32_t shortest = TN, longest = 0;
    for (int32_t b = 0; b < NB; b++)
        for (int32_t n = 0; n < ref[b].N; n++) {
            shortest = ref[b].len[n] < shortest ? ref[b].len[n] : shortest;
            longest = ref[b].len[n] > longest ? ref[b].len[n] : longest;
        }
    ck_assert_msg(shortest < longest, "%s: rows are not ragged (%d..%d)", names[_i], shortest,
                  longest);
    const int32_t caps[] = {1, 3, 5, Bs[0] * G, 64};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        grpo_rollout out[NB] = {{0}};
        grpo_rng rng[NB][MAXB * G];
        grpo_sampler_stats st = run_queue(&f, caps[c], out, rng);
        ck_assert_msg(st.live_rows_max <= caps[c] && st.live_rows_max > 0,
                      "cap %d: %d rows decoded together", caps[c], st.live_rows_max);
        if (caps[c] < ROWS)
            ck_assert_msg(st.refills > 0, "cap %d: no row entered mid-rollout", caps[c]);
        int32_t cap = caps[c] < ROWS ? caps[c] : ROWS, spare = (cap + G - 1) / G;
        spare = spare < Bs[0] + Bs[1] ? spare : Bs[0] + Bs[1];
        ck_assert_int_eq(f.m->kv.R, cap + spare);
        for (int32_t b = 0; b < NB; b++) {
            ck_same(&out[b], &ref[b], names[_i], caps[c], b);
            ck_assert_msg(!memcmp(rng[b], ref_rng[b], (size_t)Bs[b] * G * sizeof rng[b][0]),
                          "cap %d batch %d: the streams advanced otherwise", caps[c], b);
            grpo_rollout_free(&out[b]);
        }
    }
    for (int32_t b = 0; b < NB; b++) grpo_rollout_free(&ref[b]);
    fixture_close(&f);
}
END_TEST

/* The long-tail benchmark's forced lengths (grpo_sampler_opts.end_at) on the continuous
 * schedule: a row's first token (drawn as it enters) and the rest follow them as in the static
 * run, byte for byte, and the rows are as long as forced. */
START_TEST(forced_lengths_keep_the_static_rows) {
    fixture f;
    fixture_open(&f, 0);
    const int32_t end_at[G] = {7, 2, 4, 1};
    f.o.eos[0] = 3, f.o.n_eos = 1, f.o.end_at = end_at;
    grpo_rollout ref[NB] = {{0}};
    grpo_rng ref_rng[NB][MAXB * G];
    run_static(&f, ref, ref_rng);
    for (int32_t b = 0; b < NB; b++)
        for (int32_t n = 0; n < ref[b].N; n++) ck_assert_int_eq(ref[b].len[n], end_at[n % G]);
    const int32_t caps[] = {1, 3, 64};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        grpo_rollout out[NB] = {{0}};
        grpo_rng rng[NB][MAXB * G];
        run_queue(&f, caps[c], out, rng);
        for (int32_t b = 0; b < NB; b++) {
            ck_same(&out[b], &ref[b], "forced lengths", caps[c], b);
            grpo_rollout_free(&out[b]);
        }
    }
    for (int32_t b = 0; b < NB; b++) grpo_rollout_free(&ref[b]);
    fixture_close(&f);
}
END_TEST

/* The paged KV cache (the default on cpu) on a long-tail schedule: per group one row runs to
 * the max (TL = 160 tokens), the others stop after 6, 10 and 3 (the median ~5 % of the max).
 * Paged and unpaged runs give the same bytes, and the pages held at once follow the live
 * tokens. Pages of 16 slots; S = 9 + 160 = 169 slots, 11 blocks a row. A row of prompt width P
 * and L tokens writes slots [0, P + L - 1), so it holds at most ceil((P + L) / 16) pages of its
 * own; a prompt row ceil(P / 16) = 1.
 * - cap 64 (all 20 rows live at once, 5 prompt rows): the unpaged cache is 25 rows x 11 =
 *   275 pages. Paged, at most the sum over rows: P 9: 11 + 1 + 2 + 1 (+1 prompt) = 16 per
 *   group x 3, P 7: 11 + 1 + 2 + 1 (+1) = 16 x 2: 80 pages; at least the 5 long rows' 11 pages
 *   each at their last step (their first decode copies the shared prompt page): 55.
 * - cap 3 (rows end and free their pages, 1 prompt row): at most 3 live rows x 11 + 1 = 34, well
 *   below the 80 pages the rows would hold if ended rows kept theirs. */
START_TEST(paged_cache_follows_live_tokens) {
    enum { TL = 160, PAGES = 11 };
    fixture f;
    fixture_open(&f, 0);
    const int32_t end_at[G] = {TL, 6, 10, 3};
    f.o.eos[0] = 3, f.o.n_eos = 1, f.o.end_at = end_at, f.o.max_new = TL;
    const int32_t caps[] = {64, 3}, most[] = {80, 34}, least[] = {55, 1};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        grpo_rollout ou[NB] = {{0}}, op[NB] = {{0}};
        grpo_rng rng[NB][MAXB * G];
        f.m->kv_unpaged = 1;
        grpo_sampler_stats su = run_queue(&f, caps[c], ou, rng);
        int32_t rows = f.m->kv.R;
        f.m->kv_unpaged = 0;
        grpo_sampler_stats sp = run_queue(&f, caps[c], op, rng);
        for (int32_t b = 0; b < NB; b++) {
            ck_same(&op[b], &ou[b], "paged vs unpaged", caps[c], b);
            for (int32_t n = 0; n < op[b].N; n++) ck_assert_int_eq(op[b].len[n], end_at[n % G]);
            grpo_rollout_free(&ou[b]), grpo_rollout_free(&op[b]);
        }
        ck_assert_int_eq(su.kv_pages_max, 0);
        ck_assert_msg(sp.kv_pages_max >= least[c] && sp.kv_pages_max <= most[c],
                      "cap %d: %d pages at most in use, expected %d..%d (unpaged: %d)", caps[c],
                      sp.kv_pages_max, least[c], most[c], rows * PAGES);
        double page_bytes = (double)f.m->desc->kv_page_floats(f.m->inst, 16) * sizeof(float);
        ck_assert(sp.kv_bytes_max == sp.kv_pages_max * page_bytes);
        ck_assert(su.kv_bytes_max == (double)f.m->desc->kv_floats(f.m->inst, rows, 9 + TL) * 4);
        ck_assert(su.kv_bytes_max == rows * PAGES * page_bytes - (PAGES * 16 - 169) * rows *
                                         page_bytes / 16);
    }
    fixture_close(&f);
}
END_TEST

/* ---- callbacks ---------------------------------------------------------------------------- */

typedef struct hook {
    int32_t b, *events, *n_events; /* event codes: 1000*b + n (row), -1-b begin, -100-b finish */
    grpo_rollout *out;
    int32_t len_at_end[MAXB * G];
    int32_t steps, stop_after; /* stop_after > 0: stop the batch at that step_end */
} hook;

static int h_row(void *u, int32_t n, grpo_error *err) {
    (void)err;
    hook *h = u;
    h->events[(*h->n_events)++] = 1000 * h->b + n;
    h->len_at_end[n] = h->out->len[n];
    return GRPO_OK;
}
static int h_step(void *u, int *stop, grpo_error *err) {
    (void)err;
    hook *h = u;
    *stop = h->stop_after > 0 && ++h->steps == h->stop_after;
    return GRPO_OK;
}
static int h_begin(void *u, grpo_error *err) {
    (void)err;
    hook *h = u;
    h->events[(*h->n_events)++] = -1 - h->b;
    return GRPO_OK;
}
static int h_finish(void *u, grpo_error *err) {
    (void)err;
    hook *h = u;
    h->events[(*h->n_events)++] = -100 - h->b;
    return GRPO_OK;
}

START_TEST(callbacks_keep_batch_order_and_a_stop_aborts_one_batch) {
    fixture f;
    fixture_open(&f, 0);
    ragged_eos(&f);
    grpo_rollout ref[NB] = {{0}};
    grpo_rng ref_rng[NB][MAXB * G];
    run_static(&f, ref, ref_rng);
    for (int stop = 0; stop < 2; stop++) {
        grpo_error err;
        grpo_error_init(&err);
        grpo_rollout out[NB] = {{0}};
        grpo_rng rng[NB][MAXB * G];
        grpo_sampler_batch q[NB];
        int32_t events[4 * ROWS], n_events = 0;
        hook h[NB];
        grpo_sampler_row_end re[NB];
        for (int32_t b = 0; b < NB; b++) {
            seed_streams(rng[b], b);
            h[b] = (hook){b, events, &n_events, &out[b], {0}, 0, stop && b == 0 ? 2 : 0};
            re[b] = (grpo_sampler_row_end){h_row, &h[b], h_step, h_begin, h_finish};
            q[b] = (grpo_sampler_batch){f.prompt[b], f.pmask[b], Bs[b], Ps[b], rng[b], &re[b],
                                        &out[b]};
        }
        ck_ok(grpo_sampler_run_queue(f.m, &f.o, q, NB, 5, NULL, &err), &err);
        /* begin 0, rows of 0, finish 0, begin 1, rows of 1, finish 1 */
        int32_t e = 0, seen[NB][MAXB * G] = {{0}};
        for (int32_t b = 0; b < NB; b++) {
            ck_assert_int_eq(events[e++], -1 - b);
            while (events[e] >= 0) {
                int32_t rb = events[e] / 1000, n = events[e] % 1000;
                ck_assert_msg(rb == b, "stop %d: a row of batch %d reached row_end in batch %d's "
                              "turn", stop, rb, b);
                ck_assert_int_eq(seen[b][n]++, 0);
                ck_assert_int_eq(h[b].len_at_end[n], ref[b].len[n]);
                e++;
            }
            ck_assert_int_eq(events[e++], -100 - b);
        }
        ck_assert_int_eq(e, n_events);
        for (int32_t n = 0; n < Bs[1] * G; n++) ck_assert(seen[1][n]);
        for (int32_t n = 0; n < Bs[0] * G; n++) ck_assert(stop || seen[0][n]);
        int32_t ended0 = 0;
        for (int32_t n = 0; n < Bs[0] * G; n++) ended0 += seen[0][n];
        if (stop) ck_assert_msg(ended0 < Bs[0] * G, "the stop aborted no row of batch 0");
        ck_same(&out[1], &ref[1], "after a stop", 5, 1);
        if (!stop) ck_same(&out[0], &ref[0], "callbacks", 5, 0);
        for (int32_t b = 0; b < NB; b++) grpo_rollout_free(&out[b]);
    }
    for (int32_t b = 0; b < NB; b++) grpo_rollout_free(&ref[b]);
    fixture_close(&f);
}
END_TEST

/* A token budget shared by the queue: each row is its static self cut short (its tokens a prefix
 * of the static row's), the rows it cut are the truncated ones shorter than their static row,
 * counted in their batch's budget_cut, rows still waiting end empty; at most one step's live
 * rows past the budget. */
START_TEST(a_budget_cuts_live_and_waiting_rows_to_prefixes) {
    fixture f;
    fixture_open(&f, 0);
    ragged_eos(&f);
    grpo_rollout ref[NB] = {{0}};
    grpo_rng ref_rng[NB][MAXB * G];
    run_static(&f, ref, ref_rng);
    grpo_error err;
    grpo_error_init(&err);
    grpo_rollout out[NB] = {{0}};
    grpo_rng rng[NB][MAXB * G];
    grpo_sampler_batch q[NB];
    for (int32_t b = 0; b < NB; b++) {
        seed_streams(rng[b], b);
        q[b] = (grpo_sampler_batch){f.prompt[b], f.pmask[b], Bs[b], Ps[b], rng[b], NULL, &out[b]};
    }
    int64_t budget = 25;
    f.o.budget = &budget;
    ck_ok(grpo_sampler_run_queue(f.m, &f.o, q, NB, 3, NULL, &err), &err);
    int32_t cut = 0, counted = 0, empty = 0, tokens = 0;
    for (int32_t b = 0; b < NB; b++) {
        counted += out[b].budget_cut;
        for (int32_t n = 0; n < out[b].N; n++) {
            int32_t len = out[b].len[n];
            size_t at = (size_t)n * TN;
            tokens += len;
            ck_assert_int_le(len, ref[b].len[n]);
            ck_assert(!memcmp(out[b].ids + at, ref[b].ids + at, (size_t)len * 4));
            ck_assert(!memcmp(out[b].logp + at, ref[b].logp + at, (size_t)len * 4));
            if (len < ref[b].len[n]) ck_assert(out[b].truncated[n]), cut++;
            empty += len == 0;
        }
    }
    ck_assert_msg(cut > 0 && counted == cut, "rows cut %d, counted %d", cut, counted);
    ck_assert_msg(empty > 0, "no waiting row was cut empty");
    ck_assert_msg(tokens >= 25 && tokens <= 25 + 3, "%d tokens for a budget of 25", tokens);
    for (int32_t b = 0; b < NB; b++) grpo_rollout_free(&out[b]), grpo_rollout_free(&ref[b]);
    fixture_close(&f);
}
END_TEST

/* One batch that fits max_live runs the static schedule (today's cache: its rows only). */
START_TEST(one_batch_within_the_cap_runs_static) {
    fixture f;
    fixture_open(&f, 0);
    grpo_error err;
    grpo_error_init(&err);
    grpo_rollout out = {0};
    grpo_rng rng[MAXB * G];
    seed_streams(rng, 0);
    grpo_sampler_batch q = {f.prompt[0], f.pmask[0], Bs[0], Ps[0], rng, NULL, &out};
    grpo_sampler_stats st;
    ck_ok(grpo_sampler_run_queue(f.m, &f.o, &q, 1, 0, &st, &err), &err);
    ck_assert(!st.continuous);
    ck_assert_int_eq(st.live_rows_max, Bs[0] * G);
    ck_assert_int_eq(st.refills, 0);
    ck_assert_int_eq(f.m->kv.R, Bs[0] * G);
    grpo_rollout_free(&out);
    fixture_close(&f);
}
END_TEST

int main(void) {
    Suite *s = suite_create("continuous_decode");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, continuous_rows_equal_the_static_schedules, 0, 3);
    tcase_add_test(tc, callbacks_keep_batch_order_and_a_stop_aborts_one_batch);
    tcase_add_test(tc, a_budget_cuts_live_and_waiting_rows_to_prefixes);
    tcase_add_test(tc, one_batch_within_the_cap_runs_static);
    tcase_add_test(tc, forced_lengths_keep_the_static_rows);
    tcase_add_test(tc, paged_cache_follows_live_tokens);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
