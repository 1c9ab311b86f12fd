/* test_dataset.c — JSONL datasets: the three prompt shapes, extra fields, bad lines (fail and
 * skip modes), the deterministic shuffled order and its resumable cursor, prompt truncation. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"

#define FIXDIR GRPO_SOURCE_DIR "/tests/fixtures/dataset"

static const char *field(const grpo_example *ex, const char *key) {
    for (uint32_t i = 0; i < ex->n_fields; i++)
        if (strcmp(ex->fields[i].key, key) == 0) return ex->fields[i].json;
    return NULL;
}

START_TEST(all_three_shapes_load) {
    grpo_dataset *ds = NULL;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_msg(grpo_dataset_load(FIXDIR "/shapes.jsonl", NULL, &ds, &err) == GRPO_OK, "%s",
                  err.message);
    ck_assert_uint_eq(ds->n, 4);
    ck_assert_uint_eq(ds->n_skipped, 0);
    /* a plain string prompt, used as is */
    const grpo_example *e = &ds->examples[0];
    ck_assert_str_eq(e->prompt, "What is 2+2? Answer in <answer></answer>.");
    ck_assert_ptr_null(e->messages);
    ck_assert_uint_eq(e->line, 1);
    /* a list of messages (line 3: line 2 is blank) */
    e = &ds->examples[1];
    ck_assert_ptr_null(e->prompt);
    ck_assert_uint_eq(e->line, 3);
    ck_assert_uint_eq(e->n_messages, 2);
    ck_assert_str_eq(e->messages[0].role, "system");
    ck_assert_str_eq(e->messages[1].content, "Name a colour.");
    ck_assert_ptr_null(e->response);
    /* MiniMind conversations: the last assistant turn is the reference response */
    e = &ds->examples[2];
    ck_assert_uint_eq(e->n_messages, 1);
    ck_assert_str_eq(e->messages[0].content, "你好");
    ck_assert_str_eq(e->response, "你好！有什么可以帮你？");
    /* MiniMind turns without "role": user/assistant by position, the last is the response */
    e = &ds->examples[3];
    ck_assert_uint_eq(e->n_messages, 3);
    ck_assert_str_eq(e->messages[0].role, "user");
    ck_assert_str_eq(e->messages[1].role, "assistant");
    ck_assert_str_eq(e->messages[2].role, "user");
    ck_assert_str_eq(e->messages[2].content, "q2");
    ck_assert_str_eq(e->response, "a2");
    grpo_dataset_free(ds);
}
END_TEST

START_TEST(extra_fields_pass_through_as_written) {
    grpo_dataset *ds = NULL;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_dataset_load(FIXDIR "/shapes.jsonl", NULL, &ds, &err), GRPO_OK);
    ck_assert_str_eq(field(&ds->examples[0], "answer"), "\"4\"");
    ck_assert_str_eq(field(&ds->examples[1], "answer"), "[\"red\", \"blue\"]");
    ck_assert_str_eq(field(&ds->examples[1], "id"), "7");
    ck_assert_str_eq(field(&ds->examples[1], "meta"), "{\"src\": \"hand\", \"w\": 1.50}");
    ck_assert_str_eq(field(&ds->examples[2], "answer"), "null");
    ck_assert_uint_eq(ds->examples[3].n_fields, 0);
    ck_assert_ptr_null(field(&ds->examples[0], "prompt"));
    /* the SDK accessor sees the same thing */
    grpo_sample s = {.struct_size = sizeof s,
                     .fields = ds->examples[1].fields,
                     .n_fields = ds->examples[1].n_fields};
    ck_assert_str_eq(grpo_sample_field(&s, "id"), "7");
    grpo_dataset_free(ds);
}
END_TEST

/* Writes a good line then text (so the bad line is line 2) and loads it in fail mode. */
static int load_with_line2(const char *text, grpo_error *err) {
    const char *path = GRPO_BINARY_DIR "/test_dataset_line2.jsonl";
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "{\"prompt\": \"fine\"}\n%s\n{\"prompt\": \"also fine\"}\n", text);
    fclose(f);
    grpo_dataset *ds = NULL;
    grpo_error_init(err);
    int rc = grpo_dataset_load(path, NULL, &ds, err);
    grpo_dataset_free(ds);
    remove(path);
    return rc;
}

START_TEST(bad_lines_fail_with_their_line_number) {
    static const struct {
        const char *line, *expect;
    } cases[] = {
        {"{\"prompt\": \"unterminated", "bad JSON near column"},
        {"not json", "bad JSON"},
        {"{\"answer\": \"no prompt\"}", "expected a \"prompt\""},
        {"{\"prompt\": 42}", "\"prompt\": expected a string or a list of {\"role\", \"content\"} "
                             "messages, got a number"},
        {"{\"prompt\": \"bad \xff utf8\"}", "invalid UTF-8 at byte 17"},
        {"{\"prompt\": \"\xed\xa0\x80 surrogate\"}", "invalid UTF-8"},
        {"{\"prompt\": \"\xc0\xaf overlong\"}", "invalid UTF-8"},
        {"[1, 2]", "expected a JSON object, got a list"},
        {"{\"prompt\": [{\"role\": \"user\"}]}",
         "\"prompt\"[0]: expected a string \"content\", got none"},
        {"{\"prompt\": [{\"role\": 1, \"content\": \"x\"}]}",
         "\"prompt\"[0]: expected a string \"role\", got a number"},
        {"{\"prompt\": []}", "non-empty list"},
        {"{\"prompt\": \"a\", \"prompt\": \"b\"}", "duplicate key \"prompt\""},
        {"{\"prompt\": \"a\", \"conversations\": []}", "not both"},
        {"{\"conversations\": \"text\"}", "\"conversations\": expected a list"},
        {"{\"conversations\": [{\"role\": \"assistant\", \"content\": \"only\"}]}",
         "expected at least one prompt turn"},
        {"{\"conversations\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"user\", "
         "\"content\": \"q2\"}]}",
         "expected the last turn to be the assistant's reference response, got role \"user\""},
        {"{\"conversations\": [{\"content\": \"q\"}, {\"content\": \"a\"}, {\"content\": \"q2\"}]}",
         "got role \"user\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        grpo_error err;
        ck_assert_int_eq(load_with_line2(cases[i].line, &err), GRPO_ERR_INVALID);
        ck_assert_msg(strstr(err.message, "test_dataset_line2.jsonl:2: "), "case %zu: %s", i,
                      err.message);
        ck_assert_msg(strstr(err.message, cases[i].expect), "case %zu: '%s' lacks '%s'", i,
                      err.message, cases[i].expect);
    }
}
END_TEST

START_TEST(bad_lines_are_counted_in_skip_mode) {
    grpo_dataset *ds = NULL;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_dataset_load(FIXDIR "/bad.jsonl", NULL, &ds, &err), GRPO_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "bad.jsonl:2: bad JSON"));
    grpo_dataset_options opt = {.skip_bad_lines = 1};
    ck_assert_int_eq(grpo_dataset_load(FIXDIR "/bad.jsonl", &opt, &ds, &err), GRPO_OK);
    ck_assert_uint_eq(ds->n, 2);
    ck_assert_uint_eq(ds->n_skipped, 8);
    ck_assert_uint_eq(ds->examples[0].line, 1);
    ck_assert_uint_eq(ds->examples[1].line, 10);
    ck_assert_str_eq(field(&ds->examples[1], "answer"), "\"\\\"quoted\\\"\"");
    ck_assert_ptr_nonnull(strstr(ds->first_skip, "bad.jsonl:2:"));
    grpo_dataset_free(ds);
    ck_assert_int_eq(grpo_dataset_load(FIXDIR "/no_such_file.jsonl", NULL, &ds, &err), GRPO_ERR_IO);
}
END_TEST

START_TEST(splitmix64_matches_the_published_sequence) {
    uint64_t s = 0; /* Vigna's splitmix64.c, seed 0 */
    ck_assert_uint_eq(grpo_splitmix64(&s), 0xe220a8397b1dcdafull);
    ck_assert_uint_eq(grpo_splitmix64(&s), 0x6e789e6aa1b965f4ull);
}
END_TEST

START_TEST(shuffle_of_three_is_hand_computable) {
    /* seed 0, epoch 0: i=2: j = 0xe220a8397b1dcdaf mod 3 = 1 -> [0,2,1];
     * i=1: j = 0x6e789e6aa1b965f4 mod 2 = 0 -> [2,0,1] */
    grpo_data_order o;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_data_order_init(&o, 3, 0, 1, &err), GRPO_OK);
    ck_assert_uint_eq(grpo_data_order_next(&o), 2);
    ck_assert_uint_eq(grpo_data_order_next(&o), 0);
    ck_assert_uint_eq(grpo_data_order_next(&o), 1);
    grpo_data_order_free(&o);
    ck_assert_int_eq(grpo_data_order_init(&o, 3, 0, 0, &err), GRPO_OK); /* no shuffle */
    for (size_t i = 0; i < 6; i++) ck_assert_uint_eq(grpo_data_order_next(&o), i % 3);
    grpo_data_order_free(&o);
}
END_TEST

static void take(grpo_data_order *o, size_t *out, size_t k) {
    for (size_t i = 0; i < k; i++) out[i] = grpo_data_order_next(o);
}

START_TEST(shuffle_is_deterministic_per_seed_and_a_permutation_per_epoch) {
    enum { N = 100 };
    size_t a[2 * N], b[2 * N], c[N];
    grpo_data_order o;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_data_order_init(&o, N, 1234, 1, &err), GRPO_OK);
    take(&o, a, 2 * N);
    grpo_data_order_free(&o);
    grpo_data_order_init(&o, N, 1234, 1, &err);
    take(&o, b, 2 * N);
    grpo_data_order_free(&o);
    ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
    grpo_data_order_init(&o, N, 1235, 1, &err);
    take(&o, c, N);
    grpo_data_order_free(&o);
    ck_assert_int_ne(memcmp(a, c, sizeof c), 0);
    ck_assert_int_ne(memcmp(a, a + N, N * sizeof a[0]), 0); /* epochs differ */
    for (int e = 0; e < 2; e++) {
        int seen[N] = {0};
        for (size_t i = 0; i < N; i++) seen[a[e * N + i]]++;
        for (size_t i = 0; i < N; i++) ck_assert_int_eq(seen[i], 1);
    }
}
END_TEST

START_TEST(cursor_restore_continues_across_an_epoch_boundary) {
    enum { N = 5 };
    size_t ref[20], got[8];
    grpo_data_order o;
    grpo_error err;
    grpo_error_init(&err);
    grpo_data_order_init(&o, N, 99, 1, &err);
    take(&o, ref, 7); /* into epoch 1 */
    grpo_data_cursor saved = o.cur;
    ck_assert_uint_eq(saved.epoch, 1);
    ck_assert_uint_eq(saved.position, 2);
    take(&o, ref + 7, 8); /* crosses into epoch 2 */
    grpo_data_order_free(&o);

    char text[128];
    grpo_data_cursor_format(&saved, text, sizeof text);
    ck_assert_str_eq(text, "seed=99 epoch=1 position=2 n=5");
    grpo_data_cursor back;
    ck_assert_int_eq(grpo_data_cursor_parse(text, &back, &err), GRPO_OK);
    ck_assert_int_eq(grpo_data_order_restore(&o, N, back, 1, &err), GRPO_OK);
    take(&o, got, 8);
    ck_assert_int_eq(memcmp(got, ref + 7, sizeof got), 0);
    grpo_data_order_free(&o);

    /* a cursor taken exactly at the end of an epoch also resumes */
    grpo_data_cursor end = {.seed = 99, .epoch = 0, .position = N, .n = N};
    ck_assert_int_eq(grpo_data_order_restore(&o, N, end, 1, &err), GRPO_OK);
    take(&o, got, 2);
    ck_assert_int_eq(memcmp(got, ref + 5, 2 * sizeof got[0]), 0);
    grpo_data_order_free(&o);

    ck_assert_int_eq(grpo_data_order_restore(&o, N + 1, back, 1, &err), GRPO_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "5 examples, this one has 6"));
    ck_assert_int_eq(grpo_data_cursor_parse("seed=1 epoch=x", &back, &err), GRPO_ERR_INVALID);
}
END_TEST

START_TEST(truncation_left_versus_skip) {
    int32_t ids[10];
    size_t n = 10;
    for (int i = 0; i < 10; i++) ids[i] = i + 1;
    ck_assert_int_eq(grpo_prompt_limit(ids, &n, 4, GRPO_PROMPT_TRUNCATE_LEFT), 1);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(ids[0], 7);
    ck_assert_int_eq(ids[3], 10);
    n = 10;
    ck_assert_int_eq(grpo_prompt_limit(ids, &n, 4, GRPO_PROMPT_SKIP), 0);
    n = 4;
    ck_assert_int_eq(grpo_prompt_limit(ids, &n, 4, GRPO_PROMPT_SKIP), 1); /* at the limit: kept */
    ck_assert_uint_eq(n, 4);
    n = 4;
    ck_assert_int_eq(grpo_prompt_limit(ids, &n, 0, GRPO_PROMPT_SKIP), 1); /* 0 = no limit */
}
END_TEST

/* Test callbacks: "role:content|" per message; one id per byte. */
static int join_render(void *user, const grpo_message *m, size_t n, char **out, grpo_error *err) {
    (void)user, (void)err;
    size_t len = 1;
    for (size_t i = 0; i < n; i++) len += strlen(m[i].role) + strlen(m[i].content) + 2;
    *out = calloc(1, len);
    for (size_t i = 0; i < n; i++)
        strcat(strcat(strcat(strcat(*out, m[i].role), ":"), m[i].content), "|");
    return GRPO_OK;
}

static int byte_tokenize(void *user, const char *text, int32_t **ids, size_t *n, grpo_error *err) {
    (void)user, (void)err;
    *n = strlen(text);
    *ids = malloc((*n ? *n : 1) * sizeof **ids);
    for (size_t i = 0; i < *n; i++) (*ids)[i] = (unsigned char)text[i];
    return GRPO_OK;
}

START_TEST(prepare_renders_tokenizes_and_applies_the_policy) {
    grpo_dataset *ds = NULL;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_dataset_load(FIXDIR "/shapes.jsonl", NULL, &ds, &err), GRPO_OK);
    char *text;
    int32_t *ids;
    size_t n;
    int keep;
    ck_assert_int_eq(grpo_example_prepare(&ds->examples[1], join_render, NULL, byte_tokenize, NULL,
                                          0, GRPO_PROMPT_SKIP, &text, &ids, &n, &keep, &err),
                     GRPO_OK);
    ck_assert_str_eq(text, "system:Be brief.|user:Name a colour.|");
    ck_assert_int_eq(keep, 1);
    ck_assert_uint_eq(n, strlen(text));
    free(text), free(ids);
    ck_assert_int_eq(grpo_example_prepare(&ds->examples[1], join_render, NULL, byte_tokenize, NULL,
                                          6, GRPO_PROMPT_TRUNCATE_LEFT, &text, &ids, &n, &keep,
                                          &err),
                     GRPO_OK);
    ck_assert_int_eq(keep, 1);
    ck_assert_uint_eq(n, 6);
    ck_assert_int_eq(ids[0], 'l'); /* the last 6 bytes: "lour.|" */
    ck_assert_int_eq(ids[5], '|');
    free(text), free(ids);
    ck_assert_int_eq(grpo_example_prepare(&ds->examples[0], NULL, NULL, byte_tokenize, NULL, 6,
                                          GRPO_PROMPT_SKIP, &text, &ids, &n, &keep, &err),
                     GRPO_OK);
    ck_assert_int_eq(keep, 0);
    ck_assert_ptr_null(text);
    /* messages without a template is an error that says so */
    ck_assert_int_eq(grpo_example_prepare(&ds->examples[1], NULL, NULL, byte_tokenize, NULL, 0,
                                          GRPO_PROMPT_SKIP, &text, &ids, &n, &keep, &err),
                     GRPO_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "no chat template"));
    grpo_dataset_free(ds);
}
END_TEST

int main(void) {
    Suite *s = suite_create("dataset");
    TCase *tc = tcase_create("jsonl");
    tcase_add_test(tc, all_three_shapes_load);
    tcase_add_test(tc, extra_fields_pass_through_as_written);
    tcase_add_test(tc, bad_lines_fail_with_their_line_number);
    tcase_add_test(tc, bad_lines_are_counted_in_skip_mode);
    tcase_add_test(tc, splitmix64_matches_the_published_sequence);
    tcase_add_test(tc, shuffle_of_three_is_hand_computable);
    tcase_add_test(tc, shuffle_is_deterministic_per_seed_and_a_permutation_per_epoch);
    tcase_add_test(tc, cursor_restore_continues_across_an_epoch_boundary);
    tcase_add_test(tc, truncation_left_versus_skip);
    tcase_add_test(tc, prepare_renders_tokenizes_and_applies_the_policy);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
