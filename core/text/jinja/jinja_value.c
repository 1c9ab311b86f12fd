/* jinja_value.c — template values with Python semantics: str(), repr(), json.dumps, ==, truth,
 * plus the arena they live in and a JSON reader that keeps ints and floats apart (json.loads). */
#include "text/jinja/jinja.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena --------------------------------------------------------------------------------- */
struct jarena_block {
    jarena_block *next;
    size_t used, cap;
    max_align_t data[];
};

void *jarena_alloc(jarena *a, size_t n) {
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    jarena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        b = malloc(sizeof *b + cap);
        if (!b) {
            fprintf(stderr, "grpo: out of memory in the chat template arena (%zu bytes)\n", cap);
            abort();
        }
        b->next = a->head, b->used = 0, b->cap = cap;
        a->head = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

char *jarena_strdup(jarena *a, const char *s, size_t n) {
    char *p = jarena_alloc(a, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void jarena_free(jarena *a) {
    for (jarena_block *b = a->head, *next; b; b = next) next = b->next, free(b);
    a->head = NULL;
}

/* ---- byte buffer --------------------------------------------------------------------------- */
void jbuf_put(jbuf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) {
            fprintf(stderr, "grpo: out of memory growing a text buffer to %zu bytes\n", cap);
            abort();
        }
        b->data = p, b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}
void jbuf_puts(jbuf *b, const char *s) { jbuf_put(b, s, strlen(s)); }
void jbuf_putc(jbuf *b, char c) { jbuf_put(b, &c, 1); }
static void jbuf_printf(jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jbuf_printf(jbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        jbuf_put(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) abort();
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    jbuf_put(b, big, (size_t)n);
    free(big);
}

/* ---- constructors -------------------------------------------------------------------------- */
jv jv_undef(const char *name) {
    jv v = {.type = JV_UNDEF};
    v.u.str.s = name;
    v.u.str.n = name ? strlen(name) : 0;
    return v;
}
jv jv_none(void) { return (jv){.type = JV_NONE}; }
jv jv_bool(int b) { return (jv){.type = JV_BOOL, .u.i = b != 0}; }
jv jv_int(int64_t i) { return (jv){.type = JV_INT, .u.i = i}; }
jv jv_float(double f) { return (jv){.type = JV_FLOAT, .u.f = f}; }
jv jv_str(const char *s, size_t n) {
    jv v = {.type = JV_STR};
    v.u.str.s = s, v.u.str.n = n;
    return v;
}
jv jv_cstr(const char *s) { return jv_str(s, strlen(s)); }

jv jv_list_new(jarena *a, size_t cap) {
    jv v = {.type = JV_LIST};
    v.u.list = jarena_alloc(a, sizeof(jlist));
    if (cap) {
        v.u.list->items = jarena_alloc(a, cap * sizeof(jv));
        v.u.list->cap = cap;
    }
    return v;
}

jv jv_dict_new(jarena *a, int type) {
    jv v = {.type = type};
    v.u.dict = jarena_alloc(a, sizeof(jdict));
    return v;
}

void jlist_push(jarena *a, jlist *l, jv v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        jv *items = jarena_alloc(a, cap * sizeof(jv));
        if (l->n) memcpy(items, l->items, l->n * sizeof(jv));
        l->items = items, l->cap = cap;
    }
    l->items[l->n++] = v;
}

jv *jdict_get(const jdict *d, jv key) {
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->keys[i], key)) return &d->vals[i];
    return NULL;
}

jv *jdict_get_str(const jdict *d, const char *key, size_t n) {
    for (size_t i = 0; i < d->n; i++)
        if (d->keys[i].type == JV_STR && d->keys[i].u.str.n == n &&
            memcmp(d->keys[i].u.str.s, key, n) == 0)
            return &d->vals[i];
    return NULL;
}

void jdict_set(jarena *a, jdict *d, jv key, jv val) {
    jv *slot = jdict_get(d, key);
    if (slot) {
        *slot = val;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        jv *keys = jarena_alloc(a, cap * sizeof(jv)), *vals = jarena_alloc(a, cap * sizeof(jv));
        if (d->n)
            memcpy(keys, d->keys, d->n * sizeof(jv)), memcpy(vals, d->vals, d->n * sizeof(jv));
        d->keys = keys, d->vals = vals, d->cap = cap;
    }
    d->keys[d->n] = key, d->vals[d->n] = val, d->n++;
}

/* ---- Python semantics ---------------------------------------------------------------------- */
const char *jv_type_name(int type) {
    switch (type) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return "list";
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    case JV_FUNC: return "function";
    case JV_METHOD: return "method";
    case JV_MACRO: return "Macro";
    default: return "?";
    }
}

int jv_truthy(jv v) {
    switch (v.type) {
    case JV_UNDEF:
    case JV_NONE: return 0;
    case JV_BOOL:
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.str.n != 0;
    case JV_LIST: return v.u.list->n != 0;
    case JV_DICT: return v.u.dict->n != 0;
    default: return 1;
    }
}

static int is_number(jv v) { return v.type == JV_BOOL || v.type == JV_INT || v.type == JV_FLOAT; }

int jv_equal(jv a, jv b) {
    if (is_number(a) && is_number(b)) {
        if (a.type == JV_FLOAT || b.type == JV_FLOAT)
            return (a.type == JV_FLOAT ? a.u.f : (double)a.u.i) ==
                   (b.type == JV_FLOAT ? b.u.f : (double)b.u.i);
        return a.u.i == b.u.i;
    }
    if (a.type != b.type) return 0;
    switch (a.type) {
    case JV_UNDEF:
    case JV_NONE: return 1;
    case JV_STR: return a.u.str.n == b.u.str.n && memcmp(a.u.str.s, b.u.str.s, a.u.str.n) == 0;
    case JV_LIST:
        if (a.u.list->n != b.u.list->n || a.u.list->is_tuple != b.u.list->is_tuple) return 0;
        for (size_t i = 0; i < a.u.list->n; i++)
            if (!jv_equal(a.u.list->items[i], b.u.list->items[i])) return 0;
        return 1;
    case JV_DICT:
        if (a.u.dict->n != b.u.dict->n) return 0;
        for (size_t i = 0; i < a.u.dict->n; i++) {
            jv *o = jdict_get(b.u.dict, a.u.dict->keys[i]);
            if (!o || !jv_equal(a.u.dict->vals[i], *o)) return 0;
        }
        return 1;
    case JV_NS: return a.u.dict == b.u.dict;
    case JV_FUNC: return strcmp(a.u.func, b.u.func) == 0;
    default: return 0;
    }
}

/* Python's float repr: the shortest digits that round-trip, exponent form when exp < -4 or
 * exp >= 16, otherwise positional with at least one digit after the point. */
static void jv_float_repr(jbuf *out, double f) {
    if (isnan(f)) return jbuf_puts(out, "nan");
    if (isinf(f)) return jbuf_puts(out, f < 0 ? "-inf" : "inf");
    char tmp[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break; /* tmp: our own "%e" text, a number */
    }
    /* tmp = [-]d[.ddd]e[+-]xx: split into sign, digits, exponent */
    const char *p = tmp;
    int neg = 0;
    if (*p == '-') neg = 1, p++;
    char digits[32];
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    int exp = (int)strtol(p + 1, NULL, 10); /* "%e"'s own exponent: [+-]dd or [+-]ddd */
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    if (neg) jbuf_putc(out, '-');
    if (exp < -4 || exp >= 16) {
        jbuf_putc(out, digits[0]);
        if (nd > 1) jbuf_putc(out, '.'), jbuf_put(out, digits + 1, (size_t)nd - 1);
        jbuf_printf(out, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    } else if (exp < 0) {
        jbuf_puts(out, "0.");
        for (int i = 0; i < -exp - 1; i++) jbuf_putc(out, '0');
        jbuf_put(out, digits, (size_t)nd);
    } else {
        for (int i = 0; i <= exp; i++) jbuf_putc(out, i < nd ? digits[i] : '0');
        jbuf_putc(out, '.');
        if (nd > exp + 1)
            jbuf_put(out, digits + exp + 1, (size_t)(nd - exp - 1));
        else
            jbuf_putc(out, '0');
    }
}

static void repr_str(jbuf *out, const char *s, size_t n) {
    int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    jbuf_putc(out, q);
    for (size_t i = 0; i < n;) {
        size_t adv;
        uint32_t cp = ju8_decode(s + i, n - i, &adv);
        if (cp == (uint32_t)q || cp == '\\')
            jbuf_putc(out, '\\'), jbuf_putc(out, (char)cp);
        else if (cp == '\n')
            jbuf_puts(out, "\\n");
        else if (cp == '\r')
            jbuf_puts(out, "\\r");
        else if (cp == '\t')
            jbuf_puts(out, "\\t");
        else if (cp < 0x20 || (cp >= 0x7f && cp < 0xa1) || cp == 0xad)
            jbuf_printf(out, "\\x%02x", cp);
        else
            jbuf_put(out, s + i, adv);
        i += adv;
    }
    jbuf_putc(out, q);
}

/* repr(v) appended to out. */
static void jv_repr(jbuf *out, jv v) {
    switch (v.type) {
    case JV_STR: repr_str(out, v.u.str.s, v.u.str.n); return;
    case JV_LIST: {
        jlist *l = v.u.list;
        jbuf_putc(out, l->is_tuple ? '(' : '[');
        for (size_t i = 0; i < l->n; i++) {
            if (i) jbuf_puts(out, ", ");
            jv_repr(out, l->items[i]);
        }
        if (l->is_tuple && l->n == 1) jbuf_putc(out, ',');
        jbuf_putc(out, l->is_tuple ? ')' : ']');
        return;
    }
    case JV_DICT: {
        jdict *d = v.u.dict;
        jbuf_putc(out, '{');
        for (size_t i = 0; i < d->n; i++) {
            if (i) jbuf_puts(out, ", ");
            jv_repr(out, d->keys[i]);
            jbuf_puts(out, ": ");
            jv_repr(out, d->vals[i]);
        }
        jbuf_putc(out, '}');
        return;
    }
    case JV_NS: {
        jdict *d = v.u.dict;
        jbuf_puts(out, "<Namespace {");
        for (size_t i = 0; i < d->n; i++) {
            if (i) jbuf_puts(out, ", ");
            jv_repr(out, d->keys[i]);
            jbuf_puts(out, ": ");
            jv_repr(out, d->vals[i]);
        }
        jbuf_puts(out, "}>");
        return;
    }
    default: jv_to_str(out, v); return;
    }
}

void jv_to_str(jbuf *out, jv v) {
    switch (v.type) {
    case JV_UNDEF: return;
    case JV_NONE: jbuf_puts(out, "None"); return;
    case JV_BOOL: jbuf_puts(out, v.u.i ? "True" : "False"); return;
    case JV_INT: jbuf_printf(out, "%lld", (long long)v.u.i); return;
    case JV_FLOAT: jv_float_repr(out, v.u.f); return;
    case JV_STR: jbuf_put(out, v.u.str.s, v.u.str.n); return;
    case JV_FUNC: jbuf_printf(out, "<function %s>", v.u.func); return;
    case JV_METHOD: jbuf_printf(out, "<built-in method %s>", v.u.method.name); return;
    case JV_MACRO: jbuf_printf(out, "<Macro '%s'>", v.u.macro.node->name); return;
    default: jv_repr(out, v); return;
    }
}

/* ---- json.dumps(ensure_ascii=False) -------------------------------------------------------- */
static void json_str(jbuf *out, const char *s, size_t n, int ascii) {
    jbuf_putc(out, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (ascii && c >= 0x80) { /* \uXXXX, with a surrogate pair above the BMP */
            size_t adv;
            uint32_t cp = ju8_decode(s + i, n - i, &adv);
            if (cp >= 0x10000)
                jbuf_printf(out, "\\u%04x\\u%04x", 0xD800 + ((cp - 0x10000) >> 10),
                            0xDC00 + ((cp - 0x10000) & 0x3FF));
            else
                jbuf_printf(out, "\\u%04x", cp);
            i += adv - 1;
            continue;
        }
        switch (c) {
        case '"': jbuf_puts(out, "\\\""); break;
        case '\\': jbuf_puts(out, "\\\\"); break;
        case '\n': jbuf_puts(out, "\\n"); break;
        case '\r': jbuf_puts(out, "\\r"); break;
        case '\t': jbuf_puts(out, "\\t"); break;
        case '\b': jbuf_puts(out, "\\b"); break;
        case '\f': jbuf_puts(out, "\\f"); break;
        default:
            if (c < 0x20)
                jbuf_printf(out, "\\u%04x", c);
            else
                jbuf_putc(out, (char)c);
        }
    }
    jbuf_putc(out, '"');
}

/* Python's indent: the indent string repeated depth times after a newline (None: no newline). */
static void json_newline(jbuf *out, const jv_json_format *fmt, int depth) {
    jbuf_putc(out, '\n');
    for (int i = 0; i < depth; i++) jbuf_puts(out, fmt->indent);
}

static int json_key_cmp(const void *a, const void *b) {
    const jv *x = *(const jv *const *)a, *y = *(const jv *const *)b;
    size_t n = x->u.str.n < y->u.str.n ? x->u.str.n : y->u.str.n;
    int c = memcmp(x->u.str.s, y->u.str.s, n);
    return c ? c : (x->u.str.n > y->u.str.n) - (x->u.str.n < y->u.str.n);
}

static int json_value(jbuf *out, jv v, const jv_json_format *fmt, int depth, grpo_error *err);

/* A dict key: strings as they are; numbers, bools and None as their JSON text in quotes. */
static int json_key(jbuf *out, jv key, const jv_json_format *fmt, grpo_error *err) {
    if (key.type == JV_STR) return json_str(out, key.u.str.s, key.u.str.n, fmt->ensure_ascii), 1;
    if (key.type != JV_INT && key.type != JV_FLOAT && key.type != JV_BOOL && key.type != JV_NONE) {
        grpo_error_set(err, GRPO_ERR_INVALID, "keys must be str, int, float, bool or None, not %s",
                       jv_type_name(key.type));
        return 0;
    }
    jbuf tmp = {0};
    json_value(&tmp, key, fmt, 0, err);
    json_str(out, tmp.data, tmp.len, fmt->ensure_ascii);
    free(tmp.data);
    return 1;
}

/* The order dict items are written in: insertion order, or sorted by key (sort_keys). */
static int json_order(const jdict *d, int sort_keys, size_t *order, grpo_error *err) {
    for (size_t i = 0; i < d->n; i++) order[i] = i;
    if (!sort_keys) return 1;
    const jv **keys = malloc(d->n * sizeof *keys);
    if (!keys) abort();
    for (size_t i = 0; i < d->n; i++) {
        if (d->keys[i].type != JV_STR) {
            free(keys);
            grpo_error_set(err, GRPO_ERR_INVALID, "tojson(sort_keys=true) needs string keys");
            return 0;
        }
        keys[i] = &d->keys[i];
    }
    qsort(keys, d->n, sizeof *keys, json_key_cmp);
    for (size_t i = 0; i < d->n; i++) order[i] = (size_t)(keys[i] - d->keys);
    free(keys);
    return 1;
}

static int json_list(jbuf *out, const jlist *l, const jv_json_format *fmt, int depth,
                     grpo_error *err) {
    if (l->n == 0) return jbuf_puts(out, "[]"), 1;
    jbuf_putc(out, '[');
    for (size_t i = 0; i < l->n; i++) {
        if (i) jbuf_puts(out, fmt->item_sep);
        if (fmt->indent) json_newline(out, fmt, depth + 1);
        if (!json_value(out, l->items[i], fmt, depth + 1, err)) return 0;
    }
    if (fmt->indent) json_newline(out, fmt, depth);
    jbuf_putc(out, ']');
    return 1;
}

static int json_dict(jbuf *out, const jdict *d, const jv_json_format *fmt, int depth,
                     grpo_error *err) {
    if (d->n == 0) return jbuf_puts(out, "{}"), 1;
    size_t *order = malloc(d->n * sizeof *order);
    if (!order) abort();
    int ok = json_order(d, fmt->sort_keys, order, err);
    if (ok) jbuf_putc(out, '{');
    for (size_t k = 0; k < d->n && ok; k++) {
        if (k) jbuf_puts(out, fmt->item_sep);
        if (fmt->indent) json_newline(out, fmt, depth + 1);
        ok = json_key(out, d->keys[order[k]], fmt, err);
        if (ok) jbuf_puts(out, fmt->key_sep);
        ok = ok && json_value(out, d->vals[order[k]], fmt, depth + 1, err);
    }
    free(order);
    if (!ok) return 0;
    if (fmt->indent) json_newline(out, fmt, depth);
    jbuf_putc(out, '}');
    return 1;
}

static int json_value(jbuf *out, jv v, const jv_json_format *fmt, int depth, grpo_error *err) {
    switch (v.type) {
    case JV_NONE: jbuf_puts(out, "null"); return 1;
    case JV_BOOL: jbuf_puts(out, v.u.i ? "true" : "false"); return 1;
    case JV_INT: jbuf_printf(out, "%lld", (long long)v.u.i); return 1;
    case JV_FLOAT:
        if (isnan(v.u.f))
            jbuf_puts(out, "NaN");
        else if (isinf(v.u.f))
            jbuf_puts(out, v.u.f < 0 ? "-Infinity" : "Infinity");
        else
            jv_float_repr(out, v.u.f);
        return 1;
    case JV_STR: json_str(out, v.u.str.s, v.u.str.n, fmt->ensure_ascii); return 1;
    case JV_LIST: return json_list(out, v.u.list, fmt, depth, err);
    case JV_DICT: return json_dict(out, v.u.dict, fmt, depth, err);
    default:
        grpo_error_set(err, GRPO_ERR_INVALID, "Object of type %s is not JSON serializable",
                       jv_type_name(v.type));
        return 0;
    }
}

int32_t jv_to_json(jbuf *out, jv v, const jv_json_format *fmt, grpo_error *err) {
    jv_json_format f = *fmt;
    if (!f.item_sep) f.item_sep = f.indent ? "," : ", ";
    if (!f.key_sep) f.key_sep = ": ";
    return json_value(out, v, &f, 0, err) ? GRPO_OK : GRPO_ERR_INVALID;
}

/* ---- JSON reader --------------------------------------------------------------------------- */
typedef struct jreader {
    jarena *a;
    const char *s;
    size_t n, pos;
    grpo_error *err;
    int depth;
} jreader;

static void jr_ws(jreader *r) {
    while (r->pos < r->n && (r->s[r->pos] == ' ' || r->s[r->pos] == '\t' || r->s[r->pos] == '\n' ||
                             r->s[r->pos] == '\r'))
        r->pos++;
}

static int jr_fail(jreader *r, const char *what) {
    grpo_error_set(r->err, GRPO_ERR_INVALID, "%s at byte %zu", what, r->pos);
    return 0;
}

static int hex4(const char *s, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (uint32_t)(c - 'A' + 10);
        else
            return 0;
    }
    *out = v;
    return 1;
}

static void put_utf8(jbuf *b, uint32_t cp) {
    char t[4];
    if (cp < 0x80)
        t[0] = (char)cp, jbuf_put(b, t, 1);
    else if (cp < 0x800)
        t[0] = (char)(0xC0 | cp >> 6), t[1] = (char)(0x80 | (cp & 63)), jbuf_put(b, t, 2);
    else if (cp < 0x10000)
        t[0] = (char)(0xE0 | cp >> 12), t[1] = (char)(0x80 | (cp >> 6 & 63)),
        t[2] = (char)(0x80 | (cp & 63)), jbuf_put(b, t, 3);
    else
        t[0] = (char)(0xF0 | cp >> 18), t[1] = (char)(0x80 | (cp >> 12 & 63)),
        t[2] = (char)(0x80 | (cp >> 6 & 63)), t[3] = (char)(0x80 | (cp & 63)), jbuf_put(b, t, 4);
}

static int jr_string(jreader *r, jv *out) {
    jbuf b = {0};
    r->pos++; /* opening quote */
    while (r->pos < r->n && r->s[r->pos] != '"') {
        char c = r->s[r->pos];
        if ((unsigned char)c < 0x20) return free(b.data), jr_fail(r, "control character in string");
        if (c != '\\') {
            jbuf_putc(&b, c), r->pos++;
            continue;
        }
        if (r->pos + 1 >= r->n) break;
        char e = r->s[r->pos + 1];
        r->pos += 2;
        switch (e) {
        case '"': jbuf_putc(&b, '"'); break;
        case '\\': jbuf_putc(&b, '\\'); break;
        case '/': jbuf_putc(&b, '/'); break;
        case 'b': jbuf_putc(&b, '\b'); break;
        case 'f': jbuf_putc(&b, '\f'); break;
        case 'n': jbuf_putc(&b, '\n'); break;
        case 'r': jbuf_putc(&b, '\r'); break;
        case 't': jbuf_putc(&b, '\t'); break;
        case 'u': {
            uint32_t cp, lo;
            if (r->pos + 4 > r->n || !hex4(r->s + r->pos, &cp))
                return free(b.data), jr_fail(r, "bad \\u escape");
            r->pos += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && r->pos + 6 <= r->n && r->s[r->pos] == '\\' &&
                r->s[r->pos + 1] == 'u' && hex4(r->s + r->pos + 2, &lo) && lo >= 0xDC00 &&
                lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                r->pos += 6;
            }
            put_utf8(&b, cp);
            break;
        }
        default: free(b.data); return jr_fail(r, "bad escape in string");
        }
    }
    if (r->pos >= r->n) return free(b.data), jr_fail(r, "unterminated string");
    r->pos++;
    *out = jv_str(jarena_strdup(r->a, b.data ? b.data : "", b.len), b.len);
    free(b.data);
    return 1;
}

static int jr_value(jreader *r, jv *out);

static int jr_number(jreader *r, jv *out) {
    size_t start = r->pos;
    int is_float = 0;
    if (r->s[r->pos] == '-') r->pos++;
    if (r->pos >= r->n || r->s[r->pos] < '0' || r->s[r->pos] > '9') return jr_fail(r, "bad number");
    while (r->pos < r->n) {
        char c = r->s[r->pos];
        if (c >= '0' && c <= '9')
            r->pos++;
        else if (c == '.' || c == 'e' || c == 'E' || c == '+' || (c == '-' && is_float))
            is_float = 1, r->pos++;
        else
            break;
    }
    char tmp[64];
    size_t len = r->pos - start;
    if (len >= sizeof tmp) return jr_fail(r, "number too long");
    memcpy(tmp, r->s + start, len), tmp[len] = '\0';
    char *end;
    if (!is_float) {
        long long v = strtoll(tmp, &end, 10);
        if (*end == '\0' && !(v == LLONG_MAX || v == LLONG_MIN)) return *out = jv_int(v), 1;
    }
    double f = strtod(tmp, &end);
    if (*end != '\0') return jr_fail(r, "bad number");
    *out = jv_float(f);
    return 1;
}

static int jr_value(jreader *r, jv *out) {
    jr_ws(r);
    if (r->pos >= r->n) return jr_fail(r, "unexpected end of JSON");
    if (++r->depth > 200) return jr_fail(r, "JSON nested too deeply");
    char c = r->s[r->pos];
    int ok = 1;
    if (c == '"')
        ok = jr_string(r, out);
    else if (c == '[') {
        *out = jv_list_new(r->a, 0);
        r->pos++, jr_ws(r);
        if (r->pos < r->n && r->s[r->pos] == ']')
            r->pos++;
        else
            for (;;) {
                jv item;
                if (!jr_value(r, &item)) return 0;
                jlist_push(r->a, out->u.list, item);
                jr_ws(r);
                if (r->pos < r->n && r->s[r->pos] == ',')
                    r->pos++;
                else if (r->pos < r->n && r->s[r->pos] == ']') {
                    r->pos++;
                    break;
                } else
                    return jr_fail(r, "expected ',' or ']'");
            }
    } else if (c == '{') {
        *out = jv_dict_new(r->a, JV_DICT);
        r->pos++, jr_ws(r);
        if (r->pos < r->n && r->s[r->pos] == '}')
            r->pos++;
        else
            for (;;) {
                jv key, val;
                jr_ws(r);
                if (r->pos >= r->n || r->s[r->pos] != '"')
                    return jr_fail(r, "expected a string key");
                if (!jr_string(r, &key)) return 0;
                jr_ws(r);
                if (r->pos >= r->n || r->s[r->pos] != ':') return jr_fail(r, "expected ':'");
                r->pos++;
                if (!jr_value(r, &val)) return 0;
                jdict_set(r->a, out->u.dict, key, val);
                jr_ws(r);
                if (r->pos < r->n && r->s[r->pos] == ',')
                    r->pos++;
                else if (r->pos < r->n && r->s[r->pos] == '}') {
                    r->pos++;
                    break;
                } else
                    return jr_fail(r, "expected ',' or '}'");
            }
    } else if (c == '-' || (c >= '0' && c <= '9'))
        ok = jr_number(r, out);
    else if (r->n - r->pos >= 4 && memcmp(r->s + r->pos, "true", 4) == 0)
        *out = jv_bool(1), r->pos += 4;
    else if (r->n - r->pos >= 5 && memcmp(r->s + r->pos, "false", 5) == 0)
        *out = jv_bool(0), r->pos += 5;
    else if (r->n - r->pos >= 4 && memcmp(r->s + r->pos, "null", 4) == 0)
        *out = jv_none(), r->pos += 4;
    else
        ok = jr_fail(r, "unexpected character");
    r->depth--;
    return ok;
}

int32_t jv_from_json(jarena *a, const char *text, size_t n, jv *out, grpo_error *err) {
    jreader r = {a, text, n, 0, err, 0};
    if (!jr_value(&r, out)) return GRPO_ERR_INVALID;
    jr_ws(&r);
    if (r.pos != n) return jr_fail(&r, "extra data after the JSON value"), GRPO_ERR_INVALID;
    return GRPO_OK;
}

/* ---- UTF-8 --------------------------------------------------------------------------------- */
uint32_t ju8_decode(const char *s, size_t n, size_t *adv) {
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80 || n < 2) return *adv = 1, u[0];
    if ((u[0] & 0xE0) == 0xC0) return *adv = 2, (uint32_t)(u[0] & 0x1F) << 6 | (u[1] & 0x3F);
    if ((u[0] & 0xF0) == 0xE0 && n >= 3)
        return *adv = 3,
               (uint32_t)(u[0] & 0x0F) << 12 | (uint32_t)(u[1] & 0x3F) << 6 | (u[2] & 0x3F);
    if ((u[0] & 0xF8) == 0xF0 && n >= 4)
        return *adv = 4, (uint32_t)(u[0] & 0x07) << 18 | (uint32_t)(u[1] & 0x3F) << 12 |
                             (uint32_t)(u[2] & 0x3F) << 6 | (u[3] & 0x3F);
    return *adv = 1, u[0];
}

size_t ju8_len(const char *s, size_t n) {
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) count++;
    return count;
}

size_t ju8_offset(const char *s, size_t n, size_t cp_index) {
    size_t i = 0, cp = 0;
    for (; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) {
            if (cp == cp_index) return i;
            cp++;
        }
    return n;
}

/* Strict UTF-8 (no overlongs, no surrogates, <= U+10FFFF). Returns the offset of the first bad
 * byte, or len when the text is valid. */
size_t ju8_invalid_at(const char *text, size_t len) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        size_t need;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0)
            need = 1, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0)
            need = 2, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0)
            need = 3, cp = c & 0x07, min = 0x10000;
        else
            return i;
        if (i + need >= len) return i;
        for (size_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return i;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += need + 1;
    }
    return len;
}

int ju8_isspace(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}
