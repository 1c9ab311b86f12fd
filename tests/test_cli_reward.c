/*
 * test_cli_reward.c — `grpo reward score` as a pack author runs it: real binary, real packs,
 * example run file and samples; bad input gives FILE:LINE and a non-zero exit.
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define GRPO GRPO_BINARY_DIR "/grpo"
#define EXAMPLES GRPO_SOURCE_DIR "/examples"

static char dir[256], out_path[300], err_path[300];

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/grpo_cli_reward_%d_XXXXXX", (int)getpid());
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(out_path, sizeof out_path, "%s/out", dir);
    snprintf(err_path, sizeof err_path, "%s/err", dir);
}

static void teardown(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void write_file(const char *name, const char *text, char *path, size_t size) {
    snprintf(path, size, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* Runs grpo with args (a shell-quoted string); returns its exit status. */
static int grpo(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "GRPO_PLUGIN_PATH= '%s' %s >'%s' 2>'%s'", GRPO, args, out_path, err_path);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(scores_the_example_samples) {
    ck_assert_int_eq(grpo("reward score --config " EXAMPLES "/minimind_format.ini --input " EXAMPLES "/samples.jsonl"), 0);
    /* MiniMind's rules by hand: format 0.5 for lines 1-2 and 5 (doubled <answer> still matches
     * the lazy pattern), tags 0.25 per tag present exactly once. */
    const double want_total[] = {1.5, 1.5, 1.0, 0.0, 1.0};
    char *text = slurp(out_path), *line = strtok(text, "\n");
    int n = 0;
    for (; line; line = strtok(NULL, "\n"), n++) {
        cJSON *j = cJSON_Parse(line);
        ck_assert_msg(j != NULL, "not JSON: %s", line);
        ck_assert_int_eq(cJSON_GetObjectItem(j, "line")->valueint, n + 1);
        ck_assert(cJSON_GetObjectItem(j, "total")->valuedouble == want_total[n]);
        cJSON *r = cJSON_GetObjectItem(j, "rewards");
        ck_assert_ptr_nonnull(cJSON_GetObjectItem(r, "format"));
        ck_assert_ptr_nonnull(cJSON_GetObjectItem(r, "tags"));
        cJSON_Delete(j);
    }
    ck_assert_int_eq(n, 5);
}
END_TEST

START_TEST(no_opinion_is_null_and_skipped_in_the_total) {
    char cfg[512], in[512], args[2048];
    write_file("run.ini", "[reward.acc]\nplugin = builtin.accuracy\nweight = 2\n"
                          "[reward.tags]\nplugin = builtin.tags\n", cfg, sizeof cfg);
    write_file("in.jsonl", "{\"prompt\": \"1+1=\", \"completion\": \"<answer>2</answer>\", \"answer\": \"2\"}\n"
                           "{\"prompt\": [{\"role\": \"user\", \"content\": \"hi\"}], \"completion\": \"<answer>2</answer>\"}\n",
               in, sizeof in);
    snprintf(args, sizeof args, "reward score --config '%s' --input '%s'", cfg, in);
    ck_assert_int_eq(grpo(args), 0);
    char *text = slurp(out_path);
    ck_assert_msg(strstr(text, "{\"line\": 1, \"rewards\": {\"acc\": 1, \"tags\": 0.5}, \"total\": 2.5}") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "{\"line\": 2, \"rewards\": {\"acc\": null, \"tags\": 0.5}, \"total\": 0.5}") != NULL, "%s", text);
}
END_TEST

START_TEST(bad_line_names_file_and_line) {
    char cfg[512], in[512], args[2048], want[1024];
    write_file("run.ini", "[reward.tags]\nplugin = builtin.tags\n", cfg, sizeof cfg);
    write_file("in.jsonl", "{\"completion\": \"a\"}\n\n{\"prompt\": 3, \"completion\": \"b\"}\n", in, sizeof in);
    snprintf(args, sizeof args, "reward score --config '%s' --input '%s'", cfg, in);
    ck_assert_int_eq(grpo(args), 1);
    snprintf(want, sizeof want, "%s:3: expected \"prompt\" as a string or a list of", in);
    ck_assert_msg(strstr(slurp(err_path), want) != NULL, "%s", slurp(err_path));
    write_file("in.jsonl", "{\"completion\": \"a\"\n", in, sizeof in);
    ck_assert_int_eq(grpo(args), 1);
    snprintf(want, sizeof want, "%s:1: expected valid JSON", in);
    ck_assert_msg(strstr(slurp(err_path), want) != NULL, "%s", slurp(err_path));
}
END_TEST

START_TEST(unknown_plugin_is_refused_with_the_run_file_line) {
    char cfg[512], args[2048], want[1024];
    write_file("run.ini", "[reward.x]\nplugin = builtin.formatt\n", cfg, sizeof cfg);
    snprintf(args, sizeof args, "reward score --config '%s' --input " EXAMPLES "/samples.jsonl", cfg);
    ck_assert_int_eq(grpo(args), 1);
    snprintf(want, sizeof want, "%s:2:", cfg);
    const char *err = slurp(err_path);
    ck_assert_msg(strstr(err, want) && strstr(err, "builtin.format"), "%s", err);
}
END_TEST

START_TEST(no_reward_section_is_an_error) {
    char cfg[512], args[2048];
    write_file("run.ini", "[train]\nsteps = 3\n", cfg, sizeof cfg);
    snprintf(args, sizeof args, "reward score --config '%s' --input " EXAMPLES "/samples.jsonl", cfg);
    ck_assert_int_eq(grpo(args), 1);
    ck_assert_msg(strstr(slurp(err_path), "no [reward.NAME] section") != NULL, "%s", slurp(err_path));
}
END_TEST

int main(void) {
    Suite *s = suite_create("cli_reward");
    TCase *tc = tcase_create("reward score");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, scores_the_example_samples);
    tcase_add_test(tc, no_opinion_is_null_and_skipped_in_the_total);
    tcase_add_test(tc, bad_line_names_file_and_line);
    tcase_add_test(tc, unknown_plugin_is_refused_with_the_run_file_line);
    tcase_add_test(tc, no_reward_section_is_an_error);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
