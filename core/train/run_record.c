/* run_record.c — a run's resolved run file and input digests, compared on --resume and across
 * ranks (see run_record.h). */
#include "train/run_record.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/comm.h"
#include "base/files.h"
#include "config/config_keys.h"

/* Keys that say only where and how often a run writes, and which checkpoints it keeps: they may
 * change between a checkpoint and its resume (a resumed best of another metric or mode is dropped,
 * best.h), and between ranks (rank 0 alone writes). So may a reward's deadline
 * (reward.NAME.timeout), its workers and rows_independent: they say how long to wait, how many
 * calls run at once and how a batch is split into calls, not what is scored (a reward whose rows
 * are independent scores a row the same alone or in a group); and checkpoints written before
 * they were host keys lack them. */
static const char *const free_keys[] = {
    "log.dir",         "log.every",       "log.completions_every",  "log.tensorboard",
    "checkpoint.dir",  "checkpoint.every", "checkpoint.keep",       "checkpoint.best_metric",
    "checkpoint.best_mode"};

/* reward.NAME.KEY for a host key that says how, not what, is scored. */
static int is_free_reward_key(const char *key, const char *tail) {
    size_t n = strlen(key), t = strlen(tail);
    return !strncmp(key, "reward.", 7) && n > t && !strcmp(key + n - t, tail);
}

static int is_free(const char *key) {
    if (is_free_reward_key(key, ".timeout") || is_free_reward_key(key, ".workers") ||
        is_free_reward_key(key, ".rows_independent"))
        return 1;
    for (size_t i = 0; i < sizeof free_keys / sizeof *free_keys; i++)
        if (!strcmp(key, free_keys[i])) return 1;
    return 0;
}

/* ---- making a record ------------------------------------------------------------------------ */

typedef struct record_ctx {
    const grpo_run *r;
    cJSON *config, *files;
    grpo_error *err;
} record_ctx;

/* One resolved value into the record: an input file by its digest, anything else as text. */
static int record_one(void *ctx, const char *section, const char *key, const char *value,
                      const char *mark, unsigned flags) {
    record_ctx *c = ctx;
    char name[512], hex[65];
    (void)mark;
    snprintf(name, sizeof name, "%s.%s", section, key);
    if (!(flags & GRPO_KEY_FILE) || !value[0])
        return !cJSON_AddStringToObject(c->config, name, value);
    char *path = grpo_run_path(c->r, value);
    int rc = path ? grpo_sha256_file(path, name, hex, c->err)
                  : grpo_error_set(c->err, GRPO_ERR_NOMEM, "out of memory resolving %s", name);
    free(path);
    return rc != GRPO_OK || !cJSON_AddStringToObject(c->files, name, hex);
}

char *grpo_run_record_make(const grpo_run *r, grpo_error *err) {
    cJSON *j = cJSON_CreateObject();
    record_ctx c = {r, cJSON_AddObjectToObject(j, "config"), cJSON_AddObjectToObject(j, "files"),
                    err};
    err->status = GRPO_OK;
    int bad = !c.config || !c.files || grpo_run_config_visit(&r->cfg, record_one, &c);
    char *text = bad ? NULL : cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!text && err->status == GRPO_OK)
        grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory making the run's record");
    return text;
}

/* ---- comparing two ---------------------------------------------------------------------------- */

/* key is one of the comma-separated names of list. */
static int listed(const char *list, const char *key) {
    size_t n = strlen(key);
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, key, n)) return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

/* A growing "KEY (A then, B now), ..." list in out[cap]; cut with "..." when full. */
typedef struct diff_list {
    char *out;
    size_t cap, len;
    int n;
    const char *label_a, *label_b;
} diff_list;

static void diff_add(diff_list *d, const char *key, const char *a, const char *b, int digest) {
    char item[600];
    if (digest) /* 12 hex digits name a digest well enough to tell two apart */
        snprintf(item, sizeof item, "%s (contents differ: sha256 %.12s... %s, %.12s... %s)", key,
                 a ? a : "none", d->label_a, b ? b : "none", d->label_b);
    else
        snprintf(item, sizeof item, "%s (%s%s%s %s, %s%s%s %s)", key, a ? "'" : "", a ? a : "unset",
                 a ? "'" : "", d->label_a, b ? "'" : "", b ? b : "unset", b ? "'" : "", d->label_b);
    d->n++;
    if (d->len + 1 >= d->cap) return;
    int w = snprintf(d->out + d->len, d->cap - d->len, "%s%s", d->n > 1 ? ", " : "", item);
    if (w < 0 || (size_t)w >= d->cap - d->len) {
        if (d->cap >= 4) snprintf(d->out + d->cap - 4, 4, "...");
        d->len = d->cap;
        return;
    }
    d->len += (size_t)w;
}

/* The string value of key in object o, or NULL. */
static const char *str_of(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Two values of a key are the same: the same text, or the same number written two ways
 * (1e-3 and 0.001). */
static int same_value(const char *x, const char *y) {
    if (!strcmp(x, y)) return 1;
    char *ex, *ey;
    double a = strtod(x, &ex), b = strtod(y, &ey);
    return x[0] && y[0] && !*ex && !*ey && a == b;
}

/* Every key of section sec ("config" or "files") in a or b whose values differ. */
static void diff_section(diff_list *d, const cJSON *a, const cJSON *b, const char *sec,
                         const char *allow) {
    const cJSON *sa = cJSON_GetObjectItemCaseSensitive(a, sec);
    const cJSON *sb = cJSON_GetObjectItemCaseSensitive(b, sec);
    int digest = !strcmp(sec, "files");
    const cJSON *v;
    cJSON_ArrayForEach(v, sa) { /* keys of a, then keys only b has */
        const char *x = str_of(sa, v->string), *y = str_of(sb, v->string);
        if (is_free(v->string) || listed(allow, v->string)) continue;
        if (!y || !x || !same_value(x, y)) diff_add(d, v->string, x, y, digest);
    }
    cJSON_ArrayForEach(v, sb) {
        if (is_free(v->string) || listed(allow, v->string)) continue;
        if (!cJSON_GetObjectItemCaseSensitive(sa, v->string))
            diff_add(d, v->string, NULL, str_of(sb, v->string), digest);
    }
}

/* A parsed record: an object with "config" and "files" objects of strings. */
static cJSON *parse_record(const char *text) {
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    const cJSON *secs[2] = {cJSON_GetObjectItemCaseSensitive(j, "config"),
                            cJSON_GetObjectItemCaseSensitive(j, "files")};
    int ok = cJSON_IsObject(j);
    for (int s = 0; ok && s < 2; s++) {
        const cJSON *v;
        ok = cJSON_IsObject(secs[s]);
        cJSON_ArrayForEach(v, secs[s]) ok = ok && cJSON_IsString(v);
    }
    if (ok) return j;
    cJSON_Delete(j);
    return NULL;
}

int grpo_run_record_diff(const char *a, const char *label_a, const char *b, const char *label_b,
                         const char *allow, char *out, size_t cap) {
    cJSON *ja = parse_record(a), *jb = parse_record(b);
    diff_list d = {out, cap, 0, 0, label_a, label_b};
    out[0] = '\0';
    if (!ja || !jb) {
        snprintf(out, cap, "the record %s is not {\"config\": {...}, \"files\": {...}} of strings",
                 ja ? label_b : label_a);
        cJSON_Delete(ja), cJSON_Delete(jb);
        return -1;
    }
    diff_section(&d, ja, jb, "config", allow);
    diff_section(&d, ja, jb, "files", allow);
    cJSON_Delete(ja), cJSON_Delete(jb);
    return d.n;
}

/* ---- --resume --------------------------------------------------------------------------------- */

/* Each name of allow is a key of record a or b (config or files). */
static int check_allowed(const char *allow, const char *a, const char *b, grpo_error *err) {
    cJSON *ja = parse_record(a), *jb = parse_record(b);
    int rc = GRPO_OK;
    for (const char *p = allow; rc == GRPO_OK && p && *p;) {
        size_t len = strcspn(p, ",");
        char key[512];
        snprintf(key, sizeof key, "%.*s", (int)(len < sizeof key ? len : sizeof key - 1), p);
        int known = 0;
        for (int s = 0; s < 4 && !known; s++)
            known = cJSON_GetObjectItemCaseSensitive(
                        cJSON_GetObjectItemCaseSensitive(s < 2 ? ja : jb, s % 2 ? "files" : "config"),
                        key) != NULL;
        if (!known)
            rc = grpo_error_set(err, GRPO_ERR_INVALID,
                                "--allow-change %s: not a key of this run; expected SECTION.KEY "
                                "as log.dir/config.ini names it (e.g. train.steps)",
                                key);
        p += len + (p[len] == ',');
    }
    cJSON_Delete(ja), cJSON_Delete(jb);
    return rc;
}

/* The "run" record of dir/trainer_state.json as text into *out (NULL when it has none). */
static int saved_record(const char *dir, char **out, char *path, size_t cap, grpo_error *err) {
    char *text = NULL;
    *out = NULL;
    int rc = grpo_path_join(path, cap, dir, "trainer_state.json", err);
    if (rc == GRPO_OK) rc = grpo_read_file(path, &text, NULL, err);
    if (rc != GRPO_OK) return rc;
    cJSON *j = cJSON_Parse(text);
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(j, "run");
    if (run && !(*out = cJSON_PrintUnformatted(run)))
        rc = grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory reading its run", path);
    cJSON_Delete(j);
    free(text);
    return rc;
}

int grpo_run_record_check_resume(const char *dir, const char *now, const char *allow,
                                 grpo_error *err) {
    char path[4200], keys[700], *then = NULL;
    int rc = saved_record(dir, &then, path, sizeof path, err);
    if (rc == GRPO_OK && !then) {
        fprintf(stderr, "warning: --resume: %s has no record of its run (written by an older "
                        "grpo): the run file and data are not compared with the checkpoint's\n",
                path);
        return GRPO_OK;
    }
    if (rc == GRPO_OK) rc = check_allowed(allow, then, now, err);
    int n = rc == GRPO_OK ? grpo_run_record_diff(then, "then", now, "now", allow, keys, sizeof keys)
                          : 0;
    if (n < 0) rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: run: %s", path, keys);
    else if (n > 0)
        rc = grpo_error_set(err, GRPO_ERR_INVALID,
                            "--resume: %s was written by a run with other settings: %s; expected "
                            "the run file and data of the run that wrote it (or --allow-change "
                            "KEY[,KEY...] for changes meant)",
                            dir, keys);
    free(then);
    return rc;
}

/* ---- ranks ---------------------------------------------------------------------------------- */

/* Rank 0's record, copied to every rank (malloc'd). */
static char *rank0_record(const char *now, grpo_error *err) {
    double len = grpo_comm_rank() == 0 ? (double)strlen(now) + 1 : 0;
    int rc = grpo_comm_broadcast(&len, sizeof len, 0, err);
    char *text = rc == GRPO_OK ? malloc((size_t)len) : NULL;
    if (rc == GRPO_OK && !text)
        grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory for rank 0's run record (%.0f bytes)",
                       len);
    if (text && grpo_comm_rank() == 0) memcpy(text, now, (size_t)len);
    if (text && grpo_comm_broadcast(text, (size_t)len, 0, err) != GRPO_OK) free(text), text = NULL;
    return text;
}

int grpo_run_record_check_ranks(const char *now, grpo_error *err) {
    int size = grpo_comm_size(), rank = grpo_comm_rank();
    if (size <= 1) return GRPO_OK;
    char keys[700] = "", label[32];
    char *zero = rank0_record(now, err);
    if (!zero) return err->status;
    snprintf(label, sizeof label, "on rank %d", rank);
    int n = grpo_run_record_diff(zero, "on rank 0", now, label, NULL, keys, sizeof keys);
    free(zero);
    double first = n != 0 ? rank : size; /* the lowest rank that differs, on every rank */
    int rc = grpo_comm_allreduce_f64(&first, 1, GRPO_COMM_MIN, err);
    if (rc != GRPO_OK || first >= size) return rc;
    if ((rc = grpo_comm_broadcast(keys, sizeof keys, (int)first, err)) != GRPO_OK) return rc;
    return grpo_error_set(err, GRPO_ERR_INVALID,
                          "rank %d does not run what rank 0 runs: %s; expected every rank to "
                          "start with the same run file (and --set) and the same data",
                          (int)first, keys);
}
