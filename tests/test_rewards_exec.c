/*
 * test_rewards_exec.c — builtin.exec against a real external program (tests/exec_scorers/scorer.c):
 * values and nulls come back, the program stays alive across batches, and a crashing, hanging or
 * garbling program costs one batch of NaN, never the run.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grpo/reward.h"
#include "registry.h"

static grpo_registry reg;
static const grpo_reward_desc *desc;

static void setup(void) {
    grpo_error err;
    grpo_error_init(&err);
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    memset(&reg, 0, sizeof reg);
    ck_assert_msg(grpo_registry_scan(&reg, dirs, &err) == GRPO_OK, "%s", err.message);
    const grpo_entry *e = grpo_registry_find(&reg, "builtin.exec");
    ck_assert_ptr_nonnull(e);
    ck_assert_msg(grpo_registry_load(&reg, e, grpo_default_host(), (const void **)&desc, &err) == GRPO_OK,
                  "%s", err.message);
}

static void teardown(void) { grpo_registry_free(&reg); }

static void *start(const char *mode, const char *timeout) {
    const char *keys[] = {"command", "command", "timeout"}, *values[] = {EXEC_SCORER, mode, timeout};
    grpo_config cfg = {sizeof cfg, 3, keys, values, "reward.ext"};
    grpo_error err;
    grpo_error_init(&err);
    void *state = NULL;
    ck_assert_msg(desc->create(grpo_default_host(), &cfg, &state, &err) == GRPO_OK, "%s", err.message);
    return state;
}

static void batch(void *state, const char *const *completions, uint32_t n, float *out) {
    grpo_sample s[8];
    grpo_field f = {sizeof f, "answer", "{\"x\": [1, \"two\"]}"};
    for (uint32_t i = 0; i < n; i++)
        s[i] = (grpo_sample){.struct_size = sizeof s[i], .prompt = "p\n\"q\"", .completion = completions[i],
                             .group = 0, .member = i, .fields = &f, .n_fields = 1};
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(desc->score(state, s, n, out, &err), GRPO_OK); /* never fails the run */
}

START_TEST(values_and_nulls_come_back_across_batches) {
    void *st = start("good", "10");
    const char *c[] = {"abc", "ignored", "héllo\n\"x\""};
    float r[3];
    for (int round = 0; round < 3; round++) {
        batch(st, c, 3, r);
        ck_assert_float_eq(r[0], 3.0f);
        ck_assert(isnan(r[1]));             /* null = no opinion */
        ck_assert_float_eq(r[2], 10.0f);    /* bytes of the UTF-8 text survived JSON escaping */
    }
    desc->destroy(st);
}
END_TEST

START_TEST(crash_costs_one_batch_then_restarts) {
    void *st = start("crash", "10");
    const char *c[] = {"ab", "x"};
    float r[2];
    batch(st, c, 2, r);
    ck_assert_float_eq(r[0], 2.0f);
    batch(st, c, 2, r); /* the program exits instead of replying */
    ck_assert(isnan(r[0]) && isnan(r[1]));
    batch(st, c, 2, r); /* restarted: its first batch works again */
    ck_assert_float_eq(r[0], 2.0f);
    desc->destroy(st);
}
END_TEST

START_TEST(hang_times_out_to_nan) {
    void *st = start("hang", "0.3");
    const char *c[] = {"ab"};
    float r[1];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    batch(st, c, 1, r);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double took = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    ck_assert(isnan(r[0]));
    ck_assert_msg(took >= 0.29 && took < 5.0, "took %g s", took);
    desc->destroy(st);
}
END_TEST

START_TEST(junk_reply_and_missing_program_give_nan) {
    void *st = start("junk", "10");
    const char *c[] = {"ab"};
    float r[1];
    batch(st, c, 1, r);
    ck_assert(isnan(r[0]));
    desc->destroy(st);
    const char *keys[] = {"command", "timeout"}, *values[] = {"/nonexistent/scorer", "1"};
    grpo_config cfg = {sizeof cfg, 2, keys, values, "reward.ext"};
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(desc->create(grpo_default_host(), &cfg, &st, &err), GRPO_OK);
    batch(st, c, 1, r);
    ck_assert(isnan(r[0]));
    desc->destroy(st);
}
END_TEST

START_TEST(missing_command_is_a_config_error) {
    const char *keys[] = {"timeout"}, *values[] = {"1"};
    grpo_config cfg = {sizeof cfg, 1, keys, values, "reward.ext"};
    grpo_error err;
    grpo_error_init(&err);
    void *st = NULL;
    ck_assert_int_eq(desc->create(grpo_default_host(), &cfg, &st, &err), GRPO_ERR_INVALID);
    ck_assert_str_eq(err.message, "[reward.ext] command: expected the program and its arguments, one per line");
}
END_TEST

int main(void) {
    Suite *s = suite_create("rewards_exec");
    TCase *tc = tcase_create("exec");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, values_and_nulls_come_back_across_batches);
    tcase_add_test(tc, crash_costs_one_batch_then_restarts);
    tcase_add_test(tc, hang_times_out_to_nan);
    tcase_add_test(tc, junk_reply_and_missing_program_give_nan);
    tcase_add_test(tc, missing_command_is_a_config_error);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
