/* jinja_eval.c — tree-walking evaluator for the Jinja subset (see jinja.h).
 *
 * Semantics follow jinja2 3.1 in transformers' ImmutableSandboxedEnvironment:
 *   - a variable that does not exist is Undefined: it prints as "", is false, has length 0,
 *     iterates as empty, but "+" on it or ".attr" of it is an error ("'x' is undefined");
 *   - obj.name tries the attribute (dict methods items/keys/values/get, str methods) and then
 *     the item obj["name"]; obj["name"] tries the item first; both give Undefined when absent;
 *   - {% set %} inside a for loop is local to one iteration (each iteration starts afresh from
 *     the enclosing scope); {% if %} does not open a scope; namespace() attributes are shared;
 *   - values behave as Python's: str(), ==, truthiness, int/float arithmetic, str slicing by
 *     code point, negative indexes.
 * Lists are immutable (list.append is a SecurityError in that sandbox, and is an error here).
 */
#include "text/jinja/jinja.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct scope {
    jdict *vars;
    struct scope *parent;
} scope;

typedef struct ctx {
    const jtemplate *t;
    jarena *a;
    jdict *globals;
    grpo_error *err;
    int32_t status; /* of the first failure */
    int failed;
    int macro_depth;   /* macro calls in progress */
    int depth;         /* blocks and expressions being evaluated, macro bodies included */
    const char *macro; /* the innermost macro being called, or NULL */
} ctx;

/* The parser bounds how deeply a template nests statements and expressions, but a macro calling
 * itself (directly or through others) nests at run time and, unbounded, overflows the stack.
 * Macro calls may nest JINJA_MAX_MACRO_DEPTH deep (real templates recurse a few levels, e.g. over
 * a nested JSON schema), and blocks plus expressions JINJA_MAX_RUN_DEPTH deep in all; that also
 * bounds a long operator chain ({{ 1+1+...+1 }} evaluates as deep as it is long). Measured worst
 * case per level: about 1.3 KiB of stack at -O2, 4 KiB under ASan, so 1000 levels stay well
 * inside the usual 8 MiB. Without recursion a template the parser accepts nests under 500 levels
 * (statements 250, expressions 200), unless an operator chain is hundreds of terms long. */
#define JINJA_MAX_MACRO_DEPTH 100
#define JINJA_MAX_RUN_DEPTH 1000

enum { X_ERR = 0, X_OK = 1, X_BREAK = 2, X_CONTINUE = 3 };

static int fail(ctx *c, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int fail(ctx *c, int line, const char *fmt, ...) {
    if (c->failed) return 0;
    c->failed = 1;
    char what[800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    c->status = jinja_status_of(what);
    grpo_error_set(c->err, c->status, "%s:%d: %s", c->t->name, line, what);
    return 0;
}

static int too_deep(ctx *c, int line) {
    if (c->macro)
        return fail(c, line, "macro '%s': rendering nested more than %d levels deep (blocks and "
                             "expressions of macros calling macros)",
                    c->macro, JINJA_MAX_RUN_DEPTH);
    return fail(c, line, "rendering nested more than %d levels deep", JINJA_MAX_RUN_DEPTH);
}

static int fail_undef(ctx *c, int line, jv v) {
    if (v.u.str.s) return fail(c, line, "'%s' is undefined", v.u.str.s);
    return fail(c, line, "a value is undefined");
}

static jv str_from_buf(ctx *c, jbuf *b) {
    jv v = jv_str(jarena_strdup(c->a, b->data ? b->data : "", b->len), b->len);
    free(b->data);
    return v;
}

static jv to_str_value(ctx *c, jv v) {
    if (v.type == JV_STR) return v;
    jbuf b = {0};
    jv_to_str(&b, v);
    return str_from_buf(c, &b);
}

static jv key_of(const char *s) { return jv_cstr(s); }

/* ---- scopes -------------------------------------------------------------------------------- */
static jv lookup(ctx *c, scope *s, const char *name) {
    size_t n = strlen(name);
    for (; s; s = s->parent) {
        jv *v = jdict_get_str(s->vars, name, n);
        if (v) return *v;
    }
    jv *g = jdict_get_str(c->globals, name, n);
    return g ? *g : jv_undef(name);
}

static void assign(ctx *c, scope *s, const char *name, jv v) {
    jdict_set(c->a, s->vars, key_of(name), v);
}

static scope *new_scope(ctx *c, scope *parent) {
    scope *s = jarena_alloc(c->a, sizeof *s);
    s->vars = jv_dict_new(c->a, JV_DICT).u.dict;
    s->parent = parent;
    return s;
}

/* ---- strings ------------------------------------------------------------------------------- */
/* Whether str.strip removes code point cp: one of set[nset], or whitespace when there is no set. */
static int strip_hit(uint32_t cp, const uint32_t *set, size_t nset, int have_set) {
    if (!have_set) return ju8_isspace(cp);
    for (size_t k = 0; k < nset; k++)
        if (set[k] == cp) return 1;
    return 0;
}

/* Python str.strip/lstrip/rstrip; chars == NULL strips whitespace. which: 1 left, 2 right. */
static jv str_strip(jv s, const jv *chars, int which) {
    const char *p = s.u.str.s;
    size_t n = s.u.str.n, b = 0, e = n, adv;
    if (n == 0) return s;
    uint32_t set[64];
    size_t nset = 0;
    if (chars)
        for (size_t i = 0; i < chars->u.str.n && nset < 64; i += adv)
            set[nset++] = ju8_decode(chars->u.str.s + i, chars->u.str.n - i, &adv);
    if (which & 1)
        while (b < e) {
            uint32_t cp = ju8_decode(p + b, e - b, &adv);
            if (!strip_hit(cp, set, nset, chars != NULL)) break;
            b += adv;
        }
    if (which & 2)
        while (e > b) {
            size_t st = e - 1;
            while (st > b && ((unsigned char)p[st] & 0xC0) == 0x80) st--;
            uint32_t cp = ju8_decode(p + st, e - st, &adv);
            if (!strip_hit(cp, set, nset, chars != NULL)) break;
            e = st;
        }
    return jv_str(p + b, e - b);
}

static const char *memfind(const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn == 0) return h;
    if (nn > hn) return NULL;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == nd[0] && memcmp(h + i, nd, nn) == 0) return h + i;
    return NULL;
}

static const char *memrfind(const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn > hn) return NULL;
    for (size_t i = hn - nn + 1; i-- > 0;)
        if (memcmp(h + i, nd, nn) == 0) return h + i;
    return NULL;
}

/* Python str.split(sep, maxsplit) (sep NULL: runs of whitespace) and rsplit when from_right. */
static int str_split(ctx *c, int line, jv s, const jv *sep, int64_t maxsplit, int from_right,
                     jv *out) {
    jv list = jv_list_new(c->a, 0);
    const char *p = s.u.str.s;
    size_t n = s.u.str.n, adv;
    if (sep) {
        if (sep->u.str.n == 0) return fail(c, line, "str.split: empty separator");
        if (!from_right) {
            size_t pos = 0;
            const char *hit;
            while ((maxsplit < 0 || (int64_t)list.u.list->n < maxsplit) &&
                   (hit = memfind(p + pos, n - pos, sep->u.str.s, sep->u.str.n))) {
                jlist_push(c->a, list.u.list, jv_str(p + pos, (size_t)(hit - (p + pos))));
                pos = (size_t)(hit - p) + sep->u.str.n;
            }
            jlist_push(c->a, list.u.list, jv_str(p + pos, n - pos));
        } else {
            size_t end = n;
            const char *hit;
            jv tmp = jv_list_new(c->a, 0);
            while ((maxsplit < 0 || (int64_t)tmp.u.list->n < maxsplit) &&
                   (hit = memrfind(p, end, sep->u.str.s, sep->u.str.n))) {
                size_t st = (size_t)(hit - p) + sep->u.str.n;
                jlist_push(c->a, tmp.u.list, jv_str(p + st, end - st));
                end = (size_t)(hit - p);
            }
            jlist_push(c->a, tmp.u.list, jv_str(p, end));
            for (size_t i = tmp.u.list->n; i-- > 0;)
                jlist_push(c->a, list.u.list, tmp.u.list->items[i]);
        }
        *out = list;
        return 1;
    }
    if (from_right) return fail(c, line, "str.rsplit() without a separator is not supported");
    size_t i = 0;
    while (i < n) {
        while (i < n && ju8_isspace(ju8_decode(p + i, n - i, &adv))) i += adv;
        if (i >= n) break;
        size_t st = i;
        if (maxsplit >= 0 && (int64_t)list.u.list->n >= maxsplit) {
            /* the rest, with trailing whitespace removed */
            jv rest = str_strip(jv_str(p + st, n - st), NULL, 2);
            jlist_push(c->a, list.u.list, rest);
            break;
        }
        while (i < n && !ju8_isspace(ju8_decode(p + i, n - i, &adv))) i += adv;
        jlist_push(c->a, list.u.list, jv_str(p + st, i - st));
    }
    *out = list;
    return 1;
}

static jv str_replace(ctx *c, jv s, jv old, jv new_, int64_t count) {
    jbuf b = {0};
    const char *p = s.u.str.s;
    size_t n = s.u.str.n, pos = 0;
    int64_t done = 0;
    if (old.u.str.n == 0) { /* Python inserts new between every code point */
        size_t adv;
        while (pos <= n && (count < 0 || done < count)) {
            jbuf_put(&b, new_.u.str.s, new_.u.str.n), done++;
            if (pos == n) {
                pos++;
                break;
            }
            ju8_decode(p + pos, n - pos, &adv);
            jbuf_put(&b, p + pos, adv);
            pos += adv;
        }
        if (pos < n) jbuf_put(&b, p + pos, n - pos);
        return str_from_buf(c, &b);
    }
    const char *hit;
    while ((count < 0 || done < count) &&
           (hit = memfind(p + pos, n - pos, old.u.str.s, old.u.str.n))) {
        jbuf_put(&b, p + pos, (size_t)(hit - (p + pos)));
        jbuf_put(&b, new_.u.str.s, new_.u.str.n);
        pos = (size_t)(hit - p) + old.u.str.n;
        done++;
    }
    jbuf_put(&b, p + pos, n - pos);
    return str_from_buf(c, &b);
}

/* ASCII case mapping (non-ASCII code points are left as they are). mode: 'u' upper, 'l' lower,
 * 'c' first upper, 't' Python str.title (a word starts after any non-letter), 'T' jinja2's |title
 * filter (a word starts only after whitespace, '-', '(', '{', '[' or '<'). */
static jv str_case(ctx *c, jv s, int mode) {
    char *d = jarena_strdup(c->a, s.u.str.s, s.u.str.n);
    int word_start = 1;
    for (size_t i = 0; i < s.u.str.n; i++) {
        char ch = d[i];
        int alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
        int up =
            mode == 'u' || ((mode == 't' || mode == 'T') && word_start) || (mode == 'c' && i == 0);
        if (alpha)
            d[i] = up ? (char)(ch >= 'a' && ch <= 'z' ? ch - 32 : ch)
                      : (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
        if (mode == 'T')
            word_start = strchr(" \t\n\r\f\v-({[<", ch) != NULL;
        else
            word_start = !alpha && !((unsigned char)ch >= 0x80);
    }
    return jv_str(d, s.u.str.n);
}

/* ---- sequences ----------------------------------------------------------------------------- */
/* Items of an iterable: list items, dict keys, str code points, nothing for Undefined. */
static int to_items(ctx *c, int line, jv v, jlist **out) {
    jv l;
    switch (v.type) {
    case JV_LIST: *out = v.u.list; return 1;
    case JV_DICT:
        l = jv_list_new(c->a, v.u.dict->n);
        for (size_t i = 0; i < v.u.dict->n; i++) jlist_push(c->a, l.u.list, v.u.dict->keys[i]);
        *out = l.u.list;
        return 1;
    case JV_STR: {
        l = jv_list_new(c->a, v.u.str.n);
        size_t adv;
        for (size_t i = 0; i < v.u.str.n; i += adv) {
            ju8_decode(v.u.str.s + i, v.u.str.n - i, &adv);
            jlist_push(c->a, l.u.list, jv_str(v.u.str.s + i, adv));
        }
        *out = l.u.list;
        return 1;
    }
    case JV_UNDEF: *out = jv_list_new(c->a, 0).u.list; return 1;
    default: return fail(c, line, "'%s' object is not iterable", jv_type_name(v.type));
    }
}

static int64_t as_index(jv v) { return v.u.i; }

static int is_int(jv v) { return v.type == JV_INT || v.type == JV_BOOL; }
static int is_num(jv v) { return is_int(v) || v.type == JV_FLOAT; }
static double num(jv v) { return v.type == JV_FLOAT ? v.u.f : (double)v.u.i; }

/* Python slice indices for a sequence of length len. */
static void slice_indices(int64_t len, const jv *start, const jv *stop, int64_t step, int64_t *b,
                          int64_t *e) {
    int64_t lo = step < 0 ? -1 : 0, hi = step < 0 ? len - 1 : len;
    if (start) {
        *b = start->u.i;
        if (*b < 0)
            *b = *b + len < lo ? lo : *b + len;
        else if (*b > hi)
            *b = hi;
    } else
        *b = step < 0 ? hi : lo;
    if (stop) {
        *e = stop->u.i;
        if (*e < 0)
            *e = *e + len < lo ? lo : *e + len;
        else if (*e > hi)
            *e = hi;
    } else
        *e = step < 0 ? lo : hi;
}

static int do_slice(ctx *c, int line, jv obj, const jv *start, const jv *stop, const jv *step,
                    jv *out) {
    for (int k = 0; k < 3; k++) {
        const jv *x = k == 0 ? start : k == 1 ? stop : step;
        if (x && !is_int(*x)) return fail(c, line, "slice indices must be integers or None");
    }
    int64_t st = step ? step->u.i : 1;
    if (st == 0) return fail(c, line, "slice step cannot be zero");
    if (obj.type == JV_LIST) {
        int64_t len = (int64_t)obj.u.list->n, b, e;
        slice_indices(len, start, stop, st, &b, &e);
        jv l = jv_list_new(c->a, 0);
        l.u.list->is_tuple = obj.u.list->is_tuple;
        for (int64_t i = b; st > 0 ? i < e : i > e;) {
            jlist_push(c->a, l.u.list, obj.u.list->items[i]);
            if (__builtin_add_overflow(i, st, &i)) break;
        }
        *out = l;
        return 1;
    }
    if (obj.type == JV_STR) {
        jlist *cps;
        to_items(c, line, obj, &cps);
        int64_t len = (int64_t)cps->n, b, e;
        slice_indices(len, start, stop, st, &b, &e);
        jbuf buf = {0};
        for (int64_t i = b; st > 0 ? i < e : i > e;) {
            jbuf_put(&buf, cps->items[i].u.str.s, cps->items[i].u.str.n);
            if (__builtin_add_overflow(i, st, &i)) break;
        }
        *out = str_from_buf(c, &buf);
        return 1;
    }
    if (obj.type == JV_UNDEF) return fail_undef(c, line, obj);
    return fail(c, line, "'%s' object is not subscriptable", jv_type_name(obj.type));
}

/* ---- attribute and item access ------------------------------------------------------------- */
static const char *const str_methods[] = {
    "startswith", "endswith", "split",   "rsplit",     "strip",   "lstrip",  "rstrip",  "replace",
    "upper",      "lower",    "title",   "capitalize", "find",    "rfind",   "count",   "join",
    "splitlines", "isdigit",  "isspace", "isalpha",    "isalnum", "isupper", "islower", NULL};
static const char *const dict_methods[] = {"get", "items", "keys", "values", NULL};

static int in_names(const char *const *list, const char *s) {
    for (int i = 0; list[i]; i++)
        if (strcmp(list[i], s) == 0) return 1;
    return 0;
}

static jv bound(ctx *c, jv self, const char *name) {
    jv m = {.type = JV_METHOD};
    m.u.method.self = jarena_alloc(c->a, sizeof(jv));
    *m.u.method.self = self;
    m.u.method.name = name;
    return m;
}

static int method_of(ctx *c, jv obj, const char *name, jv *out) {
    if (obj.type == JV_STR && in_names(str_methods, name)) return *out = bound(c, obj, name), 1;
    if (obj.type == JV_DICT && in_names(dict_methods, name)) return *out = bound(c, obj, name), 1;
    return 0;
}

static int item_of(jv obj, jv key, jv *out) {
    if ((obj.type == JV_DICT || obj.type == JV_NS)) {
        jv *v = jdict_get(obj.u.dict, key);
        if (v) return *out = *v, 1;
        return 0;
    }
    if ((obj.type == JV_LIST || obj.type == JV_STR) && is_int(key)) {
        int64_t i = as_index(key);
        if (obj.type == JV_LIST) {
            int64_t n = (int64_t)obj.u.list->n;
            if (i < 0) i += n;
            if (i < 0 || i >= n) return 0;
            *out = obj.u.list->items[i];
            return 1;
        }
        int64_t n = (int64_t)ju8_len(obj.u.str.s, obj.u.str.n);
        if (i < 0) i += n;
        if (i < 0 || i >= n) return 0;
        size_t off = ju8_offset(obj.u.str.s, obj.u.str.n, (size_t)i), adv;
        ju8_decode(obj.u.str.s + off, obj.u.str.n - off, &adv);
        *out = jv_str(obj.u.str.s + off, adv);
        return 1;
    }
    return 0;
}

/* obj.name: attribute first, then item. */
static int get_attr(ctx *c, int line, jv obj, const char *name, jv *out) {
    if (obj.type == JV_UNDEF) return fail_undef(c, line, obj);
    if (method_of(c, obj, name, out)) return 1;
    if (item_of(obj, key_of(name), out)) return 1;
    *out = jv_undef(name);
    return 1;
}

/* obj[key]: item first, then attribute. */
static int get_item(ctx *c, int line, jv obj, jv key, jv *out) {
    if (obj.type == JV_UNDEF) return fail_undef(c, line, obj);
    if (item_of(obj, key, out)) return 1;
    if (key.type == JV_STR) {
        const char *nm = jarena_strdup(c->a, key.u.str.s, key.u.str.n);
        if (method_of(c, obj, nm, out)) return 1;
        *out = jv_undef(nm);
        return 1;
    }
    *out = jv_undef(NULL);
    return 1;
}

/* ---- operators ----------------------------------------------------------------------------- */
static int binop_fail(ctx *c, int line, const char *op, jv a, jv b) {
    if (a.type == JV_UNDEF) return fail_undef(c, line, a);
    if (b.type == JV_UNDEF) return fail_undef(c, line, b);
    if (strcmp(op, "+") == 0 && a.type == JV_STR)
        return fail(c, line, "can only concatenate str (not \"%s\") to str", jv_type_name(b.type));
    return fail(c, line, "unsupported operand type(s) for %s: '%s' and '%s'", op,
                jv_type_name(a.type), jv_type_name(b.type));
}

static double py_fmod(double a, double b) {
    double m = fmod(a, b);
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    return m;
}

static int arith(ctx *c, int line, int op, jv a, jv b, jv *out) {
    char opname[3] = {(char)op, 0, 0};
    if (op == 'f') strcpy(opname, "//");
    if (op == 'p') strcpy(opname, "**");
    if (op == '~') {
        jbuf buf = {0};
        jv_to_str(&buf, a), jv_to_str(&buf, b);
        *out = str_from_buf(c, &buf);
        return 1;
    }
    if (op == '+' && a.type == JV_STR && b.type == JV_STR) {
        jbuf buf = {0};
        jbuf_put(&buf, a.u.str.s, a.u.str.n), jbuf_put(&buf, b.u.str.s, b.u.str.n);
        *out = str_from_buf(c, &buf);
        return 1;
    }
    if (op == '+' && a.type == JV_LIST && b.type == JV_LIST) {
        jv l = jv_list_new(c->a, a.u.list->n + b.u.list->n);
        for (size_t i = 0; i < a.u.list->n; i++) jlist_push(c->a, l.u.list, a.u.list->items[i]);
        for (size_t i = 0; i < b.u.list->n; i++) jlist_push(c->a, l.u.list, b.u.list->items[i]);
        l.u.list->is_tuple = a.u.list->is_tuple && b.u.list->is_tuple;
        *out = l;
        return 1;
    }
    if (op == '*' && ((a.type == JV_STR && is_int(b)) || (is_int(a) && b.type == JV_STR))) {
        jv s = a.type == JV_STR ? a : b;
        int64_t k = a.type == JV_STR ? b.u.i : a.u.i;
        if (k > 0 && s.u.str.n && (uint64_t)k > (64u << 20) / s.u.str.n)
            return fail(c, line, "string repetition too large (over 64 MiB)");
        jbuf buf = {0};
        for (int64_t i = 0; i < k; i++) jbuf_put(&buf, s.u.str.s, s.u.str.n);
        *out = str_from_buf(c, &buf);
        return 1;
    }
    if (op == '%' && a.type == JV_STR)
        return fail(c, line, "unsupported construct: printf-style '%%' string formatting");
    if (!is_num(a) || !is_num(b)) return binop_fail(c, line, opname, a, b);
    if (is_int(a) && is_int(b) && op != '/') {
        int64_t x = a.u.i, y = b.u.i, r;
        switch (op) {
        case '+':
            if (__builtin_add_overflow(x, y, &r)) return fail(c, line, "integer overflow in +");
            return *out = jv_int(r), 1;
        case '-':
            if (__builtin_sub_overflow(x, y, &r)) return fail(c, line, "integer overflow in -");
            return *out = jv_int(r), 1;
        case '*':
            if (__builtin_mul_overflow(x, y, &r)) return fail(c, line, "integer overflow in *");
            return *out = jv_int(r), 1;
        case 'f':
        case '%': {
            if (y == 0) return fail(c, line, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) return fail(c, line, "integer overflow in //");
            int64_t q = x / y, r = x % y;
            if (r != 0 && ((r < 0) != (y < 0))) q--, r += y;
            *out = jv_int(op == 'f' ? q : r);
            return 1;
        }
        case 'p':
            if (y >= 0) {
                if (x == 0 || x == 1)
                    r = y == 0 ? 1 : x;
                else if (x == -1)
                    r = y % 2 ? -1 : 1;
                else /* |x| >= 2 overflows within 64 steps */
                    for (r = 1; y > 0; y--)
                        if (__builtin_mul_overflow(r, x, &r))
                            return fail(c, line, "integer overflow in **");
                *out = jv_int(r);
            } else
                *out = jv_float(pow((double)x, (double)y));
            return 1;
        }
    }
    double x = num(a), y = num(b);
    switch (op) {
    case '+': *out = jv_float(x + y); return 1;
    case '-': *out = jv_float(x - y); return 1;
    case '*': *out = jv_float(x * y); return 1;
    case '/':
        if (y == 0) return fail(c, line, "division by zero");
        *out = jv_float(x / y);
        return 1;
    case 'f':
        if (y == 0) return fail(c, line, "float floor division by zero");
        *out = jv_float(floor(x / y));
        return 1;
    case '%':
        if (y == 0) return fail(c, line, "float modulo");
        *out = jv_float(py_fmod(x, y));
        return 1;
    case 'p': *out = jv_float(pow(x, y)); return 1;
    }
    return fail(c, line, "unknown operator");
}

static int contains(ctx *c, int line, jv needle, jv hay, int *out) {
    switch (hay.type) {
    case JV_STR:
        if (needle.type != JV_STR)
            return fail(c, line, "'in <string>' requires string as left operand, not %s",
                        jv_type_name(needle.type));
        *out = memfind(hay.u.str.s, hay.u.str.n, needle.u.str.s, needle.u.str.n) != NULL;
        return 1;
    case JV_LIST:
        *out = 0;
        for (size_t i = 0; i < hay.u.list->n && !*out; i++)
            *out = jv_equal(needle, hay.u.list->items[i]);
        return 1;
    case JV_DICT:
    case JV_NS: *out = jdict_get(hay.u.dict, needle) != NULL; return 1;
    case JV_UNDEF: *out = 0; return 1;
    default: return fail(c, line, "argument of type '%s' is not iterable", jv_type_name(hay.type));
    }
}

static int compare(ctx *c, int line, int op, jv a, jv b, int *out) {
    if (op == JC_EQ) return *out = jv_equal(a, b), 1;
    if (op == JC_NE) return *out = !jv_equal(a, b), 1;
    if (op == JC_IN || op == JC_NOTIN) {
        if (!contains(c, line, a, b, out)) return 0;
        if (op == JC_NOTIN) *out = !*out;
        return 1;
    }
    int cmp;
    if (is_num(a) && is_num(b)) {
        double x = num(a), y = num(b);
        if (is_int(a) && is_int(b))
            cmp = (a.u.i > b.u.i) - (a.u.i < b.u.i);
        else
            cmp = (x > y) - (x < y);
        if (isnan(x) || isnan(y)) return *out = 0, 1;
    } else if (a.type == JV_STR && b.type == JV_STR) {
        size_t n = a.u.str.n < b.u.str.n ? a.u.str.n : b.u.str.n;
        cmp = memcmp(a.u.str.s, b.u.str.s, n);
        if (cmp == 0) cmp = (a.u.str.n > b.u.str.n) - (a.u.str.n < b.u.str.n);
    } else {
        static const char *const names[] = {"==", "!=", "<", "<=", ">", ">="};
        if (a.type == JV_UNDEF) return fail_undef(c, line, a);
        if (b.type == JV_UNDEF) return fail_undef(c, line, b);
        return fail(c, line, "'%s' not supported between instances of '%s' and '%s'", names[op],
                    jv_type_name(a.type), jv_type_name(b.type));
    }
    switch (op) {
    case JC_LT: *out = cmp < 0; break;
    case JC_LE: *out = cmp <= 0; break;
    case JC_GT: *out = cmp > 0; break;
    default: *out = cmp >= 0; break;
    }
    return 1;
}

/* ---- call arguments ------------------------------------------------------------------------ */
typedef struct args {
    jv pos[16];
    int n_pos;
    const char *kw_names[16];
    jv kw[16];
    int n_kw;
} args;

static int eval(ctx *c, scope *s, const jnode *n, jv *out);

static int eval_args(ctx *c, scope *s, const jnode *n, args *a) {
    a->n_pos = a->n_kw = 0;
    for (int i = 0; i < n->n_kids; i++) {
        const char *kw = n->names ? n->names[i] : NULL;
        if ((kw ? a->n_kw : a->n_pos) == 16)
            return fail(c, n->line, "too many arguments (at most 16)");
        jv v;
        if (!eval(c, s, n->kids[i], &v)) return 0;
        if (kw)
            a->kw_names[a->n_kw] = kw, a->kw[a->n_kw++] = v;
        else
            a->pos[a->n_pos++] = v;
    }
    return 1;
}

/* Argument i (positional) or named kw; NULL when not given. */
static const jv *arg(const args *a, int i, const char *kw) {
    if (i >= 0 && i < a->n_pos) return &a->pos[i];
    for (int k = 0; kw && k < a->n_kw; k++)
        if (strcmp(a->kw_names[k], kw) == 0) return &a->kw[k];
    return NULL;
}

static int need_str(ctx *c, int line, const jv *v, const char *what) {
    if (v && v->type == JV_STR) return 1;
    return fail(c, line, "%s expects a string, got %s", what,
                v ? jv_type_name(v->type) : "nothing");
}

static int need_int(ctx *c, int line, const jv *v, const char *what) {
    if (v && is_int(*v)) return 1;
    return fail(c, line, "%s expects an integer, got %s", what,
                v ? jv_type_name(v->type) : "nothing");
}

/* ---- methods ------------------------------------------------------------------------------- */
static int affix_match(jv s, jv affix, int end) {
    if (affix.u.str.n > s.u.str.n) return 0;
    const char *p = end ? s.u.str.s + s.u.str.n - affix.u.str.n : s.u.str.s;
    return memcmp(p, affix.u.str.s, affix.u.str.n) == 0;
}

static int call_str_method(ctx *c, int line, jv s, const char *m, const args *a, jv *out) {
    const jv *a0 = arg(a, 0, NULL), *a1 = arg(a, 1, NULL);
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        int end = m[0] == 'e';
        if (a0 && a0->type == JV_LIST) {
            int hit = 0;
            for (size_t i = 0; i < a0->u.list->n; i++) {
                if (!need_str(c, line, &a0->u.list->items[i], m)) return 0;
                hit |= affix_match(s, a0->u.list->items[i], end);
            }
            return *out = jv_bool(hit), 1;
        }
        if (!need_str(c, line, a0, m)) return 0;
        if (a->n_pos > 1) return fail(c, line, "str.%s: start/end arguments are not supported", m);
        return *out = jv_bool(affix_match(s, *a0, end)), 1;
    }
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
        const jv *chars = arg(a, 0, "chars");
        if (chars && chars->type == JV_NONE) chars = NULL;
        if (chars && !need_str(c, line, chars, m)) return 0;
        return *out = str_strip(s, chars, m[0] == 'l' ? 1 : m[0] == 'r' ? 2 : 3), 1;
    }
    if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
        const jv *sep = arg(a, 0, "sep"), *mx = arg(a, 1, "maxsplit");
        if (sep && sep->type == JV_NONE) sep = NULL;
        if (sep && !need_str(c, line, sep, m)) return 0;
        if (mx && !need_int(c, line, mx, m)) return 0;
        return str_split(c, line, s, sep, mx ? mx->u.i : -1, m[0] == 'r', out);
    }
    if (!strcmp(m, "replace")) {
        if (!need_str(c, line, a0, m) || !need_str(c, line, a1, m)) return 0;
        const jv *cnt = arg(a, 2, "count");
        if (cnt && !need_int(c, line, cnt, m)) return 0;
        return *out = str_replace(c, s, *a0, *a1, cnt ? cnt->u.i : -1), 1;
    }
    if (!strcmp(m, "upper")) return *out = str_case(c, s, 'u'), 1;
    if (!strcmp(m, "lower")) return *out = str_case(c, s, 'l'), 1;
    if (!strcmp(m, "title")) return *out = str_case(c, s, 't'), 1;
    if (!strcmp(m, "capitalize")) {
        jv low = str_case(c, s, 'l');
        return *out = str_case(c, low, 'c'), 1;
    }
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "count")) {
        if (!need_str(c, line, a0, m)) return 0;
        if (m[0] == 'c') {
            int64_t k = 0;
            size_t pos = 0;
            const char *hit;
            if (a0->u.str.n == 0)
                return *out = jv_int((int64_t)ju8_len(s.u.str.s, s.u.str.n) + 1), 1;
            while ((hit = memfind(s.u.str.s + pos, s.u.str.n - pos, a0->u.str.s, a0->u.str.n)))
                k++, pos = (size_t)(hit - s.u.str.s) + a0->u.str.n;
            return *out = jv_int(k), 1;
        }
        const char *hit = m[0] == 'f' ? memfind(s.u.str.s, s.u.str.n, a0->u.str.s, a0->u.str.n)
                                      : memrfind(s.u.str.s, s.u.str.n, a0->u.str.s, a0->u.str.n);
        return *out = jv_int(hit ? (int64_t)ju8_len(s.u.str.s, (size_t)(hit - s.u.str.s)) : -1), 1;
    }
    if (!strcmp(m, "join")) {
        jlist *items;
        if (!a0 || !to_items(c, line, *a0, &items))
            return a0 ? 0 : fail(c, line, "str.join needs an iterable");
        jbuf b = {0};
        for (size_t i = 0; i < items->n; i++) {
            if (items->items[i].type != JV_STR) {
                free(b.data);
                return fail(c, line, "sequence item %zu: expected str instance, %s found", i,
                            jv_type_name(items->items[i].type));
            }
            if (i) jbuf_put(&b, s.u.str.s, s.u.str.n);
            jbuf_put(&b, items->items[i].u.str.s, items->items[i].u.str.n);
        }
        return *out = str_from_buf(c, &b), 1;
    }
    if (!strcmp(m, "splitlines")) {
        jv l = jv_list_new(c->a, 0);
        size_t st = 0, i = 0, n = s.u.str.n;
        const char *p = s.u.str.s;
        while (i < n) {
            if (p[i] == '\n' || p[i] == '\r') {
                jlist_push(c->a, l.u.list, jv_str(p + st, i - st));
                if (p[i] == '\r' && i + 1 < n && p[i + 1] == '\n') i++;
                st = ++i;
            } else
                i++;
        }
        if (st < n) jlist_push(c->a, l.u.list, jv_str(p + st, n - st));
        return *out = l, 1;
    }
    /* is* predicates, ASCII classes (empty string is False as in Python) */
    int ok = s.u.str.n > 0, any_cased = 0;
    for (size_t i = 0; i < s.u.str.n; i++) {
        char ch = s.u.str.s[i];
        int dg = ch >= '0' && ch <= '9', lo = ch >= 'a' && ch <= 'z', up = ch >= 'A' && ch <= 'Z';
        int sp = ch == ' ' || (ch >= 9 && ch <= 13);
        any_cased |= lo || up;
        if (!strcmp(m, "isdigit"))
            ok &= dg;
        else if (!strcmp(m, "isspace"))
            ok &= sp;
        else if (!strcmp(m, "isalpha"))
            ok &= lo || up;
        else if (!strcmp(m, "isalnum"))
            ok &= lo || up || dg;
        else if (!strcmp(m, "isupper"))
            ok &= !lo;
        else if (!strcmp(m, "islower"))
            ok &= !up;
    }
    if (!strcmp(m, "isupper") || !strcmp(m, "islower")) ok &= any_cased;
    return *out = jv_bool(ok), 1;
}

static int call_method(ctx *c, int line, jv self, const char *m, const args *a, jv *out) {
    if (self.type == JV_STR) return call_str_method(c, line, self, m, a, out);
    if (self.type == JV_DICT && !strcmp(m, "cycle")) { /* loop.cycle(a, b, ...) */
        jv *i0 = jdict_get_str(self.u.dict, "index0", 6);
        if (!a->n_pos) return fail(c, line, "loop.cycle() needs at least one argument");
        return *out = a->pos[i0 ? i0->u.i % a->n_pos : 0], 1;
    }
    if (self.type == JV_DICT) {
        jdict *d = self.u.dict;
        if (!strcmp(m, "get")) {
            const jv *k = arg(a, 0, NULL), *def = arg(a, 1, NULL);
            if (!k) return fail(c, line, "dict.get() needs a key");
            jv *v = jdict_get(d, *k);
            return *out = v ? *v : def ? *def : jv_none(), 1;
        }
        jv l = jv_list_new(c->a, d->n);
        for (size_t i = 0; i < d->n; i++) {
            if (!strcmp(m, "keys"))
                jlist_push(c->a, l.u.list, d->keys[i]);
            else if (!strcmp(m, "values"))
                jlist_push(c->a, l.u.list, d->vals[i]);
            else {
                jv t = jv_list_new(c->a, 2);
                t.u.list->is_tuple = 1;
                jlist_push(c->a, t.u.list, d->keys[i]);
                jlist_push(c->a, t.u.list, d->vals[i]);
                jlist_push(c->a, l.u.list, t);
            }
        }
        return *out = l, 1;
    }
    return fail(c, line, "unsupported method '%s' of %s", m, jv_type_name(self.type));
}

/* ---- global functions ---------------------------------------------------------------------- */
static int call_func(ctx *c, int line, const char *f, const args *a, jv *out) {
    if (!strcmp(f, "raise_exception")) {
        jbuf b = {0};
        if (a->n_pos) jv_to_str(&b, a->pos[0]);
        fail(c, line, "raise_exception: %s", b.data ? b.data : "");
        free(b.data);
        return 0;
    }
    if (!strcmp(f, "namespace") || !strcmp(f, "dict")) {
        jv d = jv_dict_new(c->a, f[0] == 'n' ? JV_NS : JV_DICT);
        if (a->n_pos > 1) return fail(c, line, "%s() takes at most one positional argument", f);
        if (a->n_pos == 1) {
            if (a->pos[0].type != JV_DICT)
                return fail(c, line, "%s() positional argument must be a dict", f);
            for (size_t i = 0; i < a->pos[0].u.dict->n; i++)
                jdict_set(c->a, d.u.dict, a->pos[0].u.dict->keys[i], a->pos[0].u.dict->vals[i]);
        }
        for (int i = 0; i < a->n_kw; i++)
            jdict_set(c->a, d.u.dict, key_of(a->kw_names[i]), a->kw[i]);
        return *out = d, 1;
    }
    if (!strcmp(f, "range")) {
        int64_t start = 0, stop, step = 1;
        for (int i = 0; i < a->n_pos; i++)
            if (!need_int(c, line, &a->pos[i], "range()")) return 0;
        if (a->n_pos == 1)
            stop = a->pos[0].u.i;
        else if (a->n_pos == 2 || a->n_pos == 3) {
            start = a->pos[0].u.i, stop = a->pos[1].u.i;
            if (a->n_pos == 3) step = a->pos[2].u.i;
        } else
            return fail(c, line, "range() takes 1 to 3 arguments");
        if (step == 0) return fail(c, line, "range() arg 3 must not be zero");
        jv l = jv_list_new(c->a, 0);
        for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
            if (l.u.list->n >= 100000)
                return fail(c, line, "range() too big (more than 100000 items)");
            jlist_push(c->a, l.u.list, jv_int(i));
            if (__builtin_add_overflow(i, step, &i)) break;
        }
        return *out = l, 1;
    }
    if (!strcmp(f, "strftime_now")) {
        if (a->n_pos != 1 || a->pos[0].type != JV_STR)
            return fail(c, line, "strftime_now(format) needs a format string");
        char fmt[256], buf[512];
        snprintf(fmt, sizeof fmt, "%.*s", (int)a->pos[0].u.str.n, a->pos[0].u.str.s);
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        size_t n = strftime(buf, sizeof buf, fmt, &tm);
        return *out = jv_str(jarena_strdup(c->a, buf, n), n), 1;
    }
    return fail(c, line, "unsupported function '%s'", f);
}

/* ---- tests --------------------------------------------------------------------------------- */
static int apply_test(ctx *c, int line, const char *t, jv v, const args *a, int *out) {
    const jv *a0 = arg(a, 0, NULL);
    if (!strcmp(t, "defined")) return *out = v.type != JV_UNDEF, 1;
    if (!strcmp(t, "undefined")) return *out = v.type == JV_UNDEF, 1;
    if (!strcmp(t, "none")) return *out = v.type == JV_NONE, 1;
    if (!strcmp(t, "string")) return *out = v.type == JV_STR, 1;
    if (!strcmp(t, "number")) return *out = is_num(v), 1;
    if (!strcmp(t, "integer")) return *out = v.type == JV_INT, 1;
    if (!strcmp(t, "float")) return *out = v.type == JV_FLOAT, 1;
    if (!strcmp(t, "boolean")) return *out = v.type == JV_BOOL, 1;
    if (!strcmp(t, "true")) return *out = v.type == JV_BOOL && v.u.i, 1;
    if (!strcmp(t, "false")) return *out = v.type == JV_BOOL && !v.u.i, 1;
    if (!strcmp(t, "mapping")) return *out = v.type == JV_DICT, 1;
    if (!strcmp(t, "iterable"))
        return *out =
                   v.type == JV_STR || v.type == JV_LIST || v.type == JV_DICT || v.type == JV_UNDEF,
               1;
    if (!strcmp(t, "sequence"))
        return *out = v.type == JV_STR || v.type == JV_LIST || v.type == JV_DICT, 1;
    if (!strcmp(t, "callable")) return *out = v.type == JV_FUNC || v.type == JV_METHOD, 1;
    if (!strcmp(t, "lower") || !strcmp(t, "upper")) {
        if (v.type != JV_STR) return *out = 0, 1;
        jv x = str_case(c, v, t[0] == 'l' ? 'l' : 'u');
        return *out = jv_equal(x, v), 1;
    }
    if (!strcmp(t, "odd") || !strcmp(t, "even") || !strcmp(t, "divisibleby")) {
        if (!need_int(c, line, &v, t)) return 0;
        int64_t m = 2;
        if (t[0] == 'd') {
            if (!need_int(c, line, a0, t)) return 0;
            m = a0->u.i;
            if (m == 0) return fail(c, line, "divisibleby(0)");
        }
        int64_t r = m == -1 ? 0 : v.u.i % m;
        return *out = t[0] == 'o' ? r != 0 : r == 0, 1;
    }
    if (!strcmp(t, "sameas")) {
        if (!a0) return fail(c, line, "sameas needs an argument");
        if (v.type != a0->type) return *out = 0, 1;
        if (v.type == JV_NONE || v.type == JV_UNDEF) return *out = 1, 1;
        if (v.type == JV_BOOL || v.type == JV_INT) return *out = v.u.i == a0->u.i, 1;
        if (v.type == JV_LIST) return *out = v.u.list == a0->u.list, 1;
        if (v.type == JV_DICT || v.type == JV_NS) return *out = v.u.dict == a0->u.dict, 1;
        return *out = jv_equal(v, *a0), 1;
    }
    if (!strcmp(t, "in")) {
        if (!a0) return fail(c, line, "the 'in' test needs an argument");
        return contains(c, line, v, *a0, out);
    }
    static const struct {
        const char *name;
        int op;
    } cmps[] = {{"eq", JC_EQ}, {"equalto", JC_EQ}, {"==", JC_EQ}, {"ne", JC_NE}, {"!=", JC_NE},
                {"lt", JC_LT}, {"<", JC_LT},       {"le", JC_LE}, {"<=", JC_LE}, {"gt", JC_GT},
                {">", JC_GT},  {"ge", JC_GE},      {">=", JC_GE}};
    for (size_t i = 0; i < sizeof cmps / sizeof cmps[0]; i++)
        if (!strcmp(t, cmps[i].name)) {
            if (!a0) return fail(c, line, "test '%s' needs an argument", t);
            return compare(c, line, cmps[i].op, v, *a0, out);
        }
    return fail(c, line, "unsupported test '%s'", t);
}

/* ---- filters ------------------------------------------------------------------------------- */
static int apply_filter(ctx *c, int line, const char *f, jv v, const args *a, jv *out);

static int length_of(ctx *c, int line, jv v, int64_t *n) {
    switch (v.type) {
    case JV_STR: *n = (int64_t)ju8_len(v.u.str.s, v.u.str.n); return 1;
    case JV_LIST: *n = (int64_t)v.u.list->n; return 1;
    case JV_DICT:
    case JV_NS: *n = (int64_t)v.u.dict->n; return 1;
    case JV_UNDEF: *n = 0; return 1;
    default: return fail(c, line, "object of type '%s' has no len()", jv_type_name(v.type));
    }
}

/* Case-insensitive (ASCII) ordering used by sort/dictsort/unique, as jinja2's defaults. */
static int sort_cmp(jv a, jv b, int case_sensitive) {
    if (is_num(a) && is_num(b)) return (num(a) > num(b)) - (num(a) < num(b));
    if (a.type == JV_STR && b.type == JV_STR) {
        size_t n = a.u.str.n < b.u.str.n ? a.u.str.n : b.u.str.n;
        for (size_t i = 0; i < n; i++) {
            unsigned char x = (unsigned char)a.u.str.s[i], y = (unsigned char)b.u.str.s[i];
            if (!case_sensitive) {
                if (x >= 'A' && x <= 'Z') x += 32;
                if (y >= 'A' && y <= 'Z') y += 32;
            }
            if (x != y) return x < y ? -1 : 1;
        }
        return (a.u.str.n > b.u.str.n) - (a.u.str.n < b.u.str.n);
    }
    return a.type - b.type;
}

static int select_items(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    int by_attr = !strcmp(f, "selectattr") || !strcmp(f, "rejectattr");
    int keep_if = f[0] == 's';
    jlist *items;
    if (!to_items(c, line, v, &items)) return 0;
    int first = by_attr ? 1 : 0;
    const jv *attr = by_attr ? arg(a, 0, NULL) : NULL;
    if (by_attr && !need_str(c, line, attr, f)) return 0;
    const jv *test = arg(a, first, NULL);
    if (test && !need_str(c, line, test, f)) return 0;
    args targs = {0};
    for (int i = first + 1; i < a->n_pos; i++) targs.pos[targs.n_pos++] = a->pos[i];
    jv l = jv_list_new(c->a, 0);
    for (size_t i = 0; i < items->n; i++) {
        jv x = items->items[i];
        if (by_attr) {
            const char *nm = jarena_strdup(c->a, attr->u.str.s, attr->u.str.n);
            if (!get_attr(c, line, x, nm, &x)) return 0;
        }
        int ok;
        if (test) {
            const char *tn = jarena_strdup(c->a, test->u.str.s, test->u.str.n);
            if (!apply_test(c, line, tn, x, &targs, &ok)) return 0;
        } else
            ok = jv_truthy(x);
        if (ok == keep_if) jlist_push(c->a, l.u.list, items->items[i]);
    }
    *out = l;
    return 1;
}

static int filter_length_count(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    (void)f;
    (void)a;
    int64_t n = 0;
    if (!length_of(c, line, v, &n)) return 0;
    return *out = jv_int(n), 1;
}

static int filter_safe(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    (void)f;
    (void)line;
    (void)c;
    (void)a;
    return *out = v, 1;
}

static int filter_string(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    (void)f;
    (void)line;
    (void)a;
    return *out = to_str_value(c, v), 1;
}

static int filter_trim(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    (void)f;
    const jv *chars = arg(a, 0, "chars");
    if (chars && chars->type == JV_NONE) chars = NULL;
    if (chars && !need_str(c, line, chars, "trim")) return 0;
    return *out = str_strip(to_str_value(c, v), chars, 3), 1;
}

/* transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
 * sort_keys=False), in that positional order. */
static int filter_tojson(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    (void)f;
    const jv *ea = arg(a, 0, "ensure_ascii"), *ind = arg(a, 1, "indent");
    const jv *sep = arg(a, 2, "separators"), *sk = arg(a, 3, "sort_keys");
    jv_json_format fmt = {.sort_keys = sk && jv_truthy(*sk), .ensure_ascii = ea && jv_truthy(*ea)};
    if (ind && ind->type == JV_STR)
        fmt.indent = jarena_strdup(c->a, ind->u.str.s, ind->u.str.n);
    else if (ind && is_int(*ind)) {
        int64_t k = ind->u.i < 0 ? 0 : ind->u.i > 64 ? 64 : ind->u.i;
        char *spaces = jarena_alloc(c->a, (size_t)k + 1);
        memset(spaces, ' ', (size_t)k);
        fmt.indent = spaces;
    } else if (ind && ind->type != JV_NONE)
        return fail(c, line, "tojson(indent) expects an integer, a string or none, got %s",
                    jv_type_name(ind->type));
    if (sep && sep->type != JV_NONE) {
        if (sep->type != JV_LIST || sep->u.list->n != 2 || sep->u.list->items[0].type != JV_STR ||
            sep->u.list->items[1].type != JV_STR)
            return fail(c, line, "tojson(separators) expects a pair of strings (item, key)");
        jv is = sep->u.list->items[0], ks = sep->u.list->items[1];
        fmt.item_sep = jarena_strdup(c->a, is.u.str.s, is.u.str.n);
        fmt.key_sep = jarena_strdup(c->a, ks.u.str.s, ks.u.str.n);
    }
    jbuf b = {0};
    grpo_error why;
    grpo_error_init(&why);
    if (jv_to_json(&b, v, &fmt, &why) != GRPO_OK) {
        free(b.data);
        return fail(c, line, "tojson: %s", why.message);
    }
    return *out = str_from_buf(c, &b), 1;
}

static int filter_default(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    (void)f;
    (void)line;
    (void)c;
    const jv *def = arg(a, 0, "default_value"), *boolean = arg(a, 1, "boolean");
    int use = v.type == JV_UNDEF || (boolean && jv_truthy(*boolean) && !jv_truthy(v));
    return *out = use ? (def ? *def : jv_str("", 0)) : v, 1;
}

static int filter_case(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    (void)line;
    (void)a;
    jv s = to_str_value(c, v);
    if (f[0] == 'c')
        s = str_case(c, str_case(c, s, 'l'), 'c');
    else
        s = str_case(c, s, f[0] == 'l' ? 'l' : f[0] == 'u' ? 'u' : 'T');
    return *out = s, 1;
}

static int filter_replace(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    const jv *a0 = arg(a, 0, NULL);
    (void)f;
    jv s = to_str_value(c, v);
    if (!need_str(c, line, a0, "replace") || !need_str(c, line, arg(a, 1, NULL), "replace"))
        return 0;
    const jv *cnt = arg(a, 2, "count");
    if (cnt && cnt->type != JV_NONE && !need_int(c, line, cnt, "replace")) return 0;
    return *out = str_replace(c, s, *a0, *arg(a, 1, NULL),
                              cnt && cnt->type != JV_NONE ? cnt->u.i : -1),
           1;
}

static int filter_first_last(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    (void)a;
    jlist *items;
    if (!to_items(c, line, v, &items)) return 0;
    if (!items->n) return *out = jv_undef(NULL), 1;
    return *out = items->items[f[0] == 'f' ? 0 : items->n - 1], 1;
}

static int filter_join(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    (void)f;
    jlist *items;
    if (!to_items(c, line, v, &items)) return 0;
    const jv *sep = arg(a, 0, "d"), *attr = arg(a, 1, "attribute");
    if (sep && !need_str(c, line, sep, "join")) return 0;
    jbuf b = {0};
    for (size_t i = 0; i < items->n; i++) {
        jv x = items->items[i];
        if (attr) {
            jbuf nb = {0};
            jv_to_str(&nb, *attr);
            const char *nm = jarena_strdup(c->a, nb.data ? nb.data : "", nb.len);
            free(nb.data);
            if (!get_attr(c, line, x, nm, &x)) return free(b.data), 0;
        }
        if (i && sep) jbuf_put(&b, sep->u.str.s, sep->u.str.n);
        jv_to_str(&b, x);
    }
    return *out = str_from_buf(c, &b), 1;
}

static int filter_list(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    (void)f, (void)a;
    jlist *items;
    if (!to_items(c, line, v, &items)) return 0;
    jv l = jv_list_new(c->a, items->n);
    for (size_t i = 0; i < items->n; i++) jlist_push(c->a, l.u.list, items->items[i]);
    return *out = l, 1;
}

static int filter_reverse(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    (void)f, (void)a;
    if (v.type == JV_STR) {
        jv m1 = jv_int(-1);
        return do_slice(c, line, v, NULL, NULL, &m1, out);
    }
    jlist *items;
    if (!to_items(c, line, v, &items)) return 0;
    jv l = jv_list_new(c->a, items->n);
    for (size_t i = items->n; i-- > 0;) jlist_push(c->a, l.u.list, items->items[i]);
    return *out = l, 1;
}

static int filter_items(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    (void)f, (void)a;
    if (v.type == JV_UNDEF) return *out = jv_list_new(c->a, 0), 1;
    if (v.type != JV_DICT)
        return fail(c, line, "items filter expects a mapping, got %s", jv_type_name(v.type));
    args none = {0};
    return call_method(c, line, v, "items", &none, out);
}

static int filter_number(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    (void)line;
    (void)c;
    int to_int = f[0] == 'i';
    const jv *def = arg(a, 0, "default");
    jv d = def ? *def : to_int ? jv_int(0) : jv_float(0.0);
    double x;
    if (is_num(v))
        x = num(v);
    else if (v.type == JV_STR) {
        if (memchr(v.u.str.s, 'x', v.u.str.n) || memchr(v.u.str.s, 'X', v.u.str.n))
            return *out = d, 1;
        char tmp[128], *end;
        snprintf(tmp, sizeof tmp, "%.*s", (int)(v.u.str.n < 127 ? v.u.str.n : 127), v.u.str.s);
        x = strtod(tmp, &end);
        while (*end == ' ' || *end == '\n' || *end == '\t') end++;
        if (end == tmp || *end) return *out = d, 1;
    } else
        return *out = d, 1;
    if (to_int && !(x > -9.2e18 && x < 9.2e18)) return *out = d, 1;
    return *out = to_int ? jv_int((int64_t)x) : jv_float(x), 1;
}

static int filter_abs(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    (void)f, (void)a;
    if (!is_num(v)) return fail(c, line, "bad operand type for abs(): '%s'", jv_type_name(v.type));
    if (v.type != JV_FLOAT && v.u.i == INT64_MIN) return fail(c, line, "integer overflow in abs");
    return *out = v.type == JV_FLOAT ? jv_float(fabs(v.u.f)) : jv_int(v.u.i < 0 ? -v.u.i : v.u.i),
           1;
}

static int filter_round(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    (void)f;
    const jv *prec = arg(a, 0, "precision"), *meth = arg(a, 1, "method");
    if (!is_num(v)) return fail(c, line, "round expects a number, got %s", jv_type_name(v.type));
    if (prec && !need_int(c, line, prec, "round(precision)")) return 0;
    int64_t digits = prec ? prec->u.i : 0;
    if (digits < 0 || digits > 300)
        return fail(c, line, "round: precision %lld is not supported", (long long)digits);
    int ceil_ =
        meth && meth->type == JV_STR && meth->u.str.n == 4 && !memcmp(meth->u.str.s, "ceil", 4);
    int floor_ =
        meth && meth->type == JV_STR && meth->u.str.n == 5 && !memcmp(meth->u.str.s, "floor", 5);
    if (ceil_ || floor_) { /* math.ceil/floor(value * 10**p) / 10**p: always a float */
        double p = pow(10.0, (double)digits), x = num(v) * p;
        return *out = jv_float((ceil_ ? ceil(x) : floor(x)) / p), 1;
    }
    if (is_int(v)) return *out = jv_int(v.u.i), 1; /* Python round(int, p) is that int */
    /* Python round(float, p): correctly rounded, ties to even, as printf does */
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%.*f", (int)digits, v.u.f);
    return *out = jv_float(strtod(tmp, NULL)), 1; /* tmp: our own "%f" text, a number */
}

static int filter_sum(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    const jv *a0 = arg(a, 0, NULL);
    (void)f;
    jlist *items;
    if (!to_items(c, line, v, &items)) return 0;
    jv acc = a0 ? *a0 : jv_int(0);
    const jv *attr = arg(a, -1, "attribute");
    for (size_t i = 0; i < items->n; i++) {
        jv x = items->items[i];
        if (attr && attr->type == JV_STR &&
            !get_attr(c, line, x, jarena_strdup(c->a, attr->u.str.s, attr->u.str.n), &x))
            return 0;
        if (!arith(c, line, '+', acc, x, &acc)) return 0;
    }
    return *out = acc, 1;
}

static int filter_wordcount(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    (void)f;
    (void)a;
    jv s = to_str_value(c, v), parts;
    if (!str_split(c, line, s, NULL, -1, 0, &parts)) return 0;
    return *out = jv_int((int64_t)parts.u.list->n), 1;
}

static int filter_map(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    const jv *a0 = arg(a, 0, NULL);
    (void)f;
    jlist *items;
    if (!to_items(c, line, v, &items)) return 0;
    const jv *attr = arg(a, -1, "attribute"), *def = arg(a, -1, "default");
    jv l = jv_list_new(c->a, items->n);
    args rest = {0};
    for (int i = 1; i < a->n_pos; i++) rest.pos[rest.n_pos++] = a->pos[i];
    if (!attr && !need_str(c, line, a0, "map")) return 0;
    for (size_t i = 0; i < items->n; i++) {
        jv x;
        if (attr) {
            if (!need_str(c, line, attr, "map(attribute)")) return 0;
            if (!get_attr(c, line, items->items[i],
                          jarena_strdup(c->a, attr->u.str.s, attr->u.str.n), &x))
                return 0;
            if (x.type == JV_UNDEF && def) x = *def;
        } else if (!apply_filter(c, line, jarena_strdup(c->a, a0->u.str.s, a0->u.str.n),
                                 items->items[i], &rest, &x))
            return 0;
        jlist_push(c->a, l.u.list, x);
    }
    return *out = l, 1;
}

static int filter_unique_sort(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    jlist *items;
    if (f[0] == 'd') {
        if (v.type != JV_DICT)
            return fail(c, line, "dictsort expects a mapping, got %s", jv_type_name(v.type));
        args none = {0};
        jv it;
        call_method(c, line, v, "items", &none, &it);
        items = it.u.list;
    } else if (!to_items(c, line, v, &items))
        return 0;
    const jv *cs = arg(a, -1, "case_sensitive"), *rev = arg(a, f[0] == 's' ? 0 : -1, "reverse");
    const jv *attr = arg(a, -1, "attribute");
    if (attr) return fail(c, line, "%s(attribute=...) is not supported", f);
    int sens = cs && jv_truthy(*cs), reverse = rev && jv_truthy(*rev);
    jv l = jv_list_new(c->a, items->n);
    for (size_t i = 0; i < items->n; i++) {
        jv x = items->items[i];
        if (f[0] == 'u') {
            int seen = 0;
            for (size_t k = 0; k < l.u.list->n && !seen; k++) {
                jv y = l.u.list->items[k];
                seen = x.type == JV_STR && y.type == JV_STR ? sort_cmp(x, y, sens) == 0
                                                            : jv_equal(x, y);
            }
            if (!seen) jlist_push(c->a, l.u.list, x);
            continue;
        }
        /* stable insertion sort */
        size_t k = l.u.list->n;
        jlist_push(c->a, l.u.list, x);
        while (k > 0) {
            jv ka = l.u.list->items[k - 1], kb = x;
            if (f[0] == 'd') ka = ka.u.list->items[0], kb = kb.u.list->items[0];
            int cmp = sort_cmp(ka, kb, sens);
            if (reverse ? cmp >= 0 : cmp <= 0) break;
            l.u.list->items[k] = l.u.list->items[k - 1];
            k--;
        }
        l.u.list->items[k] = x;
    }
    return *out = l, 1;
}
typedef int (*filter_fn)(ctx *c, int line, const char *f, jv v, const args *a, jv *out);

/* Every filter, by name (jinja_parse.c checks names against the same list at compile time). */
static const struct {
    const char *name;
    filter_fn fn;
} filters[] = {
    {"length", filter_length_count},
    {"count", filter_length_count},
    {"safe", filter_safe},
    {"string", filter_string},
    {"trim", filter_trim},
    {"tojson", filter_tojson},
    {"default", filter_default},
    {"d", filter_default},
    {"lower", filter_case},
    {"upper", filter_case},
    {"title", filter_case},
    {"capitalize", filter_case},
    {"replace", filter_replace},
    {"first", filter_first_last},
    {"last", filter_first_last},
    {"join", filter_join},
    {"list", filter_list},
    {"reverse", filter_reverse},
    {"items", filter_items},
    {"int", filter_number},
    {"float", filter_number},
    {"abs", filter_abs},
    {"round", filter_round},
    {"sum", filter_sum},
    {"wordcount", filter_wordcount},
    {"map", filter_map},
    {"select", select_items},
    {"reject", select_items},
    {"selectattr", select_items},
    {"rejectattr", select_items},
    {"unique", filter_unique_sort},
    {"sort", filter_unique_sort},
    {"dictsort", filter_unique_sort},
};

static int apply_filter(ctx *c, int line, const char *f, jv v, const args *a, jv *out) {
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++)
        if (!strcmp(f, filters[i].name)) return filters[i].fn(c, line, f, v, a, out);
    return fail(c, line, "unsupported filter '%s'", f);
}

/* ---- macros ------------------------------------------------------------------------------- */
static int exec_block(ctx *c, scope *s, const jnode *block, jbuf *out);

/* Calls a {% macro %}: parameters bound in a fresh scope over the defining one; the result is
 * the rendered body. varargs/kwargs/caller are not supported. */
static int call_macro(ctx *c, int line, jv m, const args *a, jv *out) {
    const jnode *def = m.u.macro.node;
    scope *ms = new_scope(c, m.u.macro.scope);
    if (a->n_pos > def->n_names)
        return fail(c, line, "macro '%s' takes %d arguments, got %d (varargs are not supported)",
                    def->name, def->n_names, a->n_pos);
    for (int k = 0; k < a->n_kw; k++) {
        int found = 0;
        for (int i = 0; i < def->n_names; i++) found |= strcmp(def->names[i], a->kw_names[k]) == 0;
        if (!found)
            return fail(c, line, "macro '%s' has no parameter '%s' (kwargs are not supported)",
                        def->name, a->kw_names[k]);
    }
    for (int i = 0; i < def->n_names; i++) {
        const jv *v = arg(a, i, def->names[i]);
        jv val;
        if (v)
            val = *v;
        else if (def->kids[i]) {
            if (!eval(c, ms, def->kids[i], &val)) return 0;
        } else
            val = jv_undef(def->names[i]);
        assign(c, ms, def->names[i], val);
    }
    if (c->macro_depth >= JINJA_MAX_MACRO_DEPTH)
        return fail(c, line,
                    "macro '%s' called more than %d deep (does it call itself without end?)",
                    def->name, JINJA_MAX_MACRO_DEPTH);
    jbuf body = {0};
    const char *outer = c->macro;
    c->macro_depth++, c->macro = def->name;
    int r = exec_block(c, ms, def->b, &body);
    c->macro_depth--, c->macro = outer;
    if (r != X_OK) {
        free(body.data);
        return r == X_ERR ? 0
                          : fail(c, line, "'break' or 'continue' outside a for loop in macro '%s'",
                                 def->name);
    }
    *out = str_from_buf(c, &body);
    return 1;
}

/* ---- expressions --------------------------------------------------------------------------- */
static int eval_node(ctx *c, scope *s, const jnode *n, jv *out);

/* Every expression is evaluated through here, so its nesting counts against the run depth. */
static int eval(ctx *c, scope *s, const jnode *n, jv *out) {
    if (c->depth >= JINJA_MAX_RUN_DEPTH) return too_deep(c, n->line);
    c->depth++;
    int ok = eval_node(c, s, n, out);
    c->depth--;
    return ok;
}

static int eval_node(ctx *c, scope *s, const jnode *n, jv *out) {
    jv a, b;
    switch (n->kind) {
    case JN_LIT: *out = n->lit; return 1;
    case JN_NAME: *out = lookup(c, s, n->name); return 1;
    case JN_GETATTR: return eval(c, s, n->a, &a) && get_attr(c, n->line, a, n->name, out);
    case JN_GETITEM:
        return eval(c, s, n->a, &a) && eval(c, s, n->b, &b) && get_item(c, n->line, a, b, out);
    case JN_SLICE: {
        jv st, sp, step;
        if (!eval(c, s, n->a, &a)) return 0;
        if (n->b && !eval(c, s, n->b, &st)) return 0;
        if (n->c && !eval(c, s, n->c, &sp)) return 0;
        if (n->d && !eval(c, s, n->d, &step)) return 0;
        return do_slice(c, n->line, a, n->b && st.type != JV_NONE ? &st : NULL,
                        n->c && sp.type != JV_NONE ? &sp : NULL,
                        n->d && step.type != JV_NONE ? &step : NULL, out);
    }
    case JN_CALL: {
        args ar;
        if (n->a->kind == JN_GETATTR) { /* obj.method(...): name the method when it is unknown */
            jv obj;
            if (!eval(c, s, n->a->a, &obj)) return 0;
            if (!get_attr(c, n->line, obj, n->a->name, &a)) return 0;
            if (a.type == JV_UNDEF &&
                (obj.type == JV_STR || obj.type == JV_DICT || obj.type == JV_LIST))
                return fail(c, n->line, "unsupported method '%s' of %s", n->a->name,
                            jv_type_name(obj.type));
        } else if (!eval(c, s, n->a, &a))
            return 0;
        if (!eval_args(c, s, n, &ar)) return 0;
        if (a.type == JV_FUNC) return call_func(c, n->line, a.u.func, &ar, out);
        if (a.type == JV_METHOD)
            return call_method(c, n->line, *a.u.method.self, a.u.method.name, &ar, out);
        if (a.type == JV_MACRO) return call_macro(c, n->line, a, &ar, out);
        if (a.type == JV_UNDEF) return fail_undef(c, n->line, a);
        return fail(c, n->line, "'%s' object is not callable", jv_type_name(a.type));
    }
    case JN_FILTER: {
        args ar;
        return eval(c, s, n->a, &a) && eval_args(c, s, n, &ar) &&
               apply_filter(c, n->line, n->name, a, &ar, out);
    }
    case JN_TEST: {
        args ar;
        int r;
        if (!eval(c, s, n->a, &a) || !eval_args(c, s, n, &ar) ||
            !apply_test(c, n->line, n->name, a, &ar, &r))
            return 0;
        *out = jv_bool(n->op ? !r : r);
        return 1;
    }
    case JN_BINOP:
        if (!eval(c, s, n->a, &a) || !eval(c, s, n->b, &b)) return 0;
        if (n->op != '~' && (a.type == JV_UNDEF || b.type == JV_UNDEF))
            return fail_undef(c, n->line, a.type == JV_UNDEF ? a : b);
        return arith(c, n->line, n->op, a, b, out);
    case JN_NEG:
    case JN_POS:
        if (!eval(c, s, n->a, &a)) return 0;
        if (!is_num(a))
            return fail(c, n->line, "bad operand type for unary %c: '%s'",
                        n->kind == JN_NEG ? '-' : '+', jv_type_name(a.type));
        if (n->kind == JN_POS)
            *out = a.type == JV_BOOL ? jv_int(a.u.i) : a;
        else if (a.type != JV_FLOAT && a.u.i == INT64_MIN)
            return fail(c, n->line, "integer overflow in unary -");
        else
            *out = a.type == JV_FLOAT ? jv_float(-a.u.f) : jv_int(-a.u.i);
        return 1;
    case JN_NOT:
        if (!eval(c, s, n->a, &a)) return 0;
        *out = jv_bool(!jv_truthy(a));
        return 1;
    case JN_AND:
        if (!eval(c, s, n->a, &a)) return 0;
        if (!jv_truthy(a)) return *out = a, 1;
        return eval(c, s, n->b, out);
    case JN_OR:
        if (!eval(c, s, n->a, &a)) return 0;
        if (jv_truthy(a)) return *out = a, 1;
        return eval(c, s, n->b, out);
    case JN_COMPARE: {
        if (!eval(c, s, n->a, &a)) return 0;
        for (int i = 0; i < n->n_kids; i++) {
            int r;
            if (!eval(c, s, n->kids[i], &b) || !compare(c, n->line, n->ops[i], a, b, &r)) return 0;
            if (!r) return *out = jv_bool(0), 1;
            a = b;
        }
        *out = jv_bool(1);
        return 1;
    }
    case JN_COND:
        if (!eval(c, s, n->a, &a)) return 0;
        if (jv_truthy(a)) return eval(c, s, n->b, out);
        if (n->c) return eval(c, s, n->c, out);
        *out = jv_undef(NULL);
        return 1;
    case JN_LIST:
    case JN_TUPLE: {
        jv l = jv_list_new(c->a, (size_t)n->n_kids);
        l.u.list->is_tuple = n->kind == JN_TUPLE;
        for (int i = 0; i < n->n_kids; i++) {
            if (!eval(c, s, n->kids[i], &a)) return 0;
            jlist_push(c->a, l.u.list, a);
        }
        *out = l;
        return 1;
    }
    case JN_DICT: {
        jv d = jv_dict_new(c->a, JV_DICT);
        for (int i = 0; i + 1 < n->n_kids; i += 2) {
            if (!eval(c, s, n->kids[i], &a) || !eval(c, s, n->kids[i + 1], &b)) return 0;
            if (a.type == JV_LIST || a.type == JV_DICT || a.type == JV_NS)
                return fail(c, n->line, "unhashable type: '%s'", jv_type_name(a.type));
            jdict_set(c->a, d.u.dict, a, b);
        }
        *out = d;
        return 1;
    }
    default: return fail(c, n->line, "internal error: node kind %d is not an expression", n->kind);
    }
}

/* ---- statements ---------------------------------------------------------------------------- */
static int exec_node(ctx *c, scope *s, const jnode *n, jbuf *out);

static int exec_block(ctx *c, scope *s, const jnode *block, jbuf *out) {
    if (c->depth >= JINJA_MAX_RUN_DEPTH) return too_deep(c, block->line);
    c->depth++;
    int r = X_OK;
    for (int i = 0; i < block->n_kids && r == X_OK; i++) r = exec_node(c, s, block->kids[i], out);
    c->depth--;
    return r;
}

/* Binds loop targets: one name gets the item, several unpack a list/tuple of that length. */
static int bind_targets(ctx *c, scope *s, const jnode *n, jv item) {
    if (n->n_names == 1) return assign(c, s, n->names[0], item), 1;
    if (item.type != JV_LIST)
        return fail(c, n->line, "cannot unpack a '%s' into %d names", jv_type_name(item.type),
                    n->n_names);
    if ((int)item.u.list->n != n->n_names)
        return fail(c, n->line, "expected %d values to unpack, got %zu", n->n_names,
                    item.u.list->n);
    for (int k = 0; k < n->n_names; k++) assign(c, s, n->names[k], item.u.list->items[k]);
    return 1;
}

static jv loop_object(ctx *c, jlist *items, size_t i) {
    jv d = jv_dict_new(c->a, JV_DICT);
    int64_t len = (int64_t)items->n, k = (int64_t)i;
    jdict *L = d.u.dict;
    jdict_set(c->a, L, key_of("index"), jv_int(k + 1));
    jdict_set(c->a, L, key_of("index0"), jv_int(k));
    jdict_set(c->a, L, key_of("revindex"), jv_int(len - k));
    jdict_set(c->a, L, key_of("revindex0"), jv_int(len - k - 1));
    jdict_set(c->a, L, key_of("first"), jv_bool(k == 0));
    jdict_set(c->a, L, key_of("last"), jv_bool(k == len - 1));
    jdict_set(c->a, L, key_of("length"), jv_int(len));
    jdict_set(c->a, L, key_of("depth"), jv_int(1));
    jdict_set(c->a, L, key_of("depth0"), jv_int(0));
    jdict_set(c->a, L, key_of("previtem"), k > 0 ? items->items[k - 1] : jv_undef("previtem"));
    jdict_set(c->a, L, key_of("nextitem"),
              k + 1 < len ? items->items[k + 1] : jv_undef("nextitem"));
    jdict_set(c->a, L, key_of("cycle"), bound(c, d, "cycle"));
    return d;
}

static int exec_for(ctx *c, scope *s, const jnode *n, jbuf *out) {
    jv it;
    jlist *items;
    if (!eval(c, s, n->a, &it) || !to_items(c, n->a->line, it, &items)) return X_ERR;
    if (n->d) { /* for x in xs if cond: filter first, so loop.length counts what is kept */
        jv kept = jv_list_new(c->a, items->n);
        for (size_t i = 0; i < items->n; i++) {
            scope *fs = new_scope(c, s);
            jv ok;
            if (!bind_targets(c, fs, n, items->items[i]) || !eval(c, fs, n->d, &ok)) return X_ERR;
            if (jv_truthy(ok)) jlist_push(c->a, kept.u.list, items->items[i]);
        }
        items = kept.u.list;
    }
    for (size_t i = 0; i < items->n; i++) {
        scope *is = new_scope(c, s);
        if (!bind_targets(c, is, n, items->items[i])) return X_ERR;
        assign(c, is, "loop", loop_object(c, items, i));
        int r = exec_block(c, is, n->b, out);
        if (r == X_ERR) return X_ERR;
        if (r == X_BREAK) break;
    }
    if (items->n == 0 && n->c) return exec_block(c, s, n->c, out) == X_ERR ? X_ERR : X_OK;
    return X_OK;
}

static int exec_set(ctx *c, scope *s, const jnode *n) {
    jv v;
    if (!eval(c, s, n->a, &v)) return X_ERR;
    if (n->attr) {
        jv target = lookup(c, s, n->names[0]);
        if (target.type != JV_NS)
            return fail(c, n->line,
                        "cannot assign attribute '%s' on '%s': it is a %s, not a namespace",
                        n->attr, n->names[0], jv_type_name(target.type));
        jdict_set(c->a, target.u.dict, key_of(n->attr), v);
        return X_OK;
    }
    return bind_targets(c, s, n, v) ? X_OK : X_ERR;
}

static int exec_node(ctx *c, scope *s, const jnode *n, jbuf *out) {
    jv v;
    switch (n->kind) {
    case JN_BLOCK: return exec_block(c, s, n, out);
    case JN_TEXT: jbuf_put(out, n->lit.u.str.s, n->lit.u.str.n); return X_OK;
    case JN_OUTPUT:
        if (!eval(c, s, n->a, &v)) return X_ERR;
        jv_to_str(out, v);
        return X_OK;
    case JN_IF:
        for (const jnode *branch = n; branch; branch = branch->c) {
            if (branch->kind != JN_IF) return exec_block(c, s, branch, out);
            if (!eval(c, s, branch->a, &v)) return X_ERR;
            if (jv_truthy(v)) return exec_block(c, s, branch->b, out);
        }
        return X_OK;
    case JN_FOR: return exec_for(c, s, n, out);
    case JN_SET: return exec_set(c, s, n);
    case JN_SETBLOCK: {
        jbuf body = {0};
        int r = exec_block(c, s, n->b, &body);
        if (r == X_ERR) return free(body.data), X_ERR;
        assign(c, s, n->names[0], str_from_buf(c, &body));
        return r;
    }
    case JN_MACRO: {
        jv m = {.type = JV_MACRO};
        m.u.macro.node = n, m.u.macro.scope = s;
        assign(c, s, n->name, m);
        return X_OK;
    }
    case JN_BREAK: return X_BREAK;
    case JN_CONTINUE: return X_CONTINUE;
    default: return fail(c, n->line, "internal error: node kind %d is not a statement", n->kind);
    }
}

int32_t jinja_render(const jtemplate *t, jarena *arena, jdict *globals, jbuf *out,
                     grpo_error *err) {
    ctx c = {.t = t, .a = arena, .globals = globals, .err = err, .status = GRPO_OK};
    static const char *const funcs[] = {"raise_exception", "namespace",    "dict",
                                        "range",           "strftime_now", NULL};
    for (int i = 0; funcs[i]; i++)
        if (!jdict_get_str(globals, funcs[i], strlen(funcs[i]))) {
            jv f = {.type = JV_FUNC};
            f.u.func = funcs[i];
            jdict_set(arena, globals, key_of(funcs[i]), f);
        }
    scope *root = new_scope(&c, NULL);
    int r = exec_block(&c, root, t->root, out);
    if (r == X_BREAK || r == X_CONTINUE) /* jinja2 rejects these outside loops at compile time */
        return fail(&c, 1, "'break' or 'continue' outside a for loop"), c.status;
    if (!out->data) jbuf_put(out, "", 0);
    if (r == X_OK) return GRPO_OK;
    if (c.failed) return c.status;
    return grpo_error_set(err, GRPO_ERR_INTERNAL, "%s: rendering stopped without a message (a bug)",
                          t->name);
}
