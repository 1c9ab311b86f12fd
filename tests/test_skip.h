/*
 * test_skip.h — a test whose prerequisite is missing here (the emulated CUDA backend, the shared
 * MiniMind data in ../shared). Outside CI that is a ctest skip: one line naming what is missing
 * and exit 77 (SKIP_RETURN_CODE). Under CI (CI=true, or 1), where the build or the CI script
 * provides it, it is a failure (exit 1): a broken prerequisite must not turn coverage off with CI
 * green. Call these in main(), outside Check's forked tests (exit 77 in a forked test would be
 * counted as a failure, exit 1 as an error of that test only).
 *
 * Tests that need ../shared keep those cases in a TCase tagged "shared": `test_x` runs every other
 * case, `test_x --shared` only those (test_shared_tags; registered as test_x_shared in
 * tests/shared.cmake). GRPO_SHARED_DIR in the environment points them at another directory (an
 * empty one hides the data).
 */
#ifndef GRPO_TEST_SKIP_H
#define GRPO_TEST_SKIP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline int test_in_ci(void) {
    const char *ci = getenv("CI");
    return ci && (strcmp(ci, "true") == 0 || strcmp(ci, "1") == 0);
}

/* Does not return: exit 77 with "SKIP: what" outside CI, exit 1 with "FAIL: ..." under CI. */
static inline void test_skip_or_fail(const char *what) {
    fflush(stdout);
    if (test_in_ci()) {
        printf("FAIL: %s (a prerequisite that CI provides; CI=%s)\n", what, getenv("CI"));
        fflush(stdout);
        exit(1);
    }
    printf("SKIP: %s\n", what);
    fflush(stdout);
    exit(77);
}

#ifdef GRPO_SHARED_DIR
/* The shared data directory: $GRPO_SHARED_DIR, else the build's ../shared. */
static inline const char *test_shared_dir(void) {
    const char *e = getenv("GRPO_SHARED_DIR");
    return e && e[0] ? e : GRPO_SHARED_DIR;
}

/* The Check tags to run: "--shared" as the only argument selects the cases tagged "shared" (and
 * needs test_shared_dir()/rel: skip or fail without it); no argument runs every other case. */
typedef struct test_tags {
    const char *include, *exclude;
} test_tags;

static inline test_tags test_shared_tags(int argc, char **argv, const char *rel) {
    if (argc < 2) return (test_tags){NULL, "shared"};
    if (argc != 2 || strcmp(argv[1], "--shared") != 0) {
        fprintf(stderr, "usage: %s [--shared]\n", argv[0]);
        exit(2);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", test_shared_dir(), rel);
    if (access(path, R_OK) != 0) {
        char what[4200];
        snprintf(what, sizeof what, "%s not found (the shared MiniMind data)", path);
        test_skip_or_fail(what);
    }
    return (test_tags){"shared", NULL};
}
#endif

#endif
