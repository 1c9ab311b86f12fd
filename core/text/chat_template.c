/* chat_template.c — the public chat-template API over the Jinja interpreter, the built-in
 * ChatML template and the plain-format fallback. */
#include "text/chat_template.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/files.h"
#include "text/jinja/jinja.h"

struct grpo_chat_template {
    jtemplate t;
};

static const char chatml[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' "
    "}}{% endif %}";

const char *grpo_chat_template_chatml(void) { return chatml; }

int grpo_chat_template_compile(const char *text, const char *name, grpo_chat_template **out,
                               grpo_error *err) {
    *out = NULL;
    grpo_chat_template *tpl = calloc(1, sizeof *tpl);
    if (!tpl) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory compiling a chat template");
    const char *nm = name ? name : "<template>";
    tpl->t.name = jarena_strdup(&tpl->t.arena, nm, strlen(nm));
    grpo_error why;
    grpo_error_init(&why);
    size_t len = strlen(text), bad = ju8_invalid_at(text, len);
    if (bad < len) {
        int line = 1;
        for (size_t i = 0; i < bad; i++) line += text[i] == '\n';
        grpo_chat_template_free(tpl);
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "chat template %s:%d: invalid UTF-8 at byte %zu", nm, line, bad + 1);
    }
    int32_t rc = jinja_parse(&tpl->t, text, len, &why);
    if (rc != GRPO_OK) {
        grpo_chat_template_free(tpl);
        return grpo_error_set(err, rc, "chat template %s", why.message);
    }
    *out = tpl;
    return GRPO_OK;
}

void grpo_chat_template_free(grpo_chat_template *tpl) {
    if (!tpl) return;
    jarena_free(&tpl->t.arena);
    free(tpl);
}

/* In a list of {"name", "template"} (tokenizer_config.json's named templates), the template
 * text called name, or NULL. */
static const cJSON *named_template(const cJSON *list, const char *name) {
    const cJSON *item;
    cJSON_ArrayForEach(item, list) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(item, "name");
        if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
            return cJSON_GetObjectItemCaseSensitive(item, "template");
    }
    return NULL;
}

int grpo_chat_template_load(const char *path, grpo_chat_template **out, grpo_error *err) {
    size_t len;
    *out = NULL;
    char *text = NULL;
    int rc = grpo_read_file(path, &text, &len, err);
    if (rc) return rc;
    if (strlen(text) != len) {
        free(text);
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: contains a NUL byte", path);
    }
    size_t pl = strlen(path);
    if (pl >= 5 && strcmp(path + pl - 5, ".json") == 0) {
        cJSON *root = cJSON_Parse(text);
        const cJSON *ct = root ? cJSON_GetObjectItemCaseSensitive(root, "chat_template") : NULL;
        if (cJSON_IsArray(ct)) ct = named_template(ct, "default");
        if (!root)
            rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: not valid JSON", path);
        else if (!cJSON_IsString(ct))
            rc = grpo_error_set(err, GRPO_ERR_INVALID,
                                "%s: expected \"chat_template\" to be a string or a list of "
                                "{name, template} with a \"default\" one",
                                path);
        else
            rc = grpo_chat_template_compile(ct->valuestring, path, out, err);
        cJSON_Delete(root);
    } else
        rc = grpo_chat_template_compile(text, path, out, err);
    free(text);
    return rc;
}

/* Sets name = JSON value in globals; returns 0 with err set when the JSON is bad. */
static int set_json_var(jarena *a, jdict *g, const char *name, const char *json, grpo_error *err) {
    jv v;
    grpo_error why;
    grpo_error_init(&why);
    if (jv_from_json(a, json, strlen(json), &v, &why) != GRPO_OK) {
        grpo_error_set(err, GRPO_ERR_INVALID, "chat template variable %s: bad JSON value: %s", name,
                       why.message);
        return 0;
    }
    jdict_set(a, g, jv_cstr(name), v);
    return 1;
}

/* Builds the globals transformers passes next to the messages. */
static int make_globals(jarena *a, jv messages, const grpo_chat_options *opt, jdict **out,
                        grpo_error *err) {
    static const grpo_chat_options none = {0};
    if (!opt) opt = &none;
    jdict *g = jv_dict_new(a, JV_DICT).u.dict;
    jdict_set(a, g, jv_cstr("messages"), messages);
    jdict_set(a, g, jv_cstr("tools"), jv_none());
    jdict_set(a, g, jv_cstr("documents"), jv_none());
    jdict_set(a, g, jv_cstr("add_generation_prompt"), jv_bool(opt->add_generation_prompt));
    if (opt->tools_json && !set_json_var(a, g, "tools", opt->tools_json, err)) return 0;
    if (opt->bos_token) jdict_set(a, g, jv_cstr("bos_token"), jv_cstr(opt->bos_token));
    if (opt->eos_token) jdict_set(a, g, jv_cstr("eos_token"), jv_cstr(opt->eos_token));
    for (size_t i = 0; i < opt->n_vars; i++) {
        if (!opt->vars[i].name || !opt->vars[i].json)
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "chat template variable %zu has no name or value", i),
                   0;
        if (!set_json_var(a, g, opt->vars[i].name, opt->vars[i].json, err)) return 0;
    }
    *out = g;
    return 1;
}

static int render(const grpo_chat_template *tpl, jarena *a, jv messages,
                  const grpo_chat_options *opt, char **out, grpo_error *err) {
    jdict *g;
    if (!make_globals(a, messages, opt, &g, err)) return GRPO_ERR_INVALID;
    jbuf buf = {0};
    grpo_error why;
    grpo_error_init(&why);
    int32_t rc = jinja_render(&tpl->t, a, g, &buf, &why);
    if (rc != GRPO_OK) {
        free(buf.data);
        return grpo_error_set(err, rc, "chat template %s", why.message);
    }
    *out = buf.data;
    return GRPO_OK;
}

int grpo_chat_template_render(const grpo_chat_template *tpl, const grpo_message *messages, size_t n,
                              const grpo_chat_options *opt, char **out, grpo_error *err) {
    *out = NULL;
    jarena a = {0};
    jv list = jv_list_new(&a, n);
    for (size_t i = 0; i < n; i++) {
        jv m = jv_dict_new(&a, JV_DICT);
        if (!messages[i].role) {
            jarena_free(&a);
            return grpo_error_set(err, GRPO_ERR_INVALID, "chat message %zu has no role", i);
        }
        jdict_set(&a, m.u.dict, jv_cstr("role"), jv_cstr(messages[i].role));
        if (messages[i].content)
            jdict_set(&a, m.u.dict, jv_cstr("content"), jv_cstr(messages[i].content));
        jlist_push(&a, list.u.list, m);
    }
    int rc = render(tpl, &a, list, opt, out, err);
    jarena_free(&a);
    return rc;
}

/* transformers' _normalize_chat_messages + _alias_reasoning_fields on one message. */
static jv normalize_message(jarena *a, jv msg) {
    static const char *const reasoning_keys[] = {"reasoning_content", "thinking", "reasoning"};
    jv m = jv_dict_new(a, JV_DICT);
    jv reasoning = jv_none();
    for (int k = 0; k < 3 && reasoning.type == JV_NONE; k++) {
        jv *r = jdict_get_str(msg.u.dict, reasoning_keys[k], strlen(reasoning_keys[k]));
        if (r && r->type != JV_NONE) reasoning = *r;
    }
    if (reasoning.type != JV_NONE) jdict_set(a, m.u.dict, jv_cstr("thinking"), reasoning);
    for (size_t i = 0; i < msg.u.dict->n; i++)
        if (msg.u.dict->vals[i].type != JV_NONE)
            jdict_set(a, m.u.dict, msg.u.dict->keys[i], msg.u.dict->vals[i]);
    if (reasoning.type != JV_NONE) jdict_set(a, m.u.dict, jv_cstr("reasoning_content"), reasoning);
    return m;
}

int grpo_chat_template_render_json(const grpo_chat_template *tpl, const char *messages_json,
                                   const grpo_chat_options *opt, char **out, grpo_error *err) {
    *out = NULL;
    jarena a = {0};
    jv msgs;
    grpo_error why;
    grpo_error_init(&why);
    if (jv_from_json(&a, messages_json, strlen(messages_json), &msgs, &why) != GRPO_OK) {
        jarena_free(&a);
        return grpo_error_set(err, GRPO_ERR_INVALID, "chat messages: bad JSON: %s", why.message);
    }
    if (msgs.type != JV_LIST) {
        jarena_free(&a);
        return grpo_error_set(err, GRPO_ERR_INVALID, "chat messages: expected a JSON list, got %s",
                              jv_type_name(msgs.type));
    }
    for (size_t i = 0; i < msgs.u.list->n; i++) {
        if (msgs.u.list->items[i].type != JV_DICT) {
            const char *type = jv_type_name(msgs.u.list->items[i].type);
            jarena_free(&a);
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "chat message %zu: expected an object, got %s", i, type);
        }
        msgs.u.list->items[i] = normalize_message(&a, msgs.u.list->items[i]);
    }
    int rc = render(tpl, &a, msgs, opt, out, err);
    jarena_free(&a);
    return rc;
}

/* ---- the plain format fallback ------------------------------------------------------------- */
int grpo_chat_format_simple(const char *format, const grpo_message *messages, size_t n, char **out,
                            grpo_error *err) {
    static const char *const roles[3] = {"system", "user", "assistant"};
    const char *content[3] = {"", NULL, ""};
    int seen[3] = {0, 0, 0};
    *out = NULL;
    for (size_t i = 0; i < n; i++) {
        int r = -1;
        for (int k = 0; k < 3; k++)
            if (messages[i].role && strcmp(messages[i].role, roles[k]) == 0) r = k;
        if (r < 0)
            return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                                  "simple chat format: message %zu has role '%s'; expected system, "
                                  "user or assistant",
                                  i, messages[i].role ? messages[i].role : "(null)");
        if (seen[r]++)
            return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                                  "simple chat format: more than one %s message (message %zu); "
                                  "use a chat template for multi-turn prompts",
                                  roles[r], i);
        content[r] = messages[i].content ? messages[i].content : "";
    }
    if (!content[1]) content[1] = "";
    jbuf b = {0};
    for (const char *p = format; *p; p++) {
        if (*p == '\\' && p[1]) {
            p++;
            jbuf_putc(&b, *p == 'n' ? '\n' : *p == 't' ? '\t' : *p);
            if (*p != 'n' && *p != 't' && *p != '\\') {
                free(b.data);
                return grpo_error_set(err, GRPO_ERR_INVALID,
                                      "simple chat format: unknown escape '\\%c' at byte %zu "
                                      "(expected \\n, \\t or \\\\)",
                                      *p, (size_t)(p - format - 1));
            }
        } else if ((*p == '{' && p[1] == '{') || (*p == '}' && p[1] == '}')) {
            jbuf_putc(&b, *p++);
        } else if (*p == '{') {
            const char *close = strchr(p, '}');
            size_t len = close ? (size_t)(close - p - 1) : 0;
            int r = -1;
            for (int k = 0; k < 3 && close; k++)
                if (strlen(roles[k]) == len && memcmp(p + 1, roles[k], len) == 0) r = k;
            if (r < 0) {
                free(b.data);
                return grpo_error_set(err, GRPO_ERR_INVALID,
                                      "simple chat format: bad placeholder at byte %zu: expected "
                                      "{system}, {user}, {assistant}, {{ or }}",
                                      (size_t)(p - format));
            }
            jbuf_puts(&b, content[r]);
            p = close;
        } else if (*p == '}') {
            free(b.data);
            return grpo_error_set(
                err, GRPO_ERR_INVALID,
                "simple chat format: single '}' at byte %zu (write }} for a brace)",
                (size_t)(p - format));
        } else
            jbuf_putc(&b, *p);
    }
    if (!b.data) jbuf_put(&b, "", 0);
    *out = b.data;
    return GRPO_OK;
}

int grpo_chat_render_messages(void *renderer, const grpo_message *messages, size_t n, char **out,
                              grpo_error *err) {
    const grpo_chat_renderer *r = renderer;
    if (r->format) return grpo_chat_format_simple(r->format, messages, n, out, err);
    if (!r->tpl)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "chat renderer has neither a template nor a format");
    return grpo_chat_template_render(r->tpl, messages, n, &r->opt, out, err);
}
