/* test_pack_selftest.c — a reward's self-test vectors ([ID:test.N] in pack.ini): how they are
 * read (manifest.c) and run (pack/pack_selftest.c), against the rewards of tests/packs/selftest:
 * passing tests, a wrong expectation named by its line, a reward NaN on every test, a reward that
 * prints to stdout, and `grpo plugins check` reporting them. */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "host/host.h"
#include "pack/pack_selftest.h"
#include "host/registry.h"
#include "tmpdir.h"

#define SELFTEST_PACK GRPO_BINARY_DIR "/tests/plugins/selftest"

/* The line at which setup_pack's extra text starts: tests/packs/selftest/pack.ini has 47 lines. */
#define L0 48

static char root[256]; /* a fresh temp dir per test, realpath'd */
static char pack_dir[PATH_MAX], manifest[PATH_MAX + 16];

/* root/st: a copy of the selftest pack, its manifest extended by extra. */
static void setup_pack(const char *extra) {
    snprintf(pack_dir, sizeof pack_dir, "%s/st", root);
    char cmd[3 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s'/* '%s'", pack_dir, SELFTEST_PACK,
             pack_dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(manifest, sizeof manifest, "%s/pack.ini", pack_dir);
    FILE *f = fopen(manifest, "a");
    ck_assert_ptr_nonnull(f);
    fputs(extra, f);
    fclose(f);
}

static void setup(void) {
    tmpdir_make(root, sizeof root, "selftest");
}

static void teardown(void) { tmpdir_remove(root); }

/* Scans root/st and runs the self-tests of id; rep and err filled. */
static int run_tests(const char *id, grpo_selftest_report *rep, grpo_error *err) {
    char *dirs[] = {pack_dir, NULL};
    grpo_registry reg = {0};
    grpo_error_init(err);
    ck_assert_int_eq(grpo_registry_scan(&reg, dirs, err), GRPO_OK);
    const grpo_entry *e = grpo_registry_find(&reg, id);
    ck_assert_msg(e != NULL, "%s not found (%d broken)", id, reg.n_broken);
    int rc = grpo_entry_selftest(&reg, e, grpo_default_host(), NULL, rep, err);
    grpo_registry_free(&reg);
    return rc;
}

/* A manifest refused with "MANIFEST:LINE: why". */
static void expect_manifest_error(const char *extra, int line, const char *why) {
    setup_pack(extra);
    grpo_pack pack;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_manifest_parse(manifest, &pack, &err), GRPO_ERR_INVALID);
    char want[2 * PATH_MAX];
    snprintf(want, sizeof want, "%s:%d: %s", manifest, line, why);
    ck_assert_str_eq(err.message, want);
}

START_TEST(vectors_are_read_with_their_fields) {
    setup_pack("");
    grpo_pack pack;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_manifest_parse(manifest, &pack, &err), GRPO_OK);
    const grpo_entry *len = &pack.entries[0], *ans = &pack.entries[1];
    ck_assert_int_eq(len->n_tests, 2);
    ck_assert_str_eq(len->tests[0].name, "test.1");
    ck_assert_str_eq(len->tests[0].prompt, "say hi");
    ck_assert_str_eq(len->tests[0].completion, "hi\nthere"); /* \n decoded */
    ck_assert(len->tests[0].expect == 8.0 && len->tests[0].tolerance == 1e-5);
    ck_assert_str_eq(len->tests[1].prompt, "");
    ck_assert_int_eq(len->tests[1].n_cfg, 1);
    ck_assert_str_eq(len->tests[1].cfg_keys[0], "scale");
    ck_assert_str_eq(len->tests[1].cfg_values[0], "2");
    ck_assert_int_eq(ans->tests[0].n_fields, 1);
    ck_assert_str_eq(ans->tests[0].field_keys[0], "answer");
    ck_assert_str_eq(ans->tests[0].field_json[0], "\"42\"");
    ck_assert(isnan(ans->tests[1].expect));
    grpo_pack_free(&pack);
}
END_TEST

START_TEST(bad_vectors_are_refused_with_their_line) {
    expect_manifest_error("[st.len:test.3]\ncompletion = x\n", L0,
                          "[st.len:test.3] has no expect; expected completion = <text> and "
                          "expect = <reward or nan>");
    expect_manifest_error("[st.len:test.3]\ncompletion = x\nexpect = lots\n", L0 + 2,
                          "expect 'lots' of [st.len:test.3] is not a number; expected e.g. "
                          "expect = 0.5 (or nan)");
    expect_manifest_error("[st.len:test.3]\ncompletion = x\nexpect = 1\nkey.scal = 2\n", L0 + 3,
                          "[st.len:test.3] sets key.scal, but st.len has no key 'scal'; expected "
                          "one of its [st.len:KEY] sections");
    expect_manifest_error("[st.len:test.3]\ncompletion = x\nexpect = 1\nkey.scale = big\n", L0 + 3,
                          "[st.len:test.3] key.scale: expected a finite number, got 'big' "
                          "(type float)");
    expect_manifest_error("[st.len:test.3]\ncompletion = a\\qb\nexpect = 1\n", L0 + 1,
                          "[st.len:test.3] completion has a backslash before something other "
                          "than n, t or \\; expected \\n, \\t or \\\\");
    expect_manifest_error("[st.len:test.3]\ncompletion = x\nexpect = 1\ncolour = red\n", L0 + 3,
                          "unknown key 'colour' in [st.len:test.3]; expected one of prompt, "
                          "completion, answer, expect, tolerance, field.NAME (JSON), key.NAME");
    expect_manifest_error("[st.gone:test.1]\ncompletion = x\nexpect = 1\n", L0,
                          "[st.gone:test.1] is a self-test of 'st.gone', which no [ID] section "
                          "declares; expected [ID:test.N] after a reward's [ID] section");
}
END_TEST

START_TEST(passing_vectors_pass) {
    setup_pack("");
    grpo_selftest_report rep;
    grpo_error err;
    ck_assert_msg(run_tests("st.len", &rep, &err) == GRPO_OK, "%s", err.message);
    ck_assert_int_eq(rep.n_tests, 2); /* two configs (scale 1 and 2): two instances */
    ck_assert_int_eq(rep.n_failed, 0);
    ck_assert_msg(run_tests("st.answer", &rep, &err) == GRPO_OK, "%s", err.message);
    ck_assert_int_eq(rep.n_tests, 2);
    ck_assert_int_eq(run_tests("st.nan", &rep, &err), GRPO_OK); /* no tests: nothing to check */
    ck_assert_int_eq(rep.n_tests, 0);
}
END_TEST

START_TEST(wrong_expectation_names_its_line) {
    setup_pack("[st.len:test.3]\ncompletion = four\nexpect = 5\ntolerance = 0.5\n"
               "[st.len:test.4]\ncompletion = four\nexpect = 4.4\ntolerance = 0.5\n");
    grpo_selftest_report rep;
    grpo_error err;
    ck_assert_int_eq(run_tests("st.len", &rep, &err), GRPO_ERR_INVALID);
    ck_assert_int_eq(rep.n_tests, 4);
    ck_assert_int_eq(rep.n_failed, 1);
    char want[2 * PATH_MAX];
    snprintf(want, sizeof want, "%s:%d: [st.len:test.3] expected 5 (within 0.5), got 4",
             manifest, L0);
    ck_assert_str_eq(err.message, want);
}
END_TEST

START_TEST(nan_on_every_vector_is_flagged) {
    setup_pack("[st.nan:test.1]\ncompletion = x\nexpect = 1\n"
               "[st.nan:test.2]\ncompletion = y\nexpect = nan\n");
    grpo_selftest_report rep;
    grpo_error err;
    ck_assert_int_eq(run_tests("st.nan", &rep, &err), GRPO_ERR_INVALID);
    ck_assert_int_eq(rep.all_nan, 1);
    char want[2 * PATH_MAX];
    snprintf(want, sizeof want, "st.nan returned NaN on all 2 self-tests (%s); expected a reward "
             "on at least the tests that expect one (NaN means no opinion)", manifest);
    ck_assert_str_eq(err.message, want);
}
END_TEST

START_TEST(writing_to_stdout_is_flagged_and_kept_off_stdout) {
    setup_pack("[st.noisy:test.1]\ncompletion = x\nexpect = 1\n");
    char out_path[PATH_MAX];
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", root);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    FILE *f = fopen(out_path, "w");
    dup2(fileno(f), STDOUT_FILENO);
    fclose(f);
    grpo_selftest_report rep;
    grpo_error err;
    int rc = run_tests("st.noisy", &rep, &err);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    ck_assert_int_eq(rc, GRPO_ERR_INVALID);
    ck_assert_int_eq(rep.stdout_bytes, 18);
    ck_assert_str_eq(err.message, "st.noisy writes to stdout (18 bytes: \"scoring 1 samples \"); "
                                  "expected nothing there: stdout carries grpo's data output "
                                  "(log through host->log or write to stderr)");
    f = fopen(out_path, "r");
    ck_assert_int_eq(fgetc(f), EOF); /* what it printed never reached our stdout */
    fclose(f);
}
END_TEST

START_TEST(plugins_check_runs_the_vectors) {
    setup_pack("[st.len:test.3]\ncompletion = x\nexpect = 2\n");
    char out_path[PATH_MAX];
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", root);
    char *argv[] = {"plugins", "check", "st.answer", "st.len", "--plugin-path", pack_dir, NULL};
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    FILE *f = fopen(out_path, "w");
    dup2(fileno(f), STDOUT_FILENO);
    fclose(f);
    int rc = cmd_plugins(6, argv);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    ck_assert_int_eq(rc, 1);
    char text[4096];
    f = fopen(out_path, "r");
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    char want[3 * PATH_MAX];
    snprintf(want, sizeof want, "ok    st.answer (%.*s/libtp-selftest.so; 2 self-tests passed)\n"
             "FAIL  st.len: %.*s:%d: [st.len:test.3] expected 2 (within 1e-05), got 1\n",
             PATH_MAX / 2, pack_dir, PATH_MAX / 2, manifest, L0);
    ck_assert_str_eq(text, want);
}
END_TEST

int main(void) {
    Suite *s = suite_create("pack_selftest");
    TCase *tc = tcase_create("selftest");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, vectors_are_read_with_their_fields);
    tcase_add_test(tc, bad_vectors_are_refused_with_their_line);
    tcase_add_test(tc, passing_vectors_pass);
    tcase_add_test(tc, wrong_expectation_names_its_line);
    tcase_add_test(tc, nan_on_every_vector_is_flagged);
    tcase_add_test(tc, writing_to_stdout_is_flagged_and_kept_off_stdout);
    tcase_add_test(tc, plugins_check_runs_the_vectors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
