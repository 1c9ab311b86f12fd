/* train_state.c — checkpoint contents beyond the model (see train_state.h). */
#include "train/train_state.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "train/checkpoint.h"
#include "base/comm.h"
#include "base/files.h"
#include "train/run.h"
#include "io/safetensors.h"
#include "base/nomem.h"

/* What the optimizer trains, for its moments in optimizer.safetensors: the policy's non-tied
 * tensors (under their names), or its LoRA adapters (under PEFT's tensor names). */
typedef struct moment_tensor {
    char name[600];
    uint64_t off, numel; /* in the moment blocks */
    int ndim;
    int64_t shape[4];
} moment_tensor;

typedef struct moments {
    const grpo_ops *ops;
    float *m, *v; /* AdamW exp_avg, exp_avg_sq blocks (backend), P floats each */
    uint64_t P;
    size_t n;
    moment_tensor *t; /* [n] */
} moments;

static int moments_of(moments *ms, const grpo_model *m, const grpo_lora *l, grpo_error *err) {
    memset(ms, 0, sizeof *ms);
    size_t cap = l ? 2 * (size_t)l->n : m->n_params;
    if (!(ms->t = calloc(cap ? cap : 1, sizeof *ms->t)))
        return grpo_error_set(err, GRPO_ERR_NOMEM, "checkpoint: out of memory");
    ms->ops = m->ops;
    if (l) {
        ms->P = l->floats, ms->m = l->block + 2 * l->floats, ms->v = l->block + 3 * l->floats;
        for (uint32_t i = 0; i < l->n; i++) {
            const grpo_param_desc *d = &m->params[l->ad[i].param];
            moment_tensor *a = &ms->t[ms->n++], *b = &ms->t[ms->n++];
            *a = (moment_tensor){.off = (uint64_t)(l->ad[i].A - l->block),
                                 .numel = (uint64_t)l->r * d->shape[1], .ndim = 2,
                                 .shape = {l->r, d->shape[1]}};
            *b = (moment_tensor){.off = (uint64_t)(l->ad[i].B - l->block),
                                 .numel = (uint64_t)d->shape[0] * l->r, .ndim = 2,
                                 .shape = {d->shape[0], l->r}};
            grpo_lora_names(l, i, a->name, b->name, sizeof a->name);
        }
        return GRPO_OK;
    }
    ms->P = m->section, ms->m = m->adam_m, ms->v = m->adam_v;
    for (uint32_t i = 0; i < m->n_params; i++) {
        const grpo_param_desc *d = &m->params[i];
        if (d->flags & GRPO_PARAM_TIED) continue;
        moment_tensor *t = &ms->t[ms->n++];
        snprintf(t->name, sizeof t->name, "%s", d->name);
        t->off = m->offset[i], t->numel = m->numel[i], t->ndim = d->ndim;
        for (int k = 0; k < d->ndim; k++) t->shape[k] = d->shape[k];
    }
    return GRPO_OK;
}

/* grpo_st_out.fill of write_moments: key = 2 * tensor + (0 exp_avg, 1 exp_avg_sq),
 * downloaded. */
static int fill_moment(void *ctx, uint64_t key, float *buf, grpo_error *err) {
    (void)err;
    const moments *ms = ctx;
    const moment_tensor *t = &ms->t[key / 2];
    ms->ops->download(ms->ops->ctx, buf, (key % 2 ? ms->v : ms->m) + t->off,
                      t->numel * sizeof(float));
    return GRPO_OK;
}

/* The moments under exp_avg.NAME / exp_avg_sq.NAME, downloaded one tensor at a time as the
 * writer reaches it. */
static int write_moments(grpo_ckpt *c, const moments *ms, grpo_error *err) {
    grpo_st_out *outs = calloc(2 * ms->n + 1, sizeof *outs);
    char (*names)[620] = calloc(2 * ms->n + 1, sizeof *names);
    int rc = outs && names ? GRPO_OK
                           : grpo_nomem(err, "the optimizer moments' names to save",
                                        (2 * ms->n + 1) * (sizeof *outs + sizeof *names));
    size_t n = 0;
    for (size_t i = 0; rc == GRPO_OK && i < ms->n; i++)
        for (int k = 0; k < 2; k++, n++) {
            const moment_tensor *t = &ms->t[i];
            snprintf(names[n], sizeof names[n], "%s.%s", k ? "exp_avg_sq" : "exp_avg", t->name);
            outs[n] = (grpo_st_out){.name = names[n], .ndim = t->ndim, .fill = fill_moment,
                                    .ctx = (void *)ms, .key = n};
            memcpy(outs[n].shape, t->shape, sizeof t->shape);
        }
    char path[4200];
    grpo_ckpt_path(c, "optimizer.safetensors", path, sizeof path);
    if (rc == GRPO_OK) rc = grpo_st_write(path, outs, n, GRPO_ST_F32, err);
    free(names), free(outs);
    return rc;
}

void grpo_run_id_new(char id[33]) {
    uint64_t w[2] = {0, 0};
    if (getrandom(w, sizeof w, 0) != (ssize_t)sizeof w) { /* no entropy source: time and pid */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        w[0] = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        w[1] = ((uint64_t)getpid() << 32) ^ (uint64_t)clock();
    }
    snprintf(id, 33, "%016" PRIx64 "%016" PRIx64, w[0], w[1]);
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
    if (st->run_id[0]) cJSON_AddStringToObject(j, "run_id", st->run_id);
    cJSON *run = st->record ? cJSON_Parse(st->record) : NULL;
    if (run) cJSON_AddItemToObject(j, "run", run);
    if (st->best.metric[0]) {
        cJSON *b = cJSON_AddObjectToObject(j, "best");
        cJSON_AddStringToObject(b, "metric", st->best.metric);
        cJSON_AddStringToObject(b, "mode", st->best.min ? "min" : "max");
        cJSON_AddNumberToObject(b, "value", st->best.value); /* cJSON prints it round-trip */
        cJSON_AddNumberToObject(b, "step", (double)st->best.step);
    }
    text = st->record && !run ? NULL : cJSON_Print(j);
    cJSON_Delete(j);
    if (!text) return grpo_error_set(err, GRPO_ERR_NOMEM, "checkpoint: out of memory");
    int rc = grpo_ckpt_write(c, "trainer_state.json", text, strlen(text), err);
    free(text);
    return rc;
}

/* dir/README.md = card (nothing when card is NULL), written atomically. */
static int write_card(const char *dir, const char *card, grpo_error *err) {
    char path[4200];
    if (!card) return GRPO_OK;
    int rc = grpo_path_join(path, sizeof path, dir, "README.md", err);
    return rc == GRPO_OK ? grpo_write_file_atomic(path, card, strlen(card), err) : rc;
}

/* root/checkpoint-STEP (best: root/checkpoint-best), see grpo_checkpoint_save. */
static int save_checkpoint(const char *root, int keep, int best, const grpo_model *m,
                           const grpo_lora *lora, const grpo_train_state *st, const char *card,
                           grpo_error *err) {
    grpo_ckpt c;
    int rc = best ? grpo_ckpt_begin_best(&c, root, st->step, err)
                  : grpo_ckpt_begin(&c, root, st->step, err);
    if (rc != GRPO_OK) return rc;
    memcpy(c.run_id, st->run_id, sizeof c.run_id);
    moments ms = {0};
    const char *full[] = {"config.json", "model.safetensors", "optimizer.safetensors"};
    const char *adapters[] = {"adapter_config.json", "adapter_model.safetensors",
                              "optimizer.safetensors"};
    const char *const *synced = lora ? adapters : full;
    int trained = lora || m->adam_m;
    /* a LoRA checkpoint holds the adapters alone: the base is model.path, frozen */
    rc = lora ? grpo_lora_save(lora, c.tmp, m->dir, err)
              : grpo_model_save(m, c.tmp, err); /* with the tokenizer files it was opened with */
    if (rc == GRPO_OK) rc = write_card(c.tmp, card, err);
    if (rc == GRPO_OK && trained) rc = moments_of(&ms, m, lora, err);
    if (rc == GRPO_OK && trained) rc = write_moments(&c, &ms, err);
    if (rc == GRPO_OK) rc = write_state(&c, st, err);
    for (int i = 0; rc == GRPO_OK && i < 3; i++)
        if (i < 2 || trained) rc = grpo_ckpt_sync_file(&c, synced[i], err);
    free(ms.t);
    if (rc == GRPO_OK) return grpo_ckpt_commit(&c, keep, err);
    grpo_ckpt_abort(&c);
    return rc;
}

int grpo_checkpoint_save(const char *root, int keep, const grpo_model *m, const grpo_lora *lora,
                         const grpo_train_state *st, const char *card, grpo_error *err) {
    return save_checkpoint(root, keep, 0, m, lora, st, card, err);
}

int grpo_checkpoint_save_best(const char *root, const grpo_model *m, const grpo_lora *lora,
                              const grpo_train_state *st, const char *card, grpo_error *err) {
    return save_checkpoint(root, 0, 1, m, lora, st, card, err);
}

static int read_moments(const char *dir, const moments *ms, grpo_error *err) {
    char path[4200];
    grpo_safetensors *st;
    int rc = grpo_path_join(path, sizeof path, dir, "optimizer.safetensors", err);
    if (rc == GRPO_OK) rc = grpo_st_open(&st, path, err);
    if (rc != GRPO_OK) return rc;
    char name[620];
    for (size_t i = 0; rc == GRPO_OK && i < ms->n; i++) {
        const moment_tensor *mt = &ms->t[i];
        for (int k = 0; k < 2; k++) {
            snprintf(name, sizeof name, "%s.%s", k ? "exp_avg_sq" : "exp_avg", mt->name);
            const grpo_st_tensor *t = grpo_st_find(st, name);
            if (!t || t->dtype != GRPO_ST_F32 || t->numel != mt->numel) {
                rc = grpo_error_set(err, GRPO_ERR_INVALID,
                                    "%s: tensor %s missing or not F32 with %llu elements", path,
                                    name, (unsigned long long)mt->numel);
                break;
            }
            float *dst = (k ? ms->v : ms->m) + mt->off;
            ms->ops->upload(ms->ops->ctx, dst, t->data, t->nbytes);
        }
    }
    grpo_st_close(st);
    return rc;
}

/* A whole number in [lo, hi] (doubles hold integers exactly up to 2^53). */
static int whole_in(const cJSON *v, double lo, double hi) {
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble >= lo &&
           v->valuedouble <= hi && v->valuedouble == floor(v->valuedouble);
}

/* One sampler RNG word: exactly 16 hex digits. */
static int rng_word(const cJSON *w, uint64_t *out) {
    if (!cJSON_IsString(w) || strlen(w->valuestring) != 16) return 0;
    char *end;
    *out = strtoull(w->valuestring, &end, 16);
    return *end == 0 && w->valuestring[0] != '-' && w->valuestring[0] != '+';
}

/* "best" (absent: none yet) into *b: a metric name, mode max or min, a finite value and a step
 * in [0, step]. */
static int parse_best(const cJSON *j, const char *path, double step, grpo_best *b,
                      grpo_error *err) {
    memset(b, 0, sizeof *b);
    if (!j) return GRPO_OK;
    const cJSON *metric = cJSON_GetObjectItemCaseSensitive(j, "metric");
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(j, "mode");
    const cJSON *value = cJSON_GetObjectItemCaseSensitive(j, "value");
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(j, "step");
    int min = cJSON_IsString(mode) && !strcmp(mode->valuestring, "min");
    if (!cJSON_IsString(metric) || !metric->valuestring[0] ||
        strlen(metric->valuestring) >= sizeof b->metric || !cJSON_IsString(mode) ||
        (!min && strcmp(mode->valuestring, "max")) || !cJSON_IsNumber(value) ||
        !isfinite(value->valuedouble) || !whole_in(at, 0, step))
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: best: expected {\"metric\": a name, \"mode\": \"max\" or "
                              "\"min\", \"value\": a finite number, \"step\": a whole number "
                              "in [0, step = %.0f]}",
                              path, step);
    snprintf(b->metric, sizeof b->metric, "%s", metric->valuestring);
    b->min = min, b->value = value->valuedouble, b->step = (long)at->valuedouble;
    return GRPO_OK;
}

/* Everything read back is range-checked: a checkpoint is outside data like any other. */
static int parse_state(const cJSON *j, const char *path, grpo_train_state *st, grpo_error *err) {
    const double max_step = 9007199254740992.0; /* 2^53 */
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(j, "step");
    const cJSON *ostep = cJSON_GetObjectItemCaseSensitive(j, "optimizer_step");
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(j, "num_tokens");
    const cJSON *rng = cJSON_GetObjectItemCaseSensitive(j, "sampler_rng");
    const cJSON *cur = cJSON_GetObjectItemCaseSensitive(j, "data_cursor");
    if (!cJSON_IsObject(j) || !cJSON_IsNumber(step) || !cJSON_IsNumber(ostep) ||
        !cJSON_IsNumber(tok) || !cJSON_IsArray(rng) || cJSON_GetArraySize(rng) != 4 ||
        !cJSON_IsString(cur))
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: expected step, optimizer_step, num_tokens, sampler_rng (4 hex "
                              "strings) and data_cursor",
                              path);
    if (!whole_in(step, 0, max_step))
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: step %g: expected a whole number in [0, 2^53]", path,
                              step->valuedouble);
    if (!whole_in(ostep, 0, step->valuedouble))
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: optimizer_step %g: expected a whole number in [0, step = %.0f]",
                              path, ostep->valuedouble, step->valuedouble);
    if (!isfinite(tok->valuedouble) || tok->valuedouble < 0)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: num_tokens %g: expected a finite number >= 0", path,
                              tok->valuedouble);
    for (int i = 0; i < 4; i++) /* (all zero is what sft, which samples nothing, saves) */
        if (!rng_word(cJSON_GetArrayItem(rng, i), &st->rng.s[i]))
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "%s: sampler_rng[%d]: expected 16 hex digits", path, i);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "run_id"); /* absent before the mark */
    if (id && !(cJSON_IsString(id) && strlen(id->valuestring) == 32 &&
                strspn(id->valuestring, "0123456789abcdef") == 32))
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: run_id: expected 32 hex digits", path);
    if (id) memcpy(st->run_id, id->valuestring, 33);
    int rc = parse_best(cJSON_GetObjectItemCaseSensitive(j, "best"), path, step->valuedouble,
                        &st->best, err);
    if (rc != GRPO_OK) return rc;
    st->step = (long)step->valuedouble, st->optimizer_step = (long)ostep->valuedouble;
    st->num_tokens = tok->valuedouble;
    rc = grpo_data_cursor_parse(cur->valuestring, &st->cursor, err);
    if (rc != GRPO_OK) {
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err->message);
        return grpo_error_set(err, rc, "%s: %s", path, why);
    }
    return GRPO_OK;
}

int grpo_train_state_parse(const char *text, const char *path, grpo_train_state *st,
                           grpo_error *err) {
    cJSON *j = cJSON_Parse(text);
    int rc = parse_state(j, path, st, err);
    cJSON_Delete(j);
    return rc;
}

static int read_state(const char *dir, grpo_train_state *st, grpo_error *err) {
    char path[4200], *text = NULL;
    int rc = grpo_path_join(path, sizeof path, dir, "trainer_state.json", err);
    if (rc == GRPO_OK) rc = grpo_read_file(path, &text, NULL, err);
    if (rc != GRPO_OK) return rc;
    rc = grpo_train_state_parse(text, path, st, err);
    free(text);
    return rc;
}

/* Restores the optimizer moments of m (or of its adapters lora) and reads st. */
static int grpo_checkpoint_load(const char *ckpt_dir, grpo_model *m, grpo_lora *lora,
                                grpo_train_state *st, grpo_error *err) {
    moments ms = {0};
    int rc = read_state(ckpt_dir, st, err);
    if (rc == GRPO_OK && lora) rc = grpo_lora_load(lora, ckpt_dir, err);
    if (rc == GRPO_OK && (lora || m->adam_m)) rc = moments_of(&ms, m, lora, err);
    if (rc == GRPO_OK && (lora || m->adam_m)) rc = read_moments(ckpt_dir, &ms, err);
    free(ms.t);
    return rc;
}

/* Restores checkpoint dir (of step) into st and either a trainable policy opened from it
 * (*policy) or, for a LoRA run, the adapters lora on the base the caller opened. */
static int resume_from(grpo_run *r, const char *dir, long step, grpo_model **policy,
                       grpo_lora *lora, grpo_train_state *st, grpo_error *err) {
    int rc = lora ? GRPO_OK : grpo_run_open_model(r, dir, 1, policy, err);
    if (rc == GRPO_OK) rc = grpo_checkpoint_load(dir, *policy, lora, st, err);
    if (rc == GRPO_OK && st->step != step)
        rc = grpo_error_set(err, GRPO_ERR_INVALID,
                            "%s/trainer_state.json: step %ld does not match the directory's step "
                            "%ld",
                            dir, st->step, step);
    if (rc != GRPO_OK && !lora) grpo_model_close(*policy), *policy = NULL;
    return rc;
}

int grpo_checkpoint_resume(grpo_run *r, const char *root, grpo_model **policy, grpo_lora *lora,
                           grpo_train_state *st, grpo_error *err) {
    long *steps = NULL;
    int n = grpo_ckpt_list(root, &steps, err), rc = n < 0 ? n : GRPO_ERR_IO;
    char dir[4200], skipped[256] = "";
    if (n == 0)
        grpo_error_set(err, GRPO_ERR_IO,
                       "%s: no checkpoint to resume from (expected a checkpoint-NNNNNNNN "
                       "directory)",
                       root);
    for (int i = 0; i < n; i++) {
        grpo_ckpt_dir(root, steps[i], dir, sizeof dir);
        grpo_train_state saved = *st;
        if ((rc = resume_from(r, dir, steps[i], policy, lora, st, err)) == GRPO_OK) break;
        *st = saved;
        fprintf(stderr, "warning: --resume: skipping %s: %s\n", dir, err->message);
        snprintf(skipped + strlen(skipped), sizeof skipped - strlen(skipped), "%s%08ld",
                 skipped[0] ? ", " : "", steps[i]);
        if (i == n - 1)
            grpo_error_set(err, GRPO_ERR_INVALID,
                           "%s: no checkpoint that loads (skipped checkpoint-%s)", root, skipped);
    }
    if (rc == GRPO_OK) {
        if (grpo_comm_rank() == 0) /* every rank resumes; one says so */
            fprintf(stderr, "resuming from %s (step %ld)\n", dir, st->step);
        if (skipped[0])
            fprintf(stderr,
                    "warning: --resume: the newer checkpoint(s) %s were skipped; they are "
                    "replaced when the run saves those steps again\n",
                    skipped);
    }
    free(steps);
    return rc;
}

int grpo_train_data_order(grpo_data_order *o, const grpo_run *r, const grpo_dataset *d,
                          const grpo_train_state *st, int resume, grpo_error *err) {
    const grpo_run_config *cfg = &r->cfg;
    if (!resume)
        return grpo_data_order_init(o, d->n, (uint64_t)cfg->data_seed, cfg->data_shuffle, err);
    int rc = grpo_data_order_restore(o, d->n, st->cursor, cfg->data_shuffle, err);
    if (rc != GRPO_OK) {
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err->message);
        grpo_error_set(err, rc, "--resume: the checkpoint's data_cursor does not fit %s: %s",
                       d->path, why);
    }
    return rc;
}

int grpo_model_export(const grpo_model *m, const grpo_lora *lora, const char *dir,
                      const char *card, grpo_error *err) {
    int rc = GRPO_OK;
    if (lora && grpo_mkdirs(dir) != 0)
        rc = grpo_error_set(err, GRPO_ERR_IO, "cannot create %s: %s", dir, strerror(errno));
    if (rc == GRPO_OK)
        rc = lora ? grpo_lora_save(lora, dir, m->dir, err) : grpo_model_save(m, dir, err);
    return rc == GRPO_OK ? write_card(dir, card, err) : rc;
}
