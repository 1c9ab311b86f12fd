/*
 * host_model.c — the frozen-model host services of ABI 1.1 (see host_model.h, grpo/plugin.h).
 *
 * Dimension letters: B rows, T time, C hidden size.
 */
#include "host/host_model.h"
#include "host/testing.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "text/chat_template.h"
#include "kernels.h"
#include "host/model_instance.h"
#include "host/registry.h"
#include "text/tokenizer/tokenizer.h"
#include "base/nomem.h"

struct grpo_host_models {
    const grpo_ops *ops;
    grpo_ops *own_ops; /* opened here (closed with the context), or NULL */
    grpo_registry reg;
    pthread_mutex_t lock; /* registry loads happen under it */
};

typedef struct grpo_host_model grpo_host_model;

struct grpo_host_model {
    grpo_model *m;
    grpo_tokenizer *tok;     /* NULL when the directory has no tokenizer.json */
    grpo_chat_template *tpl; /* the model's own template, or ChatML */
    char *arch;              /* config.json "architectures"[0] */
    int32_t C;               /* hidden size, 0 when the plugin has no hidden-states slot */
    /* backend buffers of the last model_hidden batch size */
    uint64_t cap_tokens, cap_scratch; /* B*T tokens and scratch floats they hold */
    int32_t *d_ids, *d_mask, *d_pos;  /* (B,T) */
    float *d_out;                     /* (B,T,C) */
    float *d_scratch;
};

/* ---- contexts ------------------------------------------------------------------------- */

int grpo_host_models_open(grpo_host_models **out, const grpo_ops *ops, char *const *plugin_dirs,
                          grpo_error *err) {
    *out = NULL;
    grpo_host_models *c = calloc(1, sizeof *c);
    if (!c) return grpo_error_set(err, GRPO_ERR_NOMEM, "host models: out of memory");
    pthread_mutex_init(&c->lock, NULL);
    c->ops = ops;
    if (!ops) {
        c->own_ops = grpo_backend_open("cpu", 0, err);
        if (!c->own_ops) {
            grpo_host_models_close(c);
            return err ? err->status : GRPO_ERR_INTERNAL;
        }
        c->ops = c->own_ops;
    }
    char **dflt = plugin_dirs ? NULL : grpo_plugin_path(NULL, 0);
    int rc = grpo_registry_scan(&c->reg, plugin_dirs ? plugin_dirs : dflt, err);
    grpo_plugin_path_free(dflt);
    if (rc != GRPO_OK) {
        grpo_host_models_close(c);
        return rc;
    }
    *out = c;
    return GRPO_OK;
}

const grpo_ops *grpo_host_models_ops(const grpo_host_models *ctx) { return ctx->ops; }

void grpo_host_models_close(grpo_host_models *c) {
    if (!c) return;
    grpo_registry_free(&c->reg);
    grpo_backend_close(c->own_ops);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* ---- loading -------------------------------------------------------------------------- */

/* A model plugin may have filled err (the caller's buffer) without its NUL: supply it before the
 * caller reads it. Returns rc. */
static int32_t sealed(int32_t rc, grpo_error *err) {
    if (rc != GRPO_OK && err) grpo_plugin_message(err);
    return rc;
}


/* config.json "architectures"[0] (malloc'd) or NULL. */
static char *first_architecture(const char *json) {
    cJSON *o = cJSON_Parse(json);
    const cJSON *a = o ? cJSON_GetObjectItemCaseSensitive(o, "architectures") : NULL;
    const cJSON *f = cJSON_IsArray(a) ? cJSON_GetArrayItem(a, 0) : NULL;
    char *s = cJSON_IsString(f) ? strdup(f->valuestring) : NULL;
    cJSON_Delete(o);
    return s;
}

/* The tokenizer and chat template of dir, when it has a tokenizer.json. */
static int load_text_side(grpo_host_model *hm, const char *dir, grpo_error *err) {
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    int rc = GRPO_OK;
    const char *text = NULL;
    if (stat(path, &sb) == 0) {
        rc = grpo_tokenizer_load(dir, &hm->tok, err);
        if (rc == GRPO_OK) text = grpo_tokenizer_chat_template(hm->tok);
    }
    if (rc == GRPO_OK)
        rc = grpo_chat_template_compile(text ? text : grpo_chat_template_chatml(),
                                        text ? path : "ChatML", &hm->tpl, err);
    return rc;
}

int32_t grpo_hm_load(const grpo_host *host, const char *dir, grpo_host_model **out,
                          grpo_error *err) {
    *out = NULL;
    if (!host || !dir)
        return grpo_error_set(err, GRPO_ERR_INVALID, "model_load: host and dir are required");
    grpo_host_models *c = host->model_ctx;
    if (!c)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "model_load: %s: this command offers no model services to plugins "
                              "(its host table has no model context)",
                              dir);
    grpo_host_model *hm = calloc(1, sizeof *hm);
    if (!hm) return grpo_error_set(err, GRPO_ERR_NOMEM, "model_load: out of memory");
    grpo_host h = *host;
    h.ops = c->ops;
    pthread_mutex_lock(&c->lock);
    int rc = sealed(grpo_model_open_dir(&hm->m, &c->reg, &h, dir, 0, err), err);
    pthread_mutex_unlock(&c->lock);
    if (rc == GRPO_OK && !(hm->arch = first_architecture(hm->m->config_json)))
        rc = grpo_error_set(err, GRPO_ERR_NOMEM, "model_load: out of memory");
    if (rc == GRPO_OK) rc = load_text_side(hm, dir, err);
    if (rc != GRPO_OK) {
        grpo_hm_free(hm);
        return rc;
    }
    const grpo_model_desc *d = hm->m->desc;
    if (GRPO_HAS_FIELD(d, grpo_model_desc, hidden) && d->hidden_size && d->hidden)
        hm->C = d->hidden_size(hm->m->inst);
    *out = hm;
    return GRPO_OK;
}

static void free_buffers(grpo_host_model *hm) {
    const grpo_ops *o = hm->m->ops;
    void *b[] = {hm->d_ids, hm->d_mask, hm->d_pos, hm->d_out, hm->d_scratch};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
        if (b[i]) o->free(o->ctx, b[i]);
    hm->d_ids = hm->d_mask = hm->d_pos = NULL, hm->d_out = hm->d_scratch = NULL;
    hm->cap_tokens = hm->cap_scratch = 0;
}

void grpo_hm_free(grpo_host_model *hm) {
    if (!hm) return;
    if (hm->m) free_buffers(hm);
    grpo_model_close(hm->m);
    grpo_tokenizer_free(hm->tok);
    grpo_chat_template_free(hm->tpl);
    free(hm->arch);
    free(hm);
}

int32_t grpo_hm_info(const grpo_host_model *hm, grpo_host_model_info *out) {
    grpo_host_model_info i = {0};
    i.struct_size = sizeof i;
    i.hidden_size = hm->C;
    i.vocab_size = grpo_model_vocab(hm->m);
    i.has_tokenizer = hm->tok != NULL;
    i.bos_id = hm->tok ? grpo_tokenizer_bos_id(hm->tok) : -1;
    i.eos_id = hm->tok ? grpo_tokenizer_eos_id(hm->tok) : -1;
    i.pad_id = hm->tok ? grpo_tokenizer_pad_id(hm->tok) : -1;
    i.architecture = hm->arch;
    i.config_json = hm->m->config_json;
    i.dir = hm->m->dir;
    uint32_t n = out->struct_size < sizeof i ? out->struct_size : (uint32_t)sizeof i;
    memcpy(out, &i, n);
    out->struct_size = n;
    return GRPO_OK;
}

/* ---- hidden states -------------------------------------------------------------------- */

/* Makes the backend buffers hold a (B,T) batch. */
static int reserve(grpo_host_model *hm, int32_t B, int32_t T, grpo_error *err) {
    const grpo_ops *o = hm->m->ops;
    uint64_t N = (uint64_t)B * T, ns = hm->m->desc->scratch_floats(hm->m->inst, B, T);
    if (N <= hm->cap_tokens && ns <= hm->cap_scratch) return GRPO_OK;
    free_buffers(hm);
    hm->d_ids = o->alloc(o->ctx, N * sizeof(int32_t));
    hm->d_mask = o->alloc(o->ctx, N * sizeof(int32_t));
    hm->d_pos = o->alloc(o->ctx, N * sizeof(int32_t));
    hm->d_out = o->alloc(o->ctx, N * hm->C * sizeof(float));
    hm->d_scratch = o->alloc(o->ctx, ns * sizeof(float));
    if (!hm->d_ids || !hm->d_mask || !hm->d_pos || !hm->d_out || !hm->d_scratch) {
        free_buffers(hm);
        return grpo_error_set(err, GRPO_ERR_NOMEM,
                              "model_hidden %s: cannot allocate buffers for (%d,%d) tokens",
                              hm->m->dir, B, T);
    }
    hm->cap_tokens = N, hm->cap_scratch = ns;
    return GRPO_OK;
}

/* Checks the batch; fills pos (B,T) = cumsum(mask) - 1, 0 at padding. */
static int check_batch(const grpo_host_model *hm, const int32_t *ids, const int32_t *mask,
                       int32_t B, int32_t T, const int32_t *at, int32_t *pos, grpo_error *err) {
    int32_t V = grpo_model_vocab(hm->m);
    for (int32_t b = 0; b < B; b++) {
        int32_t p = 0;
        for (int32_t t = 0; t < T; t++) {
            size_t i = (size_t)b * T + t;
            if (mask[i] && (ids[i] < 0 || ids[i] >= V))
                return grpo_error_set(err, GRPO_ERR_INVALID,
                                      "model_hidden %s: row %d column %d: token id %d outside "
                                      "the vocabulary [0,%d)", hm->m->dir, b, t, ids[i], V);
            pos[i] = mask[i] ? p++ : 0;
        }
        if (at && (at[b] < 0 || at[b] >= T || !mask[(size_t)b * T + at[b]]))
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "model_hidden %s: at[%d] = %d is not a real token of the row "
                                  "(expected 0 <= at < %d with mask 1)", hm->m->dir, b, at[b], T);
    }
    return GRPO_OK;
}

int32_t grpo_hm_hidden(grpo_host_model *hm, const int32_t *ids, const int32_t *mask,
                            int32_t B, int32_t T, const int32_t *at, float *out,
                            grpo_error *err) {
    if (!hm->C)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "model_hidden: model plugin %s has no hidden-states slot",
                              hm->m->desc->id);
    if (B <= 0 || T <= 0)
        return grpo_error_set(err, GRPO_ERR_INVALID, "model_hidden: empty batch (%d,%d)", B, T);
    const grpo_ops *o = hm->m->ops;
    uint64_t N = (uint64_t)B * T, C = (uint64_t)hm->C;
    int32_t *pos = malloc(N * sizeof(int32_t));
    float *all = at ? malloc(N * C * sizeof(float)) : out;
    int rc = pos && all ? check_batch(hm, ids, mask, B, T, at, pos, err)
                        : grpo_nomem(err, "model_hidden's (B,T,C) states",
                                     N * (C * (at != NULL) + 1) * sizeof(float));
    if (rc == GRPO_OK) rc = reserve(hm, B, T, err);
    if (rc == GRPO_OK) {
        o->upload(o->ctx, hm->d_ids, ids, N * sizeof(int32_t));
        o->upload(o->ctx, hm->d_mask, mask, N * sizeof(int32_t));
        o->upload(o->ctx, hm->d_pos, pos, N * sizeof(int32_t));
        grpo_batch batch = {sizeof batch, B, T, hm->d_ids, hm->d_mask, hm->d_pos, NULL, 0.0f, 0};
        grpo_plugin_call_begin(hm->m->desc->id, NULL, "model_hidden");
        rc = sealed(hm->m->desc->hidden(hm->m->inst, &batch, hm->d_scratch, hm->d_out, err), err);
        grpo_plugin_call_end();
    }
    if (rc == GRPO_OK) o->download(o->ctx, all, hm->d_out, N * C * sizeof(float));
    for (int32_t b = 0; rc == GRPO_OK && at && b < B; b++)
        memcpy(out + (size_t)b * C, all + ((size_t)b * T + at[b]) * C, C * sizeof(float));
    free(pos);
    if (at) free(all);
    return rc;
}

int32_t grpo_hm_tensor(grpo_host_model *hm, const char *name, float *out, uint64_t n,
                            grpo_error *err) {
    int i = grpo_model_param_index(hm->m, name);
    if (i < 0)
        return grpo_error_set(err, GRPO_ERR_INVALID, "model_tensor: %s (model %s) has no tensor %s",
                              hm->m->dir, hm->m->desc->id, name);
    if (hm->m->numel[i] != n)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "model_tensor: %s: %s has %llu elements, the caller expected %llu",
                              hm->m->dir, name, (unsigned long long)hm->m->numel[i],
                              (unsigned long long)n);
    int32_t rc = sealed(grpo_model_read_param(hm->m, (uint32_t)i, out, err), err);
    if (rc != GRPO_OK) return rc;
    if (GRPO_HAS_FIELD(hm->m->desc, grpo_model_desc, relayout) && hm->m->desc->relayout)
        return sealed(hm->m->desc->relayout(hm->m->inst, (uint32_t)i, out, GRPO_RELAYOUT_SAVE,
                                            err), err);
    return GRPO_OK;
}

/* ---- text ----------------------------------------------------------------------------- */

int32_t grpo_hm_encode(grpo_host_model *hm, const char *text, int32_t add_special,
                            int32_t *ids, int32_t cap, grpo_error *err) {
    if (!hm->tok)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "model_encode: %s has no tokenizer.json",
                              hm->m->dir);
    grpo_tok_ids v = {0};
    int32_t rc = grpo_tokenizer_encode(hm->tok, text, strlen(text), add_special != 0, &v, err);
    if (rc == GRPO_OK && v.n > INT32_MAX)
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "model_encode: text too long");
    if (rc == GRPO_OK) {
        size_t k = v.n < (size_t)(cap > 0 ? cap : 0) ? v.n : (size_t)(cap > 0 ? cap : 0);
        if (k) memcpy(ids, v.data, k * sizeof(int32_t));
        rc = (int32_t)v.n;
    }
    grpo_tok_ids_free(&v);
    return rc;
}

int32_t grpo_hm_render(grpo_host_model *hm, const struct grpo_message *messages, uint32_t n,
                            int32_t add_generation_prompt, char *out, int32_t cap,
                            grpo_error *err) {
    grpo_chat_options opt = {0};
    opt.add_generation_prompt = add_generation_prompt != 0;
    if (hm->tok) {
        int32_t bos = grpo_tokenizer_bos_id(hm->tok), eos = grpo_tokenizer_eos_id(hm->tok);
        opt.bos_token = bos >= 0 ? grpo_tokenizer_id_to_token(hm->tok, bos) : NULL;
        opt.eos_token = eos >= 0 ? grpo_tokenizer_id_to_token(hm->tok, eos) : NULL;
    }
    char *text = NULL;
    int rc = grpo_chat_template_render(hm->tpl, messages, n, &opt, &text, err);
    if (rc == GRPO_OK) {
        size_t len = strlen(text);
        if (len > INT32_MAX) len = INT32_MAX;
        if (cap > 0) {
            size_t k = len < (size_t)cap - 1 ? len : (size_t)cap - 1;
            memcpy(out, text, k);
            out[k] = '\0';
        }
        rc = (int32_t)len;
    }
    free(text);
    return rc;
}

void grpo_host_set_models(grpo_host *host, grpo_host_models *ctx) {
    host->model_ctx = ctx;
    host->model_load = grpo_hm_load;
    host->model_free = grpo_hm_free;
    host->model_info = grpo_hm_info;
    host->model_hidden = grpo_hm_hidden;
    host->model_tensor = grpo_hm_tensor;
    host->model_encode = grpo_hm_encode;
    host->model_render = grpo_hm_render;
}
