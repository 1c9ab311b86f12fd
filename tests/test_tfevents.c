/*
 * test_tfevents.c — grpo's TensorBoard event writer (core/io/tfevents.c) against TensorBoard's
 * own: tools/make_tfevents_fixture.py wrote tests/fixtures/tensorboard/events.bin with
 * TensorBoard's RecordWriter and protobuf classes; the same events written here must be the same
 * bytes (framing, masked CRC32C, field order, float and double encodings).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/files.h"
#include "io/tfevents.h"

#define FIXTURE_DIR GRPO_SOURCE_DIR "/tests/fixtures/tensorboard"
#define FIXTURE FIXTURE_DIR "/events.bin"

START_TEST(events_match_tensorboards_writer) {
    char dir[] = "/tmp/grpo-tfevents-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    grpo_tfevents w;
    grpo_error err;
    grpo_error_init(&err);
    const double wall = 1700000000.5;
    const char *tags[] = {"reward", "kl"};
    const double values[] = {0.5, 0.0125};
    ck_assert_int_eq(grpo_tfevents_open(&w, dir, wall, -1, &err), GRPO_OK);
    ck_assert_int_eq(grpo_tfevents_scalars(&w, wall, 3, tags, values, 2, &err), GRPO_OK);
    ck_assert_int_eq(grpo_tfevents_text(&w, wall, 3, "completions", "a\n| b |", &err), GRPO_OK);
    ck_assert_int_eq(grpo_tfevents_close(&w, &err), GRPO_OK);
    char *got = NULL, *want = NULL;
    size_t n_got = 0, n_want = 0;
    ck_assert_int_eq(grpo_read_file(w.path, &got, &n_got, &err), GRPO_OK);
    ck_assert_msg(grpo_read_file(FIXTURE, &want, &n_want, &err) == GRPO_OK, "%s", err.message);
    ck_assert_uint_eq(n_got, n_want);
    for (size_t i = 0; i < n_want; i++)
        ck_assert_msg(got[i] == want[i], "byte %zu: %02x, TensorBoard wrote %02x", i,
                      (unsigned char)got[i], (unsigned char)want[i]);
    ck_assert_msg(strstr(w.path, "/events.out.tfevents.1700000000."), "%s", w.path);
    free(got), free(want);
    unlink(w.path);
    rmdir(dir);
}
END_TEST

START_TEST(a_resumed_file_starts_a_session) {
    char dir[] = "/tmp/grpo-tfevents-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    grpo_tfevents w;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_tfevents_open(&w, dir, 1700000000.5, 5, &err), GRPO_OK);
    ck_assert_int_eq(grpo_tfevents_close(&w, &err), GRPO_OK);
    char *got = NULL, *want = NULL;
    size_t n_got = 0, n_want = 0;
    ck_assert_int_eq(grpo_read_file(w.path, &got, &n_got, &err), GRPO_OK);
    ck_assert_int_eq(grpo_read_file(FIXTURE_DIR "/events_resume.bin", &want, &n_want, &err),
                     GRPO_OK);
    ck_assert(n_got == n_want && memcmp(got, want, n_want) == 0);
    free(got), free(want);
    unlink(w.path);
    rmdir(dir);
}
END_TEST

START_TEST(unwritable_dir_is_an_error) {
    grpo_tfevents w;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_tfevents_open(&w, "/nonexistent-grpo-dir", 1.0, -1, &err), GRPO_ERR_IO);
    ck_assert_msg(strstr(err.message, "/nonexistent-grpo-dir/events.out.tfevents."), "%s",
                  err.message);
}
END_TEST

int main(void) {
    Suite *s = suite_create("tfevents");
    TCase *tc = tcase_create("tfevents");
    tcase_add_test(tc, events_match_tensorboards_writer);
    tcase_add_test(tc, a_resumed_file_starts_a_session);
    tcase_add_test(tc, unwritable_dir_is_an_error);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
