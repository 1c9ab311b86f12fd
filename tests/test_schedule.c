/* test_schedule.c — learning-rate schedules against transformers' get_scheduler and torch's
 * CosineAnnealingLR (tests/fixtures/loss/schedule_cases.json, made by tools/make_loss_fixtures.py
 * by stepping the real schedulers), and by hand.
 *
 * Tolerance: 1e-9 relative + 1e-15 absolute. The HF schedulers evaluate the same closed form in
 * double; torch's CosineAnnealingLR uses a recursive update whose rounding drifts ~1e-13 over 40
 * steps. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loss_fixture.h"
#include "train/schedule.h"

START_TEST(warmup_and_ends_by_hand) {
    grpo_lr_schedule s = {GRPO_LR_COSINE, 1e-3, 10, 110, 0.5, 0.0};
    ck_assert(grpo_lr_at(&s, 0) == 0.0);            /* HF: the first update is made at lr 0 */
    ck_assert(fabs(grpo_lr_at(&s, 5) - 5e-4) < 1e-18);
    ck_assert(grpo_lr_at(&s, 10) == 1e-3);
    ck_assert(fabs(grpo_lr_at(&s, 60) - 5e-4) < 1e-15); /* half way down the half cosine */
    ck_assert(grpo_lr_at(&s, 110) < 1e-18);
    s.kind = GRPO_LR_MINIMIND;
    ck_assert(fabs(grpo_lr_at(&s, 0) - 1e-3) < 1e-18);
    ck_assert(fabs(grpo_lr_at(&s, 110) - 1e-4) < 1e-18);
    s.kind = GRPO_LR_MINIMIND_LEGACY;
    ck_assert(fabs(grpo_lr_at(&s, 0) - 1.1e-3) < 1e-18);
}
END_TEST

/* The fixture names a kind by HF's lr_scheduler_type (and MiniMind's two); index = grpo_lr_kind. */
static const char *const fixture_kinds[GRPO_LR_KIND_COUNT] = {
    "constant", "constant_with_warmup", "linear", "cosine", "cosine_with_min_lr",
    "minimind", "minimind_legacy"};

static grpo_lr_kind fixture_kind(const char *name) {
    for (int k = 0; k < GRPO_LR_KIND_COUNT; k++)
        if (strcmp(fixture_kinds[k], name) == 0) return (grpo_lr_kind)k;
    ck_abort_msg("schedule_cases.json: unknown kind '%s'", name);
    return GRPO_LR_CONSTANT;
}

START_TEST(checks) {
    grpo_lr_schedule s = {GRPO_LR_LINEAR, 1e-3, 0, 0, 0.5, 0.0};
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_lr_schedule_check(&s, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "total_steps") != NULL, "%s", err.message);
    s.kind = GRPO_LR_CONSTANT;
    ck_assert_int_eq(grpo_lr_schedule_check(&s, &err), GRPO_OK);
}
END_TEST

START_TEST(matches_transformers_and_torch) {
    cJSON *root = fixture_load("schedule_cases.json");
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, root) {
        const char *kind = json_str(c, "kind");
        grpo_lr_schedule s = {fixture_kind(kind), json_num(c, "lr"),
                              (long)json_num(c, "warmup_steps"), (long)json_num(c, "total_steps"),
                              json_num(c, "num_cycles"), json_num(c, "min_lr_rate")};
        grpo_error err;
        grpo_error_init(&err);
        ck_assert_msg(grpo_lr_schedule_check(&s, &err) == GRPO_OK, "%s: %s", kind, err.message);
        const cJSON *lrs = cJSON_GetObjectItemCaseSensitive(c, "lrs");
        for (int step = 0; step < cJSON_GetArraySize(lrs); step++)
            ck_assert_close(grpo_lr_at(&s, step), cJSON_GetArrayItem(lrs, step)->valuedouble, 1e-9,
                            1e-15, "%s (warmup %ld): lr at step %d", kind, s.warmup_steps, step);
        n++;
    }
    ck_assert_int_ge(n, 9);
    cJSON_Delete(root);
}
END_TEST

int main(void) {
    Suite *s = suite_create("schedule");
    TCase *tc = tcase_create("schedule");
    tcase_add_test(tc, warmup_and_ends_by_hand);
    tcase_add_test(tc, checks);
    tcase_add_test(tc, matches_transformers_and_torch);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
