/* test_chat_template.c — chat templates rendered by our Jinja interpreter must equal, byte for
 * byte, what transformers' apply_chat_template renders (tests/fixtures/template/cases.json, made
 * by tools/make_template_fixtures.py), and unsupported constructs must fail naming their line.
 * The MiniMind templates (sources "shared:...", read from $GRPO_SHARED_DIR, default ../shared)
 * are the cases tagged "shared": `test_chat_template --shared`, ctest test_chat_template_shared
 * (tests/test_skip.h: skipped without the data, a failure under CI). */
#include <check.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_skip.h"
#include "text/chat_template.h"

#define FIXDIR GRPO_SOURCE_DIR "/tests/fixtures/template"

static cJSON *fixture;

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

static cJSON *load_fixture(void) {
    if (!fixture) {
        char *text = slurp(FIXDIR "/cases.json");
        ck_assert_msg(text,
                      "cannot read " FIXDIR "/cases.json (run tools/make_template_fixtures.py)");
        fixture = cJSON_Parse(text);
        free(text);
        ck_assert_msg(fixture, "cases.json is not valid JSON");
    }
    return fixture;
}

/* Compiles the template a fixture names (shared data: main checked that it is here). */
static grpo_chat_template *template_for(const cJSON *t) {
    const char *src = cJSON_GetObjectItem(t, "source")->valuestring;
    char path[1024];
    grpo_chat_template *tpl = NULL;
    grpo_error err;
    grpo_error_init(&err);
    if (strcmp(src, "builtin:chatml") == 0) {
        ck_assert_int_eq(
            grpo_chat_template_compile(grpo_chat_template_chatml(), "chatml", &tpl, &err), GRPO_OK);
        return tpl;
    }
    if (strncmp(src, "shared:", 7) == 0) {
        snprintf(path, sizeof path, "%s/%s", test_shared_dir(), src + 7);
    } else {
        ck_assert(strncmp(src, "fixture:", 8) == 0);
        snprintf(path, sizeof path, "%s/%s", FIXDIR, src + 8);
    }
    int rc = grpo_chat_template_load(path, &tpl, &err);
    ck_assert_msg(rc == GRPO_OK, "compiling %s: %s", path, err.message);
    return tpl;
}

/* Options for one case; strings point into the returned scratch (freed by free_opts). */
typedef struct case_opts {
    grpo_chat_options opt;
    grpo_chat_var vars[8];
    char *owned[10];
    int n_owned;
} case_opts;

static void make_opts(case_opts *co, const cJSON *tinfo, const cJSON *c) {
    memset(co, 0, sizeof *co);
    co->opt.add_generation_prompt = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt"));
    const cJSON *bos = cJSON_GetObjectItem(tinfo, "bos_token"),
                *eos = cJSON_GetObjectItem(tinfo, "eos_token");
    if (cJSON_IsString(bos)) co->opt.bos_token = bos->valuestring;
    if (cJSON_IsString(eos)) co->opt.eos_token = eos->valuestring;
    const cJSON *vars = cJSON_GetObjectItem(c, "vars"), *v;
    cJSON_ArrayForEach(v, vars) {
        char *json = cJSON_PrintUnformatted(v);
        co->owned[co->n_owned++] = json;
        co->vars[co->opt.n_vars].name = v->string;
        co->vars[co->opt.n_vars++].json = json;
    }
    co->opt.vars = co->vars;
    const cJSON *tools = cJSON_GetObjectItem(c, "tools");
    if (tools) co->opt.tools_json = co->owned[co->n_owned++] = cJSON_PrintUnformatted(tools);
}

static void free_opts(case_opts *co) {
    for (int i = 0; i < co->n_owned; i++) free(co->owned[i]);
}

/* True when every message has exactly string role and string content: then the grpo_message
 * API must give the same result as the JSON API. */
static size_t as_messages(const cJSON *conv, grpo_message *out, size_t cap) {
    size_t n = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, conv) {
        const cJSON *role = cJSON_GetObjectItem(m, "role"),
                    *content = cJSON_GetObjectItem(m, "content");
        if (n == cap || cJSON_GetArraySize(m) != 2 || !cJSON_IsString(role) ||
            !cJSON_IsString(content))
            return 0;
        out[n++] = (grpo_message){sizeof(grpo_message), role->valuestring, content->valuestring};
    }
    return n;
}

/* Every template of the fixture whose source is ../shared's (shared 1) or not (shared 0). */
static void templates_match(int shared) {
    cJSON *fx = load_fixture();
    const cJSON *templates = cJSON_GetObjectItem(fx, "templates"),
                *cases = cJSON_GetObjectItem(fx, "cases");
    const cJSON *convs = cJSON_GetObjectItem(fx, "conversations"), *t;
    int total_fail = 0, n_templates = 0;
    cJSON_ArrayForEach(t, templates) {
        const char *name = cJSON_GetObjectItem(t, "name")->valuestring;
        const char *src = cJSON_GetObjectItem(t, "source")->valuestring;
        if ((strncmp(src, "shared:", 7) == 0) != shared) continue;
        grpo_chat_template *tpl = template_for(t);
        n_templates++;
        int n = 0, ok = 0;
        const cJSON *c;
        cJSON_ArrayForEach(c, cases) {
            if (strcmp(cJSON_GetObjectItem(c, "template")->valuestring, name) != 0) continue;
            n++;
            const char *conv_id = cJSON_GetObjectItem(c, "conversation")->valuestring;
            const cJSON *conv = cJSON_GetObjectItem(convs, conv_id);
            char *msgs = cJSON_PrintUnformatted(conv);
            case_opts co;
            make_opts(&co, t, c);
            grpo_error err;
            grpo_error_init(&err);
            char *out = NULL;
            int rc = grpo_chat_template_render_json(tpl, msgs, &co.opt, &out, &err);
            const cJSON *expected = cJSON_GetObjectItem(c, "expected");
            int good;
            if (expected) {
                good = rc == GRPO_OK && strcmp(out, expected->valuestring) == 0;
                if (good) { /* the role/content API must agree */
                    grpo_message m[16];
                    size_t nm = as_messages(conv, m, 16);
                    if (nm) {
                        char *out2 = NULL;
                        good = grpo_chat_template_render(tpl, m, nm, &co.opt, &out2, &err) ==
                                   GRPO_OK &&
                               strcmp(out2, out) == 0;
                        free(out2);
                    }
                }
                if (!good)
                    fprintf(
                        stderr,
                        "MISMATCH %s/%s agp=%d: rc=%d %s\n--- got ---\n%s\n--- expected ---\n%s\n",
                        name, conv_id, co.opt.add_generation_prompt, rc, rc ? err.message : "",
                        out ? out : "", expected->valuestring);
            } else {
                good = rc != GRPO_OK && strstr(err.message, "undefined") != NULL;
                if (!good)
                    fprintf(stderr, "EXPECTED AN ERROR %s/%s: rc=%d %s\n", name, conv_id, rc,
                            err.message);
            }
            ok += good;
            free(out);
            free(msgs);
            free_opts(&co);
        }
        printf("template %-17s %3d/%3d cases byte-identical to transformers\n", name, ok, n);
        total_fail += n - ok;
        ck_assert_int_gt(n, 0);
        grpo_chat_template_free(tpl);
    }
    ck_assert_int_gt(n_templates, 0);
    ck_assert_int_eq(total_fail, 0);
}

START_TEST(templates_match_transformers_byte_for_byte) { templates_match(0); }
END_TEST

START_TEST(shared_templates_match_transformers_byte_for_byte) { templates_match(1); }
END_TEST

START_TEST(snippets_match_jinja2) {
    cJSON *fx = load_fixture();
    const cJSON *snips = cJSON_GetObjectItem(fx, "snippets"), *s;
    int n = 0, ok = 0;
    cJSON_ArrayForEach(s, snips) {
        const char *name = cJSON_GetObjectItem(s, "name")->valuestring;
        grpo_chat_template *tpl = NULL;
        grpo_error err;
        grpo_error_init(&err);
        int rc = grpo_chat_template_compile(cJSON_GetObjectItem(s, "template")->valuestring, name,
                                            &tpl, &err);
        char *out = NULL;
        if (rc == GRPO_OK) {
            const cJSON *vars = cJSON_GetObjectItem(s, "vars"), *v;
            grpo_chat_var gv[8];
            char *owned[8];
            size_t nv = 0;
            cJSON_ArrayForEach(v, vars) {
                owned[nv] = cJSON_PrintUnformatted(v);
                gv[nv] = (grpo_chat_var){v->string, owned[nv]};
                nv++;
            }
            grpo_chat_options opt = {.vars = gv, .n_vars = nv};
            rc = grpo_chat_template_render(tpl, NULL, 0, &opt, &out, &err);
            for (size_t i = 0; i < nv; i++) free(owned[i]);
        }
        const cJSON *expected = cJSON_GetObjectItem(s, "expected");
        int good =
            expected ? rc == GRPO_OK && strcmp(out, expected->valuestring) == 0 : rc != GRPO_OK;
        if (!good)
            fprintf(stderr, "SNIPPET %s: rc=%d %s\n  got      [%s]\n  expected [%s]\n", name, rc,
                    rc ? err.message : "", out ? out : "",
                    expected ? expected->valuestring
                             : cJSON_GetObjectItem(s, "error")->valuestring);
        n++, ok += good;
        free(out);
        grpo_chat_template_free(tpl);
    }
    printf("snippets: %d/%d match jinja2\n", ok, n);
    ck_assert_int_eq(ok, n);
}
END_TEST

/* Compiles (and if that works renders) text; returns the status and leaves the message in err. */
static int try_template(const char *text, grpo_error *err) {
    grpo_chat_template *tpl = NULL;
    grpo_error_init(err);
    int rc = grpo_chat_template_compile(text, "t.jinja", &tpl, err);
    if (rc != GRPO_OK) return rc;
    char *out = NULL;
    grpo_message m = {sizeof m, "user", "hi"};
    rc = grpo_chat_template_render(tpl, &m, 1, NULL, &out, err);
    free(out);
    grpo_chat_template_free(tpl);
    return rc;
}

START_TEST(unsupported_constructs_name_themselves_and_their_line) {
    grpo_error err;
    ck_assert_int_eq(try_template("a\nb\n{% call f() %}x{% endcall %}", &err),
                     GRPO_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "t.jinja:3: unsupported construct '{% call %}'"));
    ck_assert_int_eq(try_template("{% filter upper %}x{% endfilter %}", &err),
                     GRPO_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "t.jinja:1: unsupported construct '{% filter %}'"));
    ck_assert_int_eq(try_template("{% macro f(*a) %}{% endmacro %}", &err), GRPO_ERR_INVALID);
    ck_assert_int_eq(try_template("{{ x }}\n{{ messages|batch(2) }}", &err), GRPO_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "t.jinja:2: unsupported filter 'batch'"));
    ck_assert_int_eq(try_template("\n\n{% if x is escaped %}{% endif %}", &err),
                     GRPO_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "t.jinja:3: unsupported test 'escaped'"));
    ck_assert_int_eq(try_template("{% include 'other.jinja' %}", &err), GRPO_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "include"));
    ck_assert_int_eq(try_template("\n{{ '%s' % 'x' }}", &err), GRPO_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "t.jinja:2:"));
    ck_assert_int_eq(try_template("{{ messages[0].content.zfill(3) }}", &err),
                     GRPO_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "zfill"));
}
END_TEST

START_TEST(syntax_and_render_errors_have_lines) {
    grpo_error err;
    ck_assert_int_eq(try_template("{% if true %}\nno end", &err), GRPO_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "endif"));
    ck_assert_int_eq(try_template("\n\n{{ (1 + }}", &err), GRPO_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "t.jinja:3:"));
    ck_assert_int_eq(
        try_template("{% for m in messages %}\n{{ raise_exception('no ' ~ m.role) }}{% endfor %}",
                     &err),
        GRPO_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "t.jinja:2: raise_exception: no user"));
    ck_assert_int_eq(try_template("{{ undefined_thing + 'x' }}", &err), GRPO_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "'undefined_thing' is undefined"));
    ck_assert_int_eq(try_template("{% endfor %}", &err), GRPO_ERR_INVALID);
    ck_assert_int_eq(try_template("{# never closed", &err), GRPO_ERR_INVALID);
    ck_assert_int_eq(try_template("{{ 'unterminated }}", &err), GRPO_ERR_INVALID);
    ck_assert_int_eq(try_template("ok\nbad \xc3\x28 byte", &err), GRPO_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "t.jinja:2: invalid UTF-8 at byte 8"));
}
END_TEST

/* A macro calling itself without end overflowed the stack; now it stops at 100 nested calls with
 * an error naming the macro, directly or through another macro, and bounded recursion renders. */
START_TEST(recursive_macros_stop_at_the_depth_limit) {
    grpo_error err;
    ck_assert_int_eq(try_template("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}\n{{ f(0) }}", &err),
                     GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "t.jinja:1: macro 'f' called more than 100 deep"), "%s",
                  err.message);
    /* a(0) b(1) a(2) ... : the 101st call, at depth 100, is a's */
    ck_assert_int_eq(try_template("{% macro a(n) %}{{ b(n) }}{% endmacro %}\n"
                                  "{% macro b(n) %}{{ a(n) }}{% endmacro %}\n{{ a(0) }}",
                                  &err),
                     GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "t.jinja:2: macro 'a' called more than 100 deep"), "%s",
                  err.message);
    /* 100 nested calls are allowed: f(99) down to f(0) */
    grpo_chat_template *tpl = NULL;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_chat_template_compile("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}"
                                                "{% endif %}{{ n }},{% endmacro %}{{ f(99) }}",
                                                "t", &tpl, &err),
                     GRPO_OK);
    char *out = NULL, want[512] = "";
    ck_assert_msg(grpo_chat_template_render(tpl, NULL, 0, NULL, &out, &err) == GRPO_OK, "%s",
                  err.message);
    for (int i = 0; i < 100; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%d,", i);
    ck_assert_str_eq(out, want);
    free(out);
    grpo_chat_template_free(tpl);
    /* fewer calls, each nesting deeply: the run depth (blocks and expressions) stops it */
    char text[4096] = "{% macro deep(n) %}";
    for (int i = 0; i < 30; i++) strcat(text, "{% if true %}");
    strcat(text, "{{ deep(n + 1) }}");
    for (int i = 0; i < 30; i++) strcat(text, "{% endif %}");
    strcat(text, "{% endmacro %}{{ deep(0) }}");
    ck_assert_int_eq(try_template(text, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "t.jinja:1: macro 'deep': rendering nested more than 1000 "
                                      "levels deep"),
                  "%s", err.message);
}
END_TEST

/* A long operator chain evaluates as deep as it is long: 20000 terms overflowed the stack. */
START_TEST(long_operator_chain_stops_at_the_depth_limit) {
    enum { TERMS = 20000 };
    char *text = malloc(TERMS * 2 + 16), *p = text;
    p += sprintf(p, "\n{{ 1");
    for (int i = 1; i < TERMS; i++) p += sprintf(p, "+1");
    sprintf(p, " }}");
    grpo_error err;
    ck_assert_int_eq(try_template(text, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "t.jinja:2: rendering nested more than 1000 levels deep"),
                  "%s", err.message);
    free(text);
}
END_TEST

START_TEST(extra_variables_must_be_json) {
    grpo_chat_template *tpl = NULL;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_chat_template_compile("{{ enable_thinking }}", "t", &tpl, &err), GRPO_OK);
    grpo_chat_var v = {"enable_thinking", "flase"};
    grpo_chat_options opt = {.vars = &v, .n_vars = 1};
    char *out = NULL;
    ck_assert_int_eq(grpo_chat_template_render(tpl, NULL, 0, &opt, &out, &err), GRPO_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "enable_thinking"));
    v.json = "false";
    ck_assert_int_eq(grpo_chat_template_render(tpl, NULL, 0, &opt, &out, &err), GRPO_OK);
    ck_assert_str_eq(out, "False");
    free(out);
    ck_assert_int_eq(grpo_chat_template_render_json(tpl, "{\"role\": 1}", &opt, &out, &err),
                     GRPO_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "expected a JSON list"));
    grpo_chat_template_free(tpl);
}
END_TEST

START_TEST(simple_format_fills_placeholders) {
    grpo_message m[2] = {{sizeof(grpo_message), "system", "Be brief."},
                         {sizeof(grpo_message), "user", "2+2? {x}"}};
    grpo_error err;
    grpo_error_init(&err);
    char *out = NULL;
    ck_assert_int_eq(grpo_chat_format_simple("S:{system}\\nU:{user}\\n{{A}}:", m, 2, &out, &err),
                     GRPO_OK);
    ck_assert_str_eq(out, "S:Be brief.\nU:2+2? {x}\n{A}:");
    free(out);
    ck_assert_int_eq(grpo_chat_format_simple("[{system}]{user}", m + 1, 1, &out, &err), GRPO_OK);
    ck_assert_str_eq(out, "[]2+2? {x}");
    free(out);
}
END_TEST

START_TEST(simple_format_rejects_what_it_cannot_express) {
    grpo_message m[3] = {{sizeof(grpo_message), "user", "a"},
                         {sizeof(grpo_message), "assistant", "b"},
                         {sizeof(grpo_message), "user", "c"}};
    grpo_error err;
    grpo_error_init(&err);
    char *out = NULL;
    ck_assert_int_eq(grpo_chat_format_simple("{user}", m, 3, &out, &err), GRPO_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "more than one user message"));
    ck_assert_int_eq(grpo_chat_format_simple("{question}", m, 1, &out, &err), GRPO_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "bad placeholder at byte 0"));
    ck_assert_int_eq(grpo_chat_format_simple("x}", m, 1, &out, &err), GRPO_ERR_INVALID);
    grpo_message tool = {sizeof(grpo_message), "tool", "r"};
    ck_assert_int_eq(grpo_chat_format_simple("{user}", &tool, 1, &out, &err), GRPO_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "role 'tool'"));
}
END_TEST

START_TEST(load_reads_tokenizer_config_chat_template) {
    const char *path = GRPO_BINARY_DIR "/test_chat_template_config.json";
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"eos_token\": \"</s>\", \"chat_template\": \"{{ messages[0]['content'] }}|{{ "
          "eos_token }}\"}",
          f);
    fclose(f);
    grpo_chat_template *tpl = NULL;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_chat_template_load(path, &tpl, &err), GRPO_OK);
    grpo_message m = {sizeof m, "user", "hey"};
    grpo_chat_options opt = {.eos_token = "</s>"};
    char *out = NULL;
    ck_assert_int_eq(grpo_chat_template_render(tpl, &m, 1, &opt, &out, &err), GRPO_OK);
    ck_assert_str_eq(out, "hey|</s>");
    free(out);
    grpo_chat_template_free(tpl);
    /* the list form: [{name, template}], "default" is used */
    f = fopen(path, "w");
    fputs("{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}, "
          "{\"name\": \"default\", \"template\": \"D{{ messages|length }}\"}]}",
          f);
    fclose(f);
    ck_assert_int_eq(grpo_chat_template_load(path, &tpl, &err), GRPO_OK);
    ck_assert_int_eq(grpo_chat_template_render(tpl, &m, 1, &opt, &out, &err), GRPO_OK);
    ck_assert_str_eq(out, "D1");
    free(out);
    grpo_chat_template_free(tpl);
    f = fopen(path, "w");
    fputs("{\"chat_template\": 3}", f);
    fclose(f);
    ck_assert_int_eq(grpo_chat_template_load(path, &tpl, &err), GRPO_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "expected \"chat_template\" to be a string"));
    remove(path);
    ck_assert_int_eq(grpo_chat_template_load(GRPO_BINARY_DIR "/no/such/file.jinja", &tpl, &err),
                     GRPO_ERR_IO);
}
END_TEST

START_TEST(renderer_adapter_uses_template_or_format) {
    grpo_chat_template *tpl = NULL;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_chat_template_compile(grpo_chat_template_chatml(), "chatml", &tpl, &err),
                     GRPO_OK);
    grpo_message m = {sizeof m, "user", "hi"};
    grpo_chat_renderer r = {.tpl = tpl, .opt = {.add_generation_prompt = 1}};
    char *out = NULL;
    ck_assert_int_eq(grpo_chat_render_messages(&r, &m, 1, &out, &err), GRPO_OK);
    ck_assert_str_eq(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    free(out);
    r.format = "Q: {user}\\nA:";
    ck_assert_int_eq(grpo_chat_render_messages(&r, &m, 1, &out, &err), GRPO_OK);
    ck_assert_str_eq(out, "Q: hi\nA:");
    free(out);
    grpo_chat_template_free(tpl);
}
END_TEST

int main(int argc, char **argv) {
    test_tags tags = test_shared_tags(argc, argv, "data/minimind3");
    Suite *s = suite_create("chat_template");
    TCase *tc = tcase_create("render");
    tcase_add_test(tc, templates_match_transformers_byte_for_byte);
    tcase_add_test(tc, snippets_match_jinja2);
    tcase_add_test(tc, unsupported_constructs_name_themselves_and_their_line);
    tcase_add_test(tc, syntax_and_render_errors_have_lines);
    tcase_add_test(tc, recursive_macros_stop_at_the_depth_limit);
    tcase_add_test(tc, long_operator_chain_stops_at_the_depth_limit);
    tcase_add_test(tc, extra_variables_must_be_json);
    tcase_add_test(tc, simple_format_fills_placeholders);
    tcase_add_test(tc, simple_format_rejects_what_it_cannot_express);
    tcase_add_test(tc, load_reads_tokenizer_config_chat_template);
    tcase_add_test(tc, renderer_adapter_uses_template_or_format);
    suite_add_tcase(s, tc);
    TCase *ts = tcase_create("shared"); /* ../shared's MiniMind templates */
    tcase_set_tags(ts, "shared");
    tcase_add_test(ts, shared_templates_match_transformers_byte_for_byte);
    suite_add_tcase(s, ts);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_tagged(sr, NULL, NULL, tags.include, tags.exclude, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    cJSON_Delete(fixture);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
