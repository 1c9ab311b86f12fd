/*
 * tokenizer.c — loading a Hugging Face tokenizer.json (+ tokenizer_config.json), the encode entry
 * point with the post-processor template, the accessors and the host services for plugins.
 * The top layer of the tokenizer: the files below it, and their order, are listed in
 * tok_internal.h.
 */
#include "text/tokenizer/tok_internal.h"
#include "text/testing.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/files.h"

/* Ids are below this bound (2^30), so V = 1 + the largest id fits int32 with room to spare. */
#define TOK_MAX_ID (1 << 30)

/* ---- small helpers --------------------------------------------------------------------------- */
static char *xstrndup(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n), d[n] = 0;
    return d;
}

/* ---- model: BPE ------------------------------------------------------------------------------ */
static int32_t set_token(grpo_tokenizer *tok, int32_t id, const char *s, grpo_error *err) {
    tok_bpe *m = &tok->bpe;
    if (id < 0 || id >= m->n_ids)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: model.vocab: id %d of '%s' out of range",
                              tok->path, id, s);
    if (m->token[id]) /* the vocab map borrows the first spelling: a second one is an error */
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: model.vocab: id %d is given to both '%s' "
                              "and '%s'",
                              tok->path, id, m->token[id], s);
    m->token_len[id] = (uint32_t)strlen(s);
    if (!(m->token[id] = xstrndup(s, m->token_len[id])))
        return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", tok->path);
    return GRPO_OK;
}

static int32_t vocab_id(const tok_bpe *m, const char *s, size_t n) {
    return tok_strmap_get(&m->vocab, s, (uint32_t)n);
}

/* One merge, given as "a b" or ["a", "b"], into the merge map with rank r. */
static int32_t load_merge(grpo_tokenizer *tok, const cJSON *mj, int32_t r, grpo_error *err) {
    tok_bpe *m = &tok->bpe;
    const char *a, *b;
    size_t na, nb;
    if (cJSON_IsString(mj)) {
        const char *sp = strchr(mj->valuestring, ' ');
        if (!sp || strchr(sp + 1, ' '))
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "%s: model.merges[%d] = \"%s\": expected two tokens separated "
                                  "by one space",
                                  tok->path, r, mj->valuestring);
        a = mj->valuestring, na = (size_t)(sp - a), b = sp + 1, nb = strlen(b);
    } else if (cJSON_IsArray(mj) && cJSON_GetArraySize(mj) == 2 &&
               cJSON_IsString(cJSON_GetArrayItem(mj, 0)) &&
               cJSON_IsString(cJSON_GetArrayItem(mj, 1))) {
        a = cJSON_GetArrayItem(mj, 0)->valuestring, na = strlen(a);
        b = cJSON_GetArrayItem(mj, 1)->valuestring, nb = strlen(b);
    } else {
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: model.merges[%d]: expected \"a b\" or [\"a\", \"b\"]", tok->path,
                              r);
    }
    char *ab = malloc(na + nb + 1);
    if (!ab) return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", tok->path);
    memcpy(ab, a, na), memcpy(ab + na, b, nb), ab[na + nb] = 0;
    int32_t ia = vocab_id(m, a, na), ib = vocab_id(m, b, nb), iab = vocab_id(m, ab, na + nb);
    int32_t rc = GRPO_OK;
    if (ia < 0 || ib < 0 || iab < 0)
        rc = grpo_error_set(err, GRPO_ERR_INVALID,
                            "%s: model.merges[%d]: '%.*s' is not in the vocab", tok->path, r,
                            ia < 0   ? (int)na
                            : ib < 0 ? (int)nb
                                     : (int)(na + nb),
                            ia < 0   ? a
                            : ib < 0 ? b
                                     : ab);
    else if (tok_merge_put(m, ia, ib, r, iab) != 0)
        rc = grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", tok->path);
    free(ab);
    return rc;
}

/* Reads model (vocab, merges, options); n_ids covers the vocab and the added tokens. */
static int32_t load_model(grpo_tokenizer *tok, const cJSON *model, int32_t max_added_id,
                          grpo_error *err) {
    tok_bpe *m = &tok->bpe;
    const char *type = tok_json_type(model);
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsObject(model))
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: no \"model\" object", tok->path);
    if (type ? strcmp(type, "BPE") != 0 : !merges)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "%s: model type '%s' is not supported (only BPE)", tok->path,
                              type ? type : "(none)");
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges))
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: model: expected \"vocab\" object and \"merges\" array",
                              tok->path);
    if (!vocab->child) /* every text would encode to nothing */
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: model.vocab is empty; expected the "
                              "tokens of the model", tok->path);
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (!tok_json_null(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0.0))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "%s: model.dropout is not supported (must be null)", tok->path);
    const char *affix[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(model, affix[i]);
        if (!tok_json_null(v) && !(cJSON_IsString(v) && v->valuestring[0] == 0))
            return grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "%s: model.%s is not supported",
                                  tok->path, affix[i]);
    }
    int32_t max_id = max_added_id;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= TOK_MAX_ID)
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "%s: model.vocab['%s']: expected a non-negative integer id",
                                  tok->path, e->string);
        if (e->valueint > max_id) max_id = e->valueint;
    }
    /* ids are (nearly) dense in every real tokenizer; a stray huge id would size the id table */
    if ((int64_t)max_id > 4 * (int64_t)cJSON_GetArraySize(vocab) + 1024)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: model.vocab: highest id %d for %d tokens; expected ids "
                              "numbered densely from 0",
                              tok->path, max_id, cJSON_GetArraySize(vocab));
    m->n_ids = max_id + 1;
    m->token = calloc((size_t)m->n_ids, sizeof *m->token);
    m->token_len = calloc((size_t)m->n_ids, sizeof *m->token_len);
    if (!m->token || !m->token_len)
        return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", tok->path);
    cJSON_ArrayForEach(e, vocab) {
        int32_t rc = set_token(tok, e->valueint, e->string, err);
        if (rc) return rc;
        if (tok_strmap_put(&m->vocab, m->token[e->valueint], m->token_len[e->valueint],
                           e->valueint))
            return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", tok->path);
    }
    int32_t r = 0;
    cJSON_ArrayForEach(e, merges) {
        int32_t rc = load_merge(tok, e, r++, err);
        if (rc) return rc;
    }
    m->ignore_merges = tok_json_bool(model, "ignore_merges", 0);
    m->fuse_unk = tok_json_bool(model, "fuse_unk", 0);
    m->byte_fallback = tok_json_bool(model, "byte_fallback", 0);
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    m->unk_id = cJSON_IsString(unk) ? vocab_id(m, unk->valuestring, strlen(unk->valuestring)) : -1;
    if (cJSON_IsString(unk) && m->unk_id < 0)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: model.unk_token '%s' is not in the vocab",
                              tok->path, unk->valuestring);
    return GRPO_OK;
}

/* ---- added tokens ---------------------------------------------------------------------------- */
/* The largest id among the added tokens (ids out of range are reported by load_added). */
static int32_t max_added_id(const cJSON *added) {
    int32_t mx = -1;
    const cJSON *a;
    cJSON_ArrayForEach(a, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(a, "id");
        if (cJSON_IsNumber(id) && id->valuedouble < TOK_MAX_ID && id->valueint > mx)
            mx = id->valueint;
    }
    return mx;
}

static int32_t load_added(grpo_tokenizer *tok, const cJSON *added, grpo_error *err) {
    int32_t n = cJSON_GetArraySize(added);
    tok->added = calloc((size_t)(n ? n : 1), sizeof *tok->added);
    tok->added_of_id = malloc((size_t)tok->bpe.n_ids * sizeof *tok->added_of_id);
    if (!tok->added || !tok->added_of_id)
        return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", tok->path);
    for (int32_t i = 0; i < tok->bpe.n_ids; i++) tok->added_of_id[i] = -1;
    const cJSON *a;
    cJSON_ArrayForEach(a, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(a, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(a, "content");
        int32_t k = tok->n_added;
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= TOK_MAX_ID ||
            !cJSON_IsString(content) || !content->valuestring[0])
            return grpo_error_set(
                err, GRPO_ERR_INVALID,
                "%s: added_tokens[%d]: expected \"id\" in [0, %d) and a non-empty "
                "\"content\"",
                tok->path, k, TOK_MAX_ID);
        tok_added *t = &tok->added[tok->n_added++];
        t->len = (uint32_t)strlen(content->valuestring);
        if (!(t->content = xstrndup(content->valuestring, t->len)))
            return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", tok->path);
        t->id = id->valueint;
        t->special = (uint8_t)tok_json_bool(a, "special", 0);
        t->lstrip = (uint8_t)tok_json_bool(a, "lstrip", 0);
        t->rstrip = (uint8_t)tok_json_bool(a, "rstrip", 0);
        t->single_word = (uint8_t)tok_json_bool(a, "single_word", 0);
        t->normalized = (uint8_t)tok_json_bool(a, "normalized", !t->special);
        tok->added_of_id[t->id] = k;
        if (tok_strmap_put(&tok->added_by_content, t->content, t->len, k))
            return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", tok->path);
    }
    return GRPO_OK;
}

static int cmp_added_len_desc(const void *pa, const void *pb, void *ctx) {
    const tok_added *added = ctx;
    const tok_added *a = &added[*(const int32_t *)pa], *b = &added[*(const int32_t *)pb];
    if (a->pattern_len != b->pattern_len) return a->pattern_len > b->pattern_len ? -1 : 1;
    return *(const int32_t *)pa - *(const int32_t *)pb;
}

/* Builds the first-byte index of the added tokens whose normalized flag equals normalized. */
static int build_added_set(grpo_tokenizer *tok, tok_added_set *set, int normalized) {
    static const int32_t none = -1;
    set->only_first = -1;
    for (int c = 0; c < 256; c++) {
        int32_t cnt = 0;
        for (int32_t k = 0; k < tok->n_added; k++)
            cnt += tok->added[k].normalized == normalized &&
                   (unsigned char)tok->added[k].pattern[0] == c;
        if (!cnt) {
            set->by_first[c] = (int32_t *)&none;
            continue;
        }
        int32_t *v = malloc((size_t)(cnt + 1) * sizeof *v), j = 0;
        if (!v) return -1;
        for (int32_t k = 0; k < tok->n_added; k++)
            if (tok->added[k].normalized == normalized &&
                (unsigned char)tok->added[k].pattern[0] == c)
                v[j++] = k;
        qsort_r(v, (size_t)cnt, sizeof *v, cmp_added_len_desc, tok->added);
        v[cnt] = -1;
        set->by_first[c] = v;
        set->first[c] = 1;
        set->only_first = set->only_first == -1 ? c : -2;
    }
    if (set->only_first < 0) set->only_first = -1;
    return 0;
}

static void free_added_set(tok_added_set *set) {
    for (int c = 0; c < 256; c++)
        if (set->first[c]) free(set->by_first[c]);
}

/* ---- added tokens as matched (after the normalizers) ----------------------------------------- */
/* The text an added token is matched as: normalized tokens go through the normalizers too. */
static int32_t set_added_patterns(grpo_tokenizer *tok, grpo_error *err) {
    for (int32_t k = 0; k < tok->n_added; k++) {
        tok_added *a = &tok->added[k];
        a->pattern = a->content, a->pattern_len = a->len;
        for (int i = 0; a->normalized && i < tok->n_norm; i++) {
            char *out;
            size_t n;
            if (tok_normalize(tok->norm[i], a->pattern, a->pattern_len, &out, &n))
                return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", tok->path);
            if (!out) continue;
            if (a->pattern != a->content) free(a->pattern);
            a->pattern = out, a->pattern_len = (uint32_t)n;
        }
    }
    return GRPO_OK;
}

/* ---- tokenizer_config.json ------------------------------------------------------------------- */
static int32_t config_token_id(const grpo_tokenizer *tok, const cJSON *cfg, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
    return cJSON_IsString(v) ? grpo_tokenizer_token_to_id(tok, v->valuestring) : -1;
}

/* bos/eos/pad and the chat template from dir/tokenizer_config.json and dir/chat_template.jinja;
 * both files are optional. */
static int32_t load_config(grpo_tokenizer *tok, const char *dir, grpo_error *err) {
    char path[4096 + 32]; /* dir is at most 4095 bytes */
    size_t len;
    tok->bos_id = tok->eos_id = tok->pad_id = -1;
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    struct stat st;
    int32_t rc = stat(path, &st) == 0 ? grpo_read_file(path, &tok->chat_template, &len, err)
                                      : GRPO_OK;
    if (rc) return rc;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (stat(path, &st) != 0) return GRPO_OK;
    char *text = NULL;
    if ((rc = grpo_read_file(path, &text, &len, err)) != GRPO_OK) return rc;
    cJSON *cfg = cJSON_ParseWithLengthOpts(text, len + 1, NULL, 1); /* len + its NUL */
    free(text);
    if (!cJSON_IsObject(cfg)) {
        cJSON_Delete(cfg);
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: not a JSON object", path);
    }
    tok->bos_id = config_token_id(tok, cfg, "bos_token");
    tok->eos_id = config_token_id(tok, cfg, "eos_token");
    tok->pad_id = config_token_id(tok, cfg, "pad_token");
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template"), *e;
    if (cJSON_IsArray(ct)) /* [{"name": ..., "template": ...}]: the "default" one */
        cJSON_ArrayForEach(e, ct) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
            if (cJSON_IsString(name) && strcmp(name->valuestring, "default") == 0)
                ct = cJSON_GetObjectItemCaseSensitive(e, "template");
        }
    if (!tok->chat_template && cJSON_IsString(ct) &&
        !(tok->chat_template = strdup(ct->valuestring))) {
        cJSON_Delete(cfg);
        return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", path);
    }
    cJSON_Delete(cfg);
    return GRPO_OK;
}

/* ---- load / free ----------------------------------------------------------------------------- */
static int32_t load_json(grpo_tokenizer *tok, const cJSON *root, grpo_error *err) {
    if (!cJSON_IsObject(root))
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: not a JSON object", tok->path);
    const char *strict[] = {"truncation", "padding"};
    for (int i = 0; i < 2; i++)
        if (!tok_json_null(cJSON_GetObjectItemCaseSensitive(root, strict[i])))
            return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                                  "%s: \"%s\" is not supported (must be null)", tok->path,
                                  strict[i]);
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!tok_json_null(added) && !cJSON_IsArray(added))
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: \"added_tokens\" must be a list",
                              tok->path);
    int32_t rc;
    if ((rc = load_model(tok, cJSON_GetObjectItemCaseSensitive(root, "model"), max_added_id(added),
                         err)) ||
        (rc = load_added(tok, added, err)) ||
        (rc =
             tok_load_normalizer(tok, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), err)) ||
        (rc = set_added_patterns(tok, err)) ||
        (rc = tok_load_pre(tok, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), err)) ||
        (rc = tok_load_post(tok, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), err)) ||
        (rc = tok_load_decoder(tok, cJSON_GetObjectItemCaseSensitive(root, "decoder"), err)))
        return rc;
    if (build_added_set(tok, &tok->raw_set, 0) || build_added_set(tok, &tok->norm_set, 1))
        return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", tok->path);
    for (int32_t k = 0; k < tok->n_added; k++)
        if (tok->added[k].single_word && !tok->re_word_start &&
            !(tok->re_word_start = tok_compile_regex(
                  tok, TOK_WORD_CHAR_CLASS, PCRE2_UCP | PCRE2_ANCHORED, "single_word", err)))
            return err ? err->status : GRPO_ERR_INTERNAL;
    for (int b = 0; b < 256; b++) {
        char s[3];
        uint16_t cp = tok_byte_to_cp[b];
        size_t n = cp < 0x80
                       ? (s[0] = (char)cp, 1)
                       : (s[0] = (char)(0xC0 | (cp >> 6)), s[1] = (char)(0x80 | (cp & 0x3F)), 2);
        tok->bpe.byte_id[b] = vocab_id(&tok->bpe, s, n);
    }
    if (tok_bpe_init_cache(&tok->bpe))
        return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", tok->path);
    return GRPO_OK;
}

int32_t grpo_tokenizer_load(const char *path_or_dir, grpo_tokenizer **out, grpo_error *err) {
    *out = NULL;
    struct stat st;
    char path[4096], dir[4096];
    if (stat(path_or_dir, &st) != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot open: %s", path_or_dir,
                              strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        snprintf(dir, sizeof dir, "%s", path_or_dir);
        snprintf(path, sizeof path, "%s/tokenizer.json", path_or_dir);
    } else {
        snprintf(path, sizeof path, "%s", path_or_dir);
        snprintf(dir, sizeof dir, "%s", path_or_dir);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0;
        else
            snprintf(dir, sizeof dir, ".");
    }
    grpo_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok || !(tok->path = strdup(path))) {
        free(tok);
        return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t len;
    char *text = NULL;
    int32_t rc = grpo_read_file(path, &text, &len, err);
    if (rc) {
        grpo_tokenizer_free(tok);
        return rc;
    }
    /* tokens are text: invalid UTF-8 (which Hugging Face cannot read either) is refused here,
     * so the decoders may take every token's bytes for valid UTF-8 */
    size_t bad = tok_utf8_invalid_at(text, len);
    /* one JSON value and nothing after it: trailing text is a damaged or concatenated file */
    cJSON *root = bad < len ? NULL : cJSON_ParseWithLengthOpts(text, len + 1, NULL, 1);
    if (bad < len) {
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: invalid UTF-8 at byte %zu; expected a "
                            "UTF-8 JSON file", path, bad);
    } else if (!root) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= text && at <= text + len ? (size_t)(at - text) : len;
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: malformed JSON (or text after it) near byte %zu", path, off);
    } else {
        rc = load_json(tok, root, err);
        if (rc == GRPO_OK) rc = load_config(tok, dir, err);
    }
    cJSON_Delete(root);
    free(text);
    if (rc) {
        grpo_tokenizer_free(tok);
        return rc;
    }
    *out = tok;
    return GRPO_OK;
}

void grpo_tokenizer_free(grpo_tokenizer *tok) {
    if (!tok) return;
    tok_bpe_free(&tok->bpe);
    for (int32_t k = 0; k < tok->n_added; k++) {
        if (tok->added[k].pattern != tok->added[k].content) free(tok->added[k].pattern);
        free(tok->added[k].content);
    }
    free(tok->added);
    free(tok->added_of_id);
    tok_strmap_free(&tok->added_by_content);
    free_added_set(&tok->raw_set);
    free_added_set(&tok->norm_set);
    if (tok->re_word_start) pcre2_code_free(tok->re_word_start);
    for (int i = 0; i < tok->n_pre; i++)
        if (tok->pre[i].re) pcre2_code_free(tok->pre[i].re);
    free(tok->pre);
    free(tok->template_ids);
    free(tok->chat_template);
    free(tok->path);
    free(tok);
}

/* ---- encode ---------------------------------------------------------------------------------- */
int32_t grpo_tokenizer_encode(const grpo_tokenizer *tok, const char *text, size_t len,
                              int add_special, grpo_tok_ids *out, grpo_error *err) {
    char *fixed = NULL;
    int valid;
    size_t fixed_len = tok_utf8_lossy_len(text, len, &valid);
    if (!valid) { /* invalid UTF-8: U+FFFD first */
        if (!(fixed = malloc(fixed_len ? fixed_len : 1)))
            return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", tok->path);
        tok_utf8_lossy(fixed, text, len);
        text = fixed, len = fixed_len;
    }
    int rc = 0;
    if (add_special && tok->n_template) {
        for (int i = 0; i < tok->n_template && rc == 0; i++)
            rc = tok->template_ids[i] == -2 ? tok_encode_text(tok, text, len, out)
                                            : tok_ids_push(out, tok->template_ids[i]);
    } else {
        rc = tok_encode_text(tok, text, len, out);
    }
    free(fixed);
    if (rc == -2)
        return grpo_error_set(err, GRPO_ERR_INTERNAL, "%s: PCRE2 match failed", tok->path);
    if (rc)
        return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory encoding %zu bytes",
                              tok->path, len);
    return GRPO_OK;
}

/* ---- accessors ------------------------------------------------------------------------------- */
int32_t grpo_tokenizer_token_to_id(const grpo_tokenizer *tok, const char *token) {
    uint32_t n = (uint32_t)strlen(token);
    int32_t k = tok_strmap_get(&tok->added_by_content, token, n);
    return k >= 0 ? tok->added[k].id : vocab_id(&tok->bpe, token, n);
}

const char *grpo_tokenizer_id_to_token(const grpo_tokenizer *tok, int32_t id) {
    size_t len;
    return tok_id_text(tok, id, &len);
}

int grpo_tokenizer_is_special(const grpo_tokenizer *tok, int32_t id) {
    return tok_id_special(tok, id);
}

int32_t grpo_tokenizer_vocab_size(const grpo_tokenizer *tok) { return tok->bpe.n_ids; }
int32_t grpo_tokenizer_bos_id(const grpo_tokenizer *tok) { return tok->bos_id; }
int32_t grpo_tokenizer_eos_id(const grpo_tokenizer *tok) { return tok->eos_id; }
int32_t grpo_tokenizer_pad_id(const grpo_tokenizer *tok) { return tok->pad_id; }
const char *grpo_tokenizer_chat_template(const grpo_tokenizer *tok) { return tok->chat_template; }

/* ---- host services --------------------------------------------------------------------------- */
/* These two go into grpo_host.tokenize / .detokenize: their types must stay those of the table. */
#if defined(__GNUC__)
_Static_assert(__builtin_types_compatible_p(__typeof__(&grpo_host_tokenize),
                                            __typeof__(((grpo_host *)0)->tokenize)),
               "grpo_host_tokenize does not match grpo_host.tokenize (grpo/plugin.h)");
_Static_assert(__builtin_types_compatible_p(__typeof__(&grpo_host_detokenize),
                                            __typeof__(((grpo_host *)0)->detokenize)),
               "grpo_host_detokenize does not match grpo_host.detokenize (grpo/plugin.h)");
#endif

int32_t grpo_host_tokenize(const struct grpo_tokenizer *tok, const char *text, int32_t *ids,
                           int32_t cap, grpo_error *err) {
    if (!tok || !text || cap < 0 || (cap > 0 && !ids))
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "tokenize: NULL tokenizer/text/ids or cap < 0");
    grpo_tok_ids v = {0};
    int32_t rc = grpo_tokenizer_encode(tok, text, strlen(text), 0, &v, err);
    if (rc == GRPO_OK && v.n > INT32_MAX)
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "tokenize: %zu ids do not fit in int32", v.n);
    if (rc == GRPO_OK) {
        memcpy(ids, v.data, (v.n < (size_t)cap ? v.n : (size_t)cap) * sizeof *ids);
        rc = (int32_t)v.n;
    }
    grpo_tok_ids_free(&v);
    return rc;
}

int32_t grpo_host_detokenize(const struct grpo_tokenizer *tok, const int32_t *ids, int32_t n,
                             char *out, int32_t cap, grpo_error *err) {
    if (!tok || n < 0 || (n > 0 && !ids) || cap < 0 || (cap > 0 && !out))
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "detokenize: NULL tokenizer/ids/out or n, cap < 0");
    grpo_tok_text t = {0};
    int32_t rc = grpo_tokenizer_decode(tok, ids, (size_t)n, 0, &t, err);
    if (rc == GRPO_OK && t.n > INT32_MAX)
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "detokenize: text too long for int32");
    if (rc == GRPO_OK) {
        if (cap > 0) {
            size_t k = t.n < (size_t)cap - 1 ? t.n : (size_t)cap - 1;
            memcpy(out, t.data, k);
            out[k] = 0;
        }
        rc = (int32_t)t.n;
    }
    grpo_tok_text_free(&t);
    return rc;
}
