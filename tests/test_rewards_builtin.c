/*
 * test_rewards_builtin.c — the built-in format and tags rewards, loaded through the registry exactly
 * as a run would load them, scored against MiniMind's numbers (tests/fixtures/rewards/minimind.jsonl,
 * made by tools/make_reward_fixtures.py with Python's re and str.count), plus hand-computable
 * cases for the non-default options.
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpo/reward.h"
#include "host/host.h"
#include "host/registry.h"

#define FIXTURE GRPO_SOURCE_DIR "/tests/fixtures/rewards/minimind.jsonl"
#define MAX_KV 32

/* A grpo_config built from an entry's manifest defaults, with overrides replacing a key's values. */
typedef struct test_config {
    const char *keys[MAX_KV], *values[MAX_KV];
    grpo_config cfg;
} test_config;

static void config_from_defaults(test_config *tc, const grpo_entry *e, const char *const *over) {
    uint32_t n = 0;
    for (int k = 0; k < e->n_keys; k++) {
        int overridden = 0;
        for (int o = 0; over && over[o]; o += 2)
            if (!strcmp(over[o], e->keys[k].name)) {
                tc->keys[n] = over[o], tc->values[n++] = over[o + 1];
                overridden = 1;
            }
        for (int d = 0; !overridden && d < e->keys[k].n_defaults; d++)
            tc->keys[n] = e->keys[k].name, tc->values[n++] = e->keys[k].defaults[d];
    }
    tc->cfg = (grpo_config){sizeof(grpo_config), n, tc->keys, tc->values, "reward.test", NULL};
}

static grpo_registry reg;

static void registry_setup(void) {
    grpo_error err;
    grpo_error_init(&err);
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    memset(&reg, 0, sizeof reg);
    ck_assert_msg(grpo_registry_scan(&reg, dirs, &err) == GRPO_OK, "%s", err.message);
}

static void registry_teardown(void) { grpo_registry_free(&reg); }

/* Creates reward `id` with overrides, scores the completions, destroys it. */
static void score(const char *id, const char *const *over, const char *const *completions,
                  uint32_t n, float *out) {
    grpo_error err;
    grpo_error_init(&err);
    const grpo_entry *e = grpo_registry_find(&reg, id);
    ck_assert_msg(e != NULL, "%s not found in %s", id, GRPO_PACK_BUILD_DIR);
    const grpo_reward_desc *d = NULL;
    ck_assert_msg(grpo_registry_load(&reg, e, grpo_default_host(), (const void **)&d, &err) == GRPO_OK,
                  "%s", err.message);
    test_config tc;
    config_from_defaults(&tc, e, over);
    void *state = NULL;
    ck_assert_msg(d->create(grpo_default_host(), &tc.cfg, &state, &err) == GRPO_OK, "%s", err.message);
    grpo_sample *s = calloc(n, sizeof *s);
    for (uint32_t i = 0; i < n; i++)
        s[i] = (grpo_sample){.struct_size = sizeof *s, .prompt = "", .completion = completions[i],
                             .group = i, .member = 0};
    ck_assert_msg(d->score(state, s, n, out, &err) == GRPO_OK, "%s", err.message);
    d->destroy(state);
    free(s);
}

START_TEST(defaults_reproduce_minimind_rewards) {
    FILE *f = fopen(FIXTURE, "r");
    ck_assert_msg(f != NULL, "cannot open %s", FIXTURE);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        ck_assert_msg(j != NULL, "%s:%d: bad JSON", FIXTURE, n + 1);
        const char *c = cJSON_GetObjectItem(j, "completion")->valuestring;
        float got[2];
        score("builtin.format", NULL, &c, 1, &got[0]);
        score("builtin.tags", NULL, &c, 1, &got[1]);
        /* exact: both sides sum multiples of 0.25 */
        ck_assert_msg(got[0] == (float)cJSON_GetObjectItem(j, "format")->valuedouble,
                      "%s:%d format: got %g", FIXTURE, n + 1, got[0]);
        ck_assert_msg(got[1] == (float)cJSON_GetObjectItem(j, "tags")->valuedouble,
                      "%s:%d tags: got %g", FIXTURE, n + 1, got[1]);
        cJSON_Delete(j);
        n++;
    }
    fclose(f);
    ck_assert_int_ge(n, 20);
}
END_TEST

START_TEST(format_full_match_rejects_trailing_newline) {
    const char *c[] = {"<think>\nx\n</think>\n<answer>\n4\n</answer>\n",
                       "<think>\nx\n</think>\n<answer>\n4\n</answer>"};
    const char *over[] = {"full_match", "true", NULL};
    float r[2];
    score("builtin.format", over, c, 2, r);
    ck_assert_float_eq(r[0], 0.0f);
    ck_assert_float_eq(r[1], 0.5f);
}
END_TEST

START_TEST(format_sum_counts_each_matching_pattern) {
    const char *c[] = {"abc", "abx", "zzz"};
    const char *over[] = {"pattern", "ab", "pattern", "abc$", "combine", "sum", "value", "1.5", NULL};
    /* two "pattern" overrides: config_from_defaults keeps both, in order */
    float r[3];
    score("builtin.format", over, c, 3, r);
    ck_assert_float_eq(r[0], 3.0f);
    ck_assert_float_eq(r[1], 1.5f);
    ck_assert_float_eq(r[2], 0.0f);
}
END_TEST

START_TEST(format_without_dotall_stops_at_newline) {
    const char *c[] = {"<think>\na\nb\n</think>\n<answer>\n4\n</answer>"};
    const char *over[] = {"dotall", "false", NULL};
    float r;
    score("builtin.format", over, c, 1, &r);
    ck_assert_float_eq(r, 0.0f); /* .*? cannot cross the newline between a and b */
}
END_TEST

START_TEST(format_bad_pattern_is_a_clear_error) {
    grpo_error err;
    grpo_error_init(&err);
    const grpo_entry *e = grpo_registry_find(&reg, "builtin.format");
    const grpo_reward_desc *d;
    ck_assert(grpo_registry_load(&reg, e, grpo_default_host(), (const void **)&d, &err) == GRPO_OK);
    test_config tc;
    const char *over[] = {"pattern", "(unclosed", NULL};
    config_from_defaults(&tc, e, over);
    void *state = NULL;
    ck_assert_int_eq(d->create(grpo_default_host(), &tc.cfg, &state, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "[reward.test] pattern 1 '(unclosed'") != NULL, "%s", err.message);
    ck_assert_msg(strstr(err.message, "missing closing parenthesis") != NULL, "%s", err.message);
}
END_TEST

static int warnings_logged;

static void count_warnings(int32_t level, const char *who, const char *fmt, ...) {
    (void)fmt;
    if (level == GRPO_LOG_WARN) warnings_logged++;
    fprintf(stderr, "warning from %s\n", who);
}

/* Catastrophic backtracking on one completion hits PCRE2's match limit: that sample is NaN, the
 * others are scored, the batch does not fail, and the reward warns once (plus one count at
 * destroy), not once per sample. */
START_TEST(format_match_limit_scores_nan_and_warns_once) {
    grpo_error err;
    grpo_error_init(&err);
    const grpo_entry *e = grpo_registry_find(&reg, "builtin.format");
    grpo_host host = *grpo_default_host();
    host.log = count_warnings;
    const grpo_reward_desc *d;
    ck_assert(grpo_registry_load(&reg, e, &host, (const void **)&d, &err) == GRPO_OK);
    test_config tc;
    const char *over[] = {"pattern", "(a+)+$", NULL};
    config_from_defaults(&tc, e, over);
    void *state = NULL;
    ck_assert_msg(d->create(&host, &tc.cfg, &state, &err) == GRPO_OK, "%s", err.message);
    char bad[64];
    memset(bad, 'a', 40);
    strcpy(bad + 40, "b"); /* (a+)+$ tries every split of the a's before failing */
    const char *c[] = {bad, "aaaa", bad, "xyz"};
    grpo_sample s[4];
    for (int i = 0; i < 4; i++)
        s[i] = (grpo_sample){.struct_size = sizeof s[i], .prompt = "", .completion = c[i], .group = (uint32_t)i};
    float r[4];
    warnings_logged = 0;
    ck_assert_msg(d->score(state, s, 4, r, &err) == GRPO_OK, "%s", err.message);
    ck_assert(isnan(r[0]) && isnan(r[2]));
    ck_assert_float_eq(r[1], 0.5f);
    ck_assert_float_eq(r[3], 0.0f);
    ck_assert_int_eq(warnings_logged, 1);
    ck_assert(d->score(state, s, 4, r, &err) == GRPO_OK && isnan(r[0]));
    ck_assert_int_eq(warnings_logged, 1);
    d->destroy(state);
    ck_assert_int_eq(warnings_logged, 2); /* "4 samples in all scored NaN ..." */
}
END_TEST

START_TEST(tags_count_like_python_str_count) {
    /* "aaaa".count("aa") == 2 in Python (non-overlapping): not exactly once. */
    const char *c[] = {"aaaa", "aa", "xaax", "aaa"};
    const char *over[] = {"tag", "aa", "value", "1", NULL};
    float r[4];
    score("builtin.tags", over, c, 4, r);
    ck_assert_float_eq(r[0], 0.0f);
    ck_assert_float_eq(r[1], 1.0f);
    ck_assert_float_eq(r[2], 1.0f);
    ck_assert_float_eq(r[3], 1.0f); /* "aaa".count("aa") == 1 */
}
END_TEST

/* Scores completions against gold answers (gold NULL = field absent) with builtin.accuracy. */
static void score_accuracy(const char *const *over, const char *const *completions,
                           const char *const *gold_json, uint32_t n, float *out) {
    grpo_error err;
    grpo_error_init(&err);
    const grpo_entry *e = grpo_registry_find(&reg, "builtin.accuracy");
    ck_assert_ptr_nonnull(e);
    const grpo_reward_desc *d = NULL;
    ck_assert_msg(grpo_registry_load(&reg, e, grpo_default_host(), (const void **)&d, &err) == GRPO_OK,
                  "%s", err.message);
    test_config tc;
    config_from_defaults(&tc, e, over);
    void *state = NULL;
    ck_assert_msg(d->create(grpo_default_host(), &tc.cfg, &state, &err) == GRPO_OK, "%s", err.message);
    grpo_sample s[8];
    grpo_field f[8];
    for (uint32_t i = 0; i < n; i++) {
        f[i] = (grpo_field){sizeof f[i], "answer", gold_json[i]};
        s[i] = (grpo_sample){.struct_size = sizeof s[i], .prompt = "", .completion = completions[i],
                             .fields = &f[i], .n_fields = gold_json[i] ? 1 : 0};
    }
    ck_assert_msg(d->score(state, s, n, out, &err) == GRPO_OK, "%s", err.message);
    d->destroy(state);
}

START_TEST(accuracy_auto_extraction_exact) {
    const char *c[] = {"<think>\n3+4\n</think>\n<answer>\n 7 \n</answer>",
                       "so \\boxed{\\frac{1}{2}} done",
                       "first 3 then -12",
                       "<answer>8</answer>",
                       "no answer here",
                       "<answer>7</answer>"};
    const char *gold[] = {"\"7\"", "\"\\\\frac{1}{2}\"", "-12", "\"7\"", "\"7\"", NULL};
    float r[6];
    score_accuracy(NULL, c, gold, 6, r);
    ck_assert_float_eq(r[0], 1.0f); /* tag content trimmed */
    ck_assert_float_eq(r[1], 1.0f); /* nested braces in \boxed */
    ck_assert_float_eq(r[2], 1.0f); /* last number, sign kept; gold is a JSON number */
    ck_assert_float_eq(r[3], 0.0f);
    ck_assert_float_eq(r[4], 0.0f);
    ck_assert(isnan(r[5]));         /* no gold answer: no opinion */
}
END_TEST

START_TEST(accuracy_numeric_tolerance) {
    const char *over[] = {"match", "numeric", "tolerance", "0.01", "extract", "last_number", NULL};
    const char *c[] = {"about 1,000.4", "3.14159", "3.2", "x"};
    const char *gold[] = {"1000", "\"3.14\"", "3.14", "1"};
    float r[4];
    score_accuracy(over, c, gold, 4, r);
    ck_assert_float_eq(r[0], 1.0f); /* |1000.4-1000| <= 0.01*1000 */
    ck_assert_float_eq(r[1], 1.0f);
    ck_assert_float_eq(r[2], 0.0f);
    ck_assert_float_eq(r[3], 0.0f);
}
END_TEST

/* MiniMind HEAD's length window and repetition penalty on the same completions
 * (tests/fixtures/rewards/minimind_head.jsonl, made with Python's re by the fixture script). */
START_TEST(length_and_repetition_reproduce_minimind_head) {
    const char *path = GRPO_SOURCE_DIR "/tests/fixtures/rewards/minimind_head.jsonl";
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char line[4096];
    int n = 0, partial = 0;
    while (fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        ck_assert_msg(j != NULL, "%s:%d: bad JSON", path, n + 1);
        const char *c = cJSON_GetObjectItem(j, "completion")->valuestring;
        double want_rep = cJSON_GetObjectItem(j, "repetition")->valuedouble;
        float got[2];
        score("builtin.length", NULL, &c, 1, &got[0]);
        score("builtin.repetition", NULL, &c, 1, &got[1]);
        ck_assert_msg(got[0] == (float)cJSON_GetObjectItem(j, "length")->valuedouble,
                      "%s:%d length: got %g", path, n + 1, got[0]);
        /* float vs Python double: one float rounding of the same expression */
        ck_assert_msg(fabs(got[1] - want_rep) < 1e-6, "%s:%d repetition: got %g want %g", path,
                      n + 1, got[1], want_rep);
        partial += want_rep < 0 && want_rep > -0.5;
        cJSON_Delete(j);
        n++;
    }
    fclose(f);
    ck_assert_int_ge(n, 19);
    ck_assert_int_ge(partial, 2); /* the fixture exercises the formula, not only 0 and the cap */
}
END_TEST

START_TEST(overlong_is_dapo_soft_punishment) {
    /* max_length 10, cache 4: 0 up to 6 tokens, then (6 - L)/4, -1 past 10 */
    const char *over[] = {"max_length", "10", "cache", "4", NULL};
    grpo_error err;
    grpo_error_init(&err);
    const grpo_entry *e = grpo_registry_find(&reg, "builtin.overlong");
    ck_assert_ptr_nonnull(e);
    const grpo_reward_desc *d = NULL;
    ck_assert(grpo_registry_load(&reg, e, grpo_default_host(), (const void **)&d, &err) == GRPO_OK);
    test_config tc;
    config_from_defaults(&tc, e, over);
    void *state = NULL;
    ck_assert_msg(d->create(grpo_default_host(), &tc.cfg, &state, &err) == GRPO_OK, "%s", err.message);
    const uint32_t lens[] = {0, 6, 7, 8, 10, 11};
    const float want[] = {0.0f, 0.0f, -0.25f, -0.5f, -1.0f, -1.0f};
    grpo_sample s[6];
    float r[6];
    for (int i = 0; i < 6; i++)
        s[i] = (grpo_sample){.struct_size = sizeof s[i], .prompt = "", .completion = "",
                             .n_completion_ids = lens[i]};
    ck_assert(d->score(state, s, 6, r, &err) == GRPO_OK);
    for (int i = 0; i < 6; i++) ck_assert_float_eq(r[i], want[i]);
    d->destroy(state);
}
END_TEST

int main(void) {
    Suite *s = suite_create("rewards_builtin");
    TCase *tc = tcase_create("builtin");
    tcase_add_checked_fixture(tc, registry_setup, registry_teardown);
    tcase_add_test(tc, defaults_reproduce_minimind_rewards);
    tcase_add_test(tc, format_full_match_rejects_trailing_newline);
    tcase_add_test(tc, format_sum_counts_each_matching_pattern);
    tcase_add_test(tc, format_without_dotall_stops_at_newline);
    tcase_add_test(tc, format_bad_pattern_is_a_clear_error);
    tcase_add_test(tc, format_match_limit_scores_nan_and_warns_once);
    tcase_add_test(tc, tags_count_like_python_str_count);
    tcase_add_test(tc, accuracy_auto_extraction_exact);
    tcase_add_test(tc, accuracy_numeric_tolerance);
    tcase_add_test(tc, length_and_repetition_reproduce_minimind_head);
    tcase_add_test(tc, overlong_is_dapo_soft_punishment);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
