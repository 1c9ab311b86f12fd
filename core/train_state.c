/* train_state.c — checkpoint contents beyond the model (see train_state.h). */
#include "train_state.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "safetensors.h"

static int copy_file(grpo_ckpt *c, const char *dir, const char *name, int optional,
                     grpo_error *err) {
    char src[4200];
    snprintf(src, sizeof src, "%s/%s", dir, name);
    char *data = NULL;
    size_t len = 0;
    FILE *f = fopen(src, "rb");
    if (!f)
        return optional ? GRPO_OK
                        : grpo_error_set(err, GRPO_ERR_IO, "checkpoint: cannot read %s", src);
    fclose(f);
    int rc = grpo_read_file(src, &data, &len, err);
    if (rc == GRPO_OK) rc = grpo_ckpt_write(c, name, data, len, err);
    free(data);
    return rc;
}

/* The moments of every non-tied tensor, downloaded, under exp_avg.NAME / exp_avg_sq.NAME. */
static int write_moments(grpo_ckpt *c, const grpo_model *m, grpo_error *err) {
    size_t P = m->section;
    float *host = malloc(2 * P * sizeof(float));
    grpo_st_out *outs = calloc(2 * (size_t)m->n_params, sizeof *outs);
    char **names = calloc(2 * (size_t)m->n_params, sizeof *names);
    int rc = host && outs && names
                 ? GRPO_OK
                 : grpo_error_set(err, GRPO_ERR_NOMEM, "checkpoint: out of memory");
    size_t n = 0;
    if (rc == GRPO_OK) {
        m->ops->download(m->ops->ctx, host, m->adam_m, P * sizeof(float));
        m->ops->download(m->ops->ctx, host + P, m->adam_v, P * sizeof(float));
        for (uint32_t i = 0; i < m->n_params; i++) {
            const grpo_param_desc *d = &m->params[i];
            if (d->flags & GRPO_PARAM_TIED) continue;
            for (int k = 0; k < 2; k++, n++) {
                size_t len = strlen(d->name) + 16;
                if (!(names[n] = malloc(len))) {
                    rc = grpo_error_set(err, GRPO_ERR_NOMEM, "checkpoint: out of memory");
                    break;
                }
                snprintf(names[n], len, "%s.%s", k ? "exp_avg_sq" : "exp_avg", d->name);
                outs[n].name = names[n];
                outs[n].data = host + k * P + m->offset[i];
                outs[n].ndim = d->ndim;
                for (int j = 0; j < d->ndim; j++) outs[n].shape[j] = d->shape[j];
            }
        }
    }
    char path[4200];
    grpo_ckpt_path(c, "optimizer.safetensors", path, sizeof path);
    if (rc == GRPO_OK) rc = grpo_st_write(path, outs, n, GRPO_ST_F32, err);
    for (size_t i = 0; names && i < 2 * (size_t)m->n_params; i++) free(names[i]);
    free(names), free(outs), free(host);
    return rc;
}

static int write_state(grpo_ckpt *c, const grpo_train_state *st, grpo_error *err) {
    char cursor[256], words[4][32], *text;
    grpo_data_cursor_format(&st->cursor, cursor, sizeof cursor);
    cJSON *j = cJSON_CreateObject(), *rng = cJSON_AddArrayToObject(j, "sampler_rng");
    cJSON_AddNumberToObject(j, "step", (double)st->step);
    cJSON_AddNumberToObject(j, "optimizer_step", (double)st->optimizer_step);
    cJSON_AddNumberToObject(j, "num_tokens", st->num_tokens);
    for (int i = 0; i < 4; i++) {
        snprintf(words[i], sizeof words[i], "%016" PRIx64, st->rng.s[i]);
        cJSON_AddItemToArray(rng, cJSON_CreateString(words[i]));
    }
    cJSON_AddStringToObject(j, "data_cursor", cursor);
    text = cJSON_Print(j);
    cJSON_Delete(j);
    if (!text) return grpo_error_set(err, GRPO_ERR_NOMEM, "checkpoint: out of memory");
    int rc = grpo_ckpt_write(c, "trainer_state.json", text, strlen(text), err);
    free(text);
    return rc;
}

int grpo_checkpoint_save(const char *root, int keep, const grpo_model *m, const char *model_dir,
                         const grpo_train_state *st, grpo_error *err) {
    grpo_ckpt c;
    int rc = grpo_ckpt_begin(&c, root, st->step, err);
    if (rc != GRPO_OK) return rc;
    const char *synced[] = {"config.json", "model.safetensors", "optimizer.safetensors"};
    rc = grpo_model_save(m, c.tmp, err);
    if (rc == GRPO_OK) rc = copy_file(&c, model_dir, "tokenizer.json", 0, err);
    if (rc == GRPO_OK) rc = copy_file(&c, model_dir, "tokenizer_config.json", 1, err);
    if (rc == GRPO_OK) rc = copy_file(&c, model_dir, "chat_template.jinja", 1, err);
    if (rc == GRPO_OK && m->adam_m) rc = write_moments(&c, m, err);
    if (rc == GRPO_OK) rc = write_state(&c, st, err);
    for (int i = 0; rc == GRPO_OK && i < 3; i++)
        if (i < 2 || m->adam_m) rc = grpo_ckpt_sync_file(&c, synced[i], err);
    if (rc == GRPO_OK) return grpo_ckpt_commit(&c, keep, err);
    grpo_ckpt_abort(&c);
    return rc;
}

static int read_moments(const char *dir, grpo_model *m, grpo_error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/optimizer.safetensors", dir);
    grpo_safetensors *st;
    int rc = grpo_st_open(&st, path, err);
    if (rc != GRPO_OK) return rc;
    char name[512];
    for (uint32_t i = 0; rc == GRPO_OK && i < m->n_params; i++) {
        const grpo_param_desc *d = &m->params[i];
        if (d->flags & GRPO_PARAM_TIED) continue;
        for (int k = 0; k < 2; k++) {
            snprintf(name, sizeof name, "%s.%s", k ? "exp_avg_sq" : "exp_avg", d->name);
            const grpo_st_tensor *t = grpo_st_find(st, name);
            if (!t || t->dtype != GRPO_ST_F32 || t->numel != m->numel[i]) {
                rc = grpo_error_set(err, GRPO_ERR_INVALID,
                                    "%s: tensor %s missing or not F32 with %llu elements", path,
                                    name, (unsigned long long)m->numel[i]);
                break;
            }
            float *dst = (k ? m->adam_v : m->adam_m) + m->offset[i];
            m->ops->upload(m->ops->ctx, dst, t->data, t->nbytes);
        }
    }
    grpo_st_close(st);
    return rc;
}

static int read_state(const char *dir, grpo_train_state *st, grpo_error *err) {
    char path[4200], *text = NULL;
    snprintf(path, sizeof path, "%s/trainer_state.json", dir);
    int rc = grpo_read_file(path, &text, NULL, err);
    if (rc != GRPO_OK) return rc;
    cJSON *j = cJSON_Parse(text);
    free(text);
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(j, "step");
    const cJSON *ostep = cJSON_GetObjectItemCaseSensitive(j, "optimizer_step");
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(j, "num_tokens");
    const cJSON *rng = cJSON_GetObjectItemCaseSensitive(j, "sampler_rng");
    const cJSON *cur = cJSON_GetObjectItemCaseSensitive(j, "data_cursor");
    if (!cJSON_IsNumber(step) || !cJSON_IsNumber(ostep) || !cJSON_IsNumber(tok) ||
        !cJSON_IsArray(rng) || cJSON_GetArraySize(rng) != 4 || !cJSON_IsString(cur)) {
        cJSON_Delete(j);
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: expected step, optimizer_step, num_tokens, sampler_rng (4 hex "
                              "strings) and data_cursor",
                              path);
    }
    st->step = (long)step->valuedouble, st->optimizer_step = (long)ostep->valuedouble;
    st->num_tokens = tok->valuedouble;
    for (int i = 0; i < 4; i++) {
        const cJSON *w = cJSON_GetArrayItem(rng, i);
        st->rng.s[i] = cJSON_IsString(w) ? strtoull(w->valuestring, NULL, 16) : 0;
    }
    rc = grpo_data_cursor_parse(cur->valuestring, &st->cursor, err);
    cJSON_Delete(j);
    return rc;
}

int grpo_checkpoint_load(const char *ckpt_dir, grpo_model *m, grpo_train_state *st,
                         grpo_error *err) {
    int rc = read_state(ckpt_dir, st, err);
    if (rc == GRPO_OK && m->adam_m) rc = read_moments(ckpt_dir, m, err);
    return rc;
}

int grpo_model_export(const grpo_model *m, const char *model_dir, const char *dir,
                      grpo_error *err) {
    int rc = grpo_model_save(m, dir, err);
    const char *files[] = {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"};
    for (int i = 0; rc == GRPO_OK && i < 3; i++) {
        char src[4200], dst[4200], *data = NULL;
        size_t len = 0;
        snprintf(src, sizeof src, "%s/%s", model_dir, files[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        FILE *f = fopen(src, "rb");
        if (!f) {
            if (i == 0) rc = grpo_error_set(err, GRPO_ERR_IO, "export: cannot read %s", src);
            continue;
        }
        fclose(f);
        rc = grpo_read_file(src, &data, &len, err);
        if (rc == GRPO_OK) rc = grpo_write_file_atomic(dst, data, len, err);
        free(data);
    }
    return rc;
}
