/* test_jinja_errors.c — the Jinja engine reports errors the project's way (grpo_error and a
 * GRPO_* status): a syntax error is GRPO_ERR_INVALID, a jinja2 feature the engine lacks is
 * GRPO_ERR_UNSUPPORTED, both as "name:line: what"; the JSON reader and writer name what failed
 * and where; and every entry point accepts a NULL err. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja/jinja.h"

/* Parses source as "t.jinja"; the arena is freed before returning. */
static int32_t parse(const char *source, grpo_error *err) {
    jtemplate t = {0};
    t.name = jarena_strdup(&t.arena, "t.jinja", 7);
    grpo_error_init(err);
    int32_t rc = jinja_parse(&t, source, strlen(source), err);
    jarena_free(&t.arena);
    return rc;
}

/* Parses and renders source with no globals; returns the first failing status. */
static int32_t render(const char *source, grpo_error *err) {
    jtemplate t = {0};
    t.name = jarena_strdup(&t.arena, "t.jinja", 7);
    grpo_error_init(err);
    int32_t rc = jinja_parse(&t, source, strlen(source), err);
    jarena a = {0};
    jbuf out = {0};
    if (rc == GRPO_OK) rc = jinja_render(&t, &a, jv_dict_new(&a, JV_DICT).u.dict, &out, err);
    free(out.data);
    jarena_free(&a);
    jarena_free(&t.arena);
    return rc;
}

START_TEST(parse_errors_carry_a_status_and_the_line) {
    grpo_error err;
    ck_assert_int_eq(parse("ok {{ 1 + 2 }}", &err), GRPO_OK);
    ck_assert_int_eq(parse("a\n{% if x %}", &err), GRPO_ERR_INVALID);
    ck_assert_int_eq(err.status, GRPO_ERR_INVALID);
    ck_assert_msg(strncmp(err.message, "t.jinja:2: ", 11) == 0, "%s", err.message);
    ck_assert_int_eq(parse("\n{{ x|batch(2) }}", &err), GRPO_ERR_UNSUPPORTED);
    ck_assert_str_eq(err.message, "t.jinja:2: unsupported filter 'batch'");
    /* a name that merely contains the word is a syntax error, not a missing feature */
    ck_assert_int_eq(parse("{{ x unsupported }}", &err), GRPO_ERR_INVALID);
    jtemplate t = {0};
    t.name = jarena_strdup(&t.arena, "t.jinja", 7);
    ck_assert_int_eq(jinja_parse(&t, "{% endfor %}", 12, NULL), GRPO_ERR_INVALID);
    jarena_free(&t.arena);
}
END_TEST

START_TEST(render_errors_carry_a_status_and_the_line) {
    grpo_error err;
    ck_assert_int_eq(render("{{ 'a' ~ 1 }}", &err), GRPO_OK);
    ck_assert_int_eq(render("\n\n{{ raise_exception('no system role') }}", &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "t.jinja:3: ") == err.message, "%s", err.message);
    ck_assert_msg(strstr(err.message, "no system role") != NULL, "%s", err.message);
    ck_assert_int_eq(render("{{ 'x'.zfill(3) }}", &err), GRPO_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "zfill") != NULL, "%s", err.message);
    ck_assert_int_eq(render("{{ range|tojson }}", &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "tojson: Object of type") != NULL, "%s", err.message);
}
END_TEST

START_TEST(json_errors_name_the_byte) {
    jarena a = {0};
    jv v;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(jv_from_json(&a, "[1, 2]", 6, &v, &err), GRPO_OK);
    ck_assert_int_eq(v.type, JV_LIST);
    ck_assert_int_eq(jv_from_json(&a, "[1, 2] x", 8, &v, &err), GRPO_ERR_INVALID);
    ck_assert_str_eq(err.message, "extra data after the JSON value at byte 7");
    ck_assert_int_eq(jv_from_json(&a, "{1: 2}", 6, &v, &err), GRPO_ERR_INVALID);
    ck_assert_str_eq(err.message, "expected a string key at byte 1");
    ck_assert_int_eq(jv_from_json(&a, "[", 1, &v, NULL), GRPO_ERR_INVALID);
    jbuf out = {0};
    jv_json_format fmt = {NULL, NULL, NULL, 0, 0};
    ck_assert_int_eq(jv_to_json(&out, jv_int(3), &fmt, &err), GRPO_OK);
    ck_assert_str_eq(out.data, "3");
    jv bad = jv_undef("x");
    ck_assert_int_eq(jv_to_json(&out, bad, &fmt, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "is not JSON serializable") != NULL, "%s", err.message);
    free(out.data);
    jarena_free(&a);
}
END_TEST

int main(void) {
    Suite *s = suite_create("jinja_errors");
    TCase *tc = tcase_create("jinja_errors");
    tcase_add_test(tc, parse_errors_carry_a_status_and_the_line);
    tcase_add_test(tc, render_errors_carry_a_status_and_the_line);
    tcase_add_test(tc, json_errors_name_the_byte);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
