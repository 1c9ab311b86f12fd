/*
 * test_cuda_attention.c — the CUDA backend's attention and fused-head ops against the cpu backend
 * (kernels/cpu/attention.c and head.c, themselves tested against double references in
 * test_kernels.c): same inputs uploaded to both, outputs compared. Runs on a real GPU, or under
 * the host emulation with GRPO_CUDA_EMULATION=1 (every CUDA thread a fiber: tiny shapes).
 *
 * Shapes are small and odd on purpose: T = 13 (less than one 32-key tile, not a multiple of
 * anything), T = 45 and 70 (several key and query tiles), HD = 8, 64 and 128 (one, two and four
 * dims per lane; 128 is the largest the kernels take), NH = 4 over NKV = 2 and 4 (GQA, MHA), rows
 * left-padded, right-padded with a hole, and wholly padded. Head: V not a multiple of the vocab
 * chunk and N not a multiple of the rows per pass (both set small through the testing hooks
 * GRPO_CUDA_HEAD_CHUNK / GRPO_CUDA_HEAD_ROWS), rows with targets < 0, and the every-row path.
 * The attention backward's dk/dv pass runs both ways (GRPO_CUDA_ATTENTION_SPLIT: per kv head, or
 * per query head and then summed).
 * Outputs and activation gradients are NaN-prefilled (must be overwritten); dw is prefilled with
 * random values (must be accumulated onto).
 *
 * Tolerances (|cuda - cpu| <= atol + rtol |cpu|), both sides fp32. The GPU sums the same products
 * in another order (a sequential dot per score, an online softmax rescaled per 32-key tile, fp32
 * running head statistics where the CPU keeps doubles across chunks) and uses expf where the CPU
 * uses its 2-ulp exp: a few ulps of quantities of size <= ~10. Measured under the emulation (every
 * case here): largest |diff| 4.8e-7 for attention out, lse, decode and the head's logp, lse and
 * entropy; 1.5e-6 for the attention and head gradients. So values get atol 1e-5 (20x that) and
 * gradients, which sum up to T x rep or V terms, atol 2e-5 (13x), both rtol 1e-4; a wrong mask,
 * tile edge, head mapping or chunk boundary is off by O(0.1) (every input here is drawn from
 * [-1.5, 1.5), padded keys hold 50).
 */
#include <check.h>
#include <signal.h>
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

/* ---- attention ------------------------------------------------------------------------------- */

enum { PAD_NONE, PAD_LEFT, PAD_RIGHT_HOLE, PAD_ALL };

/* mask (B,T): row b follows pattern[b % 4]: none, 3 left-padding slots, 2 right-padding slots and
 * a hole at 5, all padding. */
static int32_t *make_mask(int32_t B, int32_t T, const int *pattern) {
    int32_t *m = malloc((size_t)B * T * sizeof(int32_t));
    for (int32_t b = 0; b < B; b++)
        for (int32_t t = 0; t < T; t++) {
            int pat = pattern[b], real = 1;
            if (pat == PAD_LEFT) real = t >= 3;
            if (pat == PAD_RIGHT_HOLE) real = t < T - 2 && t != 5;
            if (pat == PAD_ALL) real = 0;
            m[b * T + t] = real;
        }
    return m;
}

typedef struct att_bufs {
    int32_t B, T, NH, NKV, HD;
    cuda_pair q, k, v, mask, out, lse;
} att_bufs;

static att_bufs att_new(int32_t B, int32_t T, int32_t NH, int32_t NKV, int32_t HD,
                        const int *pattern) {
    att_bufs a;
    memset(&a, 0, sizeof a);
    a.B = B, a.T = T, a.NH = NH, a.NKV = NKV, a.HD = HD;
    uint64_t nq = (uint64_t)B * T * NH * HD, nkv = (uint64_t)B * T * NKV * HD;
    int32_t *m = make_mask(B, T, pattern);
    a.mask = cuda_pair_new(&P, m, (uint64_t)B * T * sizeof(int32_t));
    free(m);
    a.q = cuda_pair_rand(&P, nq, -1.5f, 1.5f);
    a.k = cuda_pair_rand(&P, nkv, -1.5f, 1.5f);
    a.v = cuda_pair_rand(&P, nkv, -1.0f, 1.0f);
    a.out = cuda_pair_fill(&P, nq, NAN);
    a.lse = cuda_pair_fill(&P, (uint64_t)B * NH * T, NAN);
    BOTH(o->attention_forward(o->ctx, AT(a.out), AT(a.lse), AT(a.q), AT(a.k), AT(a.v),
                              AT(a.mask), B, T, NH, NKV, HD));
    return a;
}

static void att_free(att_bufs *a) {
    cuda_pair *all[] = {&a->q, &a->k, &a->v, &a->mask, &a->out, &a->lse};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) cuda_pair_free(&P, all[i]);
}

/* Forward: out and lse. */
static void check_forward(int32_t B, int32_t T, int32_t NH, int32_t NKV, int32_t HD,
                          const int *pattern) {
    att_bufs a = att_new(B, T, NH, NKV, HD, pattern);
    char what[96];
    snprintf(what, sizeof what, "attention out B%d T%d NH%d NKV%d HD%d", B, T, NH, NKV, HD);
    ck_assert_int_eq(cuda_pair_compare(&P, &a.out, (uint64_t)B * T * NH * HD, 1e-5, 1e-4, what), 0);
    snprintf(what, sizeof what, "attention lse B%d T%d NH%d NKV%d HD%d", B, T, NH, NKV, HD);
    ck_assert_int_eq(cuda_pair_compare(&P, &a.lse, (uint64_t)B * NH * T, 1e-5, 1e-4, what), 0);
    att_free(&a);
}

/* Backward: dq, dk, dv NaN-prefilled; then dk alone (dq, dv NULL) must give the same dk. */
static void check_backward(int32_t B, int32_t T, int32_t NH, int32_t NKV, int32_t HD,
                           const int *pattern) {
    att_bufs a = att_new(B, T, NH, NKV, HD, pattern);
    uint64_t nq = (uint64_t)B * T * NH * HD, nkv = (uint64_t)B * T * NKV * HD;
    cuda_pair dout = cuda_pair_rand(&P, nq, -1.0f, 1.0f);
    cuda_pair dq = cuda_pair_fill(&P, nq, NAN), dk = cuda_pair_fill(&P, nkv, NAN);
    cuda_pair dv = cuda_pair_fill(&P, nkv, NAN), dk2 = cuda_pair_fill(&P, nkv, NAN);
    BOTH(o->attention_backward(o->ctx, AT(dq), AT(dk), AT(dv), AT(dout), AT(a.out), AT(a.lse),
                               AT(a.q), AT(a.k), AT(a.v), AT(a.mask), B, T, NH, NKV, HD));
    BOTH(o->attention_backward(o->ctx, NULL, AT(dk2), NULL, AT(dout), AT(a.out), AT(a.lse),
                               AT(a.q), AT(a.k), AT(a.v), AT(a.mask), B, T, NH, NKV, HD));
    char what[96];
    snprintf(what, sizeof what, "attention dq B%d T%d NH%d NKV%d HD%d", B, T, NH, NKV, HD);
    ck_assert_int_eq(cuda_pair_compare(&P, &dq, nq, 2e-5, 1e-4, what), 0);
    snprintf(what, sizeof what, "attention dk B%d T%d NH%d NKV%d HD%d", B, T, NH, NKV, HD);
    ck_assert_int_eq(cuda_pair_compare(&P, &dk, nkv, 2e-5, 1e-4, what), 0);
    ck_assert_int_eq(cuda_pair_compare(&P, &dk2, nkv, 2e-5, 1e-4, "attention dk alone"), 0);
    snprintf(what, sizeof what, "attention dv B%d T%d NH%d NKV%d HD%d", B, T, NH, NKV, HD);
    ck_assert_int_eq(cuda_pair_compare(&P, &dv, nkv, 2e-5, 1e-4, what), 0);
    cuda_pair *all[] = {&dout, &dq, &dk, &dv, &dk2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) cuda_pair_free(&P, all[i]);
    att_free(&a);
}

static const int pads[4] = {PAD_LEFT, PAD_RIGHT_HOLE, PAD_ALL, PAD_NONE};

START_TEST(attention_forward_matches_cpu) {
    check_forward(3, 13, 4, 2, 8, pads);  /* GQA; left, right+hole, all padding */
    check_forward(3, 13, 4, 4, 8, pads);  /* MHA */
    check_forward(2, 70, 4, 2, 8, pads);  /* three key tiles, three query tiles */
    check_forward(2, 45, 4, 2, 64, pads); /* two dims per lane, two query tiles */
    check_forward(1, 20, 2, 1, 128, pads); /* the widest head: four dims per lane */
}
END_TEST

START_TEST(attention_backward_matches_cpu) {
    /* dk/dv both ways: per kv head over its query heads, and per query head then summed */
    for (int split = 0; split < 2; split++) {
        setenv("GRPO_CUDA_ATTENTION_SPLIT", split ? "1" : "0", 1);
        check_backward(3, 13, 4, 2, 8, pads);
        if (!split) check_backward(3, 13, 4, 4, 8, pads); /* MHA: never split */
        check_backward(2, 70, 4, 2, 8, pads);
        check_backward(2, 45, 4, 2, 64, pads);
        check_backward(1, 20, 2, 1, 128, pads);
    }
    unsetenv("GRPO_CUDA_ATTENTION_SPLIT");
}
END_TEST

/* n floats of device buffer a equal to those of b, bit for bit. */
static int same_bits(const void *a, const void *b, uint64_t n) {
    float *x = malloc(n * sizeof(float) + 1), *y = malloc(n * sizeof(float) + 1);
    P.cuda->sync(P.cuda->ctx);
    P.cuda->download(P.cuda->ctx, x, a, n * sizeof(float));
    P.cuda->download(P.cuda->ctx, y, b, n * sizeof(float));
    int same = memcmp(x, y, n * sizeof(float)) == 0;
    free(x), free(y);
    return same;
}

/* A device copy of the pair's values with NaN in every row (of `width` floats) whose mask is 0. */
static void *nan_padded(const cuda_pair *src, const int32_t *mask, uint64_t rows, uint64_t width) {
    float *h = malloc(src->bytes + 1);
    memcpy(h, src->cpu, src->bytes);
    for (uint64_t r = 0; r < rows; r++)
        if (!mask[r])
            for (uint64_t i = 0; i < width; i++) h[r * width + i] = NAN;
    void *d = P.cuda->alloc(P.cuda->ctx, src->bytes);
    P.cuda->upload(P.cuda->ctx, d, h, src->bytes);
    free(h);
    return d;
}

/* Padding positions of q, k, v and dout are never read: NaN there changes no bit of any output
 * (the cpu backend's GEMMs do read them, so this is a cuda-only property). */
START_TEST(attention_never_reads_padding) {
    const int32_t B = 3, T = 13, NH = 4, NKV = 2, HD = 8;
    att_bufs a = att_new(B, T, NH, NKV, HD, pads);
    uint64_t nq = (uint64_t)B * T * NH * HD, nkv = (uint64_t)B * T * NKV * HD;
    uint64_t nl = (uint64_t)B * NH * T, bt = (uint64_t)B * T;
    const int32_t *mask = a.mask.cpu;
    cuda_pair dout = cuda_pair_rand(&P, nq, -1.0f, 1.0f);
    void *q2 = nan_padded(&a.q, mask, bt, NH * HD), *k2 = nan_padded(&a.k, mask, bt, NKV * HD);
    void *v2 = nan_padded(&a.v, mask, bt, NKV * HD), *do2 = nan_padded(&dout, mask, bt, NH * HD);
    grpo_ops *c = P.cuda;
    void *out2 = c->alloc(c->ctx, nq * 4), *lse2 = c->alloc(c->ctx, nl * 4);
    void *g[6]; /* dq, dk, dv from clean inputs, then from NaN-padded ones */
    for (int i = 0; i < 6; i++) g[i] = c->alloc(c->ctx, (i % 3 ? nkv : nq) * 4);
    c->attention_forward(c->ctx, out2, lse2, q2, k2, v2, a.mask.dev, B, T, NH, NKV, HD);
    c->attention_backward(c->ctx, g[0], g[1], g[2], dout.dev, a.out.dev, a.lse.dev, a.q.dev,
                          a.k.dev, a.v.dev, a.mask.dev, B, T, NH, NKV, HD);
    c->attention_backward(c->ctx, g[3], g[4], g[5], do2, out2, lse2, q2, k2, v2, a.mask.dev, B,
                          T, NH, NKV, HD);
    ck_assert_msg(same_bits(out2, a.out.dev, nq), "out changed by NaN padding");
    ck_assert_msg(same_bits(lse2, a.lse.dev, nl), "lse changed by NaN padding");
    ck_assert_msg(same_bits(g[3], g[0], nq), "dq changed by NaN padding");
    ck_assert_msg(same_bits(g[4], g[1], nkv), "dk changed by NaN padding");
    ck_assert_msg(same_bits(g[5], g[2], nkv), "dv changed by NaN padding");
    void *all[] = {q2, k2, v2, do2, out2, lse2, g[0], g[1], g[2], g[3], g[4], g[5]};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) c->free(c->ctx, all[i]);
    cuda_pair_free(&P, &dout);
    att_free(&a);
}
END_TEST

/* Decode: R rows of differing len, cache_mask holes (finite large values there, as padding
 * tokens give) and NaN in every slot >= len (must never be read); a row with len 0 and one whose
 * real slots are all holes give zeros on both sides. */
static void check_decode(int32_t S, int32_t NH, int32_t NKV, int32_t HD, const int32_t *lenh,
                         int32_t R) {
    uint64_t nc = (uint64_t)R * S * NKV * HD, nq = (uint64_t)R * NH * HD;
    float *kc = malloc(nc * sizeof(float)), *vc = malloc(nc * sizeof(float));
    int32_t *cm = malloc((size_t)R * S * sizeof(int32_t));
    for (int32_t r = 0; r < R; r++)
        for (int32_t s = 0; s < S; s++) {
            int hole = (r == 1 && (s < 4 || s % 7 == 3)) || (r == 3 && s < lenh[r]);
            cm[r * S + s] = !hole;
            for (int32_t i = 0; i < NKV * HD; i++) {
                size_t at = ((size_t)r * S + s) * NKV * HD + i;
                kc[at] = s >= lenh[r] ? NAN : hole ? 50.0f : cuda_parity_uniform(-1.5f, 1.5f);
                vc[at] = s >= lenh[r] ? NAN : hole ? 50.0f : cuda_parity_uniform(-1.0f, 1.0f);
            }
        }
    cuda_pair k = cuda_pair_new(&P, kc, nc * sizeof(float));
    cuda_pair v = cuda_pair_new(&P, vc, nc * sizeof(float));
    cuda_pair mask = cuda_pair_new(&P, cm, (uint64_t)R * S * sizeof(int32_t));
    cuda_pair len = cuda_pair_new(&P, lenh, (uint64_t)R * sizeof(int32_t));
    cuda_pair q = cuda_pair_rand(&P, nq, -1.5f, 1.5f), out = cuda_pair_fill(&P, nq, NAN);
    BOTH(o->attention_decode(o->ctx, AT(out), AT(q), AT(k), AT(v), AT(mask), AT(len), R, S, NH,
                             NKV, HD));
    char what[64];
    snprintf(what, sizeof what, "attention decode S%d NH%d NKV%d HD%d", S, NH, NKV, HD);
    ck_assert_int_eq(cuda_pair_compare(&P, &out, nq, 1e-5, 1e-4, what), 0);
    float *got = malloc(nq * sizeof(float));
    P.cuda->download(P.cuda->ctx, got, out.dev, nq * sizeof(float));
    for (int32_t r = 0; r < R; r++) /* len 0, or nothing real: exactly 0 */
        if (lenh[r] == 0 || r == 3)
            for (int32_t i = 0; i < NH * HD; i++) ck_assert(got[(size_t)r * NH * HD + i] == 0.0f);
    free(got), free(kc), free(vc), free(cm);
    cuda_pair *all[] = {&k, &v, &mask, &len, &q, &out};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) cuda_pair_free(&P, all[i]);
}

START_TEST(attention_decode_matches_cpu) {
    const int32_t len1[5] = {24, 17, 1, 9, 0};
    check_decode(24, 4, 2, 8, len1, 5);
    check_decode(24, 4, 4, 64, len1, 5);
    const int32_t len2[4] = {150, 141, 90, 30}; /* five key tiles */
    check_decode(150, 2, 1, 128, len2, 4);
}
END_TEST

/* ---- fused head ------------------------------------------------------------------------------ */

typedef struct head_bufs {
    int32_t N, C, V;
    cuda_pair hidden, w, wb, targets, logp, lse, ent;
} head_bufs;

/* hidden (N,C), w (V,C) fp32 and its bf16 copy, targets with every third row < 0 when skip. */
static head_bufs head_new(int32_t N, int32_t C, int32_t V, int skip) {
    head_bufs h;
    memset(&h, 0, sizeof h);
    h.N = N, h.C = C, h.V = V;
    h.hidden = cuda_pair_rand(&P, (uint64_t)N * C, -1.0f, 1.0f);
    h.w = cuda_pair_rand(&P, (uint64_t)V * C, -1.0f, 1.0f);
    uint16_t *wb = malloc((size_t)V * C * sizeof(uint16_t));
    for (int32_t i = 0; i < V * C; i++) wb[i] = grpo_bf16_from_f32(((float *)h.w.cpu)[i]);
    h.wb = cuda_pair_new(&P, wb, (uint64_t)V * C * sizeof(uint16_t));
    free(wb);
    int32_t *tg = malloc((size_t)N * sizeof(int32_t));
    for (int32_t n = 0; n < N; n++) /* spread over every chunk, including the last column */
        tg[n] = skip && n % 3 == 1 ? -1 - n % 2 : n == 0 ? V - 1 : (n * 7919) % V;
    h.targets = cuda_pair_new(&P, tg, (uint64_t)N * sizeof(int32_t));
    free(tg);
    h.logp = cuda_pair_fill(&P, (uint64_t)N, NAN);
    h.lse = cuda_pair_fill(&P, (uint64_t)N, NAN);
    h.ent = cuda_pair_fill(&P, (uint64_t)N, NAN);
    return h;
}

static void head_free(head_bufs *h) {
    cuda_pair *all[] = {&h->hidden, &h->w, &h->wb, &h->targets, &h->logp, &h->lse, &h->ent};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) cuda_pair_free(&P, all[i]);
}

static void head_compare_forward(head_bufs *h, const char *what) {
    char name[96];
    snprintf(name, sizeof name, "%s logp", what);
    ck_assert_int_eq(cuda_pair_compare(&P, &h->logp, h->N, 1e-5, 1e-4, name), 0);
    snprintf(name, sizeof name, "%s lse", what);
    ck_assert_int_eq(cuda_pair_compare(&P, &h->lse, h->N, 1e-5, 1e-4, name), 0);
    snprintf(name, sizeof name, "%s entropy", what);
    ck_assert_int_eq(cuda_pair_compare(&P, &h->ent, h->N, 1e-5, 1e-4, name), 0);
}

/* The whole head family for one shape: forward (fp32 and bf16 w, and without targets), backward
 * without and with the entropy term (dw prefilled), backward_w (bf16, entropy and none). */
static void check_head(int32_t N, int32_t C, int32_t V, int skip, float scale) {
    head_bufs h = head_new(N, C, V, skip);
    BOTH(o->head_forward(o->ctx, AT(h.logp), AT(h.lse), AT(h.ent), AT(h.hidden), AT(h.w),
                         AT(h.targets), N, C, V, scale));
    head_compare_forward(&h, "head_forward");

    uint64_t nh = (uint64_t)N * C, nw = (uint64_t)V * C;
    cuda_pair dlogp = cuda_pair_rand(&P, N, -1.0f, 1.0f);
    float *de = malloc((size_t)N * sizeof(float));
    for (int32_t n = 0; n < N; n++) de[n] = n % 4 == 2 ? 0.0f : cuda_parity_uniform(-1.0f, 1.0f);
    cuda_pair dent = cuda_pair_new(&P, de, (uint64_t)N * sizeof(float));
    free(de);
    cuda_pair dh = cuda_pair_fill(&P, nh, NAN), dw = cuda_pair_rand(&P, nw, -1.0f, 1.0f);
    BOTH(o->head_backward(o->ctx, AT(dh), AT(dw), AT(dlogp), AT(h.hidden), AT(h.w),
                          AT(h.targets), AT(h.lse), N, C, V, scale));
    ck_assert_int_eq(cuda_pair_compare(&P, &dh, nh, 2e-5, 1e-4, "head_backward dhidden"), 0);
    ck_assert_int_eq(cuda_pair_compare(&P, &dw, nw, 2e-5, 1e-4, "head_backward dw (+=)"), 0);

    cuda_pair dh2 = cuda_pair_fill(&P, nh, NAN), dw2 = cuda_pair_rand(&P, nw, -1.0f, 1.0f);
    BOTH(o->head_backward_entropy(o->ctx, AT(dh2), AT(dw2), AT(dlogp), AT(dent), AT(h.ent),
                                  AT(h.hidden), AT(h.w), AT(h.targets), AT(h.lse), N, C, V,
                                  scale));
    ck_assert_int_eq(cuda_pair_compare(&P, &dh2, nh, 2e-5, 1e-4, "head_backward_entropy dhidden"),
                     0);
    ck_assert_int_eq(cuda_pair_compare(&P, &dw2, nw, 2e-5, 1e-4, "head_backward_entropy dw"), 0);

    /* bf16 w: forward (no entropy output), backward_w with and without the entropy term */
    cuda_pair lp = cuda_pair_fill(&P, N, NAN), ls = cuda_pair_fill(&P, N, NAN);
    BOTH(o->head_forward_w(o->ctx, AT(lp), AT(ls), NULL, AT(h.hidden), AT(h.wb),
                           GRPO_DTYPE_BF16, AT(h.targets), N, C, V, scale));
    ck_assert_int_eq(cuda_pair_compare(&P, &lp, N, 1e-5, 1e-4, "head_forward_w logp"), 0);
    ck_assert_int_eq(cuda_pair_compare(&P, &ls, N, 1e-5, 1e-4, "head_forward_w lse"), 0);
    cuda_pair dh3 = cuda_pair_fill(&P, nh, NAN), dh4 = cuda_pair_fill(&P, nh, NAN);
    BOTH(o->head_backward_w(o->ctx, AT(dh3), AT(dlogp), AT(dent), AT(h.ent), AT(h.hidden),
                            AT(h.wb), GRPO_DTYPE_BF16, AT(h.targets), AT(ls), N, C, V, scale));
    BOTH(o->head_backward_w(o->ctx, AT(dh4), AT(dlogp), NULL, NULL, AT(h.hidden), AT(h.wb),
                            GRPO_DTYPE_BF16, AT(h.targets), AT(ls), N, C, V, scale));
    ck_assert_int_eq(cuda_pair_compare(&P, &dh3, nh, 2e-5, 1e-4, "head_backward_w (entropy)"), 0);
    ck_assert_int_eq(cuda_pair_compare(&P, &dh4, nh, 2e-5, 1e-4, "head_backward_w"), 0);

    /* no targets: lse and entropy of every row, logp 0 */
    cuda_pair lp0 = cuda_pair_fill(&P, N, NAN), ls0 = cuda_pair_fill(&P, N, NAN);
    cuda_pair en0 = cuda_pair_fill(&P, N, NAN);
    BOTH(o->head_forward(o->ctx, AT(lp0), AT(ls0), AT(en0), AT(h.hidden), AT(h.w), NULL, N, C, V,
                         scale));
    ck_assert_int_eq(cuda_pair_compare(&P, &lp0, N, 0, 0, "head_forward logp without targets"), 0);
    ck_assert_int_eq(cuda_pair_compare(&P, &ls0, N, 1e-5, 1e-4, "head_forward lse, no targets"), 0);
    ck_assert_int_eq(cuda_pair_compare(&P, &en0, N, 1e-5, 1e-4, "head_forward entropy, no tg"), 0);

    cuda_pair *all[] = {&dlogp, &dent, &dh, &dw, &dh2, &dw2, &lp, &ls, &dh3, &dh4, &lp0, &ls0,
                        &en0};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) cuda_pair_free(&P, all[i]);
    head_free(&h);
}

START_TEST(head_matches_cpu_across_chunks_and_passes) {
    /* V = 37 in chunks of 8 (the last one 5 wide), rows 4 per pass over 7 or 11 listed rows */
    setenv("GRPO_CUDA_HEAD_CHUNK", "8", 1);
    setenv("GRPO_CUDA_HEAD_ROWS", "4", 1);
    check_head(11, 24, 37, 1, 1.0f);  /* rows with targets < 0: listed rows, gathered */
    check_head(11, 24, 37, 0, 0.75f); /* every row has a target: in place; logit scale */
    unsetenv("GRPO_CUDA_HEAD_CHUNK");
    unsetenv("GRPO_CUDA_HEAD_ROWS");
    check_head(9, 24, 37, 1, 1.0f); /* the defaults: one chunk, one pass */
}
END_TEST

/* Every target < 0: nothing is computed; logp, lse, entropy and dhidden are 0, dw unchanged. */
START_TEST(head_with_no_target_rows_writes_zeros) {
    const int32_t N = 6, C = 8, V = 13;
    head_bufs h = head_new(N, C, V, 1);
    int32_t none[6] = {-1, -1, -2, -1, -1, -1};
    memcpy(h.targets.cpu, none, sizeof none);
    P.cuda->upload(P.cuda->ctx, h.targets.dev, none, sizeof none);
    cuda_pair dlogp = cuda_pair_rand(&P, N, -1.0f, 1.0f);
    cuda_pair dh = cuda_pair_fill(&P, (uint64_t)N * C, NAN);
    cuda_pair dw = cuda_pair_rand(&P, (uint64_t)V * C, -1.0f, 1.0f);
    BOTH(o->head_forward(o->ctx, AT(h.logp), AT(h.lse), AT(h.ent), AT(h.hidden), AT(h.w),
                         AT(h.targets), N, C, V, 1.0f));
    BOTH(o->head_backward(o->ctx, AT(dh), AT(dw), AT(dlogp), AT(h.hidden), AT(h.w),
                          AT(h.targets), AT(h.lse), N, C, V, 1.0f));
    head_compare_forward(&h, "head_forward, no target rows");
    ck_assert_int_eq(cuda_pair_compare(&P, &dh, (uint64_t)N * C, 0, 0, "dhidden, no target"), 0);
    ck_assert_int_eq(cuda_pair_compare(&P, &dw, (uint64_t)V * C, 0, 0, "dw, no target"), 0);
    float lse[6];
    P.cuda->download(P.cuda->ctx, lse, h.lse.dev, sizeof lse);
    for (int32_t n = 0; n < N; n++) ck_assert(lse[n] == 0.0f);
    cuda_pair_free(&P, &dlogp), cuda_pair_free(&P, &dh), cuda_pair_free(&P, &dw);
    head_free(&h);
}
END_TEST

/* NH not a multiple of NKV, and a head wider than the kernels take, abort naming the op. */
START_TEST(attention_refuses_nh_not_multiple_of_nkv) {
    cuda_pair x = cuda_pair_fill(&P, 64, 0.0f);
    P.cuda->attention_forward(P.cuda->ctx, x.dev, x.dev, x.dev, x.dev, x.dev, (int32_t *)x.dev,
                              1, 1, 3, 2, 8);
    P.cuda->sync(P.cuda->ctx);
}
END_TEST

START_TEST(attention_refuses_hd_over_128) {
    cuda_pair x = cuda_pair_fill(&P, 1024, 0.0f);
    P.cuda->attention_backward(P.cuda->ctx, x.dev, x.dev, x.dev, x.dev, x.dev, x.dev, x.dev,
                               x.dev, x.dev, (int32_t *)x.dev, 1, 1, 1, 1, 129);
    P.cuda->sync(P.cuda->ctx);
}
END_TEST

/* A target >= V aborts the process with a line naming the op (Check runs it in a child). */
START_TEST(head_refuses_target_out_of_range) {
    head_bufs h = head_new(5, 8, 13, 1);
    int32_t bad[5] = {0, -1, 13, 2, 3};
    P.cuda->upload(P.cuda->ctx, h.targets.dev, bad, sizeof bad);
    P.cuda->head_forward(P.cuda->ctx, h.logp.dev, h.lse.dev, NULL, h.hidden.dev, h.w.dev,
                         h.targets.dev, 5, 8, 13, 1.0f);
    P.cuda->sync(P.cuda->ctx);
    head_free(&h);
}
END_TEST

int main(void) {
    cuda_parity_skip_unless_available("test_cuda_attention");
    Suite *s = suite_create("cuda_attention");
    TCase *tc = tcase_create("parity");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, attention_forward_matches_cpu);
    tcase_add_test(tc, attention_backward_matches_cpu);
    tcase_add_test(tc, attention_never_reads_padding);
    tcase_add_test(tc, attention_decode_matches_cpu);
    tcase_add_test(tc, head_matches_cpu_across_chunks_and_passes);
    tcase_add_test(tc, head_with_no_target_rows_writes_zeros);
    const char *fork_mode = getenv("CK_FORK");
    if (fork_mode && strcmp(fork_mode, "no") == 0) { /* an abort would end the whole run */
        printf("CK_FORK=no: the refusal tests (which abort) are left out\n");
    } else {
        tcase_add_test_raise_signal(tc, head_refuses_target_out_of_range, SIGABRT);
        tcase_add_test_raise_signal(tc, attention_refuses_nh_not_multiple_of_nkv, SIGABRT);
        tcase_add_test_raise_signal(tc, attention_refuses_hd_over_128, SIGABRT);
    }
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
