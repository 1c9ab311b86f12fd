/* test_advantage.c — NaN-aware reward sum and group-relative advantages against PyTorch
 * references of TRL's and MiniMind's formulas (tests/fixtures/loss/advantage_cases.json, from
 * tools/make_loss_fixtures.py), plus hand-computed cases.
 *
 * Tolerances: the C code sums in double from the same float32 inputs as the float64 reference, then
 * stores r and A as float32, so they agree to float32 rounding (~6e-8 relative). r - mean can
 * cancel, which turns r's rounding into a larger relative error of A: A is checked to 1e-5 of
 * max(1, |A|). Metrics are doubles from float32 r: 1e-6 relative. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/advantage.h"
#include "loss_fixture.h"
#include "train/reward_sum.h"
#include "train/testing.h"

START_TEST(reward_sum_skips_nan_and_marks_unscorable) {
    const float R[] = {1.0f, NAN, NAN, NAN, 2.0f, 3.0f, NAN, -4.0f}; /* [4,2] */
    const float w[] = {1.0f, 0.5f};
    float r[4];
    ck_assert_int_eq(grpo_reward_sum(r, R, w, 4, 2), 1);
    ck_assert(r[0] == 1.0f);
    ck_assert(isnan(r[1]));
    ck_assert(r[2] == 3.5f);
    ck_assert(r[3] == -2.0f);
}
END_TEST

START_TEST(nanstd_counts_only_numbers) {
    const float x[] = {NAN, 2.0f, NAN, 4.0f};
    ck_assert(grpo_nanmean(x, 4, 1) == 3.0);
    ck_assert(fabs(grpo_nanstd(x, 4, 1, 1) - sqrt(2.0)) < 1e-15);
    ck_assert(grpo_nanstd(x, 4, 1, 0) == 1.0);
    ck_assert(isnan(grpo_nanstd(x, 2, 1, 1))); /* a single number: Bessel's n-1 is 0 */
    ck_assert(grpo_nanstd(x, 2, 1, 0) == 0.0);
    ck_assert(isnan(grpo_nanmean(x, 1, 1)));
}
END_TEST

START_TEST(two_member_group_by_hand) {
    const float r[] = {0.0f, 1.0f, 5.0f, 5.0f}; /* B=2, G=2: the second group has std 0 */
    float a[4];
    grpo_advantage_metrics m;
    grpo_error err;
    grpo_error_init(&err);
    grpo_advantage_opts o = grpo_advantage_opts_default();
    ck_assert_int_eq(grpo_advantages(a, &m, r, 2, 2, &o, &err), GRPO_OK);
    double want = 0.5 / (sqrt(0.5) + 1e-4);
    ck_assert(fabs(a[0] + want) < 1e-6 && fabs(a[1] - want) < 1e-6);
    ck_assert(a[2] == 0.0f && a[3] == 0.0f);
    ck_assert(m.frac_reward_zero_std == 0.5);
    ck_assert(m.reward == 2.75);
}
END_TEST

START_TEST(bad_shapes_are_errors) {
    float r[2] = {0, 1}, a[2];
    grpo_error err;
    grpo_error_init(&err);
    grpo_advantage_opts o = grpo_advantage_opts_default();
    ck_assert_int_eq(grpo_advantages(a, NULL, r, 0, 2, &o, &err), GRPO_ERR_INVALID);
    ck_assert(strstr(err.message, "B=0") != NULL);
    o.clip = -1.0f;
    ck_assert_int_eq(grpo_advantages(a, NULL, r, 1, 2, &o, &err), GRPO_ERR_INVALID);
    ck_assert(strstr(err.message, "clip") != NULL);
    o.clip = 0.0;
    r[1] = INFINITY;
    ck_assert_int_eq(grpo_advantages(a, NULL, r, 1, 2, &o, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "r[1] is inf") != NULL, "%s", err.message);
    const float w[] = {1.0f};
    ck_assert_int_eq(grpo_advantages_gdpo(a, NULL, r, w, 1, 2, 0, &o, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "K=0") != NULL, "%s", err.message);
    ck_assert_int_eq(err.status, GRPO_ERR_INVALID);
}
END_TEST

static void check_case(const cJSON *c) {
    const char *name = json_str(c, "name");
    int B = (int)json_num(c, "B"), G = (int)json_num(c, "G"), K = (int)json_num(c, "K"), N = B * G;
    float *R = json_floats(c, "R", NULL), *w = json_floats(c, "w", NULL);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(c, "expect");
    float *want_r = json_floats(e, "r", NULL), *want_a = json_floats(e, "adv", NULL);
    float *fm = json_floats(e, "func_mean", NULL), *fs = json_floats(e, "func_std", NULL);
    grpo_advantage_opts o = {grpo_choice_index(grpo_choices_scale_rewards, json_str(c, "scale")),
                             (int)json_num(c, "unbiased"), json_num(c, "clip"),
                             (int)json_num(c, "renorm")};
    float *r = malloc(sizeof(float) * N), *a = malloc(sizeof(float) * N);
    grpo_advantage_metrics m;
    grpo_error err;
    grpo_error_init(&err);
    int rc;
    if (strcmp(json_str(c, "agg"), "normalize_then_sum") == 0)
        rc = grpo_advantages_gdpo(a, &m, R, w, B, G, K, &o, &err);
    else {
        grpo_reward_sum(r, R, w, N, K);
        for (int i = 0; i < N; i++)
            ck_assert_close(r[i], want_r[i], 1e-6, 0.0, "%s: r[%d]", name, i);
        rc = grpo_advantages(a, &m, r, B, G, &o, &err);
    }
    ck_assert_msg(rc == GRPO_OK, "%s: %s", name, err.message);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(!isnan(a[i]), "%s: A[%d] is NaN", name, i);
        double tol = 1e-5 * fmax(1.0, fabs(want_a[i]));
        ck_assert_close(a[i], want_a[i], 0.0, tol, "%s: A[%d]", name, i);
    }
    ck_assert_close(m.reward, json_num(e, "reward"), 1e-6, 1e-9, "%s: reward", name);
    ck_assert_close(m.reward_std, json_num(e, "reward_std"), 1e-6, 1e-9, "%s: reward_std", name);
    ck_assert_close(m.frac_reward_zero_std, json_num(e, "frac_reward_zero_std"), 0.0, 1e-12,
                    "%s: frac_reward_zero_std", name);
    ck_assert_int_eq(m.n_unscorable, (int)json_num(e, "n_unscorable"));
    for (int k = 0; k < K; k++) {
        double mean, std;
        grpo_reward_func_stats(&mean, &std, R, N, K, k);
        ck_assert_close(mean, fm[k], 1e-6, 1e-9, "%s: rewards/%d/mean", name, k);
        ck_assert_close(std, fs[k], 1e-6, 1e-9, "%s: rewards/%d/std", name, k);
    }
    free(R), free(w), free(want_r), free(want_a), free(fm), free(fs), free(r), free(a);
}

START_TEST(zero_std_groups_are_found) {
    /* B = 4 groups of G = 3: all equal; varied; one scored member (others NaN); none scored. */
    const float r[] = {1, 1, 1, 0, 1, 0, NAN, 2, NAN, NAN, NAN, NAN};
    unsigned char keep[4];
    ck_assert_int_eq(grpo_zero_std_groups(keep, r, 4, 3), 3);
    ck_assert(keep[0] == 0 && keep[1] == 1 && keep[2] == 0 && keep[3] == 0);
    /* their advantages are all 0, which is why dropping them loses nothing */
    float a[12];
    grpo_advantage_opts o = grpo_advantage_opts_default();
    ck_assert_int_eq(grpo_advantages(a, NULL, r, 4, 3, &o, NULL), GRPO_OK);
    for (int i = 0; i < 12; i++)
        if (!keep[i / 3]) ck_assert_float_eq(a[i], 0.0f);
}
END_TEST

START_TEST(matches_pytorch_reference) {
    cJSON *root = fixture_load("advantage_cases.json");
    int n = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, root) {
        check_case(c);
        n++;
    }
    ck_assert_int_ge(n, 10);
    cJSON_Delete(root);
}
END_TEST

int main(void) {
    Suite *s = suite_create("advantage");
    TCase *tc = tcase_create("advantage");
    tcase_add_test(tc, reward_sum_skips_nan_and_marks_unscorable);
    tcase_add_test(tc, nanstd_counts_only_numbers);
    tcase_add_test(tc, two_member_group_by_hand);
    tcase_add_test(tc, bad_shapes_are_errors);
    tcase_add_test(tc, zero_std_groups_are_found);
    tcase_add_test(tc, matches_pytorch_reference);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
