/*
 * test_cuda_attention_bits.c — on the CUDA backend a query's attention output has the same bits
 * in the training forward and in decode against the KV cache (issue 32: exactly on-policy), for
 * plain attention (attention_forward) and shared-prefix attention (prefix_attention_forward, whose
 * key sequence is [the prefix's keys | the row's own keys]). Runs on a real GPU, or under the host
 * emulation with GRPO_CUDA_EMULATION=1 (tiny shapes), like the other test_cuda_* suites.
 *
 * The property (kernels/cuda/attention.cu, att_attend): a query's sums run over its key sequence
 * in 32-key tiles counted from the first real key, so they do not depend on where the keys lie.
 * So the layouts differ on purpose:
 *   training rows  B rows of T with different left padding (0 .. 37: the first real key at tile
 *                  offsets 0, 5, 13, 30 and in the second tile), right padding, and a hole;
 *   decode cache   each query's row copied after another number of padding slots (0 .. 40),
 *                  its real slots from the row's first real key, len = the query's position + 1,
 *                  slots at and after len hold NaN (never read);
 *   queries        per row its first real one (one key), the one 32 keys after it (a tile edge),
 *                  and its last real one.
 * The training forward runs a second time with every row moved right by 11 more padding slots
 * (and, with a prefix, the prefixes by 7): the same bits again. Padding keys and values hold NaN
 * everywhere (a read of one would show). Shapes: GQA with NH/NKV = 2 and 4, MHA, HD 64 and HD 40
 * and 8 (not multiples of 32), and a group of 36 and of 72 query heads per kv head (decode's other
 * block shapes: several heads a warp, a group over two blocks).
 * Outputs are compared with memcmp, head by head; a mismatch prints the row, position and head.
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

/* ---- device buffers ------------------------------------------------------------------------- */

static void *dev_new(const void *host, uint64_t bytes) {
    void *d = P.cuda->alloc(P.cuda->ctx, bytes);
    ck_assert_ptr_nonnull(d);
    P.cuda->upload(P.cuda->ctx, d, host, bytes);
    return d;
}

static float *dev_get(const void *d, uint64_t n) {
    float *h = malloc(n * sizeof(float) + 1);
    P.cuda->sync(P.cuda->ctx);
    P.cuda->download(P.cuda->ctx, h, d, n * sizeof(float));
    return h;
}

/* ---- the cases ------------------------------------------------------------------------------ */

/* Row b's padding: lpad[b % 6] slots before its first real token, rpad[b % 6] after its last, and
 * for b % 6 == 3 a hole 4 slots after the first. */
static const int32_t lpad[6] = {0, 5, 37, 13, 30, 2}, rpad[6] = {0, 2, 0, 9, 1, 0};

/* One case: B rows of T own keys over BP prefixes of PL keys (PL = 0: plain attention). */
typedef struct bcase {
    int32_t B, T, BP, PL, NH, NKV, HD;
    float *q, *k, *v, *kp, *vp; /* host: (B,T,NH,HD), (B,T,NKV,HD) x2, (BP,PL,NKV,HD) x2 */
    int32_t *mask, *pmask, *prefix_of;
} bcase;

static void fill_rows(float *x, const int32_t *m, int32_t rows, int32_t width, float lo, float hi) {
    for (int32_t r = 0; r < rows; r++)
        for (int32_t i = 0; i < width; i++)
            x[(size_t)r * width + i] = m[r] ? cuda_parity_uniform(lo, hi) : NAN;
}

static bcase bcase_new(int32_t B, int32_t T, int32_t BP, int32_t PL, int32_t NH, int32_t NKV,
                       int32_t HD) {
    bcase c = {B, T, BP, PL, NH, NKV, HD, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    c.mask = malloc((size_t)B * T * sizeof(int32_t));
    for (int32_t b = 0; b < B; b++)
        for (int32_t t = 0; t < T; t++) {
            int32_t lp = lpad[b % 6];
            c.mask[b * T + t] = t >= lp && t < T - rpad[b % 6] && !(b % 6 == 3 && t == lp + 4);
        }
    size_t nq = (size_t)B * T * NH * HD, nk = (size_t)B * T * NKV * HD;
    c.q = malloc(nq * sizeof(float)), c.k = malloc(nk * sizeof(float));
    c.v = malloc(nk * sizeof(float));
    fill_rows(c.q, c.mask, B * T, NH * HD, -1.5f, 1.5f);
    fill_rows(c.k, c.mask, B * T, NKV * HD, -1.5f, 1.5f);
    fill_rows(c.v, c.mask, B * T, NKV * HD, -1.0f, 1.0f);
    if (PL > 0) { /* prefix 1: its first key padding and a hole at PL - 2; prefix 0 all real */
        c.pmask = malloc((size_t)BP * PL * sizeof(int32_t));
        c.prefix_of = malloc((size_t)B * sizeof(int32_t));
        for (int32_t j = 0; j < BP; j++)
            for (int32_t s = 0; s < PL; s++)
                c.pmask[j * PL + s] = !(j == 1 && (s == 0 || s == PL - 2));
        for (int32_t b = 0; b < B; b++) c.prefix_of[b] = b % 2 == 0 ? 1 % BP : 0;
        size_t np = (size_t)BP * PL * NKV * HD;
        c.kp = malloc(np * sizeof(float)), c.vp = malloc(np * sizeof(float));
        fill_rows(c.kp, c.pmask, BP * PL, NKV * HD, -1.5f, 1.5f);
        fill_rows(c.vp, c.pmask, BP * PL, NKV * HD, -1.0f, 1.0f);
    }
    return c;
}

static void bcase_free(bcase *c) {
    free(c->q), free(c->k), free(c->v), free(c->kp), free(c->vp);
    free(c->mask), free(c->pmask), free(c->prefix_of);
}

/* The case with every own row moved right by `own` more padding slots and every prefix by `pre`
 * (padding: mask 0, NaN). */
static bcase bcase_shifted(const bcase *c, int32_t own, int32_t pre) {
    bcase s = *c;
    s.T = c->T + own, s.PL = c->PL > 0 ? c->PL + pre : 0;
    const int32_t qw = c->NH * c->HD, kw = c->NKV * c->HD;
    s.mask = calloc((size_t)c->B * s.T, sizeof(int32_t));
    s.q = malloc((size_t)c->B * s.T * qw * sizeof(float));
    s.k = malloc((size_t)c->B * s.T * kw * sizeof(float));
    s.v = malloc((size_t)c->B * s.T * kw * sizeof(float));
    for (size_t i = 0; i < (size_t)c->B * s.T * kw; i++) s.k[i] = s.v[i] = NAN;
    for (size_t i = 0; i < (size_t)c->B * s.T * qw; i++) s.q[i] = NAN;
    for (int32_t b = 0; b < c->B; b++)
        for (int32_t t = 0; t < c->T; t++) {
            size_t from = (size_t)b * c->T + t, to = (size_t)b * s.T + own + t;
            s.mask[to] = c->mask[from];
            memcpy(s.q + to * qw, c->q + from * qw, (size_t)qw * sizeof(float));
            memcpy(s.k + to * kw, c->k + from * kw, (size_t)kw * sizeof(float));
            memcpy(s.v + to * kw, c->v + from * kw, (size_t)kw * sizeof(float));
        }
    s.kp = s.vp = NULL, s.pmask = NULL, s.prefix_of = NULL;
    if (c->PL > 0) {
        s.prefix_of = malloc((size_t)c->B * sizeof(int32_t));
        memcpy(s.prefix_of, c->prefix_of, (size_t)c->B * sizeof(int32_t));
        s.pmask = calloc((size_t)c->BP * s.PL, sizeof(int32_t));
        s.kp = malloc((size_t)c->BP * s.PL * kw * sizeof(float));
        s.vp = malloc((size_t)c->BP * s.PL * kw * sizeof(float));
        for (size_t i = 0; i < (size_t)c->BP * s.PL * kw; i++) s.kp[i] = s.vp[i] = NAN;
        for (int32_t j = 0; j < c->BP; j++)
            for (int32_t t = 0; t < c->PL; t++) {
                size_t from = (size_t)j * c->PL + t, to = (size_t)j * s.PL + pre + t;
                s.pmask[to] = c->pmask[from];
                memcpy(s.kp + to * kw, c->kp + from * kw, (size_t)kw * sizeof(float));
                memcpy(s.vp + to * kw, c->vp + from * kw, (size_t)kw * sizeof(float));
            }
    }
    return s;
}

/* The training forward of the case on the device: out (B,T,NH,HD), host copy. */
static float *forward(const bcase *c) {
    const int32_t B = c->B, T = c->T;
    const size_t nq = (size_t)B * T * c->NH * c->HD, nk = (size_t)B * T * c->NKV * c->HD;
    void *q = dev_new(c->q, nq * 4), *k = dev_new(c->k, nk * 4), *v = dev_new(c->v, nk * 4);
    void *m = dev_new(c->mask, (size_t)B * T * 4);
    void *out = P.cuda->alloc(P.cuda->ctx, nq * 4);
    void *lse = P.cuda->alloc(P.cuda->ctx, (size_t)B * c->NH * T * 4);
    void *extra[4] = {NULL, NULL, NULL, NULL};
    if (c->PL == 0) {
        P.cuda->attention_forward(P.cuda->ctx, out, lse, q, k, v, m, B, T, c->NH, c->NKV, c->HD);
    } else {
        const size_t np = (size_t)c->BP * c->PL * c->NKV * c->HD;
        extra[0] = dev_new(c->kp, np * 4), extra[1] = dev_new(c->vp, np * 4);
        extra[2] = dev_new(c->pmask, (size_t)c->BP * c->PL * 4);
        extra[3] = dev_new(c->prefix_of, (size_t)B * 4);
        P.cuda->prefix_attention_forward(P.cuda->ctx, out, lse, q, k, v, m, extra[0], extra[1],
                                         extra[2], extra[3], B, T, c->BP, c->PL, c->NH, c->NKV,
                                         c->HD);
    }
    float *h = dev_get(out, nq);
    void *all[] = {q, k, v, m, out, lse, extra[0], extra[1], extra[2], extra[3]};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (all[i]) P.cuda->free(P.cuda->ctx, all[i]);
    return h;
}

/* The queries decoded: (row, position) pairs, up to three a row (see the file comment). */
typedef struct dq {
    int32_t b, t;
} dq;

static int32_t pick_queries(const bcase *c, dq *qs) {
    int32_t R = 0;
    for (int32_t b = 0; b < c->B; b++) {
        int32_t first = -1, last = -1;
        for (int32_t t = 0; t < c->T; t++)
            if (c->mask[b * c->T + t]) last = t, first = first < 0 ? t : first;
        if (first < 0) continue;
        qs[R++] = (dq){b, first};
        if (first + 32 < last && c->mask[b * c->T + first + 32]) qs[R++] = (dq){b, first + 32};
        if (last != first) qs[R++] = (dq){b, last};
    }
    return R;
}

/* Appends columns [from, to) of src (rows of width floats, mask m) to cache row slots at *at. */
static void append_keys(float *kc, float *vc, int32_t *cm, int32_t *at, const float *k,
                        const float *v, const int32_t *m, int32_t from, int32_t to,
                        int32_t width) {
    for (int32_t s = from; s < to; s++, (*at)++) {
        cm[*at] = m[s];
        memcpy(kc + (size_t)*at * width, k + (size_t)s * width, (size_t)width * sizeof(float));
        memcpy(vc + (size_t)*at * width, v + (size_t)s * width, (size_t)width * sizeof(float));
    }
}

static int32_t first_real(const int32_t *m, int32_t n) {
    int32_t i = 0;
    while (i < n && !m[i]) i++;
    return i;
}

/* Decodes the queries qs (R of them) against caches laid out as the file comment says; returns
 * the outputs (R,NH,HD), host. */
static float *decode(const bcase *c, const dq *qs, int32_t R) {
    const int32_t kw = c->NKV * c->HD, qw = c->NH * c->HD;
    const int32_t S = 40 + c->PL + c->T + 3; /* the most padding slots, keys, NaN slots after */
    float *kc = malloc((size_t)R * S * kw * sizeof(float));
    float *vc = malloc((size_t)R * S * kw * sizeof(float)), *qd = malloc((size_t)R * qw * 4);
    int32_t *cm = malloc((size_t)R * S * sizeof(int32_t)), *len = malloc((size_t)R * 4);
    for (size_t i = 0; i < (size_t)R * S * kw; i++) kc[i] = vc[i] = NAN;
    for (int32_t r = 0; r < R; r++) {
        const int32_t b = qs[r].b, t = qs[r].t, pad = (r * 17 + 3) % 41;
        float *kr = kc + (size_t)r * S * kw, *vr = vc + (size_t)r * S * kw;
        int32_t *mr = cm + (size_t)r * S, at = pad;
        for (int32_t s = 0; s < S; s++) mr[s] = s >= pad; /* padding slots, then as written */
        if (c->PL > 0) { /* the row's prefix from its first real key */
            const int32_t j = c->prefix_of[b], *pm = c->pmask + (size_t)j * c->PL;
            const size_t off = (size_t)j * c->PL * kw;
            append_keys(kr, vr, mr, &at, c->kp + off, c->vp + off, pm, first_real(pm, c->PL),
                        c->PL, kw);
        }
        const int32_t *mb = c->mask + (size_t)b * c->T;
        const size_t off = (size_t)b * c->T * kw;
        append_keys(kr, vr, mr, &at, c->k + off, c->v + off, mb, first_real(mb, c->T), t + 1, kw);
        len[r] = at;
        memcpy(qd + (size_t)r * qw, c->q + ((size_t)b * c->T + t) * qw, (size_t)qw * 4);
    }
    void *dk = dev_new(kc, (size_t)R * S * kw * 4), *dv = dev_new(vc, (size_t)R * S * kw * 4);
    void *dm = dev_new(cm, (size_t)R * S * 4), *dl = dev_new(len, (size_t)R * 4);
    void *dqd = dev_new(qd, (size_t)R * qw * 4);
    void *out = P.cuda->alloc(P.cuda->ctx, (size_t)R * qw * 4);
    P.cuda->attention_decode(P.cuda->ctx, out, dqd, dk, dv, dm, dl, R, S, c->NH, c->NKV, c->HD);
    float *h = dev_get(out, (size_t)R * qw);
    void *all[] = {dk, dv, dm, dl, dqd, out};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) P.cuda->free(P.cuda->ctx, all[i]);
    free(kc), free(vc), free(qd), free(cm), free(len);
    return h;
}

/* Whether a (HD floats) equals b bit for bit; if not, prints where and the largest difference. */
static int same_head(const float *a, const float *b, int32_t HD, const char *what, int32_t row,
                     int32_t t, int32_t h) {
    if (memcmp(a, b, (size_t)HD * sizeof(float)) == 0) return 1;
    double worst = 0;
    for (int32_t d = 0; d < HD; d++) worst = fmax(worst, fabs((double)a[d] - b[d]));
    fprintf(stderr, "%s: row %d position %d head %d differs (largest |diff| %g)\n", what, row, t,
            h, worst);
    return 0;
}

/* Every decoded query against the forward's output for it, head by head; and the forward of the
 * shifted layout against the first for every real query. Outputs must be finite, not all 0. */
static void check_case(int32_t B, int32_t T, int32_t BP, int32_t PL, int32_t NH, int32_t NKV,
                       int32_t HD) {
    bcase c = bcase_new(B, T, BP, PL, NH, NKV, HD);
    char what[128];
    snprintf(what, sizeof what, "%s B%d T%d P%d NH%d NKV%d HD%d",
             PL ? "prefix_attention_forward" : "attention_forward", B, T, PL, NH, NKV, HD);
    float *out = forward(&c);
    dq *qs = malloc((size_t)3 * B * sizeof(dq));
    int32_t R = pick_queries(&c, qs), bad = 0, nonzero = 0;
    float *dec = decode(&c, qs, R);
    const int32_t qw = NH * HD;
    for (int32_t r = 0; r < R; r++)
        for (int32_t h = 0; h < NH; h++) {
            const float *f = out + ((size_t)qs[r].b * T + qs[r].t) * qw + (size_t)h * HD;
            const float *d = dec + (size_t)r * qw + (size_t)h * HD;
            bad += !same_head(d, f, HD, what, qs[r].b, qs[r].t, h);
            for (int32_t i = 0; i < HD; i++) {
                ck_assert_msg(isfinite(f[i]), "%s: not finite", what);
                nonzero += f[i] != 0.0f;
            }
        }
    ck_assert_msg(bad == 0, "%s: %d of %d heads decode to other bits", what, bad, R * NH);
    ck_assert_msg(nonzero > 0, "%s: every output 0", what);

    bcase s = bcase_shifted(&c, 11, 7);
    float *out2 = forward(&s);
    for (int32_t b = 0; b < B; b++)
        for (int32_t t = 0; t < T; t++) {
            if (!c.mask[b * T + t]) continue;
            for (int32_t h = 0; h < NH; h++) {
                const float *f = out + ((size_t)b * T + t) * qw + (size_t)h * HD;
                const float *g = out2 + ((size_t)b * s.T + 11 + t) * qw + (size_t)h * HD;
                bad += !same_head(g, f, HD, "the forward with more padding", b, t, h);
            }
        }
    ck_assert_msg(bad == 0, "%s: the forward's bits depend on the padding", what);
    free(out), free(out2), free(dec), free(qs);
    bcase_free(&s), bcase_free(&c);
}

START_TEST(decode_gives_the_forwards_bits) {
    check_case(6, 70, 0, 0, 4, 2, 64); /* GQA 2 */
    check_case(6, 70, 0, 0, 8, 2, 40); /* GQA 4, HD not a multiple of 32 */
    check_case(4, 45, 0, 0, 4, 4, 8);  /* MHA, one dim a lane */
    check_case(3, 40, 0, 0, 36, 1, 8); /* 36 heads a group: several a warp */
    check_case(2, 36, 0, 0, 72, 1, 40); /* 72 heads a group: two blocks */
}
END_TEST

START_TEST(prefix_decode_gives_the_forwards_bits) {
    check_case(6, 45, 2, 37, 4, 2, 64); /* [prefix | own] spans three tiles */
    check_case(6, 45, 2, 5, 8, 2, 40);
    check_case(4, 24, 2, 40, 4, 4, 8);
}
END_TEST

int main(void) {
    cuda_parity_skip_unless_available("test_cuda_attention_bits");
    Suite *s = suite_create("cuda_attention_bits");
    TCase *tc = tcase_create("decode_vs_forward");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, decode_gives_the_forwards_bits);
    tcase_add_test(tc, prefix_decode_gives_the_forwards_bits);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
