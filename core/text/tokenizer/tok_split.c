/*
 * tok_split.c — from text to words: added-token extraction (leftmost-longest, with
 * lstrip / rstrip / single_word, as `tokenizers`' AddedVocabulary::find_matches), the
 * pre-tokenizers (ByteLevel, Split with its five behaviours and invert, Sequence) and the loop
 * that hands each word to the BPE model.
 *
 * A piece is a byte range of the (repaired) input, or of a per-call arena when ByteLevel's
 * add_prefix_space had to prepend a space; added_id >= 0 marks an added token.
 */
#include "text/tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>

/* Unicode White_Space (what Rust's regex \s matches, used by lstrip / rstrip). */
static int is_white_space(uint32_t c) {
    return (c >= 9 && c <= 13) || c == 32 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

typedef struct piece {
    const char *p;
    size_t n;
    int32_t added_id; /* -1: text */
} piece;

typedef struct pieces {
    piece *v;
    size_t n, cap;
} pieces;

static int pieces_push(pieces *ps, const char *p, size_t n, int32_t added_id) {
    if (n == 0 && added_id < 0) return 0; /* `tokenizers` drops empty splits */
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? ps->cap * 2 : 64;
        piece *v = realloc(ps->v, cap * sizeof *v);
        if (!v) return -1;
        ps->v = v, ps->cap = cap;
    }
    ps->v[ps->n++] = (piece){p, n, added_id};
    return 0;
}

typedef struct span {
    size_t a, b;
    int match;
} span;

/* Per-call scratch: piece lists, spans, a regex match block and the prefix-space arena. */
typedef struct scratch {
    pieces a, b;
    span *spans;
    size_t n_spans, cap_spans;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit;
    char **arena; /* blocks to free */
    size_t n_arena, cap_arena;
} scratch;

static void scratch_free(scratch *s) {
    free(s->a.v), free(s->b.v), free(s->spans);
    if (s->md) pcre2_match_data_free(s->md);
    if (s->mctx) pcre2_match_context_free(s->mctx);
    if (s->jit) pcre2_jit_stack_free(s->jit);
    for (size_t i = 0; i < s->n_arena; i++) free(s->arena[i]);
    free(s->arena);
}

static char *arena_alloc(scratch *s, size_t n) {
    if (s->n_arena == s->cap_arena) {
        size_t cap = s->cap_arena ? 2 * s->cap_arena : 16;
        char **a = realloc(s->arena, cap * sizeof *a);
        if (!a) return NULL;
        s->arena = a, s->cap_arena = cap;
    }
    char *p = malloc(n ? n : 1);
    if (p) s->arena[s->n_arena++] = p;
    return p;
}

/* Takes ownership of malloc'd p (freed with the scratch). */
static int arena_adopt(scratch *s, char *p) {
    if (s->n_arena == s->cap_arena) {
        size_t cap = s->cap_arena ? 2 * s->cap_arena : 16;
        char **a = realloc(s->arena, cap * sizeof *a);
        if (!a) {
            free(p);
            return -1;
        }
        s->arena = a, s->cap_arena = cap;
    }
    s->arena[s->n_arena++] = p;
    return 0;
}

/* Runs the normalizers over text piece *pc; a changed text lives in the arena. */
static int normalize_piece(const grpo_tokenizer *tok, piece *pc, scratch *s) {
    for (int k = 0; k < tok->n_norm; k++) {
        char *out;
        size_t n;
        if (tok_normalize(tok->norm[k], pc->p, pc->n, &out, &n)) return -1;
        if (!out) continue;
        if (arena_adopt(s, out)) return -1;
        pc->p = out, pc->n = n;
    }
    return 0;
}

static int span_push(scratch *s, size_t a, size_t b, int match) {
    if (s->n_spans == s->cap_spans) {
        size_t cap = s->cap_spans ? s->cap_spans * 2 : 64;
        span *v = realloc(s->spans, cap * sizeof *v);
        if (!v) return -1;
        s->spans = v, s->cap_spans = cap;
    }
    s->spans[s->n_spans++] = (span){a, b, match};
    return 0;
}

/* ---- added tokens ---------------------------------------------------------------------------- */
/* The leftmost-longest occurrence of a token of set in t[from..n): index into tok->added, or -1. */
static int32_t added_find(const grpo_tokenizer *tok, const tok_added_set *set, const char *t,
                          size_t n, size_t from, size_t *at) {
    for (size_t i = from; i < n; i++) {
        if (set->only_first >= 0) { /* all tokens start alike (often '<'): jump there */
            const char *q = memchr(t + i, set->only_first, n - i);
            if (!q) return -1;
            i = (size_t)(q - t);
        }
        unsigned char c = (unsigned char)t[i];
        if (!set->first[c]) continue;
        for (const int32_t *k = set->by_first[c]; *k >= 0; k++) {
            const tok_added *a = &tok->added[*k];
            if (a->pattern_len <= n - i && memcmp(t + i, a->pattern, a->pattern_len) == 0) {
                *at = i;
                return *k;
            }
        }
    }
    return -1;
}

static int is_word_char(const grpo_tokenizer *tok, const char *c, size_t n, pcre2_match_data *md) {
    return pcre2_match(tok->re_word_start, (PCRE2_SPTR)c, n, 0, PCRE2_NO_UTF_CHECK, md, NULL) >= 0;
}

/* `tokenizers`' single_word test: no word character right before start nor right at stop. */
static int single_word_ok(const grpo_tokenizer *tok, const char *t, size_t n, size_t start,
                          size_t stop, scratch *s) {
    if (!s->md && !(s->md = pcre2_match_data_create(4, NULL))) return 0;
    if (start > 0) {
        size_t i = start - 1;
        while (i > 0 && ((unsigned char)t[i] & 0xC0) == 0x80) i--;
        if (is_word_char(tok, t + i, start - i, s->md)) return 0;
    }
    if (stop < n) {
        size_t cl;
        tok_utf8_decode((const unsigned char *)t + stop, &cl);
        if (is_word_char(tok, t + stop, cl, s->md)) return 0;
    }
    return 1;
}

/* Splits text piece t on the tokens of set, appending to out (AddedVocabulary::find_matches). */
static int added_split(const grpo_tokenizer *tok, const tok_added_set *set, const char *t, size_t n,
                       pieces *out, scratch *s) {
    size_t start_offset = 0, pos = 0, at = 0;
    int32_t k;
    while (pos < n && (k = added_find(tok, set, t, n, pos, &at)) >= 0) {
        const tok_added *a = &tok->added[k];
        size_t start = at, stop = at + a->pattern_len;
        pos = stop; /* the matcher resumes after the raw match, whatever is stripped */
        if (a->single_word && !single_word_ok(tok, t, n, start, stop, s)) continue;
        if (a->lstrip) {
            size_t ns = start;
            while (ns > 0) {
                size_t i = ns - 1, cl;
                while (i > 0 && ((unsigned char)t[i] & 0xC0) == 0x80) i--;
                if (!is_white_space(tok_utf8_decode((const unsigned char *)t + i, &cl))) break;
                ns = i;
            }
            start = ns > start_offset ? ns : start_offset;
        }
        if (a->rstrip) {
            size_t cl;
            while (stop < n &&
                   is_white_space(tok_utf8_decode((const unsigned char *)t + stop, &cl)))
                stop += cl;
        }
        if (start_offset < start && pieces_push(out, t + start_offset, start - start_offset, -1))
            return -1;
        if (pieces_push(out, t + start, stop - start, a->id)) return -1;
        start_offset = stop;
    }
    if (start_offset < n && pieces_push(out, t + start_offset, n - start_offset, -1)) return -1;
    return 0;
}

/* ---- pre-tokenizers -------------------------------------------------------------------------- */
/* Regex matches of re over t[0..n), gaps included, into s->spans (Pattern::find_matches). */
static int find_spans(const pcre2_code *re, const char *t, size_t n, scratch *s) {
    s->n_spans = 0;
    if (!s->md && !(s->md = pcre2_match_data_create(4, NULL))) return -1;
    size_t prev = 0, off = 0;
    while (off <= n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)t, n, off, PCRE2_NO_UTF_CHECK, s->md, s->mctx);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !s->jit) { /* long runs: give JIT a bigger stack */
            s->jit = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, NULL);
            s->mctx = pcre2_match_context_create(NULL);
            if (!s->jit || !s->mctx) return -1;
            pcre2_jit_stack_assign(s->mctx, NULL, s->jit);
            continue;
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) return -2;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
        size_t a = ov[0], b = ov[1];
        if (a != prev && span_push(s, prev, a, 0)) return -1;
        if (span_push(s, a, b, 1)) return -1;
        prev = b;
        if (b > a) {
            off = b;
        } else { /* empty match: step over one character */
            size_t cl = 1;
            if (b >= n) break;
            tok_utf8_decode((const unsigned char *)t + b, &cl);
            off = b + cl;
        }
    }
    if (prev != n && span_push(s, prev, n, 0)) return -1;
    return 0;
}

/* Applies Split's behaviour to s->spans (NormalizedString::split), appending the kept pieces. */
static int split_apply(const tok_pre *pre, const char *t, scratch *s, pieces *out) {
    span *v = s->spans;
    size_t n = s->n_spans, m = 0;
    if (pre->invert)
        for (size_t i = 0; i < n; i++) v[i].match = !v[i].match;
    switch (pre->behavior) {
    case TOK_SPLIT_ISOLATED:
        for (size_t i = 0; i < n; i++) v[i].match = 0; /* nothing removed */
        m = n;
        break;
    case TOK_SPLIT_REMOVED:
        m = n; /* the matches themselves are dropped below */
        break;
    case TOK_SPLIT_MERGED_PREV: { /* a match joins the piece before it */
        int prev_match = 0;
        for (size_t i = 0; i < n; i++) {
            int is = v[i].match;
            if (is && !prev_match && m > 0)
                v[m - 1].b = v[i].b;
            else
                v[m++] = (span){v[i].a, v[i].b, 0};
            prev_match = is;
        }
        break;
    }
    case TOK_SPLIT_MERGED_NEXT: { /* a match joins the piece after it: fold from the right */
        int prev_match = 0;
        size_t w = n; /* output grows leftwards in v[w..n) */
        for (size_t i = n; i-- > 0;) {
            int is = v[i].match;
            if (is && !prev_match && w < n)
                v[w].a = v[i].a;
            else
                v[--w] = (span){v[i].a, v[i].b, 0};
            prev_match = is;
        }
        memmove(v, v + w, (n - w) * sizeof *v);
        m = n - w;
        break;
    }
    case TOK_SPLIT_CONTIGUOUS: { /* runs of equal match flags become one piece */
        int prev = -1;
        for (size_t i = 0; i < n; i++) {
            int is = v[i].match;
            if (is == prev && m > 0)
                v[m - 1].b = v[i].b;
            else
                v[m++] = (span){v[i].a, v[i].b, 0};
            prev = is;
        }
        break;
    }
    }
    for (size_t i = 0; i < m; i++)
        if (!v[i].match && pieces_push(out, t + v[i].a, v[i].b - v[i].a, -1)) return -1;
    return 0;
}

/* One pre-tokenizer over every text piece of in, into out (added tokens pass through). */
static int pre_apply(const tok_pre *pre, const pieces *in, pieces *out, scratch *s) {
    out->n = 0;
    for (size_t i = 0; i < in->n; i++) {
        piece pc = in->v[i];
        if (pc.added_id >= 0) {
            if (pieces_push(out, pc.p, pc.n, pc.added_id)) return -1;
            continue;
        }
        if (pre->kind == TOK_PRE_BYTELEVEL && pre->add_prefix_space && pc.p[0] != ' ') {
            char *q = arena_alloc(s, pc.n + 1);
            if (!q) return -1;
            q[0] = ' ';
            memcpy(q + 1, pc.p, pc.n);
            pc.p = q, pc.n++;
        }
        if (!pre->re) { /* ByteLevel without regex, or an empty String pattern: kept whole */
            if (pieces_push(out, pc.p, pc.n, -1)) return -1;
            continue;
        }
        int rc = find_spans(pre->re, pc.p, pc.n, s);
        if (rc) return rc;
        if (pre->kind == TOK_PRE_BYTELEVEL) { /* ByteLevel isolates every match */
            for (size_t k = 0; k < s->n_spans; k++)
                if (pieces_push(out, pc.p + s->spans[k].a, s->spans[k].b - s->spans[k].a, -1))
                    return -1;
        } else if (split_apply(pre, pc.p, s, out)) {
            return -1;
        }
    }
    return 0;
}

/* ---- the encode loop ------------------------------------------------------------------------- */
int tok_encode_text(const grpo_tokenizer *tok, const char *t, size_t len, grpo_tok_ids *out) {
    scratch s = {0};
    int rc = -1;
    /* 1. added tokens matched on the raw text; 2. the normalizers over what is left; 3. the
     * normalized added tokens in the normalized text */
    if (added_split(tok, &tok->raw_set, t, len, &s.b, &s)) goto done;
    for (size_t i = 0; i < s.b.n; i++) {
        piece pc = s.b.v[i];
        if (pc.added_id >= 0) {
            if (pieces_push(&s.a, pc.p, pc.n, pc.added_id)) goto done;
        } else if (normalize_piece(tok, &pc, &s) ||
                   added_split(tok, &tok->norm_set, pc.p, pc.n, &s.a, &s)) {
            goto done;
        }
    }
    /* 4. the pre-tokenizers, in order (a <-> b ping-pong) */
    pieces *cur = &s.a, *nxt = &s.b;
    for (int k = 0; k < tok->n_pre; k++) {
        int r = pre_apply(&tok->pre[k], cur, nxt, &s);
        if (r) {
            rc = r;
            goto done;
        }
        pieces *tmp = cur;
        cur = nxt, nxt = tmp;
    }
    /* 5. the model, word by word */
    for (size_t i = 0; i < cur->n; i++) {
        piece pc = cur->v[i];
        if (pc.added_id >= 0 ? tok_ids_push(out, pc.added_id)
                             : tok_bpe_word(&tok->bpe, pc.p, pc.n, out))
            goto done;
    }
    rc = 0;
done:
    scratch_free(&s);
    return rc;
}
