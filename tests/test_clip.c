/* test_clip.c — clip-by-global-norm arithmetic against torch.nn.utils.clip_grad_norm_
 * (tests/fixtures/loss/clip_cases.json, made by tools/make_loss_fixtures.py), and by hand.
 *
 * Tolerance: torch sums the fp32 squares in fp32, we sum in double: 1e-6 relative for the norm and
 * for the clipped gradients (themselves fp32). */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "train/clip.h"
#include "loss_fixture.h"

/* What the optimizer asks the backend for (ops->sumsq, ops->scale), written out here. */
static double sumsq(const float *g, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += (double)g[i] * g[i];
    return s;
}

static void scale(float *g, int n, double coef) {
    for (int i = 0; i < n; i++) g[i] *= (float)coef;
}

START_TEST(three_four_five_by_hand) {
    float g[] = {3.0f, 4.0f};
    double ss = sumsq(g, 2);
    double norm = grpo_grad_total_norm(&ss, 1);
    ck_assert(norm == 5.0);
    double coef = grpo_grad_clip_coef(norm, 1.0);
    ck_assert(coef == 1.0 / (5.0 + 1e-6));
    scale(g, 2, coef);
    ck_assert(fabs(g[0] - 0.6) < 1e-6 && fabs(g[1] - 0.8) < 1e-6);
    ck_assert(grpo_grad_clip_coef(0.5, 1.0) == 1.0); /* never scales up */
    ck_assert(grpo_grad_clip_coef(5.0, 0.0) == 1.0); /* max_norm 0: clipping off */
    ck_assert(isnan(grpo_grad_clip_coef(NAN, 1.0)));
}
END_TEST

START_TEST(matches_clip_grad_norm) {
    cJSON *root = fixture_load("clip_cases.json");
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, root) {
        const cJSON *grads = cJSON_GetObjectItemCaseSensitive(c, "grads");
        const cJSON *clipped = cJSON_GetObjectItemCaseSensitive(c, "clipped");
        int T = cJSON_GetArraySize(grads);
        double sums[16];
        float *g[16];
        int len[16];
        ck_assert_int_le(T, 16);
        for (int t = 0; t < T; t++) {
            const cJSON *a = cJSON_GetArrayItem(grads, t);
            len[t] = cJSON_GetArraySize(a);
            g[t] = malloc(sizeof(float) * len[t]);
            for (int i = 0; i < len[t]; i++) g[t][i] = (float)cJSON_GetArrayItem(a, i)->valuedouble;
            sums[t] = sumsq(g[t], len[t]);
        }
        double norm = grpo_grad_total_norm(sums, T);
        ck_assert_close(norm, json_num(c, "total_norm"), 1e-6, 0.0, "case %d: total norm", n);
        double coef = grpo_grad_clip_coef(norm, json_num(c, "max_norm"));
        for (int t = 0; t < T; t++) {
            scale(g[t], len[t], coef);
            const cJSON *want = cJSON_GetArrayItem(clipped, t);
            for (int i = 0; i < len[t]; i++)
                ck_assert_close(g[t][i], cJSON_GetArrayItem(want, i)->valuedouble, 1e-6, 1e-12,
                                "case %d: tensor %d [%d]", n, t, i);
            free(g[t]);
        }
        n++;
    }
    ck_assert_int_ge(n, 3);
    cJSON_Delete(root);
}
END_TEST

int main(void) {
    Suite *s = suite_create("clip");
    TCase *tc = tcase_create("clip");
    tcase_add_test(tc, three_four_five_by_hand);
    tcase_add_test(tc, matches_clip_grad_norm);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
