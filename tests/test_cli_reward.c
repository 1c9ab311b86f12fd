/*
 * test_cli_reward.c — `grpo reward score` as a pack author runs it: real binary, real packs,
 * example run file and samples; bad input gives FILE:LINE and a non-zero exit. Misbehaving
 * plugins (tests/packs/misbehave) and broken packs on the path are reported, never silent.
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host/registry.h"
#include "text/tokenizer/tokenizer.h"
#include "tmpdir.h"

#define GRPO GRPO_BINARY_DIR "/grpo"
#define EXAMPLES GRPO_SOURCE_DIR "/examples"
/* rewards that misbehave on purpose (tests/packs/misbehave) */
#define MISBEHAVE GRPO_BINARY_DIR "/tests/plugins/misbehave"
/* a tokenizer.json directory, standing in for a model directory */
#define TOKENIZER GRPO_SOURCE_DIR "/tests/fixtures/tokenizer/tiny"

static char dir[256], out_path[300], err_path[300];

static void setup(void) {
    tmpdir_make(dir, sizeof dir, "cli_reward");
    snprintf(out_path, sizeof out_path, "%s/out", dir);
    snprintf(err_path, sizeof err_path, "%s/err", dir);
}

static void teardown(void) { tmpdir_remove(dir); }

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

static int count_of(const char *text, const char *what) {
    int n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what)) n++;
    return n;
}

/* Three samples of one group (scored as one batch) in dir/in.jsonl; returns its path in in. */
static void three_samples(char *in, size_t size) {
    write_file("in.jsonl", "{\"prompt\": \"a\", \"completion\": \"x\", \"group\": 0}\n"
                           "{\"prompt\": \"b\", \"completion\": \"y\", \"group\": 0}\n"
                           "{\"prompt\": \"c\", \"completion\": \"z\", \"group\": 0}\n", in, size);
}

START_TEST(plugin_exit_is_an_error_not_a_quiet_exit_0) {
    char cfg[512], in[512], args[2048];
    write_file("run.ini", "[reward.ones]\nplugin = mb.ones\n[reward.bye]\nplugin = mb.exit\n",
               cfg, sizeof cfg);
    three_samples(in, sizeof in);
    snprintf(args, sizeof args, "reward score --config '%s' --input '%s' --plugin-path " MISBEHAVE,
             cfg, in);
    ck_assert_int_eq(grpo(args), GRPO_EXIT_PLUGIN_EXITED);
    const char *err = slurp(err_path);
    ck_assert_msg(strstr(err, "error: plugin mb.exit (section [reward.bye]) called exit() during "
                              "score (exit status 0); the run ended without its final "
                              "checkpoint\n"), "%s", err);
    ck_assert_str_eq(slurp(out_path), ""); /* no scores printed as if all went well */
}
END_TEST

START_TEST(isolated_crash_and_exit_give_null_scores) {
    char cfg[512], in[512], args[2048];
    write_file("run.ini", "[reward.ones]\nplugin = mb.ones\n"
                          "[reward.crash]\nplugin = mb.segv\nisolate = true\n"
                          "[reward.bye]\nplugin = mb.exit\nisolate = true\nstatus = 4\n",
               cfg, sizeof cfg);
    three_samples(in, sizeof in);
    snprintf(args, sizeof args, "reward score --config '%s' --input '%s' --plugin-path " MISBEHAVE,
             cfg, in);
    ck_assert_int_eq(grpo(args), 0);
    char *out = slurp(out_path);
    for (int line = 1; line <= 3; line++) {
        char want[200];
        snprintf(want, sizeof want, "{\"line\": %d, \"rewards\": {\"ones\": 1, \"crash\": null, "
                 "\"bye\": null}, \"total\": 1}\n", line);
        ck_assert_msg(strstr(out, want), "%s", out);
    }
    const char *err = slurp(err_path);
    ck_assert_msg(strstr(err, "warning: [reward.crash] (plugin mb.segv) was killed by SIGSEGV "),
                  "%s", err);
    ck_assert_msg(strstr(err, "warning: [reward.bye] (plugin mb.exit) called exit(4) while "
                              "scoring 3 samples in its isolated child process; its scores for "
                              "this batch are NaN (no opinion)\n"), "%s", err);
    /* a bad value is refused with its line */
    write_file("run.ini", "[reward.ones]\nplugin = mb.ones\nisolate = maybe\n", cfg, sizeof cfg);
    ck_assert_int_eq(grpo(args), 1);
    char want[700];
    snprintf(want, sizeof want, "%s:3: reward.ones.isolate: ", cfg);
    ck_assert_msg(strstr(slurp(err_path), want), "%s", slurp(err_path));
}
END_TEST

START_TEST(broken_pack_blocks_only_its_own_ids) {
    char cfg[512], in[512], args[2048], bad[512], want[2048];
    snprintf(bad, sizeof bad, "%s/packs/broken", dir);
    snprintf(args, sizeof args, "mkdir -p '%s'", bad);
    ck_assert_int_eq(system(args), 0);
    snprintf(args, sizeof args, "%s/pack.ini", bad);
    FILE *f = fopen(args, "w");
    ck_assert_ptr_nonnull(f);
    fputs("[pack]\nname = bad\nversion = 1\nabi = 1.0\nlibrary = ../../elsewhere.so\n"
          "[bad.x]\nkind = reward\ndescription = x\n", f);
    fclose(f);
    char problem[1000];
    snprintf(problem, sizeof problem, "%s/packs/broken/pack.ini:5: library '../../elsewhere.so' "
             "has a '..' component; expected a file inside the pack directory", dir);
    /* plugins list: the good pack, the broken one listed at the end, one warning, exit 0 */
    snprintf(args, sizeof args, "plugins list --plugin-path " MISBEHAVE " --plugin-path '%s/packs'",
             dir);
    ck_assert_int_eq(grpo(args), 0);
    const char *out = slurp(out_path);
    ck_assert_msg(strstr(out, "mb.ones "), "%s", out);
    snprintf(want, sizeof want, "\nbroken packs (skipped until fixed):\n  %s\n", problem);
    ck_assert_msg(strstr(out, want), "%s", out);
    snprintf(want, sizeof want, "warning: skipping broken pack: %s\n", problem);
    ck_assert_str_eq(slurp(err_path), want);
    /* a run with the good pack's id works, with the warning */
    write_file("run.ini", "[reward.ones]\nplugin = mb.ones\n", cfg, sizeof cfg);
    three_samples(in, sizeof in);
    snprintf(args, sizeof args, "reward score --config '%s' --input '%s' --plugin-path " MISBEHAVE
             " --plugin-path '%s/packs'", cfg, in, dir);
    ck_assert_int_eq(grpo(args), 0);
    ck_assert_int_eq(count_of(slurp(out_path), "\"ones\": 1"), 3);
    ck_assert_int_eq(count_of(slurp(err_path), "warning: skipping broken pack: "), 1);
    /* a run with the broken pack's id fails, naming the problem */
    write_file("run.ini", "[reward.x]\nplugin = bad.x\n", cfg, sizeof cfg);
    ck_assert_int_eq(grpo(args), 1);
    snprintf(want, sizeof want, "%s:2: no plugin 'bad.x' on the plugin path: 'bad.x' is declared by "
             "a broken pack that was skipped: %s", cfg, problem);
    ck_assert_msg(strstr(slurp(err_path), want), "%s", slurp(err_path));
}
END_TEST

/* Lines of one group are a batch; each batch is written and flushed before the next is scored,
 * so when mb.abort aborts on line 3 (its own group) lines 1-2 are already out. */
START_TEST(reward_score_writes_each_batch_before_the_next) {
    char cfg[512], in[512], args[2048], want[1024];
    write_file("run.ini", "[reward.ones]\nplugin = mb.ones\n[reward.bomb]\nplugin = mb.abort\n",
               cfg, sizeof cfg);
    write_file("in.jsonl", "{\"completion\": \"x\"}\n{\"completion\": \"y\"}\n"
                           "{\"completion\": \"boom\"}\n{\"completion\": \"z\"}\n", in, sizeof in);
    snprintf(args, sizeof args, "reward score --config '%s' --input '%s' --plugin-path " MISBEHAVE,
             cfg, in);
    ck_assert_int_eq(grpo(args), 128 + SIGABRT); /* the shell's status for a child's SIGABRT */
    ck_assert_str_eq(slurp(out_path),
                     "{\"line\": 1, \"rewards\": {\"ones\": 1, \"bomb\": 1}, \"total\": 2}\n"
                     "{\"line\": 2, \"rewards\": {\"ones\": 1, \"bomb\": 1}, \"total\": 2}\n");
    snprintf(want, sizeof want, "fatal: plugin mb.abort (pack mb, library " MISBEHAVE
             "/libtp-misbehave.so, section [reward.bomb]) died of SIGABRT (abort) during score, "
             "batch 3; checkpoints already written are intact\n");
    ck_assert_msg(strstr(slurp(err_path), want), "%s", slurp(err_path));
}
END_TEST

/* With model.path in the run file, completion_ids are the completion's tokens (mb.scribble
 * scores their sum), and what a plugin prints (mb.print) stays out of the JSON lines. */
START_TEST(reward_score_tokenizes_with_the_model_tokenizer) {
    char cfg[512], in[512], args[2048];
    write_file("run.ini", "[model]\npath = " TOKENIZER "\n[reward.ids]\nplugin = mb.scribble\n"
               "[reward.chat]\nplugin = mb.print\n", cfg, sizeof cfg);
    const char *completions[] = {"hello world", "xy"};
    write_file("in.jsonl", "{\"completion\": \"hello world\"}\n{\"completion\": \"xy\"}\n", in,
               sizeof in);
    snprintf(args, sizeof args, "reward score --config '%s' --input '%s' --plugin-path " MISBEHAVE,
             cfg, in);
    ck_assert_int_eq(grpo(args), 0);
    grpo_tokenizer *tok;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_tokenizer_load(TOKENIZER, &tok, &err), GRPO_OK);
    char *text = slurp(out_path), *line = strtok(text, "\n");
    int n = 0;
    for (; line; line = strtok(NULL, "\n"), n++) {
        cJSON *j = cJSON_Parse(line);
        ck_assert_msg(j != NULL, "not JSON: %s", line);
        grpo_tok_ids ids = {0};
        ck_assert_int_eq(grpo_tokenizer_encode(tok, completions[n], strlen(completions[n]), 0,
                                               &ids, &err), GRPO_OK);
        double sum = 0;
        for (size_t i = 0; i < ids.n; i++) sum += ids.data[i];
        ck_assert(ids.n > 0 && sum > 0);
        const cJSON *r = cJSON_GetObjectItem(j, "rewards");
        ck_assert(cJSON_GetObjectItem(r, "ids")->valuedouble == sum);
        grpo_tok_ids_free(&ids);
        cJSON_Delete(j);
    }
    ck_assert_int_eq(n, 2);
    grpo_tokenizer_free(tok);
    ck_assert_int_eq(count_of(slurp(err_path), "mb.print: stdio text on stdout\n"), 2);
    ck_assert_int_eq(count_of(slurp(err_path), "mb.print: raw text on fd 1\n"), 2);
}
END_TEST

/* `grpo config check` creates every reward: mb.range refusing min > max fails at check time,
 * naming the run file and its section's line; a good file passes. */
START_TEST(config_check_creates_every_reward) {
    char cfg[512], args[2048], want[1024];
    write_file("run.ini", "[reward.ok]\nplugin = mb.ones\n\n[reward.band]\nplugin = mb.range\n"
               "min = 2\nmax = 1\n", cfg, sizeof cfg);
    snprintf(args, sizeof args, "config check '%s' --no-train --plugin-path " MISBEHAVE, cfg);
    ck_assert_int_eq(grpo(args), 1);
    snprintf(want, sizeof want, "%s:4: [reward.band] (plugin mb.range): min = 2 is above max = 1; "
             "expected min <= max\n", cfg);
    ck_assert_str_eq(slurp(err_path), want);
    ck_assert_str_eq(slurp(out_path), "");
    write_file("run.ini", "[reward.band]\nplugin = mb.range\nmin = 0\nmax = 1\n", cfg, sizeof cfg);
    ck_assert_int_eq(grpo(args), 0);
    ck_assert_msg(strstr(slurp(out_path), "[reward.band]\n"), "%s", slurp(out_path));
    /* a reward whose create tokenizes gets the model's tokenizer, as in a run */
    write_file("run.ini", "[model]\npath = " TOKENIZER "\n[reward.band]\nplugin = mb.range\n"
               "tokens = hello world\n", cfg, sizeof cfg);
    ck_assert_int_eq(grpo(args), 0);
    write_file("run.ini", "[reward.band]\nplugin = mb.range\ntokens = hello world\n", cfg, sizeof cfg);
    ck_assert_int_eq(grpo(args), 1);
    snprintf(want, sizeof want, "%s:1: [reward.band] (plugin mb.range): tokens: the host has no "
             "tokenizer\n", cfg);
    ck_assert_str_eq(slurp(err_path), want);
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
    tcase_add_test(tc, plugin_exit_is_an_error_not_a_quiet_exit_0);
    tcase_add_test(tc, isolated_crash_and_exit_give_null_scores);
    tcase_add_test(tc, broken_pack_blocks_only_its_own_ids);
    tcase_add_test(tc, reward_score_writes_each_batch_before_the_next);
    tcase_add_test(tc, reward_score_tokenizes_with_the_model_tokenizer);
    tcase_add_test(tc, config_check_creates_every_reward);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
