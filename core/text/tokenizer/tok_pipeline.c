/*
 * tok_pipeline.c — the sections of tokenizer.json around the model: "normalizer",
 * "pre_tokenizer", "post_processor" and "decoder". Each loader accepts what the tokenizer can run
 * and refuses anything else with a message naming the file and the unsupported type.
 */
#include "text/tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>

/* The regex of the ByteLevel pre-tokenizer (GPT-2's). */
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

int32_t tok_load_normalizer(grpo_tokenizer *tok, const cJSON *n, grpo_error *err) {
    if (tok_json_null(n)) return GRPO_OK;
    const char *type = tok_json_type(n);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers");
    if (type && strcmp(type, "Sequence") == 0 && cJSON_IsArray(list)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, list) {
            int32_t rc = tok_load_normalizer(tok, e, err);
            if (rc) return rc;
        }
        return GRPO_OK;
    }
    int form = !type                      ? -1
               : strcmp(type, "NFC") == 0 ? TOK_NORM_NFC
               : strcmp(type, "NFD") == 0 ? TOK_NORM_NFD
                                          : -1;
    if (form < 0)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "%s: normalizer '%s' is not supported (NFC, NFD, Sequence)",
                              tok->path, type ? type : "(no type)");
    if (tok->n_norm == TOK_MAX_NORMALIZERS)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "%s: more than %d normalizers", tok->path,
                              TOK_MAX_NORMALIZERS);
    tok->norm[tok->n_norm++] = form;
    return GRPO_OK;
}

pcre2_code *tok_compile_regex(grpo_tokenizer *tok, const char *pattern, uint32_t extra,
                              const char *where, grpo_error *err) {
    int code;
    PCRE2_SIZE off;
    char why[160] = "";
    char *translated = extra & PCRE2_LITERAL ? strdup(pattern)
                                             : tok_regex_translate(pattern, why, sizeof why);
    if (!translated && why[0]) {
        grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                       "%s: %s: regex /%s/: %s; expected escapes that Oniguruma (tokenizers) and "
                       "PCRE2 read alike",
                       tok->path, where, pattern, why);
        return NULL;
    }
    if (!translated) {
        grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", tok->path);
        return NULL;
    }
    uint32_t no_c = extra & PCRE2_LITERAL ? 0 : PCRE2_NEVER_BACKSLASH_C; /* \C splits UTF-8 */
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)translated, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | no_c | extra, &code, &off, NULL);
    free(translated);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                       "%s: %s: regex /%s/ does not compile in PCRE2 at "
                       "offset %zu: %s",
                       tok->path, where, pattern, (size_t)off, (char *)msg);
        return NULL;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* no JIT on this CPU: the interpreter does it */
    return re;
}

static int32_t add_pre(grpo_tokenizer *tok, tok_pre p, grpo_error *err) {
    tok_pre *v = realloc(tok->pre, (size_t)(tok->n_pre + 1) * sizeof *v);
    if (!v) {
        if (p.re) pcre2_code_free(p.re);
        return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", tok->path);
    }
    tok->pre = v;
    tok->pre[tok->n_pre++] = p;
    return GRPO_OK;
}

int32_t tok_load_pre(grpo_tokenizer *tok, const cJSON *p, grpo_error *err) {
    if (tok_json_null(p)) return GRPO_OK;
    const char *type = tok_json_type(p);
    if (!type) type = "(no type)";
    if (tok->bpe.byte_level)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "%s: pre_tokenizer '%s' after ByteLevel is not supported", tok->path,
                              type);
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "pretokenizers"), *e;
        if (!cJSON_IsArray(list))
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "%s: pre_tokenizer Sequence: expected a \"pretokenizers\" array",
                                  tok->path);
        cJSON_ArrayForEach(e, list) {
            int32_t rc = tok_load_pre(tok, e, err);
            if (rc) return rc;
        }
        return GRPO_OK;
    }
    tok_pre pre = {0};
    if (strcmp(type, "ByteLevel") == 0) {
        pre.kind = TOK_PRE_BYTELEVEL;
        pre.add_prefix_space = tok_json_bool(p, "add_prefix_space", 1);
        if (tok_json_bool(p, "use_regex", 1) &&
            !(pre.re =
                  tok_compile_regex(tok, GPT2_PATTERN, PCRE2_UCP, "pre_tokenizer ByteLevel", err)))
            return err ? err->status : GRPO_ERR_UNSUPPORTED;
        tok->bpe.byte_level = 1;
        return add_pre(tok, pre, err);
    }
    if (strcmp(type, "Split") == 0) {
        static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                      "Contiguous"};
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(p, "pattern");
        const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
        const cJSON *lit = cJSON_GetObjectItemCaseSensitive(pat, "String");
        const cJSON *beh = cJSON_GetObjectItemCaseSensitive(p, "behavior");
        pre.kind = TOK_PRE_SPLIT;
        pre.behavior = -1;
        for (int i = 0; i < 5 && cJSON_IsString(beh); i++)
            if (strcmp(beh->valuestring, names[i]) == 0) pre.behavior = i;
        if (pre.behavior < 0)
            return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                                  "%s: pre_tokenizer Split: behavior '%s' "
                                  "is not supported",
                                  tok->path, cJSON_IsString(beh) ? beh->valuestring : "?");
        if (!cJSON_IsString(re) && !cJSON_IsString(lit))
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "%s: pre_tokenizer Split: expected pattern "
                                  "{\"Regex\": ...} or {\"String\": ...}",
                                  tok->path);
        pre.invert = tok_json_bool(p, "invert", 0);
        const char *src = cJSON_IsString(re) ? re->valuestring : lit->valuestring;
        if (src[0] &&
            !(pre.re = tok_compile_regex(tok, src, cJSON_IsString(re) ? PCRE2_UCP : PCRE2_LITERAL,
                                         "pre_tokenizer Split", err)))
            return err ? err->status : GRPO_ERR_UNSUPPORTED;
        if (!src[0]) pre.behavior = TOK_SPLIT_ISOLATED, pre.invert = 0; /* empty String: no split */
        return add_pre(tok, pre, err);
    }
    return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                          "%s: pre_tokenizer '%s' is not supported (ByteLevel, Split, Sequence)",
                          tok->path, type);
}

/* TemplateProcessing's "single" template: a list of ids with -2 standing for the text. */
static int32_t load_template(grpo_tokenizer *tok, const cJSON *p, grpo_error *err) {
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(p, "single");
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(p, "special_tokens"), *e;
    if (tok->template_ids || !cJSON_IsArray(single))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "%s: post_processor: expected one "
                              "TemplateProcessing with a \"single\" list",
                              tok->path);
    cJSON_ArrayForEach(e, single) {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
        const cJSON *ids = NULL, *id;
        if (sp) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(sp, "id");
            const cJSON *def = cJSON_IsString(name)
                                   ? cJSON_GetObjectItemCaseSensitive(specials, name->valuestring)
                                   : NULL;
            ids = cJSON_GetObjectItemCaseSensitive(def, "ids");
            if (!cJSON_IsArray(ids))
                return grpo_error_set(err, GRPO_ERR_INVALID,
                                      "%s: post_processor: special token '%s' "
                                      "has no \"ids\" in special_tokens",
                                      tok->path, cJSON_IsString(name) ? name->valuestring : "?");
        } else if (!cJSON_GetObjectItemCaseSensitive(e, "Sequence")) {
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "%s: post_processor: template items must "
                                  "be SpecialToken or Sequence",
                                  tok->path);
        }
        int32_t add = ids ? cJSON_GetArraySize(ids) : 1;
        int32_t *v = realloc(tok->template_ids, (size_t)(tok->n_template + add) * sizeof *v);
        if (!v) return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", tok->path);
        tok->template_ids = v;
        if (!ids) tok->template_ids[tok->n_template++] = -2;
        cJSON_ArrayForEach(id, ids) {
            if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= tok->bpe.n_ids)
                return grpo_error_set(err, GRPO_ERR_INVALID,
                                      "%s: post_processor: special token id "
                                      "out of the vocabulary [0, %d)",
                                      tok->path, tok->bpe.n_ids);
            tok->template_ids[tok->n_template++] = id->valueint;
        }
    }
    return GRPO_OK;
}

int32_t tok_load_post(grpo_tokenizer *tok, const cJSON *p, grpo_error *err) {
    if (tok_json_null(p)) return GRPO_OK;
    const char *type = tok_json_type(p);
    if (!type) type = "(no type)";
    if (strcmp(type, "ByteLevel") == 0) return GRPO_OK; /* only moves offsets */
    if (strcmp(type, "TemplateProcessing") == 0) return load_template(tok, p, err);
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(p, "processors")) {
            int32_t rc = tok_load_post(tok, e, err);
            if (rc) return rc;
        }
        return GRPO_OK;
    }
    return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                          "%s: post_processor '%s' is not supported "
                          "(ByteLevel, TemplateProcessing, Sequence)",
                          tok->path, type);
}

int32_t tok_load_decoder(grpo_tokenizer *tok, const cJSON *d, grpo_error *err) {
    if (tok_json_null(d)) return GRPO_OK;
    const char *type = tok_json_type(d);
    if (!type) type = "(no type)";
    if (strcmp(type, "ByteLevel") == 0) {
        tok->decoder_byte_level = 1;
        return GRPO_OK;
    }
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(d, "decoders")) {
            int32_t rc = tok_load_decoder(tok, e, err);
            if (rc) return rc;
        }
        return GRPO_OK;
    }
    return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                          "%s: decoder '%s' is not supported (ByteLevel only)", tok->path, type);
}
