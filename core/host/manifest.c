/*
 * manifest.c — parsing pack.ini (the format is documented at the top of registry.h).
 *
 * The INI dialect is the run files' one: io/ini_reader reads the file (line numbers, line-length
 * and section-name limits, inline ';' comments, continuation lines joined with nothing between,
 * malformed lines refused) and this file gives the document its meaning. Values are collected
 * first (with their lines) and validated in one pass at the end, so the order of sections in the
 * file does not matter.
 */
#include "host/registry.h"
#include "io/ini_reader.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers ------------------------------------------------------------------------- */

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "grpo: out of memory (%zu bytes)\n", n);
        abort();
    }
    return q;
}

static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(xrealloc(NULL, n), s, n);
}

int grpo_edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 127 || lb > 127) return INT_MAX;
    int row[128];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int same = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]);
            int best = diag + !same;
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best, diag = up;
        }
    }
    return row[lb];
}

/* ---- parser state ---------------------------------------------------------------------------- */

typedef struct mval {
    char *text; /* NULL when the key was not given */
    int line;
} mval;

typedef struct mentry { /* one [ID] section */
    char *id;
    int line;
    mval kind, description;
    mval rows_independent, thread_safe; /* reward entries: how its calls may be spread */
    mval *archs; /* [n_archs] one per architectures line, split on commas at the end */
    int n_archs;
} mentry;

typedef struct mkey { /* one [ID:KEY] section */
    char *entry_id, *name;
    int line;
    mval type, help;
    mval *defaults; /* [n_defaults] one per default line */
    int n_defaults;
} mkey;

typedef struct mtest { /* one [ID:test.NAME] section: its lines, read at the end */
    char *entry_id, *name;
    int line;
    char **keys, **values;
    int *lines;
    int n;
} mtest;

typedef enum { SEC_NONE, SEC_PACK, SEC_ENTRY, SEC_KEY, SEC_TEST } section_kind;

typedef struct manifest_parser {
    const char *path;
    grpo_error *err;
    int failed;
    int lineno; /* line of the key (or header) being read */
    section_kind sec;
    int sec_index; /* index into entries or keys for SEC_ENTRY / SEC_KEY */
    const char *section; /* its name */
    int pack_line;
    mval name, version, abi, library;
    mval author, license, homepage, min_grpo; /* optional metadata */
    char **notes; /* [n_notes] warnings, handed to the pack on success */
    int n_notes;
    mentry *entries;
    int n_entries;
    mkey *keys;
    int n_keys;
    mtest *tests;
    int n_tests;
} manifest_parser;

/* Records "PATH:LINE: message" as the error (the first one wins) and returns 0. */
static int perr(manifest_parser *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int perr(manifest_parser *p, int line, const char *fmt, ...) {
    if (p->failed) return 0;
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    grpo_error_set(p->err, GRPO_ERR_INVALID, "%s:%d: %s", p->path, line, msg);
    p->failed = 1;
    return 0;
}

static void mval_free(mval *v) { free(v->text); }

static void parser_free(manifest_parser *p) {
    mval_free(&p->name), mval_free(&p->version), mval_free(&p->abi), mval_free(&p->library);
    mval_free(&p->author), mval_free(&p->license), mval_free(&p->homepage);
    mval_free(&p->min_grpo);
    for (int i = 0; i < p->n_notes; i++) free(p->notes[i]);
    free(p->notes);
    for (int i = 0; i < p->n_entries; i++) {
        mentry *e = &p->entries[i];
        free(e->id);
        mval_free(&e->kind), mval_free(&e->description);
        mval_free(&e->rows_independent), mval_free(&e->thread_safe);
        for (int j = 0; j < e->n_archs; j++) mval_free(&e->archs[j]);
        free(e->archs);
    }
    free(p->entries);
    for (int i = 0; i < p->n_keys; i++) {
        mkey *k = &p->keys[i];
        free(k->entry_id), free(k->name);
        mval_free(&k->type), mval_free(&k->help);
        for (int j = 0; j < k->n_defaults; j++) mval_free(&k->defaults[j]);
        free(k->defaults);
    }
    free(p->keys);
    for (int i = 0; i < p->n_tests; i++) {
        mtest *t = &p->tests[i];
        for (int j = 0; j < t->n; j++) free(t->keys[j]), free(t->values[j]);
        free(t->entry_id), free(t->name), free(t->keys), free(t->values), free(t->lines);
    }
    free(p->tests);
}

/* ---- sections --------------------------------------------------------------------------- */

/* A new [name] header at the current line: [pack], [ID] or [ID:KEY]. */
static void section_begin(manifest_parser *p, const char *name) {
    p->section = name;
    const char *colon = strchr(name, ':');
    if (strcmp(name, "pack") == 0) {
        if (p->pack_line) {
            perr(p, p->lineno, "[pack] appears twice (first at line %d); expected one [pack]",
                 p->pack_line);
            return;
        }
        p->sec = SEC_PACK, p->pack_line = p->lineno;
    } else if (colon && strncmp(colon + 1, "test.", 5) == 0) {
        for (int i = 0; i < p->n_tests; i++)
            if (strcmp(p->tests[i].name, colon + 1) == 0 &&
                strlen(p->tests[i].entry_id) == (size_t)(colon - name) &&
                strncmp(p->tests[i].entry_id, name, (size_t)(colon - name)) == 0) {
                perr(p, p->lineno, "[%s] appears twice (first at line %d); expected one section "
                     "per self-test", name, p->tests[i].line);
                return;
            }
        p->tests = xrealloc(p->tests, (size_t)(p->n_tests + 1) * sizeof *p->tests);
        mtest *t = &p->tests[p->n_tests];
        memset(t, 0, sizeof *t);
        t->entry_id = xstrdup(name);
        t->entry_id[colon - name] = '\0';
        t->name = xstrdup(colon + 1);
        t->line = p->lineno;
        p->sec = SEC_TEST, p->sec_index = p->n_tests++;
    } else if (colon) {
        for (int i = 0; i < p->n_keys; i++) {
            mkey *k = &p->keys[i];
            if (strlen(k->entry_id) == (size_t)(colon - name) &&
                strncmp(k->entry_id, name, (size_t)(colon - name)) == 0 &&
                strcmp(k->name, colon + 1) == 0) {
                perr(p, p->lineno, "[%s] appears twice (first at line %d); expected one section "
                     "per key", name, k->line);
                return;
            }
        }
        p->keys = xrealloc(p->keys, (size_t)(p->n_keys + 1) * sizeof *p->keys);
        mkey *k = &p->keys[p->n_keys];
        memset(k, 0, sizeof *k);
        k->entry_id = xstrdup(name);
        k->entry_id[colon - name] = '\0';
        k->name = xstrdup(colon + 1);
        k->line = p->lineno;
        p->sec = SEC_KEY, p->sec_index = p->n_keys++;
    } else {
        for (int i = 0; i < p->n_entries; i++)
            if (strcmp(p->entries[i].id, name) == 0) {
                perr(p, p->lineno, "[%s] appears twice (first at line %d); expected one section "
                     "per id", name, p->entries[i].line);
                return;
            }
        p->entries = xrealloc(p->entries, (size_t)(p->n_entries + 1) * sizeof *p->entries);
        mentry *e = &p->entries[p->n_entries];
        memset(e, 0, sizeof *e);
        e->id = xstrdup(name);
        e->line = p->lineno;
        p->sec = SEC_ENTRY, p->sec_index = p->n_entries++;
    }
}

/* ---- the handler: collects values with their lines ------------------------------------------ */

static const char *const pack_keys[] = {"name",   "version", "abi",      "library", "author",
                                        "license", "homepage", "min_grpo", NULL};
static const char *const entry_keys[] = {"kind", "description", "architectures",
                                         "rows_independent", "thread_safe", NULL};
static const char *const key_keys[] = {"type", "default", "help", NULL};

/* "unknown key 'x' in [s]; expected one of ... (did you mean 'y'?)" into msg. */
static void unknown_key_text(const manifest_parser *p, const char *name,
                             const char *const *known, char *msg, size_t size) {
    char list[160] = "", hint[96] = "";
    int best = INT_MAX;
    for (int i = 0; known[i]; i++) {
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                 known[i]);
        int d = grpo_edit_distance(name, known[i]);
        if (d < best && d <= 2 + (int)strlen(known[i]) / 4) {
            best = d;
            snprintf(hint, sizeof hint, " (did you mean '%s'?)", known[i]);
        }
    }
    snprintf(msg, size, "unknown key '%s' in [%s]; expected one of %s%s", name, p->section, list,
             hint);
}

static int unknown_key(manifest_parser *p, const char *name, const char *const *known) {
    char msg[512];
    unknown_key_text(p, name, known, msg, sizeof msg);
    return perr(p, p->lineno, "%s", msg);
}

/* An unknown [pack] key is kept as a note, not refused: a manifest written for a newer grpo (with
 * metadata this one does not know) must still load. */
static int unknown_pack_key(manifest_parser *p, const char *name) {
    char msg[512], *note = xrealloc(NULL, 700 + strlen(p->path));
    unknown_key_text(p, name, pack_keys, msg, sizeof msg);
    sprintf(note, "%s:%d: %s (ignored)", p->path, p->lineno, msg);
    p->notes = xrealloc(p->notes, (size_t)(p->n_notes + 1) * sizeof *p->notes);
    p->notes[p->n_notes++] = note;
    return 1;
}

/* A key that takes one value (its continuation lines already joined by the reader). */
static int set_once(manifest_parser *p, mval *v, const char *name, const char *value) {
    if (v->text)
        return perr(p, p->lineno, "'%s' is set twice in [%s] (first at line %d); expected one "
                    "value (continue a long one on indented lines)", name, p->section, v->line);
    v->text = xstrdup(value);
    v->line = p->lineno;
    return 1;
}

static void append_line(manifest_parser *p, mval **vals, int *n, const char *value) {
    *vals = xrealloc(*vals, (size_t)(*n + 1) * sizeof **vals);
    (*vals)[(*n)++] = (mval){xstrdup(value), p->lineno};
}

/* One key = value of the current section. */
static int manifest_key(manifest_parser *p, const char *name, const char *value) {
    if (p->failed) return 0;
    switch (p->sec) {
    case SEC_NONE:
        return perr(p, p->lineno, "key '%s' comes before any section; expected it under [pack] "
                    "or an entry's section", name);
    case SEC_PACK:
        if (strcmp(name, "name") == 0) return set_once(p, &p->name, name, value);
        if (strcmp(name, "version") == 0) return set_once(p, &p->version, name, value);
        if (strcmp(name, "abi") == 0) return set_once(p, &p->abi, name, value);
        if (strcmp(name, "library") == 0) return set_once(p, &p->library, name, value);
        if (strcmp(name, "author") == 0) return set_once(p, &p->author, name, value);
        if (strcmp(name, "license") == 0) return set_once(p, &p->license, name, value);
        if (strcmp(name, "homepage") == 0) return set_once(p, &p->homepage, name, value);
        if (strcmp(name, "min_grpo") == 0) return set_once(p, &p->min_grpo, name, value);
        return unknown_pack_key(p, name);
    case SEC_ENTRY: {
        mentry *e = &p->entries[p->sec_index];
        if (strcmp(name, "kind") == 0) return set_once(p, &e->kind, name, value);
        if (strcmp(name, "description") == 0) return set_once(p, &e->description, name, value);
        if (strcmp(name, "rows_independent") == 0)
            return set_once(p, &e->rows_independent, name, value);
        if (strcmp(name, "thread_safe") == 0) return set_once(p, &e->thread_safe, name, value);
        if (strcmp(name, "architectures") == 0) {
            append_line(p, &e->archs, &e->n_archs, value);
            return 1;
        }
        return unknown_key(p, name, entry_keys);
    }
    case SEC_TEST: { /* checked in check_test, once the entries are known */
        mtest *t = &p->tests[p->sec_index];
        t->keys = xrealloc(t->keys, (size_t)(t->n + 1) * sizeof *t->keys);
        t->values = xrealloc(t->values, (size_t)(t->n + 1) * sizeof *t->values);
        t->lines = xrealloc(t->lines, (size_t)(t->n + 1) * sizeof *t->lines);
        t->keys[t->n] = xstrdup(name), t->values[t->n] = xstrdup(value);
        t->lines[t->n++] = p->lineno;
        return 1;
    }
    case SEC_KEY: {
        mkey *k = &p->keys[p->sec_index];
        if (strcmp(name, "type") == 0) return set_once(p, &k->type, name, value);
        if (strcmp(name, "help") == 0) return set_once(p, &k->help, name, value);
        if (strcmp(name, "default") == 0) {
            append_line(p, &k->defaults, &k->n_defaults, value);
            return 1;
        }
        return unknown_key(p, name, key_keys);
    }
    }
    return 0;
}

/* ---- validation and building the pack ------------------------------------------------------ */

static int name_chars_ok(const char *s, const char *extra) {
    if (!*s) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && !strchr(extra, *s)) return 0;
    return 1;
}

/* Whether a relative path has a ".." component (and so may leave the directory it starts in). */
static int has_dotdot(const char *path) {
    for (const char *c = path; *c;) {
        size_t n = strcspn(c, "/");
        if (n == 2 && c[0] == '.' && c[1] == '.') return 1;
        c += n + (c[n] == '/');
    }
    return 0;
}

/* "1", "0.1", "0.10.2": digits in dot-separated groups. */
static int version_ok(const char *v) {
    for (;;) {
        size_t n = strspn(v, "0123456789");
        if (n == 0 || n > 9) return 0;
        v += n;
        if (*v == '\0') return 1;
        if (*v++ != '.') return 0;
    }
}

static int check_pack(manifest_parser *p, grpo_pack *pack) {
    if (!p->pack_line)
        return perr(p, 1, "no [pack] section; expected [pack] with name, version, abi and "
                    "library");
    static const char *const want[4] = {"name = <namespace of the ids>", "version = <x.y.z>",
                                        "abi = <major>.<minor>",
                                        "library = <file>.so (relative to the pack dir)"};
    mval *vals[4] = {&p->name, &p->version, &p->abi, &p->library};
    for (int i = 0; i < 4; i++)
        if (!vals[i]->text || !*vals[i]->text)
            return perr(p, vals[i]->text ? vals[i]->line : p->pack_line,
                        "[pack] has no %s; expected %s", pack_keys[i], want[i]);
    if (!name_chars_ok(p->name.text, "-"))
        return perr(p, p->name.line, "pack name '%s' is not a plain name; expected letters, "
                    "digits, '_' or '-' (no '.' or ':')", p->name.text);
    const char *abi = p->abi.text;
    size_t d1 = strspn(abi, "0123456789");
    size_t d2 = abi[d1] == '.' ? strspn(abi + d1 + 1, "0123456789") : 0;
    if (d1 == 0 || d1 > 5 || d2 == 0 || d2 > 5 || abi[d1 + 1 + d2] != '\0' ||
        sscanf(abi, "%u.%u", &pack->abi_major, &pack->abi_minor) != 2)
        return perr(p, p->abi.line, "abi '%s' is not MAJOR.MINOR; expected e.g. abi = %d.%d",
                    p->abi.text, GRPO_ABI_MAJOR, GRPO_ABI_MINOR);
    if (p->min_grpo.text && !version_ok(p->min_grpo.text))
        return perr(p, p->min_grpo.line, "min_grpo '%s' is not a version; expected e.g. "
                    "min_grpo = 0.1.0 (digits and dots)", p->min_grpo.text);
    if (p->library.text[0] == '/')
        return perr(p, p->library.line, "library '%s' is an absolute path; expected a file "
                    "name relative to the pack directory", p->library.text);
    if (has_dotdot(p->library.text))
        return perr(p, p->library.line, "library '%s' has a '..' component; expected a file "
                    "inside the pack directory", p->library.text);
    if (p->n_entries == 0)
        return perr(p, p->pack_line, "pack '%s' declares no rewards or models; expected at "
                    "least one [%s.NAME] section with kind = reward, model or env", p->name.text,
                    p->name.text);
    return 1;
}

/* Splits "A, B" architectures lines into e->architectures. */
static void split_architectures(const mentry *m, grpo_entry *e) {
    for (int j = 0; j < m->n_archs; j++) {
        char *s = m->archs[j].text;
        while (*s) {
            size_t n = strcspn(s, ",");
            char *a = s, *b = s + n;
            while (a < b && isspace((unsigned char)*a)) a++;
            while (b > a && isspace((unsigned char)b[-1])) b--;
            if (b > a) {
                e->architectures = xrealloc(e->architectures,
                                            (size_t)(e->n_architectures + 1) * sizeof(char *));
                char *arch = xrealloc(NULL, (size_t)(b - a) + 1);
                memcpy(arch, a, (size_t)(b - a));
                arch[b - a] = '\0';
                e->architectures[e->n_architectures++] = arch;
            }
            s += n + (s[n] == ',');
        }
    }
}

const char *grpo_entry_kind_name(grpo_entry_kind k) {
    return k == GRPO_KIND_MODEL ? "model" : k == GRPO_KIND_ENV ? "env" : "reward";
}

/* A reward entry's rows_independent (bool) and thread_safe (false, per_instance or true):
 * how the host may spread its score calls (registry.h). */
static int check_concurrency(manifest_parser *p, const mentry *m, grpo_entry *e) {
    const mval *ri = &m->rows_independent, *ts = &m->thread_safe;
    const mval *set = ri->text ? ri : ts->text ? ts : NULL;
    if (set && e->kind != GRPO_KIND_REWARD)
        return perr(p, set->line, "[%s] is a%s %s but sets %s; expected it only with kind = "
                    "reward", m->id, e->kind == GRPO_KIND_ENV ? "n" : "",
                    grpo_entry_kind_name(e->kind), ri->text ? "rows_independent" : "thread_safe");
    if (ri->text && !grpo_text_bool(ri->text, &e->rows_independent))
        return perr(p, ri->line, "rows_independent of [%s] is '%s'; expected true or false",
                    m->id, ri->text);
    static const char *const ts_words[] = {"false", "per_instance", "true"};
    for (int i = 0; ts->text && i < 3; i++)
        if (!strcmp(ts->text, ts_words[i])) e->thread_safe = (grpo_thread_safety)i;
    e->thread_safe_set = ts->text != NULL;
    if (ts->text && strcmp(ts->text, ts_words[e->thread_safe]) != 0)
        return perr(p, ts->line, "thread_safe of [%s] is '%s'; expected false (one call at a "
                    "time, on the trainer's thread), per_instance (separate instances may score "
                    "at once, on any thread) or true (one instance may score on several threads "
                    "at once)",
                    m->id, ts->text);
    return 1;
}

static int check_entry(manifest_parser *p, const mentry *m, grpo_entry *e) {
    size_t nl = strlen(p->name.text);
    if (strncmp(m->id, p->name.text, nl) != 0 || m->id[nl] != '.' || !m->id[nl + 1])
        return perr(p, m->line, "id '%s' does not start with the pack name; expected [%s.NAME]",
                    m->id, p->name.text);
    if (!name_chars_ok(m->id + nl + 1, "-."))
        return perr(p, m->line, "id '%s' has characters other than letters, digits, '_', '-' "
                    "and '.'", m->id);
    if (!m->kind.text)
        return perr(p, m->line, "[%s] has no kind; expected kind = reward, model or env", m->id);
    if (strcmp(m->kind.text, "reward") == 0)
        e->kind = GRPO_KIND_REWARD;
    else if (strcmp(m->kind.text, "model") == 0)
        e->kind = GRPO_KIND_MODEL;
    else if (strcmp(m->kind.text, "env") == 0)
        e->kind = GRPO_KIND_ENV;
    else
        return perr(p, m->kind.line, "kind '%s' of [%s] is unknown; expected reward, model or env",
                    m->kind.text, m->id);
    if (!m->description.text || !*m->description.text)
        return perr(p, m->description.text ? m->description.line : m->line,
                    "[%s] has no description; expected description = <one line>", m->id);
    if (m->n_archs && e->kind != GRPO_KIND_MODEL)
        return perr(p, m->archs[0].line, "[%s] is a%s %s but lists architectures; expected "
                    "architectures only with kind = model", m->id,
                    e->kind == GRPO_KIND_ENV ? "n" : "", grpo_entry_kind_name(e->kind));
    e->id = xstrdup(m->id);
    e->description = xstrdup(m->description.text);
    split_architectures(m, e);
    return check_concurrency(p, m, e);
}

/* The default lines of a key: a list takes each default line as an element (empty ones give
 * none); any other type takes one. */
static int collect_defaults(manifest_parser *p, const mkey *k, grpo_key_def *d) {
    if (k->n_defaults == 0) return 1;
    d->has_default = 1;
    if (d->type == GRPO_KEY_LIST) {
        for (int j = 0; j < k->n_defaults; j++) {
            if (!*k->defaults[j].text) continue;
            d->defaults = xrealloc(d->defaults, (size_t)(d->n_defaults + 1) * sizeof(char *));
            d->defaults[d->n_defaults++] = xstrdup(k->defaults[j].text);
        }
        return 1;
    }
    if (k->n_defaults > 1)
        return perr(p, k->defaults[1].line, "default is set twice in [%s:%s] (first at line "
                    "%d); expected one value (only type = list takes one line per element)",
                    k->entry_id, k->name, k->defaults[0].line);
    char *text = xstrdup(k->defaults[0].text);
    d->defaults = xrealloc(NULL, sizeof(char *));
    d->defaults[d->n_defaults++] = text;
    char why[256];
    if (!grpo_key_value_ok(d->type, text, why, sizeof why))
        return perr(p, k->defaults[0].line, "bad default for [%s:%s] (type %s): %s", k->entry_id,
                    k->name, grpo_key_type_name(d->type), why);
    return 1;
}

static int check_key(manifest_parser *p, const mkey *k, grpo_entry *entries, int n_entries) {
    grpo_entry *e = NULL;
    for (int i = 0; i < n_entries; i++)
        if (strcmp(entries[i].id, k->entry_id) == 0) e = &entries[i];
    if (!e)
        return perr(p, k->line, "[%s:%s] is a key of '%s', which no [%s] section declares; "
                    "expected [ID:KEY] after an [ID] section", k->entry_id, k->name, k->entry_id,
                    k->entry_id);
    if (!name_chars_ok(k->name, ""))
        return perr(p, k->line, "key name '%s' in [%s:%s] is not a plain name; expected letters, "
                    "digits and '_'", k->name, k->entry_id, k->name);
    if (!k->type.text)
        return perr(p, k->line, "[%s:%s] has no type; expected type = string, int, float, bool "
                    "or list", k->entry_id, k->name);
    int t = grpo_key_type_parse(k->type.text);
    if (t < 0)
        return perr(p, k->type.line, "type '%s' of [%s:%s] is unknown; expected string, int, "
                    "float, bool or list", k->type.text, k->entry_id, k->name);
    e->keys = xrealloc(e->keys, (size_t)(e->n_keys + 1) * sizeof *e->keys);
    grpo_key_def *d = &e->keys[e->n_keys++];
    memset(d, 0, sizeof *d);
    d->name = xstrdup(k->name);
    d->type = (grpo_key_type)t;
    d->help = xstrdup(k->help.text ? k->help.text : "");
    return collect_defaults(p, k, d);
}

/* ---- self-tests ------------------------------------------------------------------------- */

/* Decodes \n, \t and \\ (a newline cannot be written in an INI value otherwise); NULL when
 * another escape follows a backslash. */
static char *unescape(const char *s) {
    char *out = xrealloc(NULL, strlen(s) + 1), *w = out;
    for (; *s; s++) {
        if (*s != '\\') {
            *w++ = *s;
            continue;
        }
        char c = *++s;
        if (c != 'n' && c != 't' && c != '\\') {
            free(out);
            return NULL;
        }
        *w++ = c == 'n' ? '\n' : c == 't' ? '\t' : '\\';
    }
    *w = '\0';
    return out;
}

/* A JSON string literal of s (for the "answer" field). */
static char *json_string(const char *s) {
    char *out = xrealloc(NULL, 6 * strlen(s) + 3), *w = out;
    *w++ = '"';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') *w++ = '\\', *w++ = (char)c;
        else if (c == '\n') *w++ = '\\', *w++ = 'n';
        else if (c == '\t') *w++ = '\\', *w++ = 't';
        else if (c < 0x20) w += sprintf(w, "\\u%04x", c);
        else *w++ = (char)c;
    }
    *w++ = '"', *w = '\0';
    return out;
}

static void push_pair(char ***keys, char ***vals, int *n, char *key, char *val) {
    *keys = xrealloc(*keys, (size_t)(*n + 1) * sizeof **keys);
    *vals = xrealloc(*vals, (size_t)(*n + 1) * sizeof **vals);
    (*keys)[*n] = key, (*vals)[(*n)++] = val;
}

/* One line of a self-test into st; 0 (error recorded) when it is not valid. */
static int test_line(manifest_parser *p, const mtest *m, int j, const grpo_entry *e,
                     grpo_selftest *st) {
    const char *k = m->keys[j], *v = m->values[j];
    int line = m->lines[j];
    char **text = strcmp(k, "prompt") == 0       ? &st->prompt
                  : strcmp(k, "completion") == 0 ? &st->completion
                                                 : NULL;
    if (text || strcmp(k, "answer") == 0) {
        char *u = unescape(v);
        if (!u)
            return perr(p, line, "[%s:%s] %s has a backslash before something other than n, t or "
                        "\\; expected \\n, \\t or \\\\", m->entry_id, m->name, k);
        if (text && *text) {
            free(u);
            return perr(p, line, "'%s' is set twice in [%s:%s]; expected one value", k,
                        m->entry_id, m->name);
        }
        if (text) {
            *text = u;
        } else {
            push_pair(&st->field_keys, &st->field_json, &st->n_fields, xstrdup("answer"),
                      json_string(u));
            free(u);
        }
        return 1;
    }
    if (strcmp(k, "expect") == 0 || strcmp(k, "tolerance") == 0) {
        char *end; /* any double: expect may be nan (or inf); tolerance >= 0 */
        double x = strtod(v, &end);
        if (end == v || *end || (strcmp(k, "tolerance") == 0 && !(x >= 0)))
            return perr(p, line, "%s '%s' of [%s:%s] is not a number; expected e.g. %s", k, v,
                        m->entry_id, m->name, k[0] == 'e' ? "expect = 0.5 (or nan)" :
                        "tolerance = 1e-5");
        *(k[0] == 'e' ? &st->expect : &st->tolerance) = x;
        return 1;
    }
    if (strncmp(k, "field.", 6) == 0 && name_chars_ok(k + 6, "")) {
        push_pair(&st->field_keys, &st->field_json, &st->n_fields, xstrdup(k + 6), xstrdup(v));
        return 1;
    }
    if (strncmp(k, "key.", 4) == 0) {
        const grpo_key_def *d = NULL;
        for (int i = 0; i < e->n_keys && !d; i++)
            if (strcmp(e->keys[i].name, k + 4) == 0) d = &e->keys[i];
        char why[256];
        if (!d)
            return perr(p, line, "[%s:%s] sets %s, but %s has no key '%s'; expected one of its "
                        "[%s:KEY] sections", m->entry_id, m->name, k, e->id, k + 4, e->id);
        if (!grpo_key_value_ok(d->type, v, why, sizeof why))
            return perr(p, line, "[%s:%s] %s: %s (type %s)", m->entry_id, m->name, k, why,
                        grpo_key_type_name(d->type));
        push_pair(&st->cfg_keys, &st->cfg_values, &st->n_cfg, xstrdup(k + 4), xstrdup(v));
        return 1;
    }
    return perr(p, line, "unknown key '%s' in [%s:%s]; expected one of prompt, completion, "
                "answer, expect, tolerance, field.NAME (JSON), key.NAME", k, m->entry_id,
                m->name);
}

static int check_test(manifest_parser *p, const mtest *m, grpo_entry *entries, int n_entries) {
    grpo_entry *e = NULL;
    for (int i = 0; i < n_entries; i++)
        if (strcmp(entries[i].id, m->entry_id) == 0) e = &entries[i];
    if (!e || e->kind != GRPO_KIND_REWARD)
        return perr(p, m->line, "[%s:%s] is a self-test of '%s', which %s%s%s; expected "
                    "[ID:test.N] after a reward's [ID] section", m->entry_id, m->name, m->entry_id,
                    e ? "is a" : "no [ID] section declares", !e ? "" :
                    e->kind == GRPO_KIND_ENV ? "n env" : " model",
                    e ? " (only rewards have self-tests)" : "");
    e->tests = xrealloc(e->tests, (size_t)(e->n_tests + 1) * sizeof *e->tests);
    grpo_selftest *st = &e->tests[e->n_tests++];
    memset(st, 0, sizeof *st);
    st->name = xstrdup(m->name);
    st->line = m->line;
    st->expect = NAN;
    int has_expect = 0;
    st->tolerance = 1e-5;
    for (int j = 0; j < m->n; j++) {
        has_expect |= strcmp(m->keys[j], "expect") == 0;
        if (!test_line(p, m, j, e, st)) return 0;
    }
    if (!st->completion || !has_expect)
        return perr(p, m->line, "[%s:%s] has no %s; expected completion = <text> and expect = "
                    "<reward or nan>", m->entry_id, m->name, st->completion ? "expect" :
                    "completion");
    if (!st->prompt) st->prompt = xstrdup("");
    return 1;
}

/* Absolute directory of path (realpath when it exists). */
static char *dir_of(const char *path) {
    char *copy = xstrdup(path);
    char *slash = strrchr(copy, '/');
    if (!slash)
        strcpy(copy, ".");
    else if (slash == copy)
        slash[1] = '\0';
    else
        *slash = '\0';
    char *abs = realpath(copy, NULL);
    if (abs) {
        free(copy);
        return abs;
    }
    return copy;
}

static char *join_path(const char *dir, const char *file) {
    size_t a = strlen(dir), b = strlen(file);
    char *s = xrealloc(NULL, a + b + 2);
    sprintf(s, "%s%s%s", dir, a && dir[a - 1] == '/' ? "" : "/", file);
    return s;
}

/* A library that exists must resolve (through links) to a file inside the pack directory, so a
 * link cannot smuggle in code from elsewhere; a missing one is left for loading to report. */
static int check_library_inside(manifest_parser *p, const grpo_pack *pack) {
    char *real = realpath(pack->library_path, NULL);
    char *dir = realpath(pack->dir, NULL);
    size_t n = dir ? strlen(dir) : 0;
    int inside = !real || (dir && strncmp(real, dir, n) == 0 &&
                           (real[n] == '/' || (n == 1 && dir[0] == '/')));
    if (!inside)
        perr(p, p->library.line, "library '%s' resolves to %s, outside the pack directory %s; "
             "expected a file inside it", p->library.text, real, dir ? dir : pack->dir);
    free(real), free(dir);
    return inside;
}

static int build_pack(manifest_parser *p, grpo_pack *pack) {
    if (!check_pack(p, pack)) return 0;
    pack->entries = xrealloc(NULL, (size_t)p->n_entries * sizeof *pack->entries);
    memset(pack->entries, 0, (size_t)p->n_entries * sizeof *pack->entries);
    for (int i = 0; i < p->n_entries; i++) {
        pack->entries[i].pack = pack;
        pack->n_entries = i + 1;
        if (!check_entry(p, &p->entries[i], &pack->entries[i])) return 0;
    }
    for (int i = 0; i < p->n_keys; i++)
        if (!check_key(p, &p->keys[i], pack->entries, pack->n_entries)) return 0;
    for (int i = 0; i < p->n_tests; i++)
        if (!check_test(p, &p->tests[i], pack->entries, pack->n_entries)) return 0;
    pack->name = xstrdup(p->name.text);
    pack->version = xstrdup(p->version.text);
    mval *meta[4] = {&p->author, &p->license, &p->homepage, &p->min_grpo};
    char **dst[4] = {&pack->author, &pack->license, &pack->homepage, &pack->min_grpo};
    for (int i = 0; i < 4; i++) *dst[i] = meta[i]->text ? xstrdup(meta[i]->text) : NULL;
    pack->notes = p->notes, pack->n_notes = p->n_notes;
    p->notes = NULL, p->n_notes = 0;
    const char *base = strrchr(p->path, '/');
    pack->dir = dir_of(p->path);
    pack->manifest_path = join_path(pack->dir, base ? base + 1 : p->path);
    pack->library_path = join_path(pack->dir, p->library.text);
    return check_library_inside(p, pack);
}

/* Gives the document's sections and keys their meaning, in file order. */
static void read_doc(manifest_parser *p, const grpo_ini_doc *doc) {
    for (int i = 0; i < doc->n_sections && !p->failed; i++) {
        const grpo_ini_section *sec = &doc->sections[i];
        p->lineno = sec->line;
        if (sec->line == 0) { /* keys above the first [section] */
            if (sec->n_entries)
                perr(p, sec->entries[0].line, "key '%s' comes before any section; expected it "
                     "under [pack] or an entry's section", sec->entries[0].key);
            continue;
        }
        section_begin(p, sec->name);
        for (int j = 0; j < sec->n_entries && !p->failed; j++) {
            p->lineno = sec->entries[j].line;
            manifest_key(p, sec->entries[j].key, sec->entries[j].value);
        }
    }
}

int grpo_manifest_parse(const char *manifest_path, grpo_pack *pack, grpo_error *err) {
    memset(pack, 0, sizeof *pack);
    FILE *f = fopen(manifest_path, "re"); /* an unreadable manifest is an I/O error, not INVALID */
    if (!f)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot open the pack manifest: %s",
                              manifest_path, strerror(errno));
    fclose(f);
    manifest_parser p = {0};
    p.path = manifest_path;
    p.err = err;
    grpo_ini_doc doc;
    grpo_diag diag = {0};
    if (grpo_ini_read_file(&doc, manifest_path, &diag) != 0) {
        grpo_error_set(err, GRPO_ERR_INVALID, "%s",
                       diag.n ? diag.msg[0] : "cannot read the pack manifest");
        p.failed = 1;
    }
    grpo_diag_free(&diag);
    if (!p.failed) read_doc(&p, &doc);
    grpo_ini_doc_free(&doc);
    if (!p.failed) build_pack(&p, pack);
    int failed = p.failed;
    parser_free(&p);
    if (failed) {
        grpo_pack_free(pack);
        return err ? err->status : GRPO_ERR_INVALID;
    }
    return GRPO_OK;
}

void grpo_manifest_ids(const char *manifest_path, char ***ids, int *n_ids) {
    *ids = NULL, *n_ids = 0;
    FILE *f = fopen(manifest_path, "re");
    char *line = NULL;
    size_t cap = 0;
    while (f && getline(&line, &cap, f) > 0) {
        char *t = line + strspn(line, " \t");
        if (*t != '[') continue;
        size_t n = strcspn(t + 1, "]:;#\r\n");
        if (t[1 + n] != ']' || n == 0 || (n == 4 && strncmp(t + 1, "pack", 4) == 0)) continue;
        *ids = xrealloc(*ids, (size_t)(*n_ids + 1) * sizeof **ids);
        char *id = xrealloc(NULL, n + 1);
        memcpy(id, t + 1, n);
        id[n] = '\0';
        (*ids)[(*n_ids)++] = id;
    }
    free(line);
    if (f) fclose(f);
}

void grpo_pack_free(grpo_pack *pack) {
    if (!pack) return;
    for (int i = 0; i < pack->n_entries; i++) {
        grpo_entry *e = &pack->entries[i];
        free(e->id), free(e->description);
        for (int j = 0; j < e->n_architectures; j++) free(e->architectures[j]);
        free(e->architectures);
        for (int j = 0; j < e->n_keys; j++) {
            grpo_key_def *d = &e->keys[j];
            free(d->name), free(d->help);
            for (int k = 0; k < d->n_defaults; k++) free(d->defaults[k]);
            free(d->defaults);
        }
        free(e->keys);
        for (int j = 0; j < e->n_tests; j++) {
            grpo_selftest *t = &e->tests[j];
            free(t->name), free(t->prompt), free(t->completion);
            for (int k = 0; k < t->n_fields; k++) free(t->field_keys[k]), free(t->field_json[k]);
            for (int k = 0; k < t->n_cfg; k++) free(t->cfg_keys[k]), free(t->cfg_values[k]);
            free(t->field_keys), free(t->field_json), free(t->cfg_keys), free(t->cfg_values);
        }
        free(e->tests);
    }
    free(pack->entries);
    free(pack->name), free(pack->version), free(pack->dir), free(pack->manifest_path),
        free(pack->library_path);
    free(pack->author), free(pack->license), free(pack->homepage), free(pack->min_grpo);
    for (int i = 0; i < pack->n_notes; i++) free(pack->notes[i]);
    free(pack->notes);
    /* pack->handle stays open on purpose: descriptors handed out may still be in use */
    memset(pack, 0, sizeof *pack);
}
