/*
 * grpo_cli_test.h — running the real grpo binary from Check tests (test_trainer, test_trainer_moe):
 * a shell helper that fails the test on a non-zero exit, fork/exec of grpo with its output in a
 * log file, and reading a whole file. Include once per test program (static functions).
 */
#ifndef GRPO_CLI_TEST_H
#define GRPO_CLI_TEST_H

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    ck_assert_msg(rc == 0, "command failed (%d): %s", rc, cmd);
}

/* Runs the grpo binary with args (NULL-terminated), stdout+stderr to log; returns the pid. */
static pid_t spawn(const char *log, char *const args[]) {
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        FILE *f = freopen(log, "w", stdout);
        if (f) dup2(fileno(stdout), 2);
        execv(GRPO_BINARY_DIR "/grpo", args);
        _exit(127);
    }
    return pid;
}

static int run_grpo(const char *log, char *const args[]) {
    int status;
    waitpid(spawn(log, args), &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = 0;
    fclose(f);
    return s;
}

/* Makes a fresh directory /tmp/grpo_test_NAME_XXXXXX into tmp (cap bytes) holding tmp/model: a
 * tiny random dense model (1 layer, hidden 32) made by `grpo init-model`, for fast runs. */
static inline void tiny_model_dir(char *tmp, size_t cap, const char *name) {
    snprintf(tmp, cap, "/tmp/grpo_test_%s_XXXXXX", name);
    ck_assert(mkdtemp(tmp) != NULL);
    sh("'%s/grpo' init-model '%s/model' --hidden 32 --layers 1 --heads 2 --kv-heads 1 "
       "--intermediate 64 --seed 3 >/dev/null",
       GRPO_BINARY_DIR, tmp);
}

#endif
