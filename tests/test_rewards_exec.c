/*
 * test_rewards_exec.c — builtin.exec against a real external program (tests/exec_scorers/scorer.c):
 * values and nulls come back, the program stays alive across batches, and a crashing, hanging,
 * deaf or garbling program costs one batch of NaN, never the run. Replies are matched to requests
 * by id, rewards outside float range are NaN with a warning, a command that cannot run fails at
 * create, the program's helpers die with it, grpo's descriptors do not leak into it, and a relative
 * program path resolves against the run file's directory (exec_path.h).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec_path.h"
#include "reward_test_host.h"

static void setup(void) { load_reward("builtin.exec"); }

static void teardown(void) { grpo_registry_free(&reg); }

/* create() on command = argv[0..argc), timeout; returns the status, err gets the message. */
static int32_t try_create(const char *const *argv, int argc, const char *timeout, void **state,
                          grpo_error *err) {
    const char *keys[8], *values[8];
    int n = 0;
    for (int i = 0; i < argc; i++) keys[n] = "command", values[n++] = argv[i];
    keys[n] = "timeout", values[n++] = timeout;
    grpo_config cfg = {sizeof cfg, (uint32_t)n, keys, values, "reward.ext", NULL};
    grpo_error_init(err);
    *state = NULL;
    return desc->create(&host, &cfg, state, err);
}

/* The test scorer in mode (with a helper whose pid goes to pidfile, when not NULL). */
static void *start_with(const char *mode, const char *pidfile, const char *timeout) {
    const char *argv[] = {EXEC_SCORER, mode, pidfile};
    grpo_error err;
    void *state;
    ck_assert_msg(try_create(argv, pidfile ? 3 : 2, timeout, &state, &err) == GRPO_OK, "%s", err.message);
    return state;
}

static void *start(const char *mode, const char *timeout) { return start_with(mode, NULL, timeout); }

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

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
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
    ck_assert_int_eq(warnings, 0);
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
    double t0 = seconds();
    batch(st, c, 1, r);
    double took = seconds() - t0;
    ck_assert(isnan(r[0]));
    ck_assert_msg(took >= 0.29 && took < 5.0, "took %g s", took);
    desc->destroy(st);
}
END_TEST

/* The request is far larger than the socket buffer: writing it must also stop at the deadline. */
START_TEST(program_that_never_reads_costs_one_timeout) {
    void *st = start("deaf", "0.3");
    size_t big = 8u << 20;
    char *text = malloc(big + 1);
    memset(text, 'a', big);
    text[big] = 0;
    const char *c[] = {text};
    float r[1];
    double t0 = seconds();
    batch(st, c, 1, r);
    double took = seconds() - t0;
    ck_assert(isnan(r[0]));
    ck_assert_msg(took >= 0.29 && took < 5.0, "took %g s", took);
    ck_assert_msg(strstr(warned, "did not read the request within 0.3 s"), "%s", warned);
    desc->destroy(st);
    free(text);
}
END_TEST

START_TEST(junk_or_id_less_reply_gives_nan) {
    const char *c[] = {"ab"};
    float r[1];
    void *st = start("junk", "10");
    batch(st, c, 1, r);
    ck_assert(isnan(r[0]));
    desc->destroy(st);
    st = start("noid", "10"); /* a program written before ids were part of the protocol */
    batch(st, c, 1, r);
    ck_assert(isnan(r[0]));
    ck_assert_msg(strstr(warned, "malformed reply: expected {\"id\": 1, \"rewards\": [1 numbers or nulls]}"),
                  "%s", warned);
    desc->destroy(st);
}
END_TEST

/* A program that answers every request twice: the second copy must not become the next batch's
 * scores (it once did, silently). */
START_TEST(extra_reply_lines_do_not_shift_scores) {
    void *st = start("twice", "10");
    const char *b1[] = {"x", "ignored", "xyz"}, *b2[] = {"hello", "ignored", "worlds!"};
    float r[3];
    batch(st, b1, 3, r);
    ck_assert_float_eq(r[0], 1.0f);
    ck_assert_float_eq(r[2], 3.0f);
    ck_assert_int_eq(warnings, 0);
    batch(st, b2, 3, r);
    ck_assert_float_eq(r[0], 5.0f);
    ck_assert_float_eq(r[2], 7.0f);
    ck_assert_int_eq(warnings, 1);
    ck_assert_msg(strstr(warned, "dropped 1 reply line answering another request while waiting "
                                 "for request 2 (first: request 1)"), "%s", warned);
    batch(st, b1, 3, r);
    ck_assert_float_eq(r[0], 1.0f);
    desc->destroy(st);
}
END_TEST

START_TEST(reply_to_an_unknown_request_is_dropped_until_the_deadline) {
    void *st = start("wrongid", "0.3");
    const char *c[] = {"ab"};
    float r[1];
    double t0 = seconds();
    batch(st, c, 1, r);
    double took = seconds() - t0;
    ck_assert(isnan(r[0]));
    ck_assert_msg(took >= 0.29 && took < 5.0, "took %g s", took);
    ck_assert_msg(strstr(warned, "dropped 1 reply line answering another request while waiting "
                                 "for request 1 (first: request 1001)"), "%s", warned);
    ck_assert_msg(strstr(warned, "no reply within 0.3 s"), "%s", warned);
    desc->destroy(st);
}
END_TEST

/* 1e999 parses to infinity and 1e39 overflows a float: each is NaN, one warning for the batch,
 * and the program stays (the next batch is scored without a restart). */
START_TEST(rewards_outside_float_range_are_nan_with_one_warning) {
    void *st = start("huge", "10");
    const char *c[] = {"a", "b", "c", "dddd"};
    float r[4];
    batch(st, c, 4, r);
    for (int i = 0; i < 3; i++) ck_assert_msg(isnan(r[i]), "sample %d: %g", i, r[i]);
    ck_assert_float_eq(r[3], 4.0f);
    ck_assert_int_eq(warnings, 1);
    ck_assert_msg(strstr(warned, "3 of 4 rewards are not finite floats (sample 0: inf)"), "%s", warned);
    batch(st, c, 4, r);
    ck_assert_float_eq(r[3], 4.0f);
    ck_assert_int_eq(warnings, 2);
    ck_assert_msg(!strstr(warned, "restarted"), "%s", warned);
    desc->destroy(st);
}
END_TEST

/* create() fails with "[reward.ext] command: cannot run 'prog'...: why" (or a start error). */
static void assert_cannot_create(const char *prog, const char *why) {
    const char *argv[] = {prog};
    grpo_error err;
    void *st;
    ck_assert_int_eq(try_create(argv, 1, "1", &st, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "[reward.ext] command: ") == err.message, "%s", err.message);
    ck_assert_msg(strstr(err.message, prog) && strstr(err.message, why), "%s: %s", prog, err.message);
}

static char *temp_dir(void) {
    char *d = strdup("/tmp/grpo-exec-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(d));
    return d;
}

static void write_file(const char *dir, const char *name, const char *text, mode_t mode) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    chmod(path, mode);
}

START_TEST(command_that_cannot_run_fails_at_create) {
    char *d = temp_dir(), path[PATH_MAX];
    write_file(d, "plain.py", "print(1)\n", 0644);
    write_file(d, "orphan.sh", "#!/nonexistent/interpreter\n", 0755);
    assert_cannot_create("/nonexistent/scorer", "No such file or directory");
    assert_cannot_create("", "empty program name");
    assert_cannot_create("grpo-no-such-scorer", "not found on PATH");
    assert_cannot_create(d, "is not a regular file");
    snprintf(path, sizeof path, "%s/plain.py", d);
    assert_cannot_create(path, "is not executable");
    snprintf(path, sizeof path, "%s/orphan.sh", d); /* runnable file, missing interpreter */
    assert_cannot_create(path, "cannot start");
    const char *keys[] = {"timeout"}, *values[] = {"1"}; /* no command at all */
    grpo_config cfg = {sizeof cfg, 1, keys, values, "reward.ext", NULL};
    grpo_error err;
    grpo_error_init(&err);
    void *st = NULL;
    ck_assert_int_eq(desc->create(&host, &cfg, &st, &err), GRPO_ERR_INVALID);
    ck_assert_str_eq(err.message, "[reward.ext] command: expected the program and its arguments, one per line");
    snprintf(path, sizeof path, "rm -rf '%s'", d);
    ck_assert_int_eq(system(path), 0);
    free(d);
}
END_TEST

/* 1 once pid is gone or a zombie (killed; its new parent may not reap it), within 3 s. */
static int process_gone(pid_t pid) {
    for (int i = 0; i < 300; i++) {
        char path[64], stat[256] = "";
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "r");
        if (!f) return 1;
        size_t got = fread(stat, 1, sizeof stat - 1, f);
        fclose(f);
        stat[got] = 0;
        const char *close = strrchr(stat, ')');
        if (close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X')) return 1;
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    return 0;
}

static pid_t read_pid(const char *path) {
    int pid = 0;
    for (int i = 0; i < 300 && pid <= 0; i++) { /* the scorer writes it as it starts */
        FILE *f = fopen(path, "r");
        if (f && fscanf(f, "%d", &pid) != 1) pid = 0;
        if (f) fclose(f);
        if (pid <= 0) nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    ck_assert_int_gt(pid, 0);
    return (pid_t)pid;
}

START_TEST(helpers_die_with_the_program_on_timeout_and_teardown) {
    char *d = temp_dir(), pidfile[PATH_MAX];
    snprintf(pidfile, sizeof pidfile, "%s/helper.pid", d);
    const char *c[] = {"ab"};
    float r[1];
    void *st = start_with("hang", pidfile, "0.3");
    pid_t helper = read_pid(pidfile);
    batch(st, c, 1, r); /* timeout: the program's group is killed */
    ck_assert(isnan(r[0]));
    ck_assert_msg(process_gone(helper), "helper %d survived the timeout", (int)helper);
    desc->destroy(st);
    unlink(pidfile);
    st = start_with("good", pidfile, "10");
    helper = read_pid(pidfile);
    batch(st, c, 1, r);
    ck_assert_float_eq(r[0], 2.0f);
    desc->destroy(st); /* the program exits at end of stdin; its helper must not outlive it */
    ck_assert_msg(process_gone(helper), "helper %d survived destroy", (int)helper);
    unlink(pidfile);
    rmdir(d);
    free(d);
}
END_TEST

/* A descriptor the host opened without O_CLOEXEC must not reach the program. */
START_TEST(host_descriptors_are_not_inherited) {
    int fd = open("/dev/null", O_RDONLY); /* deliberately without O_CLOEXEC */
    ck_assert_int_ge(fd, 3);
    void *st = start("fds", "10");
    const char *c[] = {"a", "b"};
    float r[2];
    batch(st, c, 2, r);
    ck_assert_float_eq(r[0], 0.0f);
    desc->destroy(st);
    close(fd);
}
END_TEST

START_TEST(relative_program_paths_resolve_against_the_run_file_dir) {
    char *d = temp_dir(), path[PATH_MAX], want[PATH_MAX], why[256], cwd[PATH_MAX];
    snprintf(path, sizeof path, "%s/bin", d);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    write_file(d, "bin/s", "#!/bin/sh\n", 0755);
    write_file(d, "plain", "", 0644);
    char *got = builtin_exec_resolve("bin/s", d, why, sizeof why); /* next to the run file */
    snprintf(want, sizeof want, "%s/bin/s", d);
    ck_assert_str_eq(got, want);
    free(got);
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    ck_assert_int_eq(chdir(d), 0); /* a relative run-file directory becomes absolute */
    got = builtin_exec_resolve("./s", "bin", why, sizeof why);
    snprintf(want, sizeof want, "%s/bin/./s", d);
    ck_assert_msg(got && !strcmp(got, want), "%s", got ? got : why);
    free(got);
    got = builtin_exec_resolve("bin/s", NULL, why, sizeof why); /* no run file: the current dir */
    snprintf(want, sizeof want, "%s/bin/s", d);
    ck_assert_msg(got && !strcmp(got, want), "%s", got ? got : why);
    free(got);
    ck_assert_int_eq(chdir(cwd), 0);
    got = builtin_exec_resolve("s", path, why, sizeof why); /* a bare name is a PATH lookup */
    ck_assert_ptr_null(got);
    ck_assert_msg(strstr(why, "not found on PATH") && strstr(why, "write ./NAME"), "%s", why);
    got = builtin_exec_resolve("sh", d, why, sizeof why);
    ck_assert_msg(got && got[0] == '/' && strncmp(got, d, strlen(d)), "%s", got ? got : why);
    free(got);
    ck_assert_ptr_null(builtin_exec_resolve("plain", d, why, sizeof why));
    ck_assert_ptr_null(builtin_exec_resolve("./plain", d, why, sizeof why));
    ck_assert_str_eq(why, "is not executable");
    snprintf(path, sizeof path, "rm -rf '%s'", d);
    ck_assert_int_eq(system(path), 0);
    free(d);
}
END_TEST

/* A relative program path is made absolute at create: the program still starts (after a crash)
 * when the current directory has changed since. */
START_TEST(relative_program_survives_a_directory_change) {
    char cwd[PATH_MAX], dir[PATH_MAX];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    snprintf(dir, sizeof dir, "%s", EXEC_SCORER);
    ck_assert_int_eq(chdir(dirname(dir)), 0);
    const char *argv[] = {"./exec_scorer", "crash"};
    grpo_error err;
    void *st;
    ck_assert_msg(try_create(argv, 2, "10", &st, &err) == GRPO_OK, "%s", err.message);
    ck_assert_int_eq(chdir("/"), 0);
    const char *c[] = {"abc"};
    float r[1];
    batch(st, c, 1, r);
    batch(st, c, 1, r); /* crashes */
    batch(st, c, 1, r); /* restarted from the absolute path */
    ck_assert_float_eq(r[0], 3.0f);
    desc->destroy(st);
    ck_assert_int_eq(chdir(cwd), 0);
}
END_TEST

/* Scoring in a forked child (the host's isolate = true) would lose the request counter and the
 * read buffer with the child, so repeated ids could pass stale lines as replies: it is refused. */
START_TEST(scoring_in_a_forked_child_is_refused) {
    void *st = start("good", "10");
    const char *c[] = {"ab"};
    float r[1];
    batch(st, c, 1, r);
    pid_t child = fork();
    if (child == 0) {
        grpo_sample x = {.struct_size = sizeof x, .prompt = "", .completion = "ab"};
        grpo_error err;
        grpo_error_init(&err);
        int32_t rc = desc->score(st, &x, 1, r, &err);
        _exit(rc == GRPO_ERR_UNSUPPORTED && strstr(err.message, "isolate = true") ? 0 : 1);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
    batch(st, c, 1, r); /* the parent's program and ids are untouched */
    ck_assert_float_eq(r[0], 2.0f);
    ck_assert_int_eq(warnings, 0);
    desc->destroy(st);
}
END_TEST

/* The example scorer speaks the protocol (ids included) as documented. */
START_TEST(example_python_scorer_works) {
    const char *argv[] = {"python3", GRPO_SOURCE_DIR "/examples/exec-reward/score.py"};
    grpo_error err;
    void *st;
    if (try_create(argv, 2, "30", &st, &err) != GRPO_OK) {
        ck_assert_msg(strstr(err.message, "not found on PATH"), "%s", err.message);
        return; /* no python3 here: nothing to check */
    }
    grpo_field f = {sizeof f, "answer", "\"7\""};
    grpo_sample s[3] = {
        {.struct_size = sizeof s[0], .prompt = "", .completion = "<answer>7</answer>", .fields = &f, .n_fields = 1},
        {.struct_size = sizeof s[0], .prompt = "", .completion = "<answer>8</answer>", .fields = &f, .n_fields = 1},
        {.struct_size = sizeof s[0], .prompt = "", .completion = "<answer>7</answer>"},
    };
    float r[3];
    for (int round = 0; round < 2; round++) {
        ck_assert_int_eq(desc->score(st, s, 3, r, &err), GRPO_OK);
        ck_assert_float_eq(r[0], 1.0f);
        ck_assert_float_eq(r[1], 0.0f);
        ck_assert(isnan(r[2])); /* no answer field: no opinion */
    }
    ck_assert_int_eq(warnings, 0);
    desc->destroy(st);
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
    tcase_add_test(tc, program_that_never_reads_costs_one_timeout);
    tcase_add_test(tc, junk_or_id_less_reply_gives_nan);
    tcase_add_test(tc, extra_reply_lines_do_not_shift_scores);
    tcase_add_test(tc, reply_to_an_unknown_request_is_dropped_until_the_deadline);
    tcase_add_test(tc, rewards_outside_float_range_are_nan_with_one_warning);
    tcase_add_test(tc, command_that_cannot_run_fails_at_create);
    tcase_add_test(tc, helpers_die_with_the_program_on_timeout_and_teardown);
    tcase_add_test(tc, host_descriptors_are_not_inherited);
    tcase_add_test(tc, relative_program_paths_resolve_against_the_run_file_dir);
    tcase_add_test(tc, relative_program_survives_a_directory_change);
    tcase_add_test(tc, scoring_in_a_forked_child_is_refused);
    tcase_add_test(tc, example_python_scorer_works);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
