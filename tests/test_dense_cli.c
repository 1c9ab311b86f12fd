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

#include "cli/cli.h"
#include "host/process.h"
#include "host/model_instance.h"
#include "io/safetensors.h"
#include "host/sampler.h"

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

/* Runs cmd_generate(argv) with stdout captured into line (its first line); returns its status. */
static int run_generate(int argc, char **argv, char *line, size_t cap) {
    char out[] = "/tmp/grpo_gen_out_XXXXXX";
    int fd = mkstemp(out);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    int rc = cmd_generate(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved), close(fd);
    FILE *f = fopen(out, "r");
    ck_assert(fgets(line, (int)cap, f) != NULL);
    fclose(f);
    unlink(out);
    return rc;
}

START_TEST(generate_command_greedy_matches_transformers) {
    grpo_safetensors *st = open_ref();
    int64_t R, P, N;
    int32_t *prompt = ref_tensor(st, "gen1.prompt", &R, &P);
    int32_t *want = ref_tensor(st, "gen1.out", &R, &N);
    char ids[512] = "", num[16], max_new[16];
    for (int64_t i = 0; i < P; i++)
        snprintf(num, sizeof num, "%s%d", i ? "," : "", prompt[i]), strcat(ids, num);
    snprintf(max_new, sizeof max_new, "%ld", (long)N);
    char *argv[] = {"generate", "--model", FIXTURE, "--prompt-ids", ids, "--max-new-tokens",
                    max_new, "--greedy", "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    char line[4096];
    ck_assert_int_eq(run_generate(10, argv, line, sizeof line), 0);
    char *p = strstr(line, "\"completion_ids\":[") + strlen("\"completion_ids\":[");
    for (int64_t k = 0; k < N; k++) {
        long v = strtol(p, &p, 10);
        ck_assert_msg(v == want[k], "step %ld: got %ld, transformers %d", (long)k, v, want[k]);
        p++;
    }
    free(prompt), free(want);
    grpo_st_close(st);
}
END_TEST

/* --temperature T --seed S draws the sampler's stream: the same tokens as grpo_sampler_run with
 * G = 1 and an RNG seeded by grpo_rng_seed(S), the way sampling.seed seeds train and eval. */
START_TEST(generate_command_samples_like_the_sampler) {
    char *argv[] = {"generate", "--model", FIXTURE, "--prompt-ids", "1,2,3,4,5",
                    "--max-new-tokens", "12", "--temperature", "1.0", "--seed", "7", "--eos",
                    "-1", "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    char line[4096];
    ck_assert_int_eq(run_generate(15, argv, line, sizeof line), 0);
    grpo_error err;
    grpo_error_init(&err);
    grpo_process proc;
    grpo_model *m = NULL;
    const char *dirs[] = {GRPO_PACK_BUILD_DIR};
    ck_assert_msg(grpo_process_open(&proc, dirs, 1, "cpu", 0, &err) == GRPO_OK, "%s",
                  err.message);
    ck_assert_msg(grpo_model_open_dir(&m, &proc.reg, &proc.host, FIXTURE, 0, &err) == GRPO_OK, "%s",
                  err.message);
    int32_t prompt[5] = {1, 2, 3, 4, 5}, mask[5] = {1, 1, 1, 1, 1};
    grpo_sampler_opts so = {{1.0f, 0, 1.0f, 0.0f, 1.0f}, 1, 12, {0}, 0, 0, 0, NULL, NULL, NULL, 0, 0};
    grpo_rng rng;
    grpo_rng_seed(&rng, 7);
    grpo_rollout r = {0};
    ck_assert_msg(grpo_sampler_run(m, &so, prompt, mask, 1, 5, &rng, &r, &err) == GRPO_OK, "%s",
                  err.message);
    char want[4096] = "{\"prompt_ids\":[1,2,3,4,5],\"completion_ids\":[", num[16];
    for (int32_t k = 0; k < r.len[0]; k++)
        snprintf(num, sizeof num, "%s%d", k ? "," : "", r.ids[k]), strcat(want, num);
    strcat(want, "]}\n");
    ck_assert_int_eq(r.len[0], 12);
    ck_assert_str_eq(line, want);
    grpo_rollout_free(&r);
    grpo_model_close(m);
    grpo_process_close(&proc);
}
END_TEST

int main(void) {
    Suite *s = suite_create("dense_cli");
    TCase *tc = tcase_create("commands");
    tcase_add_test(tc, logprobs_command_matches_transformers);
    tcase_add_test(tc, logprobs_command_names_bad_line);
    tcase_add_test(tc, generate_command_greedy_matches_transformers);
    tcase_add_test(tc, generate_command_samples_like_the_sampler);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
