/* test_dataset.c — JSONL datasets: the three prompt shapes, extra fields, bad lines (fail and
 * skip modes), one parse for fields (control bytes, BOM, \u0000), a 100k-key line, the prompt
 * key (data.prompt_field), the deterministic shuffled order and its resumable cursor, prompt
 * truncation. */
#include <check.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/dataset.h"
#include "train/run.h"
#include "config/testing.h"
#include "io/testing.h"

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

/* ---- one parse: what rewards get is what was parsed --------------------------------------- */

/* Writes text to a scratch file and loads it with opt; the file is removed again. */
static int load_text(const char *text, const grpo_dataset_options *opt, grpo_dataset **ds,
                     grpo_error *err) {
    const char *path = GRPO_BINARY_DIR "/test_dataset_text.jsonl";
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, strlen(text), f), strlen(text));
    fclose(f);
    *ds = NULL;
    grpo_error_init(err);
    int rc = grpo_dataset_load(path, opt, ds, err);
    remove(path);
    return rc;
}

/* cJSON skips a form feed or any control byte as whitespace and a BOM at the start; the old
 * field slicer did not, and handed rewards broken JSON. Such bytes are now refused (JSON has no
 * such whitespace) and a leading BOM is skipped, so the field text is what was parsed. */
START_TEST(control_bytes_are_refused_and_a_bom_is_skipped) {
    static const struct {
        const char *line, *expect;
    } cases[] = {
        {"{\"prompt\": \"p\", \"answer\"\f: \"4\"}", "control byte 0x0C at byte 25 of the line"},
        {"{\"prompt\": \"p\",\x01\"answer\": \"4\"}", "control byte 0x01 at byte 16"},
        {"{\"prompt\": \"a\x1b[0m\"}", "control byte 0x1B at byte 14"},
        {"{\"prompt\": \"p\", \"answer\": \xEF\xBB\xBF\"4\"}", "bad JSON near column 27"},
        {"{\"prompt\": \"p\"} {}", "bad JSON near column 17: expected the end of the line"},
        {"{\"prompt\" \"p\"}", "bad JSON near column 11: expected ':' after the key"},
        {"{\"prompt\": \"p\" \"a\": 1}", "bad JSON near column 16: expected ',' or '}'"},
        {"{\"prompt\": \"p\", }", "bad JSON near column 17: expected a \"key\""},
        {"{prompt: \"p\"}", "bad JSON near column 2: expected a \"key\" in quotes"},
        {"{\"prompt\": nope}", "bad JSON near column 12: expected a valid JSON value"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        grpo_error err;
        ck_assert_int_eq(load_with_line2(cases[i].line, &err), GRPO_ERR_INVALID);
        ck_assert_msg(strstr(err.message, "test_dataset_line2.jsonl:2: "), "case %zu: %s", i,
                      err.message);
        ck_assert_msg(strstr(err.message, cases[i].expect), "case %zu: '%s' lacks '%s'", i,
                      err.message, cases[i].expect);
    }
    /* a BOM opening the file (and one opening a file appended to it) is skipped */
    grpo_dataset *ds;
    grpo_error err;
    ck_assert_msg(load_text("\xEF\xBB\xBF{\"prompt\": \"p\", \"answer\": \"4\"}\n"
                            "\xEF\xBB\xBF {\"answer\" :\t[1, {\"a\": \"}\"}] ,\r"
                            "\"prompt\":\"q\"}\n",
                            NULL, &ds, &err) == GRPO_OK,
                  "%s", err.message);
    ck_assert_uint_eq(ds->n, 2);
    ck_assert_str_eq(ds->examples[0].prompt, "p");
    ck_assert_str_eq(field(&ds->examples[0], "answer"), "\"4\"");
    ck_assert_str_eq(field(&ds->examples[1], "answer"), "[1, {\"a\": \"}\"}]");
    grpo_dataset_free(ds);
}
END_TEST

/* A small generator of JSONL lines with random JSON whitespace between every token. */
typedef struct gen {
    uint64_t s;
    char buf[8192];
    size_t len;
    int bad; /* a control byte was put between tokens: the line must be refused */
} gen;

static uint32_t gen_below(gen *g, uint32_t n) { return (uint32_t)(grpo_splitmix64(&g->s) % n); }

static void gen_put(gen *g, const char *s) {
    size_t n = strlen(s);
    ck_assert_uint_lt(g->len + n, sizeof g->buf);
    memcpy(g->buf + g->len, s, n + 1);
    g->len += n;
}

static void gen_ws(gen *g) {
    static const char *const ws[] = {"", "", " ", "\t", "\r", "  \t", "\f", "\x0b"};
    uint32_t k = gen_below(g, g->bad ? 6 : 8);
    if (k >= 6 && gen_below(g, 32)) k = 2; /* keep bad lines rare: about one in five */
    g->bad |= k >= 6;
    gen_put(g, ws[k]);
}

static void gen_value(gen *g, int depth) {
    static const char *const atoms[] = {
        "\"x\"", "\"}]{[,:\"", "\"\\\"\\\\\"", "\"\\u00e9\\n\\/\"", "\"caf\xc3\xa9\"", "0",
        "-1.50", "1e3", "12345678901234567890", "true", "false", "null", "\"\\\\u0000\""};
    uint32_t k = gen_below(g, depth < 3 ? 15 : 13);
    if (k < 13) return gen_put(g, atoms[k]);
    int obj = k == 14, n = (int)gen_below(g, 4);
    gen_put(g, obj ? "{" : "[");
    for (int i = 0; i < n; i++) {
        gen_ws(g);
        if (i) gen_put(g, ","), gen_ws(g);
        if (obj) {
            char key[32];
            snprintf(key, sizeof key, "\"k%d\"", i);
            gen_put(g, key), gen_ws(g), gen_put(g, ":"), gen_ws(g);
        }
        gen_value(g, depth + 1);
    }
    gen_ws(g);
    gen_put(g, obj ? "}" : "]");
}

/* One line: {"prompt": "p", "f0": value, ...} with whitespace everywhere, sometimes a BOM. */
static void gen_line(gen *g) {
    g->len = 0, g->buf[0] = '\0', g->bad = 0;
    if (!gen_below(g, 8)) gen_put(g, "\xEF\xBB\xBF");
    gen_ws(g), gen_put(g, "{"), gen_ws(g), gen_put(g, "\"prompt\""), gen_ws(g), gen_put(g, ":");
    gen_ws(g), gen_put(g, "\"p\"");
    int n = 1 + (int)gen_below(g, 5);
    for (int i = 0; i < n; i++) {
        char key[32];
        snprintf(key, sizeof key, "\"f%d\"", i);
        gen_ws(g), gen_put(g, ","), gen_ws(g), gen_put(g, key), gen_ws(g), gen_put(g, ":");
        gen_ws(g), gen_value(g, 0);
    }
    gen_ws(g), gen_put(g, "}"), gen_ws(g);
}

/* Property: every field's text, parsed on its own, equals that key's value in cJSON's parse of
 * the whole line, with no surrounding whitespace; the lines with a control byte are skipped. */
START_TEST(field_text_always_agrees_with_the_parse) {
    enum { LINES = 400 };
    static char lines[LINES][8192];
    int bad[LINES], n_bad = 0;
    size_t total = 0;
    gen g = {.s = 12345};
    for (int i = 0; i < LINES; i++) {
        gen_line(&g);
        memcpy(lines[i], g.buf, g.len + 1);
        bad[i] = g.bad, n_bad += g.bad, total += g.len + 1;
    }
    ck_assert_int_gt(n_bad, 5);
    char *text = malloc(total + 1), *p = text;
    for (int i = 0; i < LINES; i++) p += sprintf(p, "%s\n", lines[i]);
    grpo_dataset *ds;
    grpo_error err;
    grpo_dataset_options opt = {.skip_bad_lines = 1};
    ck_assert_msg(load_text(text, &opt, &ds, &err) == GRPO_OK, "%s", err.message);
    free(text);
    ck_assert_uint_eq(ds->n_skipped, (size_t)n_bad);
    ck_assert_uint_eq(ds->n, (size_t)(LINES - n_bad));
    for (size_t e = 0; e < ds->n; e++) {
        const grpo_example *ex = &ds->examples[e];
        const char *line = lines[ex->line - 1];
        ck_assert(!bad[ex->line - 1]);
        cJSON *whole = cJSON_Parse(line);
        ck_assert_ptr_nonnull(whole);
        ck_assert_uint_eq(ex->n_fields + 1, (uint32_t)cJSON_GetArraySize(whole));
        for (uint32_t k = 0; k < ex->n_fields; k++) {
            const char *json = ex->fields[k].json;
            cJSON *alone = cJSON_Parse(json);
            ck_assert_msg(alone, "line %zu: field %s text '%s' is not JSON", (size_t)ex->line,
                          ex->fields[k].key, json);
            ck_assert_msg(cJSON_Compare(alone, cJSON_GetObjectItemCaseSensitive(
                                                   whole, ex->fields[k].key),
                                        1),
                          "line %zu: field %s text '%s' differs from the parse", (size_t)ex->line,
                          ex->fields[k].key, json);
            ck_assert(json[0] > ' ' && json[strlen(json) - 1] > ' ');
            cJSON_Delete(alone);
        }
        cJSON_Delete(whole);
    }
    grpo_dataset_free(ds);
}
END_TEST

/* Finding each field's text and checking duplicate keys was quadratic in the number of keys
 * (minutes for 100k); now a 100k-key line loads in milliseconds. The bound is generous. */
START_TEST(a_line_with_100k_keys_loads_fast) {
    enum { KEYS = 100000 };
    size_t cap = (size_t)KEYS * 24 + 64, len = 0;
    char *text = malloc(cap);
    len += (size_t)sprintf(text + len, "{\"prompt\": \"p\"");
    for (int i = 0; i < KEYS; i++) len += (size_t)sprintf(text + len, ", \"k%d\": %d", i, i);
    sprintf(text + len, "}\n");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    grpo_dataset *ds;
    grpo_error err;
    ck_assert_msg(load_text(text, NULL, &ds, &err) == GRPO_OK, "%s", err.message);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("a line of %d keys loaded in %.3f s\n", KEYS + 1, s);
    ck_assert_double_lt(s, 5.0);
    ck_assert_uint_eq(ds->examples[0].n_fields, KEYS);
    ck_assert_str_eq(ds->examples[0].fields[KEYS - 1].key, "k99999");
    ck_assert_str_eq(ds->examples[0].fields[KEYS - 1].json, "99999");
    grpo_dataset_free(ds);
    /* a duplicate among them is still found, as fast */
    sprintf(text + len, ", \"k5\": 0}\n");
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(load_text(text, NULL, &ds, &err), GRPO_ERR_INVALID);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    ck_assert_double_lt(s, 5.0);
    ck_assert_msg(strstr(err.message, ":1: duplicate key \"k5\""), "%s", err.message);
    free(text);
}
END_TEST

/* ---- data.prompt_field --------------------------------------------------------------------- */

START_TEST(prompt_field_names_the_prompt_key) {
    const char *text = "{\"question\": \"What is 2+2?\", \"prompt\": \"not this\", \"answer\": 4}\n"
                       "{\"question\": [{\"role\": \"user\", \"content\": \"Hi\"}]}\n"
                       "{\"conversations\": [{\"content\": \"q\"}, {\"content\": \"a\"}]}\n";
    grpo_dataset *ds;
    grpo_error err;
    grpo_dataset_options opt = {.prompt_field = "question"};
    ck_assert_msg(load_text(text, &opt, &ds, &err) == GRPO_OK, "%s", err.message);
    ck_assert_uint_eq(ds->n, 3);
    ck_assert_str_eq(ds->examples[0].prompt, "What is 2+2?");
    ck_assert_str_eq(field(&ds->examples[0], "prompt"), "\"not this\""); /* just another field */
    ck_assert_str_eq(field(&ds->examples[0], "answer"), "4");
    ck_assert_ptr_null(field(&ds->examples[0], "question"));
    ck_assert_str_eq(ds->examples[1].messages[0].content, "Hi");
    ck_assert_str_eq(ds->examples[2].response, "a");
    grpo_dataset_free(ds);
    /* errors name the configured key */
    ck_assert_int_eq(load_text("{\"prompt\": \"p\"}\n", &opt, &ds, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, ":1: expected a \"question\" (a string or a list of "
                                      "messages) or a \"conversations\" list"),
                  "%s", err.message);
    ck_assert_int_eq(load_text("{\"question\": 1}\n", &opt, &ds, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, ":1: \"question\": expected a string or a list"), "%s",
                  err.message);
}
END_TEST

/* The run file's data.prompt_field reaches the loader (it was declared but ignored). */
START_TEST(run_file_prompt_field_is_used) {
    grpo_run r;
    memset(&r, 0, sizeof r);
    grpo_diag d = {0};
    ck_assert_int_eq(grpo_run_config_load_string(&r.cfg, "t.ini", "[data]\nprompt_field = q\n",
                                                 NULL, 0, &d, NULL),
                     GRPO_OK);
    grpo_diag_free(&d);
    const char *path = GRPO_BINARY_DIR "/test_dataset_run.jsonl";
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs("{\"q\": \"asked under q\", \"answer\": \"4\"}\n", f);
    fclose(f);
    grpo_dataset *ds = NULL;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_msg(grpo_run_dataset(&r, path, &ds, &err) == GRPO_OK, "%s", err.message);
    ck_assert_str_eq(ds->examples[0].prompt, "asked under q");
    grpo_dataset_free(ds);
    remove(path);
    grpo_run_config_free(&r.cfg);
}
END_TEST

/* ---- \u0000 --------------------------------------------------------------------------------- */

/* cJSON decodes \u0000 to a NUL, which silently ended the C text there ("ab\u0000cd" became
 * "ab"). Such a line is refused, naming the key, wherever the escape is; an escaped backslash
 * followed by "u0000" is ordinary text and kept. */
START_TEST(nul_escape_is_refused_naming_the_key) {
    static const struct {
        const char *line, *expect;
    } cases[] = {
        {"{\"prompt\": \"ab\\u0000cd\"}",
         "\"prompt\": \\u0000 (a NUL character) in the value: text cannot hold NUL"},
        {"{\"prompt\": [{\"role\": \"user\", \"content\": \"x\\u0000\"}]}", "\"prompt\": \\u0000"},
        {"{\"conversations\": [{\"content\": \"q\"}, {\"content\": \"\\u0000\"}]}",
         "\"conversations\": \\u0000"},
        {"{\"prompt\": \"p\", \"answer\": [\"4\\u0000\"]}", "\"answer\": \\u0000"},
        {"{\"prompt\": \"p\", \"a\\u0000b\": 1}",
         "a key near column 17 holds \\u0000 (a NUL character)"},
        {"{\"prompt\": \"p\\\\\\u0000\"}", "\"prompt\": \\u0000"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        grpo_error err;
        ck_assert_int_eq(load_with_line2(cases[i].line, &err), GRPO_ERR_INVALID);
        ck_assert_msg(strstr(err.message, "test_dataset_line2.jsonl:2: "), "case %zu: %s", i,
                      err.message);
        ck_assert_msg(strstr(err.message, cases[i].expect), "case %zu: '%s' lacks '%s'", i,
                      err.message, cases[i].expect);
    }
    /* "\\u0000" is a backslash then u0000: kept as written; in skip mode a NUL line is skipped */
    grpo_dataset *ds;
    grpo_error err;
    grpo_dataset_options opt = {.skip_bad_lines = 1};
    ck_assert_msg(load_text("{\"prompt\": \"a\\\\u0000b\"}\n{\"prompt\": \"a\\u0000b\"}\n", &opt,
                            &ds, &err) == GRPO_OK,
                  "%s", err.message);
    ck_assert_uint_eq(ds->n, 1);
    ck_assert_uint_eq(ds->n_skipped, 1);
    ck_assert_str_eq(ds->examples[0].prompt, "a\\u0000b");
    ck_assert_ptr_nonnull(strstr(ds->first_skip, ":2: \"prompt\": \\u0000"));
    grpo_dataset_free(ds);
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

/* Longer permutations, from tools/make_shuffle_fixture.py: the algorithm as dataset.h states it,
 * written independently in Python (a 3-element order cannot tell Fisher-Yates from Sattolo). */
START_TEST(shuffle_matches_the_documented_algorithm) {
    FILE *f = fopen(FIXDIR "/shuffle.json", "rb");
    ck_assert_ptr_nonnull(f);
    char buf[8192];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    cJSON *root = cJSON_Parse(buf), *c;
    ck_assert_ptr_nonnull(root);
    int cases = 0;
    cJSON_ArrayForEach(c, root) {
        size_t n = (size_t)cJSON_GetObjectItem(c, "n")->valuedouble;
        uint64_t seed = strtoull(cJSON_GetObjectItem(c, "seed")->valuestring, NULL, 10);
        int epoch = cJSON_GetObjectItem(c, "epoch")->valueint;
        const cJSON *perm = cJSON_GetObjectItem(c, "perm");
        grpo_data_order o;
        grpo_error err;
        grpo_error_init(&err);
        ck_assert_int_eq(grpo_data_order_init(&o, n, seed, 1, &err), GRPO_OK);
        for (size_t i = 0; i < (size_t)epoch * n; i++) grpo_data_order_next(&o);
        for (size_t i = 0; i < n; i++) {
            size_t want = (size_t)cJSON_GetArrayItem(perm, (int)i)->valueint;
            ck_assert_msg(grpo_data_order_next(&o) == want,
                          "n=%zu seed=%llu epoch %d: position %zu differs", n,
                          (unsigned long long)seed, epoch, i);
        }
        grpo_data_order_free(&o);
        cases++;
    }
    ck_assert_int_ge(cases, 5);
    cJSON_Delete(root);
}
END_TEST

/* A uniform permutation has on average one fixed point (whatever n); a Sattolo shuffle (j < i)
 * has none. 4000 shuffles of 50: the mean's standard deviation is about 1/sqrt(4000) = 0.016. */
START_TEST(shuffles_have_one_fixed_point_on_average) {
    enum { N = 50, SEEDS = 4000 };
    long fixed = 0;
    for (uint64_t seed = 0; seed < SEEDS; seed++) {
        grpo_data_order o;
        grpo_error err;
        grpo_error_init(&err);
        ck_assert_int_eq(grpo_data_order_init(&o, N, seed * 7919 + 1, 1, &err), GRPO_OK);
        for (size_t i = 0; i < N; i++) fixed += grpo_data_order_next(&o) == i;
        grpo_data_order_free(&o);
    }
    double mean = (double)fixed / SEEDS;
    ck_assert_msg(mean > 0.9 && mean < 1.1, "mean fixed points per shuffle %.3f, expected ~1",
                  mean);
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
    tcase_add_test(tc, control_bytes_are_refused_and_a_bom_is_skipped);
    tcase_add_test(tc, field_text_always_agrees_with_the_parse);
    tcase_add_test(tc, a_line_with_100k_keys_loads_fast);
    tcase_add_test(tc, prompt_field_names_the_prompt_key);
    tcase_add_test(tc, run_file_prompt_field_is_used);
    tcase_add_test(tc, nul_escape_is_refused_naming_the_key);
    tcase_add_test(tc, splitmix64_matches_the_published_sequence);
    tcase_add_test(tc, shuffle_of_three_is_hand_computable);
    tcase_add_test(tc, shuffle_matches_the_documented_algorithm);
    tcase_add_test(tc, shuffles_have_one_fixed_point_on_average);
    tcase_add_test(tc, shuffle_is_deterministic_per_seed_and_a_permutation_per_epoch);
    tcase_add_test(tc, cursor_restore_continues_across_an_epoch_boundary);
    tcase_add_test(tc, truncation_left_versus_skip);
    tcase_add_test(tc, prepare_renders_tokenizes_and_applies_the_policy);
    tcase_set_timeout(tc, 60); /* the 100k-key line asserts its own bound; ASan is slower */
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
