/*
 * test_kv_paged.c — a model's decode on a paged KV cache (ABI 1.9: core/host/kv_pages.c, the
 * packs' plugins/models/common/lm_infer.c, the cpu op attention_decode_paged) gives the logits
 * of the unpaged cache, bit for bit, for the dense and MoE packs.
 *
 * B = 2 prompts of P = 21 columns (the second left-padded by 5) are prefilled and fanned out
 * to G = 3 rows each with kv_copy_row (the sampler's fan-out order), then 6 rows decode 60
 * steps of fixed random tokens (slots up to 80: six pages of 16 a row; at the end 5 rows x 5
 * pages of their own + 2 shared = 27 pages, so the pool grows past its first 6 x 3 = 18);
 * after step 12 the last row moves into row 2 (a row that ended: kv_move_row)
 * and 5 rows go on. Every step's logits (R,V) must have the unpaged run's bits.
 * The pages, counted by reasoning: after the fan-out the 6 rows share their prompt's pages
 * (2 prompts x ceil(21/16) = 2 blocks: 4 pages, not 6 x 2); the first decode writes slot 21
 * (block 1, shared by 3 rows): two rows copy it, the last sharer keeps it, so 2 + 6 pages;
 * dropping every row frees every page.
 * The sampler (grpo_sampler_run_queue of one batch: the static schedule; on cuda the device
 * sampling path) gives paged and unpaged runs the same bytes (ids, logp, plogp, len), with
 * EOS ids taken from a first run so that rows end at different lengths (the host moves the last
 * live row into an ended one's cache row and drops its pages), and reports pages in use only
 * when paged.
 * A second paged run on the same model starts with the pages the first one's pool ended with
 * (grpo_model.kv_pages_last): it never grows the pool, and its logits are the same bits. Its
 * pool is the first one's memory (kept as the spare, no fresh pages), zeroed as a new one is.
 * A pool the backend cannot grow is an error naming the model and the page counts; a pack built
 * before ABI 1.9 gets the unpaged cache.
 * The backend is GRPO_TEST_BACKEND (tests/test_backend.h; default cpu): tests/cuda_models.cmake
 * registers the suite again on cuda (test_kv_paged_cuda_emu: the host emulation), where the
 * paged decode is kernels/cuda/attention.cu's and the same bits are asked for.
 */
#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/host.h"
#include "host/model_instance.h"
#include "host/registry.h"
#include "host/sampler.h"
#include "kernels.h"
#include "test_backend.h"
#include "test_model_io.h"

enum { B = 2, G = 3, N = B * G, P = 21, STEPS = 60, MOVE_AT = 12, S = P + STEPS, PAD1 = 5 };

static const char *const dirs[] = {"dense/llama", "dense/qwen3", "moe/qwen3moe", "moe/minimind2"};

static void ck_ok(int rc, const grpo_error *err) {
    ck_assert_msg(rc == GRPO_OK, "status %d: %s", rc, err->message);
}

static uint32_t lcg(uint32_t *s) { return (*s = *s * 1103515245u + 12345u) >> 8; }

typedef struct run_in {
    int32_t prompt[B * P], pmask[B * P], ppos[B * P];
    int32_t tok[STEPS][N];
} run_in;

/* The paged pool of the last run(): its pages when reserved and at the end, its growths, its
 * memory when reserved and at the end. */
static int32_t pages_first, pages_end, pages_grows;
static const float *pool_first, *pool_end;

/* Every float of the paged pool is zero (as reserved). */
static void expect_pool_zeroed(const grpo_model *m) {
    size_t n = (size_t)m->pages.n_pages * m->pages.page_floats;
    float *h = malloc(n * sizeof(float));
    m->ops->download(m->ops->ctx, h, m->pages.pool, n * sizeof(float));
    m->ops->sync(m->ops->ctx);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(h[i] == 0.0f, "pool float %zu of %zu is %g, not zero", i, n, h[i]);
    free(h);
}

/* Prefill, fan-out, decode: the logits of every step (STEPS, N, V) into out. */
static void run(grpo_model *m, const run_in *in, int paged, float *out) {
    grpo_error err;
    grpo_error_init(&err);
    int32_t V = grpo_model_vocab(m), R = N;
    m->kv_unpaged = !paged;
    ck_ok(grpo_model_reserve_kv_paged(m, N, S, P, GRPO_KV_PAGE, &err), &err);
    ck_assert_int_eq(grpo_model_kv_paged(m), paged ? GRPO_KV_PAGE : 0);
    pages_first = m->pages.n_pages, pool_first = m->pages.pool;
    if (paged) expect_pool_zeroed(m);
    float *logits = malloc((size_t)N * V * sizeof(float));
    ck_ok(test_prefill(m, B, P, in->prompt, in->pmask, in->ppos, logits, &err), &err);
    for (int32_t b = B - 1; b >= 0; b--)
        for (int32_t g = G - 1; g >= 0; g--)
            ck_ok(grpo_model_kv_copy_row(m, b * G + g, b, P, &err), &err);
    if (paged) ck_assert_int_eq(m->pages.in_use, B * 2); /* the prompts' pages, shared */
    int32_t cm[N * S] = {0}, pos[N], len[N], row[N];
    for (int32_t r = 0; r < N; r++) {
        row[r] = r, len[r] = P;
        for (int32_t t = 0; t < P; t++) cm[r * S + t] = in->pmask[(r / G) * P + t];
        pos[r] = (r / G) ? P - PAD1 : P;
    }
    for (int32_t step = 0; step < STEPS; step++) {
        if (step == MOVE_AT) { /* row 2 ended: the last row moves into it */
            ck_ok(grpo_model_kv_move_row(m, 2, R - 1, len[R - 1], &err), &err);
            row[2] = row[R - 1], pos[2] = pos[R - 1], len[2] = len[R - 1];
            memcpy(cm + 2 * S, cm + (R - 1) * S, S * sizeof(int32_t));
            grpo_model_kv_drop_row(m, --R);
        }
        int32_t tok[N];
        for (int32_t r = 0; r < R; r++) tok[r] = in->tok[step][row[r]], len[r]++;
        for (int32_t r = 0; r < R; r++) cm[r * S + len[r] - 1] = 1;
        ck_ok(test_decode(m, R, tok, pos, cm, len, logits, &err), &err);
        if (paged && step == 0) ck_assert_int_eq(m->pages.in_use, B + N);
        for (int32_t r = 0; r < R; r++) {
            memcpy(out + ((size_t)step * N + row[r]) * V, logits + (size_t)r * V,
                   (size_t)V * sizeof(float));
            pos[r]++;
        }
    }
    if (paged) {
        ck_assert_int_gt(m->pages.n_pages, N * ((P + GRPO_KV_PAGE - 1) / GRPO_KV_PAGE + 1));
        for (int32_t r = 0; r < N; r++) grpo_model_kv_drop_row(m, r);
        ck_assert_int_eq(m->pages.in_use, 0);
        pages_end = m->pages.n_pages, pages_grows = m->pages.grows, pool_end = m->pages.pool;
    }
    grpo_model_release_kv(m);
    free(logits);
}

/* A model of tests/fixtures/DIR on a host whose ops are host_ops (the backend, or a table
 * wrapping it); the host and the registry live in the fixture, as long as the model. */
typedef struct fixture {
    grpo_host host;
    grpo_registry reg;
    grpo_model *m;
} fixture;

static grpo_ops *backend(int32_t threads) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *ops = test_backend_open(threads, &err);
    ck_assert_msg(ops != NULL, "%s", err.message);
    return ops;
}

static grpo_model *fixture_open(fixture *f, grpo_ops *host_ops, const char *fixture_dir,
                                int flags) {
    grpo_error err;
    grpo_error_init(&err);
    f->host = *grpo_default_host();
    f->host.ops = host_ops;
    memset(&f->reg, 0, sizeof f->reg);
    char *pack_dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    ck_ok(grpo_registry_scan(&f->reg, pack_dirs, &err), &err);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/%s", GRPO_SOURCE_DIR, fixture_dir);
    f->m = NULL;
    ck_ok(grpo_model_open_dir(&f->m, &f->reg, &f->host, dir, flags, &err), &err);
    return f->m;
}

static void fixture_close(fixture *f, grpo_ops *ops) {
    grpo_model_close(f->m);
    grpo_registry_free(&f->reg);
    grpo_backend_close(ops);
}

START_TEST(paged_decode_has_the_unpaged_logits) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *ops = backend(2);
    fixture f;
    grpo_model *m = fixture_open(&f, ops, dirs[_i], 0);
    int32_t V = grpo_model_vocab(m);
    run_in *in = calloc(1, sizeof *in);
    uint32_t seed = 5;
    for (int32_t b = 0; b < B; b++)
        for (int32_t t = 0, real = 0; t < P; t++) {
            int on = b == 0 || t >= PAD1;
            in->prompt[b * P + t] = on ? (int32_t)(lcg(&seed) % (uint32_t)(V - 1)) + 1 : 0;
            in->pmask[b * P + t] = on, in->ppos[b * P + t] = on ? real++ : 0;
        }
    for (int32_t s = 0; s < STEPS; s++)
        for (int32_t r = 0; r < N; r++) in->tok[s][r] = (int32_t)(lcg(&seed) % (uint32_t)V);
    size_t n = (size_t)STEPS * N * V;
    float *a = calloc(n, sizeof(float)), *p = calloc(n, sizeof(float));
    float *again = calloc(n, sizeof(float));
    run(m, in, 0, a);
    run(m, in, 1, p);
    ck_assert_int_gt(pages_grows, 0); /* the first pool grew: 18 pages to start */
    int32_t first_end = pages_end;
    const float *first_pool = pool_end;
    run(m, in, 1, again); /* the next starts with the pages the first ended with */
    ck_assert_int_eq(pages_first, first_end);
    ck_assert_ptr_eq(pool_first, first_pool); /* in the first one's memory, kept */
    ck_assert_int_eq(pages_grows, 0);
    for (int32_t s = 0; s < STEPS; s++)
        for (int32_t r = 0; r < N; r++) {
            size_t at = ((size_t)s * N + r) * V;
            ck_assert_msg(!memcmp(a + at, p + at, (size_t)V * sizeof(float)),
                          "%s: step %d row %d: paged logits differ", dirs[_i], s, r);
            ck_assert_msg(!memcmp(p + at, again + at, (size_t)V * sizeof(float)),
                          "%s: step %d row %d: a second paged run's logits differ", dirs[_i],
                          s, r);
        }
    free(a), free(p), free(again), free(in);
    fixture_close(&f, ops);
}
END_TEST

/* A pack built before ABI 1.9 (its descriptor's struct_size ends before kv_page_floats) gets
 * the unpaged cache, and decodes on it as before. */
START_TEST(a_pack_before_1_9_keeps_the_unpaged_cache) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *ops = backend(1);
    fixture f;
    grpo_model *m = fixture_open(&f, ops, "dense/llama", 0);
    const grpo_model_desc *desc = m->desc;
    grpo_model_desc old = *desc;
    old.struct_size = (uint32_t)offsetof(grpo_model_desc, kv_page_floats);
    m->desc = &old;
    ck_ok(grpo_model_reserve_kv_paged(m, 2, S, P, GRPO_KV_PAGE, &err), &err);
    ck_assert_int_eq(grpo_model_kv_paged(m), 0);
    ck_assert_ptr_null(m->pages.pool);
    int32_t V = grpo_model_vocab(m), ids[P], mask[P], pos[P], cm[2 * S] = {0}, tok[2] = {4, 5};
    int32_t tpos[2] = {P, P}, len[2] = {P + 1, P + 1};
    for (int32_t t = 0; t < P; t++) ids[t] = t + 1, mask[t] = 1, pos[t] = t;
    for (int32_t t = 0; t <= P; t++) cm[t] = cm[S + t] = 1;
    float *logits = malloc((size_t)2 * V * sizeof(float));
    ck_ok(test_prefill(m, 1, P, ids, mask, pos, logits, &err), &err);
    ck_ok(grpo_model_kv_copy_row(m, 1, 0, P, &err), &err);
    ck_ok(test_decode(m, 2, tok, tpos, cm, len, logits, &err), &err);
    m->desc = desc;
    free(logits);
    fixture_close(&f, ops);
}
END_TEST

/* ---- a pool that cannot grow -------------------------------------------------------------- */

/* The test backend's table with an alloc that fails above `limit` bytes (the pool's growth). */
static grpo_ops real_ops, small_ops;
static uint64_t limit;
static void *small_alloc(void *ctx, uint64_t bytes) {
    return bytes > limit ? NULL : real_ops.alloc(ctx, bytes);
}

/* Decode past the first pool when the backend refuses a larger one: an error that names the
 * model, the page counts and out of memory, not a crash. */
START_TEST(a_pool_that_cannot_grow_is_an_error) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *ops = backend(1);
    real_ops = *ops, small_ops = *ops, small_ops.alloc = small_alloc, limit = UINT64_MAX;
    fixture f;
    grpo_model *m = fixture_open(&f, &small_ops, "dense/llama", 0);
    int32_t V = grpo_model_vocab(m), ids[16], mask[16], pos[16], cm[S] = {0}, len = 16;
    ck_ok(grpo_model_reserve_kv_paged(m, 1, S, 16, GRPO_KV_PAGE, &err), &err);
    ck_assert_int_eq(m->pages.n_pages, 2); /* 1 row x (1 prompt page + 1) */
    limit = m->pages.page_floats * sizeof(float) * 2; /* no pool larger than today's */
    for (int32_t t = 0; t < 16; t++) ids[t] = t + 1, mask[t] = 1, pos[t] = t, cm[t] = 1;
    float *logits = malloc((size_t)V * sizeof(float));
    ck_ok(test_prefill(m, 1, 16, ids, mask, pos, logits, &err), &err);
    int rc = GRPO_OK;
    for (int32_t step = 0; step < 40 && rc == GRPO_OK; step++) { /* pages 2, 3: the third fails */
        int32_t tok = 5, p = len;
        cm[len++] = 1;
        rc = test_decode(m, 1, &tok, &p, cm, &len, logits, &err);
    }
    ck_assert_int_eq(rc, GRPO_ERR_NOMEM);
    ck_assert_msg(strstr(err.message, "cannot grow from 2 to 18 pages") &&
                      strstr(err.message, "out of memory") && strstr(err.message, "model "),
                  "%s", err.message);
    ck_assert_int_eq(len, 16 + 17); /* slots 16..31 fit the second page; slot 32 needs a third */
    limit = UINT64_MAX;
    free(logits);
    fixture_close(&f, ops);
}
END_TEST

/* ---- the sampler ---------------------------------------------------------------------------- */

enum { SB = 2, SG = 4, SP = 9, ST = 40 }; /* SP + ST = 49 slots: 4 pages a row */

/* One batch of SB prompts (the second left-padded by 3) through grpo_sampler_run_queue with
 * m's cache paged or not; its stats returned. */
static grpo_sampler_stats sample(grpo_model *m, const grpo_sampler_opts *o, int paged,
                                 grpo_rollout *out) {
    grpo_error err;
    grpo_error_init(&err);
    int32_t prompt[SB * SP], pmask[SB * SP];
    uint32_t seed = 9;
    for (int32_t i = 0; i < SB * SP; i++) {
        pmask[i] = i < SP || i % SP >= 3;
        prompt[i] = pmask[i] ? (int32_t)(lcg(&seed) % (uint32_t)(grpo_model_vocab(m) - 1)) + 1
                             : 0;
    }
    grpo_rng rng[SB * SG];
    for (int32_t i = 0; i < SB * SG; i++) grpo_rng_seed_stream(&rng[i], 11, 3, (uint64_t)i);
    grpo_sampler_batch q = {prompt, pmask, SB, SP, rng, NULL, out};
    grpo_sampler_stats st;
    m->kv_unpaged = !paged;
    ck_ok(grpo_sampler_run_queue(m, o, &q, 1, 0, &st, &err), &err);
    m->kv_unpaged = 0;
    return st;
}

START_TEST(the_sampler_pages_with_the_unpaged_completions) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *ops = backend(1);
    fixture f;
    grpo_model *m = fixture_open(&f, ops, dirs[_i], 1);
    grpo_sampler_opts o = {{0.8f, 0, 1.0f, 0.0f, 1.0f}, SG, ST, {0}, 0, 0, 1, NULL, NULL, NULL, 0, 0};
    grpo_rollout first = {0}, u = {0}, p = {0};
    sample(m, &o, 0, &first); /* EOS ids that rows draw early: ragged lengths */
    o.eos[0] = first.ids[3], o.eos[1] = first.ids[(size_t)5 * ST + 7], o.n_eos = 2;
    grpo_sampler_stats su = sample(m, &o, 0, &u), sp = sample(m, &o, 1, &p);
    size_t nt = (size_t)SB * SG * ST;
    ck_assert_int_eq(u.N, p.N);
    ck_assert_msg(!memcmp(u.ids, p.ids, nt * 4), "%s: paged ids differ", dirs[_i]);
    ck_assert_msg(!memcmp(u.logp, p.logp, nt * 4), "%s: paged logp differ", dirs[_i]);
    ck_assert_msg(!memcmp(u.plogp, p.plogp, nt * 4), "%s: paged plogp differ", dirs[_i]);
    ck_assert_msg(!memcmp(u.len, p.len, (size_t)u.N * 4), "%s: paged len differ", dirs[_i]);
    int32_t shortest = ST;
    for (int32_t n = 0; n < u.N; n++) shortest = u.len[n] < shortest ? u.len[n] : shortest;
    ck_assert_msg(shortest < ST && u.len[5] < ST, "%s: no row ended early", dirs[_i]);
    ck_assert_int_eq(su.kv_pages_max, 0);
    ck_assert_int_gt(sp.kv_pages_max, 0);
    grpo_rollout_free(&first), grpo_rollout_free(&u), grpo_rollout_free(&p);
    fixture_close(&f, ops);
}
END_TEST

int main(void) {
    test_backend_require();
    Suite *s = suite_create("kv_paged");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, paged_decode_has_the_unpaged_logits, 0,
                        (int)(sizeof dirs / sizeof dirs[0]));
    tcase_add_loop_test(tc, the_sampler_pages_with_the_unpaged_completions, 0,
                        (int)(sizeof dirs / sizeof dirs[0]));
    tcase_add_test(tc, a_pool_that_cannot_grow_is_an_error);
    tcase_add_test(tc, a_pack_before_1_9_keeps_the_unpaged_cache);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
