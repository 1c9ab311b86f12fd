/* http_judge.c — the chat-completions judge of builtin.http (http_judge.h). */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "http_judge.h"

/* A growing string; ok turns 0 when an allocation fails. */
typedef struct text_buf {
    char *s;
    size_t len, cap;
    int ok;
} text_buf;

static void put(text_buf *b, const char *p, size_t n) {
    if (!b->ok) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->ok = 0;
            return;
        }
        b->s = s, b->cap = cap;
    }
    memcpy(b->s + b->len, p, n);
    b->len += n;
    b->s[b->len] = 0;
}

/* Length of the placeholder name at p (letters, digits, '_'), 0 when none. */
static size_t name_len(const char *p) {
    size_t n = 0;
    while (isalnum((unsigned char)p[n]) || p[n] == '_') n++;
    return n;
}

/* Checks that every brace of t is {{, }} or a {NAME}; 0, or -1 with why set. */
static int template_check(const char *t, char *why, size_t why_size) {
    for (const char *p = t; *p; p++) {
        if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
            p++;
            continue;
        }
        size_t n = p[0] == '{' ? name_len(p + 1) : 0;
        if (p[0] == '{' && n && p[n + 1] == '}') {
            p += n + 1;
            continue;
        }
        if (p[0] == '{' || p[0] == '}')
            return snprintf(why, why_size, "'%c' at character %zu is not part of a {NAME} "
                            "placeholder (write %c%c for a literal brace)", p[0],
                            (size_t)(p - t) + 1, p[0], p[0]), -1;
    }
    return 0;
}

/* The prompt a judge reads: the last user message of a conversation, else the prompt text. */
static const char *judge_prompt(const grpo_sample *x) {
    for (uint32_t i = x->n_messages; x->messages && i-- > 0;)
        if (x->messages[i].role && strcmp(x->messages[i].role, "user") == 0)
            return x->messages[i].content ? x->messages[i].content : "";
    return x->prompt ? x->prompt : "";
}

/* Appends the value of placeholder name[n] for x; -1 (why set) when the row lacks the field. */
static int put_value(text_buf *b, const grpo_sample *x, const char *name, size_t n, char *why,
                     size_t why_size) {
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)n, name);
    const char *v = strcmp(key, "prompt") == 0       ? judge_prompt(x)
                    : strcmp(key, "completion") == 0 ? (x->completion ? x->completion : "")
                                                     : NULL;
    if (v) return put(b, v, strlen(v)), 0;
    const char *json = grpo_sample_field(x, key);
    if (!json)
        return snprintf(why, why_size, "the row has no field '%s' for the template", key), -1;
    cJSON *j = cJSON_Parse(json);
    if (cJSON_IsString(j)) put(b, j->valuestring, strlen(j->valuestring));
    else put(b, json, strlen(json));
    cJSON_Delete(j);
    return 0;
}

/* The template filled for x (malloc'd), or NULL with why set. */
static char *template_fill(const char *t, const grpo_sample *x, char *why, size_t why_size) {
    text_buf b = {NULL, 0, 0, 1};
    put(&b, "", 0);
    for (const char *p = t; *p && b.ok; p++) {
        size_t n = p[0] == '{' && p[1] != '{' ? name_len(p + 1) : 0;
        if (n) {
            if (put_value(&b, x, p + 1, n, why, why_size) != 0) return free(b.s), NULL;
            p += n + 1;
        } else {
            put(&b, p, 1);
            if ((p[0] == '{' || p[0] == '}') && p[1] == p[0]) p++;
        }
    }
    if (!b.ok) free(b.s), b.s = NULL, snprintf(why, why_size, "out of memory");
    return b.s;
}

char *http_judge_request(const http_judge *j, const grpo_sample *x, size_t *len, char *why,
                         size_t why_size) {
    char *filled = template_fill(j->template, x, why, why_size);
    if (!filled) return NULL;
    cJSON *req = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(req, "messages");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "user");
    cJSON_AddStringToObject(m, "content", filled);
    cJSON_AddItemToArray(msgs, m);
    cJSON_AddStringToObject(req, "model", j->model);
    cJSON_AddNumberToObject(req, "temperature", j->temperature);
    if (j->max_tokens > 0) cJSON_AddNumberToObject(req, "max_tokens", j->max_tokens);
    char *text = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    free(filled);
    if (!text) return snprintf(why, why_size, "out of memory"), NULL;
    *len = strlen(text);
    return text;
}

int http_judge_content(const char *reply, void **doc, const char **content, char *why,
                       size_t why_size) {
    cJSON *d = cJSON_Parse(reply);
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(d, "choices");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(choices, 0), "message");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(msg, "content");
    if (!cJSON_IsString(c)) {
        cJSON_Delete(d);
        return snprintf(why, why_size, "not a chat completion: expected a JSON object with "
                        "choices[0].message.content, got '%.60s'", reply ? reply : ""), 0;
    }
    *doc = d, *content = c->valuestring;
    return 1;
}

/* The number in the score_json field of the JSON object in content (from its first '{' to its
 * last '}', so a fenced or chatty reply still works); NAN with why set when there is none. */
static double score_from_json(const http_judge *j, const char *content, char *why,
                              size_t why_size) {
    const char *a = strchr(content, '{'), *z = strrchr(content, '}');
    cJSON *d = a && z > a ? cJSON_ParseWithLength(a, (size_t)(z - a) + 1) : NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(d, j->score_json);
    double s = NAN;
    if (cJSON_IsNumber(v)) s = v->valuedouble;
    else if (!cJSON_IsString(v) || !grpo_text_double(v->valuestring, &s)) s = NAN;
    if (isnan(s))
        snprintf(why, why_size, "no number in field '%s' of a JSON object in the judge's reply "
                 "'%.60s'", j->score_json, content);
    cJSON_Delete(d);
    return s;
}

/* The number score_regex captures in content; NAN with why set when it does not match. */
static double score_from_regex(const http_judge *j, const char *content, char *why,
                               size_t why_size) {
    int rc = pcre2_match(j->regex, (PCRE2_SPTR)content, strlen(content), 0, 0, j->match,
                         j->limits);
    if (rc < 0)
        return snprintf(why, why_size, "score_regex %s the judge's reply '%.60s'",
                        rc == PCRE2_ERROR_NOMATCH ? "does not match" : "failed (a limit) on",
                        content), NAN;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(j->match);
    int g = rc > 1 && ov[2] != PCRE2_UNSET ? 1 : 0;
    char num[64];
    snprintf(num, sizeof num, "%.*s", (int)(ov[2 * g + 1] - ov[2 * g]), content + ov[2 * g]);
    double s;
    if (!grpo_text_double(num, &s))
        return snprintf(why, why_size, "score_regex captured '%s', not a number", num), NAN;
    return s;
}

float http_judge_score(const http_judge *j, const char *content, char *why, size_t why_size) {
    double s = j->score_json ? score_from_json(j, content, why, why_size)
                             : score_from_regex(j, content, why, why_size);
    if (isnan(s)) return NAN;
    if (s < j->lo || s > j->hi)
        return snprintf(why, why_size, "score %g outside [score_min, score_max] = [%g, %g]", s,
                        j->lo, j->hi), NAN;
    return (float)(j->normalize ? (s - j->lo) / (j->hi - j->lo) : s);
}

/* The defaults of pack.ini, for a host that does not fill them in (tests). */
static const char *const default_template[] = {
    "Rate how well the response answers the question, from 0 to 10.", "Question: {prompt}",
    "Response: {completion}", "Reply with the score only."};
#define DEFAULT_SCORE_REGEX "(-?[0-9]+(?:\\.[0-9]+)?)"

/* The template: its lines joined with newlines, checked. */
static int32_t read_template(http_judge *j, const grpo_config *cfg, grpo_error *err) {
    text_buf b = {NULL, 0, 0, 1};
    put(&b, "", 0);
    uint32_t n = grpo_config_count(cfg, "template"), dflt = n == 0;
    if (dflt) n = sizeof default_template / sizeof default_template[0];
    for (uint32_t i = 0; i < n; i++) {
        const char *line = dflt ? default_template[i] : grpo_config_nth(cfg, "template", i);
        if (i) put(&b, "\n", 1);
        put(&b, line, strlen(line));
    }
    if (!b.ok) return free(b.s), grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory",
                                                cfg->section);
    j->template = b.s;
    char why[200];
    if (template_check(j->template, why, sizeof why) != 0)
        return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] template: %s", cfg->section, why);
    return GRPO_OK;
}

/* score_regex compiled with the match limits of pattern.h, or score_json kept. */
static int32_t read_score_rule(http_judge *j, const grpo_config *cfg, grpo_error *err) {
    const char *field = grpo_config_get(cfg, "score_json");
    if (field && *field) {
        j->score_json = strdup(field);
        return j->score_json ? GRPO_OK : grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory",
                                                        cfg->section);
    }
    const char *re = grpo_config_get(cfg, "score_regex");
    if (!re) re = DEFAULT_SCORE_REGEX;
    int code;
    PCRE2_SIZE at;
    j->regex = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &code,
                             &at, NULL);
    if (!j->regex) {
        char why[160];
        pcre2_get_error_message(code, (PCRE2_UCHAR *)why, sizeof why);
        return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] score_regex: %s at offset %zu",
                              cfg->section, why, (size_t)at);
    }
    j->match = pcre2_match_data_create_from_pattern(j->regex, NULL);
    j->limits = builtin_match_context();
    if (!j->match || !j->limits)
        return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    return GRPO_OK;
}

static int32_t read_numbers(http_judge *j, const grpo_config *cfg, grpo_error *err) {
    int32_t rc = grpo_config_double(cfg, "score_min", 0, -HUGE_VAL, HUGE_VAL, &j->lo, err);
    if (rc == GRPO_OK)
        rc = grpo_config_double(cfg, "score_max", 10, -HUGE_VAL, HUGE_VAL, &j->hi, err);
    if (rc == GRPO_OK && !(j->hi > j->lo))
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "[%s] score_max: expected more than score_min "
                            "(%g), got %g", cfg->section, j->lo, j->hi);
    if (rc == GRPO_OK) rc = grpo_config_bool(cfg, "normalize", 1, &j->normalize, err);
    if (rc == GRPO_OK) rc = grpo_config_double(cfg, "temperature", 0, 0, 2, &j->temperature, err);
    if (rc == GRPO_OK) rc = grpo_config_int(cfg, "max_tokens", 0, 0, 1 << 20, &j->max_tokens, err);
    return rc;
}

int32_t http_judge_create(http_judge *j, const grpo_config *cfg, grpo_error *err) {
    memset(j, 0, sizeof *j);
    const char *model = grpo_config_get(cfg, "model");
    if (!model || !*model)
        return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] model: mode = judge needs the judge's "
                              "model name (the \"model\" of the chat-completions request)",
                              cfg->section);
    if (!(j->model = strdup(model)))
        return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    int32_t rc = read_template(j, cfg, err);
    if (rc == GRPO_OK) rc = read_score_rule(j, cfg, err);
    if (rc == GRPO_OK) rc = read_numbers(j, cfg, err);
    return rc;
}

void http_judge_free(http_judge *j) {
    free(j->template), free(j->model), free(j->score_json);
    pcre2_code_free(j->regex);
    pcre2_match_data_free(j->match);
    pcre2_match_context_free(j->limits);
    memset(j, 0, sizeof *j);
}
