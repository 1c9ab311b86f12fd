/*
 * test_cuda_sample.c — sampling on the device: grpo_ops.sample_rows of the cuda backend
 * (kernels/cuda/sample.cu) against its reference, the host's grpo_sample_row
 * (core/host/sampling.c), with the same uniforms, on random rows of logits: V from 50 to past
 * the block size (256) and past one element per thread (1000), each processor alone and all
 * together; then a whole rollout (grpo_sampler_run) on the cuda backend against the cpu backend
 * (tests/cuda_parity.h: a real GPU, or the host emulation under GRPO_CUDA_EMULATION=1).
 *
 * Tolerances:
 * - ids: equal. The device forms every probability with the CPU's operations; only the order
 *   of the double sums differs, which moves a cumulative boundary by ~1e-16 relative: a random
 *   u (or 1 - top_p) falls that close to one with probability ~1e-15 per row.
 * - logp, plogp: the same double log-softmax with its sum in another order, rounded to fp32:
 *   equal or one fp32 ulp apart; we allow two, |cuda - cpu| <= 2^-22 |cpu| (+ 1e-30).
 * - the whole rollout: the model's logits themselves differ between the backends (~1e-6,
 *   their reductions run in another order), so logp and plogp are held to 1e-4, as
 *   test_sampler's two paths through one model; the tokens must still be equal (a 1e-6 shift
 *   of a cumulative boundary moves a draw with probability ~1e-6 per token).
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_parity.h"
#include "host/host.h"
#include "host/model_instance.h"
#include "host/registry.h"
#include "host/sampler.h"
#include "host/sampling.h"

static cuda_parity P;

#define R_ROWS 12 /* rows per call */
#define H_HIST 40 /* history stride */
#define LP_RTOL (1.0 / 4194304.0) /* 2^-22: two fp32 ulps */

typedef struct sample_case {
    const char *name;
    grpo_sampling p;
    int ties; /* logits on a coarse grid: many equal values (argmax, top-k and top-p ties) */
} sample_case;

static const sample_case cases[] = {
    {"greedy with ties", {0.0f, 0, 1.0f, 0.0f, 1.0f}, 1},
    {"greedy, penalised", {0.0f, 0, 1.0f, 0.0f, 1.7f}, 0},
    {"temperature", {0.7f, 0, 1.0f, 0.0f, 1.0f}, 0},
    {"temperature 1", {1.0f, 0, 1.0f, 0.0f, 1.0f}, 0},
    {"top-k with ties", {1.0f, 7, 1.0f, 0.0f, 1.0f}, 1},
    {"top-k 1", {1.3f, 1, 1.0f, 0.0f, 1.0f}, 0},
    {"top-p", {1.0f, 0, 0.8f, 0.0f, 1.0f}, 0},
    {"top-p with ties", {0.9f, 0, 0.5f, 0.0f, 1.0f}, 1},
    {"top-p 0", {1.0f, 0, 0.0f, 0.0f, 1.0f}, 0},
    {"min-p", {1.0f, 0, 1.0f, 0.1f, 1.0f}, 0},
    {"repetition penalty", {1.0f, 0, 1.0f, 0.0f, 1.4f}, 0},
    {"penalty below 1", {0.8f, 0, 1.0f, 0.0f, 0.7f}, 0},
    {"all combined", {0.8f, 40, 0.9f, 0.05f, 1.2f}, 0},
    {"all combined with ties", {1.2f, 9, 0.7f, 0.02f, 1.3f}, 1},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))
static const int32_t vocab[] = {50, 173, 300, 1000};
#define N_VOCAB ((int)(sizeof vocab / sizeof vocab[0]))

/* A random row set: logits (R,V), histories (R,H) of tokens from a small range (many
 * repeats) with a few outside [0,V) (skipped by the penalty), n_hist (R) in [0, H-1]. */
typedef struct rows {
    int32_t V;
    float logits[R_ROWS * 1000];
    int32_t hist[R_ROWS * H_HIST], n_hist[R_ROWS];
} rows;

static void rows_fill(rows *w, int32_t V, int ties) {
    w->V = V;
    for (int32_t i = 0; i < R_ROWS * V; i++) {
        float x = cuda_parity_uniform(-4.0f, 4.0f);
        w->logits[i] = ties ? floorf(x * 2.0f) / 2.0f : x;
    }
    for (int32_t r = 0; r < R_ROWS; r++) {
        w->n_hist[r] = (int32_t)cuda_parity_uniform(0.0f, (float)(H_HIST - 1));
        for (int32_t j = 0; j < H_HIST; j++) {
            int32_t t = (int32_t)cuda_parity_uniform(0.0f, 20.0f);
            w->hist[r * H_HIST + j] = j % 11 == 5 ? -1 : j % 13 == 7 ? V + 2 : t % V;
        }
    }
}

/* The op on the device against grpo_sample_row on the host, row by row; plogp asked or not
 * (not asked: the op must leave it alone). Pairs (cuda_parity.h): .cpu holds the reference. */
static void check_case(const sample_case *c, int32_t V, int with_plogp) {
    static rows w;
    rows_fill(&w, V, c->ties);
    uint64_t lbytes = (uint64_t)R_ROWS * V * sizeof(float), hbytes = sizeof w.hist;
    cuda_pair logits = cuda_pair_new(&P, w.logits, lbytes), u = cuda_pair_rand(&P, R_ROWS, 0, 1);
    cuda_pair hist = cuda_pair_new(&P, w.hist, hbytes);
    cuda_pair nh = cuda_pair_new(&P, w.n_hist, sizeof w.n_hist);
    cuda_pair ids = cuda_pair_fill(&P, R_ROWS, NAN), lp = cuda_pair_fill(&P, R_ROWS, NAN);
    cuda_pair plp = cuda_pair_fill(&P, R_ROWS, NAN);
    int32_t *want_ids = ids.cpu, *want_hist = hist.cpu, got_ids[R_ROWS];
    const float *uh = u.cpu;
    float *work = malloc((size_t)V * sizeof(float)), *back = malloc(lbytes + hbytes);
    void *scratch = malloc((size_t)V * 12);
    for (int32_t r = 0; r < R_ROWS; r++) {
        float *want_plp = with_plogp ? (float *)plp.cpu + r : NULL;
        want_ids[r] = grpo_sample_row(&c->p, w.logits + (size_t)r * V, V, w.hist + r * H_HIST,
                                      w.n_hist[r], uh[r], (float *)lp.cpu + r, want_plp, work,
                                      scratch);
        want_hist[r * H_HIST + w.n_hist[r]] = want_ids[r];
    }
    P.cuda->sample_rows(P.cuda->ctx, ids.dev, lp.dev, with_plogp ? plp.dev : NULL, logits.dev,
                        u.dev, hist.dev, nh.dev, H_HIST, R_ROWS, V, c->p.temperature, c->p.top_k,
                        c->p.top_p, c->p.min_p, c->p.repetition_penalty);
    P.cuda->download(P.cuda->ctx, got_ids, ids.dev, sizeof got_ids);
    for (int32_t r = 0; r < R_ROWS; r++)
        ck_assert_msg(got_ids[r] == want_ids[r], "%s, V %d, row %d: cuda id %d, host %d (u %.9g)",
                      c->name, V, r, got_ids[r], want_ids[r], uh[r]);
    ck_assert_int_eq(cuda_pair_compare(&P, &lp, R_ROWS, 1e-30, LP_RTOL, c->name), 0);
    ck_assert_int_eq(cuda_pair_compare(&P, &plp, R_ROWS, 1e-30, LP_RTOL, c->name), 0);
    P.cuda->download(P.cuda->ctx, back, hist.dev, hbytes);
    ck_assert_msg(!memcmp(back, want_hist, hbytes),
                  "%s, V %d: history is not the input with each id appended at n_hist", c->name, V);
    P.cuda->download(P.cuda->ctx, back, logits.dev, lbytes);
    ck_assert_msg(!memcmp(back, w.logits, lbytes), "%s, V %d: the op wrote its logits", c->name, V);
    cuda_pair *all[] = {&logits, &u, &hist, &nh, &ids, &lp, &plp};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) cuda_pair_free(&P, all[i]);
    free(work), free(back), free(scratch);
}

/* Each case on each V, with plogp asked (and once without: the op must leave it alone). */
START_TEST(sample_rows_equal_host_draws) {
    const sample_case *c = &cases[_i];
    for (int v = 0; v < N_VOCAB; v++) check_case(c, vocab[v], 1);
    check_case(c, vocab[0], 0);
}
END_TEST

/* The draws really depend on u and on the processors (the comparison above is not vacuous):
 * over the rows of the "temperature" case, several distinct tokens come out. */
START_TEST(draws_are_spread) {
    static rows w;
    rows_fill(&w, 300, 0);
    float work[300], lp, u[R_ROWS];
    for (int32_t r = 0; r < R_ROWS; r++) u[r] = cuda_parity_uniform(0.0f, 1.0f);
    static double scratch[300 * 2]; /* 12 bytes per token */
    int distinct = 0, seen[300] = {0};
    for (int32_t r = 0; r < R_ROWS; r++) {
        int32_t t = grpo_sample_row(&cases[2].p, w.logits + r * 300, 300, NULL, 0, u[r], &lp,
                                    NULL, work, scratch);
        distinct += !seen[t]++;
    }
    ck_assert_int_ge(distinct, R_ROWS / 2);
}
END_TEST

/* ---- a whole rollout on the cuda backend -------------------------------------------------- */

typedef struct model_run {
    grpo_host host;
    grpo_registry reg;
    grpo_model *m;
} model_run;

static void model_open(model_run *mr, grpo_ops *ops) {
    grpo_error err;
    grpo_error_init(&err);
    memset(mr, 0, sizeof *mr);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/dense/llama", GRPO_SOURCE_DIR);
    mr->host = *grpo_default_host();
    mr->host.ops = ops;
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(grpo_registry_scan(&mr->reg, dirs, &err) == GRPO_OK, "%s", err.message);
    ck_assert_msg(grpo_model_open_dir(&mr->m, &mr->reg, &mr->host, dir, 0, &err) == GRPO_OK, "%s",
                  err.message);
}

static void model_close(model_run *mr) {
    grpo_model_close(mr->m);
    grpo_registry_free(&mr->reg);
}

/* The same seed on the cpu backend (the host draws) and on cuda (sample_rows draws) gives the
 * same completions: sampled with every processor and an EOS that ends rows early, and greedy. */
START_TEST(rollout_on_cuda_equals_cpu) {
    ck_assert_msg(P.cuda->attention_forward && P.cuda->attention_decode,
                  "the cuda backend has no attention ops");
    model_run cpu, dev;
    model_open(&cpu, P.cpu), model_open(&dev, P.cuda);
    enum { B = 2, PL = 5, G = 3, T = 12 };
    const int32_t prompt[B * PL] = {0, 0, 7, 8, 9, 3, 4, 5, 6, 7}; /* row 0 left-padded */
    const int32_t pmask[B * PL] = {0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    for (int k = 0; k < 2; k++) {
        grpo_sampler_opts o = {{0.0f, 0, 1.0f, 0.0f, 1.3f}, G, T, {0}, 0, 0, 1,
                               NULL, NULL, NULL, 0, 0};
        if (k == 0) o.sampling = (grpo_sampling){1.2f, 20, 0.9f, 0.02f, 1.2f};
        grpo_rollout a = {0}, b = {0};
        for (int pass = 0; pass < 2; pass++) { /* pass 0 picks an EOS the run draws early */
            grpo_error err;
            grpo_error_init(&err);
            grpo_rng ra, rb;
            grpo_rng_seed(&ra, 11), grpo_rng_seed(&rb, 11);
            ck_assert_msg(grpo_sampler_run(cpu.m, &o, prompt, pmask, B, PL, &ra, &a, &err) ==
                              GRPO_OK, "%s", err.message);
            ck_assert_msg(grpo_sampler_run(dev.m, &o, prompt, pmask, B, PL, &rb, &b, &err) ==
                              GRPO_OK, "%s", err.message);
            o.eos[0] = a.ids[2], o.eos[1] = a.ids[T + 3], o.n_eos = 2;
        }
        int ended = 0;
        for (int32_t n = 0; n < a.N; n++) {
            ended |= a.len[n] < T;
            ck_assert_int_eq(b.len[n], a.len[n]);
            ck_assert_int_eq(b.truncated[n], a.truncated[n]);
            for (int32_t t = 0; t < T; t++) {
                size_t i = (size_t)n * T + t;
                ck_assert_msg(b.ids[i] == a.ids[i], "case %d row %d step %d: cuda %d, cpu %d", k,
                              n, t, b.ids[i], a.ids[i]);
                ck_assert(b.mask[i] == a.mask[i]);
                ck_assert_msg(fabsf(b.logp[i] - a.logp[i]) <= 1e-4f &&
                                  fabsf(b.plogp[i] - a.plogp[i]) <= 1e-4f,
                              "case %d row %d step %d: logp %g/%g, plogp %g/%g", k, n, t,
                              b.logp[i], a.logp[i], b.plogp[i], a.plogp[i]);
            }
        }
        ck_assert_msg(ended, "case %d: no row ended early", k);
        grpo_rollout_free(&a), grpo_rollout_free(&b);
    }
    model_close(&dev), model_close(&cpu);
}
END_TEST

int main(void) {
    cuda_parity_open(&P);
    if (!grpo_ops_supports(P.cuda, sample_rows)) {
        fprintf(stderr, "the cuda backend has no sample_rows\n");
        return EXIT_FAILURE;
    }
    Suite *s = suite_create("cuda_sample");
    TCase *tc = tcase_create("parity");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, sample_rows_equal_host_draws, 0, N_CASES);
    tcase_add_test(tc, draws_are_spread);
    /* the model's forward on cuda needs the attention kernels (kernels/cuda/attention.cu): the
     * backend has them, so a table without them fails this test rather than leaving it out */
    tcase_add_test(tc, rollout_on_cuda_equals_cpu);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    /* one process: a CUDA context does not survive fork(), and the backends are opened once */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    cuda_parity_close(&P);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
