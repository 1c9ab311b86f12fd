/* test_metrics.c — metrics JSON lines, reading them back as series, and the SVG plot. */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/metrics.h"
#include "cli/plot.h"
#include "train/testing.h"

static char *slurp(FILE *f) {
    fflush(f);
    long n = ftell(f);
    rewind(f);
    char *s = calloc(1, (size_t)n + 1);
    ck_assert(fread(s, 1, (size_t)n, f) == (size_t)n);
    return s;
}

START_TEST(row_is_one_json_line_with_nulls_for_nan) {
    grpo_metric_row row;
    grpo_metric_row_clear(&row);
    grpo_metric_set(&row, "reward", 0.25);
    grpo_metric_set(&row, "rewards/fmt/mean", NAN);
    grpo_metric_set(&row, "reward", 0.5); /* overwrite keeps position */
    FILE *f = tmpfile();
    ck_assert_int_eq(grpo_metrics_write(f, 7, &row), 0);
    char *s = slurp(f);
    ck_assert_ptr_nonnull(strchr(s, '\n'));
    ck_assert_ptr_eq(strchr(s, '\n'), s + strlen(s) - 1);
    cJSON *j = cJSON_Parse(s);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(cJSON_GetObjectItem(j, "step")->valueint, 7);
    ck_assert(cJSON_GetObjectItem(j, "reward")->valuedouble == 0.5);
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(j, "rewards/fmt/mean")));
    ck_assert_int_eq(cJSON_GetArraySize(j), 3);
    cJSON_Delete(j);
    free(s);
    fclose(f);
}
END_TEST

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

START_TEST(series_skip_nulls_and_absent_values) {
    char path[] = "/tmp/grpo_metrics_XXXXXX";
    close(mkstemp(path));
    write_file(path, "{\"step\": 1, \"reward\": 0.1, \"kl\": null}\n\n"
                     "{\"step\": 2, \"reward\": 0.3, \"kl\": 0.01}\n{\"step\": 3, \"kl\": 0.02}\n");
    const char *names[] = {"reward", "kl"};
    grpo_series s[2];
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_series_read(path, names, 2, s, &err), GRPO_OK);
    ck_assert_int_eq(s[0].n, 2);
    ck_assert(s[0].steps[1] == 2 && s[0].values[1] == 0.3);
    ck_assert_int_eq(s[1].n, 2);
    ck_assert(s[1].steps[0] == 2 && s[1].values[1] == 0.02);

    FILE *f = tmpfile();
    const char *runs[] = {"a"};
    grpo_plot_svg(f, s, 1, 2, runs, 0.0, "t<1>");
    char *svg = slurp(f);
    ck_assert_ptr_nonnull(strstr(svg, "<svg"));
    ck_assert_ptr_nonnull(strstr(svg, "t&lt;1&gt;"));
    /* each polyline has one point per value */
    const char *p = strstr(svg, "points=\"");
    int points = 0;
    for (const char *q = p + 8; *q != '"'; q++) points += *q == ',';
    ck_assert_int_eq(points, 2);
    free(svg);
    fclose(f);
    grpo_series_free(s, 2);
    remove(path);
}
END_TEST

/* TensorBoard's smoothing: debiased EMA; the first value stays, a constant stays constant. */
START_TEST(smoothing_is_tensorboards) {
    const double v[] = {1, 2, 3, 3, 3};
    double out[5];
    grpo_smooth(v, 5, 0.6, out);
    ck_assert(fabs(out[0] - 1) < 1e-12);
    ck_assert(fabs(out[1] - (0.6 * 0.4 * 1 + 0.4 * 2) / (1 - 0.36)) < 1e-12);
    const double c[] = {5, 5, 5};
    grpo_smooth(c, 3, 0.9, out);
    ck_assert(fabs(out[2] - 5) < 1e-12);
    grpo_smooth(v, 5, 0.0, out);
    ck_assert(out[3] == 3);
}
END_TEST

START_TEST(bad_line_names_file_and_line) {
    char path[] = "/tmp/grpo_metrics_XXXXXX";
    close(mkstemp(path));
    write_file(path, "{\"step\": 1, \"reward\": 0.1}\n{\"reward\": 0.2}\n");
    const char *names[] = {"reward"};
    grpo_series s[1];
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_series_read(path, names, 1, s, &err), GRPO_ERR_INVALID);
    char want[256];
    snprintf(want, sizeof want, "%s:2: expected a JSON object with a numeric \"step\"", path);
    ck_assert_str_eq(err.message, want);
    remove(path);
}
END_TEST

/* A resumed run keeps the log lines of steps <= the checkpoint's, whole at any length (lines of
 * 200 KB here: a completions.jsonl line holds a whole prompt and completion). */
START_TEST(resumed_log_keeps_long_lines_whole) {
    char dir[] = "/tmp/grpo_runlog_XXXXXX", path[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/completions.jsonl", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    for (int step = 1; step <= 3; step++) {
        fprintf(f, "{\"step\": %d, \"completion\": \"", step);
        for (int i = 0; i < 200000; i++) fputc('a' + (i + step) % 26, f);
        fputs("\"}\n", f);
    }
    fclose(f);
    grpo_run_log l;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_msg(grpo_run_log_open(&l, dir, "completions.jsonl", 2, &err) == GRPO_OK, "%s",
                  err.message);
    ck_assert_int_eq(grpo_run_log_line(&l, "{\"step\": 3}", &err), GRPO_OK);
    ck_assert_int_eq(grpo_run_log_close(&l, &err), GRPO_OK);
    f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int lines = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        cJSON *j = cJSON_Parse(line);
        ck_assert_msg(j != NULL, "line %d is not whole JSON (%zd bytes)", lines + 1, n);
        ck_assert_int_eq(cJSON_GetObjectItem(j, "step")->valueint, lines + 1);
        ck_assert_int_eq(n, lines < 2 ? 200000 + 30 : 12);
        cJSON_Delete(j);
        lines++;
    }
    ck_assert_int_eq(lines, 3);
    free(line);
    fclose(f);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* /dev/full stands for a full disk: the write is an error naming the file. */
START_TEST(log_write_on_a_full_disk_is_an_error) {
    grpo_run_log l;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_run_log_open(&l, "/dev", "full", -1, &err), GRPO_OK);
    ck_assert_int_eq(grpo_run_log_line(&l, "{\"step\": 1}", &err), GRPO_ERR_IO);
    ck_assert_msg(strstr(err.message, "/dev/full: write failed: No space left on device"), "%s",
                  err.message);
    grpo_run_log_close(&l, &err);
}
END_TEST

int main(void) {
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("metrics");
    tcase_add_test(tc, row_is_one_json_line_with_nulls_for_nan);
    tcase_add_test(tc, resumed_log_keeps_long_lines_whole);
    tcase_add_test(tc, log_write_on_a_full_disk_is_an_error);
    tcase_add_test(tc, series_skip_nulls_and_absent_values);
    tcase_add_test(tc, bad_line_names_file_and_line);
    tcase_add_test(tc, smoothing_is_tensorboards);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
