/* test_chat_template_fuzz.c — the template parser/renderer and the JSONL reader survive hostile
 * input: deterministic random mutations of real templates and data lines must either work or
 * fail with a message, never crash or leak (run under ASan+UBSan in the sanitizer build). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat_template.h"
#include "io/dataset.h"
#include "io/testing.h"

static uint64_t rng = 0x1234567;
static uint64_t next_u64(void) { return grpo_splitmix64(&rng); }

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

/* Returns a malloc'ed mutation of src: a few random edits drawn from template-ish pieces. */
static char *mutate(const char *src) {
    static const char *const pieces[] = {"{%",    "%}",     "{{",
                                         "}}",    "{#",     "#}",
                                         "-",     "+",      "(",
                                         ")",     "[",      "]",
                                         "{",     "}",      "'",
                                         "\"",    "\\",     "|",
                                         ".",     ",",      ":",
                                         " is ",  " not ",  " in ",
                                         " and ", "loop",   "ns",
                                         "\n",    "\xff",   "\xe4\xbd",
                                         "endif", "endfor", "9999999999999999999",
                                         "-1",    "::-1",   "~"};
    size_t n = strlen(src), cap = n + 256;
    char *s = malloc(cap);
    memcpy(s, src, n + 1);
    int edits = 1 + (int)(next_u64() % 4);
    for (int e = 0; e < edits; e++) {
        size_t at = n ? (size_t)(next_u64() % (n + 1)) : 0;
        switch (next_u64() % 3) {
        case 0: { /* delete a span */
            size_t len = (size_t)(next_u64() % 8);
            if (at + len > n) len = n - at;
            memmove(s + at, s + at + len, n - at - len + 1);
            n -= len;
            break;
        }
        case 1: { /* insert a piece */
            const char *p = pieces[next_u64() % (sizeof pieces / sizeof pieces[0])];
            size_t len = strlen(p);
            if (n + len + 1 > cap) break;
            memmove(s + at + len, s + at, n - at + 1);
            memcpy(s + at, p, len);
            n += len;
            break;
        }
        default: /* overwrite a byte */
            if (at < n) s[at] = (char)(next_u64() % 255 + 1);
        }
    }
    return s;
}

START_TEST(mutated_templates_never_crash) {
    const char *srcs[3];
    char *qwen3 = slurp(GRPO_SOURCE_DIR "/tests/fixtures/template/qwen3-0.6b.jinja");
    char *qwen25 = slurp(GRPO_SOURCE_DIR "/tests/fixtures/template/qwen2.5-7b-instruct.jinja");
    srcs[0] = qwen3, srcs[1] = qwen25, srcs[2] = grpo_chat_template_chatml();
    const char *msgs =
        "[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":\"q\"},"
        "{\"role\":\"assistant\",\"content\":\"<think>r</"
        "think>a\"},{\"role\":\"user\",\"content\":\"q2\"}]";
    grpo_chat_var var = {"enable_thinking", "false"};
    grpo_chat_options opt = {.add_generation_prompt = 1, .vars = &var, .n_vars = 1};
    int compiled = 0, rendered = 0, total = 3000;
    for (int i = 0; i < total; i++) {
        char *t = mutate(srcs[i % 3]);
        grpo_chat_template *tpl = NULL;
        grpo_error err;
        grpo_error_init(&err);
        if (grpo_chat_template_compile(t, "fuzz", &tpl, &err) == GRPO_OK) {
            compiled++;
            char *out = NULL;
            if (grpo_chat_template_render_json(tpl, msgs, &opt, &out, &err) == GRPO_OK)
                rendered++;
            else
                ck_assert_msg(err.message[0] != '\0', "render failed without a message");
            free(out);
            grpo_chat_template_free(tpl);
        } else {
            ck_assert_msg(strncmp(err.message, "chat template fuzz:", 19) == 0, "bad message: %s",
                          err.message);
        }
        free(t);
    }
    printf("fuzz: %d mutated templates, %d compiled, %d rendered\n", total, compiled, rendered);
    ck_assert_int_gt(compiled, 0);
    free(qwen3), free(qwen25);
}
END_TEST

START_TEST(deep_nesting_is_an_error_not_a_stack_overflow) {
    size_t depth = 100000;
    char *t = malloc(depth * 2 + 16);
    memset(t, '(', depth);
    strcpy(t + depth, "1");
    memset(t + depth + 1, ')', depth);
    t[2 * depth + 1] = '\0';
    char *tag = malloc(2 * depth + 16);
    sprintf(tag, "{{ %s }}", t);
    grpo_chat_template *tpl = NULL;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_chat_template_compile(tag, "deep", &tpl, &err), GRPO_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "nested too deeply"));
    free(t), free(tag);
    /* statements */
    size_t n = 20000;
    char *ifs = malloc(n * 30 + 16);
    ifs[0] = '\0';
    char *p = ifs;
    for (size_t i = 0; i < n; i++) p += sprintf(p, "{%% if true %%}");
    ck_assert_int_eq(grpo_chat_template_compile(ifs, "deep", &tpl, &err), GRPO_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "nested too deeply"));
    free(ifs);
}
END_TEST

START_TEST(mutated_jsonl_lines_never_crash) {
    char *base = slurp(GRPO_SOURCE_DIR "/tests/fixtures/dataset/shapes.jsonl");
    const char *path = GRPO_BINARY_DIR "/test_chat_template_fuzz.jsonl";
    int loaded = 0, total = 400;
    for (int i = 0; i < total; i++) {
        char *t = mutate(base);
        FILE *f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        fputs(t, f);
        fclose(f);
        grpo_dataset_options opt = {.skip_bad_lines = (int)(i & 1)};
        grpo_dataset *ds = NULL;
        grpo_error err;
        grpo_error_init(&err);
        if (grpo_dataset_load(path, &opt, &ds, &err) == GRPO_OK) {
            loaded++;
            for (size_t k = 0; k < ds->n; k++)
                for (uint32_t j = 0; j < ds->examples[k].n_fields; j++)
                    ck_assert_ptr_nonnull(ds->examples[k].fields[j].json);
        } else
            ck_assert_msg(err.message[0] != '\0', "load failed without a message");
        grpo_dataset_free(ds);
        free(t);
    }
    remove(path);
    printf("fuzz: %d mutated JSONL files, %d loaded\n", total, loaded);
    free(base);
}
END_TEST

int main(void) {
    Suite *s = suite_create("chat_template_fuzz");
    TCase *tc = tcase_create("fuzz");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, mutated_templates_never_crash);
    tcase_add_test(tc, deep_nesting_is_an_error_not_a_stack_overflow);
    tcase_add_test(tc, mutated_jsonl_lines_never_crash);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
