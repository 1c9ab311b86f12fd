/*
 * model_instance.c — host side of a model plugin: parameter block, loading/saving Hugging Face
 * directories, activations and KV cache (see model_instance.h).
 */
#include "host/model_instance.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "base/files.h"
#include "host/backend_out.h"
#include "io/hfdir.h"
#include "io/safetensors.h"
#include "base/nomem.h"

static uint64_t pad16(uint64_t n) { return (n + 15) & ~(uint64_t)15; }

/* Lays out the parameter table: numel and offsets, tied tensors sharing their target's. */
static int layout_params(grpo_model *m, grpo_error *err) {
    uint32_t n = m->desc->n_params(m->inst);
    m->n_params = n;
    m->params = calloc(n ? n : 1, sizeof *m->params);
    m->numel = calloc(n ? n : 1, sizeof *m->numel);
    m->offset = calloc(n ? n : 1, sizeof *m->offset);
    m->param_ptr = calloc(n ? n : 1, sizeof *m->param_ptr);
    m->grad_ptr = calloc(n ? n : 1, sizeof *m->grad_ptr);
    m->dtype = calloc(n ? n : 1, sizeof *m->dtype);
    if (!m->params || !m->numel || !m->offset || !m->param_ptr || !m->grad_ptr || !m->dtype)
        return grpo_error_set(err, GRPO_ERR_NOMEM, "model: out of memory for the parameter table");
    uint64_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        grpo_param_desc *d = &m->params[i];
        d->struct_size = sizeof *d;
        if (m->desc->param(m->inst, i, d) != GRPO_OK || !d->name || d->ndim < 1 || d->ndim > 4)
            return grpo_error_set(err, GRPO_ERR_INTERNAL,
                                  "model %s: parameter %u has a bad descriptor", m->desc->id, i);
        uint64_t k = 1;
        for (int j = 0; j < d->ndim; j++) k *= (uint64_t)d->shape[j];
        m->numel[i] = k;
        m->dtype[i] = d->ndim > 1 ? m->weight_dtype : GRPO_DTYPE_F32;
        /* its floats of storage: a bf16 tensor takes half, still whole 64-byte lines */
        uint64_t floats = (k * grpo_dtype_size(m->dtype[i]) + 3) / 4;
        if (d->flags & GRPO_PARAM_TIED) {
            int32_t t = d->tied_to;
            if (t < 0 || (uint32_t)t >= i || m->numel[t] != k)
                return grpo_error_set(err, GRPO_ERR_INTERNAL,
                                      "model %s: %s is tied to tensor %d, which is not an earlier "
                                      "tensor of the same size", m->desc->id, d->name, t);
            m->offset[i] = m->offset[t];
        } else {
            m->offset[i] = off;
            off += pad16(floats);
        }
    }
    m->section = off;
    return GRPO_OK;
}

static int alloc_block(grpo_model *m, grpo_error *err) {
    uint64_t sections = m->trainable ? 4 : 1;
    m->block = m->ops->alloc(m->ops->ctx, sections * m->section * sizeof(float));
    if (!m->block)
        return grpo_error_set(err, GRPO_ERR_NOMEM,
                              "model %s: cannot allocate %llu MiB for parameters%s", m->desc->id,
                              (unsigned long long)(sections * m->section * 4 >> 20),
                              m->trainable ? ", gradients and AdamW moments" : "");
    if (m->trainable) {
        m->grads = m->block + m->section;
        m->adam_m = m->block + 2 * m->section;
        m->adam_v = m->block + 3 * m->section;
    }
    for (uint32_t i = 0; i < m->n_params; i++) {
        m->param_ptr[i] = m->block + m->offset[i];
        m->grad_ptr[i] = m->trainable ? m->grads + m->offset[i] : NULL;
    }
    float *const *grads = m->trainable ? m->grad_ptr : NULL;
    if (m->weight_dtype == GRPO_DTYPE_F32) return m->desc->bind(m->inst, m->param_ptr, grads, err);
    if (!GRPO_HAS_FIELD(m->desc, grpo_model_desc, bind_typed) || !m->desc->bind_typed)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "model pack %s cannot hold its weights in bf16 (it has no "
                              "bind_typed: built before ABI 1.5); hold them in fp32",
                              m->desc->id);
    return m->desc->bind_typed(m->inst, (void *const *)m->param_ptr, m->dtype, grads, err);
}

int grpo_model_write_param(grpo_model *m, uint32_t i, const float *x, grpo_error *err) {
    const grpo_ops *o = m->ops;
    uint64_t n = m->numel[i];
    if (m->dtype[i] == GRPO_DTYPE_F32) {
        o->upload(o->ctx, m->param_ptr[i], x, n * sizeof(float));
        return GRPO_OK;
    }
    uint16_t *h = malloc(n * sizeof *h + 1);
    if (!h) return grpo_error_set(err, GRPO_ERR_NOMEM, "model: out of memory for %s",
                                  m->params[i].name);
    for (uint64_t k = 0; k < n; k++) h[k] = grpo_bf16_from_f32(x[k]);
    o->upload(o->ctx, m->param_ptr[i], h, n * sizeof *h);
    free(h);
    return GRPO_OK;
}

int grpo_model_read_param(const grpo_model *m, uint32_t i, float *x, grpo_error *err) {
    const grpo_ops *o = m->ops;
    uint64_t n = m->numel[i];
    if (m->dtype[i] == GRPO_DTYPE_F32) {
        o->download(o->ctx, x, m->param_ptr[i], n * sizeof(float));
        return GRPO_OK;
    }
    uint16_t *h = malloc(n * sizeof *h + 1);
    if (!h) return grpo_error_set(err, GRPO_ERR_NOMEM, "model: out of memory for %s",
                                  m->params[i].name);
    o->download(o->ctx, h, m->param_ptr[i], n * sizeof *h);
    for (uint64_t k = 0; k < n; k++) x[k] = grpo_bf16_to_f32(h[k]);
    free(h);
    return GRPO_OK;
}

int grpo_model_copy_weights(grpo_model *dst, const grpo_model *src, grpo_error *err) {
    if (dst->desc != src->desc || dst->n_params != src->n_params ||
        !grpo_ops_supports(dst->ops, convert))
        return grpo_error_set(err, GRPO_ERR_INVALID, "model: copying the weights of %s into a "
                              "model of another pack or backend", src->desc->id);
    for (uint32_t i = 0; i < src->n_params; i++) {
        if (src->params[i].flags & GRPO_PARAM_TIED) continue;
        if (dst->numel[i] != src->numel[i])
            return grpo_error_set(err, GRPO_ERR_INVALID, "model: %s has %llu elements in the "
                                  "copy, %llu in %s", src->params[i].name,
                                  (unsigned long long)dst->numel[i],
                                  (unsigned long long)src->numel[i], src->dir);
        dst->ops->convert(dst->ops->ctx, dst->param_ptr[i], dst->dtype[i], src->param_ptr[i],
                          src->dtype[i], src->numel[i]);
    }
    return GRPO_OK;
}

int grpo_model_param_index(const grpo_model *m, const char *name) {
    for (uint32_t i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].name, name) == 0) return (int)i;
    return -1;
}

/* The plugin converts some tensors between the file's layout and its own (grpo/model.h). */
static int has_relayout(const grpo_model *m) {
    return GRPO_HAS_FIELD(m->desc, grpo_model_desc, relayout) && m->desc->relayout;
}

/* A weight that is NaN or infinite would only show as a NaN loss steps later: name it now. */
static int check_finite(const float *x, uint64_t n, const char *path, const char *name,
                        grpo_error *err) {
    for (uint64_t k = 0; k < n; k++)
        if (!isfinite(x[k]))
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "%s: tensor %s holds %g at element %llu; expected finite weights",
                                  path, name, (double)x[k], (unsigned long long)k);
    return GRPO_OK;
}

static int load_weights(grpo_model *m, const char *dir, grpo_error *err) {
    char path[4096];
    grpo_safetensors *st = NULL;
    int rc = grpo_hf_weights_path(dir, path, sizeof path, err);
    if (rc == GRPO_OK) rc = grpo_hf_open_weights(dir, &st, err);
    float *tmp = NULL;
    for (uint32_t i = 0; rc == GRPO_OK && i < m->n_params; i++) {
        const grpo_param_desc *d = &m->params[i];
        if (d->flags & GRPO_PARAM_TIED) continue; /* shares its target's storage */
        free(tmp);
        tmp = malloc(m->numel[i] * sizeof(float));
        if (!tmp) {
            rc = grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory reading %s", path, d->name);
            break;
        }
        if (!grpo_st_find(st, d->name)) {
            rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: missing tensor %s (model %s needs it)",
                                path, d->name, m->desc->id);
            break;
        }
        rc = grpo_st_read_f32(st, d->name, tmp, d->ndim, d->shape, err);
        if (rc == GRPO_OK) rc = check_finite(tmp, m->numel[i], path, d->name, err);
        if (rc == GRPO_OK && has_relayout(m))
            rc = m->desc->relayout(m->inst, i, tmp, GRPO_RELAYOUT_LOAD, err);
        if (rc == GRPO_OK) rc = grpo_model_write_param(m, i, tmp, err);
    }
    for (size_t j = 0; rc == GRPO_OK && j < grpo_st_count(st); j++) {
        const char *name = grpo_st_at(st, j)->name;
        if (grpo_model_param_index(m, name) < 0)
            rc = grpo_error_set(err, GRPO_ERR_INVALID,
                                "%s: unexpected tensor %s (model %s has no such parameter)", path,
                                name, m->desc->id);
    }
    free(tmp);
    grpo_st_close(st);
    return rc;
}

/* A status from a model plugin; on failure its message is made safe to read (NUL-terminated). */
static int plugin_status(int rc, grpo_error *err) {
    if (rc != GRPO_OK) grpo_plugin_message(err);
    return rc;
}

/* Every call into the model plugin is marked (plugin_call.h): a crash inside it names the
 * plugin, and what it prints goes to stderr, not into grpo's data output. */
static void model_call(const grpo_model *m, const char *what) {
    grpo_plugin_call_begin(m->desc->id, NULL, what);
}

/* A pass of m computes in m->compute_dtype (checked by grpo_model_set_compute, so these cannot
 * fail); the backend is back in f32 after it. Nothing is set for an f32 model. */
static void compute_begin(const grpo_model *m) {
    grpo_error err;
    grpo_error_init(&err);
    if (m->compute_dtype != GRPO_DTYPE_F32)
        grpo_backend_set_compute(m->ops, m->compute_dtype, &err);
}

static void compute_end(const grpo_model *m) {
    grpo_error err;
    grpo_error_init(&err);
    if (m->compute_dtype != GRPO_DTYPE_F32) grpo_backend_set_compute(m->ops, GRPO_DTYPE_F32, &err);
}

int grpo_model_set_compute(grpo_model *m, int32_t dtype, grpo_error *err) {
    int rc = grpo_backend_set_compute(m->ops, dtype, err);
    if (rc != GRPO_OK) return rc;
    m->compute_dtype = dtype;
    return grpo_backend_set_compute(m->ops, GRPO_DTYPE_F32, err);
}

int grpo_model_open(grpo_model **out, const grpo_model_desc *desc, const grpo_host *host,
                    const char *dir, const grpo_config *cfg, int trainable, grpo_error *err) {
    return grpo_model_open_as(out, desc, host, dir, cfg, trainable, GRPO_DTYPE_F32, err);
}

int grpo_model_open_as(grpo_model **out, const grpo_model_desc *desc, const grpo_host *host,
                       const char *dir, const grpo_config *cfg, int trainable,
                       int32_t weight_dtype, grpo_error *err) {
    *out = NULL;
    if (!host || !host->ops)
        return grpo_error_set(err, GRPO_ERR_INVALID, "model: the host has no backend (ops)");
    if (weight_dtype != GRPO_DTYPE_F32 && (trainable || weight_dtype != GRPO_DTYPE_BF16))
        return grpo_error_set(err, GRPO_ERR_INVALID, "model %s: weights held as dtype %d; a "
                              "trained model is held in fp32, a frozen one in fp32 or bf16", dir,
                              weight_dtype);
    grpo_model *m = calloc(1, sizeof *m);
    if (!m) return grpo_error_set(err, GRPO_ERR_NOMEM, "model: out of memory");
    m->desc = desc;
    m->host = *host;
    m->ops = host->ops;
    m->trainable = trainable;
    m->weight_dtype = weight_dtype;
    m->fwd_budget = GRPO_FWD_BUDGET;
    m->dir = strdup(dir);
    m->work = grpo_work_new(m->ops);
    char cfg_path[PATH_MAX];
    int rc = m->dir && m->work ? grpo_path_join(cfg_path, sizeof cfg_path, dir, GRPO_HF_CONFIG, err)
                    : grpo_error_set(err, GRPO_ERR_NOMEM, "model: out of memory");
    if (rc == GRPO_OK) rc = grpo_hf_read_config(dir, &m->config_json, err);
    if (rc == GRPO_OK) {
        grpo_config empty = {sizeof(grpo_config), 0, NULL, NULL, "model", NULL};
        grpo_plugin_call_begin(desc->id, NULL, "create");
        rc = desc->create(&m->host, m->config_json, cfg ? cfg : &empty, &m->inst, err);
        grpo_plugin_call_end();
        if (rc != GRPO_OK) {
            m->inst = NULL;
            char why[sizeof err->message];
            snprintf(why, sizeof why, "%s", grpo_plugin_message(err));
            grpo_error_set(err, rc, "%s: %s", cfg_path, why);
        }
    }
    if (rc == GRPO_OK) rc = grpo_hf_files_read(&m->tok_files, dir, err);
    if (rc == GRPO_OK) rc = layout_params(m, err);
    if (rc == GRPO_OK) rc = alloc_block(m, err);
    if (rc == GRPO_OK) rc = load_weights(m, dir, err);
    if (rc != GRPO_OK) {
        grpo_model_close(m);
        return rc;
    }
    *out = m;
    return GRPO_OK;
}

/* The first entry of config.json's "architectures", copied into buf. */
static int config_architecture(const char *json, const char *path, char *buf, size_t cap,
                               grpo_error *err) {
    cJSON *o = cJSON_Parse(json);
    const cJSON *a = o ? cJSON_GetObjectItemCaseSensitive(o, "architectures") : NULL;
    const cJSON *first = cJSON_IsArray(a) ? cJSON_GetArrayItem(a, 0) : NULL;
    int rc = GRPO_OK;
    if (!o)
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: not valid JSON", path);
    else if (!cJSON_IsString(first))
        rc = grpo_error_set(err, GRPO_ERR_INVALID,
                            "%s: expected \"architectures\": [\"...ForCausalLM\"]", path);
    else
        snprintf(buf, cap, "%s", first->valuestring);
    cJSON_Delete(o);
    return rc;
}

/* Opens dir with the first plugin serving arch that accepts its config: a plugin that refuses it
 * as GRPO_ERR_UNSUPPORTED (dense.causal_lm for a MiniMind config with use_moe) passes it to the
 * next one serving the same name (moe.causal_lm). When all refuse, every refusal is reported. */
static int open_serving(grpo_model **out, grpo_registry *reg, const grpo_host *host,
                        const char *dir, const char *arch, const char *cfg_path, int trainable,
                        int32_t weight_dtype, grpo_error *err) {
    char why[1024] = "";
    int refused = 0;
    for (const grpo_entry *e = grpo_registry_next_architecture(reg, arch, NULL); e;
         e = grpo_registry_next_architecture(reg, arch, e)) {
        const void *desc = NULL;
        int rc = grpo_registry_load(reg, e, host, &desc, err);
        int unloadable = rc != GRPO_OK; /* a broken pack: another may serve the architecture */
        if (rc == GRPO_OK)
            rc = grpo_model_open_as(out, desc, host, dir, NULL, trainable, weight_dtype, err);
        if (rc != GRPO_ERR_UNSUPPORTED && !unloadable) return rc;
        if (unloadable)
            fprintf(stderr, "warning: %s: model plugin %s cannot be loaded, trying the next "
                            "serving %s: %s\n", cfg_path, e->id, arch, err ? err->message : "?");
        size_t used = strlen(why);
        snprintf(why + used, sizeof why - used, "%s%.64s: %.400s", refused++ ? "; " : "", e->id,
                 err ? err->message : "unsupported");
    }
    if (!refused)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "%s: no model plugin serves architecture %s (see grpo plugins list)",
                              cfg_path, arch);
    return grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "%.200s: %.800s", cfg_path, why);
}

int grpo_model_open_dir(grpo_model **out, grpo_registry *reg, const grpo_host *host,
                        const char *dir, int trainable, grpo_error *err) {
    return grpo_model_open_dir_as(out, reg, host, dir, trainable, GRPO_DTYPE_F32, err);
}

int grpo_model_open_dir_as(grpo_model **out, grpo_registry *reg, const grpo_host *host,
                           const char *dir, int trainable, int32_t weight_dtype,
                           grpo_error *err) {
    *out = NULL;
    char cfg_path[PATH_MAX], *json = NULL, arch[256];
    int rc = grpo_path_join(cfg_path, sizeof cfg_path, dir, GRPO_HF_CONFIG, err);
    if (rc == GRPO_OK) rc = grpo_hf_read_config(dir, &json, err);
    if (rc == GRPO_OK) rc = config_architecture(json, cfg_path, arch, sizeof arch, err);
    if (rc == GRPO_OK)
        rc = open_serving(out, reg, host, dir, arch, cfg_path, trainable, weight_dtype, err);
    free(json);
    return rc;
}

void grpo_model_close(grpo_model *m) {
    if (!m) return;
    if (m->inst) {
        grpo_plugin_call_begin(m->desc->id, NULL, "destroy");
        m->desc->destroy(m->inst);
        grpo_plugin_call_end();
    }
    if (m->ops) {
        if (m->block) m->ops->free(m->ops->ctx, m->block);
        if (m->keep_block) m->ops->free(m->ops->ctx, m->keep_block);
    }
    grpo_model_release_kv(m);
    grpo_kv_pages_free(&m->pages);
    grpo_work_release(m->work);
    free(m->params);
    free(m->numel);
    free(m->offset);
    free(m->param_ptr);
    free(m->grad_ptr);
    free(m->dtype);
    free(m->config_json);
    grpo_hf_files_free(&m->tok_files);
    free(m->dir);
    free(m);
}

/* Whether forward computes each row on its own, so that a chunk of rows gives the bits of the
 * whole batch: not in a mixture of experts (a plugin with aux_loss or expert_load), whose expert
 * matmuls take the tokens of all rows routed to an expert, a count a chunk changes. */
static int rows_independent(const grpo_model *m) {
    return !m->desc->aux_loss && !m->desc->expert_load;
}

/* A model that only runs forward: frozen, and no LoRA adapters training on it (those need the
 * whole batch's activations for backward). */
static int forward_only(const grpo_model *m) { return !m->trainable && !m->adapters_train; }

/* The rows of a frozen model's forward chunk for a (B,T) batch (grpo_model_reserve_acts): those
 * that fit its budget, or the work block it shares when that is larger (no new memory). */
static int32_t forward_rows(const grpo_model *m, int32_t B, int32_t T) {
    if (T <= 0 || !rows_independent(m)) return B; /* empty: the plugin refuses it */
    int32_t min_rows = (GRPO_FWD_MIN_TOKENS + T - 1) / T, rows = B;
    uint64_t budget = m->fwd_budget > m->work->bytes ? m->fwd_budget : m->work->bytes;
    while (rows > min_rows && m->desc->activation_floats(m->inst, rows, T) * sizeof(float) >
                                  budget)
        rows--;
    return rows;
}

int grpo_model_reserve_acts(grpo_model *m, int32_t B, int32_t T, grpo_error *err) {
    if (forward_only(m)) B = forward_rows(m, B, T);
    int32_t nB = B > m->acts_B ? B : m->acts_B, nT = T > m->acts_T ? T : m->acts_T;
    if (forward_only(m)) nB = forward_rows(m, nB, nT); /* longer rows: fewer fit the budget */
    uint64_t bytes = m->desc->activation_floats(m->inst, nB, nT) * sizeof(float);
    m->acts_bytes = 0, m->acts_B = m->acts_T = 0;
    if (!grpo_work_reserve(m->work, m, bytes))
        return grpo_error_set(err, GRPO_ERR_NOMEM,
                              "model %s: cannot allocate %llu MiB of activations for (%d,%d)",
                              m->desc->id, (unsigned long long)(bytes >> 20), nB, nT);
    m->acts_bytes = bytes, m->acts_B = nB, m->acts_T = nT;
    return GRPO_OK;
}

/* The activation block while m holds it (reserved, and no other model's pass since), or NULL. */
static float *acts_held(const grpo_model *m) {
    return grpo_work_held(m->work, m, m->acts_bytes);
}

/* The end of an error about activations that are not held: why, when reserved. */
static const char *acts_lost(const grpo_model *m) {
    return m->acts_bytes ? " and another model's pass has used its work memory since" : "";
}

/* The prefill/decode scratch's floats for (R, P) prompts or R decode rows. */
static uint64_t scratch_floats(const grpo_model *m, int32_t R, int32_t P) {
    uint64_t ns = m->desc->scratch_floats(m->inst, R, P);
    uint64_t nd = m->desc->scratch_floats(m->inst, R, 1);
    return nd > ns ? nd : ns;
}

void grpo_model_release_kv(grpo_model *m) {
    if (m->pages.pool) m->kv.data = NULL, m->kv_pages_last = m->pages.n_pages;
    grpo_kv_pages_release(&m->pages); /* the pool kept for the next rollout's */
    free(m->kv_hlen);
    m->kv_hlen = NULL, m->kv.page = 0, m->kv.n_pages = 0, m->kv.table = m->kv.table_host = NULL;
}

int grpo_model_reserve_kv(grpo_model *m, int32_t R, int32_t S, int32_t P, grpo_error *err) {
    grpo_model_release_kv(m);
    grpo_kv_pages_free(&m->pages); /* no paged pool to keep for */
    m->kv = (grpo_kv_cache){sizeof(grpo_kv_cache), NULL, R, S, 0, 0, NULL, NULL};
    m->scratch = NULL, m->kv_bytes = 0;
    uint64_t nkv = (m->desc->kv_floats(m->inst, R, S) + 15) & ~(uint64_t)15; /* 64-byte aligned */
    uint64_t ns = scratch_floats(m, R, P);
    float *buf = grpo_work_reserve(m->work, m, (nkv + ns) * sizeof(float));
    if (!buf)
        return grpo_error_set(err, GRPO_ERR_NOMEM,
                              "model %s: cannot allocate a KV cache of %d rows x %d slots "
                              "(%llu MiB)", m->desc->id, R, S, (unsigned long long)(nkv * 4 >> 20));
    m->ops->zero(m->ops->ctx, buf, nkv * sizeof(float)); /* a fresh cache, as a new block */
    m->kv.data = buf, m->scratch = buf + nkv, m->kv_bytes = (nkv + ns) * sizeof(float);
    m->scratch_R = R, m->scratch_T = P;
    return GRPO_OK;
}

/* The floats of one page when m's pack and backend can run on a paged cache, else 0. */
static uint64_t page_floats(const grpo_model *m, int32_t page) {
    if (page <= 0 || m->kv_unpaged || !GRPO_HAS_FIELD(m->desc, grpo_model_desc, kv_page_floats) ||
        !m->desc->kv_page_floats || !grpo_ops_supports(m->ops, attention_decode_paged))
        return 0;
    return m->desc->kv_page_floats(m->inst, page);
}

/* m->kv's paged fields from m->pages (after any change to the pool). */
static void kv_from_pages(grpo_model *m) {
    m->kv.data = m->pages.pool, m->kv.n_pages = m->pages.n_pages;
}

int grpo_model_reserve_kv_paged(grpo_model *m, int32_t R, int32_t S, int32_t P, int32_t page,
                                grpo_error *err) {
    uint64_t pf = page_floats(m, page);
    if (!pf) return grpo_model_reserve_kv(m, R, S, P, err);
    grpo_model_release_kv(m);
    m->kv = (grpo_kv_cache){sizeof(grpo_kv_cache), NULL, R, S, 0, 0, NULL, NULL};
    m->scratch = NULL, m->kv_bytes = 0;
    uint64_t ns = scratch_floats(m, R, P);
    float *buf = grpo_work_reserve(m->work, m, ns * sizeof(float));
    if (!buf)
        return grpo_error_set(err, GRPO_ERR_NOMEM,
                              "model %s: cannot allocate the prefill/decode scratch of %d rows x "
                              "%d slots (%llu MiB)", m->desc->id, R, P,
                              (unsigned long long)(ns * 4 >> 20));
    /* to start: every row's prompt and one page to grow into, or as many pages as the last
     * rollout's cache ended with (at most every block of every row): a rollout like the last
     * one then never grows the pool (each growth copies it into a new, zeroed allocation) */
    int32_t n0 = R * ((P + page - 1) / page + 1);
    int64_t most = (int64_t)R * ((S + page - 1) / page);
    if (m->kv_pages_last > n0) n0 = (int32_t)(m->kv_pages_last < most ? m->kv_pages_last : most);
    int rc = grpo_kv_pages_init(&m->pages, m->ops, m->desc->id, R, S, page, pf, n0, err);
    if (rc == GRPO_OK && !(m->kv_hlen = malloc((size_t)R * sizeof *m->kv_hlen))) {
        grpo_kv_pages_free(&m->pages);
        rc = grpo_error_set(err, GRPO_ERR_NOMEM, "model %s: out of memory for %d decode lengths",
                            m->desc->id, R);
    }
    if (rc != GRPO_OK) return rc;
    m->kv.page = page, m->kv.table = m->pages.d_table, m->kv.table_host = m->pages.table;
    kv_from_pages(m);
    m->scratch = buf, m->kv_bytes = ns * sizeof(float), m->scratch_R = R, m->scratch_T = P;
    return GRPO_OK;
}

int32_t grpo_model_kv_paged(const grpo_model *m) { return m->pages.pool ? m->kv.page : 0; }

int32_t grpo_model_kv_pages_max(const grpo_model *m, uint64_t *page_bytes) {
    *page_bytes = m->pages.pool ? m->pages.page_floats * sizeof(float) : 0;
    return m->pages.pool ? m->pages.in_use_max : 0;
}

/* Whether the KV cache is reserved and m still holds it (no other model's pass since). */
static int kv_held(const grpo_model *m) {
    if (m->pages.pool) return grpo_work_held(m->work, m, m->kv_bytes) == m->scratch;
    return m->kv.data && grpo_work_held(m->work, m, m->kv_bytes) == m->kv.data;
}

int grpo_model_share_work(grpo_model *m, grpo_model *with, grpo_error *err) {
    if (m->ops != with->ops)
        return grpo_error_set(err, GRPO_ERR_INVALID, "model %s: sharing work memory with a "
                              "model on another backend", m->desc->id);
    if (m->work == with->work) return GRPO_OK;
    grpo_work_release(m->work);
    m->work = grpo_work_share(with->work);
    grpo_model_release_kv(m);
    m->acts_bytes = 0, m->acts_B = m->acts_T = 0, m->kv.data = NULL, m->kv_bytes = 0;
    return GRPO_OK;
}

/* Rows [r0, r0+rows) of b: the arrays are (B,T) row-major, so a chunk is an offset. */
static grpo_batch batch_rows(const grpo_batch *b, int32_t r0, int32_t rows) {
    size_t o = (size_t)r0 * b->T;
    grpo_batch c = *b;
    c.B = rows, c.ids = b->ids + o, c.mask = b->mask + o, c.pos = b->pos + o;
    c.targets = b->targets + o;
    return c;
}

/* grpo_batch.kept (1.10) of a batch the host made. */
static int batch_kept(const grpo_batch *b) {
    return b->struct_size >= offsetof(grpo_batch, kept) + sizeof(int32_t) && b->kept;
}

/* One forward() call of the plugin over batch c into acts (its status, not yet checked). */
static int forward_call(grpo_model *m, const grpo_batch *c, float *acts, float *logp,
                        float *entropy, float scale, grpo_error *err) {
    model_call(m, "forward");
    compute_begin(m);
    int rc = m->desc->forward(m->inst, c, acts, logp, entropy, scale, err);
    compute_end(m);
    grpo_plugin_call_end();
    return rc;
}

/* The rows of the chunk of b from row r0, at most max: up to the last prompt boundary inside
 * them (a row whose first share_P ids differ from the row before) that leaves the chunk
 * GRPO_FWD_MIN_TOKENS tokens, so that a prompt's rows share its prefix in as few chunks as fit;
 * all max where none does, or where the batch ends. */
static int32_t chunk_rows(const grpo_model *m, const grpo_batch *b, int32_t r0, int32_t max) {
    int32_t P = m->share_P < b->T ? m->share_P : b->T;
    if (P <= 0 || r0 + max >= b->B) return max;
    for (int32_t k = max; k > 0 && (int64_t)k * b->T >= GRPO_FWD_MIN_TOKENS; k--) {
        const int32_t *prev = b->ids + (size_t)(r0 + k - 1) * b->T, *row = prev + b->T;
        if (memcmp(prev, row, (size_t)P * sizeof *row) != 0) return k;
    }
    return max;
}

int grpo_model_forward(grpo_model *m, const grpo_batch *b, float *logp, float *entropy,
                       float scale, grpo_error *err) {
    m->keep_fwd = batch_kept(b);
    m->fwd_chunks = 0;
    if (m->keep_fwd) { /* one pass over the kept block: the plugin checks the batch */
        if (!m->keep_block)
            return grpo_error_set(err, GRPO_ERR_INVALID, "model: kept forward without a keep");
        m->fwd_chunks = 1;
        return plugin_status(forward_call(m, b, m->keep_block, logp, entropy, scale, err), err);
    }
    float *acts = acts_held(m);
    if (!acts || (!forward_only(m) && b->B > m->acts_B) || b->T > m->acts_T)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "model: forward of (%d,%d) but activations are reserved for "
                              "(%d,%d)%s", b->B, b->T, m->acts_B, m->acts_T, acts_lost(m));
    int rc = GRPO_OK;
    int32_t r0 = 0;
    do { /* one call for an empty batch: the plugin checks it */
        int32_t rows = chunk_rows(m, b, r0, b->B - r0 < m->acts_B ? b->B - r0 : m->acts_B);
        grpo_batch c = batch_rows(b, r0, rows);
        size_t o = (size_t)r0 * b->T;
        rc = forward_call(m, &c, acts, logp + o, entropy ? entropy + o : NULL, scale, err);
        r0 += rows, m->fwd_chunks++;
    } while (rc == GRPO_OK && r0 < b->B);
    return plugin_status(rc, err);
}

/* What both backward calls need: a trainable model whose activations hold the batch. */
static int backward_ready(const grpo_model *m, const grpo_batch *b, grpo_error *err) {
    if (!m->trainable && !m->adapters_train)
        return grpo_error_set(err, GRPO_ERR_INVALID, "model: backward on a frozen model");
    if (m->keep_fwd) return GRPO_OK; /* the kept block: the plugin checks the batch */
    if (!acts_held(m) || b->B > m->acts_B || b->T > m->acts_T)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "model: backward of (%d,%d) but activations are reserved for "
                              "(%d,%d)%s", b->B, b->T, m->acts_B, m->acts_T, acts_lost(m));
    return GRPO_OK;
}

/* The block the last forward wrote. */
static float *backward_acts(const grpo_model *m) {
    return m->keep_fwd ? m->keep_block : acts_held(m);
}

int grpo_model_backward(grpo_model *m, const grpo_batch *b, const float *dlogp, float scale,
                        grpo_error *err) {
    int rc = backward_ready(m, b, err);
    if (rc != GRPO_OK) return rc;
    model_call(m, "backward");
    compute_begin(m);
    rc = m->desc->backward(m->inst, b, backward_acts(m), dlogp, scale, err);
    compute_end(m);
    grpo_plugin_call_end();
    return plugin_status(rc, err);
}

int grpo_model_param_relaid(grpo_model *m, uint32_t i, int *relaid, grpo_error *err) {
    *relaid = 0;
    if (!has_relayout(m)) return GRPO_OK;
    uint64_t n = m->numel[i];
    float *probe = malloc((n ? n : 1) * sizeof(float));
    if (!probe) return grpo_nomem(err, m->params[i].name, (n ? n : 1) * sizeof(float));
    for (uint64_t k = 0; k < n; k++) probe[k] = (float)(k % 16777216); /* exact in fp32 */
    model_call(m, "relayout");
    int rc = plugin_status(m->desc->relayout(m->inst, i, probe, GRPO_RELAYOUT_LOAD, err), err);
    grpo_plugin_call_end();
    for (uint64_t k = 0; rc == GRPO_OK && k < n && !*relaid; k++)
        *relaid = probe[k] != (float)(k % 16777216);
    free(probe);
    return rc;
}

int grpo_model_set_lora(grpo_model *m, const grpo_lora_adapter *adapters, uint32_t n,
                        int32_t enabled, grpo_error *err) {
    if (!(GRPO_HAS_FIELD(m->desc, grpo_model_desc, set_lora) && m->desc->set_lora))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "model %s: the pack has no set_lora (grpo/model.h, ABI 1.4): it "
                              "cannot carry LoRA adapters", m->desc->id);
    model_call(m, "set_lora");
    int rc = m->desc->set_lora(m->inst, adapters, n, enabled, err);
    grpo_plugin_call_end();
    rc = plugin_status(rc, err);
    int train = 0;
    for (uint32_t i = 0; rc == GRPO_OK && enabled && i < n; i++)
        train |= adapters[i].dA || adapters[i].dB;
    if (rc == GRPO_OK) m->adapters_train = train;
    if (rc == GRPO_OK && m->acts_bytes && /* adapters that train on: the pack's layout grows */
        m->desc->activation_floats(m->inst, m->acts_B, m->acts_T) * sizeof(float) > m->acts_bytes)
        m->acts_bytes = 0, m->acts_B = m->acts_T = 0; /* the next pass reserves it again */
    return rc;
}

int grpo_model_set_gradient_checkpointing(grpo_model *m, int on, grpo_error *err) {
    if (!(GRPO_HAS_FIELD(m->desc, grpo_model_desc, set_gradient_checkpointing) &&
          m->desc->set_gradient_checkpointing))
        return !on ? GRPO_OK
                   : grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                                    "model %s: the pack has no set_gradient_checkpointing "
                                    "(grpo/model.h, ABI 1.5): train.gradient_checkpointing = "
                                    "true cannot be honoured; expected false", m->desc->id);
    model_call(m, "set_gradient_checkpointing");
    int rc = m->desc->set_gradient_checkpointing(m->inst, on ? 1 : 0, err);
    grpo_plugin_call_end();
    if (rc == GRPO_OK && m->acts_bytes) { /* sized for the other layout */
        grpo_work_drop(m->work);
        m->acts_bytes = 0, m->acts_B = m->acts_T = 0;
    }
    return plugin_status(rc, err);
}

double grpo_model_activation_bytes_per_token(const grpo_model *m) {
    enum { ROW = 1024 };
    return (double)m->desc->activation_floats(m->inst, 1, ROW) * sizeof(float) / ROW;
}

int grpo_model_set_shared_prefix(grpo_model *m, int32_t P, grpo_error *err) {
    if (!(GRPO_HAS_FIELD(m->desc, grpo_model_desc, set_shared_prefix) &&
          m->desc->set_shared_prefix))
        return GRPO_OK; /* the pack runs every row in full: the same results */
    model_call(m, "set_shared_prefix");
    int rc = m->desc->set_shared_prefix(m->inst, P, err);
    grpo_plugin_call_end();
    m->share_P = rc == GRPO_OK ? P : 0;
    return plugin_status(rc, err);
}

int grpo_model_set_lora_rows(grpo_model *m, int32_t n, grpo_error *err) {
    if (!(GRPO_HAS_FIELD(m->desc, grpo_model_desc, set_lora_rows) && m->desc->set_lora_rows))
        return n < 0 ? GRPO_OK
                     : grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                                      "model %s: the pack has no set_lora_rows (grpo/model.h, "
                                      "1.11)", m->desc->id);
    model_call(m, "set_lora_rows");
    int rc = m->desc->set_lora_rows(m->inst, n, err);
    grpo_plugin_call_end();
    return plugin_status(rc, err);
}

int grpo_model_can_keep_rollout(const grpo_model *m) {
    return GRPO_HAS_FIELD(m->desc, grpo_model_desc, keep_rollout) && m->desc->keep_rollout;
}

int grpo_model_keep_rollout(grpo_model *m, const grpo_rollout_keep *keep, grpo_error *err) {
    if (!grpo_model_can_keep_rollout(m))
        return keep ? grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                                     "model %s: the pack has no keep_rollout (grpo/model.h, 1.10)",
                                     m->desc->id)
                    : GRPO_OK;
    model_call(m, "keep_rollout");
    int rc = m->desc->keep_rollout(m->inst, keep, err);
    grpo_plugin_call_end();
    return plugin_status(rc, err);
}

int grpo_model_keep_for(grpo_model *m, int32_t B, int32_t P, int32_t Tc, int32_t BP,
                        const int32_t *prefix_of, grpo_rollout_keep *k, grpo_error *err) {
    uint64_t bytes = m->desc->activation_floats(m->inst, B, P + Tc) * sizeof(float);
    if (bytes > m->keep_bytes) {
        if (m->keep_block) m->ops->free(m->ops->ctx, m->keep_block);
        m->keep_block = m->ops->alloc(m->ops->ctx, bytes), m->keep_bytes = 0;
        if (!m->keep_block)
            return grpo_error_set(err, GRPO_ERR_NOMEM,
                                  "model %s: cannot allocate %llu MiB of activations for (%d,%d) "
                                  "(the rollout's, kept for the training forward)", m->desc->id,
                                  (unsigned long long)(bytes >> 20), B, P + Tc);
        m->keep_bytes = bytes;
    }
    *k = (grpo_rollout_keep){sizeof *k, m->keep_block, B, P, Tc, BP, prefix_of, NULL, NULL};
    return GRPO_OK;
}

int grpo_model_has_entropy_backward(const grpo_model *m) {
    return GRPO_HAS_FIELD(m->desc, grpo_model_desc, backward_entropy) &&
           m->desc->backward_entropy != NULL;
}

int grpo_model_backward_entropy(grpo_model *m, const grpo_batch *b, const float *dlogp,
                                const float *dentropy, const float *entropy, float scale,
                                grpo_error *err) {
    if (!grpo_model_has_entropy_backward(m))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "model %s: the pack has no backward_entropy (grpo/model.h, ABI 1.4)",
                              m->desc->id);
    int rc = backward_ready(m, b, err);
    if (rc != GRPO_OK) return rc;
    model_call(m, "backward_entropy");
    compute_begin(m);
    rc = m->desc->backward_entropy(m->inst, b, backward_acts(m), dlogp, dentropy, entropy, scale,
                                   err);
    compute_end(m);
    grpo_plugin_call_end();
    return plugin_status(rc, err);
}

void grpo_model_zero_grad(grpo_model *m) {
    if (m->grads) m->ops->zero(m->ops->ctx, m->grads, m->section * sizeof(float));
}

/* Paged: rows 0..B-1 get fresh pages for slots [0, T) (what they held before is dropped). */
static int pages_for_prefill(grpo_model *m, int32_t B, int32_t T, grpo_error *err) {
    int rc = GRPO_OK;
    for (int32_t r = 0; r < B && rc == GRPO_OK; r++) {
        grpo_kv_pages_drop_row(&m->pages, r);
        for (int32_t blk = 0; blk < (T + m->kv.page - 1) / m->kv.page && rc == GRPO_OK; blk++)
            rc = grpo_kv_pages_own(&m->pages, r, blk, err);
    }
    kv_from_pages(m);
    grpo_kv_pages_sync(&m->pages);
    return rc;
}

/* Paged: the block of slot len[r]-1 of rows 0..R-1 (the slot decode writes) gets a page of
 * its own (copy-on-write when shared). len is backend memory: downloaded (R ints). */
static int pages_for_decode(grpo_model *m, int32_t R, const int32_t *len, grpo_error *err) {
    if (R <= 0 || R > m->kv.R)
        return grpo_error_set(err, GRPO_ERR_INVALID, "model %s: decode of %d rows with a cache "
                              "of %d rows", m->desc->id, R, m->kv.R);
    m->ops->download(m->ops->ctx, m->kv_hlen, len, (uint64_t)R * sizeof(int32_t));
    int rc = GRPO_OK;
    for (int32_t r = 0; r < R && rc == GRPO_OK; r++) {
        int32_t s = m->kv_hlen[r] - 1;
        if (s < 0 || s >= m->kv.S)
            return grpo_error_set(err, GRPO_ERR_INVALID, "model %s: decode: len[%d] = %d, "
                                  "expected 1..%d (cache slots)", m->desc->id, r, s + 1, m->kv.S);
        rc = grpo_kv_pages_own(&m->pages, r, s / m->kv.page, err);
    }
    kv_from_pages(m);
    grpo_kv_pages_sync(&m->pages);
    return rc;
}

int grpo_model_prefill(grpo_model *m, const grpo_batch *prompt, float *logits, grpo_error *err) {
    if (!kv_held(m) || prompt->B > m->scratch_R || prompt->T > m->scratch_T)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "model: prefill of (%d,%d) but the cache is reserved for (%d,%d)",
                              prompt->B, prompt->T, m->scratch_R, m->scratch_T);
    int rc = m->pages.pool ? pages_for_prefill(m, prompt->B, prompt->T, err) : GRPO_OK;
    if (rc != GRPO_OK) return rc;
    model_call(m, "prefill");
    compute_begin(m);
    rc = m->desc->prefill(m->inst, &m->kv, prompt, m->scratch, logits, err);
    compute_end(m);
    grpo_plugin_call_end();
    return plugin_status(rc, err);
}

int grpo_model_decode(grpo_model *m, int32_t R, const int32_t *tokens, const int32_t *pos,
                      const int32_t *cache_mask, const int32_t *len, float *logits,
                      grpo_error *err) {
    if (!kv_held(m))
        return grpo_error_set(err, GRPO_ERR_INVALID, "model: decode without a reserved cache "
                              "(or another model's pass has used its work memory since)");
    int rc = m->pages.pool ? pages_for_decode(m, R, len, err) : GRPO_OK;
    if (rc != GRPO_OK) return rc;
    model_call(m, "decode");
    compute_begin(m);
    rc = m->desc->decode(m->inst, &m->kv, R, tokens, pos, cache_mask, len, m->scratch, logits,
                             err);
    compute_end(m);
    grpo_plugin_call_end();
    return plugin_status(rc, err);
}

/* The rows and slots of a row copy or move (what: its name) lie in the reserved cache. */
static int kv_rows_check(const grpo_model *m, const char *what, int32_t dst, int32_t src,
                         int32_t n, grpo_error *err) {
    if (!kv_held(m) || dst < 0 || src < 0 || dst >= m->kv.R || src >= m->kv.R || n < 0 ||
        n > m->kv.S)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "model %s: %s of %d slots from row %d to row %d, but the cache is "
                              "reserved for %d rows x %d slots",
                              m->desc->id, what, n, src, dst, m->kv.data ? m->kv.R : 0,
                              m->kv.data ? m->kv.S : 0);
    return GRPO_OK;
}

int grpo_model_kv_copy_row(grpo_model *m, int32_t dst, int32_t src, int32_t n, grpo_error *err) {
    int rc = kv_rows_check(m, "kv_copy_row", dst, src, n, err);
    if (rc != GRPO_OK || dst == src || n <= 0) return rc;
    if (m->pages.pool)
        grpo_kv_pages_share_row(&m->pages, dst, src, n);
    else
        m->desc->kv_copy_row(m->inst, &m->kv, dst, src, n);
    return GRPO_OK;
}

int grpo_model_kv_move_row(grpo_model *m, int32_t dst, int32_t src, int32_t n, grpo_error *err) {
    if (!m->pages.pool) return grpo_model_kv_copy_row(m, dst, src, n, err);
    int rc = kv_rows_check(m, "kv_move_row", dst, src, n, err);
    if (rc == GRPO_OK) grpo_kv_pages_move_row(&m->pages, dst, src);
    return rc;
}

void grpo_model_kv_drop_row(grpo_model *m, int32_t r) {
    if (m->pages.pool && r >= 0 && r < m->kv.R) grpo_kv_pages_drop_row(&m->pages, r);
}

int grpo_model_check_ids(const grpo_model *m, const int32_t *ids, size_t n, const char *what,
                         grpo_error *err) {
    int32_t V = grpo_model_vocab(m);
    for (size_t i = 0; V > 0 && i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "%s: token id %d at index %zu is outside the model's vocabulary "
                                  "[0, %d) (%s)",
                                  what, ids[i], i, V, m->dir);
    return GRPO_OK;
}

int32_t grpo_model_vocab(const grpo_model *m) {
    if (GRPO_HAS_FIELD(m->desc, grpo_model_desc, vocab_size) && m->desc->vocab_size)
        return m->desc->vocab_size(m->inst);
    /* a pack built before 1.3: the rows of the output (or the tied input) embedding */
    int i = grpo_model_param_index(m, "lm_head.weight");
    if (i < 0) i = grpo_model_param_index(m, "model.embed_tokens.weight");
    if (i < 0) i = grpo_model_param_index(m, "model.tok_embeddings.weight"); /* InternLM2 */
    return i < 0 ? -1 : (int32_t)m->params[i].shape[0];
}

/* A parameter to save: its model and index; src when it is read where it lies (backend_out.h). */
typedef struct saved_param {
    const grpo_model *m;
    uint32_t i;
    grpo_backend_src src;
} saved_param;

/* grpo_st_reader of a parameter that must be converted (bf16 storage) or relaid out first: read
 * as fp32 into the writer's buffer, then in its saved layout. */
static int read_saved_param(void *ctx, float *buf, grpo_error *err) {
    const saved_param *p = ctx;
    int rc = grpo_model_read_param(p->m, p->i, buf, err);
    if (rc == GRPO_OK && has_relayout(p->m))
        rc = p->m->desc->relayout(p->m->inst, p->i, buf, GRPO_RELAYOUT_SAVE, err);
    return rc;
}

/* The tensor to write for parameter i (its name and shape; its values come from the backend's
 * memory one tensor at a time as the writer reaches it: no host copy of the whole model). */
static void saved_out(const grpo_model *m, uint32_t i, grpo_st_out *o, saved_param *p) {
    const grpo_param_desc *d = &m->params[i];
    *p = (saved_param){m, i, {0}};
    *o = (grpo_st_out){.name = d->name, .ndim = d->ndim};
    for (int j = 0; j < d->ndim; j++) o->shape[j] = d->shape[j];
    if (m->dtype[i] == GRPO_DTYPE_F32 && !has_relayout(m))
        grpo_backend_out(o, &p->src, m->ops, m->param_ptr[i], m->numel[i]);
    else
        o->read = read_saved_param, o->ctx = p;
}

int grpo_model_save(const grpo_model *m, const char *dir, grpo_error *err) {
    size_t cap = m->n_params ? m->n_params : 1;
    grpo_st_out *outs = calloc(cap, sizeof *outs);
    saved_param *ps = calloc(cap, sizeof *ps);
    char *cfg_text = NULL;
    int rc = outs && ps ? grpo_hf_config_set_dtype(m->config_json, GRPO_ST_F32, &cfg_text, err)
                        : grpo_error_set(err, GRPO_ERR_NOMEM, "model: out of memory saving %s",
                                         dir);
    size_t n = 0;
    for (uint32_t i = 0; rc == GRPO_OK && i < m->n_params; i++)
        if (!(m->params[i].flags & GRPO_PARAM_TIED)) /* transformers re-ties it on load */
            saved_out(m, i, &outs[n], &ps[n]), n++;
    if (rc == GRPO_OK) rc = grpo_hf_save(dir, cfg_text, outs, n, GRPO_ST_F32, &m->tok_files, err);
    free(outs);
    free(ps);
    free(cfg_text);
    return rc;
}

int32_t grpo_model_eos(const grpo_model *m) {
    cJSON *o = cJSON_Parse(m->config_json);
    const cJSON *e = o ? cJSON_GetObjectItemCaseSensitive(o, "eos_token_id") : NULL;
    if (cJSON_IsArray(e)) e = cJSON_GetArrayItem(e, 0);
    int32_t eos = cJSON_IsNumber(e) ? (int32_t)cJSON_GetNumberValue(e) : -1;
    cJSON_Delete(o);
    return eos;
}
