/* dataset.c — JSONL prompt datasets, the prompt-length policy, and the resumable data order.
 * See dataset.h for the accepted shapes and the exact shuffle algorithm. */
#include "dataset.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h" /* jarena, jbuf */

struct grpo_dataset_store {
    jarena a; /* every string, message and field array */
};

/* ---- line checks --------------------------------------------------------------------------- */
/* Skips one JSON value starting at s[i] (already known valid); returns the index after it. */
static size_t skip_value(const char *s, size_t n, size_t i) {
    int depth = 0;
    do {
        char c = s[i];
        if (c == '"') {
            for (i++; i < n && s[i] != '"'; i++)
                if (s[i] == '\\') i++;
            i++;
        } else if (c == '[' || c == '{')
            depth++, i++;
        else if (c == ']' || c == '}')
            depth--, i++;
        else if (depth == 0) {
            while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' &&
                   s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
                i++;
        } else
            i++;
    } while (depth > 0 && i < n);
    return i;
}

static size_t skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) i++;
    return i;
}

/* The raw text of the value of top-level key k in a valid JSON object line. */
static int raw_value(const char *s, size_t n, int k, size_t *start, size_t *end) {
    size_t i = skip_ws(s, n, 0) + 1; /* after '{' */
    for (int idx = 0;; idx++) {
        i = skip_ws(s, n, i);
        if (i >= n || s[i] != '"') return 0;
        i = skip_value(s, n, i);  /* the key */
        i = skip_ws(s, n, i) + 1; /* ':' */
        i = skip_ws(s, n, i);
        size_t vs = i;
        i = skip_value(s, n, i);
        if (idx == k) return *start = vs, *end = i, 1;
        i = skip_ws(s, n, i);
        if (i >= n || s[i] != ',') return 0;
        i++;
    }
}

/* ---- one line ------------------------------------------------------------------------------ */
typedef struct line_ctx {
    jarena *a;
    const char *path;
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

static const char *json_kind(const cJSON *v) {
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "a list";
    if (cJSON_IsObject(v)) return "an object";
    return "something else";
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

/* Parses one non-blank line into ex. Returns 0 with l->why set when the line is bad. */
static int parse_line(line_ctx *l, const char *s, size_t n, grpo_example *ex) {
    size_t badpos = ju8_invalid_at(s, n);
    if (badpos < n) return bad(l, "invalid UTF-8 at byte %zu of the line", badpos + 1);
    if (memchr(s, '\0', n)) return bad(l, "NUL byte in the line");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(s, &end, 1);
    if (!root) {
        size_t col = end && end >= s ? (size_t)(end - s) + 1 : 1;
        return bad(l, "bad JSON near column %zu: expected one JSON object per line", col);
    }
    int ok = 0;
    memset(ex, 0, sizeof *ex);
    ex->line = l->line;
    if (!cJSON_IsObject(root)) {
        bad(l, "expected a JSON object, got %s", json_kind(root));
        goto done;
    }
    const cJSON *prompt = NULL, *conv = NULL, *item;
    int k = 0, n_extra = 0;
    cJSON_ArrayForEach(item, root) {
        for (const cJSON *o = root->child; o != item; o = o->next)
            if (strcmp(o->string, item->string) == 0) {
                bad(l, "duplicate key \"%s\"", item->string);
                goto done;
            }
        if (strcmp(item->string, "prompt") == 0)
            prompt = item;
        else if (strcmp(item->string, "conversations") == 0)
            conv = item;
        else
            n_extra++;
    }
    if (prompt && conv) {
        bad(l, "expected either \"prompt\" or \"conversations\", not both");
        goto done;
    }
    if (!prompt && !conv) {
        bad(l,
            "expected a \"prompt\" (a string or a list of messages) or a \"conversations\" list");
        goto done;
    }
    if (prompt) {
        if (cJSON_IsString(prompt))
            ex->prompt = jarena_strdup(l->a, prompt->valuestring, strlen(prompt->valuestring));
        else if (cJSON_IsArray(prompt)) {
            grpo_message *m;
            if (!read_messages(l, prompt, "prompt", 0, &m, &ex->n_messages)) goto done;
            ex->messages = m;
        } else {
            bad(l,
                "\"prompt\": expected a string or a list of {\"role\", \"content\"} messages, got "
                "%s",
                json_kind(prompt));
            goto done;
        }
    } else {
        grpo_message *m;
        uint32_t nm;
        if (!cJSON_IsArray(conv)) {
            bad(l, "\"conversations\": expected a list of {\"role\", \"content\"} turns, got %s",
                json_kind(conv));
            goto done;
        }
        if (!read_messages(l, conv, "conversations", 1, &m, &nm)) goto done;
        if (nm < 2) {
            bad(l, "\"conversations\": expected at least one prompt turn and the final "
                   "assistant turn (the reference response)");
            goto done;
        }
        if (strcmp(m[nm - 1].role, "assistant") != 0) {
            bad(l,
                "\"conversations\": expected the last turn to be the assistant's reference "
                "response, got role \"%s\"",
                m[nm - 1].role);
            goto done;
        }
        ex->response = m[nm - 1].content;
        nm--;
        ex->messages = m, ex->n_messages = nm;
    }
    grpo_field *fields = n_extra ? jarena_alloc(l->a, (size_t)n_extra * sizeof *fields) : NULL;
    k = 0;
    int f = 0;
    cJSON_ArrayForEach(item, root) {
        if (item != prompt && item != conv) {
            size_t vs, ve;
            if (!raw_value(s, n, k, &vs, &ve)) {
                bad(l, "internal error: cannot find the text of key \"%s\"", item->string);
                goto done;
            }
            fields[f].struct_size = sizeof fields[f];
            fields[f].key = jarena_strdup(l->a, item->string, strlen(item->string));
            fields[f].json = jarena_strdup(l->a, s + vs, ve - vs);
            f++;
        }
        k++;
    }
    ex->fields = fields, ex->n_fields = (uint32_t)n_extra;
    ok = 1;
done:
    cJSON_Delete(root);
    return ok;
}

/* ---- load ---------------------------------------------------------------------------------- */
int grpo_dataset_load(const char *path, const grpo_dataset_options *opt, grpo_dataset **out,
                      grpo_error *err) {
    static const grpo_dataset_options defaults = {0};
    if (!opt) opt = &defaults;
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot open dataset: %s", path,
                              strerror(errno));
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
    line_ctx l = {.a = &ds->store->a, .path = path, .why = why, .why_size = sizeof why};
    while ((got = getline(&buf, &bufcap, f)) >= 0) {
        size_t n = (size_t)got;
        lineno++;
        while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) n--;
        buf[n] = '\0';
        if (skip_ws(buf, n, 0) == n) continue; /* blank line */
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
