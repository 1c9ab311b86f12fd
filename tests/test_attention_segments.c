/*
 * test_attention_segments.c — packed rows in the cpu backend's attention (since ABI 1.7): a
 * mask value > 0 is a segment id, and query t attends to keys s <= t of its own segment.
 *
 * One row of T = 96 holds left padding, three segments (5, 70, 9 tokens: the long one crosses
 * a 64-query block) and right padding; each segment is also computed alone, a row of its own
 * with a 0/1 mask. The forward's out and lse must be those of the segment alone bit for bit
 * (cpu_attend sums in the order of the one sequence), padding queries must get 0. The backward
 * (dq, dk, dv for a random dout) must match the segment alone within 1e-5 relative: its GEMMs
 * see other block shapes (other segments' keys enter with p = 0), so the order of the float
 * sums may differ; a leak across segments would be of the order of the values themselves.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

enum { T = 96, NH = 4, NKV = 2, HD = 16, NSEG = 3 };
static const int32_t seg_at[NSEG] = {3, 8, 80}, seg_len[NSEG] = {5, 70, 9};

static float frand(uint32_t *s) {
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void fill(float *x, size_t n, uint32_t *s) {
    for (size_t i = 0; i < n; i++) x[i] = frand(s);
}

static void near(const float *a, const float *b, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabsf(a[i] - b[i]) <= 1e-5f * (1.0f + fabsf(b[i])), "%s[%zu]: %g vs %g",
                      what, i, a[i], b[i]);
}

START_TEST(test_segments_match_alone) {
    grpo_error err = {0};
    grpo_ops *ops = grpo_backend_open("cpu", 2, &err);
    ck_assert_ptr_nonnull(ops);
    const size_t qn = (size_t)T * NH * HD, kn = (size_t)T * NKV * HD;
    float *q = malloc(qn * 4), *k = malloc(kn * 4), *v = malloc(kn * 4), *out = malloc(qn * 4);
    float *lse = malloc((size_t)NH * T * 4), *dout = malloc(qn * 4), *dq = malloc(qn * 4);
    float *dk = malloc(kn * 4), *dv = malloc(kn * 4);
    float *aq = malloc(qn * 4), *ak = malloc(kn * 4), *av = malloc(kn * 4);
    float *aout = malloc(qn * 4), *alse = malloc((size_t)NH * T * 4), *adout = malloc(qn * 4);
    float *adq = malloc(qn * 4), *adk = malloc(kn * 4), *adv = malloc(kn * 4);
    int32_t mask[T] = {0}, ones[T];
    uint32_t seed = 7;
    fill(q, qn, &seed), fill(k, kn, &seed), fill(v, kn, &seed), fill(dout, qn, &seed);
    for (int s = 0; s < NSEG; s++)
        for (int32_t t = 0; t < seg_len[s]; t++) mask[seg_at[s] + t] = s + 1;
    for (int32_t t = 0; t < T; t++) ones[t] = 1;
    ops->attention_forward(ops->ctx, out, lse, q, k, v, mask, 1, T, NH, NKV, HD);
    ops->attention_backward(ops->ctx, dq, dk, dv, dout, out, lse, q, k, v, mask, 1, T, NH, NKV,
                            HD);
    for (int32_t t = 0; t < T; t++) /* padding queries get zeros */
        for (int32_t i = 0; i < NH * HD && !mask[t]; i++)
            ck_assert(out[(size_t)t * NH * HD + i] == 0);
    for (int s = 0; s < NSEG; s++) {
        int32_t n = seg_len[s], a = seg_at[s];
        size_t qr = (size_t)NH * HD, kr = (size_t)NKV * HD;
        memcpy(aq, q + a * qr, n * qr * 4), memcpy(adout, dout + a * qr, n * qr * 4);
        memcpy(ak, k + a * kr, n * kr * 4), memcpy(av, v + a * kr, n * kr * 4);
        ops->attention_forward(ops->ctx, aout, alse, aq, ak, av, ones, 1, n, NH, NKV, HD);
        ops->attention_backward(ops->ctx, adq, adk, adv, adout, aout, alse, aq, ak, av, ones, 1,
                                n, NH, NKV, HD);
        ck_assert_msg(memcmp(aout, out + a * qr, n * qr * 4) == 0, "segment %d: out bits", s);
        for (int h = 0; h < NH; h++)
            ck_assert_msg(memcmp(alse + (size_t)h * n, lse + (size_t)h * T + a, n * 4) == 0,
                          "segment %d head %d: lse bits", s, h);
        near(dq + a * qr, adq, n * qr, "dq");
        near(dk + a * kr, adk, n * kr, "dk");
        near(dv + a * kr, adv, n * kr, "dv");
    }
    free(q), free(k), free(v), free(out), free(lse), free(dout), free(dq), free(dk), free(dv);
    free(aq), free(ak), free(av), free(aout), free(alse), free(adout), free(adq), free(adk);
    free(adv);
    grpo_backend_close(ops);
}
END_TEST

/* Since ABI 1.8: a parent segment (id 1, 30 tokens after 2 of left padding) and two children
 * (1 << 16 | 1: 40 tokens, crossing the 64-query block; 1 << 16 | 2: 20), then padding, in one
 * row, against the parent as a row alone (plain attention) and the children as two rows of
 * prefix attention on the parent's keys (the padded shared-prefix layout): out and lse bit for
 * bit; dq, dk, dv within 1e-5, the parent's dk/dv its own attention's plus the prefix's dkp/dvp
 * (summed over its children). */
START_TEST(test_children_see_their_parent) {
    enum { PA = 2, PN = 30, C1 = 40, C2 = 20, TC = C1 };
    const int32_t c_at[2] = {PA + PN, PA + PN + C1}, c_len[2] = {C1, C2};
    grpo_error err = {0};
    grpo_ops *ops = grpo_backend_open("cpu", 2, &err);
    ck_assert_ptr_nonnull(ops);
    const size_t qr = (size_t)NH * HD, kr = (size_t)NKV * HD, qn = T * qr, kn = T * kr;
    float *q = malloc(qn * 4), *k = malloc(kn * 4), *v = malloc(kn * 4), *out = malloc(qn * 4);
    float *lse = malloc((size_t)NH * T * 4), *dout = malloc(qn * 4), *dq = malloc(qn * 4);
    float *dk = malloc(kn * 4), *dv = malloc(kn * 4);
    /* the reference layout: the parent (PN) and the children as 2 rows of TC */
    float *pout = malloc(PN * qr * 4), *plse = malloc((size_t)NH * PN * 4);
    float *pdq = malloc(PN * qr * 4), *pdk = malloc(PN * kr * 4), *pdv = malloc(PN * kr * 4);
    float *cq = calloc(2 * TC * qr, 4), *ck = calloc(2 * TC * kr, 4), *cv = calloc(2 * TC * kr, 4);
    float *cdout = calloc(2 * TC * qr, 4), *cout = malloc(2 * TC * qr * 4);
    float *clse = malloc((size_t)2 * NH * TC * 4), *cdq = malloc(2 * TC * qr * 4);
    float *cdk = malloc(2 * TC * kr * 4), *cdv = malloc(2 * TC * kr * 4);
    int32_t mask[T] = {0}, ones[PN], cmask[2 * TC] = {0}, prefix_of[2] = {0, 0};
    uint32_t seed = 11;
    fill(q, qn, &seed), fill(k, kn, &seed), fill(v, kn, &seed), fill(dout, qn, &seed);
    for (int32_t t = 0; t < PN; t++) mask[PA + t] = 1, ones[t] = 1;
    for (int c = 0; c < 2; c++)
        for (int32_t t = 0; t < c_len[c]; t++) {
            int32_t at = c_at[c] + t, to = c * TC + t;
            mask[at] = 1 << 16 | (c + 1), cmask[to] = 1;
            memcpy(cq + to * qr, q + at * qr, qr * 4);
            memcpy(cdout + to * qr, dout + at * qr, qr * 4);
            memcpy(ck + to * kr, k + at * kr, kr * 4), memcpy(cv + to * kr, v + at * kr, kr * 4);
        }
    ops->attention_forward(ops->ctx, out, lse, q, k, v, mask, 1, T, NH, NKV, HD);
    ops->attention_backward(ops->ctx, dq, dk, dv, dout, out, lse, q, k, v, mask, 1, T, NH, NKV,
                            HD);
    const float *pq = q + PA * qr, *pk = k + PA * kr, *pv = v + PA * kr;
    ops->attention_forward(ops->ctx, pout, plse, pq, pk, pv, ones, 1, PN, NH, NKV, HD);
    ops->attention_backward(ops->ctx, pdq, pdk, pdv, dout + PA * qr, pout, plse, pq, pk, pv,
                            ones, 1, PN, NH, NKV, HD);
    ops->prefix_attention_forward(ops->ctx, cout, clse, cq, ck, cv, cmask, pk, pv, ones,
                                  prefix_of, 2, TC, 1, PN, NH, NKV, HD);
    ops->prefix_attention_backward(ops->ctx, cdq, cdk, cdv, pdk, pdv, cdout, cout, clse, cq, ck,
                                   cv, cmask, pk, pv, ones, prefix_of, 2, TC, 1, PN, NH, NKV, HD);
    ck_assert_msg(memcmp(pout, out + PA * qr, PN * qr * 4) == 0, "parent: out bits");
    near(dq + PA * qr, pdq, PN * qr, "parent dq");
    near(dk + PA * kr, pdk, PN * kr, "parent dk (with its children's)");
    near(dv + PA * kr, pdv, PN * kr, "parent dv (with its children's)");
    for (int c = 0; c < 2; c++) {
        int32_t n = c_len[c], a = c_at[c];
        ck_assert_msg(memcmp(cout + c * TC * qr, out + a * qr, n * qr * 4) == 0,
                      "child %d: out bits", c);
        for (int h = 0; h < NH; h++)
            ck_assert_msg(memcmp(clse + ((size_t)c * NH + h) * TC, lse + (size_t)h * T + a,
                                 n * 4) == 0, "child %d head %d: lse bits", c, h);
        near(dq + a * qr, cdq + c * TC * qr, n * qr, "child dq");
        near(dk + a * kr, cdk + c * TC * kr, n * kr, "child dk");
        near(dv + a * kr, cdv + c * TC * kr, n * kr, "child dv");
    }
    free(q), free(k), free(v), free(out), free(lse), free(dout), free(dq), free(dk), free(dv);
    free(pout), free(plse), free(pdq), free(pdk), free(pdv), free(cq), free(ck), free(cv);
    free(cdout), free(cout), free(clse), free(cdq), free(cdk), free(cdv);
    grpo_backend_close(ops);
}
END_TEST

int main(void) {
    Suite *s = suite_create("attention_segments");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_segments_match_alone);
    tcase_add_test(tc, test_children_see_their_parent);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
