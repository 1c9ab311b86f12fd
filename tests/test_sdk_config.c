/*
 * test_sdk_config.c — the SDK's typed config readers (grpo/config.h, ABI 1.3): good values, bad
 * values with their exact one-line message, range bounds, defaults for absent keys, and the
 * strict text parsers underneath (the host's rules for run-file values).
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "grpo/plugin.h"

/* A one-key section "reward.t" holding key = value. */
typedef struct one_key {
    const char *keys[1], *values[1];
    grpo_config cfg;
} one_key;

static const grpo_config *section(one_key *k, const char *key, const char *value) {
    k->keys[0] = key, k->values[0] = value;
    k->cfg = (grpo_config){.struct_size = sizeof(grpo_config), .n = 1, .keys = k->keys,
                           .values = k->values, .section = "reward.t"};
    return &k->cfg;
}

static grpo_error err;
static void reset(void) { grpo_error_init(&err); }

/* The reader's call failed with GRPO_ERR_INVALID and exactly this message. */
#define ck_refused(call, msg)                                                                      \
    do {                                                                                           \
        grpo_error_init(&err);                                                                     \
        ck_assert_int_eq((call), GRPO_ERR_INVALID);                                                \
        ck_assert_int_eq(err.status, GRPO_ERR_INVALID);                                            \
        ck_assert_str_eq(err.message, (msg));                                                      \
    } while (0)

START_TEST(double_reads_decimal_numbers) {
    one_key k;
    double v = 0;
    const char *good[] = {"0.5", "-3", "1e-6", "+2.5E3", ".25", "7."};
    const double want[] = {0.5, -3, 1e-6, 2500, 0.25, 7};
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(grpo_config_double(section(&k, "x", good[i]), "x", 9, -HUGE_VAL, HUGE_VAL,
                                            &v, &err), GRPO_OK);
        ck_assert_double_eq(v, want[i]);
    }
}
END_TEST

START_TEST(double_refuses_what_is_not_one_finite_decimal) {
    one_key k;
    double v = 42;
    const char *bad[] = {"x", "", "0x10", "inf", "nan", "1e400", "1e-400", "5 extra", " 5", "1e",
                         "--1", "1,5"};
    char want[256];
    for (int i = 0; i < 12; i++) {
        snprintf(want, sizeof want, "[reward.t] x: expected a finite number, got '%s'", bad[i]);
        ck_refused(grpo_config_double(section(&k, "x", bad[i]), "x", 0, -HUGE_VAL, HUGE_VAL, &v,
                                      &err), want);
        ck_assert_double_eq(v, 42); /* untouched */
    }
}
END_TEST

START_TEST(double_checks_closed_ranges) {
    one_key k;
    double v = 0;
    ck_assert_int_eq(grpo_config_double(section(&k, "p", "0"), "p", 1, 0, 1, &v, &err), GRPO_OK);
    ck_assert_double_eq(v, 0);
    ck_assert_int_eq(grpo_config_double(section(&k, "p", "1"), "p", 1, 0, 1, &v, &err), GRPO_OK);
    ck_assert_double_eq(v, 1);
    ck_refused(grpo_config_double(section(&k, "p", "1.5"), "p", 1, 0, 1, &v, &err),
               "[reward.t] p: expected a number in [0, 1], got '1.5'");
    ck_refused(grpo_config_double(section(&k, "p", "-0.25"), "p", 1, 0, 1, &v, &err),
               "[reward.t] p: expected a number in [0, 1], got '-0.25'");
    /* one-sided: the missing bound stays out of the message */
    ck_refused(grpo_config_double(section(&k, "clip", "-1"), "clip", 0, 0, HUGE_VAL, &v, &err),
               "[reward.t] clip: expected a number >= 0, got '-1'");
    ck_refused(grpo_config_double(section(&k, "lr", "2e3"), "lr", 0, -HUGE_VAL, 100, &v, &err),
               "[reward.t] lr: expected a number <= 100, got '2e3'");
}
END_TEST

START_TEST(int_reads_and_checks_ranges) {
    one_key k;
    int32_t v = 0;
    ck_assert_int_eq(grpo_config_int(section(&k, "n", "16"), "n", 3, 1, 16, &v, &err), GRPO_OK);
    ck_assert_int_eq(v, 16);
    ck_assert_int_eq(grpo_config_int(section(&k, "n", "-1"), "n", 3, -1, INT32_MAX, &v, &err),
                     GRPO_OK);
    ck_assert_int_eq(v, -1);
    ck_assert_int_eq(grpo_config_int(section(&k, "n", "+7"), "n", 3, INT32_MIN, INT32_MAX, &v,
                                     &err), GRPO_OK);
    ck_assert_int_eq(v, 7);
    ck_refused(grpo_config_int(section(&k, "n", "17"), "n", 3, 1, 16, &v, &err),
               "[reward.t] n: expected an integer in [1, 16], got '17'");
    ck_refused(grpo_config_int(section(&k, "n", "0"), "n", 3, 1, INT32_MAX, &v, &err),
               "[reward.t] n: expected an integer >= 1, got '0'");
    ck_refused(grpo_config_int(section(&k, "n", "-2"), "n", 3, -1, INT32_MAX, &v, &err),
               "[reward.t] n: expected an integer >= -1, got '-2'");
    ck_refused(grpo_config_int(section(&k, "n", "3000000000"), "n", 3, INT32_MIN, INT32_MAX, &v,
                               &err), "[reward.t] n: expected an integer <= 2147483647, got "
                                      "'3000000000'");
    ck_assert_int_eq(v, 7); /* untouched by the refusals */
}
END_TEST

START_TEST(int_refuses_what_is_not_one_integer) {
    one_key k;
    int32_t v = 0;
    const char *bad[] = {"abc", "", "1e9", "2.5", "3.0", "5 extra", " 5", "0x10",
                         "99999999999999999999999"};
    char want[256];
    for (int i = 0; i < 9; i++) {
        snprintf(want, sizeof want, "[reward.t] n: expected an integer, got '%s'", bad[i]);
        ck_refused(grpo_config_int(section(&k, "n", bad[i]), "n", 0, INT32_MIN, INT32_MAX, &v,
                                   &err), want);
    }
}
END_TEST

START_TEST(bool_reads_the_host_words_in_any_case) {
    one_key k;
    const char *yes[] = {"true", "yes", "on", "1", "TRUE", "Yes", "oN"};
    const char *no[] = {"false", "no", "off", "0", "False", "NO", "Off"};
    for (int i = 0; i < 7; i++) {
        int32_t v = 0;
        ck_assert_int_eq(grpo_config_bool(section(&k, "b", yes[i]), "b", 0, &v, &err), GRPO_OK);
        ck_assert_int_eq(v, 1);
        ck_assert_int_eq(grpo_config_bool(section(&k, "b", no[i]), "b", 1, &v, &err), GRPO_OK);
        ck_assert_int_eq(v, 0);
    }
    int32_t v = 5;
    ck_refused(grpo_config_bool(section(&k, "b", "maybe"), "b", 0, &v, &err),
               "[reward.t] b: expected true or false, got 'maybe'");
    ck_refused(grpo_config_bool(section(&k, "b", "truex"), "b", 0, &v, &err),
               "[reward.t] b: expected true or false, got 'truex'");
    ck_refused(grpo_config_bool(section(&k, "b", "tru"), "b", 0, &v, &err),
               "[reward.t] b: expected true or false, got 'tru'");
    ck_refused(grpo_config_bool(section(&k, "b", ""), "b", 0, &v, &err),
               "[reward.t] b: expected true or false, got ''");
    ck_assert_int_eq(v, 5);
}
END_TEST

START_TEST(choice_gives_the_index_or_lists_the_words) {
    static const char *const words[] = {"exact", "numeric", NULL};
    one_key k;
    int32_t v = -1;
    ck_assert_int_eq(grpo_config_choice(section(&k, "match", "numeric"), "match", words, 0, &v,
                                        &err), GRPO_OK);
    ck_assert_int_eq(v, 1);
    ck_refused(grpo_config_choice(section(&k, "match", "Exact"), "match", words, 0, &v, &err),
               "[reward.t] match: expected one of exact, numeric, got 'Exact'");
    ck_refused(grpo_config_choice(section(&k, "match", ""), "match", words, 0, &v, &err),
               "[reward.t] match: expected one of exact, numeric, got ''");
    ck_assert_int_eq(v, 1);
}
END_TEST

START_TEST(absent_keys_give_the_default) {
    static const char *const words[] = {"a", "b", "c", NULL};
    one_key k;
    const grpo_config *cfg = section(&k, "other", "x"); /* "other" is bad, but never read */
    double d = 0;
    int32_t i = 0, b = 0, c = 0;
    ck_assert_int_eq(grpo_config_double(cfg, "d", 0.5, 0, 0.25, &d, &err), GRPO_OK);
    ck_assert_double_eq(d, 0.5); /* a default is not range-checked: it is the plugin's own */
    ck_assert_int_eq(grpo_config_int(cfg, "i", 8, 1, 16, &i, &err), GRPO_OK);
    ck_assert_int_eq(i, 8);
    ck_assert_int_eq(grpo_config_bool(cfg, "b", 1, &b, &err), GRPO_OK);
    ck_assert_int_eq(b, 1);
    ck_assert_int_eq(grpo_config_choice(cfg, "c", words, 2, &c, &err), GRPO_OK);
    ck_assert_int_eq(c, 2);
    /* a NULL config (no section at all) behaves as an empty one */
    ck_assert_int_eq(grpo_config_int(NULL, "i", 4, 1, 16, &i, &err), GRPO_OK);
    ck_assert_int_eq(i, 4);
}
END_TEST

START_TEST(list_keys_are_read_at_their_first_value) {
    const char *keys[] = {"n", "n"}, *values[] = {"2", "bad"};
    grpo_config cfg = {.struct_size = sizeof cfg, .n = 2, .keys = keys, .values = values,
                       .section = "reward.t"};
    int32_t v = 0;
    ck_assert_int_eq(grpo_config_int(&cfg, "n", 0, 0, 9, &v, &err), GRPO_OK);
    ck_assert_int_eq(v, 2);
}
END_TEST

START_TEST(a_section_without_a_name_is_called_config) {
    const char *keys[] = {"n"}, *values[] = {"x"};
    grpo_config cfg = {.struct_size = sizeof cfg, .n = 1, .keys = keys, .values = values};
    int32_t v = 0;
    ck_refused(grpo_config_int(&cfg, "n", 0, 0, 9, &v, &err),
               "[config] n: expected an integer, got 'x'");
}
END_TEST

START_TEST(a_null_error_is_allowed) {
    one_key k;
    double v = 1;
    ck_assert_int_eq(grpo_config_double(section(&k, "x", "x"), "x", 0, 0, 1, &v, NULL),
                     GRPO_ERR_INVALID);
    ck_assert_double_eq(v, 1);
}
END_TEST

START_TEST(text_parsers_are_whole_value_and_strict) {
    double d;
    int64_t i;
    int32_t b;
    ck_assert(grpo_text_double("1.5e2", &d) && d == 150);
    ck_assert(!grpo_text_double(NULL, &d));
    ck_assert(grpo_text_int("-9223372036854775808", &i) && i == INT64_MIN);
    ck_assert(!grpo_text_int("9223372036854775808", &i));
    ck_assert(!grpo_text_int("+", &i));
    ck_assert(!grpo_text_int("1-2", &i));
    ck_assert(grpo_text_bool("ON", &b) && b == 1);
    ck_assert(!grpo_text_bool(NULL, &b));
}
END_TEST

int main(void) {
    Suite *s = suite_create("sdk_config");
    TCase *tc = tcase_create("readers");
    tcase_add_checked_fixture(tc, reset, NULL);
    tcase_add_test(tc, double_reads_decimal_numbers);
    tcase_add_test(tc, double_refuses_what_is_not_one_finite_decimal);
    tcase_add_test(tc, double_checks_closed_ranges);
    tcase_add_test(tc, int_reads_and_checks_ranges);
    tcase_add_test(tc, int_refuses_what_is_not_one_integer);
    tcase_add_test(tc, bool_reads_the_host_words_in_any_case);
    tcase_add_test(tc, choice_gives_the_index_or_lists_the_words);
    tcase_add_test(tc, absent_keys_give_the_default);
    tcase_add_test(tc, list_keys_are_read_at_their_first_value);
    tcase_add_test(tc, a_section_without_a_name_is_called_config);
    tcase_add_test(tc, a_null_error_is_allowed);
    tcase_add_test(tc, text_parsers_are_whole_value_and_strict);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
