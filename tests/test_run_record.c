/* test_run_record.c — a run's record (run_record.h): which differences between a checkpoint's run
 * and a resume's (or two ranks') count, and the SHA-256 that names a data file's contents. The
 * whole path through `grpo train --resume` is in tests/bad_inputs (ckpt_resume_*) and across
 * ranks in tests/mpi/train_mpi.sh (8). */
#include <stdlib.h>

#include "base/files.h"
#include "st_test_util.h"
#include "train/run_record.h"

#define REC(config, files) "{\"config\": {" config "}, \"files\": {" files "}}"
static const char *const base = REC("\"optim.lr\": \"1e-3\", \"train.steps\": \"4\", "
                                    "\"log.every\": \"1\", \"reward.acc.weight\": \"1\"",
                                    "\"data.path\": \"aaaa\"");

static int diff(const char *a, const char *b, const char *allow, char *out) {
    return grpo_run_record_diff(a, "then", b, "now", allow, out, 600);
}

START_TEST(the_same_run_differs_in_nothing) {
    char out[600];
    ck_assert_int_eq(diff(base, base, NULL, out), 0);
    ck_assert_str_eq(out, "");
    /* a number written another way is the same number */
    const char *other = REC("\"optim.lr\": \"0.001\", \"train.steps\": \"4\", \"log.every\": \"1\", "
                            "\"reward.acc.weight\": \"1.0\"",
                            "\"data.path\": \"aaaa\"");
    ck_assert_int_eq(diff(base, other, NULL, out), 0);
}
END_TEST

START_TEST(changed_keys_and_data_are_named) {
    char out[600];
    const char *now = REC("\"optim.lr\": \"2e-3\", \"train.steps\": \"8\", \"log.every\": \"1\", "
                          "\"reward.acc.weight\": \"1\"",
                          "\"data.path\": \"bbbb\"");
    ck_assert_int_eq(diff(base, now, NULL, out), 3);
    ck_assert_msg(strstr(out, "optim.lr ('1e-3' then, '2e-3' now)"), "%s", out);
    ck_assert_msg(strstr(out, "train.steps ('4' then, '8' now)"), "%s", out);
    ck_assert_msg(strstr(out, "data.path (contents differ: sha256 aaaa... then, bbbb... now)"),
                  "%s", out);
    /* allowed keys drop out; the others stay */
    ck_assert_int_eq(diff(base, now, "train.steps,data.path", out), 1);
    ck_assert_msg(strstr(out, "optim.lr") && !strstr(out, "train.steps"), "%s", out);
}
END_TEST

START_TEST(a_key_only_one_side_has_differs) {
    char out[600];
    const char *more = REC("\"optim.lr\": \"1e-3\", \"train.steps\": \"4\", \"log.every\": \"1\", "
                           "\"reward.acc.weight\": \"1\", \"reward.len.weight\": \"0.5\"",
                           "");
    ck_assert_int_eq(diff(base, more, NULL, out), 2);
    ck_assert_msg(strstr(out, "reward.len.weight (unset then, '0.5' now)"), "%s", out);
    ck_assert_msg(strstr(out, "data.path (contents differ: sha256 aaaa... then, none... now)"),
                  "%s", out);
}
END_TEST

START_TEST(where_and_how_often_a_run_writes_may_change) {
    char out[600];
    const char *now = REC("\"optim.lr\": \"1e-3\", \"train.steps\": \"4\", \"log.every\": \"5\", "
                          "\"reward.acc.weight\": \"1\", \"checkpoint.keep\": \"2\"",
                          "\"data.path\": \"aaaa\"");
    ck_assert_int_eq(diff(base, now, NULL, out), 0);
}
END_TEST

START_TEST(a_record_that_is_not_one_is_refused) {
    char out[600];
    ck_assert_int_eq(diff("{\"config\": {\"a\": 1}, \"files\": {}}", base, NULL, out), -1);
    ck_assert_msg(strstr(out, "the record then is not"), "%s", out);
    ck_assert_int_eq(diff(base, "[1]", NULL, out), -1);
    ck_assert_msg(strstr(out, "the record now is not"), "%s", out);
}
END_TEST

/* A checkpoint directory whose trainer_state.json holds run (NULL: no "run" at all). */
static void fake_checkpoint(char *dir, const char *run) {
    strcpy(dir, "/tmp/grpo_run_record_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256], text[2048];
    snprintf(path, sizeof path, "%s/trainer_state.json", dir);
    snprintf(text, sizeof text, "{\"step\": 1%s%s}", run ? ", \"run\": " : "", run ? run : "");
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_write_file_atomic(path, text, strlen(text), &err), GRPO_OK);
}

START_TEST(resume_refuses_changes_not_allowed) {
    char dir[64];
    grpo_error err;
    grpo_error_init(&err);
    fake_checkpoint(dir, base);
    const char *now = REC("\"optim.lr\": \"1e-3\", \"train.steps\": \"8\", \"log.every\": \"1\", "
                          "\"reward.acc.weight\": \"1\"",
                          "\"data.path\": \"aaaa\"");
    ck_assert_int_eq(grpo_run_record_check_resume(dir, base, NULL, &err), GRPO_OK);
    ck_assert_int_eq(grpo_run_record_check_resume(dir, now, NULL, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, dir) && strstr(err.message, "train.steps ('4' then, '8' now)"),
                  "%s", err.message);
    ck_assert_int_eq(grpo_run_record_check_resume(dir, now, "train.steps", &err), GRPO_OK);
    /* a misspelt key allows nothing */
    ck_assert_int_eq(grpo_run_record_check_resume(dir, now, "train.step", &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "--allow-change train.step: not a key of this run"), "%s",
                  err.message);
    ck_assert_int_eq(grpo_remove_tree(dir), 0);
}
END_TEST

START_TEST(a_checkpoint_without_a_record_resumes_uncompared) {
    char dir[64];
    grpo_error err;
    grpo_error_init(&err);
    fake_checkpoint(dir, NULL);
    ck_assert_int_eq(grpo_run_record_check_resume(dir, base, NULL, &err), GRPO_OK);
    ck_assert_int_eq(grpo_remove_tree(dir), 0);
}
END_TEST

/* The digest is SHA-256: FIPS 180-2's test vector "abc". */
START_TEST(sha256_of_a_file) {
    char path[] = "/tmp/grpo_sha_XXXXXX", hex[65];
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "abc", 3), 3);
    close(fd);
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_sha256_file(path, "test file", hex, &err), GRPO_OK);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    unlink(path);
    ck_assert_int_ne(grpo_sha256_file(path, "test file", hex, &err), GRPO_OK);
    ck_assert_msg(strstr(err.message, path), "%s", err.message);
}
END_TEST

int main(void) {
    Suite *s = suite_create("run_record");
    TCase *tc = tcase_create("run_record");
    tcase_add_test(tc, the_same_run_differs_in_nothing);
    tcase_add_test(tc, changed_keys_and_data_are_named);
    tcase_add_test(tc, a_key_only_one_side_has_differs);
    tcase_add_test(tc, where_and_how_often_a_run_writes_may_change);
    tcase_add_test(tc, a_record_that_is_not_one_is_refused);
    tcase_add_test(tc, resume_refuses_changes_not_allowed);
    tcase_add_test(tc, a_checkpoint_without_a_record_resumes_uncompared);
    tcase_add_test(tc, sha256_of_a_file);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
