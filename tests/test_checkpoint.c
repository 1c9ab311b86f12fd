/* test_checkpoint.c — atomic checkpoint directories: commit, abort, prune, latest, full disk;
 * checkpoint-best swapped in place (exchange and two-rename), restored after an interrupted swap,
 * never listed or pruned. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "train/checkpoint.h"
#include "train/testing.h"

static char root[256];

static void setup(void) {
    snprintf(root, sizeof root, "/tmp/grpo_ckpt_%d_XXXXXX", (int)getpid());
    ck_assert_ptr_nonnull(mkdtemp(root));
}

static void teardown(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    ck_assert_int_eq(system(cmd), 0);
}

static int exists(const char *fmt, const char *a) {
    char path[1024];
    struct stat st;
    snprintf(path, sizeof path, fmt, root, a);
    return stat(path, &st) == 0;
}

#define RUN_A "0123456789abcdef0123456789abcdef"
#define RUN_B "fedcba9876543210fedcba9876543210"

/* A checkpoint of run run_id (its mark in trainer_state.json, as grpo_checkpoint_save writes). */
static void save_as(const char *run_id, long step, const char *text, int keep) {
    grpo_ckpt c;
    grpo_error err;
    grpo_error_init(&err);
    char state[128];
    snprintf(state, sizeof state, "{\"step\": %ld, \"run_id\": \"%s\"}", step, run_id);
    ck_assert_msg(grpo_ckpt_begin(&c, root, step, &err) == GRPO_OK, "%s", err.message);
    snprintf(c.run_id, sizeof c.run_id, "%s", run_id);
    ck_assert_msg(grpo_ckpt_write(&c, "state.json", text, strlen(text), &err) == GRPO_OK, "%s", err.message);
    ck_assert_msg(grpo_ckpt_write(&c, "trainer_state.json", state, strlen(state), &err) == GRPO_OK,
                  "%s", err.message);
    ck_assert_msg(grpo_ckpt_commit(&c, keep, &err) == GRPO_OK, "%s", err.message);
}

static void save(long step, const char *text, int keep) { save_as(RUN_A, step, text, keep); }

START_TEST(commit_makes_a_whole_directory_and_latest_finds_it) {
    save(5, "{\"step\": 5}", 0);
    save(12, "{\"step\": 12}", 0);
    ck_assert(exists("%s/%s", "checkpoint-00000005/state.json"));
    ck_assert(!exists("%s/%s", ".checkpoint-00000012.tmp"));
    char dir[1024];
    long step = 0;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_ckpt_latest(root, dir, sizeof dir, &step, &err), GRPO_OK);
    ck_assert_int_eq(step, 12);
    ck_assert_ptr_nonnull(strstr(dir, "/checkpoint-00000012"));
}
END_TEST

START_TEST(keep_prunes_all_but_the_newest) {
    for (long s = 1; s <= 5; s++) save(s * 10, "x", 2);
    ck_assert(!exists("%s/%s", "checkpoint-00000010"));
    ck_assert(!exists("%s/%s", "checkpoint-00000030"));
    ck_assert(exists("%s/%s", "checkpoint-00000040"));
    ck_assert(exists("%s/%s", "checkpoint-00000050"));
}
END_TEST

/* keep prunes only this run's checkpoints: a checkpoint-N another run wrote, or a directory of
 * that name grpo did not write, is neither counted nor removed (issue 34: it was deleted). */
START_TEST(keep_never_prunes_what_another_run_wrote) {
    save_as(RUN_B, 10, "theirs", 0);
    char foreign[1024];
    snprintf(foreign, sizeof foreign, "%s/checkpoint-00000015", root);
    ck_assert_int_eq(mkdir(foreign, 0755), 0); /* a person's directory of that name */
    for (long s = 2; s <= 5; s++) save(s * 10, "x", 2);
    ck_assert(exists("%s/%s", "checkpoint-00000010/state.json"));
    ck_assert(exists("%s/%s", "checkpoint-00000015"));
    ck_assert(!exists("%s/%s", "checkpoint-00000020"));
    ck_assert(!exists("%s/%s", "checkpoint-00000030"));
    ck_assert(exists("%s/%s", "checkpoint-00000040"));
    ck_assert(exists("%s/%s", "checkpoint-00000050"));
}
END_TEST

START_TEST(an_unfinished_save_is_invisible) {
    save(3, "old", 0);
    grpo_ckpt c;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_ckpt_begin(&c, root, 4, &err), GRPO_OK);
    ck_assert_int_eq(grpo_ckpt_write(&c, "state.json", "new", 3, &err), GRPO_OK);
    /* killed here: no commit */
    char dir[1024];
    long step = 0;
    ck_assert_int_eq(grpo_ckpt_latest(root, dir, sizeof dir, &step, &err), GRPO_OK);
    ck_assert_int_eq(step, 3);
    grpo_ckpt_abort(&c);
    ck_assert(!exists("%s/%s", ".checkpoint-00000004.tmp"));
}
END_TEST

START_TEST(full_disk_fails_clearly_and_keeps_the_previous_checkpoint) {
    save(1, "previous", 0);
    /* A file size limit makes write() fail with EFBIG, as a full disk fails with ENOSPC. */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, small = {4096, 4096};
    getrlimit(RLIMIT_FSIZE, &old);
    small.rlim_max = old.rlim_max;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
    static char big[65536];
    grpo_ckpt c;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_ckpt_begin(&c, root, 2, &err), GRPO_OK);
    int rc = grpo_ckpt_write(&c, "model.safetensors", big, sizeof big, &err);
    setrlimit(RLIMIT_FSIZE, &old);
    ck_assert_int_eq(rc, GRPO_ERR_IO);
    ck_assert_msg(strstr(err.message, "model.safetensors: write failed") != NULL, "%s", err.message);
    grpo_ckpt_abort(&c);
    char dir[1024];
    long step = 0;
    ck_assert_int_eq(grpo_ckpt_latest(root, dir, sizeof dir, &step, &err), GRPO_OK);
    ck_assert_int_eq(step, 1);
    ck_assert(exists("%s/%s", "checkpoint-00000001/state.json"));
}
END_TEST

START_TEST(no_checkpoint_is_a_clear_error) {
    char dir[1024];
    long step;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_ckpt_latest(root, dir, sizeof dir, &step, &err), GRPO_ERR_IO);
    ck_assert_ptr_nonnull(strstr(err.message, "no checkpoint to resume from"));
    ck_assert_ptr_nonnull(strstr(err.message, root));
}
END_TEST

/* checkpoint-best of step with state.json = text, written as grpo_checkpoint_save_best does. */
static void save_best(long step, const char *text) {
    grpo_ckpt c;
    grpo_error err;
    grpo_error_init(&err);
    char state[128];
    snprintf(state, sizeof state, "{\"step\": %ld, \"run_id\": \"%s\"}", step, RUN_A);
    ck_assert_msg(grpo_ckpt_begin_best(&c, root, step, &err) == GRPO_OK, "%s", err.message);
    ck_assert_ptr_nonnull(strstr(c.tmp, "/.checkpoint-best.tmp"));
    ck_assert_msg(grpo_ckpt_write(&c, "state.json", text, strlen(text), &err) == GRPO_OK, "%s",
                  err.message);
    ck_assert_msg(grpo_ckpt_write(&c, "trainer_state.json", state, strlen(state), &err) == GRPO_OK,
                  "%s", err.message);
    ck_assert_msg(grpo_ckpt_commit(&c, 1, &err) == GRPO_OK, "%s", err.message);
}

/* The text of root/rel (malloc'd; NULL when missing). */
static char *read_text(const char *rel) {
    char path[1024], *text = NULL;
    grpo_error err;
    grpo_error_init(&err);
    snprintf(path, sizeof path, "%s/%s", root, rel);
    return grpo_read_file(path, &text, NULL, &err) == GRPO_OK ? text : NULL;
}

/* A new best replaces the old (by the exchange, or by two renames with exchange_off), nothing is
 * left under a temporary name, and checkpoint-best is never listed, pruned or resumed from. */
static void best_is_swapped(int exchange_off) {
    grpo_ckpt_no_exchange(exchange_off);
    save_best(2, "first");
    save(2, "two", 1);
    save_best(4, "second");
    save(4, "four", 1);
    save(6, "six", 1);
    grpo_ckpt_no_exchange(0);
    char *text = read_text("checkpoint-best/state.json");
    ck_assert_str_eq(text ? text : "(missing)", "second");
    free(text);
    ck_assert(!exists("%s/%s", ".checkpoint-best.tmp"));
    ck_assert(!exists("%s/%s", ".checkpoint-best.old"));
    ck_assert(!exists("%s/%s", "checkpoint-00000004")); /* keep = 1 pruned 4, not best */
    long *steps = NULL, best_step = 0;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_ckpt_list(root, &steps, &err), 1);
    ck_assert_int_eq(steps[0], 6);
    free(steps);
    int mine = 0;
    ck_assert_int_eq(grpo_ckpt_best_read(root, RUN_A, &best_step, &mine), 1);
    ck_assert_int_eq(best_step, 4);
    ck_assert_int_eq(mine, 1);
    ck_assert_int_eq(grpo_ckpt_best_read(root, RUN_B, &best_step, &mine), 1);
    ck_assert_int_eq(mine, 0);
}

START_TEST(best_is_swapped_by_exchange) { best_is_swapped(0); }
END_TEST

START_TEST(best_is_swapped_by_two_renames) { best_is_swapped(1); }
END_TEST

/* A two-rename swap killed between its renames left the old best as .checkpoint-best.old and no
 * checkpoint-best: the next start puts it back; killed after them, the old one is removed. */
START_TEST(an_interrupted_best_swap_is_repaired_at_start) {
    save_best(2, "old best");
    char a[1024], b[1024];
    snprintf(a, sizeof a, "%s/checkpoint-best", root);
    snprintf(b, sizeof b, "%s/.checkpoint-best.old", root);
    ck_assert_int_eq(rename(a, b), 0);
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_msg(grpo_ckpt_prepare(root, &err) == GRPO_OK, "%s", err.message);
    char *text = read_text("checkpoint-best/state.json");
    ck_assert_str_eq(text ? text : "(missing)", "old best");
    free(text);
    ck_assert(!exists("%s/%s", ".checkpoint-best.old"));
    ck_assert_int_eq(mkdir(b, 0755), 0); /* killed after the new one was in place */
    ck_assert_msg(grpo_ckpt_prepare(root, &err) == GRPO_OK, "%s", err.message);
    ck_assert(!exists("%s/%s", ".checkpoint-best.old"));
    ck_assert(exists("%s/%s", "checkpoint-best/state.json"));
}
END_TEST

/* checkpoint-best that is a symbolic link is refused, and what it points at is kept. */
START_TEST(a_linked_best_is_refused) {
    char target[1024], link[1024];
    snprintf(target, sizeof target, "%s/elsewhere", root);
    snprintf(link, sizeof link, "%s/checkpoint-best", root);
    ck_assert_int_eq(mkdir(target, 0755), 0);
    ck_assert_int_eq(symlink(target, link), 0);
    grpo_ckpt c;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_ckpt_begin_best(&c, root, 1, &err), GRPO_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "is a symbolic link"));
    ck_assert(exists("%s/%s", "elsewhere"));
}
END_TEST

int main(void) {
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("checkpoint");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, commit_makes_a_whole_directory_and_latest_finds_it);
    tcase_add_test(tc, keep_prunes_all_but_the_newest);
    tcase_add_test(tc, keep_never_prunes_what_another_run_wrote);
    tcase_add_test(tc, an_unfinished_save_is_invisible);
    tcase_add_test(tc, full_disk_fails_clearly_and_keeps_the_previous_checkpoint);
    tcase_add_test(tc, no_checkpoint_is_a_clear_error);
    tcase_add_test(tc, best_is_swapped_by_exchange);
    tcase_add_test(tc, best_is_swapped_by_two_renames);
    tcase_add_test(tc, an_interrupted_best_swap_is_repaired_at_start);
    tcase_add_test(tc, a_linked_best_is_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
