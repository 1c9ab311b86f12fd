/*
 * test_cuda_attention_segments.c — packed rows in the CUDA backend's attention (ABI 1.7: a mask
 * value > 0 is a segment id; query t attends to keys s <= t of its own segment), as the cpu
 * backend has them (tests/test_attention_segments.c). Runs on a real GPU, or under the host
 * emulation with GRPO_CUDA_EMULATION=1 (tiny shapes), like the other test_cuda_* suites.
 *
 * Row 0 of T = 96 holds left padding, segment 1 (5 tokens), segment 2 (40: it crosses 32-key tiles
 * and 32-query tiles), segment 3 (9), segment 2 again (6 tokens after segment 3: a segment need
 * not be contiguous, the cpu backend takes it whole), segment 7 (20) and right padding; row 1 is a
 * plain 0/1 row (left padding, a hole) in the same call: the two kinds of row side by side.
 *   1. Alone: each contiguous segment (1, 3 and 7) computed as a row of its own with a 0/1 mask.
 *      The forward's out and lse must be the segment's bits (a query walks its segment's keys
 *      from their first, in the tiles a row of its own has: kernels/cuda/attention.cu); dq, dk,
 *      dv within 1e-5 relative (their tiles are counted from other columns; a key of another
 *      segment leaking in is off by the size of the values). Padding queries give zeros.
 *   2. Parity: out, lse, dq, dk, dv of the whole call against the cpu backend (the reference), with
 *      test_cuda_attention.c's tolerances, the dk/dv pass both ways (GRPO_CUDA_ATTENTION_SPLIT).
 * Shapes: GQA (NH 4 over NKV 2) with HD 16 (one dim a lane) and HD 40 (two dims a lane, not a
 * multiple of 32).
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_parity.h"

static cuda_parity P;

static void setup(void) { cuda_parity_open(&P); }
static void teardown(void) { cuda_parity_close(&P); }

enum { B = 2, T = 96, NH = 4, NKV = 2, NRUN = 5 };
/* row 0's runs: start, length, segment id */
static const int32_t run_at[NRUN] = {3, 8, 48, 57, 63}, run_len[NRUN] = {5, 40, 9, 6, 20};
static const int32_t run_id[NRUN] = {1, 2, 3, 2, 7};

static void make_mask(int32_t *m) {
    memset(m, 0, (size_t)B * T * sizeof *m);
    for (int r = 0; r < NRUN; r++)
        for (int32_t t = 0; t < run_len[r]; t++) m[run_at[r] + t] = run_id[r];
    for (int32_t t = 10; t < T - 4; t++) m[T + t] = t != 30; /* row 1: 0/1, a hole */
}

/* The op outputs of one call: out, lse, dq, dk, dv (device). */
typedef struct att_out {
    void *out, *lse, *dq, *dk, *dv;
} att_out;

static att_out run_cuda(const void *q, const void *k, const void *v, const void *dout,
                        const void *mask, int32_t nb, int32_t nt, int32_t HD) {
    grpo_ops *c = P.cuda;
    uint64_t nq = (uint64_t)nb * nt * NH * HD, nkv = (uint64_t)nb * nt * NKV * HD;
    att_out r = {c->alloc(c->ctx, nq * 4), c->alloc(c->ctx, (uint64_t)nb * NH * nt * 4),
                 c->alloc(c->ctx, nq * 4), c->alloc(c->ctx, nkv * 4), c->alloc(c->ctx, nkv * 4)};
    c->attention_forward(c->ctx, r.out, r.lse, q, k, v, mask, nb, nt, NH, NKV, HD);
    c->attention_backward(c->ctx, r.dq, r.dk, r.dv, dout, r.out, r.lse, q, k, v, mask, nb, nt,
                          NH, NKV, HD);
    return r;
}

static void out_free(att_out *r) {
    void *all[] = {r->out, r->lse, r->dq, r->dk, r->dv};
    for (int i = 0; i < 5; i++) P.cuda->free(P.cuda->ctx, all[i]);
}

static float *dev_get(const void *d, uint64_t n) {
    float *h = malloc(n * sizeof(float) + 1);
    P.cuda->sync(P.cuda->ctx);
    P.cuda->download(P.cuda->ctx, h, d, n * sizeof(float));
    return h;
}

static void *dev_new(const void *host, uint64_t bytes) {
    void *d = P.cuda->alloc(P.cuda->ctx, bytes);
    P.cuda->upload(P.cuda->ctx, d, host, bytes);
    return d;
}

static void near(const float *a, const float *b, size_t n, const char *what, int run) {
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabsf(a[i] - b[i]) <= 1e-5f * (1.0f + fabsf(b[i])),
                      "run %d %s[%zu]: packed %g alone %g", run, what, i, a[i], b[i]);
}

/* Case 1 for head width HD: each contiguous segment of row 0 against itself alone. */
static void check_alone(int32_t HD) {
    uint64_t qr = (uint64_t)NH * HD, kr = (uint64_t)NKV * HD;
    int32_t mask[B * T];
    make_mask(mask);
    cuda_pair q = cuda_pair_rand(&P, (uint64_t)B * T * qr, -1.5f, 1.5f);
    cuda_pair k = cuda_pair_rand(&P, (uint64_t)B * T * kr, -1.5f, 1.5f);
    cuda_pair v = cuda_pair_rand(&P, (uint64_t)B * T * kr, -1.0f, 1.0f);
    cuda_pair dout = cuda_pair_rand(&P, (uint64_t)B * T * qr, -1.0f, 1.0f);
    void *dmask = dev_new(mask, sizeof mask);
    att_out all = run_cuda(q.dev, k.dev, v.dev, dout.dev, dmask, B, T, HD);
    float *out = dev_get(all.out, B * T * qr), *lse = dev_get(all.lse, (uint64_t)B * NH * T);
    float *dq = dev_get(all.dq, B * T * qr), *dk = dev_get(all.dk, B * T * kr);
    float *dv = dev_get(all.dv, B * T * kr);
    for (int32_t t = 0; t < T; t++) /* row 0's padding queries: zeros */
        for (uint64_t i = 0; i < qr && !mask[t]; i++)
            ck_assert(out[t * qr + i] == 0.0f && dq[t * qr + i] == 0.0f);
    int32_t ones[T];
    for (int32_t t = 0; t < T; t++) ones[t] = 1;
    void *dones = dev_new(ones, sizeof ones);
    for (int r = 0; r < NRUN; r++) {
        if (r == 1 || r == 3) continue; /* segment 2 is not contiguous: case 2 covers it */
        int32_t n = run_len[r], a = run_at[r];
        const float *qh = q.cpu, *kh = k.cpu, *vh = v.cpu, *dh = dout.cpu;
        void *aq = dev_new(qh + a * qr, n * qr * 4), *ak = dev_new(kh + a * kr, n * kr * 4);
        void *av = dev_new(vh + a * kr, n * kr * 4), *ad = dev_new(dh + a * qr, n * qr * 4);
        att_out one = run_cuda(aq, ak, av, ad, dones, 1, n, HD);
        float *o1 = dev_get(one.out, n * qr), *l1 = dev_get(one.lse, (uint64_t)NH * n);
        float *q1 = dev_get(one.dq, n * qr), *k1 = dev_get(one.dk, n * kr);
        float *v1 = dev_get(one.dv, n * kr);
        ck_assert_msg(memcmp(o1, out + a * qr, n * qr * 4) == 0, "HD %d run %d: out bits", HD,
                      r);
        for (int h = 0; h < NH; h++)
            ck_assert_msg(memcmp(l1 + (size_t)h * n, lse + (size_t)h * T + a, n * 4) == 0,
                          "HD %d run %d head %d: lse bits", HD, r, h);
        near(dq + a * qr, q1, n * qr, "dq", r);
        near(dk + a * kr, k1, n * kr, "dk", r);
        near(dv + a * kr, v1, n * kr, "dv", r);
        free(o1), free(l1), free(q1), free(k1), free(v1);
        out_free(&one);
        void *bufs[] = {aq, ak, av, ad};
        for (int i = 0; i < 4; i++) P.cuda->free(P.cuda->ctx, bufs[i]);
    }
    free(out), free(lse), free(dq), free(dk), free(dv);
    out_free(&all);
    P.cuda->free(P.cuda->ctx, dmask), P.cuda->free(P.cuda->ctx, dones);
    cuda_pair *ps[] = {&q, &k, &v, &dout};
    for (int i = 0; i < 4; i++) cuda_pair_free(&P, ps[i]);
}

/* The buffer of the side being run: the cpu backend's (side 0) or the device's (side 1). */
#define AT(b) ((void *)(side ? (b).dev : (b).cpu))

/* Case 2 for head width HD: the whole call against the cpu backend. */
static void check_parity(int32_t HD) {
    uint64_t nq = (uint64_t)B * T * NH * HD, nkv = (uint64_t)B * T * NKV * HD;
    int32_t mask[B * T];
    make_mask(mask);
    cuda_pair m = cuda_pair_new(&P, mask, sizeof mask);
    cuda_pair q = cuda_pair_rand(&P, nq, -1.5f, 1.5f), k = cuda_pair_rand(&P, nkv, -1.5f, 1.5f);
    cuda_pair v = cuda_pair_rand(&P, nkv, -1.0f, 1.0f), d = cuda_pair_rand(&P, nq, -1.0f, 1.0f);
    cuda_pair out = cuda_pair_fill(&P, nq, NAN);
    cuda_pair lse = cuda_pair_fill(&P, (uint64_t)B * NH * T, NAN);
    for (int side = 0; side < 2; side++) {
        grpo_ops *o = side ? P.cuda : P.cpu;
        o->attention_forward(o->ctx, AT(out), AT(lse), AT(q), AT(k), AT(v), AT(m), B, T, NH, NKV,
                             HD);
    }
    char what[96];
    snprintf(what, sizeof what, "segments HD %d: out", HD);
    ck_assert_int_eq(cuda_pair_compare(&P, &out, nq, 1e-5, 1e-4, what), 0);
    snprintf(what, sizeof what, "segments HD %d: lse", HD);
    ck_assert_int_eq(cuda_pair_compare(&P, &lse, (uint64_t)B * NH * T, 1e-5, 1e-4, what), 0);
    for (int split = 0; split < 2; split++) {
        setenv("GRPO_CUDA_ATTENTION_SPLIT", split ? "1" : "0", 1);
        cuda_pair dq = cuda_pair_fill(&P, nq, NAN), dk = cuda_pair_fill(&P, nkv, NAN);
        cuda_pair dv = cuda_pair_fill(&P, nkv, NAN);
        for (int side = 0; side < 2; side++) {
            grpo_ops *o = side ? P.cuda : P.cpu;
            o->attention_backward(o->ctx, AT(dq), AT(dk), AT(dv), AT(d), AT(out), AT(lse), AT(q),
                                  AT(k), AT(v), AT(m), B, T, NH, NKV, HD);
        }
        snprintf(what, sizeof what, "segments HD %d split %d: dq", HD, split);
        ck_assert_int_eq(cuda_pair_compare(&P, &dq, nq, 2e-5, 1e-4, what), 0);
        snprintf(what, sizeof what, "segments HD %d split %d: dk", HD, split);
        ck_assert_int_eq(cuda_pair_compare(&P, &dk, nkv, 2e-5, 1e-4, what), 0);
        snprintf(what, sizeof what, "segments HD %d split %d: dv", HD, split);
        ck_assert_int_eq(cuda_pair_compare(&P, &dv, nkv, 2e-5, 1e-4, what), 0);
        cuda_pair_free(&P, &dq), cuda_pair_free(&P, &dk), cuda_pair_free(&P, &dv);
    }
    unsetenv("GRPO_CUDA_ATTENTION_SPLIT");
    cuda_pair *ps[] = {&m, &q, &k, &v, &d, &out, &lse};
    for (int i = 0; i < 7; i++) cuda_pair_free(&P, ps[i]);
}

START_TEST(a_segment_computes_as_a_row_of_its_own) {
    check_alone(16);
    check_alone(40);
}
END_TEST

START_TEST(segments_match_the_cpu_backend) {
    check_parity(16);
    check_parity(40);
}
END_TEST

/* The cuda backend opens in each test's own process (a CUDA context does not survive fork), so
 * availability is probed in a child first: exit 77 (skipped) without a GPU or the emulation. */
static void skip_unless_available(void) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        cuda_parity probe;
        cuda_parity_open(&probe); /* exits 77 when unavailable */
        cuda_parity_close(&probe);
        _exit(0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        fprintf(stderr, "test_cuda_attention_segments: the availability probe failed\n");
        exit(1);
    }
    if (WEXITSTATUS(status) != 0) exit(WEXITSTATUS(status));
}

int main(void) {
    skip_unless_available();
    Suite *s = suite_create("cuda_attention_segments");
    TCase *tc = tcase_create("segments");
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_segment_computes_as_a_row_of_its_own);
    tcase_add_test(tc, segments_match_the_cpu_backend);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
