/* ini_reader.c — INI through the system inih, one counted line at a time (see ini_reader.h). */
#include "io/ini_reader.h"

#include <ini.h>

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- diagnostics ------------------------------------------------------------------------ */

void grpo_diag_add(grpo_diag *d, const char *fmt, ...) {
    if (!d) return;
    if (d->n == d->cap) {
        int cap = d->cap ? 2 * d->cap : 8;
        char **m = realloc(d->msg, (size_t)cap * sizeof *m);
        if (!m) return;
        d->msg = m, d->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (!s) return;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)len + 1, fmt, ap);
    va_end(ap);
    d->msg[d->n++] = s;
}

void grpo_diag_free(grpo_diag *d) {
    for (int i = 0; i < d->n; i++) free(d->msg[i]);
    free(d->msg);
    memset(d, 0, sizeof *d);
}

/* ---- the document ----------------------------------------------------------------------- */

static grpo_ini_section *doc_add_section(grpo_ini_doc *doc, const char *name, size_t n, int line) {
    if (doc->n_sections == doc->cap_sections) {
        int cap = doc->cap_sections ? 2 * doc->cap_sections : 16;
        grpo_ini_section *s = realloc(doc->sections, (size_t)cap * sizeof *s);
        if (!s) return NULL;
        doc->sections = s, doc->cap_sections = cap;
    }
    grpo_ini_section *s = &doc->sections[doc->n_sections];
    memset(s, 0, sizeof *s);
    if (!(s->name = strndup(name, n))) return NULL;
    s->line = line;
    doc->n_sections++;
    return s;
}

static grpo_ini_entry *section_add_entry(grpo_ini_section *s, const char *key, const char *value,
                                         int line) {
    if (s->n_entries == s->cap_entries) {
        int cap = s->cap_entries ? 2 * s->cap_entries : 16;
        grpo_ini_entry *e = realloc(s->entries, (size_t)cap * sizeof *e);
        if (!e) return NULL;
        s->entries = e, s->cap_entries = cap;
    }
    grpo_ini_entry *e = &s->entries[s->n_entries];
    e->key = strdup(key), e->value = strdup(value);
    if (!e->key || !e->value) {
        free(e->key), free(e->value);
        return NULL;
    }
    e->line = e->last_line = line;
    s->n_entries++;
    return e;
}

static int entry_append(grpo_ini_entry *e, const char *more, int line) {
    size_t a = strlen(e->value), b = strlen(more);
    char *v = realloc(e->value, a + b + 1);
    if (!v) return 0;
    memcpy(v + a, more, b + 1);
    e->value = v, e->last_line = line;
    return 1;
}

void grpo_ini_doc_free(grpo_ini_doc *doc) {
    for (int i = 0; i < doc->n_sections; i++) {
        grpo_ini_section *s = &doc->sections[i];
        for (int j = 0; j < s->n_entries; j++) free(s->entries[j].key), free(s->entries[j].value);
        free(s->entries), free(s->name);
    }
    free(doc->sections), free(doc->path);
    memset(doc, 0, sizeof *doc);
}

int grpo_ini_doc_set(grpo_ini_doc *doc, const char *section, const char *key, const char *value,
                     int line, int replace) {
    grpo_ini_section *s = NULL;
    for (int i = 0; i < doc->n_sections && !s; i++)
        if (strcmp(doc->sections[i].name, section) == 0) s = &doc->sections[i];
    if (!s && !(s = doc_add_section(doc, section, strlen(section), line))) return -1;
    for (int j = 0; replace && j < s->n_entries;) {
        if (strcmp(s->entries[j].key, key) != 0) {
            j++;
            continue;
        }
        free(s->entries[j].key), free(s->entries[j].value);
        memmove(&s->entries[j], &s->entries[j + 1],
                (size_t)(s->n_entries - j - 1) * sizeof *s->entries);
        s->n_entries--;
    }
    return section_add_entry(s, key, value, line) ? 0 : -1;
}

/* ---- line classification: what inih 55 will do with one line --------------------------- */

typedef enum line_kind {
    LINE_BLANK,
    LINE_COMMENT,
    LINE_SECTION,
    LINE_KEY,
    LINE_CONTINUATION,
    LINE_BAD,     /* neither: inih reports an error; we already did */
    LINE_SKIPPED, /* too long, bad bytes: handed to inih as a blank line */
} line_kind;

typedef struct reader {
    const char *name;     /* for messages */
    const char *text;     /* [len] the whole file */
    size_t len, pos;
    int line;             /* current physical line, 1-based */
    line_kind kind;       /* of the current line */
    int in_key;           /* inih's prev_name is set: an indented line continues a key */
    int gap_line;         /* a blank/comment line since the last key line (its number), or 0 */
    int skip_continuation;/* the key being continued was refused: drop its continuations */
    int first_bad_line;   /* first line we reported as malformed */
    grpo_ini_doc *doc;
    grpo_diag *diag;
    int n_errors, oom;
} reader;

static void reader_error(reader *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void reader_error(reader *r, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    grpo_diag_add(r->diag, "%s:%d: %s", r->name, r->line, what);
    r->n_errors++;
}

/* Like inih's find_chars_or_comment: the first char of chars, or the ';' of an inline comment
 * (a ';' preceded by whitespace), or the end. */
static const char *find_or_comment(const char *s, const char *e, const char *chars) {
    int was_space = 0;
    for (; s < e; s++) {
        if (chars && strchr(chars, *s)) return s;
        if (was_space && *s == ';') return s;
        was_space = isspace((unsigned char)*s);
    }
    return e;
}

/* Checks UTF-8 well-formedness of [s, e); returns the offset of the first bad byte or -1. */
static long utf8_bad_offset(const unsigned char *s, const unsigned char *e) {
    const unsigned char *p = s;
    while (p < e) {
        unsigned c = *p;
        int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
        if (n < 0 || (n == 1 && c < 0xC2) || (n == 3 && c > 0xF4) || e - p <= n)
            return (long)(p - s);
        for (int k = 1; k <= n; k++)
            if ((p[k] & 0xC0) != 0x80) return (long)(p - s);
        if ((n == 2 && c == 0xE0 && p[1] < 0xA0) || (n == 2 && c == 0xED && p[1] >= 0xA0) ||
            (n == 3 && c == 0xF0 && p[1] < 0x90) || (n == 3 && c == 0xF4 && p[1] >= 0x90))
            return (long)(p - s);
        p += n + 1;
    }
    return -1;
}

/* Decides what inih will make of the line [b, e) and reports what inih would get wrong. Records
 * section headers in the document (inih does not tell its handler about them). */
static void classify(reader *r, const char *b, const char *e) {
    const char *s = b;
    while (s < e && isspace((unsigned char)*s)) s++;
    const char *t = e;
    while (t > s && isspace((unsigned char)t[-1])) t--;
    if (s == t) {
        r->kind = LINE_BLANK;
    } else if (*s == ';' || *s == '#') {
        r->kind = LINE_COMMENT;
    } else if (r->in_key && s > b) {
        r->kind = LINE_CONTINUATION;
        const char *c = find_or_comment(s, t, NULL);
        if (r->skip_continuation) return;
        if (r->gap_line)
            reader_error(r, "indented line continues the key above across the blank or comment "
                            "line %d; remove the indentation if it starts a new key",
                         r->gap_line), r->kind = LINE_SKIPPED;
        else if (c < t)
            reader_error(r, "';' after whitespace on a continuation line: inih would keep the "
                            "comment in the value; put comments on their own line"),
                r->kind = LINE_SKIPPED;
        if (r->kind == LINE_SKIPPED) r->skip_continuation = 1;
    } else if (*s == '[') {
        const char *c = find_or_comment(s + 1, t, "]");
        if (c == t || *c != ']') {
            reader_error(r, "expected ']' to close the section header");
            r->kind = LINE_BAD;
            return;
        }
        r->kind = LINE_SECTION;
        r->in_key = 0, r->gap_line = 0, r->skip_continuation = 0;
        int n = (int)(c - (s + 1));
        if (n > GRPO_INI_MAX_SECTION_CHARS)
            reader_error(r, "section name '%.*s' is %d characters long; inih keeps at most %d",
                         n, s + 1, n, GRPO_INI_MAX_SECTION_CHARS);
        if (!doc_add_section(r->doc, s + 1, (size_t)n, r->line)) r->oom = 1;
    } else {
        const char *c = find_or_comment(s, t, "=:");
        if (c == t || (*c != '=' && *c != ':')) {
            int n = (int)(t - s);
            reader_error(r, "expected 'key = value', a [section] header or a ';' comment; got "
                            "'%.*s%s'", n > 60 ? 60 : n, s, n > 60 ? "..." : "");
            r->kind = LINE_BAD;
            return;
        }
        r->kind = LINE_KEY;
        r->in_key = 1, r->gap_line = 0, r->skip_continuation = 0;
    }
    if ((r->kind == LINE_BLANK || r->kind == LINE_COMMENT) && r->in_key && !r->gap_line)
        r->gap_line = r->line;
}

/* The ini_reader handed to ini_parse_stream: one physical line per call, so inih's line count
 * and ours agree. A line inih cannot take whole is reported and replaced by a blank line. */
static char *read_line(char *buf, int num, void *stream) {
    reader *r = stream;
    if (r->pos >= r->len) return NULL;
    const char *b = r->text + r->pos;
    const char *nl = memchr(b, '\n', r->len - r->pos);
    const char *e = nl ? nl : r->text + r->len;
    r->pos = (size_t)(e - r->text) + (nl != NULL);
    if (e > b && e[-1] == '\r') e--;
    r->line++;
    if (r->line == 1 && e - b >= 3 && memcmp(b, "\xEF\xBB\xBF", 3) == 0) b += 3;
    size_t n = (size_t)(e - b);
    long bad;
    r->kind = LINE_SKIPPED;
    if ((bad = utf8_bad_offset((const unsigned char *)b, (const unsigned char *)e)) >= 0) {
        reader_error(r, "invalid UTF-8 at byte %ld of the line", bad + 1);
    } else if (n > (size_t)(num - 1)) {
        reader_error(r, "line is %zu characters long; the limit is %d (split a long value over "
                        "indented continuation lines)",
                     n, num - 1);
    } else {
        classify(r, b, e);
    }
    if (r->kind == LINE_BAD && !r->first_bad_line) r->first_bad_line = r->line;
    if (r->kind == LINE_SKIPPED) {
        /* The indented lines after a refused line belong to it: drop them without more errors
         * (inih sees blank lines, so it neither appends them to an earlier key nor fails). */
        r->in_key = 1, r->skip_continuation = 1;
    }
    if (r->kind == LINE_SKIPPED || (r->kind == LINE_CONTINUATION && r->skip_continuation)) {
        buf[0] = '\0';
        return buf;
    }
    memcpy(buf, b, n);
    buf[n] = '\0';
    return buf;
}

static int on_key(void *user, const char *section, const char *name, const char *value) {
    reader *r = user;
    (void)section; /* ours is the full name; inih's may be truncated */
    grpo_ini_doc *doc = r->doc;
    if (r->kind == LINE_CONTINUATION) {
        if (r->skip_continuation) return 1;
        grpo_ini_section *s = doc->n_sections ? &doc->sections[doc->n_sections - 1] : NULL;
        if (!s || !s->n_entries || !entry_append(&s->entries[s->n_entries - 1], value, r->line))
            r->oom = 1;
        return 1;
    }
    if (r->kind != LINE_KEY) {
        reader_error(r, "internal: inih read a key here but the line reader did not");
        return 1;
    }
    if (!doc->n_sections && !doc_add_section(doc, "", 0, 0)) return r->oom = 1, 1;
    if (!section_add_entry(&doc->sections[doc->n_sections - 1], name, value, r->line)) r->oom = 1;
    return 1;
}

int grpo_ini_read_string(grpo_ini_doc *doc, const char *name, const char *text, grpo_diag *diag) {
    memset(doc, 0, sizeof *doc);
    reader r = {.name = name, .text = text, .len = strlen(text), .doc = doc, .diag = diag};
    if (!(doc->path = strdup(name))) return -1;
    int rc = ini_parse_stream(read_line, &r, on_key, &r);
    doc->n_lines = r.line;
    if (rc > 0 && rc != r.first_bad_line) {
        grpo_diag_add(diag, "%s:%d: inih rejected this line", name, rc);
        r.n_errors++;
    } else if (rc < 0 || r.oom) {
        grpo_diag_add(diag, "%s: out of memory while reading", name);
        r.n_errors++;
    }
    return r.n_errors ? -1 : 0;
}

int grpo_ini_read_file(grpo_ini_doc *doc, const char *path, grpo_diag *diag) {
    enum { MAX_BYTES = 16 << 20 };
    memset(doc, 0, sizeof *doc);
    FILE *f = fopen(path, "rbe");
    if (!f) {
        grpo_diag_add(diag, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    char *text = malloc(MAX_BYTES + 1);
    size_t n = text ? fread(text, 1, MAX_BYTES + 1, f) : 0;
    int bad = !text ? 1 : ferror(f) ? 2 : n > MAX_BYTES ? 3 : 0;
    fclose(f);
    if (bad) {
        grpo_diag_add(diag, "%s: %s", path,
                      bad == 1   ? "out of memory"
                      : bad == 2 ? "read error"
                                 : "larger than 16 MiB; an INI file is expected");
        free(text);
        return -1;
    }
    text[n] = '\0';
    if (memchr(text, '\0', n)) { /* the line reader works on a C string: report NULs here */
        const char *z = memchr(text, '\0', n);
        int line = 1;
        for (const char *p = text; p < z; p++) line += *p == '\n';
        grpo_diag_add(diag, "%s:%d: NUL byte in the line; is this a text file?", path, line);
        free(text);
        return -1;
    }
    int rc = grpo_ini_read_string(doc, path, text, diag);
    free(text);
    return rc;
}
