/*
 * test_reward_model_cli.c — examples/reward_model_mix.ini through `grpo reward score`: the real
 * binary mixes builtin.format, builtin.tags, reward_model.score (the tiny InternLM2 reward model,
 * MiniMind's clip 3 and 0.4/0.6 <answer> blend) and builtin.accuracy.
 *
 * The reward-model column must equal the rewards tools/make_reward_model_fixtures.py computed
 * with transformers for the same samples and options (expected.json, internlm2, plugin case 0;
 * tolerance 1e-4 as in test_reward_model.c); the total must be the weighted sum of the four.
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define FIXTURES GRPO_SOURCE_DIR "/tests/fixtures/reward_model"

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    ck_assert(fread(s, 1, (size_t)n, f) == (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

START_TEST(example_mix_scores_with_the_reward_model) {
    char *text = slurp(FIXTURES "/expected.json");
    cJSON *expected = cJSON_Parse(text);
    free(text);
    const cJSON *fx = cJSON_GetObjectItem(expected, "internlm2");
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(fx, "plugin"), 0);
    ck_assert_str_eq(cJSON_GetObjectItem(c, "text")->valuestring, "minimind");
    ck_assert(cJSON_GetObjectItem(c, "clip")->valuedouble == 3.0);

    char dir[] = "/tmp/grpo_rm_cli_XXXXXX", in[64], out[64], cmd[1024];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(in, sizeof in, "%s/in.jsonl", dir);
    snprintf(out, sizeof out, "%s/out.jsonl", dir);
    FILE *f = fopen(in, "w");
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItem(fx, "samples")) {
        cJSON *line = cJSON_CreateObject();
        cJSON_AddItemToObject(line, "prompt",
                              cJSON_Duplicate(cJSON_GetObjectItem(s, "messages"), 1));
        cJSON_AddStringToObject(line, "completion",
                                cJSON_GetObjectItem(s, "completion")->valuestring);
        cJSON_AddStringToObject(line, "answer", "42");
        char *l = cJSON_PrintUnformatted(line);
        fprintf(f, "%s\n", l);
        free(l);
        cJSON_Delete(line);
    }
    fclose(f);
    /* from /: the run file's reward model path is relative to the run file, not to where grpo
     * runs (grpo_config.dir) */
    snprintf(cmd, sizeof cmd,
             "cd / && GRPO_PLUGIN_PATH= '%s/grpo' reward score --config "
             "'%s/examples/reward_model_mix.ini' --input '%s' > '%s'",
             GRPO_BINARY_DIR, GRPO_SOURCE_DIR, in, out);
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "grpo reward score failed: %s", cmd);

    char *got = slurp(out), *save = NULL;
    const cJSON *want = cJSON_GetObjectItem(c, "rewards");
    int i = 0;
    for (char *l = strtok_r(got, "\n", &save); l; l = strtok_r(NULL, "\n", &save), i++) {
        cJSON *row = cJSON_Parse(l);
        ck_assert_ptr_nonnull(row);
        const cJSON *r = cJSON_GetObjectItem(row, "rewards");
        double rm = cJSON_GetObjectItem(r, "rm")->valuedouble;
        double w = cJSON_GetArrayItem(want, i)->valuedouble;
        ck_assert_msg(fabs(rm - w) <= 1e-4 * fmax(1.0, fabs(w)), "line %d: rm %.9g, expected %.9g",
                      i + 1, rm, w);
        double sum = 0;
        const char *names[] = {"format", "tags", "rm", "accuracy"};
        for (int k = 0; k < 4; k++) {
            const cJSON *v = cJSON_GetObjectItem(r, names[k]);
            ck_assert_msg(v != NULL, "line %d has no %s reward", i + 1, names[k]);
            if (cJSON_IsNumber(v)) sum += v->valuedouble;
        }
        ck_assert(fabs(cJSON_GetObjectItem(row, "total")->valuedouble - sum) < 1e-5);
        if (i == 1) /* the completion answering <answer> 42 </answer> is accurate */
            ck_assert(cJSON_GetObjectItem(r, "accuracy")->valuedouble == 1.0);
        cJSON_Delete(row);
    }
    ck_assert_int_eq(i, cJSON_GetArraySize(want));
    free(got);
    cJSON_Delete(expected);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("reward_model_cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, example_mix_scores_with_the_reward_model);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
