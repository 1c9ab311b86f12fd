/*
 * tok_normalize.c — the NFC and NFD normalizers (Unicode UAX #15), with the tables that
 * tools/make_unicode_tables.py generates from Python's unicodedata into tok_unicode_tables.h.
 *
 * Most text is already normalized: a quick check (no code point that can change, combining
 * classes in order) returns "unchanged" without copying. Otherwise: full canonical decomposition
 * (Hangul algorithmically), canonical ordering of combining marks, and for NFC the canonical
 * composition with blocking.
 */
#include "text/tokenizer/tok_normalize.h"

#include "text/tokenizer/tok_utf8.h"

#include <stdlib.h>
#include <string.h>

#include "text/tokenizer/tok_unicode_tables.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Hangul syllables: S = SBASE + (L * VCOUNT + V) * TCOUNT + T */
enum {
    SBASE = 0xAC00,
    LBASE = 0x1100,
    VBASE = 0x1161,
    TBASE = 0x11A7,
    LCOUNT = 19,
    VCOUNT = 21,
    TCOUNT = 28,
    NCOUNT = VCOUNT * TCOUNT,
    SCOUNT = LCOUNT * NCOUNT
};

static int ccc_of(uint32_t c) {
    if (c < 0x300) return 0;
    size_t lo = 0, hi = N_OF(TOK_CCC);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c < TOK_CCC[mid][0])
            hi = mid;
        else if (c > TOK_CCC[mid][1])
            lo = mid + 1;
        else
            return (int)TOK_CCC[mid][2];
    }
    return 0;
}

/* The full canonical decomposition of c (not Hangul), or NULL; *n its length. */
static const uint32_t *decomp_of(uint32_t c, uint32_t *n) {
    if (c < 0xC0) return NULL;
    size_t lo = 0, hi = N_OF(TOK_DECOMP);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c < TOK_DECOMP[mid][0])
            hi = mid;
        else if (c > TOK_DECOMP[mid][0])
            lo = mid + 1;
        else
            return *n = TOK_DECOMP[mid][2], &TOK_DECOMP_POOL[TOK_DECOMP[mid][1]];
    }
    return NULL;
}

static int nfc_maybe(uint32_t c) {
    if (c < 0x300) return 0;
    if ((c >= VBASE && c < VBASE + VCOUNT) || (c > TBASE && c < TBASE + TCOUNT)) return 1;
    size_t lo = 0, hi = N_OF(TOK_NFC_MAYBE);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c < TOK_NFC_MAYBE[mid][0])
            hi = mid;
        else if (c > TOK_NFC_MAYBE[mid][1])
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

/* The primary composite of (a, b), or 0. */
static uint32_t compose_pair(uint32_t a, uint32_t b) {
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE &&
        b < TBASE + TCOUNT)
        return a + (b - TBASE);
    size_t lo = 0, hi = N_OF(TOK_COMPOSE);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const uint32_t *e = TOK_COMPOSE[mid];
        if (a < e[0] || (a == e[0] && b < e[1]))
            hi = mid;
        else if (a > e[0] || b > e[1])
            lo = mid + 1;
        else
            return e[2];
    }
    return 0;
}

/* 1 when s is already in the form: no code point that may change, combining classes in order. */
static int quick_check(int form, const unsigned char *s, size_t n) {
    int last = 0;
    /* below U+0300 nothing changes under NFC; NFD decomposes from U+00C0 on */
    unsigned char inert_below = form == TOK_NORM_NFC ? 0xCC : 0xC3;
    for (size_t i = 0; i < n;) {
        if (s[i] < inert_below) {
            i += s[i] < 0x80 ? 1 : 2;
            last = 0;
            continue;
        }
        size_t cl;
        uint32_t c = tok_utf8_decode(s + i, &cl);
        i += cl;
        if (c >= 0x3400 && c < 0xA000) { /* CJK ideographs: inert in both forms */
            last = 0;
            continue;
        }
        int cc = ccc_of(c);
        if (cc && last > cc) return 0;
        last = cc;
        uint32_t dn;
        if (form == TOK_NORM_NFC ? nfc_maybe(c)
                                 : (decomp_of(c, &dn) || (c >= SBASE && c < SBASE + SCOUNT)))
            return 0;
    }
    return 1;
}

int tok_normalize(int form, const char *s, size_t n, char **out, size_t *out_n) {
    *out = NULL;
    *out_n = n;
    if (quick_check(form, (const unsigned char *)s, n)) return 0;
    /* a code point decomposes into at most 18 (U+FDFA is compatibility-only; canonical <= 4) */
    uint32_t *cp = malloc((4 * n + 1) * sizeof *cp);
    if (!cp) return -1;
    size_t m = 0;
    for (size_t i = 0; i < n;) { /* 1. full canonical decomposition */
        size_t cl;
        uint32_t c = tok_utf8_decode((const unsigned char *)s + i, &cl), dn;
        i += cl;
        const uint32_t *d;
        if (c >= SBASE && c < SBASE + SCOUNT) {
            uint32_t k = c - SBASE;
            cp[m++] = LBASE + k / NCOUNT;
            cp[m++] = VBASE + (k % NCOUNT) / TCOUNT;
            if (k % TCOUNT) cp[m++] = TBASE + k % TCOUNT;
        } else if ((d = decomp_of(c, &dn))) {
            for (uint32_t k = 0; k < dn; k++) cp[m++] = d[k];
        } else {
            cp[m++] = c;
        }
    }
    for (size_t i = 1; i < m; i++) { /* 2. canonical ordering: stable insertion sort by ccc */
        int cc = ccc_of(cp[i]);
        if (!cc) continue;
        for (size_t j = i; j > 0 && ccc_of(cp[j - 1]) > cc; j--) {
            uint32_t t = cp[j - 1];
            cp[j - 1] = cp[j], cp[j] = t;
        }
    }
    if (form == TOK_NORM_NFC) { /* 3. canonical composition */
        size_t r = 0;
        long starter = -1;
        int last_cc = 0;
        for (size_t i = 0; i < m; i++) {
            uint32_t c = cp[i];
            int cc = ccc_of(c);
            int adjacent = starter >= 0 && (size_t)starter == r - 1;
            if (starter >= 0 && (adjacent || (last_cc != 0 && last_cc < cc))) {
                uint32_t comp = compose_pair(cp[starter], c);
                if (comp) {
                    cp[starter] = comp;
                    continue;
                }
            }
            if (cc == 0) starter = (long)r;
            cp[r++] = c;
            last_cc = cc;
        }
        m = r;
    }
    char *d = malloc(4 * m + 1);
    if (!d) {
        free(cp);
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < m; i++) k += tok_utf8_encode(d + k, cp[i]);
    free(cp);
    *out = d;
    *out_n = k;
    return 0;
}
