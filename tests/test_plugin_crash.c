/*
 * test_plugin_crash.c — what a reward plugin that misbehaves at run time (tests/packs/misbehave)
 * leaves behind: a crash names the plugin, pack, library, step and batch before the process dies
 * of the same signal; text a plugin prints to stdout lands on stderr, never in grpo's data
 * output; a reward that is NaN for a whole step is warned of once and its NaN share is measured.
 * Crashes run in a forked child, the way a run would die.
 */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host/host.h"
#include "host/plugin_call.h"
#include "host/registry.h"
#include "train/rewards.h"
#include "tmpdir.h"

#define MISBEHAVE_DIR GRPO_BINARY_DIR "/tests/plugins/misbehave"

static char dir[256], out_path[300], err_path[300];

static void setup(void) {
    tmpdir_make(dir, sizeof dir, "plugin_crash");
    snprintf(out_path, sizeof out_path, "%s/out", dir);
    snprintf(err_path, sizeof err_path, "%s/err", dir);
}

static void teardown(void) { tmpdir_remove(dir); }

static const char *slurp(const char *path) {
    static char buf[16384];
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* One [reward.NAME] section of the misbehave pack, as a run config would resolve it. */
typedef struct one_reward {
    grpo_registry reg;
    grpo_reward_spec spec;
    grpo_run_config cfg;
    char section[64];
} one_reward;

static void one_reward_open(one_reward *r, const char *name, const char *id) {
    memset(r, 0, sizeof *r);
    char *dirs[] = {MISBEHAVE_DIR, NULL};
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_registry_scan(&r->reg, dirs, &err), GRPO_OK);
    snprintf(r->section, sizeof r->section, "reward.%s", name);
    r->spec = (grpo_reward_spec){.name = (char *)name, .section = r->section, .plugin = (char *)id,
                                 .weight = 1.0, .entry = grpo_registry_find(&r->reg, id)};
    ck_assert_ptr_nonnull(r->spec.entry);
    r->cfg.rewards = &r->spec, r->cfg.n_rewards = 1;
}

static void samples(grpo_sample s[3]) {
    for (int i = 0; i < 3; i++)
        s[i] = (grpo_sample){.struct_size = sizeof(grpo_sample), .prompt = "p",
                             .completion = "boom", .group = 0, .member = (uint32_t)i};
}

/* In a child with stderr on err_path: creates reward id, marks step 3 batch 2, scores. Returns
 * the child's wait status. */
static int crash_child(const char *id) {
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        FILE *e = freopen(err_path, "w", stderr);
        if (!e) _exit(90);
        one_reward r;
        one_reward_open(&r, "boom", id);
        grpo_reward_set set;
        grpo_error err;
        grpo_error_init(&err);
        if (grpo_reward_set_create(&set, &r.cfg, &r.reg, grpo_default_host(), &err)) _exit(91);
        grpo_plugin_call_progress(3, 2);
        grpo_sample s[3];
        samples(s);
        float R[3];
        grpo_reward_set_score(&set, s, 3, R, &err);
        _exit(92); /* not reached: the plugin crashed */
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return status;
}

/* Under AddressSanitizer our handler passes SIGSEGV on to ASan's, which reports and exits 1. */
#if defined(__SANITIZE_ADDRESS__)
#define ASAN_TAKES_SIGSEGV 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN_TAKES_SIGSEGV 1
#endif
#endif
#ifndef ASAN_TAKES_SIGSEGV
#define ASAN_TAKES_SIGSEGV 0
#endif

static void check_crash(const char *id, int sig, const char *sig_text) {
    int status = crash_child(id);
    int died = WIFSIGNALED(status) && WTERMSIG(status) == sig;
    if (ASAN_TAKES_SIGSEGV && sig == SIGSEGV) died = WIFEXITED(status) && WEXITSTATUS(status) == 1;
    ck_assert_msg(died, "%s: expected death by signal %d, got wait status %#x", id, sig, status);
    char want[1024];
    snprintf(want, sizeof want, "fatal: plugin %s (pack mb, library %s/libtp-misbehave.so, "
             "section [reward.boom]) died of %s during score at step 3, batch 2; checkpoints "
             "already written are intact\n", id, MISBEHAVE_DIR, sig_text);
    const char *text = slurp(err_path);
    ck_assert_msg(strstr(text, want), "%s", text);
}

START_TEST(abort_in_a_plugin_names_it_and_still_aborts) {
    check_crash("mb.abort", SIGABRT, "SIGABRT (abort)");
}
END_TEST

START_TEST(segfault_in_a_plugin_names_it_and_still_segfaults) {
    check_crash("mb.null", SIGSEGV, "SIGSEGV (segmentation fault)");
}
END_TEST

/* The report needs a stack of its own when the plugin used all of it. */
START_TEST(stack_overflow_in_a_plugin_names_it) {
    check_crash("mb.deep", SIGSEGV, "SIGSEGV (segmentation fault)");
}
END_TEST

/* The same on a scoring thread of the pool (a reward declared thread-safe, reward_pool.h): the
 * record of the call is the crashing thread's, and that thread has a stack for the report. */
START_TEST(crash_on_a_pool_thread_names_the_plugin) {
    check_crash("mb.null_pooled", SIGSEGV, "SIGSEGV (segmentation fault)");
    check_crash("mb.deep_pooled", SIGSEGV, "SIGSEGV (segmentation fault)");
}
END_TEST

/* Outside a plugin call the handler says nothing and the signal does what it did before. */
START_TEST(crash_outside_a_plugin_is_not_blamed_on_one) {
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (!freopen(err_path, "w", stderr)) _exit(90);
        grpo_plugin_call_begin("mb.ones", NULL, "create"); /* installs the handler */
        grpo_plugin_call_end();
        abort();
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    ck_assert_str_eq(slurp(err_path), "");
}
END_TEST

/* grpo's own lines before and after a plugin call reach stdout in order; the plugin's stdio
 * and raw write(1) text reach stderr. */
START_TEST(plugin_stdout_goes_to_stderr) {
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) { /* stdout is swapped for files: keep the runner's own streams out of it */
        if (!freopen(out_path, "w", stdout) || !freopen(err_path, "w", stderr)) _exit(90);
        one_reward r;
        one_reward_open(&r, "chatty", "mb.print");
        grpo_reward_set set;
        grpo_error err;
        grpo_error_init(&err);
        if (grpo_reward_set_create(&set, &r.cfg, &r.reg, grpo_default_host(), &err)) _exit(91);
        grpo_sample s[3];
        samples(s);
        float R[3];
        printf("{\"data\": 1}\n"); /* buffered: must come out before the plugin's text */
        int rc = grpo_reward_set_score(&set, s, 3, R, &err);
        printf("{\"data\": 2}\n");
        grpo_reward_set_free(&set);
        grpo_registry_free(&r.reg);
        fflush(NULL);
        _exit(rc == GRPO_OK && R[0] == 1.0f ? 0 : 93);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
    ck_assert_str_eq(slurp(out_path), "{\"data\": 1}\n{\"data\": 2}\n");
    const char *err = slurp(err_path);
    ck_assert_msg(strstr(err, "mb.print: stdio text on stdout\n"), "%s", err);
    ck_assert_msg(strstr(err, "mb.print: raw text on fd 1\n"), "%s", err);
}
END_TEST

/* R (N=3, K=2): reward 0 NaN everywhere, reward 1 NaN once. One warning, for reward 0 only,
 * however many steps it stays NaN. */
START_TEST(all_nan_reward_is_warned_once_and_measured) {
    grpo_reward_spec specs[2] = {{.name = "silent", .section = "reward.silent", .plugin = "mb.nan"},
                                 {.name = "some", .section = "reward.some", .plugin = "mb.half"}};
    int warned[2] = {0, 0};
    grpo_reward_set set = {.n = 2, .warned_nan = warned};
    const grpo_reward_spec *sp[2] = {&specs[0], &specs[1]};
    set.specs = sp;
    float R[3 * 2] = {NAN, 1, NAN, NAN, NAN, 2};
    double frac[2];
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(err_path, "w");
    ck_assert_ptr_nonnull(f);
    dup2(fileno(f), 2);
    fclose(f);
    grpo_reward_set_nan_check(&set, R, 3, 7, frac);
    ck_assert(frac[0] == 1.0 && fabs(frac[1] - 1.0 / 3) < 1e-12);
    grpo_reward_set_nan_check(&set, R, 3, 8, frac);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ck_assert_str_eq(slurp(err_path),
                     "warning: step 7: [reward.silent] (plugin mb.nan) returned NaN (no opinion) "
                     "for all 3 samples; it adds nothing to the advantages (said once per reward; "
                     "rewards/silent/nan_frac in the metrics shows later steps)\n");
}
END_TEST

int main(void) {
    Suite *s = suite_create("plugin_crash");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, abort_in_a_plugin_names_it_and_still_aborts);
    tcase_add_test(tc, segfault_in_a_plugin_names_it_and_still_segfaults);
    tcase_add_test(tc, stack_overflow_in_a_plugin_names_it);
    tcase_add_test(tc, crash_on_a_pool_thread_names_the_plugin);
    tcase_add_test(tc, crash_outside_a_plugin_is_not_blamed_on_one);
    tcase_add_test(tc, plugin_stdout_goes_to_stderr);
    tcase_add_test(tc, all_nan_reward_is_warned_once_and_measured);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
