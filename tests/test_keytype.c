/* test_keytype.c — typed configuration values: names, parsing, validation messages. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "io/keytype.h"

START_TEST(type_names_round_trip) {
    for (int t = 0; t < GRPO_KEY_TYPE_COUNT; t++)
        ck_assert_int_eq(grpo_key_type_parse(grpo_key_type_name((grpo_key_type)t)), t);
    ck_assert_int_eq(grpo_key_type_parse("double"), -1);
}
END_TEST

START_TEST(int_values_are_checked) {
    char why[128] = "";
    ck_assert(grpo_key_value_ok(GRPO_KEY_INT, "-12", why, sizeof why));
    ck_assert(!grpo_key_value_ok(GRPO_KEY_INT, "1.5", why, sizeof why));
    ck_assert_str_eq(why, "expected an integer, got '1.5'");
    ck_assert(!grpo_key_value_ok(GRPO_KEY_INT, "99999999999999999999", why, sizeof why));
}
END_TEST

START_TEST(float_values_reject_non_finite) {
    char why[128] = "";
    double v;
    ck_assert(grpo_text_double("1e-4", &v));
    ck_assert(v == 1e-4);
    ck_assert(!grpo_key_value_ok(GRPO_KEY_FLOAT, "nan", why, sizeof why));
    ck_assert(!grpo_key_value_ok(GRPO_KEY_FLOAT, "inf", why, sizeof why));
    ck_assert(!grpo_key_value_ok(GRPO_KEY_FLOAT, "0.5x", why, sizeof why));
    ck_assert_str_eq(why, "expected a finite number, got '0.5x'");
}
END_TEST

START_TEST(bool_spellings) {
    int32_t b = -1;
    ck_assert(grpo_text_bool("Yes", &b) && b == 1);
    ck_assert(grpo_text_bool("off", &b) && b == 0);
    ck_assert(!grpo_text_bool("maybe", &b));
}
END_TEST

int main(void) {
    Suite *s = suite_create("keytype");
    TCase *tc = tcase_create("values");
    tcase_add_test(tc, type_names_round_trip);
    tcase_add_test(tc, int_values_are_checked);
    tcase_add_test(tc, float_values_reject_non_finite);
    tcase_add_test(tc, bool_spellings);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
