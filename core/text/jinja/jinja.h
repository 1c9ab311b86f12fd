/*
 * jinja.h — internals of the Jinja subset interpreter behind chat_template.h (not a public API).
 *
 * Three parts, one file each:
 *   jinja_value.c  values with Python semantics (str(), repr(), json.dumps, truthiness, ==),
 *                  the arena every value and AST node lives in, and a JSON → value reader;
 *   jinja_parse.c  lexer (trim_blocks, lstrip_blocks, {%- -%}, comments, raw) and parser → AST;
 *   jinja_eval.c   the tree-walking evaluator: statements, operators, filters, tests, methods.
 *
 * Ownership: a compiled template owns one arena holding its AST; each render owns a second arena
 * holding every value it creates, freed in one go when the render ends. Strings are UTF-8 byte
 * ranges (not NUL-terminated) and immutable; lists, dicts and namespaces are mutable only where
 * Jinja allows it ({% set ns.x = ... %}).
 */
#ifndef GRPO_JINJA_H
#define GRPO_JINJA_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "grpo/plugin.h" /* grpo_error, GRPO_OK, GRPO_ERR_* */

/* ---- arena: bump allocator, freed all at once --------------------------------------------- */
typedef struct jarena_block jarena_block;
typedef struct jarena {
    jarena_block *head;
} jarena;

void *jarena_alloc(jarena *a, size_t n);                 /* zeroed; aborts on out-of-memory */
char *jarena_strdup(jarena *a, const char *s, size_t n); /* copies n bytes, adds a NUL */
void jarena_free(jarena *a);

/* ---- growable byte buffer ------------------------------------------------------------------ */
typedef struct jbuf {
    char *data; /* NUL-terminated, heap-owned */
    size_t len, cap;
} jbuf;

void jbuf_put(jbuf *b, const char *s, size_t n);
void jbuf_puts(jbuf *b, const char *s);
void jbuf_putc(jbuf *b, char c);

/* ---- values -------------------------------------------------------------------------------- */
typedef enum jv_type {
    JV_UNDEF = 0, /* jinja2.Undefined: prints "", falsy, errors on + and .attr */
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,   /* list or tuple (jlist.is_tuple) */
    JV_DICT,   /* dict: insertion-ordered */
    JV_NS,     /* namespace(): a dict whose entries are attributes */
    JV_FUNC,   /* a global function: raise_exception, namespace, dict, range, strftime_now */
    JV_METHOD, /* a bound method: obj.name, called later */
    JV_MACRO,  /* a {% macro %}: its node and the scope it was defined in */
} jv_type;

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jv jv;

struct jv {
    int type; /* jv_type */
    union {
        int64_t i; /* JV_BOOL (0/1), JV_INT */
        double f;  /* JV_FLOAT */
        struct {
            const char *s; /* JV_STR bytes; JV_UNDEF: the missing name (may be NULL) */
            size_t n;
        } str;
        jlist *list;
        jdict *dict;      /* JV_DICT, JV_NS */
        const char *func; /* JV_FUNC name */
        struct {
            jv *self;
            const char *name;
        } method;
        struct {
            const struct jnode *node;
            void *scope;
        } macro;
    } u;
};

struct jlist {
    jv *items; /* [n] */
    size_t n, cap;
    int is_tuple;
};

struct jdict {
    jv *keys, *vals; /* [n] each, insertion order */
    size_t n, cap;
};

jv jv_undef(const char *name);
jv jv_none(void);
jv jv_bool(int b);
jv jv_int(int64_t i);
jv jv_float(double f);
jv jv_str(const char *s, size_t n); /* borrows s: it must outlive the render */
jv jv_cstr(const char *s);
jv jv_list_new(jarena *a, size_t cap);
jv jv_dict_new(jarena *a, int type); /* JV_DICT or JV_NS */
void jlist_push(jarena *a, jlist *l, jv v);
void jdict_set(jarena *a, jdict *d, jv key, jv val); /* replaces an existing key */
jv *jdict_get(const jdict *d, jv key);               /* NULL when absent */
jv *jdict_get_str(const jdict *d, const char *key, size_t n);

const char *jv_type_name(int type); /* Python's name: "str", "int", "NoneType", ... */
int jv_truthy(jv v);
int jv_equal(jv a, jv b); /* Python ==, with Undefined == Undefined */

/* str(v) appended to out (Python semantics; Undefined prints nothing). */
void jv_to_str(jbuf *out, jv v);
/* json.dumps options. indent: the string put once per level after each newline (NULL: None,
 * everything on one line); item_sep/key_sep: NULL for Python's defaults ("," with an indent,
 * ", " without; ": "). */
typedef struct jv_json_format {
    const char *indent;
    const char *item_sep, *key_sep;
    int sort_keys, ensure_ascii;
} jv_json_format;

/* json.dumps(v, ...) appended to out. Returns GRPO_OK, or GRPO_ERR_INVALID with Python's
 * TypeError text in err (may be NULL) when v holds something JSON cannot encode. */
int32_t jv_to_json(jbuf *out, jv v, const jv_json_format *fmt, grpo_error *err);

/* Parses JSON text into values allocated in a (json.loads semantics: ints stay ints, floats stay
 * floats, object key order kept, duplicate keys: last wins). Returns GRPO_OK, or GRPO_ERR_INVALID
 * with "what at byte N" in err (may be NULL). */
int32_t jv_from_json(jarena *a, const char *text, size_t n, jv *out, grpo_error *err);

/* ---- UTF-8 helpers (Python strings index code points) -------------------------------------- */
size_t ju8_len(const char *s, size_t n);                     /* code points */
size_t ju8_offset(const char *s, size_t n, size_t cp_index); /* byte offset of a code point */
uint32_t ju8_decode(const char *s, size_t n, size_t *adv);   /* one code point */
int ju8_isspace(uint32_t cp);                                /* Python str.isspace */
/* Strict UTF-8 check (no overlongs, no surrogates, <= U+10FFFF): the offset of the first bad
 * byte, or len when the text is valid. */
size_t ju8_invalid_at(const char *s, size_t len);

/* ---- AST ----------------------------------------------------------------------------------- */
typedef enum jnode_kind {
    /* statements */
    JN_BLOCK,    /* kids: statements in order */
    JN_TEXT,     /* lit: the text */
    JN_OUTPUT,   /* a: expression */
    JN_IF,       /* a: cond, b: then block, c: else (block, nested JN_IF for elif, or NULL) */
    JN_FOR,      /* names: targets; a: iterable, b: body, c: else block, d: filter cond */
    JN_SET,      /* names: targets (1 = plain, >1 = unpack); attr: ns attribute or NULL; a: value */
    JN_SETBLOCK, /* names[0]: target; b: body captured as a string */
    JN_BREAK,
    JN_CONTINUE,
    JN_MACRO, /* name; names: params; kids: defaults (NULL = none); b: body */
    /* expressions */
    JN_LIT,     /* lit */
    JN_NAME,    /* name */
    JN_GETATTR, /* a: object, name */
    JN_GETITEM, /* a: object, b: key */
    JN_SLICE,   /* a: object, b: start, c: stop, d: step (each may be NULL) */
    JN_CALL,    /* a: callee, kids + names: args (names[i] NULL = positional) */
    JN_FILTER,  /* a: subject, name, kids + names: args */
    JN_TEST,    /* a: subject, name, kids: args, op: 1 when negated (is not) */
    JN_BINOP,   /* op: '+', '-', '*', '/', 'f' (//), '%', 'p' (**), '~'; a, b */
    JN_NEG,     /* a */
    JN_POS,     /* a */
    JN_NOT,     /* a */
    JN_AND,     /* a, b */
    JN_OR,      /* a, b */
    JN_COMPARE, /* a: first operand; kids: further operands; ops: one per kid */
    JN_COND,    /* a: test, b: value, c: else value (NULL = undefined) */
    JN_LIST,    /* kids */
    JN_TUPLE,   /* kids */
    JN_DICT,    /* kids: key0, val0, key1, val1, ... */
} jnode_kind;

/* comparison operators in JN_COMPARE.ops */
enum { JC_EQ, JC_NE, JC_LT, JC_LE, JC_GT, JC_GE, JC_IN, JC_NOTIN };

typedef struct jnode jnode;
struct jnode {
    int kind; /* jnode_kind */
    int line; /* 1-based line in the template source */
    int op;
    const char *name;
    const char *attr;
    jv lit;
    jnode *a, *b, *c, *d;
    jnode **kids;
    const char *
        *names; /* JN_CALL/JN_FILTER: keyword names parallel to kids; JN_FOR/JN_SET: targets */
    int *ops;
    int n_kids, n_names;
};

typedef struct jtemplate {
    jarena arena; /* owns every node and string below */
    jnode *root;  /* JN_BLOCK */
    char *name;   /* for error messages */
} jtemplate;

/* The status of an engine error: every message about a jinja2 feature this engine does not
 * implement begins with "unsupported" (the text is the engine's, so a template cannot fake it). */
static inline int32_t jinja_status_of(const char *what) {
    return strncmp(what, "unsupported", 11) == 0 ? GRPO_ERR_UNSUPPORTED : GRPO_ERR_INVALID;
}

/* Lexes and parses source. Returns GRPO_OK, or a status with "name:line: what" in err (may be
 * NULL): GRPO_ERR_UNSUPPORTED for a jinja2 construct this engine does not implement,
 * GRPO_ERR_INVALID for a syntax error. */
int32_t jinja_parse(jtemplate *t, const char *source, size_t n, grpo_error *err);

/* Renders t with the given global variables (a dict of name → value, allocated in arena).
 * The output goes to out. Returns GRPO_OK, or a status with "name:line: what" in err (may be
 * NULL): GRPO_ERR_UNSUPPORTED for a filter, test, method or operation this engine does not
 * implement, GRPO_ERR_INVALID for any other error the template raises. */
int32_t jinja_render(const jtemplate *t, jarena *arena, jdict *globals, jbuf *out,
                     grpo_error *err);

#endif
