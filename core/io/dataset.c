/* dataset.c — JSONL prompt datasets, the prompt-length policy, and the resumable data order.
 * See dataset.h for the accepted shapes and the exact shuffle algorithm. */
#include "io/dataset.h"
#include "io/testing.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/files.h"
#include "text/jinja/jinja.h" /* jarena, jbuf */

struct grpo_dataset_store {
    jarena a; /* every string, message and field array */
};

/* ---- one line, one parse ------------------------------------------------------------------
 * cJSON parses every key and every value of a line's top-level object, one member at a time;
 * this file only steps over the '{' ':' ',' '}' between them. A field's text is exactly the bytes
 * cJSON read for its value, so the text and the parsed value cannot disagree. */
typedef struct member {
    cJSON *key;        /* a string node: key->valuestring */
    cJSON *value;      /* NULL until parsed */
    size_t key_at;     /* the key's opening quote in the line */
    size_t start, end; /* the value's bytes in the line: [start, end) */
} member;

typedef struct members {
    member *m; /* [n] in line order */
    size_t n, cap;
} members;

static void members_clear(members *ms) {
    for (size_t i = 0; i < ms->n; i++) cJSON_Delete(ms->m[i].key), cJSON_Delete(ms->m[i].value);
    ms->n = 0;
}

static member *members_push(members *ms) {
    if (ms->n == ms->cap) {
        size_t cap = ms->cap ? ms->cap * 2 : 16;
        member *p = realloc(ms->m, cap * sizeof *p);
        if (!p) return NULL;
        ms->m = p, ms->cap = cap;
    }
    member *m = &ms->m[ms->n++];
    memset(m, 0, sizeof *m);
    return m;
}

/* JSON whitespace (RFC 8259). Other control bytes never reach here (see parse_line), so this is
 * also exactly what cJSON skips. */
static size_t skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) i++;
    return i;
}

/* A UTF-8 byte-order mark at the start of a line: its length (3) or 0. */
static size_t bom_len(const char *s, size_t n) {
    return n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
}

/* cJSON parses the one value starting at s[i]; *end is the index after it (on failure, where
 * cJSON stopped). s[i] must start a value: cJSON would skip a byte-order mark there. */
static cJSON *parse_at(const char *s, size_t n, size_t i, size_t *end) {
    const char *e = NULL;
    cJSON *v = i < n && strchr("\"{[-0123456789tfn", s[i]) && s[i]
                   ? cJSON_ParseWithLengthOpts(s + i, n - i, &e, 0)
                   : NULL;
    *end = e ? (size_t)(e - s) : i;
    return v;
}

/* ---- one line ------------------------------------------------------------------------------ */
typedef struct line_ctx {
    jarena *a;
    const char *path;
    const char *prompt_field; /* the key holding the prompt */
    members *ms;              /* the current line's members (reused from line to line) */
    uint64_t line;
    char *why;
    size_t why_size;
} line_ctx;

static int bad(line_ctx *l, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static int bad(line_ctx *l, const char *fmt, ...) {
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(l->why, l->why_size, "%s:%" PRIu64 ": %s", l->path, l->line, what);
    return 0;
}

static int bad_json(line_ctx *l, size_t at, const char *expected) {
    return bad(l, "bad JSON near column %zu: expected %s", at + 1, expected);
}

static const char *json_kind(const cJSON *v) {
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "a list";
    if (cJSON_IsObject(v)) return "an object";
    return "something else";
}

/* A line that does not start with '{': bad JSON, or valid JSON of another kind. s[n] is NUL
 * (cJSON requires it to check that nothing follows the value). */
static int not_an_object(line_ctx *l, const char *s, size_t i) {
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithOpts(s + i, &end, 1);
    if (!v)
        return bad_json(l, end && end >= s ? (size_t)(end - s) : i, "one JSON object per line");
    bad(l, "expected a JSON object, got %s", json_kind(v));
    cJSON_Delete(v);
    return 0;
}

/* Splits the line's object into l->ms: {"key": value, ...}, each key and value parsed by cJSON. */
static int split_object(line_ctx *l, const char *s, size_t n) {
    members *ms = l->ms;
    size_t i = skip_ws(s, n, bom_len(s, n)), end;
    if (i >= n || s[i] != '{') return not_an_object(l, s, i);
    i = skip_ws(s, n, i + 1);
    if (i < n && s[i] == '}') goto closed;
    for (;;) {
        member *m = members_push(ms);
        if (!m) return bad(l, "out of memory for the keys of the line");
        if (i >= n || s[i] != '"') return bad_json(l, i, "a \"key\" in quotes");
        m->key_at = i;
        if (!(m->key = parse_at(s, n, i, &end))) return bad_json(l, end, "a valid \"key\" string");
        i = skip_ws(s, n, end);
        if (i >= n || s[i] != ':') return bad_json(l, i, "':' after the key");
        m->start = i = skip_ws(s, n, i + 1);
        if (!(m->value = parse_at(s, n, i, &end))) return bad_json(l, end, "a valid JSON value");
        m->end = end;
        i = skip_ws(s, n, end);
        if (i < n && s[i] == ',') {
            i = skip_ws(s, n, i + 1);
            continue;
        }
        if (i < n && s[i] == '}') break;
        return bad_json(l, i, "',' or '}' after a value");
    }
closed:
    i = skip_ws(s, n, i + 1);
    return i == n ? 1 : bad_json(l, i, "the end of the line after the object");
}

/* Whether s[a..b) (valid JSON) holds the escape \u0000. Every backslash of valid JSON starts an
 * escape, so stepping over pairs finds exactly the escapes. */
static int has_nul_escape(const char *s, size_t a, size_t b) {
    for (size_t i = a; i + 1 < b; i++)
        if (s[i] == '\\') {
            if (s[i + 1] == 'u' && i + 6 <= b && memcmp(s + i + 2, "0000", 4) == 0) return 1;
            i++;
        }
    return 0;
}

static int by_key(const void *a, const void *b) {
    const member *const *x = a, *const *y = b;
    return strcmp((*x)->key->valuestring, (*y)->key->valuestring);
}

/* Refuses \u0000 (C text would end there) and duplicate keys; sorting keeps it O(n log n). */
static int check_members(line_ctx *l, const char *s) {
    members *ms = l->ms;
    for (size_t i = 0; i < ms->n; i++) {
        const member *m = &ms->m[i];
        if (has_nul_escape(s, m->key_at, m->start))
            return bad(l, "a key near column %zu holds \\u0000 (a NUL character): text cannot "
                          "hold NUL",
                       m->key_at + 1);
        if (has_nul_escape(s, m->start, m->end))
            return bad(l, "\"%s\": \\u0000 (a NUL character) in the value: text cannot hold NUL",
                       m->key->valuestring);
    }
    if (ms->n < 2) return 1;
    const member **sorted = malloc(ms->n * sizeof *sorted);
    if (!sorted) return bad(l, "out of memory for the keys of the line");
    for (size_t i = 0; i < ms->n; i++) sorted[i] = &ms->m[i];
    qsort(sorted, ms->n, sizeof *sorted, by_key);
    int ok = 1;
    for (size_t i = 1; i < ms->n && ok; i++)
        if (strcmp(sorted[i - 1]->key->valuestring, sorted[i]->key->valuestring) == 0)
            ok = bad(l, "duplicate key \"%s\"", sorted[i]->key->valuestring);
    free(sorted);
    return ok;
}

/* Reads a list of {role, content} objects into messages. With parity_roles (MiniMind's
 * conversations) a turn without "role" is "user" at even and "assistant" at odd positions. */
static int read_messages(line_ctx *l, const cJSON *list, const char *key, int parity_roles,
                         grpo_message **out, uint32_t *n_out) {
    int n = cJSON_GetArraySize(list);
    if (n == 0)
        return bad(l, "\"%s\": expected a non-empty list of {\"role\", \"content\"} messages", key);
    grpo_message *m = jarena_alloc(l->a, (size_t)n * sizeof *m);
    int i = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, list) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(item, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(item, "content");
        if (!cJSON_IsObject(item))
            return bad(l, "\"%s\"[%d]: expected an object {\"role\", \"content\"}, got %s", key, i,
                       json_kind(item));
        if (!cJSON_IsString(role) && !(parity_roles && !role))
            return bad(l, "\"%s\"[%d]: expected a string \"role\", got %s", key, i,
                       role ? json_kind(role) : "none");
        if (!cJSON_IsString(content))
            return bad(l, "\"%s\"[%d]: expected a string \"content\", got %s", key, i,
                       content ? json_kind(content) : "none");
        m[i].struct_size = sizeof m[i];
        if (role)
            m[i].role = jarena_strdup(l->a, role->valuestring, strlen(role->valuestring));
        else
            m[i].role = i % 2 ? "assistant" : "user";
        m[i].content = jarena_strdup(l->a, content->valuestring, strlen(content->valuestring));
        i++;
    }
    *out = m;
    *n_out = (uint32_t)n;
    return 1;
}

/* The prompt member (l->prompt_field): a string used as is, or a list of messages. */
static int read_prompt(line_ctx *l, const cJSON *prompt, grpo_example *ex) {
    if (cJSON_IsString(prompt)) {
        ex->prompt = jarena_strdup(l->a, prompt->valuestring, strlen(prompt->valuestring));
        return 1;
    }
    if (!cJSON_IsArray(prompt))
        return bad(l,
                   "\"%s\": expected a string or a list of {\"role\", \"content\"} messages, "
                   "got %s",
                   l->prompt_field, json_kind(prompt));
    grpo_message *m;
    if (!read_messages(l, prompt, l->prompt_field, 0, &m, &ex->n_messages)) return 0;
    ex->messages = m;
    return 1;
}

/* MiniMind's conversations: every turn but the last is the prompt, the last is the response. */
static int read_conversations(line_ctx *l, const cJSON *conv, grpo_example *ex) {
    grpo_message *m;
    uint32_t nm;
    if (!cJSON_IsArray(conv))
        return bad(l, "\"conversations\": expected a list of {\"role\", \"content\"} turns, got %s",
                   json_kind(conv));
    if (!read_messages(l, conv, "conversations", 1, &m, &nm)) return 0;
    if (nm < 2)
        return bad(l, "\"conversations\": expected at least one prompt turn and the final "
                      "assistant turn (the reference response)");
    if (strcmp(m[nm - 1].role, "assistant") != 0)
        return bad(l,
                   "\"conversations\": expected the last turn to be the assistant's reference "
                   "response, got role \"%s\"",
                   m[nm - 1].role);
    ex->response = m[nm - 1].content;
    ex->messages = m, ex->n_messages = nm - 1;
    return 1;
}

/* Builds ex from the line's checked members; every other member becomes a field whose text is
 * the value's bytes in the line. */
static int build_example(line_ctx *l, const char *s, grpo_example *ex) {
    const members *ms = l->ms;
    const member *prompt = NULL, *conv = NULL;
    for (size_t i = 0; i < ms->n; i++) {
        const char *key = ms->m[i].key->valuestring;
        if (strcmp(key, l->prompt_field) == 0)
            prompt = &ms->m[i];
        else if (strcmp(key, "conversations") == 0)
            conv = &ms->m[i];
    }
    if (prompt && conv)
        return bad(l, "expected either \"%s\" or \"conversations\", not both", l->prompt_field);
    if (!prompt && !conv)
        return bad(l,
                   "expected a \"%s\" (a string or a list of messages) or a \"conversations\" "
                   "list",
                   l->prompt_field);
    if (!(prompt ? read_prompt(l, prompt->value, ex) : read_conversations(l, conv->value, ex)))
        return 0;
    size_t n_extra = ms->n - 1;
    grpo_field *fields = n_extra ? jarena_alloc(l->a, n_extra * sizeof *fields) : NULL;
    size_t f = 0;
    for (size_t i = 0; i < ms->n; i++) {
        const member *m = &ms->m[i];
        if (m == prompt || m == conv) continue;
        fields[f].struct_size = sizeof fields[f];
        fields[f].key = jarena_strdup(l->a, m->key->valuestring, strlen(m->key->valuestring));
        fields[f].json = jarena_strdup(l->a, s + m->start, m->end - m->start);
        f++;
    }
    ex->fields = fields, ex->n_fields = (uint32_t)n_extra;
    return 1;
}

/* Parses one non-blank line into ex. Returns 0 with l->why set when the line is bad. */
static int parse_line(line_ctx *l, const char *s, size_t n, grpo_example *ex) {
    size_t badpos = ju8_invalid_at(s, n);
    if (badpos < n) return bad(l, "invalid UTF-8 at byte %zu of the line", badpos + 1);
    /* JSON allows no other control byte: outside strings it is not whitespace, inside it must be
     * escaped. cJSON would skip it as whitespace; refusing it keeps every reader in agreement. */
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 && s[i] != '\t' && s[i] != '\r')
            return bad(l,
                       "control byte 0x%02X at byte %zu of the line: JSON allows only space, tab, "
                       "CR and LF between values, and inside strings it must be escaped "
                       "(\\u%04X)",
                       (unsigned)(unsigned char)s[i], i + 1, (unsigned)(unsigned char)s[i]);
    memset(ex, 0, sizeof *ex);
    ex->line = l->line;
    int ok = split_object(l, s, n) && check_members(l, s) && build_example(l, s, ex);
    members_clear(l->ms);
    return ok;
}

/* ---- load ---------------------------------------------------------------------------------- */
int grpo_dataset_load(const char *path, const grpo_dataset_options *opt, grpo_dataset **out,
                      grpo_error *err) {
    static const grpo_dataset_options defaults = {0};
    if (!opt) opt = &defaults;
    *out = NULL;
    grpo_error local;
    FILE *f = grpo_open_regular(path, "dataset", err ? err : &local);
    if (!f) return err ? err->status : local.status;
    grpo_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) {
        fclose(f);
        return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory loading %s", path);
    }
    ds->store = calloc(1, sizeof *ds->store);
    ds->path = strdup(path);
    size_t cap = 0;
    char *buf = NULL, why[600];
    size_t bufcap = 0;
    ssize_t got;
    uint64_t lineno = 0;
    int rc = GRPO_OK;
    members ms = {0};
    line_ctx l = {.a = &ds->store->a,
                  .path = path,
                  .prompt_field = opt->prompt_field ? opt->prompt_field : "prompt",
                  .ms = &ms,
                  .why = why,
                  .why_size = sizeof why};
    while ((got = getline(&buf, &bufcap, f)) >= 0) {
        size_t n = (size_t)got;
        lineno++;
        while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) n--;
        buf[n] = '\0';
        if (skip_ws(buf, n, bom_len(buf, n)) == n) continue; /* blank line */
        l.line = lineno;
        grpo_example ex;
        if (!parse_line(&l, buf, n, &ex)) {
            if (!opt->skip_bad_lines) {
                rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s", why);
                break;
            }
            if (!ds->n_skipped++) snprintf(ds->first_skip, sizeof ds->first_skip, "%s", why);
            continue;
        }
        if (ds->n == cap) {
            cap = cap ? cap * 2 : 256;
            grpo_example *p = realloc(ds->examples, cap * sizeof *p);
            if (!p) {
                rc = grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory loading %s", path);
                break;
            }
            ds->examples = p;
        }
        ds->examples[ds->n++] = ex;
    }
    if (rc == GRPO_OK && ferror(f))
        rc = grpo_error_set(err, GRPO_ERR_IO, "%s: read error after line %" PRIu64, path, lineno);
    if (rc == GRPO_OK && ds->n == 0)
        rc = grpo_error_set(err, GRPO_ERR_INVALID,
                            "%s: no examples (%" PRIu64 " lines, %zu skipped)%s%s", path, lineno,
                            ds->n_skipped, ds->n_skipped ? "; first: " : "", ds->first_skip);
    free(ms.m);
    free(buf);
    fclose(f);
    if (rc != GRPO_OK) {
        grpo_dataset_free(ds);
        return rc;
    }
    *out = ds;
    return GRPO_OK;
}

void grpo_dataset_free(grpo_dataset *ds) {
    if (!ds) return;
    if (ds->store) jarena_free(&ds->store->a);
    free(ds->store);
    free(ds->examples);
    free(ds->path);
    free(ds);
}

/* ---- prompts ------------------------------------------------------------------------------- */
int grpo_example_prompt_text(const grpo_example *ex, grpo_render_fn render, void *render_user,
                             char **out, grpo_error *err) {
    *out = NULL;
    if (ex->prompt) {
        *out = strdup(ex->prompt);
        return *out ? GRPO_OK : grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    }
    if (!render)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "line %" PRIu64
                              ": the prompt is a list of messages but no chat template "
                              "(render callback) was given",
                              ex->line);
    return render(render_user, ex->messages, ex->n_messages, out, err);
}

int grpo_prompt_limit(int32_t *ids, size_t *n, size_t max_len, grpo_prompt_policy policy) {
    if (max_len == 0 || *n <= max_len) return 1;
    if (policy == GRPO_PROMPT_SKIP) return 0;
    memmove(ids, ids + (*n - max_len), max_len * sizeof *ids);
    *n = max_len;
    return 1;
}

int grpo_example_prepare(const grpo_example *ex, grpo_render_fn render, void *render_user,
                         grpo_tokenize_fn tokenize, void *tok_user, size_t max_len,
                         grpo_prompt_policy policy, char **text, int32_t **ids, size_t *n_ids,
                         int *keep, grpo_error *err) {
    *text = NULL, *ids = NULL, *n_ids = 0, *keep = 0;
    int rc = grpo_example_prompt_text(ex, render, render_user, text, err);
    if (rc != GRPO_OK) return rc;
    rc = tokenize(tok_user, *text, ids, n_ids, err);
    if (rc != GRPO_OK) {
        free(*text), *text = NULL;
        return rc;
    }
    *keep = grpo_prompt_limit(*ids, n_ids, max_len, policy);
    if (!*keep) {
        free(*text), free(*ids);
        *text = NULL, *ids = NULL, *n_ids = 0;
    }
    return GRPO_OK;
}

/* ---- order --------------------------------------------------------------------------------- */
uint64_t grpo_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, bound) by rejection: no modulo bias. */
static uint64_t uniform_below(uint64_t *state, uint64_t bound) {
    uint64_t limit =
        UINT64_MAX - (UINT64_MAX % bound + 1) % bound; /* 2^64 - (2^64 mod bound) - 1 */
    for (;;) {
        uint64_t x = grpo_splitmix64(state);
        if (x <= limit) return x % bound;
    }
}

static void make_epoch(grpo_data_order *o) {
    size_t n = (size_t)o->cur.n;
    for (size_t i = 0; i < n; i++) o->perm[i] = i;
    if (!o->shuffle) return;
    uint64_t state = o->cur.seed + o->cur.epoch * 0x9E3779B97F4A7C15ull;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)uniform_below(&state, (uint64_t)i + 1);
        size_t t = o->perm[i];
        o->perm[i] = o->perm[j], o->perm[j] = t;
    }
}

int grpo_data_order_restore(grpo_data_order *o, size_t n, grpo_data_cursor cur, int shuffle,
                            grpo_error *err) {
    memset(o, 0, sizeof *o);
    if (n == 0) return grpo_error_set(err, GRPO_ERR_INVALID, "data order: the dataset is empty");
    if (cur.n != n)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "data cursor is for a dataset of %" PRIu64
                              " examples, this one has %zu "
                              "(did the data file change?)",
                              cur.n, n);
    if (cur.position > n)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "data cursor position %" PRIu64 " is past the %zu examples",
                              cur.position, n);
    o->perm = malloc(n * sizeof *o->perm);
    if (!o->perm)
        return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory for a data order of %zu", n);
    o->cur = cur, o->shuffle = shuffle;
    make_epoch(o);
    return GRPO_OK;
}

int grpo_data_order_init(grpo_data_order *o, size_t n, uint64_t seed, int shuffle,
                         grpo_error *err) {
    grpo_data_cursor c = {.seed = seed, .epoch = 0, .position = 0, .n = n};
    return grpo_data_order_restore(o, n, c, shuffle, err);
}

size_t grpo_data_order_next(grpo_data_order *o) {
    if (o->cur.position == o->cur.n) {
        o->cur.epoch++, o->cur.position = 0;
        make_epoch(o);
    }
    return o->perm[o->cur.position++];
}

void grpo_data_order_free(grpo_data_order *o) {
    free(o->perm);
    o->perm = NULL;
}

void grpo_data_cursor_format(const grpo_data_cursor *c, char *buf, size_t size) {
    snprintf(buf, size, "seed=%" PRIu64 " epoch=%" PRIu64 " position=%" PRIu64 " n=%" PRIu64,
             c->seed, c->epoch, c->position, c->n);
}

int grpo_data_cursor_parse(const char *text, grpo_data_cursor *c, grpo_error *err) {
    uint64_t s, e, p, n;
    int used = 0;
    if (sscanf(text, "seed=%" SCNu64 " epoch=%" SCNu64 " position=%" SCNu64 " n=%" SCNu64 "%n", &s,
               &e, &p, &n, &used) != 4 ||
        text[used] != '\0')
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "bad data cursor '%s': expected 'seed=S epoch=E position=P n=N'",
                              text);
    c->seed = s, c->epoch = e, c->position = p, c->n = n;
    return GRPO_OK;
}
