/*
 * test_dense_cli.c — `grpo logprobs` and `grpo generate` on the dense fixtures, against the
 * transformers reference of tests/fixtures/dense (tools/make_dense_fixtures.py): the commands
 * are called in-process with their argv, reading and writing temp files.
 * Tolerance: 1e-4 absolute on log-probs, as in test_dense.c (measured error ~1e-6).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "safetensors.h"

#define FIXTURE GRPO_SOURCE_DIR "/tests/fixtures/dense/qwen2"

static void *ref_tensor(grpo_safetensors *st, const char *name, int64_t *rows, int64_t *cols) {
    const grpo_st_tensor *t = grpo_st_find(st, name);
    ck_assert_msg(t != NULL, "reference tensor %s missing", name);
    void *p = malloc(t->nbytes);
    memcpy(p, t->data, t->nbytes);
    *rows = t->shape[0], *cols = t->ndim > 1 ? t->shape[1] : 1;
    return p;
}

static grpo_safetensors *open_ref(void) {
    grpo_safetensors *st = NULL;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_msg(grpo_st_open(&st, FIXTURE "/reference.safetensors", &err) == GRPO_OK, "%s",
                  err.message);
    return st;
}

START_TEST(logprobs_command_matches_transformers) {
    grpo_safetensors *st = open_ref();
    int64_t B, T;
    int32_t *ids = ref_tensor(st, "ids", &B, &T), *mask = ref_tensor(st, "mask", &B, &T);
    float *ref = ref_tensor(st, "logp", &B, &T);
    char in[] = "/tmp/grpo_lp_in_XXXXXX", out[] = "/tmp/grpo_lp_out_XXXXXX";
    FILE *f = fdopen(mkstemp(in), "w");
    for (int64_t b = 0; b < B; b++) { /* each row's real tokens, padding stripped */
        fputs("{\"ids\":[", f);
        for (int64_t t = 0, first = 1; t < T; t++)
            if (mask[b * T + t]) fprintf(f, "%s%d", first ? "" : ",", ids[b * T + t]), first = 0;
        fputs("]}\n", f);
    }
    fclose(f);
    close(mkstemp(out));
    char *argv[] = {"logprobs", "--model", FIXTURE, "--input", in, "--output", out,
                    "--batch", "2", "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_int_eq(cmd_logprobs(11, argv), 0);
    f = fopen(out, "r");
    char line[8192];
    for (int64_t b = 0; b < B; b++) {
        ck_assert(fgets(line, sizeof line, f) != NULL);
        char *p = strchr(line, '[') + 1;
        int64_t t = 0;
        while (t < T && !mask[b * T + t]) t++;
        for (; t + 1 < T; t++) { /* log p(ids[t+1]) is the reference logp at column t */
            double v = strtod(p, &p);
            ck_assert_msg(fabs(v - ref[b * T + t]) < 1e-4, "row %ld col %ld: %g vs %g", (long)b,
                          (long)t, v, ref[b * T + t]);
            p++;
        }
        ck_assert(*(p - 1) == ']');
    }
    ck_assert(fgets(line, sizeof line, f) == NULL);
    fclose(f);
    unlink(in), unlink(out);
    free(ids), free(mask), free(ref);
    grpo_st_close(st);
}
END_TEST

START_TEST(logprobs_command_names_bad_line) {
    char in[] = "/tmp/grpo_lp_in_XXXXXX";
    FILE *f = fdopen(mkstemp(in), "w");
    fputs("{\"ids\":[1,2,3]}\n{\"ids\":[1]}\n", f);
    fclose(f);
    char *argv[] = {"logprobs", "--model", FIXTURE, "--input", in, "--output", "/dev/null",
                    "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_int_eq(cmd_logprobs(9, argv), 1);
    unlink(in);
}
END_TEST

START_TEST(generate_command_greedy_matches_transformers) {
    grpo_safetensors *st = open_ref();
    int64_t R, P, N;
    int32_t *prompt = ref_tensor(st, "gen1.prompt", &R, &P);
    int32_t *want = ref_tensor(st, "gen1.out", &R, &N);
    char ids[512] = "", num[16], max_new[16];
    for (int64_t i = 0; i < P; i++)
        snprintf(num, sizeof num, "%s%d", i ? "," : "", prompt[i]), strcat(ids, num);
    snprintf(max_new, sizeof max_new, "%ld", (long)N);
    char out[] = "/tmp/grpo_gen_out_XXXXXX";
    int fd = mkstemp(out);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    char *argv[] = {"generate", "--model", FIXTURE, "--prompt-ids", ids, "--max-new-tokens",
                    max_new, "--greedy", "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    int rc = cmd_generate(10, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved), close(fd);
    ck_assert_int_eq(rc, 0);
    FILE *f = fopen(out, "r");
    char line[4096];
    ck_assert(fgets(line, sizeof line, f) != NULL);
    fclose(f);
    char *p = strstr(line, "\"completion_ids\":[") + strlen("\"completion_ids\":[");
    for (int64_t k = 0; k < N; k++) {
        long v = strtol(p, &p, 10);
        ck_assert_msg(v == want[k], "step %ld: got %ld, transformers %d", (long)k, v, want[k]);
        p++;
    }
    unlink(out);
    free(prompt), free(want);
    grpo_st_close(st);
}
END_TEST

int main(void) {
    Suite *s = suite_create("dense_cli");
    TCase *tc = tcase_create("commands");
    tcase_add_test(tc, logprobs_command_matches_transformers);
    tcase_add_test(tc, logprobs_command_names_bad_line);
    tcase_add_test(tc, generate_command_greedy_matches_transformers);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
