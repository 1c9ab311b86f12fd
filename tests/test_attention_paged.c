/*
 * test_attention_paged.c — decode against a paged KV cache (ABI 1.9, attention_decode_paged)
 * on the cpu backend gives the bits of attention_decode on the same cache laid out unpaged.
 *
 * R = 5 rows of a cache of S = 90 slots, left padding 0..37 (so a row's first real slot is
 * rarely on a page boundary and most 16-key tiles span two pages), lengths from 1 slot past
 * the padding to S, masked-out slots in the middle of a row. The pages of 16 slots sit in a
 * shuffled pool (keys and values of one page side by side, pages pstride floats apart with a
 * gap, as a model pack lays them out per layer); blocks a row never reads have no page (-1),
 * and every float of the pool outside the rows' slots is NaN (a read there would show). Done
 * for HD 64 (the unrolled chunk loop) and HD 24 (a partial last chunk), GQA and plain heads.
 * With 8 query heads on a kv head, attend.c transposes each key tile once for the 8 (HD 64,
 * 128, and 40: a partial last chunk): each head must then have the bits it has decoded alone
 * (one head on one kv head: the lane dots and their shuffle reduction), paged tiles across two
 * pages included.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

enum { R = 5, S = 90, PG = 16, NBLK = (S + PG - 1) / PG };
static const int32_t pad[R] = {0, 3, 16, 21, 37}, len[R] = {90, 40, 17, 22, 75};

static float frand(uint32_t *s) {
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* Each query head h of a (R rows, NH heads of HD) decoded alone against its kv head's cache
 * (one head on one kv head) must give a's bits for that head. */
static void check_heads_alone(grpo_ops *ops, const float *a, const float *q, const float *kc,
                              const float *vc, const int32_t *cm, int32_t NH, int32_t NKV,
                              int32_t HD) {
    const int32_t rep = NH / NKV;
    float *k1 = malloc((size_t)R * S * HD * 4), *v1 = malloc((size_t)R * S * HD * 4);
    float *q1 = malloc((size_t)R * HD * 4), *o1 = malloc((size_t)R * HD * 4);
    for (int32_t h = 0; h < NH; h++) {
        const int32_t g = h / rep;
        for (size_t rs = 0; rs < (size_t)R * S; rs++) {
            memcpy(k1 + rs * HD, kc + (rs * NKV + g) * HD, (size_t)HD * 4);
            memcpy(v1 + rs * HD, vc + (rs * NKV + g) * HD, (size_t)HD * 4);
        }
        for (int32_t r = 0; r < R; r++)
            memcpy(q1 + (size_t)r * HD, q + ((size_t)r * NH + h) * HD, (size_t)HD * 4);
        ops->attention_decode(ops->ctx, o1, q1, k1, v1, cm, len, R, S, 1, 1, HD);
        for (int32_t r = 0; r < R; r++)
            ck_assert_msg(memcmp(o1 + (size_t)r * HD, a + ((size_t)r * NH + h) * HD,
                                 (size_t)HD * 4) == 0,
                          "row %d head %d of %d on %d kv heads, HD %d: alone, other bits", r, h,
                          NH, NKV, HD);
    }
    free(k1), free(v1), free(q1), free(o1);
}

/* One case: NH query heads on NKV kv heads of HD. */
static void paged_case(grpo_ops *ops, int32_t NH, int32_t NKV, int32_t HD) {
    const size_t ks = (size_t)NKV * HD, nc = (size_t)R * S * ks;
    const size_t pagef = PG * ks, pstride = 2 * pagef + 40; /* k | v | a gap */
    float *kc = malloc(nc * 4), *vc = malloc(nc * 4), *q = malloc((size_t)R * NH * HD * 4);
    float *pool = malloc((size_t)R * NBLK * pstride * 4);
    float *a = malloc((size_t)R * NH * HD * 4), *b = malloc((size_t)R * NH * HD * 4);
    int32_t cm[R * S], table[R * NBLK], perm[R * NBLK];
    uint32_t seed = 7;
    for (size_t i = 0; i < nc; i++) kc[i] = frand(&seed), vc[i] = frand(&seed);
    for (size_t i = 0; i < (size_t)R * NH * HD; i++) q[i] = frand(&seed);
    for (size_t i = 0; i < (size_t)R * NBLK * pstride; i++) pool[i] = NAN;
    for (int32_t i = 0; i < R * NBLK; i++) perm[i] = i;
    for (int32_t i = R * NBLK - 1; i > 0; i--) { /* a shuffled pool */
        int32_t j = (int32_t)(frand(&seed) * 0.5f * (float)i + 0.5f * (float)i) % (i + 1);
        int32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (int32_t r = 0; r < R; r++) {
        for (int32_t s = 0; s < S; s++) /* padding, then real slots with a masked-out run */
            cm[r * S + s] = s >= pad[r] && !(s >= pad[r] + 5 && s < pad[r] + 8);
        for (int32_t blk = 0; blk < NBLK; blk++) {
            int used = blk * PG < len[r] && (blk + 1) * PG > pad[r];
            table[r * NBLK + blk] = used ? perm[r * NBLK + blk] : -1;
        }
        for (int32_t s = pad[r]; s < len[r]; s++) { /* only the slots the row reads */
            float *pg = pool + (size_t)table[r * NBLK + s / PG] * pstride;
            memcpy(pg + (size_t)(s % PG) * ks, kc + ((size_t)r * S + s) * ks, ks * 4);
            memcpy(pg + pagef + (size_t)(s % PG) * ks, vc + ((size_t)r * S + s) * ks, ks * 4);
        }
        for (int32_t s = len[r]; s < S; s++) /* slots past len are not read: NaN unpaged too */
            for (size_t e = 0; e < ks; e++)
                kc[((size_t)r * S + s) * ks + e] = vc[((size_t)r * S + s) * ks + e] = NAN;
    }
    ops->attention_decode(ops->ctx, a, q, kc, vc, cm, len, R, S, NH, NKV, HD);
    ops->attention_decode_paged(ops->ctx, b, q, pool, pool + pagef, (int64_t)pstride, table,
                                NBLK, PG, cm, len, R, S, NH, NKV, HD);
    for (size_t i = 0; i < (size_t)R * NH * HD; i++) ck_assert(!isnan(a[i]));
    if (NH / NKV >= 8) check_heads_alone(ops, a, q, kc, vc, cm, NH, NKV, HD);
    for (int32_t r = 0; r < R; r++)
        ck_assert_msg(memcmp(a + (size_t)r * NH * HD, b + (size_t)r * NH * HD,
                             (size_t)NH * HD * 4) == 0,
                      "row %d (pad %d, len %d), NH %d NKV %d HD %d: paged bits differ", r,
                      pad[r], len[r], NH, NKV, HD);
    free(kc), free(vc), free(q), free(pool), free(a), free(b);
}

START_TEST(paged_decode_has_the_unpaged_bits) {
    grpo_error err;
    grpo_error_init(&err);
    for (int threads = 1; threads <= 2; threads++) {
        grpo_ops *ops = grpo_backend_open("cpu", threads, &err);
        ck_assert_msg(ops != NULL, "cpu backend: %s", err.message);
        ck_assert(grpo_ops_supports(ops, attention_decode_paged));
        paged_case(ops, 4, 2, 64);
        paged_case(ops, 16, 2, 64);
        paged_case(ops, 16, 2, 128);
        paged_case(ops, 8, 1, 40);
        paged_case(ops, 2, 2, 24);
        paged_case(ops, 8, 1, 16);
        grpo_backend_close(ops);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("attention_paged");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, paged_decode_has_the_unpaged_bits);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
