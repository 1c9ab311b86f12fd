/*
 * test_cuda_prefix_attention.c — the CUDA backend's shared-prefix attention (grpo/ops.h 1.6:
 * prefix_attention_forward / _backward) against the cpu backend's (kernels/cpu/attention.c,
 * tested against the concatenated rows [prefix | row] in test_kernels.c): same inputs uploaded
 * to both, outputs compared. Runs on a real GPU, or under the host emulation with
 * GRPO_CUDA_EMULATION=1 (tiny shapes).
 *
 * Shapes are small and odd: B = 4 rows over BP = 2 prefixes, interleaved (prefix_of = 1 0 0 1,
 * so a prefix's rows are not adjacent), P = 5 with padded prefix keys in prefix 1 (a leading
 * one and a hole) and T = 7 with a left-padded row, a right-padded row with a hole and a wholly
 * padded row; NH = 4 over NKV = 2 and 4, HD = 8 and 64 (and 128 once); then P = 37, T = 40, so
 * that the key columns [prefix | row] span three 32-key tiles, the prefix two, and a tile
 * straddles the boundary. Padded keys hold 50: a mask slip moves the result by O(1).
 * Backward: dq, dk, dv NaN-prefilled (must be written), dkp, dvp random-prefilled (must be
 * accumulated onto), both ways of the dk/dv passes (GRPO_CUDA_ATTENTION_SPLIT), and again with
 * only some gradients asked for (the others NULL).
 *
 * Tolerances as tests/test_cuda_attention.c's (the same kernels, the same sums): values atol
 * 1e-5, gradients atol 2e-5, rtol 1e-4.
 */
#include <check.h>
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

/* The buffer of the side being run: the cpu backend's (side 0) or the device's (side 1). */
#define AT(b) ((void *)(side ? (b).dev : (b).cpu))
#define BOTH(body)                                                                              \
    for (int side = 0; side < 2; side++) {                                                      \
        grpo_ops *o = side ? P.cuda : P.cpu;                                                    \
        body;                                                                                   \
    }

typedef struct pcase {
    int32_t B, T, BP, PL, NH, NKV, HD; /* PL: the prefix length P */
    cuda_pair q, k, v, mask, kp, vp, pmask, prefix_of, out, lse;
} pcase;

/* rows x width floats in [lo, hi), 50 in the rows whose mask is 0. */
static cuda_pair rand_padded(const int32_t *mask, uint64_t rows, uint64_t width, float lo,
                             float hi) {
    float *h = malloc(rows * width * sizeof(float));
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t i = 0; i < width; i++) {
            float x = cuda_parity_uniform(lo, hi);
            h[r * width + i] = mask[r] ? x : 50.0f;
        }
    cuda_pair b = cuda_pair_new(&P, h, rows * width * sizeof(float));
    free(h);
    return b;
}

/* Row b: b % 4 = 0 left-padded by 3, 1 right-padded by 2 with a hole at 1, 2 all padding, 3 none.
 * Prefix 1: column 0 padded and a hole at P-2; prefix 0 all real. prefix_of = 1 0 0 1 ... */
static pcase pcase_new(int32_t B, int32_t T, int32_t PL, int32_t NH, int32_t NKV, int32_t HD) {
    pcase c;
    memset(&c, 0, sizeof c);
    c.B = B, c.T = T, c.BP = 2, c.PL = PL, c.NH = NH, c.NKV = NKV, c.HD = HD;
    int32_t *m = malloc((size_t)B * T * sizeof(int32_t)), *pm = malloc(2 * (size_t)PL * 4);
    int32_t *pof = malloc((size_t)B * sizeof(int32_t));
    for (int32_t b = 0; b < B; b++) {
        pof[b] = (b % 4 == 0 || b % 4 == 3) ? 1 : 0;
        for (int32_t t = 0; t < T; t++) {
            int pat = b % 4, real = 1;
            if (pat == 0) real = t >= 3;
            if (pat == 1) real = t < T - 2 && t != 1;
            if (pat == 2) real = 0;
            m[b * T + t] = real;
        }
    }
    for (int32_t s = 0; s < PL; s++) pm[s] = 1, pm[PL + s] = s != 0 && s != PL - 2;
    c.mask = cuda_pair_new(&P, m, (uint64_t)B * T * 4);
    c.pmask = cuda_pair_new(&P, pm, 2 * (uint64_t)PL * 4);
    c.prefix_of = cuda_pair_new(&P, pof, (uint64_t)B * 4);
    uint64_t bt = (uint64_t)B * T, bp = 2 * (uint64_t)PL;
    c.q = rand_padded(m, bt, (uint64_t)NH * HD, -1.5f, 1.5f);
    c.k = rand_padded(m, bt, (uint64_t)NKV * HD, -1.5f, 1.5f);
    c.v = rand_padded(m, bt, (uint64_t)NKV * HD, -1.0f, 1.0f);
    c.kp = rand_padded(pm, bp, (uint64_t)NKV * HD, -1.5f, 1.5f);
    c.vp = rand_padded(pm, bp, (uint64_t)NKV * HD, -1.0f, 1.0f);
    free(m), free(pm), free(pof);
    c.out = cuda_pair_fill(&P, bt * NH * HD, NAN);
    c.lse = cuda_pair_fill(&P, (uint64_t)B * NH * T, NAN);
    BOTH(o->prefix_attention_forward(o->ctx, AT(c.out), AT(c.lse), AT(c.q), AT(c.k), AT(c.v),
                                     AT(c.mask), AT(c.kp), AT(c.vp), AT(c.pmask),
                                     AT(c.prefix_of), B, T, c.BP, PL, NH, NKV, HD));
    return c;
}

static void pcase_free(pcase *c) {
    cuda_pair *all[] = {&c->q,     &c->k,         &c->v,   &c->mask, &c->kp,
                        &c->vp,    &c->pmask,     &c->out, &c->lse,  &c->prefix_of};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) cuda_pair_free(&P, all[i]);
}

static void check_forward(int32_t B, int32_t T, int32_t PL, int32_t NH, int32_t NKV,
                          int32_t HD) {
    pcase c = pcase_new(B, T, PL, NH, NKV, HD);
    char what[96];
    snprintf(what, sizeof what, "prefix out B%d T%d P%d NKV%d HD%d", B, T, PL, NKV, HD);
    ck_assert_int_eq(cuda_pair_compare(&P, &c.out, (uint64_t)B * T * NH * HD, 1e-5, 1e-4, what),
                     0);
    snprintf(what, sizeof what, "prefix lse B%d T%d P%d NKV%d HD%d", B, T, PL, NKV, HD);
    ck_assert_int_eq(cuda_pair_compare(&P, &c.lse, (uint64_t)B * NH * T, 1e-5, 1e-4, what), 0);
    pcase_free(&c);
}

/* Every gradient at once (dq, dk, dv NaN-prefilled, dkp, dvp random), then the same with only
 * dk and dkp asked for, then only dq and dvp: each must match the cpu's. */
static void check_backward(int32_t B, int32_t T, int32_t PL, int32_t NH, int32_t NKV,
                           int32_t HD) {
    pcase c = pcase_new(B, T, PL, NH, NKV, HD);
    uint64_t nq = (uint64_t)B * T * NH * HD, nkv = (uint64_t)B * T * NKV * HD;
    uint64_t np = 2 * (uint64_t)PL * NKV * HD;
    cuda_pair dout = cuda_pair_rand(&P, nq, -1.0f, 1.0f);
    cuda_pair g[5], h[5]; /* dq dk dv dkp dvp: all; h: the partial calls (no dv alone) */
    for (int i = 0; i < 5; i++) {
        uint64_t n = i == 0 ? nq : i < 3 ? nkv : np;
        g[i] = i < 3 ? cuda_pair_fill(&P, n, NAN) : cuda_pair_rand(&P, n, -2.0f, 2.0f);
        if (i != 2) h[i] = i < 3 ? cuda_pair_fill(&P, n, NAN) : cuda_pair_rand(&P, n, -2.0f, 2.0f);
    }
#define PBWD(DQ, DK, DV, DKP, DVP)                                                              \
    BOTH(o->prefix_attention_backward(o->ctx, DQ, DK, DV, DKP, DVP, AT(dout), AT(c.out),        \
                                      AT(c.lse), AT(c.q), AT(c.k), AT(c.v), AT(c.mask),          \
                                      AT(c.kp), AT(c.vp), AT(c.pmask), AT(c.prefix_of), B, T,    \
                                      c.BP, PL, NH, NKV, HD))
    PBWD(AT(g[0]), AT(g[1]), AT(g[2]), AT(g[3]), AT(g[4]));
    PBWD(NULL, AT(h[1]), NULL, AT(h[3]), NULL);
    PBWD(AT(h[0]), NULL, NULL, NULL, AT(h[4]));
    static const char *names[5] = {"dq", "dk", "dv", "dkp", "dvp"};
    for (int part = 0; part < 2; part++)
        for (int i = 0; i < 5; i++) {
            if (part && i == 2) continue;
            uint64_t n = i == 0 ? nq : i < 3 ? nkv : np;
            char what[112];
            snprintf(what, sizeof what, "prefix %s%s B%d T%d P%d NKV%d HD%d", names[i],
                     part ? " (partial call)" : "", B, T, PL, NKV, HD);
            ck_assert_int_eq(cuda_pair_compare(&P, part ? &h[i] : &g[i], n, 2e-5, 1e-4, what),
                             0);
        }
#undef PBWD
    for (int i = 0; i < 5; i++) {
        cuda_pair_free(&P, &g[i]);
        if (i != 2) cuda_pair_free(&P, &h[i]);
    }
    cuda_pair_free(&P, &dout);
    pcase_free(&c);
}

START_TEST(prefix_forward_matches_cpu) {
    check_forward(4, 7, 5, 4, 2, 8);   /* GQA */
    check_forward(4, 7, 5, 4, 4, 8);   /* MHA */
    check_forward(4, 7, 5, 4, 2, 64);  /* two dims per lane */
    check_forward(4, 7, 5, 2, 1, 128); /* four dims per lane */
    check_forward(4, 40, 37, 4, 2, 8); /* key columns over three tiles, two query tiles */
}
END_TEST

START_TEST(prefix_backward_matches_cpu) {
    for (int split = 0; split < 2; split++) {
        setenv("GRPO_CUDA_ATTENTION_SPLIT", split ? "1" : "0", 1);
        check_backward(4, 7, 5, 4, 2, 8);
        if (!split) check_backward(4, 7, 5, 4, 4, 8); /* MHA: never split */
        check_backward(4, 7, 5, 4, 2, 64);
        check_backward(4, 7, 5, 2, 1, 128);
        check_backward(4, 40, 37, 4, 2, 8);
    }
    unsetenv("GRPO_CUDA_ATTENTION_SPLIT");
}
END_TEST

/* n floats of device buffers a and b equal bit for bit. */
static int same_bits(const void *a, const void *b, uint64_t n) {
    float *x = malloc(n * sizeof(float) + 1), *y = malloc(n * sizeof(float) + 1);
    P.cuda->sync(P.cuda->ctx);
    P.cuda->download(P.cuda->ctx, x, a, n * sizeof(float));
    P.cuda->download(P.cuda->ctx, y, b, n * sizeof(float));
    int same = memcmp(x, y, n * sizeof(float)) == 0;
    free(x), free(y);
    return same;
}

/* With P = 0 the prefix ops are plain attention, to the bit (the same kernels with an empty
 * prefix segment), and dkp/dvp (no columns) are not touched. */
START_TEST(prefix_ops_with_no_prefix_columns_are_attention) {
    const int32_t B = 4, T = 7, NH = 4, NKV = 2, HD = 8;
    pcase c = pcase_new(B, T, 3, NH, NKV, HD); /* inputs; its prefix is not used */
    grpo_ops *d = P.cuda;
    uint64_t nq = (uint64_t)B * T * NH * HD, nkv = (uint64_t)B * T * NKV * HD;
    uint64_t nl = (uint64_t)B * NH * T;
    void *buf[10];
    for (int i = 0; i < 10; i++) buf[i] = d->alloc(d->ctx, (i % 5 == 1 ? nl : nq) * 4);
    /* 0 out, 1 lse, 2 dq, 3 dk, 4 dv: plain; 5..9 the same from the prefix ops */
    d->attention_forward(d->ctx, buf[0], buf[1], c.q.dev, c.k.dev, c.v.dev, c.mask.dev, B, T, NH,
                         NKV, HD);
    d->prefix_attention_forward(d->ctx, buf[5], buf[6], c.q.dev, c.k.dev, c.v.dev, c.mask.dev,
                                c.kp.dev, c.vp.dev, c.pmask.dev, c.prefix_of.dev, B, T, 2, 0, NH,
                                NKV, HD);
    cuda_pair dout = cuda_pair_rand(&P, nq, -1.0f, 1.0f);
    d->attention_backward(d->ctx, buf[2], buf[3], buf[4], dout.dev, buf[0], buf[1], c.q.dev,
                          c.k.dev, c.v.dev, c.mask.dev, B, T, NH, NKV, HD);
    d->prefix_attention_backward(d->ctx, buf[7], buf[8], buf[9], c.kp.dev, c.vp.dev, dout.dev,
                                 buf[5], buf[6], c.q.dev, c.k.dev, c.v.dev, c.mask.dev, c.kp.dev,
                                 c.vp.dev, c.pmask.dev, c.prefix_of.dev, B, T, 2, 0, NH, NKV, HD);
    ck_assert(same_bits(buf[0], buf[5], nq));
    ck_assert(same_bits(buf[1], buf[6], nl));
    ck_assert(same_bits(buf[2], buf[7], nq));
    ck_assert(same_bits(buf[3], buf[8], nkv));
    ck_assert(same_bits(buf[4], buf[9], nkv));
    /* kp passed as dkp: untouched */
    ck_assert_int_eq(cuda_pair_compare(&P, &c.kp, 2 * 3 * (uint64_t)NKV * HD, 0, 0, "dkp"), 0);
    for (int i = 0; i < 10; i++) d->free(d->ctx, buf[i]);
    cuda_pair_free(&P, &dout);
    pcase_free(&c);
}
END_TEST

int main(void) {
    cuda_parity_skip_unless_available("test_cuda_prefix_attention");
    Suite *s = suite_create("cuda_prefix_attention");
    TCase *tc = tcase_create("parity");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, prefix_forward_matches_cpu);
    tcase_add_test(tc, prefix_backward_matches_cpu);
    tcase_add_test(tc, prefix_ops_with_no_prefix_columns_are_attention);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
