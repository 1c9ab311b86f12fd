/* rewards.c — creating the run's reward instances and scoring batches with them (what a plugin
 * can and cannot do to the run is listed in rewards.h). */
#include "train/rewards.h"

#include <math.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/call_deadline.h"

/* The score buffer's fill before each call: a quiet NaN with a payload no arithmetic produces,
 * so a value still holding it afterwards was not written by the plugin. */
#define UNWRITTEN_BITS 0x7fc5c0deu

static float unwritten_value(void) {
    uint32_t bits = UNWRITTEN_BITS;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static int is_unwritten(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits == UNWRITTEN_BITS;
}

/* ---- creating and freeing ------------------------------------------------------------------- */

/* Marks a call into reward spec's plugin, with its pack and library for a crash report. */
static void call_begin(const grpo_reward_spec *spec, const char *what) {
    grpo_plugin_call_begin(spec->plugin, spec->section, what);
    const grpo_pack *pack = spec->entry ? spec->entry->pack : NULL;
    if (pack) grpo_plugin_call_origin(pack->name, pack->library_path);
}

void grpo_reward_set_free(grpo_reward_set *set) {
    for (int k = 0; set->workers && k < set->n; k++) grpo_reward_worker_stop(&set->workers[k]);
    for (int k = 0; k < set->n; k++)
        if (set->states && set->states[k]) {
            call_begin(set->specs[k], "destroy");
            set->descs[k]->destroy(set->states[k]);
            grpo_plugin_call_end();
        }
    free(set->specs);
    free(set->descs);
    free(set->states);
    free(set->warned);
    free(set->warned_nan);
    free(set->lend);
    free(set->lend_master);
    free(set->workers);
    grpo_reward_worker_env_free(&set->worker_env);
    *set = (grpo_reward_set){0};
}

static int reward_create_one(grpo_reward_set *set, int k, grpo_registry *reg,
                             const grpo_host *host, grpo_error *err) {
    const grpo_reward_spec *spec = set->specs[k];
    if (spec->isolate) /* loaded and created in its worker alone */
        return grpo_reward_worker_start(&set->workers[k], &set->worker_env, spec, err);
    const void *desc = NULL;
    if (grpo_registry_load(reg, spec->entry, host, &desc, err) != GRPO_OK) return err->status;
    set->descs[k] = desc;
    grpo_config cfg = grpo_reward_spec_config(spec);
    grpo_error inner;
    grpo_error_init(&inner);
    call_begin(spec, "create");
    int32_t st = set->descs[k]->create(host, &cfg, &set->states[k], &inner);
    grpo_plugin_call_end();
    if (st != GRPO_OK) {
        set->states[k] = NULL;
        /* the host names the section; a message that starts with it too (the SDK's getters,
         * grpo/config.h, and packs written to the old advice) would say it twice */
        const char *msg = grpo_plugin_message(&inner);
        size_t n = strlen(spec->section);
        if (msg[0] == '[' && !strncmp(msg + 1, spec->section, n) && !strncmp(msg + 1 + n, "] ", 2))
            msg += n + 3;
        return grpo_error_set(err, inner.status ? inner.status : GRPO_ERR_INVALID,
                              "[%s] (plugin %s): %s", spec->section, spec->plugin, msg);
    }
    return GRPO_OK;
}

int grpo_reward_set_create(grpo_reward_set *set, const grpo_run_config *cfg, grpo_registry *reg,
                           const grpo_host *host, grpo_error *err) {
    int K = cfg->n_rewards;
    *set = (grpo_reward_set){0};
    set->specs = calloc(K ? K : 1, sizeof *set->specs);
    set->descs = calloc(K ? K : 1, sizeof *set->descs);
    set->states = calloc(K ? K : 1, sizeof *set->states);
    set->warned = calloc(K ? K : 1, sizeof *set->warned);
    set->warned_nan = calloc(K ? K : 1, sizeof *set->warned_nan);
    set->workers = calloc(K ? K : 1, sizeof *set->workers);
    if (!set->specs || !set->descs || !set->states || !set->warned || !set->warned_nan ||
        !set->workers) {
        grpo_reward_set_free(set);
        return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory creating %d rewards", K);
    }
    set->n = K;
    int isolated = 0;
    for (int k = 0; k < K; k++) set->specs[k] = &cfg->rewards[k];
    for (int k = 0; k < K; k++) isolated |= cfg->rewards[k].isolate;
    if (isolated && grpo_reward_worker_env_init(&set->worker_env, reg, host,
                                                (int32_t)cfg->train_threads, err) != GRPO_OK) {
        grpo_reward_set_free(set);
        return err->status;
    }
    for (int k = 0; k < K; k++)
        if (reward_create_one(set, k, reg, host, err) != GRPO_OK) {
            grpo_reward_set_free(set);
            return err->status;
        }
    return GRPO_OK;
}

/* ---- the batch lent to plugins -------------------------------------------------------------- */

/* A bump allocator over one block; with base NULL it only measures. */
typedef struct arena {
    unsigned char *base;
    size_t used;
} arena;

static void *take(arena *a, size_t size, size_t align) {
    a->used = (a->used + align - 1) & ~(align - 1);
    void *p = a->base ? a->base + a->used : NULL;
    a->used += size;
    return p;
}

static const char *put_str(arena *a, const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = take(a, n, 1);
    if (d) memcpy(d, s, n);
    return d;
}

/* Deep-copies src (n) into a->base (or measures it): structs, messages, fields, ids, strings. */
static void lend_copy(arena *a, const grpo_sample *src, uint32_t n) {
    grpo_sample *dst = take(a, (size_t)n * sizeof *dst, alignof(grpo_sample));
    for (uint32_t i = 0; i < n; i++) {
        const grpo_sample *s = &src[i];
        grpo_sample c = *s;
        c.prompt = put_str(a, s->prompt);
        c.completion = put_str(a, s->completion);
        if (s->messages) {
            grpo_message *m = take(a, s->n_messages * sizeof *m, alignof(grpo_message));
            for (uint32_t j = 0; j < s->n_messages; j++) {
                const char *role = put_str(a, s->messages[j].role);
                const char *content = put_str(a, s->messages[j].content);
                if (m) m[j] = s->messages[j], m[j].role = role, m[j].content = content;
            }
            c.messages = m;
        }
        if (s->fields) {
            grpo_field *f = take(a, s->n_fields * sizeof *f, alignof(grpo_field));
            for (uint32_t j = 0; j < s->n_fields; j++) {
                const char *key = put_str(a, s->fields[j].key);
                const char *json = put_str(a, s->fields[j].json);
                if (f) f[j] = s->fields[j], f[j].key = key, f[j].json = json;
            }
            c.fields = f;
        }
        if (s->completion_ids) {
            int32_t *ids = take(a, s->n_completion_ids * sizeof *ids, alignof(int32_t));
            if (ids) memcpy(ids, s->completion_ids, s->n_completion_ids * sizeof *ids);
            c.completion_ids = ids;
        }
        if (dst) dst[i] = c;
    }
}

/* Builds set->lend (the plugins' copy of samples) and its master copy. */
static int lend_prepare(grpo_reward_set *set, const grpo_sample *samples, uint32_t n,
                        grpo_error *err) {
    arena measure = {NULL, 0};
    lend_copy(&measure, samples, n);
    size_t size = measure.used ? measure.used : 1;
    if (size > set->lend_cap) {
        free(set->lend), free(set->lend_master);
        set->lend = malloc(size); /* aligned for any of the structs it holds */
        set->lend_master = malloc(size);
        set->lend_cap = set->lend && set->lend_master ? size : 0;
        if (!set->lend_cap) {
            free(set->lend), free(set->lend_master);
            set->lend = set->lend_master = NULL;
            return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory copying %u samples for "
                                  "the rewards (%zu bytes)", n, size);
        }
    }
    arena a = {set->lend, 0};
    lend_copy(&a, samples, n);
    memcpy(set->lend_master, set->lend, a.used);
    set->lend_size = a.used;
    return GRPO_OK;
}

/* ---- scoring -------------------------------------------------------------------------------- */

/* The size of grpo_sample in the SDK a library was built against: samples is an array, so a
 * plugin built before a field was appended steps through it with its own, smaller sizeof. */
static size_t sample_size_for(unsigned abi_minor) {
    return abi_minor < 3 ? offsetof(grpo_sample, step) : sizeof(grpo_sample); /* 1.3: progress */
}

/* Repacks the lent samples (n, host layout) in place at the stride of reward k's library; the
 * next reward's restore from lend_master undoes it. */
static void lend_repack(grpo_reward_set *set, int k, uint32_t n) {
    if (set->specs[k]->isolate) return; /* its worker repacks its own copy */
    const grpo_entry *e = set->specs[k]->entry;
    size_t size = e && e->pack ? sample_size_for(e->pack->lib_abi_minor) : sizeof(grpo_sample);
    if (size == sizeof(grpo_sample)) return;
    for (uint32_t i = 0; i < n; i++) { /* forwards: each destination lies at or before its source */
        grpo_sample s = ((grpo_sample *)set->lend)[i];
        s.struct_size = (uint32_t)size;
        memmove(set->lend + (size_t)i * size, &s, size);
    }
}

/* Checks one reward's scores (n): NaN is "no opinion", infinities are a plugin bug. */
static int reward_check_row(const grpo_reward_spec *spec, const grpo_sample *samples, uint32_t n,
                            const float *row, grpo_error *err) {
    for (uint32_t i = 0; i < n; i++)
        if (isinf(row[i]))
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "[%s] (plugin %s) returned %g for sample %u (group %u, member %u); "
                                  "expected a finite reward or NaN for no opinion",
                                  spec->section, spec->plugin, row[i], i, samples[i].group,
                                  samples[i].member);
    return GRPO_OK;
}

/* A plugin that declares a `timeout` key of its own gets the section's value and keeps it itself
 * (builtin.exec: the deadline of its exchange, after which it kills its program and scores NaN;
 * builtin.http: per attempt, with retries). The host's deadline for it is a backstop at this
 * many times the value, for a plugin that fails to keep it. */
#define OWN_TIMEOUT_BACKSTOP 10.0

/* The deadline of one score call of spec, in seconds (0: none). */
static double call_deadline(const grpo_reward_spec *spec) {
    for (uint32_t j = 0; j < spec->n; j++)
        if (!strcmp(spec->keys[j], "timeout")) return spec->timeout * OWN_TIMEOUT_BACKSTOP;
    return spec->timeout;
}

/* Reward k scores in its worker (started again when a previous batch ended it). 0 with *st and
 * inner as a direct call fills them, or -1 with why set: the batch is NaN. */
static int score_isolated(grpo_reward_set *set, int k, const grpo_sample *lent, uint32_t n,
                          float *row, int32_t *st, grpo_error *inner, char *why,
                          size_t why_size) {
    const grpo_reward_spec *spec = set->specs[k];
    grpo_reward_worker *w = &set->workers[k];
    if (w->pid <= 0) {
        grpo_error e;
        grpo_error_init(&e);
        if (grpo_reward_worker_start(w, &set->worker_env, spec, &e) != GRPO_OK) {
            snprintf(why, why_size, "could not be started again (%s)", grpo_plugin_message(&e));
            return -1;
        }
    }
    return grpo_reward_worker_score(w, spec, call_deadline(spec), lent, n, row, st, inner, why,
                                    why_size);
}

/* Reward k scores the lent batch into row (n). NaN for scores it left unwritten (one warning per
 * reward) and, when isolated, for all of them when its worker died or was killed at its
 * deadline (one warning per batch). An in-process call past its deadline ends the process
 * (call_deadline.h). */
static int score_one(grpo_reward_set *set, int k, const grpo_sample *lent, uint32_t n,
                     float *row, grpo_error *err) {
    const grpo_reward_spec *spec = set->specs[k];
    const grpo_reward_desc *d = set->descs[k];
    for (uint32_t i = 0; i < n; i++) row[i] = unwritten_value();
    grpo_error inner;
    grpo_error_init(&inner);
    char why[300] = "";
    int32_t st = GRPO_OK;
    if (spec->isolate) {
        score_isolated(set, k, lent, n, row, &st, &inner, why, sizeof why);
    } else {
        call_begin(spec, "score");
        grpo_call_deadline_arm(call_deadline(spec), spec->timeout, spec->plugin, spec->section,
                               "score");
        st = d->score(set->states[k], lent, n, row, &inner);
        grpo_call_deadline_disarm();
        grpo_plugin_call_end();
    }
    if (why[0]) {
        fprintf(stderr, "warning: [%s] (plugin %s) %s while scoring %u samples in its isolated "
                "child process; its scores for this batch are NaN (no opinion)\n", spec->section,
                spec->plugin, why, n);
        for (uint32_t i = 0; i < n; i++) row[i] = NAN;
        return GRPO_OK;
    }
    if (st != GRPO_OK && spec->isolate) /* the worker's message names section and plugin */
        return grpo_error_set(err, inner.status ? inner.status : GRPO_ERR_INTERNAL, "%s",
                              grpo_plugin_message(&inner));
    if (st != GRPO_OK)
        return grpo_error_set(err, inner.status ? inner.status : GRPO_ERR_INTERNAL,
                              "[%s] (plugin %s) failed to score: %s", spec->section, spec->plugin,
                              grpo_plugin_message(&inner));
    uint32_t unwritten = 0;
    for (uint32_t i = 0; i < n; i++)
        if (is_unwritten(row[i])) row[i] = NAN, unwritten++;
    if (unwritten && !set->warned[k]) {
        set->warned[k] = 1;
        fprintf(stderr, "warning: [%s] (plugin %s) left %u of %u scores unwritten; they count as "
                "NaN (no opinion) (said once per reward)\n", spec->section, spec->plugin,
                unwritten, n);
    }
    return GRPO_OK;
}

int grpo_reward_set_score(grpo_reward_set *set, const grpo_sample *samples, uint32_t n, float *R,
                          grpo_error *err) {
    float *row = malloc((n ? n : 1) * sizeof *row);
    if (!row) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory scoring %u samples", n);
    int K = set->n, rc = lend_prepare(set, samples, n, err);
    const grpo_sample *lent = (const grpo_sample *)set->lend;
    for (int k = 0; rc == GRPO_OK && k < K; k++) {
        if (k) memcpy(set->lend, set->lend_master, set->lend_size); /* undo reward k-1's writes */
        lend_repack(set, k, n);
        rc = score_one(set, k, lent, n, row, err);
        if (rc == GRPO_OK) rc = reward_check_row(set->specs[k], samples, n, row, err);
        for (uint32_t i = 0; rc == GRPO_OK && i < n; i++) R[(size_t)i * K + k] = row[i];
    }
    free(row);
    return rc;
}

void grpo_reward_set_nan_check(grpo_reward_set *set, const float *R, int N, long step,
                               double *nan_frac) {
    int K = set->n;
    for (int k = 0; k < K; k++) {
        int nan = 0;
        for (int i = 0; i < N; i++) nan += isnan(R[(size_t)i * K + k]) != 0;
        nan_frac[k] = N > 0 ? (double)nan / N : 0.0;
        if (N > 0 && nan == N && !set->warned_nan[k]) {
            set->warned_nan[k] = 1;
            fprintf(stderr, "warning: step %ld: [%s] (plugin %s) returned NaN (no opinion) for "
                    "all %d samples; it adds nothing to the advantages (said once per reward; "
                    "rewards/%s/nan_frac in the metrics shows later steps)\n", step,
                    set->specs[k]->section, set->specs[k]->plugin, N, set->specs[k]->name);
        }
    }
}

void grpo_reward_set_weights(const grpo_reward_set *set, float *w) {
    for (int k = 0; k < set->n; k++) w[k] = (float)set->specs[k]->weight;
}
