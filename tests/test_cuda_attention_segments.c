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
 * Parent and child segments (ABI 1.8: an id c >= 1 << 16 is a child of segment c >> 16, its
 * queries see [parent | own keys <= t]), as grpo_seqbatch_pack_rollout lays out packs that share
 * their prompts (core/train/seqbatch.c):
 *   3. Parity with the cpu backend as in 2, on two rows: row 0 a pack (parent 1 of 12 tokens with
 *      children of 8, 25 and 3; parent 2 of 20 with children of 17 and 6; a plain segment of 5;
 *      no padding; the 25 and parent 2 cross 32-key and 32-query tiles), row 1 left padding,
 *      parent 3 (30) with children of 40 and 1, a child of 9 whose parent is absent (a plain
 *      segment), right padding. Without the parent's keys out differs by the size of the values; without the
 *      children's share of the parent's dk/dv the parent's gradient misses most of its terms.
 *   4. Alone: row 1's parent against itself as a 0/1 row, its two children against two rows of
 *      prefix attention on the parent's keys (the padded shared-prefix layout): out and lse bit for
 *      bit (both walk [parent | own keys] in the same tiles), dq, dk, dv within 1e-5 relative, the
 *      parent's dk/dv its own attention's plus the prefix's dkp/dvp (its children's).
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

/* Packs that share their prompts (case 3): runs of (length, id) from each row's first column,
 * id 0 padding; CHILD(p, k) is row k of parent p's group. */
#define CHILD(p, k) ((p) << 16 | (k))
enum { NSH0 = 8, NSH1 = 6 };
static const int32_t sh0_len[NSH0] = {12, 8, 25, 3, 20, 17, 6, 5};
static const int32_t sh0_id[NSH0] = {1, CHILD(1, 1), CHILD(1, 2), CHILD(1, 3),
                                     2, CHILD(2, 4), CHILD(2, 5), 6};
static const int32_t sh1_len[NSH1] = {4, 30, 40, 1, 9, 12};
static const int32_t sh1_id[NSH1] = {0, 3, CHILD(3, 1), CHILD(3, 2), CHILD(9, 3), 0};

static void make_shared_mask(int32_t *m) {
    int32_t at = 0;
    for (int r = 0; r < NSH0; r++)
        for (int32_t t = 0; t < sh0_len[r]; t++) m[at++] = sh0_id[r];
    for (int r = 0; r < NSH1; r++)
        for (int32_t t = 0; t < sh1_len[r]; t++) m[at++] = sh1_id[r];
    ck_assert_int_eq(at, B * T);
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

/* A new zeroed device buffer of n slots of `slot` rows of `row` floats, slot i holding the len[i]
 * rows of the host buffer h from row at[i]. */
static void *dev_runs(const float *h, uint64_t row, const int32_t *at, const int32_t *len, int n,
                      int32_t slot) {
    uint64_t all = (uint64_t)n * slot * row;
    float *buf = calloc(all, sizeof(float));
    for (int i = 0; i < n; i++)
        memcpy(buf + (uint64_t)i * slot * row, h + (uint64_t)at[i] * row,
               (uint64_t)len[i] * row * sizeof(float));
    void *d = dev_new(buf, all * sizeof(float));
    free(buf);
    return d;
}

/* q, k, v, dout (device) of n runs of the host buffers h (dev_runs). */
static void dev_qkvd(void *dst[4], const float *const h[4], uint64_t qr, uint64_t kr,
                     const int32_t *at, const int32_t *len, int n, int32_t slot) {
    for (int i = 0; i < 4; i++)
        dst[i] = dev_runs(h[i], i == 0 || i == 3 ? qr : kr, at, len, n, slot);
}

static void dev_free_all(void **bufs, int n) {
    for (int i = 0; i < n; i++) P.cuda->free(P.cuda->ctx, bufs[i]);
}

/* Case 4 for head width HD: row 1 of make_shared_mask (parent 3 at column 4, its children at
 * 34 and 74, the orphan at 75) against its parent alone and its children as prefix attention. */
static void check_children(int32_t HD) {
    enum { PA = 4, PN = 30, TC = 40, OA = 75, ON = 9 };
    const int32_t c_at[2] = {PA + PN, PA + PN + TC}, c_len[2] = {TC, 1};
    const int32_t rc_at[2] = {T + c_at[0], T + c_at[1]}, rp_at = T + PA, rp_n = PN;
    const int32_t ro_at = T + OA, ro_n = ON;
    uint64_t qr = (uint64_t)NH * HD, kr = (uint64_t)NKV * HD;
    int32_t mask[B * T], ones[TC], cmask[2 * TC] = {0}, prefix_of[2] = {0, 0};
    make_shared_mask(mask);
    ck_assert_int_eq(mask[T + PA], 3);
    ck_assert_int_eq(mask[T + OA], CHILD(9, 3));
    for (int32_t t = 0; t < TC; t++) ones[t] = 1;
    for (int c = 0; c < 2; c++)
        for (int32_t t = 0; t < c_len[c]; t++) cmask[c * TC + t] = 1;
    cuda_pair q = cuda_pair_rand(&P, (uint64_t)B * T * qr, -1.5f, 1.5f);
    cuda_pair k = cuda_pair_rand(&P, (uint64_t)B * T * kr, -1.5f, 1.5f);
    cuda_pair v = cuda_pair_rand(&P, (uint64_t)B * T * kr, -1.0f, 1.0f);
    cuda_pair dout = cuda_pair_rand(&P, (uint64_t)B * T * qr, -1.0f, 1.0f);
    void *dmask = dev_new(mask, sizeof mask), *dones = dev_new(ones, sizeof ones);
    void *dcmask = dev_new(cmask, sizeof cmask), *dprefix = dev_new(prefix_of, sizeof prefix_of);
    att_out all = run_cuda(q.dev, k.dev, v.dev, dout.dev, dmask, B, T, HD);
    float *out = dev_get(all.out, B * T * qr), *lse = dev_get(all.lse, (uint64_t)B * NH * T);
    float *dq = dev_get(all.dq, B * T * qr), *dk = dev_get(all.dk, B * T * kr);
    float *dv = dev_get(all.dv, B * T * kr);
    const float *const src[4] = {q.cpu, k.cpu, v.cpu, dout.cpu};
    /* the parent alone, the orphan alone, the children as two rows of TC */
    void *pb[4], *ob[4], *cb[4];
    dev_qkvd(pb, src, qr, kr, &rp_at, &rp_n, 1, PN);
    dev_qkvd(ob, src, qr, kr, &ro_at, &ro_n, 1, ON);
    dev_qkvd(cb, src, qr, kr, rc_at, c_len, 2, TC);
    att_out par = run_cuda(pb[0], pb[1], pb[2], pb[3], dones, 1, PN, HD);
    att_out orph = run_cuda(ob[0], ob[1], ob[2], ob[3], dones, 1, ON, HD);
    void *pk = pb[1], *pv = pb[2];
    grpo_ops *o = P.cuda;
    att_out ch = {o->alloc(o->ctx, 2 * TC * qr * 4), o->alloc(o->ctx, 2 * NH * TC * 4),
                  o->alloc(o->ctx, 2 * TC * qr * 4), o->alloc(o->ctx, 2 * TC * kr * 4),
                  o->alloc(o->ctx, 2 * TC * kr * 4)};
    /* the prefix backward adds the children's share to the parent's dk/dv */
    o->prefix_attention_forward(o->ctx, ch.out, ch.lse, cb[0], cb[1], cb[2], dcmask, pk, pv,
                                dones, dprefix, 2, TC, 1, PN, NH, NKV, HD);
    o->prefix_attention_backward(o->ctx, ch.dq, ch.dk, ch.dv, par.dk, par.dv, cb[3], ch.out,
                                 ch.lse, cb[0], cb[1], cb[2], dcmask, pk, pv, dones, dprefix, 2,
                                 TC, 1, PN, NH, NKV, HD);
    const uint64_t r1q = T * qr, r1k = T * kr; /* row 1's first float */
    float *po = dev_get(par.out, PN * qr), *pl = dev_get(par.lse, (uint64_t)NH * PN);
    float *pdq = dev_get(par.dq, PN * qr), *pdk = dev_get(par.dk, PN * kr);
    float *pdv = dev_get(par.dv, PN * kr), *oo = dev_get(orph.out, ON * qr);
    ck_assert_msg(memcmp(po, out + r1q + PA * qr, PN * qr * 4) == 0, "HD %d parent: out bits", HD);
    for (int h = 0; h < NH; h++)
        ck_assert_msg(memcmp(pl + h * PN, lse + (size_t)(NH + h) * T + PA, PN * 4) == 0,
                      "HD %d parent head %d: lse bits", HD, h);
    near(dq + r1q + PA * qr, pdq, PN * qr, "parent dq", 0);
    near(dk + r1k + PA * kr, pdk, PN * kr, "parent dk (with its children's)", 0);
    near(dv + r1k + PA * kr, pdv, PN * kr, "parent dv (with its children's)", 0);
    ck_assert_msg(memcmp(oo, out + r1q + OA * qr, ON * qr * 4) == 0, "HD %d orphan: out bits",
                  HD);
    float *co = dev_get(ch.out, 2 * TC * qr), *cl = dev_get(ch.lse, 2 * NH * TC);
    float *cdq = dev_get(ch.dq, 2 * TC * qr), *cdk = dev_get(ch.dk, 2 * TC * kr);
    float *cdv = dev_get(ch.dv, 2 * TC * kr);
    for (int c = 0; c < 2; c++) {
        int32_t n = c_len[c], a = c_at[c];
        ck_assert_msg(memcmp(co + c * TC * qr, out + r1q + a * qr, n * qr * 4) == 0,
                      "HD %d child %d: out bits", HD, c);
        for (int h = 0; h < NH; h++)
            ck_assert_msg(memcmp(cl + ((size_t)c * NH + h) * TC, lse + (size_t)(NH + h) * T + a,
                                 n * 4) == 0, "HD %d child %d head %d: lse bits", HD, c, h);
        near(dq + r1q + a * qr, cdq + c * TC * qr, n * qr, "child dq", c);
        near(dk + r1k + a * kr, cdk + c * TC * kr, n * kr, "child dk", c);
        near(dv + r1k + a * kr, cdv + c * TC * kr, n * kr, "child dv", c);
    }
    float *hs[] = {out, lse, dq, dk, dv, po, pl, pdq, pdk, pdv, oo, co, cl, cdq, cdk, cdv};
    for (size_t i = 0; i < sizeof hs / sizeof *hs; i++) free(hs[i]);
    out_free(&all), out_free(&par), out_free(&orph), out_free(&ch);
    void *dev[] = {dmask, dones, dcmask, dprefix};
    dev_free_all(dev, 4), dev_free_all(pb, 4), dev_free_all(ob, 4), dev_free_all(cb, 4);
    cuda_pair *ps[] = {&q, &k, &v, &dout};
    for (int i = 0; i < 4; i++) cuda_pair_free(&P, ps[i]);
}

/* The buffer of the side being run: the cpu backend's (side 0) or the device's (side 1). */
#define AT(b) ((void *)(side ? (b).dev : (b).cpu))

/* Cases 2 and 3 for head width HD: the whole call on the mask make_fn makes (named `kind`)
 * against the cpu backend. */
static void check_parity(int32_t HD, void (*make_fn)(int32_t *), const char *kind) {
    uint64_t nq = (uint64_t)B * T * NH * HD, nkv = (uint64_t)B * T * NKV * HD;
    int32_t mask[B * T];
    make_fn(mask);
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
    snprintf(what, sizeof what, "%s HD %d: out", kind, HD);
    ck_assert_int_eq(cuda_pair_compare(&P, &out, nq, 1e-5, 1e-4, what), 0);
    snprintf(what, sizeof what, "%s HD %d: lse", kind, HD);
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
        snprintf(what, sizeof what, "%s HD %d split %d: dq", kind, HD, split);
        ck_assert_int_eq(cuda_pair_compare(&P, &dq, nq, 2e-5, 1e-4, what), 0);
        snprintf(what, sizeof what, "%s HD %d split %d: dk", kind, HD, split);
        ck_assert_int_eq(cuda_pair_compare(&P, &dk, nkv, 2e-5, 1e-4, what), 0);
        snprintf(what, sizeof what, "%s HD %d split %d: dv", kind, HD, split);
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
    check_parity(16, make_mask, "segments");
    check_parity(40, make_mask, "segments");
}
END_TEST

START_TEST(parents_and_children_match_the_cpu_backend) {
    check_parity(16, make_shared_mask, "parents and children");
    check_parity(40, make_shared_mask, "parents and children");
}
END_TEST

START_TEST(children_compute_as_prefix_attention_on_their_parent) {
    check_children(16);
    check_children(40);
}
END_TEST

int main(void) {
    cuda_parity_skip_unless_available("test_cuda_attention_segments");
    Suite *s = suite_create("cuda_attention_segments");
    TCase *tc = tcase_create("segments");
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_segment_computes_as_a_row_of_its_own);
    tcase_add_test(tc, segments_match_the_cpu_backend);
    tcase_add_test(tc, parents_and_children_match_the_cpu_backend);
    tcase_add_test(tc, children_compute_as_prefix_attention_on_their_parent);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
