/* jinja_parse.c — lexer and parser for the Jinja subset used by chat templates.
 *
 * The lexer follows jinja2's, with the options transformers sets (trim_blocks=True,
 * lstrip_blocks=True, keep_trailing_newline=False):
 *   - newlines \r\n and \r become \n; one trailing \n of the source is dropped;
 *   - "{%-", "{{-", "{#-" strip all whitespace before the tag; "-%}", "-}}", "-#}" all after it;
 *   - trim_blocks: one \n right after "%}" or "#}" is dropped (not after "}}"); "+%}" keeps it;
 *   - lstrip_blocks: spaces/tabs from the start of a line up to "{%" or "{#" are dropped when
 *     nothing else is on the line before the tag; "{%+" keeps them;
 *   - {% raw %}...{% endraw %} is text.
 * The parser follows jinja2's precedence: cond-expr < or < and < not < comparisons (== != < <=
 * > >= in, not in) < + - < ~ < * / // % < ** < unary - + < postfix (. [] ()) then | and is.
 * Anything outside the subset is a compile error naming the construct and its line.
 */
#include "text/jinja/jinja.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- tokens -------------------------------------------------------------------------------- */
typedef enum {
    T_EOF,
    T_TEXT,
    T_BLOCK_BEGIN,
    T_BLOCK_END,
    T_VAR_BEGIN,
    T_VAR_END,
    T_NAME,
    T_STRING,
    T_INT,
    T_FLOAT,
    T_OP,
} tok_type;

typedef struct tok {
    int type;
    int line;
    const char *s; /* T_TEXT/T_STRING: decoded value (arena); T_NAME/T_OP: spelling */
    size_t n;
    int64_t i;
    double f;
} tok;

typedef struct lexer {
    jarena *a;
    const char *src; /* normalized source */
    size_t n, pos;
    int line;
    tok *toks;
    size_t n_toks, cap;
    grpo_error *err;
    const char *name;
} lexer;

static void push_tok(lexer *lx, tok t) {
    if (lx->n_toks == lx->cap) {
        lx->cap = lx->cap ? lx->cap * 2 : 256;
        tok *p = realloc(lx->toks, lx->cap * sizeof(tok));
        if (!p) abort();
        lx->toks = p;
    }
    lx->toks[lx->n_toks++] = t;
}

static int lex_fail(lexer *lx, int line, const char *what) {
    grpo_error_set(lx->err, GRPO_ERR_INVALID, "%s:%d: %s", lx->name, line, what);
    return 0;
}

static int count_nl(const char *s, size_t n) {
    int c = 0;
    for (size_t i = 0; i < n; i++) c += s[i] == '\n';
    return c;
}

/* Python str.isspace on the code point starting at s[i]; *adv gets its byte length. */
static int space_at(const char *s, size_t n, size_t i, size_t *adv) {
    uint32_t cp = ju8_decode(s + i, n - i, adv);
    return ju8_isspace(cp);
}

/* Length of text with trailing (Unicode) whitespace removed: Python's str.rstrip(). */
static size_t rstrip_len(const char *s, size_t n) {
    size_t keep = 0, i = 0, adv;
    while (i < n) {
        if (!space_at(s, n, i, &adv)) keep = i + adv;
        i += adv;
    }
    return keep;
}

/* Bytes of leading whitespace starting at pos (regex \s*). */
static size_t skip_ws(const char *s, size_t n, size_t pos) {
    size_t adv;
    while (pos < n && space_at(s, n, pos, &adv)) pos += adv;
    return pos;
}

static void emit_text(lexer *lx, const char *s, size_t n, int line) {
    if (n) push_tok(lx, (tok){.type = T_TEXT, .line = line, .s = s, .n = n});
}

/* Decodes a string literal body the way jinja2 does (Python unicode-escape). */
static int decode_string(lexer *lx, const char *s, size_t n, int line, tok *t) {
    jbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            jbuf_putc(&b, s[i]);
            continue;
        }
        char e = s[++i];
        switch (e) {
        case '\n': break;
        case '\\': jbuf_putc(&b, '\\'); break;
        case '\'': jbuf_putc(&b, '\''); break;
        case '"': jbuf_putc(&b, '"'); break;
        case 'a': jbuf_putc(&b, '\a'); break;
        case 'b': jbuf_putc(&b, '\b'); break;
        case 'f': jbuf_putc(&b, '\f'); break;
        case 'n': jbuf_putc(&b, '\n'); break;
        case 'r': jbuf_putc(&b, '\r'); break;
        case 't': jbuf_putc(&b, '\t'); break;
        case 'v': jbuf_putc(&b, '\v'); break;
        case 'x':
        case 'u':
        case 'U': {
            int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            if (i + (size_t)digits >= n) {
                free(b.data);
                return lex_fail(lx, line, "truncated \\x/\\u escape in a string literal");
            }
            for (int k = 1; k <= digits; k++) {
                char c = s[i + (size_t)k];
                cp <<= 4;
                if (c >= '0' && c <= '9')
                    cp |= (uint32_t)(c - '0');
                else if (c >= 'a' && c <= 'f')
                    cp |= (uint32_t)(c - 'a' + 10);
                else if (c >= 'A' && c <= 'F')
                    cp |= (uint32_t)(c - 'A' + 10);
                else {
                    free(b.data);
                    return lex_fail(lx, line, "bad hex digit in a \\x/\\u escape");
                }
            }
            i += (size_t)digits;
            char u[4];
            size_t un;
            if (cp < 0x80)
                u[0] = (char)cp, un = 1;
            else if (cp < 0x800)
                u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 63)), un = 2;
            else if (cp < 0x10000)
                u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | (cp >> 6 & 63)),
                u[2] = (char)(0x80 | (cp & 63)), un = 3;
            else
                u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | (cp >> 12 & 63)),
                u[2] = (char)(0x80 | (cp >> 6 & 63)), u[3] = (char)(0x80 | (cp & 63)), un = 4;
            jbuf_put(&b, u, un);
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                uint32_t v = (uint32_t)(e - '0');
                for (int k = 0; k < 2 && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '7'; k++)
                    v = v * 8 + (uint32_t)(s[++i] - '0');
                jbuf_putc(&b, (char)v);
            } else { /* unknown escapes stay as written */
                jbuf_putc(&b, '\\');
                jbuf_putc(&b, e);
            }
        }
    }
    t->s = jarena_strdup(lx->a, b.data ? b.data : "", b.len);
    t->n = b.len;
    free(b.data);
    return 1;
}

static int is_name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Lexes the inside of a {{ }} or {% %} tag up to its end; pos is just past the opener. */
static int lex_tag(lexer *lx, int is_block) {
    const char *s = lx->src;
    size_t n = lx->n;
    int depth = 0; /* open ( [ { : an end marker inside them is an operator */
    char end = is_block ? '%' : '}';
    for (;;) {
        size_t pos = lx->pos;
        if (pos >= n) return lex_fail(lx, lx->line, is_block ? "missing '%}'" : "missing '}}'");
        /* end of tag: "+%}", "-%}\s*", "%}\n?" (trim_blocks) or "-}}\s*", "}}" */
        if (depth == 0) {
            size_t p = pos, sign = 0;
            if ((s[p] == '-' || (is_block && s[p] == '+')) && p + 2 < n && s[p + 1] == end &&
                s[p + 2] == '}')
                sign = (size_t)s[p], p++;
            if (p + 1 < n && s[p] == end && s[p + 1] == '}') {
                p += 2;
                if (sign == '-')
                    p = skip_ws(s, n, p);
                else if (sign == 0 && is_block && p < n && s[p] == '\n')
                    p++;
                push_tok(lx, (tok){.type = is_block ? T_BLOCK_END : T_VAR_END, .line = lx->line});
                lx->line += count_nl(s + pos, p - pos);
                lx->pos = p;
                return 1;
            }
        }
        char c = s[pos];
        size_t adv;
        if (space_at(s, n, pos, &adv)) {
            lx->line += c == '\n';
            lx->pos += adv;
            continue;
        }
        tok t = {.line = lx->line};
        if (is_name_start(c)) {
            size_t e = pos + 1;
            while (e < n && (is_name_start(s[e]) || is_digit(s[e]))) e++;
            t.type = T_NAME, t.s = s + pos, t.n = e - pos;
            lx->pos = e;
        } else if (is_digit(c)) {
            size_t e = pos;
            while (e < n && is_digit(s[e])) e++;
            int is_float = 0;
            if (e + 1 < n && s[e] == '.' && is_digit(s[e + 1])) {
                is_float = 1, e++;
                while (e < n && is_digit(s[e])) e++;
            }
            if (e < n && (s[e] == 'e' || s[e] == 'E')) {
                size_t x = e + 1;
                if (x < n && (s[x] == '+' || s[x] == '-')) x++;
                if (x < n && is_digit(s[x])) {
                    is_float = 1, e = x;
                    while (e < n && is_digit(s[e])) e++;
                }
            }
            char tmp[64]; /* exactly the number scanned above: read whole */
            if (e - pos >= sizeof tmp) return lex_fail(lx, lx->line, "number literal too long");
            memcpy(tmp, s + pos, e - pos), tmp[e - pos] = '\0';
            errno = 0;
            if (is_float) /* 1e999 is inf, as in Python */
                t.type = T_FLOAT, t.f = strtod(tmp, NULL);
            else
                t.type = T_INT, t.i = strtoll(tmp, NULL, 10);
            if (!is_float && errno == ERANGE)
                return lex_fail(lx, lx->line, "integer literal does not fit in 64 bits");
            lx->pos = e;
        } else if (c == '\'' || c == '"') {
            size_t e = pos + 1;
            while (e < n && s[e] != c) e += s[e] == '\\' ? 2 : 1;
            if (e >= n) return lex_fail(lx, lx->line, "unterminated string literal");
            t.type = T_STRING;
            if (!decode_string(lx, s + pos + 1, e - pos - 1, lx->line, &t)) return 0;
            lx->line += count_nl(s + pos, e - pos);
            lx->pos = e + 1;
        } else {
            static const char *const two[] = {"//", "**", "==", "!=", ">=", "<="};
            size_t len = 0;
            for (int k = 0; k < 6 && !len; k++)
                if (pos + 1 < n && s[pos] == two[k][0] && s[pos + 1] == two[k][1]) len = 2;
            if (!len && strchr("+-/*%~[](){}><=.:|,;", c)) len = 1;
            if (!len) {
                char what[64];
                snprintf(what, sizeof what, "unexpected character '%c' inside a tag", c);
                return lex_fail(lx, lx->line, what);
            }
            if (c == '(' || c == '[' || c == '{') depth++;
            if ((c == ')' || c == ']' || c == '}') && len == 1) {
                if (depth == 0) {
                    char what[64];
                    snprintf(what, sizeof what, "unexpected '%c'", c);
                    return lex_fail(lx, lx->line, what);
                }
                depth--;
            }
            t.type = T_OP, t.s = s + pos, t.n = len;
            lx->pos = pos + len;
        }
        push_tok(lx, t);
    }
}

/* Finds the next tag opener at or after pos: returns its offset or n. */
static size_t find_opener(const char *s, size_t n, size_t pos) {
    for (size_t i = pos; i + 1 < n; i++)
        if (s[i] == '{' && (s[i + 1] == '{' || s[i + 1] == '%' || s[i + 1] == '#')) return i;
    return n;
}

/* "{%[-+]? raw [-]?%}" at p: returns the end of the raw opener (after -%}\s*) or 0. */
static size_t match_raw(const char *s, size_t n, size_t p, const char *word) {
    if (p + 2 > n || s[p] != '{' || s[p + 1] != '%') return 0;
    p += 2;
    if (p < n && (s[p] == '-' || s[p] == '+')) p++;
    p = skip_ws(s, n, p);
    size_t wl = strlen(word);
    if (p + wl > n || memcmp(s + p, word, wl) != 0) return 0;
    p = skip_ws(s, n, p + wl);
    if (p + 3 <= n && s[p] == '-' && s[p + 1] == '%' && s[p + 2] == '}')
        return skip_ws(s, n, p + 3);
    if (p + 2 <= n && s[p] == '%' && s[p + 1] == '}') return p + 2;
    return 0;
}

static int lex(lexer *lx) {
    const char *s = lx->src;
    size_t n = lx->n;
    int line_starting = 1;
    lx->line = 1;
    lx->pos = 0;
    while (lx->pos < n) {
        size_t open = find_opener(s, n, lx->pos);
        const char *text = s + lx->pos;
        size_t tlen = open - lx->pos;
        int text_line = lx->line;
        if (open >= n) {
            emit_text(lx, text, tlen, text_line);
            lx->line += count_nl(text, tlen);
            break;
        }
        char kind = s[open + 1];
        char sign = open + 2 < n ? s[open + 2] : 0;
        size_t raw_end = kind == '%' ? match_raw(s, n, open, "raw") : 0;
        /* whitespace control of the text before the tag */
        size_t keep = tlen;
        if (sign == '-')
            keep = rstrip_len(text, tlen);
        else if (sign != '+' && kind != '{') {
            size_t l_pos = 0;
            for (size_t i = tlen; i > 0; i--)
                if (text[i - 1] == '\n') {
                    l_pos = i;
                    break;
                }
            if ((l_pos > 0 || line_starting) && l_pos < tlen && skip_ws(text, tlen, l_pos) == tlen)
                keep = l_pos;
        }
        emit_text(lx, text, keep, text_line);
        lx->line += count_nl(text, tlen);
        size_t after = open + 2 + (sign == '-' || sign == '+');
        if (raw_end) {
            /* raw: everything up to {% endraw %} is text */
            size_t p = raw_end, body_end = n, close = 0;
            for (; p + 1 < n; p++)
                if (s[p] == '{' && s[p + 1] == '%' && (close = match_raw(s, n, p, "endraw"))) {
                    body_end = p;
                    break;
                }
            if (!close) return lex_fail(lx, lx->line, "missing {% endraw %}");
            size_t blen = body_end - raw_end;
            char esign = s[body_end + 2];
            if (esign == '-') blen = rstrip_len(s + raw_end, blen);
            /* the endraw tag ends like a block: trim one newline unless it was -%} (handled) */
            if (s[close - 1] == '}' && s[close - 2] == '%' && s[close - 3] != '-' &&
                s[close - 3] != '+' && close < n && s[close] == '\n')
                close++;
            emit_text(lx, s + raw_end, blen, lx->line);
            lx->line += count_nl(s + open, close - open);
            lx->pos = close;
            line_starting = s[close - 1] == '\n';
            continue;
        }
        if (kind == '#') {
            /* comment: up to the first "#}", with -#} eating whitespace and #} one newline */
            size_t p = after, close = 0;
            for (; p + 1 < n; p++)
                if (s[p] == '#' && s[p + 1] == '}') {
                    close = p;
                    break;
                }
            if (!close) return lex_fail(lx, lx->line, "missing end of comment tag '#}'");
            size_t e = close + 2;
            if (close > after && s[close - 1] == '-')
                e = skip_ws(s, n, e);
            else if (!(close > after && s[close - 1] == '+') && e < n && s[e] == '\n')
                e++;
            lx->line += count_nl(s + open, e - open);
            lx->pos = e;
            line_starting = s[e - 1] == '\n';
            continue;
        }
        push_tok(lx, (tok){.type = kind == '%' ? T_BLOCK_BEGIN : T_VAR_BEGIN, .line = lx->line});
        lx->pos = after;
        if (!lex_tag(lx, kind == '%')) return 0;
        line_starting = lx->pos > 0 && s[lx->pos - 1] == '\n';
    }
    push_tok(lx, (tok){.type = T_EOF, .line = lx->line});
    return 1;
}

/* ---- parser -------------------------------------------------------------------------------- */
typedef struct parser {
    jarena *a;
    tok *t;
    size_t pos, n;
    grpo_error *err;
    const char *name;
    int failed;
    int32_t status; /* of the first failure */
    char desc[96];     /* tok_desc's text */
    int depth, sdepth; /* expression and statement nesting, bounded so hostile input cannot
                        * overflow the stack */
} parser;

static tok *cur(parser *p) { return &p->t[p->pos]; }
static tok *peek(parser *p, size_t k) {
    return p->pos + k < p->n ? &p->t[p->pos + k] : &p->t[p->n - 1];
}

static jnode *fail_at(parser *p, int line, const char *fmt, const char *arg) {
    if (!p->failed) {
        char what[512];
        snprintf(what, sizeof what, fmt, arg);
        p->status = jinja_status_of(what);
        grpo_error_set(p->err, p->status, "%s:%d: %s", p->name, line, what);
        p->failed = 1;
    }
    return NULL;
}

static int tok_is(const tok *t, int type, const char *s) {
    return t->type == type && (!s || (t->n == strlen(s) && memcmp(t->s, s, t->n) == 0));
}
static int is_op(parser *p, const char *s) { return tok_is(cur(p), T_OP, s); }
static int is_name(parser *p, const char *s) { return tok_is(cur(p), T_NAME, s); }

static int skip_op(parser *p, const char *s) {
    if (!is_op(p, s)) return 0;
    p->pos++;
    return 1;
}
static int skip_name(parser *p, const char *s) {
    if (!is_name(p, s)) return 0;
    p->pos++;
    return 1;
}

/* Describes a token for an error message (in p->desc, so parsers on threads never share it). */
static const char *tok_desc(parser *p, const tok *t) {
    char *buf = p->desc;
    switch (t->type) {
    case T_EOF: return "end of template";
    case T_BLOCK_END: return "end of statement '%}'";
    case T_VAR_END: return "end of print '}}'";
    case T_NAME:
    case T_OP:
        snprintf(buf, sizeof p->desc, "'%.*s'", (int)(t->n < 60 ? t->n : 60), t->s);
        return buf;
    case T_STRING: return "a string";
    case T_INT:
    case T_FLOAT: return "a number";
    default: return "text";
    }
}

static int expect_op(parser *p, const char *s) {
    if (skip_op(p, s)) return 1;
    char what[160];
    snprintf(what, sizeof what, "expected '%s', got %s", s, tok_desc(p, cur(p)));
    fail_at(p, cur(p)->line, "%s", what);
    return 0;
}

static jnode *new_node(parser *p, int kind, int line) {
    jnode *n = jarena_alloc(p->a, sizeof *n);
    n->kind = kind, n->line = line;
    return n;
}

static const char *tok_name(parser *p, const tok *t) { return jarena_strdup(p->a, t->s, t->n); }

/* A growable node array in the heap, copied into the arena when done. */
typedef struct nodevec {
    jnode **v;
    const char **names;
    size_t n, cap;
} nodevec;

static void nv_push(nodevec *nv, jnode *n, const char *name) {
    if (nv->n == nv->cap) {
        nv->cap = nv->cap ? nv->cap * 2 : 8;
        jnode **v = realloc(nv->v, nv->cap * sizeof *v);
        const char **names = realloc(nv->names, nv->cap * sizeof *names);
        if (!v || !names) abort();
        nv->v = v, nv->names = names;
    }
    nv->v[nv->n] = n, nv->names[nv->n] = name, nv->n++;
}

static void nv_finish(parser *p, nodevec *nv, jnode *into, int with_names) {
    into->n_kids = (int)nv->n;
    if (nv->n) {
        into->kids = jarena_alloc(p->a, nv->n * sizeof(jnode *));
        memcpy(into->kids, nv->v, nv->n * sizeof(jnode *));
        if (with_names) {
            into->names = jarena_alloc(p->a, nv->n * sizeof(char *));
            memcpy(into->names, nv->names, nv->n * sizeof(char *));
            into->n_names = (int)nv->n;
        }
    }
    free(nv->v), free(nv->names);
    nv->v = NULL, nv->names = NULL, nv->n = nv->cap = 0;
}

static jnode *parse_expression(parser *p, int with_condexpr);
static jnode *parse_tuple(parser *p, int with_condexpr);
static jnode *parse_unary(parser *p, int with_filter);
static jnode *parse_primary(parser *p);
static jnode *parse_postfix(parser *p, jnode *node);
static jnode *parse_filter_expr(parser *p, jnode *node);

/* "(a, b=c)" after the callee; the '(' is current. */
static int parse_call_args(parser *p, jnode *call) {
    nodevec args = {0};
    expect_op(p, "(");
    while (!p->failed && !is_op(p, ")")) {
        if (args.n && !expect_op(p, ",")) break;
        if (is_op(p, ")")) break;
        if (is_op(p, "*") || is_op(p, "**")) {
            fail_at(p, cur(p)->line, "%s", "unsupported construct: *args/**kwargs in a call");
            break;
        }
        const char *kw = NULL;
        if (cur(p)->type == T_NAME && tok_is(peek(p, 1), T_OP, "=")) {
            kw = tok_name(p, cur(p));
            p->pos += 2;
        }
        jnode *v = parse_expression(p, 1);
        if (!v) break;
        nv_push(&args, v, kw);
    }
    if (!p->failed) expect_op(p, ")");
    nv_finish(p, &args, call, 1);
    return !p->failed;
}

/* Names the filters this interpreter implements (unknown ones fail at compile time as in jinja2). */
static const char *const known_filters[] = {
    "abs",    "capitalize", "count",      "d",          "default",   "dictsort", "first",
    "float",  "int",        "items",      "join",       "last",      "length",   "list",
    "lower",  "map",        "reject",     "rejectattr", "replace",   "reverse",  "round",
    "safe",   "select",     "selectattr", "sort",       "string",    "sum",      "title",
    "tojson", "trim",       "unique",     "upper",      "wordcount", NULL};
static const char *const known_tests[] = {
    "boolean", "callable", "defined",  "divisibleby", "eq",   "equalto",   "even",
    "false",   "float",    "ge",       "gt",          "in",   "integer",   "iterable",
    "le",      "lower",    "lt",       "mapping",     "ne",   "none",      "number",
    "odd",     "sameas",   "sequence", "string",      "true", "undefined", "upper",
    "==",      "!=",       ">",        ">=",          "<",    "<=",        NULL};

static int in_list(const char *const *list, const char *s) {
    for (int i = 0; list[i]; i++)
        if (strcmp(list[i], s) == 0) return 1;
    return 0;
}

static jnode *parse_filter(parser *p, jnode *node) {
    int line = cur(p)->line;
    p->pos++; /* | */
    if (cur(p)->type != T_NAME) return fail_at(p, line, "%s", "expected a filter name after '|'");
    jnode *f = new_node(p, JN_FILTER, line);
    f->a = node;
    f->name = tok_name(p, cur(p));
    p->pos++;
    if (!in_list(known_filters, f->name))
        return fail_at(p, line, "unsupported filter '%s'", f->name);
    if (is_op(p, "(") && !parse_call_args(p, f)) return NULL;
    return f;
}

static jnode *parse_test(parser *p, jnode *node) {
    int line = cur(p)->line;
    p->pos++; /* is */
    jnode *t = new_node(p, JN_TEST, line);
    t->a = node;
    if (skip_name(p, "not")) t->op = 1;
    if (cur(p)->type != T_NAME) return fail_at(p, line, "%s", "expected a test name after 'is'");
    t->name = tok_name(p, cur(p));
    p->pos++;
    if (!in_list(known_tests, t->name)) return fail_at(p, line, "unsupported test '%s'", t->name);
    if (is_op(p, "(")) {
        if (!parse_call_args(p, t)) return NULL;
    } else {
        tok *c = cur(p);
        int starts_arg = c->type == T_NAME || c->type == T_STRING || c->type == T_INT ||
                         c->type == T_FLOAT || tok_is(c, T_OP, "(") || tok_is(c, T_OP, "[") ||
                         tok_is(c, T_OP, "{");
        if (starts_arg && !is_name(p, "else") && !is_name(p, "or") && !is_name(p, "and")) {
            if (is_name(p, "is"))
                return fail_at(p, line, "%s", "you cannot chain multiple tests with is");
            jnode *arg = parse_postfix(p, parse_primary(p));
            if (!arg) return NULL;
            t->kids = jarena_alloc(p->a, sizeof(jnode *));
            t->kids[0] = arg, t->n_kids = 1;
        }
    }
    return t;
}

static jnode *parse_filter_expr(parser *p, jnode *node) {
    while (node && !p->failed) {
        if (is_op(p, "|"))
            node = parse_filter(p, node);
        else if (is_name(p, "is"))
            node = parse_test(p, node);
        else if (is_op(p, "(")) {
            jnode *call = new_node(p, JN_CALL, cur(p)->line);
            call->a = node;
            node = parse_call_args(p, call) ? call : NULL;
        } else
            break;
    }
    return p->failed ? NULL : node;
}

/* After '[': an index or a slice a:b:c. */
static jnode *parse_subscript(parser *p, jnode *obj, int line) {
    jnode *start = NULL, *stop = NULL, *step = NULL;
    if (!is_op(p, ":")) {
        start = parse_expression(p, 1);
        if (!start) return NULL;
        if (skip_op(p, "]")) {
            jnode *g = new_node(p, JN_GETITEM, line);
            g->a = obj, g->b = start;
            return g;
        }
        if (is_op(p, ",")) return fail_at(p, line, "%s", "unsupported construct: tuple subscript");
    }
    if (!expect_op(p, ":")) return NULL;
    if (!is_op(p, "]") && !is_op(p, ":") && !(stop = parse_expression(p, 1))) return NULL;
    if (skip_op(p, ":") && !is_op(p, "]") && !(step = parse_expression(p, 1))) return NULL;
    if (!expect_op(p, "]")) return NULL;
    jnode *s = new_node(p, JN_SLICE, line);
    s->a = obj, s->b = start, s->c = stop, s->d = step;
    return s;
}

static jnode *parse_postfix(parser *p, jnode *node) {
    while (node && !p->failed) {
        int line = cur(p)->line;
        if (skip_op(p, ".")) {
            if (cur(p)->type == T_NAME) {
                jnode *g = new_node(p, JN_GETATTR, line);
                g->a = node, g->name = tok_name(p, cur(p));
                p->pos++;
                node = g;
            } else if (cur(p)->type == T_INT) {
                jnode *g = new_node(p, JN_GETITEM, line), *k = new_node(p, JN_LIT, line);
                k->lit = jv_int(cur(p)->i);
                g->a = node, g->b = k;
                p->pos++;
                node = g;
            } else
                return fail_at(p, line, "%s", "expected an attribute name after '.'");
        } else if (skip_op(p, "["))
            node = parse_subscript(p, node, line);
        else if (is_op(p, "(")) {
            jnode *call = new_node(p, JN_CALL, line);
            call->a = node;
            node = parse_call_args(p, call) ? call : NULL;
        } else
            break;
    }
    return p->failed ? NULL : node;
}

static jnode *parse_primary(parser *p) {
    tok *t = cur(p);
    int line = t->line;
    jnode *node;
    if (t->type == T_NAME) {
        const char *nm = tok_name(p, t);
        p->pos++;
        node = new_node(p, JN_LIT, line);
        if (!strcmp(nm, "true") || !strcmp(nm, "True"))
            node->lit = jv_bool(1);
        else if (!strcmp(nm, "false") || !strcmp(nm, "False"))
            node->lit = jv_bool(0);
        else if (!strcmp(nm, "none") || !strcmp(nm, "None"))
            node->lit = jv_none();
        else
            node->kind = JN_NAME, node->name = nm;
        return node;
    }
    if (t->type == T_STRING) {
        /* adjacent string literals concatenate */
        jbuf b = {0};
        while (cur(p)->type == T_STRING) jbuf_put(&b, cur(p)->s, cur(p)->n), p->pos++;
        node = new_node(p, JN_LIT, line);
        node->lit = jv_str(jarena_strdup(p->a, b.data ? b.data : "", b.len), b.len);
        free(b.data);
        return node;
    }
    if (t->type == T_INT || t->type == T_FLOAT) {
        node = new_node(p, JN_LIT, line);
        node->lit = t->type == T_INT ? jv_int(t->i) : jv_float(t->f);
        p->pos++;
        return node;
    }
    if (skip_op(p, "(")) {
        if (skip_op(p, ")")) {
            node = new_node(p, JN_TUPLE, line);
            return node;
        }
        node = parse_tuple(p, 1);
        if (node && !expect_op(p, ")")) return NULL;
        return node;
    }
    if (skip_op(p, "[")) {
        nodevec items = {0};
        while (!p->failed && !is_op(p, "]")) {
            if (items.n && !expect_op(p, ",")) break;
            if (is_op(p, "]")) break;
            jnode *v = parse_expression(p, 1);
            if (v) nv_push(&items, v, NULL);
        }
        node = new_node(p, JN_LIST, line);
        nv_finish(p, &items, node, 0);
        return p->failed || !expect_op(p, "]") ? NULL : node;
    }
    if (skip_op(p, "{")) {
        nodevec items = {0};
        while (!p->failed && !is_op(p, "}")) {
            if (items.n && !expect_op(p, ",")) break;
            if (is_op(p, "}")) break;
            jnode *k = parse_expression(p, 1);
            if (!k || !expect_op(p, ":")) break;
            jnode *v = parse_expression(p, 1);
            if (v) nv_push(&items, k, NULL), nv_push(&items, v, NULL);
        }
        node = new_node(p, JN_DICT, line);
        nv_finish(p, &items, node, 0);
        return p->failed || !expect_op(p, "}") ? NULL : node;
    }
    char what[160];
    snprintf(what, sizeof what, "unexpected %s in an expression", tok_desc(p, t));
    return fail_at(p, line, "%s", what);
}

static jnode *parse_unary(parser *p, int with_filter) {
    int line = cur(p)->line;
    jnode *node;
    if (++p->depth > 200)
        return fail_at(p, line, "%s", "expression nested too deeply (over 200 levels)");
    if (skip_op(p, "-") || (is_op(p, "+") && (p->pos++, 1))) {
        int neg = tok_is(&p->t[p->pos - 1], T_OP, "-");
        node = new_node(p, neg ? JN_NEG : JN_POS, line);
        node->a = parse_unary(p, 0);
        if (!node->a) return NULL;
    } else
        node = parse_postfix(p, parse_primary(p));
    if (with_filter) node = parse_filter_expr(p, node);
    p->depth--;
    return node;
}

static jnode *binop(parser *p, int op, jnode *l, jnode *r, int line) {
    if (!l || !r) return NULL;
    jnode *b = new_node(p, JN_BINOP, line);
    b->op = op, b->a = l, b->b = r;
    return b;
}

static jnode *parse_pow(parser *p) {
    jnode *l = parse_unary(p, 1);
    while (l && is_op(p, "**")) {
        int line = cur(p)->line;
        p->pos++;
        l = binop(p, 'p', l, parse_unary(p, 1), line);
    }
    return l;
}

static jnode *parse_math2(parser *p) {
    jnode *l = parse_pow(p);
    for (;;) {
        int line = cur(p)->line, op = 0;
        if (is_op(p, "*"))
            op = '*';
        else if (is_op(p, "/"))
            op = '/';
        else if (is_op(p, "//"))
            op = 'f';
        else if (is_op(p, "%"))
            op = '%';
        if (!op || !l) return l;
        p->pos++;
        l = binop(p, op, l, parse_pow(p), line);
    }
}

static jnode *parse_concat(parser *p) {
    jnode *l = parse_math2(p);
    while (l && is_op(p, "~")) {
        int line = cur(p)->line;
        p->pos++;
        l = binop(p, '~', l, parse_math2(p), line);
    }
    return l;
}

static jnode *parse_math1(parser *p) {
    jnode *l = parse_concat(p);
    for (;;) {
        int line = cur(p)->line, op = 0;
        if (is_op(p, "+"))
            op = '+';
        else if (is_op(p, "-"))
            op = '-';
        if (!op || !l) return l;
        p->pos++;
        l = binop(p, op, l, parse_concat(p), line);
    }
}

static jnode *parse_compare(parser *p) {
    int line = cur(p)->line;
    jnode *first = parse_math1(p);
    if (!first) return NULL;
    nodevec operands = {0};
    int ops[64], n_ops = 0;
    for (;;) {
        int op = -1;
        if (is_op(p, "=="))
            op = JC_EQ;
        else if (is_op(p, "!="))
            op = JC_NE;
        else if (is_op(p, "<"))
            op = JC_LT;
        else if (is_op(p, "<="))
            op = JC_LE;
        else if (is_op(p, ">"))
            op = JC_GT;
        else if (is_op(p, ">="))
            op = JC_GE;
        else if (is_name(p, "in"))
            op = JC_IN;
        else if (is_name(p, "not") && tok_is(peek(p, 1), T_NAME, "in"))
            op = JC_NOTIN, p->pos++;
        if (op < 0 || n_ops == 64) break;
        p->pos++;
        jnode *r = parse_math1(p);
        if (!r) break;
        ops[n_ops++] = op;
        nv_push(&operands, r, NULL);
    }
    if (p->failed || !n_ops) {
        free(operands.v), free(operands.names);
        return p->failed ? NULL : first;
    }
    jnode *c = new_node(p, JN_COMPARE, line);
    c->a = first;
    nv_finish(p, &operands, c, 0);
    c->ops = jarena_alloc(p->a, (size_t)n_ops * sizeof(int));
    memcpy(c->ops, ops, (size_t)n_ops * sizeof(int));
    return c;
}

static jnode *parse_not(parser *p) {
    if (is_name(p, "not")) {
        jnode *n = new_node(p, JN_NOT, cur(p)->line);
        p->pos++;
        n->a = parse_not(p);
        return n->a ? n : NULL;
    }
    return parse_compare(p);
}

static jnode *parse_and(parser *p) {
    jnode *l = parse_not(p);
    while (l && is_name(p, "and")) {
        jnode *n = new_node(p, JN_AND, cur(p)->line);
        p->pos++;
        n->a = l, n->b = parse_not(p);
        l = n->b ? n : NULL;
    }
    return l;
}

static jnode *parse_or(parser *p) {
    jnode *l = parse_and(p);
    while (l && is_name(p, "or")) {
        jnode *n = new_node(p, JN_OR, cur(p)->line);
        p->pos++;
        n->a = l, n->b = parse_and(p);
        l = n->b ? n : NULL;
    }
    return l;
}

static jnode *parse_expression(parser *p, int with_condexpr) {
    jnode *e = parse_or(p);
    while (with_condexpr && e && is_name(p, "if")) {
        jnode *c = new_node(p, JN_COND, cur(p)->line);
        p->pos++;
        c->b = e;
        c->a = parse_or(p);
        if (!c->a) return NULL;
        if (skip_name(p, "else") && !(c->c = parse_expression(p, 1))) return NULL;
        e = c;
    }
    return e;
}

/* An expression or a bare tuple "a, b" (as after {{ or = or in). */
static jnode *parse_tuple(parser *p, int with_condexpr) {
    int line = cur(p)->line;
    jnode *first = parse_expression(p, with_condexpr);
    if (!first || !is_op(p, ",")) return first;
    nodevec items = {0};
    nv_push(&items, first, NULL);
    while (skip_op(p, ",")) {
        tok *c = cur(p);
        if (c->type == T_BLOCK_END || c->type == T_VAR_END || tok_is(c, T_OP, ")") ||
            tok_is(c, T_NAME, "recursive") || tok_is(c, T_NAME, "if"))
            break;
        jnode *v = parse_expression(p, with_condexpr);
        if (!v) break;
        nv_push(&items, v, NULL);
    }
    jnode *t = new_node(p, JN_TUPLE, line);
    nv_finish(p, &items, t, 0);
    return p->failed ? NULL : t;
}

/* ---- statements ---------------------------------------------------------------------------- */
static jnode *parse_body(parser *p, const char *const *ends);
static jnode *parse_macro(parser *p, int line);

static int expect_block_end(parser *p) {
    if (cur(p)->type == T_BLOCK_END) {
        p->pos++;
        return 1;
    }
    char what[160];
    snprintf(what, sizeof what, "expected end of statement '%%}', got %s", tok_desc(p, cur(p)));
    fail_at(p, cur(p)->line, "%s", what);
    return 0;
}

/* Assignment targets: "x", "x, y", "(x, y)" or (for set only) "ns.attr". */
static int parse_targets(parser *p, jnode *node, int allow_attr) {
    const char *names[16];
    int n = 0, paren = skip_op(p, "(");
    do {
        if (cur(p)->type != T_NAME) {
            fail_at(p, cur(p)->line, "%s", "expected a variable name to assign to");
            return 0;
        }
        if (n == 16) {
            fail_at(p, cur(p)->line, "%s", "too many assignment targets (at most 16)");
            return 0;
        }
        names[n++] = tok_name(p, cur(p));
        p->pos++;
        if (allow_attr && n == 1 && !paren && skip_op(p, ".")) {
            if (cur(p)->type != T_NAME) {
                fail_at(p, cur(p)->line, "%s", "expected an attribute name after '.'");
                return 0;
            }
            node->attr = tok_name(p, cur(p));
            p->pos++;
            break;
        }
    } while (skip_op(p, ","));
    if (paren && !expect_op(p, ")")) return 0;
    node->names = jarena_alloc(p->a, (size_t)n * sizeof(char *));
    memcpy(node->names, names, (size_t)n * sizeof(char *));
    node->n_names = n;
    return 1;
}

static jnode *parse_if(parser *p, int line) {
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    if (++p->sdepth > 500)
        return fail_at(p, line, "%s", "statements nested too deeply (over 500 levels)");
    jnode *node = new_node(p, JN_IF, line);
    node->a = parse_tuple(p, 1);
    if (!node->a || !expect_block_end(p)) return NULL;
    node->b = parse_body(p, ends);
    if (!node->b) return NULL;
    tok *t = cur(p); /* the name that ended the body */
    int eline = t->line;
    p->pos++;
    if (tok_is(t, T_NAME, "elif"))
        node->c = parse_if(p, eline);
    else if (tok_is(t, T_NAME, "else")) {
        static const char *const ends2[] = {"endif", NULL};
        if (!expect_block_end(p) || !(node->c = parse_body(p, ends2))) return NULL;
        p->pos++;
        if (!expect_block_end(p)) return NULL;
    } else if (!expect_block_end(p))
        return NULL;
    p->sdepth--;
    return p->failed ? NULL : node;
}

static jnode *parse_for(parser *p, int line) {
    static const char *const ends[] = {"else", "endfor", NULL}, *const ends2[] = {"endfor", NULL};
    jnode *node = new_node(p, JN_FOR, line);
    if (!parse_targets(p, node, 0)) return NULL;
    if (!skip_name(p, "in")) return fail_at(p, cur(p)->line, "%s", "expected 'in' in a for loop");
    node->a = parse_tuple(p, 0);
    if (!node->a) return NULL;
    if (skip_name(p, "if") && !(node->d = parse_expression(p, 1))) return NULL;
    if (is_name(p, "recursive"))
        return fail_at(p, cur(p)->line, "%s", "unsupported construct: recursive for loop");
    if (!expect_block_end(p) || !(node->b = parse_body(p, ends))) return NULL;
    if (skip_name(p, "else")) {
        if (!expect_block_end(p) || !(node->c = parse_body(p, ends2))) return NULL;
    }
    p->pos++; /* endfor */
    return expect_block_end(p) ? node : NULL;
}

static jnode *parse_set(parser *p, int line) {
    jnode *node = new_node(p, JN_SET, line);
    if (!parse_targets(p, node, 1)) return NULL;
    if (skip_op(p, "=")) {
        node->a = parse_tuple(p, 1);
        return node->a && expect_block_end(p) ? node : NULL;
    }
    static const char *const ends[] = {"endset", NULL};
    if (node->n_names != 1 || node->attr)
        return fail_at(p, line, "%s", "a {% set %} block assigns exactly one plain name");
    if (is_op(p, "|"))
        return fail_at(p, line, "%s", "unsupported construct: filtered {% set %} block");
    node->kind = JN_SETBLOCK;
    if (!expect_block_end(p) || !(node->b = parse_body(p, ends))) return NULL;
    p->pos++;
    return expect_block_end(p) ? node : NULL;
}

/* {% macro name(a, b=default) %}body{% endmacro %} */
static jnode *parse_macro(parser *p, int line) {
    static const char *const ends[] = {"endmacro", NULL};
    jnode *node = new_node(p, JN_MACRO, line);
    if (cur(p)->type != T_NAME) return fail_at(p, line, "%s", "expected a macro name");
    node->name = tok_name(p, cur(p));
    p->pos++;
    nodevec params = {0};
    if (!expect_op(p, "(")) return NULL;
    while (!p->failed && !is_op(p, ")")) {
        if (params.n && !expect_op(p, ",")) break;
        if (cur(p)->type != T_NAME) {
            fail_at(p, cur(p)->line, "%s", "expected a parameter name in a macro definition");
            break;
        }
        const char *pname = tok_name(p, cur(p));
        p->pos++;
        jnode *def = NULL;
        if (skip_op(p, "=") && !(def = parse_expression(p, 1))) break;
        nv_push(&params, def, pname);
    }
    if (p->failed || !expect_op(p, ")")) {
        free(params.v), free(params.names);
        return NULL;
    }
    nv_finish(p, &params, node, 1);
    if (!expect_block_end(p) || !(node->b = parse_body(p, ends))) return NULL;
    p->pos++;
    return expect_block_end(p) ? node : NULL;
}

/* One {% ... %} statement; the name after {% is current. */
static jnode *parse_statement(parser *p) {
    tok *t = cur(p);
    int line = t->line;
    if (t->type != T_NAME) return fail_at(p, line, "%s", "expected a statement name after '{%'");
    const char *nm = tok_name(p, t);
    p->pos++;
    if (!strcmp(nm, "if")) return parse_if(p, line);
    if (!strcmp(nm, "for")) return parse_for(p, line);
    if (!strcmp(nm, "set")) return parse_set(p, line);
    if (!strcmp(nm, "break") || !strcmp(nm, "continue")) {
        jnode *n = new_node(p, nm[0] == 'b' ? JN_BREAK : JN_CONTINUE, line);
        return expect_block_end(p) ? n : NULL;
    }
    if (!strcmp(nm, "macro")) return parse_macro(p, line);
    if (!strcmp(nm, "generation")) { /* transformers' AssistantTracker: renders its body */
        static const char *const ends[] = {"endgeneration", NULL};
        jnode *body;
        if (!expect_block_end(p) || !(body = parse_body(p, ends))) return NULL;
        p->pos++;
        return expect_block_end(p) ? body : NULL;
    }
    return fail_at(p, line, "unsupported construct '{%% %s %%}'", nm);
}

/* Statements until EOF (ends == NULL) or a {% name %} with name in ends; leaves that name
 * current (just after the block-begin). */
static jnode *parse_body(parser *p, const char *const *ends) {
    int line = cur(p)->line;
    nodevec items = {0};
    if (++p->sdepth > 500)
        return fail_at(p, line, "%s", "statements nested too deeply (over 500 levels)");
    for (;;) {
        tok *t = cur(p);
        if (t->type == T_EOF) {
            if (ends) {
                free(items.v), free(items.names);
                int last = 0;
                while (ends[last + 1]) last++;
                char what[96];
                snprintf(what, sizeof what, "unexpected end of template: missing {%% %s %%}",
                         ends[last]);
                return fail_at(p, line, "%s", what);
            }
            break;
        }
        jnode *n = NULL;
        if (t->type == T_TEXT) {
            n = new_node(p, JN_TEXT, t->line);
            n->lit = jv_str(t->s, t->n);
            p->pos++;
        } else if (t->type == T_VAR_BEGIN) {
            p->pos++;
            n = new_node(p, JN_OUTPUT, t->line);
            n->a = parse_tuple(p, 1);
            if (n->a && cur(p)->type != T_VAR_END) {
                char what[160];
                snprintf(what, sizeof what, "expected end of print '}}', got %s",
                         tok_desc(p, cur(p)));
                fail_at(p, cur(p)->line, "%s", what);
            }
            p->pos++;
        } else if (t->type == T_BLOCK_BEGIN) {
            tok *nm = peek(p, 1);
            if (nm->type == T_NAME && ends) {
                int stop = 0;
                for (int i = 0; ends[i]; i++) stop |= tok_is(nm, T_NAME, ends[i]);
                if (stop) {
                    p->pos++;
                    break;
                }
            }
            if (nm->type == T_NAME &&
                (tok_is(nm, T_NAME, "endif") || tok_is(nm, T_NAME, "endfor") ||
                 tok_is(nm, T_NAME, "elif") || tok_is(nm, T_NAME, "else") ||
                 tok_is(nm, T_NAME, "endset") || tok_is(nm, T_NAME, "endmacro") ||
                 tok_is(nm, T_NAME, "endgeneration"))) {
                free(items.v), free(items.names);
                char what[128];
                snprintf(what, sizeof what, "unexpected '{%% %.*s %%}'", (int)nm->n, nm->s);
                return fail_at(p, nm->line, "%s", what);
            }
            p->pos++;
            n = parse_statement(p);
        } else {
            n = fail_at(p, t->line, "%s", "unexpected token");
        }
        if (!n || p->failed) {
            free(items.v), free(items.names);
            return NULL;
        }
        nv_push(&items, n, NULL);
    }
    jnode *block = new_node(p, JN_BLOCK, line);
    nv_finish(p, &items, block, 0);
    p->sdepth--;
    return block;
}

int32_t jinja_parse(jtemplate *t, const char *source, size_t n, grpo_error *err) {
    /* newline normalization and keep_trailing_newline=False */
    char *src = jarena_alloc(&t->arena, n + 1);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (source[i] == '\r') {
            src[m++] = '\n';
            if (i + 1 < n && source[i + 1] == '\n') i++;
        } else
            src[m++] = source[i];
    }
    if (m && src[m - 1] == '\n') m--;
    src[m] = '\0';

    lexer lx = {
        .a = &t->arena, .src = src, .n = m, .err = err, .name = t->name};
    if (!lex(&lx)) {
        free(lx.toks);
        return GRPO_ERR_INVALID;
    }
    parser p = {.a = &t->arena,
                .t = lx.toks,
                .n = lx.n_toks,
                .err = err,
                .name = t->name};
    t->root = parse_body(&p, NULL);
    free(lx.toks);
    if (t->root != NULL && !p.failed) return GRPO_OK;
    return p.failed ? p.status : GRPO_ERR_INVALID;
}
