/*
 * tmpdir.h — a fresh temporary directory per test (Check fixtures): made under /tmp with mkdtemp
 * and realpath'd (so it compares equal to the paths the code under test resolves), then removed
 * with everything in it. Include once per test program (static functions).
 */
#ifndef GRPO_TEST_TMPDIR_H
#define GRPO_TEST_TMPDIR_H

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* dir (n bytes) = a new /tmp/grpo_test_NAME_XXXXXX, resolved. */
static void tmpdir_make(char *dir, size_t n, const char *name) {
    snprintf(dir, n, "/tmp/grpo_test_%s_XXXXXX", name);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char *real = realpath(dir, NULL);
    ck_assert(real && strlen(real) < n);
    memcpy(dir, real, strlen(real) + 1);
    free(real);
}

static void tmpdir_remove(const char *dir) {
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

#endif
