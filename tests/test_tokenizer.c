/*
 * test_tokenizer.c — parity of the C tokenizer with Hugging Face `tokenizers`.
 *
 * Expected ids and strings come from tools/make_tokenizer_fixtures.py (the Python `tokenizers`
 * package) under tests/fixtures/tokenizer/: the tiny trained tokenizer and its variants always,
 * the shared MiniMind tokenizers (read from $GRPO_SHARED_DIR/data, default ../shared/data) in the
 * cases tagged "shared" (`test_tokenizer --shared`, ctest test_tokenizer_shared; tests/test_skip.h:
 * skipped without the data, a failure under CI).
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "text/tokenizer/tok_regex.h"
#include "text/tokenizer/tokenizer.h"
#include "text/testing.h"
#include "test_skip.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#define FIX GRPO_SOURCE_DIR "/tests/fixtures/tokenizer"

/* ---- fixture helpers ------------------------------------------------------------------------- */
static cJSON *load_json(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    ck_assert(fread(buf, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    buf[n] = 0;
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    ck_assert_msg(j != NULL, "%s: malformed JSON", path);
    return j;
}

typedef struct corpus {
    char **text; /* raw bytes (may be invalid UTF-8) */
    size_t *len;
    int *is_hex; /* given as hex bytes: not valid UTF-8 */
    int n;
} corpus;

static corpus load_corpus(void) {
    cJSON *j = load_json(FIX "/corpus.json");
    corpus c = {0};
    c.n = cJSON_GetArraySize(j);
    c.text = calloc((size_t)c.n, sizeof *c.text);
    c.len = calloc((size_t)c.n, sizeof *c.len);
    c.is_hex = calloc((size_t)c.n, sizeof *c.is_hex);
    for (int i = 0; i < c.n; i++) {
        cJSON *e = cJSON_GetArrayItem(j, i);
        cJSON *t = cJSON_GetObjectItem(e, "text"), *h = cJSON_GetObjectItem(e, "hex");
        if (t) {
            c.text[i] = strdup(t->valuestring);
            c.len[i] = strlen(t->valuestring);
        } else {
            size_t n = strlen(h->valuestring) / 2;
            c.text[i] = malloc(n + 1);
            for (size_t k = 0; k < n; k++) {
                unsigned v;
                sscanf(h->valuestring + 2 * k, "%2x", &v);
                c.text[i][k] = (char)v;
            }
            c.len[i] = n;
            c.is_hex[i] = 1;
        }
    }
    cJSON_Delete(j);
    return c;
}

static void free_corpus(corpus *c) {
    for (int i = 0; i < c->n; i++) free(c->text[i]);
    free(c->text), free(c->len), free(c->is_hex);
}

static int ids_equal(const grpo_tok_ids *got, const cJSON *want) {
    if ((int)got->n != cJSON_GetArraySize(want)) return 0;
    for (size_t k = 0; k < got->n; k++)
        if (got->data[k] != cJSON_GetArrayItem(want, (int)k)->valueint) return 0;
    return 1;
}

static void print_mismatch(const char *name, int i, const grpo_tok_ids *got, const cJSON *want) {
    char *w = cJSON_PrintUnformatted(want);
    fprintf(stderr, "%s: corpus[%d]: want %s\n  got [", name, i, w);
    for (size_t k = 0; k < got->n; k++) fprintf(stderr, "%s%d", k ? "," : "", got->data[k]);
    fprintf(stderr, "]\n");
    free(w);
}

static grpo_tokenizer *load_ok(const char *path) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_tokenizer *tok = NULL;
    int32_t rc = grpo_tokenizer_load(path, &tok, &err);
    ck_assert_msg(rc == GRPO_OK, "load %s: %s", path, err.message);
    return tok;
}

/* Encodes every corpus entry with and without special tokens; returns the number that match. */
static int check_encode(const char *name, grpo_tokenizer *tok, const corpus *c, const cJSON *exp) {
    const cJSON *enc = cJSON_GetObjectItem(exp, "encode");
    const cJSON *plain = cJSON_GetObjectItem(exp, "encode_plain");
    ck_assert_int_eq(cJSON_GetArraySize(enc), c->n);
    int ok = 0;
    grpo_error err;
    grpo_error_init(&err);
    for (int i = 0; i < c->n; i++) {
        grpo_tok_ids a = {0}, b = {0};
        ck_assert_int_eq(grpo_tokenizer_encode(tok, c->text[i], c->len[i], 1, &a, &err), GRPO_OK);
        ck_assert_int_eq(grpo_tokenizer_encode(tok, c->text[i], c->len[i], 0, &b, &err), GRPO_OK);
        const cJSON *want_b = cJSON_GetArrayItem(plain ? plain : enc, i);
        int good = ids_equal(&a, cJSON_GetArrayItem(enc, i)) && ids_equal(&b, want_b);
        if (!good)
            print_mismatch(name, i, ids_equal(&a, cJSON_GetArrayItem(enc, i)) ? &b : &a,
                           ids_equal(&a, cJSON_GetArrayItem(enc, i)) ? want_b
                                                                     : cJSON_GetArrayItem(enc, i));
        ok += good;
        grpo_tok_ids_free(&a), grpo_tok_ids_free(&b);
    }
    printf("parity %-14s encode: %d/%d corpus entries match\n", name, ok, c->n);
    return ok;
}

/* The expected text: a JSON string, or {"hex": ...} when it holds NUL bytes; *n its length. */
static char *want_text(const cJSON *w, size_t *n) {
    if (cJSON_IsString(w)) {
        *n = strlen(w->valuestring);
        return strdup(w->valuestring);
    }
    const char *h = cJSON_GetObjectItem(w, "hex")->valuestring;
    *n = strlen(h) / 2;
    char *s = malloc(*n + 1);
    for (size_t k = 0; k < *n; k++) {
        unsigned v;
        sscanf(h + 2 * k, "%2x", &v);
        s[k] = (char)v;
    }
    s[*n] = 0;
    return s;
}

static int decode_matches(grpo_tokenizer *tok, const cJSON *ids, int skip, const cJSON *want_j) {
    size_t want_n;
    char *want = want_text(want_j, &want_n);
    int n = cJSON_GetArraySize(ids);
    int32_t *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    for (int k = 0; k < n; k++) v[k] = cJSON_GetArrayItem(ids, k)->valueint;
    grpo_tok_text t = {0};
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_tokenizer_decode(tok, v, (size_t)n, skip, &t, &err), GRPO_OK);
    int ok = t.n == want_n && memcmp(t.data, want, want_n) == 0;
    if (!ok) fprintf(stderr, "decode(skip=%d): want \"%s\" got \"%s\"\n", skip, want, t.data);
    grpo_tok_text_free(&t);
    free(v);
    free(want);
    return ok;
}

/* Decodes the expected encodings and the decode_cases; returns the number of mismatches. */
static int check_decode(const char *name, grpo_tokenizer *tok, const cJSON *exp) {
    const cJSON *enc = cJSON_GetObjectItem(exp, "encode");
    const cJSON *dec = cJSON_GetObjectItem(exp, "decode"),
                *skip = cJSON_GetObjectItem(exp, "decode_skip");
    const cJSON *cases = cJSON_GetObjectItem(exp, "decode_cases"), *e;
    int bad = 0, n = 0;
    for (int i = 0; i < cJSON_GetArraySize(enc); i++, n++) {
        bad += !decode_matches(tok, cJSON_GetArrayItem(enc, i), 0, cJSON_GetArrayItem(dec, i));
        bad += !decode_matches(tok, cJSON_GetArrayItem(enc, i), 1, cJSON_GetArrayItem(skip, i));
    }
    cJSON_ArrayForEach(e, cases) {
        const cJSON *ids = cJSON_GetObjectItem(e, "ids");
        bad += !decode_matches(tok, ids, 0, cJSON_GetObjectItem(e, "text"));
        bad += !decode_matches(tok, ids, 1, cJSON_GetObjectItem(e, "text_skip"));
        n++;
    }
    printf("parity %-14s decode: %d mismatches in %d id lists x 2 (skip_special off/on)\n", name,
           bad, n);
    return bad;
}

static uint64_t fnv1a64(const char *s) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001B3ull;
    return h;
}

/* bos/eos/pad and the chat template as transformers' AutoTokenizer reads them (when recorded). */
static void check_config(const char *name, grpo_tokenizer *tok, const cJSON *exp) {
    const cJSON *cfg = cJSON_GetObjectItem(exp, "config");
    if (!cfg) return;
    ck_assert_int_eq(grpo_tokenizer_bos_id(tok), cJSON_GetObjectItem(cfg, "bos_id")->valueint);
    ck_assert_int_eq(grpo_tokenizer_eos_id(tok), cJSON_GetObjectItem(cfg, "eos_id")->valueint);
    ck_assert_int_eq(grpo_tokenizer_pad_id(tok), cJSON_GetObjectItem(cfg, "pad_id")->valueint);
    const char *ct = grpo_tokenizer_chat_template(tok);
    ck_assert_ptr_nonnull(ct);
    ck_assert_int_eq((int)strlen(ct), cJSON_GetObjectItem(cfg, "chat_template_len")->valueint);
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)fnv1a64(ct));
    ck_assert_str_eq(hex, cJSON_GetObjectItem(cfg, "chat_template_fnv1a64")->valuestring);
    printf("parity %-14s config: bos/eos/pad and chat template (%d bytes) match transformers\n",
           name, (int)strlen(ct));
}

static void check_parity(const char *name, const char *tok_path, const char *exp_path, int decode) {
    corpus c = load_corpus();
    cJSON *exp = load_json(exp_path);
    grpo_tokenizer *tok = load_ok(tok_path);
    check_config(name, tok, exp);
    int ok = check_encode(name, tok, &c, exp);
    int bad = decode ? check_decode(name, tok, exp) : 0;
    ck_assert_msg(ok == c.n, "%s: %d of %d corpus entries differ from tokenizers", name, c.n - ok,
                  c.n);
    ck_assert_msg(bad == 0, "%s: %d decodes differ from tokenizers", name, bad);
    grpo_tokenizer_free(tok);
    cJSON_Delete(exp);
    free_corpus(&c);
}

/* ---- parity ---------------------------------------------------------------------------------- */
START_TEST(tiny_matches_tokenizers) {
    check_parity("tiny", FIX "/tiny", FIX "/expected_tiny.json", 1);
}
END_TEST

static const char *variants[] = {"qwen2_split", "llama3_split",   "prefix_space", "no_regex",
                                 "removed",     "merged_prev",    "merged_next",  "contiguous",
                                 "invert",      "invert_removed", "qwen2_nfc",    "nfd"};

START_TEST(variant_matches_tokenizers) {
    char tok[512], exp[512];
    snprintf(tok, sizeof tok, FIX "/variants/%s/tokenizer.json", variants[_i]);
    snprintf(exp, sizeof exp, FIX "/expected_%s.json", variants[_i]);
    check_parity(variants[_i], tok, exp, 0);
}
END_TEST

static void shared_parity(const char *name) {
    char tok[512], exp[512];
    snprintf(tok, sizeof tok, "%s/data/%s/tokenizer.json", test_shared_dir(), name);
    snprintf(exp, sizeof exp, FIX "/expected_%s.json", name);
    ck_assert_msg(access(tok, R_OK) == 0, "%s not found", tok); /* main checked data/ is there */
    check_parity(name, tok, exp, 1);
}

START_TEST(minimind2_matches_tokenizers) { shared_parity("minimind2"); }
END_TEST

START_TEST(minimind3_matches_tokenizers) { shared_parity("minimind3"); }
END_TEST

/* ---- accessors and config -------------------------------------------------------------------- */
START_TEST(config_gives_special_ids_and_template) {
    grpo_tokenizer *tok = load_ok(FIX "/tiny/tokenizer.json");
    ck_assert_int_eq(grpo_tokenizer_vocab_size(tok), 517); /* 512 trained + 5 added */
    ck_assert_int_eq(grpo_tokenizer_bos_id(tok), grpo_tokenizer_token_to_id(tok, "<|im_start|>"));
    ck_assert_int_eq(grpo_tokenizer_eos_id(tok),
                     2); /* {"__type": "AddedToken", "content": ...} form */
    ck_assert_int_eq(grpo_tokenizer_pad_id(tok), 0);
    ck_assert_ptr_nonnull(grpo_tokenizer_chat_template(tok));
    ck_assert(strstr(grpo_tokenizer_chat_template(tok), "<|im_start|>") != NULL);
    ck_assert_int_eq(grpo_tokenizer_token_to_id(tok, "<think>"), 512);
    ck_assert_str_eq(grpo_tokenizer_id_to_token(tok, 512), "<think>");
    ck_assert_int_eq(grpo_tokenizer_token_to_id(tok, "Ġ"),
                     grpo_tokenizer_token_to_id(tok, "\xc4\xa0"));
    ck_assert_ptr_null(grpo_tokenizer_id_to_token(tok, 517));
    ck_assert_ptr_null(grpo_tokenizer_id_to_token(tok, -1));
    ck_assert_int_eq(grpo_tokenizer_token_to_id(tok, "no such token"), -1);
    ck_assert(grpo_tokenizer_is_special(tok, 2));
    ck_assert(!grpo_tokenizer_is_special(tok, 512));
    grpo_tokenizer_free(tok);
    /* a variant directory without tokenizer_config.json: no special ids, no template */
    tok = load_ok(FIX "/variants/removed");
    ck_assert_int_eq(grpo_tokenizer_eos_id(tok), -1);
    ck_assert_ptr_null(grpo_tokenizer_chat_template(tok));
    grpo_tokenizer_free(tok);
}
END_TEST

/* The vocab's byte alphabet: every single byte encodes to the id of its byte-level character
 * (hand-computable from the GPT-2 table: 'A' is itself, ' ' is U+0120 'Ġ', '\n' is U+010A 'Ċ'). */
START_TEST(single_bytes_use_the_byte_level_alphabet) {
    grpo_tokenizer *tok = load_ok(FIX "/tiny");
    grpo_error err;
    grpo_error_init(&err);
    struct {
        const char *text, *token;
    } cases[] = {{"A", "A"}, {" ", "\xc4\xa0"}, {"\n", "\xc4\x8a"}};
    for (int i = 0; i < 3; i++) {
        grpo_tok_ids ids = {0};
        ck_assert_int_eq(grpo_tokenizer_encode(tok, cases[i].text, 1, 0, &ids, &err), GRPO_OK);
        ck_assert_int_eq((int)ids.n, 1);
        ck_assert_int_eq(ids.data[0], grpo_tokenizer_token_to_id(tok, cases[i].token));
        grpo_tok_ids_free(&ids);
    }
    grpo_tokenizer_free(tok);
}
END_TEST

/* ---- host services --------------------------------------------------------------------------- */
START_TEST(host_services_truncate_and_report_full_length) {
    grpo_tokenizer *tok = load_ok(FIX "/tiny");
    grpo_error err;
    grpo_error_init(&err);
    /* as a plugin sees them: through the host table */
    grpo_host host = {.struct_size = sizeof host,
                      .tokenizer = tok,
                      .tokenize = grpo_host_tokenize,
                      .detokenize = grpo_host_detokenize};
    const char *text = "<|im_start|>user\nhello world<|im_end|>";
    int32_t ids[64];
    int32_t n = host.tokenize(host.tokenizer, text, ids, 64, &err);
    ck_assert_int_gt(n, 3);
    ck_assert_int_le(n, 64);
    ck_assert_int_eq(ids[0], 1);
    int32_t few[2] = {-7, -7};
    ck_assert_int_eq(grpo_host_tokenize(tok, text, few, 1, &err), n); /* full count, 1 written */
    ck_assert_int_eq(few[0], 1);
    ck_assert_int_eq(few[1], -7);
    char out[256];
    ck_assert_int_eq(grpo_host_detokenize(tok, ids, n, out, sizeof out, &err),
                     (int32_t)strlen(text));
    ck_assert_str_eq(out, text);
    char small[6];
    ck_assert_int_eq(grpo_host_detokenize(tok, ids, n, small, sizeof small, &err),
                     (int32_t)strlen(text));
    ck_assert_str_eq(small, "<|im_");
    ck_assert_int_lt(grpo_host_tokenize(tok, NULL, ids, 64, &err), 0);
    grpo_tokenizer_free(tok);
}
END_TEST

/* ---- errors ---------------------------------------------------------------------------------- */
static char tmpdir[256];

static const char *write_tmp(const char *json) {
    static char path[512];
    snprintf(tmpdir, sizeof tmpdir, "/tmp/grpo_tok_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(path, sizeof path, "%s/tokenizer.json", tmpdir);
    FILE *f = fopen(path, "w");
    fputs(json, f);
    fclose(f);
    return path;
}

static void cleanup_tmp(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", tmpdir);
    unlink(path);
    rmdir(tmpdir);
}

/* Loading json must fail with a message containing the file name and every string in want. */
static void expect_load_error(const char *json, const char *want1, const char *want2) {
    const char *path = write_tmp(json);
    grpo_error err;
    grpo_error_init(&err);
    grpo_tokenizer *tok = (grpo_tokenizer *)1;
    int32_t rc = grpo_tokenizer_load(path, &tok, &err);
    ck_assert_int_lt(rc, 0);
    ck_assert_ptr_null(tok);
    ck_assert_msg(strstr(err.message, path) != NULL, "message names no file: %s", err.message);
    ck_assert_msg(strstr(err.message, want1) != NULL, "'%s' not in: %s", want1, err.message);
    if (want2)
        ck_assert_msg(strstr(err.message, want2) != NULL, "'%s' not in: %s", want2, err.message);
    cleanup_tmp();
}

#define MODEL_OK                                                                                   \
    "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a " \
    "b\"]}"

START_TEST(bad_files_fail_clearly) {
    expect_load_error("{\"model\": {\"type\": \"BPE\", ", "malformed JSON", NULL);
    expect_load_error("{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}", "Unigram",
                      "not supported");
    expect_load_error("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", "WordPiece",
                      "not supported");
    expect_load_error("{" MODEL_OK ", \"normalizer\": {\"type\": \"NFKC\"}}", "normalizer 'NFKC'",
                      "not supported");
    expect_load_error("{" MODEL_OK ", \"pre_tokenizer\": {\"type\": \"Whitespace\"}}", "Whitespace",
                      "not supported");
    expect_load_error("{" MODEL_OK ", \"decoder\": {\"type\": \"WordPiece\"}}",
                      "decoder 'WordPiece'", NULL);
    expect_load_error(
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a c\"]}}",
        "merges[0]", "'c' is not in the vocab");
    expect_load_error("{" MODEL_OK
                      ", \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}, "
                      "\"behavior\": \"Isolated\", \"invert\": false}}",
                      "does not compile", NULL);
    /* \C is one byte in PCRE2 (it split UTF-8 characters and crashed the BPE loop: issue 34) */
    expect_load_error("{" MODEL_OK
                      ", \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": "
                      "\"a\\\\C\"}, \"behavior\": \"Isolated\", \"invert\": false}}",
                      "\\C at offset 1", "splitting UTF-8");
    expect_load_error("{" MODEL_OK
                      ", \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": "
                      "\"[\\\\W]\"}, \"behavior\": \"Isolated\", \"invert\": false}}",
                      "\\W at offset 1", "inside [...]");
    expect_load_error("{" MODEL_OK ", \"added_tokens\": [{\"id\": 1e12, \"content\": \"<x>\"}]}",
                      "added_tokens[0]", "\"id\" in [0,");
    expect_load_error(
        "{" MODEL_OK ", \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": "
        "[{\"SpecialToken\": {\"id\": \"<s>\"}}], \"special_tokens\": {\"<s>\": {\"ids\": [7]}}}}",
        "post_processor", "out of the vocabulary");
    expect_load_error("{" MODEL_OK ", \"post_processor\": {\"type\": \"RobertaProcessing\"}}",
                      "post_processor 'RobertaProcessing'", "not supported");
    expect_load_error("{" MODEL_OK ", \"truncation\": {\"max_length\": 8}}", "truncation",
                      "not supported");
    grpo_error err;
    grpo_error_init(&err);
    grpo_tokenizer *tok = NULL;
    ck_assert_int_eq(grpo_tokenizer_load("/nonexistent/tok.json", &tok, &err), GRPO_ERR_IO);
    ck_assert(strstr(err.message, "/nonexistent/tok.json") != NULL);
}
END_TEST

/* ---- regex escapes: PCRE2 must read what Oniguruma reads ---------------------------------- */
/* 1 when the translated pattern matches somewhere in subject (UTF-8), 0 when not. */
static int translated_matches(const char *pattern, const char *subject) {
    char why[160];
    char *t = tok_regex_translate(pattern, why, sizeof why);
    ck_assert_msg(t != NULL, "/%s/ refused: %s", pattern, why);
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)t, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C, &code, &off,
                                   NULL);
    ck_assert_msg(re != NULL, "/%s/ -> /%s/ does not compile", pattern, t);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = pcre2_match(re, (PCRE2_SPTR)subject, strlen(subject), 0, 0, md, NULL);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    free(t);
    return rc >= 0;
}

/* Refused, with why naming the escape. */
static void translation_refused(const char *pattern, const char *want) {
    char why[160];
    char *t = tok_regex_translate(pattern, why, sizeof why);
    ck_assert_msg(t == NULL, "/%s/ was translated to /%s/", pattern, t ? t : "");
    ck_assert_msg(strstr(why, want) != NULL, "/%s/: '%s' not in: %s", pattern, want, why);
}

/* Oniguruma's meanings (its doc/RE, Unicode case): \w = L|M|N|Pc, \h = [0-9a-fA-F], \v = U+000B,
 * \uHHHH = a code point, \b on that \w. PCRE2 10.42 reads each of them otherwise untranslated. */
START_TEST(regex_escapes_read_as_oniguruma) {
    ck_assert(translated_matches("^\\w$", "\xcc\x81"));       /* U+0301 combining acute: Mn */
    ck_assert(translated_matches("^\\w$", "\xe2\x80\xbf"));   /* U+203F undertie: Pc */
    ck_assert(!translated_matches("^\\w$", "\xc2\xa0"));      /* U+00A0: Zs */
    ck_assert(translated_matches("^[\\w-]+$", "a\xcc\x81-"));  /* \w inside a class */
    ck_assert(!translated_matches("\\W", "a\xcc\x81"));
    ck_assert(translated_matches("^\\h+$", "09aF"));
    ck_assert(!translated_matches("\\h", " \t"));              /* PCRE2's \h: these */
    ck_assert(translated_matches("^\\H$", " "));
    ck_assert(translated_matches("^\\v$", "\x0b"));
    ck_assert(!translated_matches("\\v", "\n"));               /* PCRE2's \v: \n too */
    ck_assert(translated_matches("^\\u00e9$", "\xc3\xa9"));
    ck_assert(!translated_matches("\\bx", "\xcc\x81x"));      /* U+0301 is a word character */
    ck_assert(translated_matches("\\Bx", "\xcc\x81x"));
    ck_assert(translated_matches("\\bx", " x"));
    ck_assert(translated_matches("^[\\b]$", "\x08"));          /* backspace in a class */
    ck_assert(translated_matches("^\\s$", "\xe3\x80\x80"));   /* U+3000 */
    ck_assert(!translated_matches("\\s", "\xe1\xa0\x8e"));   /* U+180E: not White_Space */
    ck_assert(translated_matches("^\\p{L}\\d\\.$", "x7."));   /* copied as they are */
    translation_refused("a\\Cb", "\\C at offset 1");
    translation_refused("\\xff", "raw byte");
    translation_refused("\\x80", "raw byte");
    ck_assert(translated_matches("^\\x7f$", "\x7f"));
    translation_refused("[^\\H]", "inside [...]");
    translation_refused("\\y", "\\y at offset 0");
    translation_refused("\\u12", "4 hex digits");
}
END_TEST

/* A model with no pre-tokenizer and no decoder: character symbols, tokens joined by " ". */
START_TEST(minimal_model_merges_and_joins) {
    const char *path = write_tmp("{" MODEL_OK "}");
    grpo_tokenizer *tok = load_ok(path);
    cleanup_tmp();
    grpo_error err;
    grpo_error_init(&err);
    grpo_tok_ids ids = {0};
    ck_assert_int_eq(grpo_tokenizer_encode(tok, "abba", 4, 1, &ids, &err), GRPO_OK);
    ck_assert_int_eq((int)ids.n, 3); /* ab b a */
    ck_assert_int_eq(ids.data[0], 2);
    ck_assert_int_eq(ids.data[1], 1);
    ck_assert_int_eq(ids.data[2], 0);
    grpo_tok_text t = {0};
    ck_assert_int_eq(grpo_tokenizer_decode(tok, ids.data, ids.n, 0, &t, &err), GRPO_OK);
    ck_assert_str_eq(t.data, "ab b a");
    grpo_tok_text_free(&t);
    grpo_tok_ids_free(&ids);
    grpo_tokenizer_free(tok);
}
END_TEST

/* ---- properties and fuzzing ------------------------------------------------------------------ */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) { /* xorshift64*, deterministic */
    rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 33) % n;
}

/* Random bytes: ASCII, whitespace, UTF-8 characters, cut characters, special tokens. */
static size_t random_text(char *buf, size_t cap) {
    static const char *bits[] = {"hello",
                                 " ",
                                 "  ",
                                 "\t",
                                 "\n",
                                 "\r\n",
                                 "\xe4\xbd\xa0\xe5\xa5\xbd",
                                 "\xf0\x9f\x98\x80",
                                 "\xe4\xbd",
                                 "\xff",
                                 "\x80",
                                 "<|im_end|>",
                                 "<think>",
                                 "foo_bar",
                                 "'s",
                                 "123",
                                 "e\xcc\x81",
                                 "\xc2\xa0",
                                 "\x00"};
    size_t n = 0, parts = 1 + rnd(20);
    for (size_t p = 0; p < parts; p++) {
        if (rnd(3) == 0) {
            size_t k = 1 + rnd(6);
            for (size_t i = 0; i < k && n < cap; i++) buf[n++] = (char)rnd(256);
        } else {
            const char *b = bits[rnd(sizeof bits / sizeof *bits)];
            size_t len = strcmp(b, "\x00") == 0 ? 1 : strlen(b);
            for (size_t i = 0; i < len && n < cap; i++) buf[n++] = b[i];
        }
    }
    return n;
}

/* Byte-level BPE loses nothing: decode(encode(x)) is x with invalid UTF-8 replaced by U+FFFD
 * (Python's bytes.decode("utf-8", "replace") gives the same; here U+FFFD runs are compared through
 * a second encode/decode, which must be a fixed point). */
START_TEST(decode_inverts_encode_on_random_bytes) {
    const char *paths[] = {FIX "/tiny", FIX "/variants/qwen2_split"};
    grpo_error err;
    grpo_error_init(&err);
    for (int t = 0; t < 2; t++) {
        grpo_tokenizer *tok = load_ok(paths[t]);
        for (int it = 0; it < 2000; it++) {
            char buf[256];
            size_t n = random_text(buf, sizeof buf);
            int valid = 1;
            for (size_t i = 0; i < n; i++) valid &= (unsigned char)buf[i] < 0x80;
            grpo_tok_ids ids = {0}, ids2 = {0};
            grpo_tok_text back = {0}, back2 = {0};
            ck_assert_int_eq(grpo_tokenizer_encode(tok, buf, n, 0, &ids, &err), GRPO_OK);
            ck_assert_int_eq(grpo_tokenizer_decode(tok, ids.data, ids.n, 0, &back, &err), GRPO_OK);
            if (valid) { /* pure ASCII: exactly the input */
                ck_assert_uint_eq(back.n, n);
                ck_assert(memcmp(back.data, buf, n) == 0);
            }
            ck_assert_int_eq(grpo_tokenizer_encode(tok, back.data, back.n, 0, &ids2, &err),
                             GRPO_OK);
            ck_assert_int_eq(grpo_tokenizer_decode(tok, ids2.data, ids2.n, 0, &back2, &err),
                             GRPO_OK);
            ck_assert_uint_eq(back2.n, back.n);
            ck_assert(memcmp(back2.data, back.data, back.n) == 0);
            grpo_tok_ids_free(&ids), grpo_tok_ids_free(&ids2);
            grpo_tok_text_free(&back), grpo_tok_text_free(&back2);
        }
        grpo_tokenizer_free(tok);
    }
}
END_TEST

/* A damaged tokenizer.json (truncated, bytes flipped, ranges deleted) either loads or fails with a
 * message naming the file; it never crashes (run under ASan/UBSan in the sanitizer build). */
START_TEST(damaged_json_fails_cleanly) {
    FILE *f = fopen(FIX "/tiny/tokenizer.json", "rb");
    ck_assert_ptr_nonnull(f);
    char *orig = malloc(1 << 20);
    size_t n = fread(orig, 1, (1 << 20) - 1, f);
    fclose(f);
    char *buf = malloc(n + 1);
    int loaded = 0, failed = 0;
    for (int it = 0; it < 300; it++) {
        memcpy(buf, orig, n);
        size_t m = n;
        switch (rnd(4)) {
        case 0: m = rnd((uint32_t)n); break; /* truncated */
        case 1:
            for (int k = 0; k < 4; k++) buf[rnd((uint32_t)n)] = "\"{}[],:0a\\"[rnd(11)];
            break;
        case 2: {
            size_t a = rnd((uint32_t)n), b = a + rnd(64);
            if (b > n) b = n;
            memmove(buf + a, buf + b, n - b);
            m = n - (b - a);
            break;
        }                                                       /* a range deleted */
        default: buf[rnd((uint32_t)n)] = (char)rnd(256); break; /* any byte */
        }
        buf[m] = 0;
        char *copy = strndup(buf, m);
        const char *path = write_tmp(copy);
        free(copy);
        grpo_error err;
        grpo_error_init(&err);
        grpo_tokenizer *tok = NULL;
        if (grpo_tokenizer_load(path, &tok, &err) == GRPO_OK) {
            grpo_tok_ids ids = {0};
            grpo_tokenizer_encode(tok, "Hello <|im_end|> 你好", strlen("Hello <|im_end|> 你好"), 1,
                                  &ids, &err);
            grpo_tok_ids_free(&ids);
            grpo_tokenizer_free(tok);
            loaded++;
        } else {
            ck_assert_msg(strstr(err.message, path) != NULL, "message names no file: %s",
                          err.message);
            failed++;
        }
        cleanup_tmp();
    }
    printf("damaged tokenizer.json: %d loaded, %d refused with a message\n", loaded, failed);
    ck_assert_int_gt(failed, 100);
    free(buf), free(orig);
}
END_TEST

/* ---- the command line ------------------------------------------------------------------------ */
/* `grpo tokenize` on the single-line corpus entries prints exactly the expected id arrays, and
 * `--decode` turns them back into the lines. */
START_TEST(cli_tokenize_round_trips) {
    corpus c = load_corpus();
    cJSON *exp = load_json(FIX "/expected_tiny.json");
    const cJSON *enc = cJSON_GetObjectItem(exp, "encode");
    char in[] = "/tmp/grpo_tok_in_XXXXXX", out[] = "/tmp/grpo_tok_out_XXXXXX";
    close(mkstemp(in)), close(mkstemp(out));
    FILE *f = fopen(in, "w");
    char *want = calloc(1, 1 << 20), *lines = calloc(1, 1 << 20);
    int n = 0;
    for (int i = 0; i < c.n; i++) {
        /* one-line entries whose decode gives the line back: valid UTF-8, no <mask> (its
         * lstrip/rstrip swallow the spaces around it) */
        if (c.is_hex[i] || memchr(c.text[i], '\n', c.len[i]) || memchr(c.text[i], '\r', c.len[i]) ||
            strstr(c.text[i], "<mask>"))
            continue;
        fwrite(c.text[i], 1, c.len[i], f), fputc('\n', f);
        char *w = cJSON_PrintUnformatted(cJSON_GetArrayItem(enc, i));
        strcat(want, w), strcat(want, "\n");
        strncat(lines, c.text[i], c.len[i]), strcat(lines, "\n");
        free(w);
        n++;
    }
    fclose(f);
    char *argv[] = {"tokenize", "--tokenizer", FIX "/tiny", NULL, NULL};
    fflush(stdout);
    int saved_in = dup(0), saved_out = dup(1);
    ck_assert_ptr_nonnull(freopen(in, "r", stdin));
    ck_assert_ptr_nonnull(freopen(out, "w", stdout));
    int rc = cmd_tokenize(3, argv);
    fflush(stdout);
    /* round trip: the ids just printed, decoded */
    ck_assert_ptr_nonnull(freopen(out, "r", stdin));
    char out2[] = "/tmp/grpo_tok_out2_XXXXXX";
    close(mkstemp(out2));
    ck_assert_ptr_nonnull(freopen(out2, "w", stdout));
    argv[3] = "--decode";
    int rc2 = cmd_tokenize(4, argv);
    fflush(stdout);
    dup2(saved_in, 0), dup2(saved_out, 1);
    close(saved_in), close(saved_out);
    clearerr(stdin);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(rc2, 0);
    char *got = calloc(1, 1 << 20), *got2 = calloc(1, 1 << 20);
    f = fopen(out, "r");
    size_t got_n = fread(got, 1, (1 << 20) - 1, f);
    fclose(f);
    f = fopen(out2, "r");
    size_t got2_n = fread(got2, 1, (1 << 20) - 1, f);
    fclose(f);
    ck_assert_int_gt(n, 50);
    ck_assert_uint_eq(got_n, strlen(want));
    ck_assert_str_eq(got, want);
    ck_assert_uint_eq(got2_n, strlen(lines));
    ck_assert_str_eq(got2, lines);
    unlink(in), unlink(out), unlink(out2);
    free(want), free(lines), free(got), free(got2);
    cJSON_Delete(exp);
    free_corpus(&c);
}
END_TEST

/* ---- model options (hand-computable; each also checked with tokenizers 0.23.3) --------------- */
/* Encodes text with a tokenizer.json holding only a BPE model with the given fields. */
static void expect_ids(const char *model_fields, const char *text, const int32_t *want, int n) {
    char json[1024];
    snprintf(json, sizeof json, "{\"model\": {\"type\": \"BPE\", %s}}", model_fields);
    grpo_tokenizer *tok = load_ok(write_tmp(json));
    cleanup_tmp();
    grpo_error err;
    grpo_error_init(&err);
    grpo_tok_ids ids = {0};
    ck_assert_int_eq(grpo_tokenizer_encode(tok, text, strlen(text), 1, &ids, &err), GRPO_OK);
    ck_assert_msg((int)ids.n == n, "'%s' with %s: %zu ids, want %d", text, model_fields, ids.n, n);
    for (int i = 0; i < n; i++) ck_assert_int_eq(ids.data[i], want[i]);
    grpo_tok_ids_free(&ids);
    grpo_tokenizer_free(tok);
}

#define ABC_VOCAB                                                                                  \
    "\"vocab\": {\"a\": 0, \"b\": 1, \"c\": 2, \"ab\": 3, \"bc\": 4, \"abc\": 5}, "                \
    "\"merges\": [\"b c\", \"a b\", \"ab c\"]"
#define UNK_VOCAB                                                                                  \
    "\"vocab\": {\"<unk>\": 0, \"a\": 1, \"b\": 2}, \"merges\": [], \"unk_token\": \"<unk>\""

START_TEST(model_options_follow_tokenizers) {
    /* "abc": b+c (rank 0) first, then a+bc is no merge: [a, bc]; ignore_merges takes "abc" whole */
    expect_ids(ABC_VOCAB, "abc", (int32_t[]){0, 4}, 2);
    expect_ids(ABC_VOCAB ", \"ignore_merges\": true", "abc", (int32_t[]){5}, 1);
    /* unknown characters: one <unk> each, or one per run with fuse_unk; "é" is one character */
    expect_ids(UNK_VOCAB, "axxb", (int32_t[]){1, 0, 0, 2}, 4);
    expect_ids(UNK_VOCAB ", \"fuse_unk\": true", "axxb", (int32_t[]){1, 0, 2}, 3);
    expect_ids(UNK_VOCAB ", \"fuse_unk\": true", "x\xc3\xa9", (int32_t[]){0}, 1);
    /* byte_fallback: <0xNN> per byte when every byte of the character has one, else <unk> */
    expect_ids("\"vocab\": {\"<unk>\": 0, \"a\": 1, \"<0x78>\": 2, \"<0xC3>\": 3}, \"merges\": [], "
               "\"unk_token\": \"<unk>\", \"byte_fallback\": true",
               "ax\xc3\xa9", (int32_t[]){1, 2, 0}, 3);
    /* no unk_token: unknown characters vanish */
    expect_ids("\"vocab\": {\"a\": 0}, \"merges\": []", "axa", (int32_t[]){0, 0}, 2);
}
END_TEST

/* ---- concurrency ----------------------------------------------------------------------------- */
typedef struct job {
    grpo_tokenizer *tok;
    const corpus *c;
    const cJSON *enc;
    int ok;
} job;

static void *encode_all(void *arg) {
    job *j = arg;
    grpo_error err;
    grpo_error_init(&err);
    for (int rep = 0; rep < 5; rep++)
        for (int i = 0; i < j->c->n; i++) {
            grpo_tok_ids ids = {0};
            grpo_tokenizer_encode(j->tok, j->c->text[i], j->c->len[i], 1, &ids, &err);
            j->ok += ids_equal(&ids, cJSON_GetArrayItem(j->enc, i));
            grpo_tok_ids_free(&ids);
        }
    return NULL;
}

START_TEST(concurrent_encodes_share_the_cache) {
    corpus c = load_corpus();
    cJSON *exp = load_json(FIX "/expected_tiny.json");
    grpo_tokenizer *tok = load_ok(FIX "/tiny");
    job jobs[4];
    pthread_t th[4];
    for (int k = 0; k < 4; k++) {
        jobs[k] = (job){tok, &c, cJSON_GetObjectItem(exp, "encode"), 0};
        pthread_create(&th[k], NULL, encode_all, &jobs[k]);
    }
    for (int k = 0; k < 4; k++) {
        pthread_join(th[k], NULL);
        ck_assert_int_eq(jobs[k].ok, 5 * c.n);
    }
    grpo_tokenizer_free(tok);
    cJSON_Delete(exp);
    free_corpus(&c);
}
END_TEST

int main(int argc, char **argv) {
    test_tags tags = test_shared_tags(argc, argv, "data");
    Suite *s = suite_create("tokenizer");
    TCase *tc = tcase_create("parity");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, tiny_matches_tokenizers);
    tcase_add_loop_test(tc, variant_matches_tokenizers, 0,
                        (int)(sizeof variants / sizeof *variants));
    suite_add_tcase(s, tc);
    TCase *ts = tcase_create("shared"); /* ../shared's MiniMind tokenizers */
    tcase_set_tags(ts, "shared");
    tcase_set_timeout(ts, 120);
    tcase_add_test(ts, minimind2_matches_tokenizers);
    tcase_add_test(ts, minimind3_matches_tokenizers);
    suite_add_tcase(s, ts);
    TCase *tb = tcase_create("behaviour");
    tcase_add_test(tb, config_gives_special_ids_and_template);
    tcase_add_test(tb, single_bytes_use_the_byte_level_alphabet);
    tcase_add_test(tb, host_services_truncate_and_report_full_length);
    tcase_add_test(tb, bad_files_fail_clearly);
    tcase_add_test(tb, regex_escapes_read_as_oniguruma);
    tcase_add_test(tb, minimal_model_merges_and_joins);
    tcase_add_test(tb, model_options_follow_tokenizers);
    tcase_add_test(tb, concurrent_encodes_share_the_cache);
    tcase_add_test(tb, cli_tokenize_round_trips);
    tcase_add_test(tb, decode_inverts_encode_on_random_bytes);
    tcase_add_test(tb, damaged_json_fails_cleanly);
    suite_add_tcase(s, tb);
    SRunner *sr = srunner_create(s);
    srunner_run_tagged(sr, NULL, NULL, tags.include, tags.exclude, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
