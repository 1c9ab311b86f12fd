/*
 * test_rewards_http.c — builtin.http against a local server (tests/http_server/server.py, started
 * by each test on 127.0.0.1, port 0): the exec protocol over POST (values, nulls, ids, chunks),
 * the chat-completions judge (template filled, score by regex or JSON field, range and mapping),
 * and every failure costing NaN within a bounded time, never the run: slow replies, 500s and 429s
 * retried with backoff (Retry-After honoured), garbage JSON, a dropped connection, a server that
 * never answers, the concurrency limit, the circuit breaker (one warning, probes, recovery), and
 * the API key: read from the variable api_key_env names, sent, and cut out of every warning.
 */
#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "reward_test_host.h"

#define SERVER GRPO_SOURCE_DIR "/tests/http_server/server.py"
#define KEY "sk-test-7f3a9c1e5b"

static pid_t server_pid;
static char url[128], logfile[128];

static void setup(void) {
    server_pid = 0;
    unsetenv("http_proxy"), unsetenv("HTTP_PROXY"), unsetenv("all_proxy"), unsetenv("ALL_PROXY");
    setenv("no_proxy", "127.0.0.1", 1);
    snprintf(logfile, sizeof logfile, "/tmp/grpo_http_test_%d.log", (int)getpid());
    unlink(logfile);
    load_reward("builtin.http");
}

static void teardown(void) {
    if (server_pid > 0) kill(server_pid, SIGKILL), waitpid(server_pid, NULL, 0);
    unlink(logfile);
    grpo_registry_free(&reg);
}

/* Starts the server with its arguments (NULL-terminated) and sets url to it. */
static void serve(const char *first, ...) {
    const char *argv[24] = {"python3", SERVER, "--log", logfile};
    int argc = 4;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 22; a = va_arg(ap, const char *)) argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    extern char **environ;
    ck_assert_int_eq(posix_spawnp(&server_pid, "python3", &fa, NULL, (char **)argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    char port[16] = {0};
    size_t got = 0;
    struct pollfd p = {fd[0], POLLIN, 0};
    while (got < sizeof port - 1 && !memchr(port, '\n', got) && poll(&p, 1, 20000) > 0) {
        ssize_t r = read(fd[0], port + got, sizeof port - 1 - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd[0]);
    ck_assert_msg(atoi(port) > 0, "the test server did not report its port");
    snprintf(url, sizeof url, "http://127.0.0.1:%d/score", atoi(port));
}

/* create() on url and the key, value pairs of ap (NULL-terminated); returns the status. */
static int32_t create_v(void **state, grpo_error *err, const char *first, va_list ap) {
    const char *keys[40], *values[40];
    uint32_t n = 0;
    keys[n] = "url", values[n++] = url;
    for (const char *k = first; k && n < 39; k = va_arg(ap, const char *))
        keys[n] = k, values[n++] = va_arg(ap, const char *);
    grpo_config cfg = {sizeof cfg, n, keys, values, "reward.remote", NULL};
    grpo_error_init(err);
    *state = NULL;
    return desc->create(&host, &cfg, state, err);
}

static int32_t try_create(void **state, grpo_error *err, const char *first, ...) {
    va_list ap;
    va_start(ap, first);
    int32_t rc = create_v(state, err, first, ap);
    va_end(ap);
    return rc;
}

/* A state that must be created: key, value, ..., NULL. */
static void *make(const char *first, ...) {
    void *st;
    grpo_error err;
    va_list ap;
    va_start(ap, first);
    int32_t rc = create_v(&st, &err, first, ap);
    va_end(ap);
    ck_assert_msg(rc == GRPO_OK, "%s", err.message);
    return st;
}

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Scores completions c[n] (row fields answer = "7" and level = 3) and returns the seconds. */
static double batch(void *st, const char *const *c, uint32_t n, float *out) {
    grpo_sample s[16];
    grpo_field f[2] = {{sizeof f[0], "answer", "\"7\""}, {sizeof f[1], "level", "3"}};
    for (uint32_t i = 0; i < n; i++)
        s[i] = (grpo_sample){.struct_size = sizeof s[i], .prompt = "What is 3+4?",
                             .completion = c[i], .group = 0, .member = i, .fields = f,
                             .n_fields = 2};
    grpo_error err;
    grpo_error_init(&err);
    double t0 = seconds();
    ck_assert_int_eq(desc->score(st, s, n, out, &err), GRPO_OK); /* never fails the run */
    return seconds() - t0;
}

/* The server's log: how many requests it got; the largest number in flight at once. */
static int requests(int *peak) {
    FILE *f = fopen(logfile, "r");
    int n = 0;
    if (peak) *peak = 0;
    char line[8192];
    while (f && fgets(line, sizeof line, f)) {
        n++;
        const char *p = strstr(line, "\"inflight\": ");
        if (peak && p && atoi(p + 12) > *peak) *peak = atoi(p + 12);
    }
    if (f) fclose(f);
    return n;
}

/* The whole server log as one string (static). */
static const char *server_log(void) {
    static char all[65536];
    FILE *f = fopen(logfile, "r");
    size_t n = f ? fread(all, 1, sizeof all - 1, f) : 0;
    all[n] = 0;
    if (f) fclose(f);
    return all;
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++) n++;
    return n;
}

/* ---- exec mode -------------------------------------------------------------------------- */

START_TEST(exec_values_nulls_and_ids) {
    serve("--mode", "ok", NULL);
    void *st = make("attempt_timeout", "5", NULL);
    const char *c[] = {"abc", "none", "hello"};
    float r[3];
    for (int round = 0; round < 2; round++) {
        batch(st, c, 3, r);
        ck_assert_float_eq(r[0], 3.0f);
        ck_assert(isnan(r[1])); /* null = no opinion */
        ck_assert_float_eq(r[2], 5.0f);
    }
    desc->destroy(st);
    ck_assert_int_eq(requests(NULL), 2); /* one POST per batch */
    const char *log = server_log();
    ck_assert_ptr_nonnull(strstr(log, "\"id\": 1, \"samples\": [{\"prompt\": \"What is 3+4?\", "
                                      "\"completion\": \"abc\""));
    ck_assert_ptr_nonnull(strstr(log, "\"id\": 2, \"samples\""));
    ck_assert_ptr_nonnull(strstr(log, "\"fields\": {\"answer\": \"7\", \"level\": 3}"));
    ck_assert_int_eq(warnings, 0);
}
END_TEST

/* batch_size = 2 over 5 samples: three requests, sent at once, the rewards back in order. */
START_TEST(exec_chunks_keep_order) {
    serve("--mode", "ok", NULL);
    void *st = make("batch_size", "2", NULL);
    const char *c[] = {"a", "bb", "ccc", "dddd", "eeeee"};
    float r[5];
    batch(st, c, 5, r);
    for (int i = 0; i < 5; i++) ck_assert_float_eq(r[i], (float)(i + 1));
    desc->destroy(st);
    ck_assert_int_eq(requests(NULL), 3);
    ck_assert_int_eq(warnings, 0);
}
END_TEST

/* ---- judge mode ------------------------------------------------------------------------- */


START_TEST(judge_template_regex_and_range) {
    serve("--mode", "ok", NULL);
    void *st = make("mode", "judge", "model", "judge-1", "template", "P={prompt}", "template",
                    "C={completion}", "template", "A={answer} L={level} {{x}}", NULL);
    const char *c[] = {"7", "10", "2.5", "cat", "12"};
    float r[5];
    batch(st, c, 5, r);
    ck_assert_float_eq_tol(r[0], 0.7f, 1e-6);  /* 7 on [0, 10] */
    ck_assert_float_eq_tol(r[1], 1.0f, 1e-6);
    ck_assert_float_eq_tol(r[2], 0.25f, 1e-6);
    ck_assert(isnan(r[3]));                     /* the judge gave no number */
    ck_assert(isnan(r[4]));                     /* 12 is outside [0, 10] */
    desc->destroy(st);
    ck_assert_int_eq(requests(NULL), 5);        /* one request per sample */
    const char *log = server_log();
    ck_assert_ptr_nonnull(strstr(log, "\"content\": \"P=What is 3+4?\\nC=7\\nA=7 L=3 {x}\""));
    ck_assert_ptr_nonnull(strstr(log, "\"model\": \"judge-1\""));
    ck_assert_ptr_nonnull(strstr(log, "\"role\": \"user\""));
    ck_assert_int_eq(warnings, 1); /* one for the batch, naming both */
    ck_assert_ptr_nonnull(strstr(warned, "2 samples got no score"));
}
END_TEST

START_TEST(judge_json_field_raw_scale) {
    serve("--mode", "ok", NULL);
    void *st = make("mode", "judge", "model", "m", "template", "C={completion}", "score_json",
                    "score", "score_min", "1", "score_max", "5", "normalize", "false", NULL);
    const char *c[] = {"3", "5", "0.5"};
    float r[3];
    batch(st, c, 3, r);
    ck_assert_float_eq(r[0], 3.0f); /* kept raw */
    ck_assert_float_eq(r[1], 5.0f);
    ck_assert(isnan(r[2]));         /* below score_min */
    desc->destroy(st);
}
END_TEST

/* A placeholder the row cannot fill: that sample is NaN and sends nothing. */
START_TEST(judge_missing_field_sends_nothing) {
    serve("--mode", "ok", NULL);
    void *st = make("mode", "judge", "model", "m", "template", "C={completion} {difficulty}",
                    NULL);
    const char *c[] = {"7", "8"};
    float r[2];
    batch(st, c, 2, r);
    ck_assert(isnan(r[0]) && isnan(r[1]));
    desc->destroy(st);
    ck_assert_int_eq(requests(NULL), 0);
    ck_assert_ptr_nonnull(strstr(warned, "no field 'difficulty'"));
}
END_TEST

START_TEST(judge_config_errors) {
    serve("--mode", "ok", NULL);
    void *st;
    grpo_error err;
    ck_assert_int_ne(try_create(&st, &err, "mode", "judge", NULL), GRPO_OK);
    ck_assert_ptr_nonnull(strstr(err.message, "[reward.remote] model:"));
    ck_assert_int_ne(try_create(&st, &err, "mode", "judge", "model", "m", "template", "a { b",
                                NULL), GRPO_OK);
    ck_assert_ptr_nonnull(strstr(err.message, "[reward.remote] template: '{' at character 3"));
    ck_assert_int_ne(try_create(&st, &err, "mode", "judge", "model", "m", "score_regex", "(",
                                NULL), GRPO_OK);
    ck_assert_ptr_nonnull(strstr(err.message, "[reward.remote] score_regex:"));
    ck_assert_int_ne(try_create(&st, &err, "mode", "judge", "model", "m", "score_min", "5",
                                "score_max", "5", NULL), GRPO_OK);
    ck_assert_ptr_nonnull(strstr(err.message, "score_max"));
    ck_assert_int_ne(try_create(&st, &err, "mode", "fancy", NULL), GRPO_OK);
}
END_TEST

START_TEST(url_refused) {
    static const char *const bad[] = {"ftp://127.0.0.1/x", "127.0.0.1:80/x", "http://",
                                      "http://user:pw@127.0.0.1/x"};
    void *st;
    grpo_error err;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(url, sizeof url, "%s", bad[i]);
        ck_assert_int_ne(try_create(&st, &err, "timeout", "1", NULL), GRPO_OK);
        ck_assert_ptr_nonnull(strstr(err.message, "[reward.remote] url: "));
        ck_assert_ptr_null(strstr(err.message, "pw")); /* a password is not repeated */
    }
}
END_TEST

/* ---- failures: retried, bounded, NaN ------------------------------------------------------ */

START_TEST(status_500_retried_then_ok) {
    serve("--mode", "fail_then_ok", "--n", "2", NULL);
    void *st = make("retries", "3", "backoff", "0.05", NULL);
    const char *c[] = {"abcd"};
    float r[1];
    batch(st, c, 1, r);
    ck_assert_float_eq(r[0], 4.0f);
    desc->destroy(st);
    ck_assert_int_eq(requests(NULL), 3);
    ck_assert_int_eq(warnings, 0);
}
END_TEST

/* 429 with Retry-After: 1 waits that second (longer than backoff), then succeeds. */
START_TEST(status_429_honours_retry_after) {
    serve("--mode", "429_then_ok", "--n", "1", "--retry-after", "1", NULL);
    void *st = make("retries", "2", "backoff", "0.01", "backoff_max", "5", NULL);
    const char *c[] = {"ab"};
    float r[1];
    double took = batch(st, c, 1, r);
    ck_assert_float_eq(r[0], 2.0f);
    ck_assert_msg(took >= 0.95 && took < 4, "took %g s", took);
    desc->destroy(st);
    ck_assert_int_eq(requests(NULL), 2);
}
END_TEST

/* Retries are spent: NaN after retries + 1 attempts, one warning naming the status. */
START_TEST(status_500_exhausts_retries) {
    serve("--mode", "500", NULL);
    void *st = make("retries", "2", "backoff", "0.05", "backoff_max", "0.1", NULL);
    const char *c[] = {"ab", "c"};
    float r[2];
    batch(st, c, 2, r);
    ck_assert(isnan(r[0]) && isnan(r[1]));
    desc->destroy(st);
    ck_assert_int_eq(requests(NULL), 3);
    ck_assert_int_eq(warnings, 1);
    ck_assert_ptr_nonnull(strstr(warned, "1 of 1 requests failed (first: HTTP 500"));
}
END_TEST

/* A 4xx is the request's own fault: not retried. */
START_TEST(status_400_not_retried) {
    serve("--mode", "badreq", NULL);
    void *st = make("retries", "3", "backoff", "0.05", NULL);
    const char *c[] = {"ab"};
    float r[1];
    batch(st, c, 1, r);
    ck_assert(isnan(r[0]));
    desc->destroy(st);
    ck_assert_int_eq(requests(NULL), 1);
}
END_TEST

START_TEST(slow_reply_times_out_in_bounded_time) {
    serve("--mode", "slow", "--delay", "5", NULL);
    void *st = make("attempt_timeout", "0.3", "retries", "1", "backoff", "0.1", NULL);
    const char *c[] = {"ab"};
    float r[1];
    double took = batch(st, c, 1, r);
    ck_assert(isnan(r[0]));
    /* two attempts of 0.3 s and a 0.1 s wait */
    ck_assert_msg(took >= 0.65 && took < 2.5, "took %g s", took);
    ck_assert_ptr_nonnull(strstr(warned, "timed out"));
    desc->destroy(st);
}
END_TEST

START_TEST(garbage_json_is_nan_not_retried) {
    serve("--mode", "garbage", NULL);
    void *st = make("retries", "3", NULL);
    const char *c[] = {"ab", "cd"};
    float r[2];
    batch(st, c, 2, r);
    ck_assert(isnan(r[0]) && isnan(r[1]));
    desc->destroy(st);
    ck_assert_int_eq(requests(NULL), 1);
    ck_assert_int_eq(warnings, 1);
    ck_assert_ptr_nonnull(strstr(warned, "malformed"));
    ck_assert_ptr_nonnull(strstr(warned, "this is {not json"));
}
END_TEST

START_TEST(judge_garbage_json_is_nan) {
    serve("--mode", "garbage", NULL);
    void *st = make("mode", "judge", "model", "m", NULL);
    const char *c[] = {"7"};
    float r[1];
    batch(st, c, 1, r);
    ck_assert(isnan(r[0]));
    desc->destroy(st);
    ck_assert_ptr_nonnull(strstr(warned, "not a chat completion"));
}
END_TEST

START_TEST(dropped_connection_retried_then_nan) {
    serve("--mode", "drop", NULL);
    void *st = make("retries", "2", "backoff", "0.05", NULL);
    const char *c[] = {"ab"};
    float r[1];
    double took = batch(st, c, 1, r);
    ck_assert(isnan(r[0]));
    ck_assert_msg(took < 3, "took %g s", took);
    desc->destroy(st);
    ck_assert_int_eq(requests(NULL), 3);
    ck_assert_int_eq(warnings, 1);
}
END_TEST

START_TEST(server_that_never_answers) {
    serve("--mode", "hang", NULL);
    void *st = make("mode", "judge", "model", "m", "attempt_timeout", "0.4", "retries", "0", NULL);
    const char *c[] = {"1", "2", "3", "4"};
    float r[4];
    double took = batch(st, c, 4, r); /* four requests in parallel, one deadline each */
    for (int i = 0; i < 4; i++) ck_assert(isnan(r[i]));
    ck_assert_msg(took >= 0.39 && took < 2.5, "took %g s", took);
    ck_assert_ptr_nonnull(strstr(warned, "4 of 4 requests failed"));
    desc->destroy(st);
}
END_TEST

START_TEST(nothing_listening) {
    serve("--mode", "ok", NULL);
    kill(server_pid, SIGKILL), waitpid(server_pid, NULL, 0), server_pid = 0;
    void *st = make("retries", "1", "backoff", "0.05", NULL);
    const char *c[] = {"ab"};
    float r[1];
    double took = batch(st, c, 1, r);
    ck_assert(isnan(r[0]));
    ck_assert_msg(took < 2, "took %g s", took);
    desc->destroy(st);
}
END_TEST

/* 8 judge requests of 0.4 s each through max_concurrency = 3: never more than 3 in flight. */
START_TEST(concurrency_limit) {
    serve("--mode", "slow", "--delay", "0.4", NULL);
    void *st = make("mode", "judge", "model", "m", "template", "C={completion}",
                    "max_concurrency", "3", NULL);
    const char *c[] = {"1", "2", "3", "4", "5", "6", "7", "8"};
    float r[8];
    double took = batch(st, c, 8, r);
    for (int i = 0; i < 8; i++) ck_assert_float_eq_tol(r[i], (float)(i + 1) / 10, 1e-6);
    int peak;
    ck_assert_int_eq(requests(&peak), 8);
    ck_assert_int_eq(peak, 3);
    ck_assert_msg(took >= 1.15, "took %g s: three rounds of 0.4 s expected", took);
    desc->destroy(st);
}
END_TEST

/* The section's timeout bounds the whole call: attempts of 0.3 s with 10 retries would take
 * over 4 s, but the call ends at 1 s, saying why; with max_concurrency = 1 against a server that
 * never answers, the requests still queued at the deadline are not sent. */
START_TEST(call_timeout_bounds_the_whole_call) {
    serve("--mode", "slow", "--delay", "5", NULL);
    void *st = make("attempt_timeout", "0.3", "retries", "10", "backoff", "0.05", "timeout", "1",
                    NULL);
    const char *c[] = {"ab"};
    float r[1];
    double took = batch(st, c, 1, r);
    ck_assert(isnan(r[0]));
    ck_assert_msg(took >= 0.9 && took < 1.8, "took %g s", took);
    ck_assert_ptr_nonnull(strstr(warned, "the call's timeout = 1 s ran out"));
    desc->destroy(st);
    int before = requests(NULL);
    ck_assert_msg(before >= 2 && before <= 4, "%d attempts", before); /* ~1 s / (0.3 + waits) */
    kill(server_pid, SIGKILL), waitpid(server_pid, NULL, 0), server_pid = 0;
    unlink(logfile);
    serve("--mode", "hang", NULL);
    st = make("mode", "judge", "model", "m", "max_concurrency", "1", "retries", "0",
              "timeout", "0.5", NULL);
    const char *four[] = {"1", "2", "3", "4"};
    float r4[4];
    took = batch(st, four, 4, r4);
    for (int i = 0; i < 4; i++) ck_assert(isnan(r4[i]));
    ck_assert_msg(took >= 0.45 && took < 1.5, "took %g s", took);
    ck_assert_ptr_nonnull(strstr(warned, "4 of 4 requests failed"));
    desc->destroy(st);
    ck_assert_int_eq(requests(NULL), 1); /* the other three were never sent */
}
END_TEST

/* ---- the circuit breaker ------------------------------------------------------------------ */

START_TEST(breaker_opens_with_one_warning) {
    serve("--mode", "500", NULL);
    void *st = make("retries", "1", "backoff", "0.01", "breaker_failures", "2", "breaker_probe",
                    "1000", NULL);
    const char *c[] = {"ab"};
    float r[1];
    double t0 = seconds();
    for (int b = 0; b < 20; b++) {
        batch(st, c, 1, r);
        ck_assert(isnan(r[0]));
    }
    ck_assert_msg(seconds() - t0 < 3, "took %g s", seconds() - t0);
    desc->destroy(st);
    ck_assert_int_eq(requests(NULL), 4); /* two failed batches of two attempts, then none */
    ck_assert_int_eq(count(warned, "circuit breaker open"), 1);
    ck_assert_int_eq(warnings, 3); /* the two failed batches, then the breaker's one */
}
END_TEST

/* While open, a probe every breaker_probe seconds; one that succeeds closes it. */
START_TEST(breaker_probe_closes_it) {
    serve("--mode", "fail_then_ok", "--n", "3", NULL);
    void *st = make("retries", "0", "breaker_failures", "2", "breaker_probe", "0.4", NULL);
    const char *c[] = {"abc"};
    float r[1];
    batch(st, c, 1, r), batch(st, c, 1, r); /* requests 1 and 2 fail: open */
    batch(st, c, 1, r);                     /* skipped */
    ck_assert(isnan(r[0]));
    ck_assert_int_eq(requests(NULL), 2);
    usleep(450000);
    batch(st, c, 1, r); /* probe: request 3 fails, stays open */
    ck_assert(isnan(r[0]));
    batch(st, c, 1, r); /* skipped */
    ck_assert_int_eq(requests(NULL), 3);
    usleep(450000);
    batch(st, c, 1, r); /* probe: request 4 succeeds, closed */
    ck_assert_float_eq(r[0], 3.0f);
    batch(st, c, 1, r);
    ck_assert_float_eq(r[0], 3.0f);
    ck_assert_int_eq(requests(NULL), 5);
    ck_assert_int_eq(count(warned, "circuit breaker open"), 1);
    desc->destroy(st);
}
END_TEST

/* ---- the API key -------------------------------------------------------------------------- */

START_TEST(api_key_from_environment) {
    serve("--mode", "ok", "--key", KEY, NULL);
    setenv("GRPO_TEST_HTTP_KEY", KEY, 1);
    void *st = make("api_key_env", "GRPO_TEST_HTTP_KEY", NULL);
    const char *c[] = {"abc"};
    float r[1];
    batch(st, c, 1, r);
    ck_assert_float_eq(r[0], 3.0f);
    desc->destroy(st);
    ck_assert_ptr_nonnull(strstr(server_log(), "\"auth\": true"));
}
END_TEST

/* A wrong key: the server's 401 echoes the header it got; the warning must not carry the key. */
START_TEST(api_key_never_logged) {
    serve("--mode", "ok", "--key", "other-key", NULL);
    setenv("GRPO_TEST_HTTP_KEY", KEY, 1);
    void *st = make("api_key_env", "GRPO_TEST_HTTP_KEY", "retries", "0", NULL);
    const char *c[] = {"abc"};
    float r[1];
    batch(st, c, 1, r);
    ck_assert(isnan(r[0]));
    desc->destroy(st);
    ck_assert_ptr_nonnull(strstr(warned, "HTTP 401"));
    ck_assert_ptr_nonnull(strstr(warned, "bad key: Bearer ***")); /* the echo, redacted */
    ck_assert_ptr_null(strstr(warned, KEY));
}
END_TEST

/* The echoed key straddles the 120 bytes of a reply a warning quotes: no piece of it shows. */
START_TEST(api_key_not_even_cut_in_half) {
    serve("--mode", "ok", "--key", "other-key", "--echo-pad", "90", NULL);
    setenv("GRPO_TEST_HTTP_KEY", KEY, 1);
    void *st = make("api_key_env", "GRPO_TEST_HTTP_KEY", "retries", "0", NULL);
    const char *c[] = {"abc"};
    float r[1];
    batch(st, c, 1, r);
    desc->destroy(st);
    ck_assert_ptr_nonnull(strstr(warned, "bad key: Bearer *"));
    ck_assert_ptr_null(strstr(warned, "sk-"));
}
END_TEST

START_TEST(api_key_variable_unset) {
    serve("--mode", "ok", NULL);
    unsetenv("GRPO_TEST_HTTP_KEY_UNSET");
    void *st;
    grpo_error err;
    ck_assert_int_ne(try_create(&st, &err, "api_key_env", "GRPO_TEST_HTTP_KEY_UNSET", NULL),
                     GRPO_OK);
    ck_assert_ptr_nonnull(strstr(err.message, "[reward.remote] api_key_env: the environment "
                                              "variable GRPO_TEST_HTTP_KEY_UNSET is not set"));
    setenv("GRPO_TEST_HTTP_KEY_UNSET", "", 1);
    ck_assert_int_ne(try_create(&st, &err, "api_key_env", "GRPO_TEST_HTTP_KEY_UNSET", NULL),
                     GRPO_OK);
    ck_assert_ptr_nonnull(strstr(err.message, "is empty"));
    unsetenv("GRPO_TEST_HTTP_KEY_UNSET");
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("rewards_http");
    TCase *t = tcase_create("http");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 60);
    tcase_add_test(t, exec_values_nulls_and_ids);
    tcase_add_test(t, exec_chunks_keep_order);
    tcase_add_test(t, judge_template_regex_and_range);
    tcase_add_test(t, judge_json_field_raw_scale);
    tcase_add_test(t, judge_missing_field_sends_nothing);
    tcase_add_test(t, judge_config_errors);
    tcase_add_test(t, url_refused);
    tcase_add_test(t, status_500_retried_then_ok);
    tcase_add_test(t, status_429_honours_retry_after);
    tcase_add_test(t, status_500_exhausts_retries);
    tcase_add_test(t, status_400_not_retried);
    tcase_add_test(t, slow_reply_times_out_in_bounded_time);
    tcase_add_test(t, garbage_json_is_nan_not_retried);
    tcase_add_test(t, judge_garbage_json_is_nan);
    tcase_add_test(t, dropped_connection_retried_then_nan);
    tcase_add_test(t, server_that_never_answers);
    tcase_add_test(t, call_timeout_bounds_the_whole_call);
    tcase_add_test(t, nothing_listening);
    tcase_add_test(t, concurrency_limit);
    tcase_add_test(t, breaker_opens_with_one_warning);
    tcase_add_test(t, breaker_probe_closes_it);
    tcase_add_test(t, api_key_from_environment);
    tcase_add_test(t, api_key_never_logged);
    tcase_add_test(t, api_key_not_even_cut_in_half);
    tcase_add_test(t, api_key_variable_unset);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    SRunner *r = srunner_create(suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
