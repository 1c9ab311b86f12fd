/*
 * tok_decode.c — ids back to text, as `tokenizers`' Tokenizer::decode: unknown ids are dropped,
 * special added tokens optionally skipped, then the ByteLevel decoder turns each token's
 * characters back into bytes (a token with a character outside the byte alphabet keeps its UTF-8
 * bytes as they are) and the whole byte string is made valid UTF-8 (U+FFFD, like
 * String::from_utf8_lossy). Without a decoder the tokens are joined with " ".
 */
#include "text/tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>

static int text_reserve(grpo_tok_text *t, size_t extra) {
    size_t need = t->n + extra + 1;
    if (need <= t->cap) return 0;
    size_t cap = t->cap ? t->cap : 64;
    while (cap < need) cap *= 2;
    char *d = realloc(t->data, cap);
    if (!d) return -1;
    t->data = d, t->cap = cap;
    return 0;
}

static int text_append(grpo_tok_text *t, const char *s, size_t n) {
    if (text_reserve(t, n)) return -1;
    memcpy(t->data + t->n, s, n);
    t->n += n;
    t->data[t->n] = 0;
    return 0;
}

/* Appends the bytes that token s[0..n) stands for in the byte-level alphabet. */
static int append_byte_level(grpo_tok_text *t, const char *s, size_t n) {
    if (text_reserve(t, n)) return -1;
    size_t start = t->n;
    for (size_t i = 0; i < n;) {
        size_t cl;
        int b = tok_cp_to_byte(tok_utf8_decode((const unsigned char *)s + i, &cl));
        if (b < 0) { /* not a byte-level token: its text as is */
            t->n = start;
            return text_append(t, s, n);
        }
        t->data[t->n++] = (char)b;
        i += cl;
    }
    t->data[t->n] = 0;
    return 0;
}

int32_t grpo_tokenizer_decode(const grpo_tokenizer *tok, const int32_t *ids, size_t n,
                              int skip_special, grpo_tok_text *out, grpo_error *err) {
    grpo_tok_text raw = {0};
    out->n = 0;
    if (text_reserve(out, 0)) goto nomem;
    out->data[0] = 0;
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *s = tok_id_text(tok, ids[i], &len);
        if (!s) continue;
        if (skip_special && tok_id_special(tok, ids[i])) continue;
        if (tok->decoder_byte_level) {
            if (append_byte_level(&raw, s, len)) goto nomem;
        } else {
            if ((!first && text_append(out, " ", 1)) || text_append(out, s, len)) goto nomem;
            first = 0;
        }
    }
    if (tok->decoder_byte_level && raw.n) {
        int valid;
        size_t m = tok_utf8_lossy_len(raw.data, raw.n, &valid);
        if (text_reserve(out, m)) goto nomem;
        tok_utf8_lossy(out->data, raw.data, raw.n);
        out->n = m;
        out->data[m] = 0;
    }
    grpo_tok_text_free(&raw);
    return GRPO_OK;
nomem:
    grpo_tok_text_free(&raw);
    return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory decoding %zu ids", tok->path, n);
}
