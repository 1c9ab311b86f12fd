/* lora.c — LoRA adapters on a frozen model (see lora.h). */
#include "host/lora.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/files.h"
#include "base/rng.h"
#include "io/safetensors.h"
#include "base/nomem.h"

#define PEFT_PREFIX "base_model.model."

/* The module of weight `name` ("model.layers.0.self_attn.q_proj.weight" ->
 * "model.layers.0.self_attn.q_proj") into out; 0 when name is not "<module>.weight". */
static int module_of(const char *name, char *out, size_t size) {
    size_t n = strlen(name);
    if (n <= 7 || strcmp(name + n - 7, ".weight") != 0 || n - 7 >= size) return 0;
    memcpy(out, name, n - 7);
    out[n - 7] = 0;
    return 1;
}

/* Whether parameter d is a LoRA target under spec ("all-linear" or "a,b,c" module names). */
static int is_target(const grpo_param_desc *d, const char *spec) {
    char mod[512];
    if (d->ndim != 2 || (d->flags & GRPO_PARAM_TIED) || !module_of(d->name, mod, sizeof mod))
        return 0;
    if (strncmp(mod, "model.layers.", 13) != 0) return 0; /* embeddings and the head are not */
    if (strcmp(spec, "all-linear") == 0) return 1;
    size_t n = strlen(mod);
    for (const char *p = spec; *p;) { /* PEFT: the module name is the entry or ends in .entry */
        while (*p == ' ' || *p == ',') p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ') e++;
        size_t k = (size_t)(e - p);
        if (k > 0 && k <= n && strncmp(mod + n - k, p, k) == 0 && (k == n || mod[n - k - 1] == '.'))
            return 1;
        p = e;
    }
    return 0;
}

static float lora_scale(const grpo_lora *l) {
    return (float)(l->use_rslora ? l->alpha / sqrt((double)l->r) : l->alpha / l->r);
}

/* Counts the targets (and their floats); fills l->ad when it is allocated. */
static void select_targets(grpo_lora *l, const char *spec) {
    const grpo_model *m = l->m;
    uint64_t off = 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->n_params; i++) {
        const grpo_param_desc *d = &m->params[i];
        if (!is_target(d, spec)) continue;
        int64_t OC = d->shape[0], IC = d->shape[1];
        if (l->ad) {
            float *P = l->block, *G = l->block + l->floats;
            l->ad[n] = (grpo_lora_adapter){sizeof(grpo_lora_adapter), i, l->r, lora_scale(l),
                                           P + off, P + off + (uint64_t)l->r * IC, G + off,
                                           G + off + (uint64_t)l->r * IC, 0.0f, 0};
        }
        off += (uint64_t)l->r * (IC + OC), n++;
    }
    l->n = n, l->floats = off;
}

/* A target the pack keeps in another layout than the file (InternLM2's packed wqkv) would need
 * its adapter's rows moved the same way on every load and save: refused instead. */
static int check_layouts(grpo_lora *l, const char *spec, grpo_error *err) {
    for (uint32_t i = 0; i < l->m->n_params; i++) {
        int relaid = 0, rc = is_target(&l->m->params[i], spec)
                                 ? grpo_model_param_relaid(l->m, i, &relaid, err)
                                 : GRPO_OK;
        if (rc != GRPO_OK) return rc;
        if (relaid)
            return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                                  "LoRA on %s: the model pack keeps this tensor in another layout "
                                  "than its file (a packed projection); adapters on it are not "
                                  "supported: leave it out of lora.target_modules",
                                  l->m->params[i].name);
    }
    return GRPO_OK;
}

/* PEFT's init: A ~ U(-1/sqrt(IC), 1/sqrt(IC)) from seed, adapter by adapter; B = 0. */
static int init_weights(grpo_lora *l, uint64_t seed, grpo_error *err) {
    float *host = calloc(l->floats ? l->floats : 1, sizeof(float));
    if (!host) return grpo_nomem(err, "the LoRA adapters' initial weights", l->floats * 4);
    grpo_rng rng;
    grpo_rng_seed(&rng, seed);
    for (uint32_t i = 0; i < l->n; i++) {
        int64_t IC = l->m->params[l->ad[i].param].shape[1];
        float bound = (float)(1.0 / sqrt((double)IC)), *A = host + (l->ad[i].A - l->block);
        for (int64_t k = 0; k < (int64_t)l->r * IC; k++)
            A[k] = (2.0f * grpo_rng_uniform(&rng) - 1.0f) * bound;
    }
    l->m->ops->upload(l->m->ops->ctx, l->block, host, l->floats * sizeof(float));
    free(host);
    return GRPO_OK;
}

int grpo_lora_attach(grpo_lora *l, grpo_model *m, const grpo_lora_opts *o, uint64_t seed,
                     grpo_error *err) {
    memset(l, 0, sizeof *l);
    l->m = m, l->r = o->r, l->alpha = o->alpha, l->use_rslora = o->use_rslora;
    l->dropout = o->dropout;
    if (o->r <= 0) return grpo_error_set(err, GRPO_ERR_INVALID, "LoRA: r must be > 0");
    select_targets(l, o->target_modules);
    if (l->n == 0)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "lora.target_modules = %s: no linear weight of the model in %s matches "
                              "(expected all-linear or module names such as q_proj,v_proj)",
                              o->target_modules, m->dir);
    int rc = check_layouts(l, o->target_modules, err);
    if (rc != GRPO_OK) return rc;
    l->ad = calloc(l->n, sizeof *l->ad);
    l->block = m->ops->alloc(m->ops->ctx, 4 * l->floats * sizeof(float));
    if (!l->ad || !l->block) {
        grpo_lora_free(l);
        return grpo_error_set(err, GRPO_ERR_NOMEM, "LoRA: out of memory for %u adapters", l->n);
    }
    select_targets(l, o->target_modules);
    rc = init_weights(l, seed, err);
    if (rc == GRPO_OK) rc = grpo_lora_enable(l, 1, err);
    if (rc != GRPO_OK) grpo_lora_free(l);
    return rc;
}

int grpo_lora_dropout(grpo_lora *l, int on, uint64_t seed, grpo_error *err) {
    if (l->dropout <= 0.0) return GRPO_OK;
    for (uint32_t i = 0; i < l->n; i++) {
        l->ad[i].dropout = on ? (float)l->dropout : 0.0f;
        l->ad[i].seed = seed ^ ((uint64_t)(i + 1) * 0xd1b54a32d192ed03ull); /* per adapter */
    }
    return grpo_model_set_lora(l->m, l->ad, l->n, l->enabled, err);
}

int grpo_lora_enable(grpo_lora *l, int on, grpo_error *err) {
    int rc = grpo_model_set_lora(l->m, l->ad, l->n, on, err);
    if (rc == GRPO_OK) l->enabled = on;
    return rc;
}

void grpo_lora_zero_grad(grpo_lora *l) {
    if (l->block)
        l->m->ops->zero(l->m->ops->ctx, l->block + l->floats, l->floats * sizeof(float));
}

void grpo_lora_names(const grpo_lora *l, uint32_t i, char *a, char *b, size_t size) {
    char mod[512] = "";
    module_of(l->m->params[l->ad[i].param].name, mod, sizeof mod);
    snprintf(a, size, PEFT_PREFIX "%s.lora_A.weight", mod);
    snprintf(b, size, PEFT_PREFIX "%s.lora_B.weight", mod);
}

/* adapter_config.json as PEFT writes it (the fields from_pretrained reads). */
static char *config_json(const grpo_lora *l, const char *base_model) {
    cJSON *c = cJSON_CreateObject(), *mods = cJSON_CreateArray();
    for (uint32_t i = 0; i < l->n; i++) { /* PEFT lists the leaf names, each once */
        char mod[512];
        module_of(l->m->params[l->ad[i].param].name, mod, sizeof mod);
        const char *leaf = strrchr(mod, '.') + 1;
        const cJSON *e;
        int seen = 0;
        cJSON_ArrayForEach(e, mods) seen |= strcmp(e->valuestring, leaf) == 0;
        if (!seen) cJSON_AddItemToArray(mods, cJSON_CreateString(leaf));
    }
    cJSON_AddStringToObject(c, "peft_type", "LORA");
    cJSON_AddStringToObject(c, "task_type", "CAUSAL_LM");
    cJSON_AddStringToObject(c, "base_model_name_or_path", base_model ? base_model : "");
    cJSON_AddNumberToObject(c, "r", l->r);
    cJSON_AddNumberToObject(c, "lora_alpha", l->alpha);
    cJSON_AddNumberToObject(c, "lora_dropout", l->dropout);
    cJSON_AddItemToObject(c, "target_modules", mods);
    cJSON_AddBoolToObject(c, "use_rslora", l->use_rslora);
    cJSON_AddStringToObject(c, "bias", "none");
    cJSON_AddBoolToObject(c, "fan_in_fan_out", 0);
    cJSON_AddBoolToObject(c, "init_lora_weights", 1);
    cJSON_AddBoolToObject(c, "inference_mode", 1);
    cJSON_AddNullToObject(c, "modules_to_save");
    char *text = cJSON_Print(c);
    cJSON_Delete(c);
    return text;
}

int grpo_lora_save(const grpo_lora *l, const char *dir, const char *base_model, grpo_error *err) {
    float *host = malloc((l->floats ? l->floats : 1) * sizeof(float));
    grpo_st_out *t = calloc(2 * (size_t)l->n, sizeof *t);
    char (*names)[600] = calloc(2 * (size_t)l->n, sizeof *names);
    char path[4200];
    int rc = host && t && names ? GRPO_OK
                                : grpo_error_set(err, GRPO_ERR_NOMEM, "LoRA: out of memory");
    if (rc == GRPO_OK) {
        l->m->ops->download(l->m->ops->ctx, host, l->block, l->floats * sizeof(float));
        for (uint32_t i = 0; i < l->n; i++) {
            const grpo_param_desc *d = &l->m->params[l->ad[i].param];
            grpo_lora_names(l, i, names[2 * i], names[2 * i + 1], sizeof names[0]);
            t[2 * i] = (grpo_st_out){.name = names[2 * i],
                                     .data = host + (l->ad[i].A - l->block), .ndim = 2,
                                     .shape = {l->r, d->shape[1]}};
            t[2 * i + 1] = (grpo_st_out){.name = names[2 * i + 1],
                                         .data = host + (l->ad[i].B - l->block), .ndim = 2,
                                         .shape = {d->shape[0], l->r}};
        }
        rc = grpo_path_join(path, sizeof path, dir, "adapter_model.safetensors", err);
    }
    if (rc == GRPO_OK) rc = grpo_st_write(path, t, 2 * (size_t)l->n, GRPO_ST_F32, err);
    char *json = rc == GRPO_OK ? config_json(l, base_model) : NULL;
    if (rc == GRPO_OK && !json) rc = grpo_error_set(err, GRPO_ERR_NOMEM, "LoRA: out of memory");
    if (rc == GRPO_OK) rc = grpo_path_join(path, sizeof path, dir, "adapter_config.json", err);
    if (rc == GRPO_OK) rc = grpo_write_file_atomic(path, json, strlen(json), err);
    free(json), free(host), free(t), free(names);
    return rc;
}

/* Every lora_A / lora_B tensor of st must belong to an adapter here. */
static int no_strangers(const grpo_lora *l, const grpo_safetensors *st, const char *path,
                        grpo_error *err) {
    for (size_t k = 0; k < grpo_st_count(st); k++) {
        const char *name = grpo_st_at(st, k)->name;
        if (!strstr(name, ".lora_A.") && !strstr(name, ".lora_B.")) continue;
        int known = 0;
        for (uint32_t i = 0; i < l->n && !known; i++) {
            char a[600], b[600];
            grpo_lora_names(l, i, a, b, sizeof a);
            known = strcmp(name, a) == 0 || strcmp(name, b) == 0;
        }
        if (!known)
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "%s: tensor %s adapts a module lora.target_modules does not "
                                  "select here", path, name);
    }
    return GRPO_OK;
}

/* An adapter tensor x of shape (s[0], s[1]) holds finite values only; else an error naming it. */
static int all_finite(const float *x, const int64_t s[2], const char *path, const char *name,
                      grpo_error *err) {
    for (int64_t i = 0; i < s[0] * s[1]; i++)
        if (!isfinite(x[i]))
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "%s: tensor %s holds a non-finite value (%g at element %lld); "
                                  "expected finite adapter weights",
                                  path, name, (double)x[i], (long long)i);
    return GRPO_OK;
}

int grpo_lora_load(grpo_lora *l, const char *dir, grpo_error *err) {
    char path[4200];
    int rc = grpo_path_join(path, sizeof path, dir, "adapter_model.safetensors", err);
    grpo_safetensors *st = NULL;
    if (rc == GRPO_OK) rc = grpo_st_open(&st, path, err);
    float *host = rc == GRPO_OK ? malloc((l->floats ? l->floats : 1) * sizeof(float)) : NULL;
    if (rc == GRPO_OK && !host) rc = grpo_nomem(err, "the LoRA adapters read", l->floats * 4);
    if (rc == GRPO_OK) rc = no_strangers(l, st, path, err);
    for (uint32_t i = 0; rc == GRPO_OK && i < l->n; i++) {
        const grpo_param_desc *d = &l->m->params[l->ad[i].param];
        char a[600], b[600];
        grpo_lora_names(l, i, a, b, sizeof a);
        int64_t sa[2] = {l->r, d->shape[1]}, sb[2] = {d->shape[0], l->r};
        rc = grpo_st_read_f32(st, a, host + (l->ad[i].A - l->block), 2, sa, err);
        if (rc == GRPO_OK) rc = grpo_st_read_f32(st, b, host + (l->ad[i].B - l->block), 2, sb, err);
        if (rc == GRPO_OK) rc = all_finite(host + (l->ad[i].A - l->block), sa, path, a, err);
        if (rc == GRPO_OK) rc = all_finite(host + (l->ad[i].B - l->block), sb, path, b, err);
    }
    if (rc == GRPO_OK)
        l->m->ops->upload(l->m->ops->ctx, l->block, host, l->floats * sizeof(float));
    free(host);
    grpo_st_close(st);
    return rc;
}

void grpo_lora_free(grpo_lora *l) {
    grpo_error ignored;
    if (l->m && l->n) grpo_model_set_lora(l->m, NULL, 0, 0, &ignored);
    if (l->block) l->m->ops->free(l->m->ops->ctx, l->block);
    free(l->ad);
    memset(l, 0, sizeof *l);
}

/* adapter_config.json's target_modules (a string, or a list joined with commas) into out. */
static int targets_of(const cJSON *t, char *out, size_t size) {
    if (cJSON_IsString(t)) return snprintf(out, size, "%s", t->valuestring) < (int)size;
    if (!cJSON_IsArray(t) || cJSON_GetArraySize(t) == 0) return 0;
    size_t len = 0;
    out[0] = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, t) {
        if (!cJSON_IsString(e)) return 0;
        int w = snprintf(out + len, size - len, "%s%s", len ? "," : "", e->valuestring);
        if (w < 0 || (size_t)w >= size - len) return 0;
        len += (size_t)w;
    }
    return 1;
}

/* lora_dropout of an adapter_config.json: a number in [0, 1), else 0 (PEFT's default). */
static double drop_of(const cJSON *d) {
    return cJSON_IsNumber(d) && d->valuedouble > 0 && d->valuedouble < 1 ? d->valuedouble : 0.0;
}

/* The first PEFT option of c that changes the adapted model and that grpo does not implement
 * (DoRA, extra trained modules, per-module ranks or alphas, a subset of layers), or NULL. Each is
 * refused by name: ignoring it would merge or evaluate another model than PEFT's. */
static const char *unsupported_option(const cJSON *c) {
    static const struct {
        const char *key, *expected;
    } lists[] = {
        {"modules_to_save", "modules_to_save null or empty (not supported)"},
        {"alpha_pattern", "alpha_pattern null or empty (not supported)"},
        {"rank_pattern", "rank_pattern null or empty (not supported)"},
        {"layers_to_transform", "layers_to_transform null or empty (not supported)"},
        {"layer_replication", "layer_replication null or empty (not supported)"},
    };
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "use_dora")))
        return "use_dora false (DoRA is not supported)";
    for (size_t i = 0; i < sizeof lists / sizeof *lists; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, lists[i].key);
        int empty = !v || cJSON_IsNull(v) ||
                    ((cJSON_IsArray(v) || cJSON_IsObject(v)) && cJSON_GetArraySize(v) == 0);
        if (!empty) return lists[i].expected;
    }
    return NULL;
}

int grpo_lora_parse_config(const char *text, const char *path, grpo_lora_opts *o, char *targets,
                           size_t size, grpo_error *err) {
    cJSON *c = cJSON_Parse(text);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(c, "peft_type"),
                *r = cJSON_GetObjectItemCaseSensitive(c, "r"),
                *alpha = cJSON_GetObjectItemCaseSensitive(c, "lora_alpha"),
                *rs = cJSON_GetObjectItemCaseSensitive(c, "use_rslora"),
                *bias = cJSON_GetObjectItemCaseSensitive(c, "bias"),
                *fifo = cJSON_GetObjectItemCaseSensitive(c, "fan_in_fan_out");
    const char *bad = !c                                               ? "a JSON object"
                      : !cJSON_IsString(type) || strcmp(type->valuestring, "LORA")
                          ? "peft_type \"LORA\""
                      : !cJSON_IsNumber(r) || r->valuedouble < 1 || r->valuedouble > 4096 ||
                              r->valuedouble != floor(r->valuedouble)
                          ? "r, a whole number in [1, 4096]"
                      : !cJSON_IsNumber(alpha) || !(alpha->valuedouble > 0) ? "lora_alpha > 0"
                      : !targets_of(cJSON_GetObjectItemCaseSensitive(c, "target_modules"), targets,
                                    size)
                          ? "target_modules, a string or a list of module names"
                      : bias && !(cJSON_IsString(bias) && !strcmp(bias->valuestring, "none"))
                          ? "bias \"none\" (trained biases are not supported)"
                      : cJSON_IsTrue(fifo) ? "fan_in_fan_out false (Conv1D layers are not supported)"
                                           : unsupported_option(c);
    if (!bad)
        *o = (grpo_lora_opts){(int32_t)r->valuedouble, alpha->valuedouble, cJSON_IsTrue(rs),
                              targets, drop_of(cJSON_GetObjectItemCaseSensitive(c, "lora_dropout"))};
    cJSON_Delete(c);
    return bad ? grpo_error_set(err, GRPO_ERR_INVALID, "%s: expected %s", path, bad) : GRPO_OK;
}

int grpo_lora_open_dir(grpo_lora *l, grpo_model *m, const char *dir, grpo_error *err) {
    char path[4200], targets[4096], *text = NULL;
    grpo_lora_opts o;
    memset(l, 0, sizeof *l);
    int rc = grpo_path_join(path, sizeof path, dir, "adapter_config.json", err);
    if (rc == GRPO_OK) rc = grpo_read_file(path, &text, NULL, err);
    if (rc == GRPO_OK) rc = grpo_lora_parse_config(text, path, &o, targets, sizeof targets, err);
    free(text);
    if (rc == GRPO_OK) rc = grpo_lora_attach(l, m, &o, 0, err);
    if (rc == GRPO_OK) rc = grpo_lora_load(l, dir, err);
    if (rc != GRPO_OK) grpo_lora_free(l);
    return rc;
}

int grpo_lora_merge(grpo_lora *l, grpo_error *err) {
    const grpo_ops *o = l->m->ops;
    float *ab = malloc((l->floats ? l->floats : 1) * sizeof(float));
    int rc = ab ? GRPO_OK : grpo_nomem(err, "the LoRA adapters to merge", l->floats * 4);
    if (rc == GRPO_OK) o->download(o->ctx, ab, l->block, l->floats * sizeof(float));
    for (uint32_t i = 0; rc == GRPO_OK && i < l->n; i++) {
        const grpo_lora_adapter *a = &l->ad[i];
        uint32_t p = a->param;
        int64_t OC = l->m->params[p].shape[0], IC = l->m->params[p].shape[1];
        float *w = malloc((size_t)(OC * IC) * sizeof(float));
        if (!w) {
            rc = grpo_nomem(err, l->m->params[p].name, (uint64_t)(OC * IC) * sizeof(float));
            break;
        }
        const float *A = ab + (a->A - l->block), *B = ab + (a->B - l->block);
        rc = grpo_model_read_param(l->m, p, w, err);
        for (int64_t r = 0; rc == GRPO_OK && r < OC; r++) /* W (OC,IC) += s B (OC,r) A (r,IC), in double */
            for (int64_t c = 0; c < IC; c++) {
                double acc = 0.0;
                for (int32_t k = 0; k < l->r; k++) acc += (double)B[r * l->r + k] * A[k * IC + c];
                w[r * IC + c] = (float)((double)w[r * IC + c] + a->scale * acc);
            }
        if (rc == GRPO_OK) rc = grpo_model_write_param(l->m, p, w, err);
        free(w);
    }
    free(ab);
    if (rc == GRPO_OK) rc = grpo_model_set_lora(l->m, NULL, 0, 0, err); /* now in the weights */
    if (rc == GRPO_OK) l->enabled = 0, l->n = 0;
    return rc;
}
