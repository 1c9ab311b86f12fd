/* rewards.c — creating the run's reward instances and scoring batches with them (what a plugin
 * can and cannot do to the run is listed in rewards.h). */
#include "train/rewards.h"

#include <math.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/call_deadline.h"
#include "train/reward_pool.h"

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
    grpo_reward_pool_stop(set->pool); /* its threads first: they use what follows */
    int n_inst = set->inst0 ? set->inst0[set->n] : 0;
    for (int i = 0; set->workers && i < n_inst; i++) grpo_reward_worker_stop(&set->workers[i]);
    for (int k = 0; set->inst0 && k < set->n; k++)
        for (int i = set->inst0[k]; set->states && i < set->inst0[k + 1]; i++)
            if (set->states[i]) {
                call_begin(set->specs[k], "destroy");
                set->descs[k]->destroy(set->states[i]);
                grpo_plugin_call_end();
            }
    free(set->specs);
    free(set->descs);
    free(set->inst0);
    free(set->states);
    free(set->pooled);
    free(set->rows_independent);
    free(set->warned);
    free(set->warned_nan);
    grpo_reward_lend_free(&set->lend);
    free(set->workers);
    grpo_reward_worker_env_free(&set->worker_env);
    *set = (grpo_reward_set){0};
}

/* Creates instance i of reward k: in its worker process when isolated, else in process. */
static int reward_create_one(grpo_reward_set *set, int k, int i, const grpo_host *host,
                             grpo_error *err) {
    const grpo_reward_spec *spec = set->specs[k];
    if (spec->isolate) /* loaded and created in its worker alone */
        return grpo_reward_worker_start(&set->workers[i], &set->worker_env, spec, err);
    grpo_config cfg = grpo_reward_spec_config(spec);
    grpo_error inner;
    grpo_error_init(&inner);
    call_begin(spec, "create");
    int32_t st = set->descs[k]->create(host, &cfg, &set->states[i], &inner);
    grpo_plugin_call_end();
    if (st != GRPO_OK) {
        set->states[i] = NULL;
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

/* How reward k runs (rewards.h): on the pool when isolated or thread-safe, with one instance
 * per worker when isolated or safe per instance. An in-process reward's thread safety is its
 * manifest's thread_safe, else its library's GRPO_REWARD_THREADSAFE flag (per instance). */
static void reward_plan(grpo_reward_set *set, int k) {
    const grpo_reward_spec *spec = set->specs[k];
    const grpo_entry *e = spec->entry;
    grpo_thread_safety ts = e && e->thread_safe_set ? e->thread_safe : GRPO_THREAD_UNSAFE;
    if (!(e && e->thread_safe_set) && set->descs[k] &&
        (set->descs[k]->flags & GRPO_REWARD_THREADSAFE))
        ts = GRPO_THREAD_PER_INSTANCE;
    int per_worker = spec->isolate || ts == GRPO_THREAD_PER_INSTANCE;
    int workers = spec->workers > 0 ? spec->workers : 1;
    set->pooled[k] = spec->isolate || ts != GRPO_THREAD_UNSAFE ? workers : 0;
    set->rows_independent[k] = spec->rows_independent;
    set->inst0[k + 1] = set->inst0[k] + (per_worker ? workers : 1);
}

/* The arrays of K rewards, each in-process reward's library loaded, and its plan. */
static int reward_set_alloc(grpo_reward_set *set, const grpo_run_config *cfg,
                            grpo_registry *reg, const grpo_host *host, grpo_error *err) {
    int K = cfg->n_rewards;
    set->specs = calloc(K ? K : 1, sizeof *set->specs);
    set->descs = calloc(K ? K : 1, sizeof *set->descs);
    set->inst0 = calloc((size_t)K + 1, sizeof *set->inst0);
    set->pooled = calloc(K ? K : 1, sizeof *set->pooled);
    set->rows_independent = calloc(K ? K : 1, sizeof *set->rows_independent);
    set->warned = calloc(K ? K : 1, sizeof *set->warned);
    set->warned_nan = calloc(K ? K : 1, sizeof *set->warned_nan);
    if (!set->specs || !set->descs || !set->inst0 || !set->pooled || !set->rows_independent ||
        !set->warned || !set->warned_nan)
        return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory creating %d rewards", K);
    set->n = K;
    for (int k = 0; k < K; k++) {
        const void *desc = NULL;
        set->specs[k] = &cfg->rewards[k];
        if (!cfg->rewards[k].isolate && /* an isolated one is loaded in its worker alone */
            grpo_registry_load(reg, cfg->rewards[k].entry, host, &desc, err) != GRPO_OK)
            return err->status;
        set->descs[k] = desc;
        reward_plan(set, k);
    }
    int n_inst = set->inst0[K];
    set->states = calloc(n_inst ? n_inst : 1, sizeof *set->states);
    set->workers = calloc(n_inst ? n_inst : 1, sizeof *set->workers);
    if (!set->states || !set->workers)
        return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory creating %d rewards", K);
    return GRPO_OK;
}

static int start_pool(grpo_reward_set *set, grpo_error *err);

int grpo_reward_set_create(grpo_reward_set *set, const grpo_run_config *cfg, grpo_registry *reg,
                           const grpo_host *host, grpo_error *err) {
    int K = cfg->n_rewards;
    *set = (grpo_reward_set){0};
    if (reward_set_alloc(set, cfg, reg, host, err) != GRPO_OK) {
        grpo_reward_set_free(set);
        return err->status;
    }
    int isolated = 0, pooled = 0;
    for (int k = 0; k < K; k++) isolated |= cfg->rewards[k].isolate, pooled |= set->pooled[k];
    if (isolated && grpo_reward_worker_env_init(&set->worker_env, reg, host,
                                                (int32_t)cfg->train_threads, err) != GRPO_OK) {
        grpo_reward_set_free(set);
        return err->status;
    }
    for (int k = 0; k < K; k++)
        for (int i = set->inst0[k]; i < set->inst0[k + 1]; i++)
            if (reward_create_one(set, k, i, host, err) != GRPO_OK) {
                grpo_reward_set_free(set);
                return err->status;
            }
    if (pooled && start_pool(set, err) != GRPO_OK) {
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

void grpo_reward_lend_free(grpo_reward_lend *l) {
    free(l->buf), free(l->master);
    *l = (grpo_reward_lend){0};
}

/* Builds l->buf (the plugins' copy of samples[n]) and its master copy. */
static int lend_prepare(grpo_reward_lend *l, const grpo_sample *samples, uint32_t n,
                        grpo_error *err) {
    arena measure = {NULL, 0};
    lend_copy(&measure, samples, n);
    size_t size = measure.used ? measure.used : 1;
    if (size > l->cap) {
        free(l->buf), free(l->master);
        l->buf = malloc(size); /* aligned for any of the structs it holds */
        l->master = malloc(size);
        l->cap = l->buf && l->master ? size : 0;
        if (!l->cap) {
            free(l->buf), free(l->master);
            l->buf = l->master = NULL;
            return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory copying %u samples for "
                                  "the rewards (%zu bytes)", n, size);
        }
    }
    arena a = {l->buf, 0};
    lend_copy(&a, samples, n);
    memcpy(l->master, l->buf, a.used);
    l->size = a.used;
    return GRPO_OK;
}

/* ---- scoring -------------------------------------------------------------------------------- */

/* The size of grpo_sample in the SDK a library was built against: samples is an array, so a
 * plugin built before a field was appended steps through it with its own, smaller sizeof. */
static size_t sample_size_for(unsigned abi_minor) {
    return abi_minor < 3 ? offsetof(grpo_sample, step) : sizeof(grpo_sample); /* 1.3: progress */
}

/* Repacks the lent samples (n, host layout) in place at the stride of reward k's library; the
 * next reward's restore from the master copy undoes it. */
static void lend_repack(const grpo_reward_set *set, grpo_reward_lend *l, int k, uint32_t n) {
    if (set->specs[k]->isolate) return; /* its worker repacks its own copy */
    const grpo_entry *e = set->specs[k]->entry;
    size_t size = e && e->pack ? sample_size_for(e->pack->lib_abi_minor) : sizeof(grpo_sample);
    if (size == sizeof(grpo_sample)) return;
    for (uint32_t i = 0; i < n; i++) { /* forwards: each destination lies at or before its source */
        grpo_sample s = ((grpo_sample *)l->buf)[i];
        s.struct_size = (uint32_t)size;
        memmove(l->buf + (size_t)i * size, &s, size);
    }
}

/* Checks one reward's scores (n): NaN is "no opinion", infinities are a plugin bug. */
static int reward_check_row(const grpo_reward_spec *spec, const grpo_sample *samples,
                            uint32_t first, uint32_t n, const float *row, grpo_error *err) {
    for (uint32_t i = 0; i < n; i++)
        if (isinf(row[i]))
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "[%s] (plugin %s) returned %g for sample %u (group %u, member %u); "
                                  "expected a finite reward or NaN for no opinion",
                                  spec->section, spec->plugin, row[i], first + i,
                                  samples[i].group, samples[i].member);
    return GRPO_OK;
}

/* A plugin that declares a `timeout` key of its own gets the section's value and keeps it itself
 * (builtin.exec: the deadline of its exchange, after which it kills its program and scores NaN;
 * builtin.http: of the whole call, requests, retries and waits). The host's deadline for it is a
 * backstop at this many times the value, for a plugin that fails to keep it. */
#define OWN_TIMEOUT_BACKSTOP 10.0

/* The deadline of one score call of spec, in seconds (0: none). */
static double call_deadline(const grpo_reward_spec *spec) {
    for (uint32_t j = 0; j < spec->n; j++)
        if (!strcmp(spec->keys[j], "timeout")) return spec->timeout * OWN_TIMEOUT_BACKSTOP;
    return spec->timeout;
}

/* Reward k scores in worker w (started again when a previous call ended it). 0 with *st and
 * inner as a direct call fills them, or -1 with why set: the batch is NaN. */
static int score_isolated(grpo_reward_set *set, int k, grpo_reward_worker *w,
                          const grpo_sample *lent, uint32_t n, float *row, int32_t *st,
                          grpo_error *inner, char *why, size_t why_size) {
    const grpo_reward_spec *spec = set->specs[k];
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

/* Instance i of reward k scores the lent part into row (n). NaN for scores it left unwritten
 * (one warning per reward); why set when its isolated worker died or was killed at its
 * deadline. An in-process call past its deadline ends the process (call_deadline.h). */
static int score_one(grpo_reward_set *set, int k, int i, const grpo_sample *lent, uint32_t n,
                     float *row, char *why, size_t why_size, grpo_error *err) {
    const grpo_reward_spec *spec = set->specs[k];
    const grpo_reward_desc *d = set->descs[k];
    for (uint32_t j = 0; j < n; j++) row[j] = unwritten_value();
    grpo_error inner;
    grpo_error_init(&inner);
    int32_t st = GRPO_OK;
    if (spec->isolate) {
        score_isolated(set, k, &set->workers[i], lent, n, row, &st, &inner, why, why_size);
    } else {
        call_begin(spec, "score");
        grpo_call_deadline_arm(call_deadline(spec), spec->timeout, spec->plugin, spec->section,
                               "score");
        st = d->score(set->states[i], lent, n, row, &inner);
        grpo_call_deadline_disarm();
        grpo_plugin_call_end();
    }
    if (why[0]) return GRPO_OK;
    if (st != GRPO_OK && spec->isolate) /* the worker's message names section and plugin */
        return grpo_error_set(err, inner.status ? inner.status : GRPO_ERR_INTERNAL, "%s",
                              grpo_plugin_message(&inner));
    if (st != GRPO_OK)
        return grpo_error_set(err, inner.status ? inner.status : GRPO_ERR_INTERNAL,
                              "[%s] (plugin %s) failed to score: %s", spec->section, spec->plugin,
                              grpo_plugin_message(&inner));
    uint32_t unwritten = 0;
    for (uint32_t j = 0; j < n; j++)
        if (is_unwritten(row[j])) row[j] = NAN, unwritten++;
    if (unwritten && !__atomic_exchange_n(&set->warned[k], 1, __ATOMIC_RELAXED))
        fprintf(stderr, "warning: [%s] (plugin %s) left %u of %u scores unwritten; they count as "
                "NaN (no opinion) (said once per reward)\n", spec->section, spec->plugin,
                unwritten, n);
    return GRPO_OK;
}

/* The pool's score call (reward_pool.h): the part samples[n], sample first of the batch, with
 * worker j's instance of reward k, through the thread's own lent copy (*scratch). */
static int score_part(void *user, int k, int j, void **scratch, const grpo_sample *samples,
                      uint32_t first, uint32_t n, float *row, char *why, size_t why_size,
                      grpo_error *err) {
    grpo_reward_set *set = user;
    int n_inst = set->inst0[k + 1] - set->inst0[k];
    why[0] = '\0';
    if (!*scratch && !(*scratch = calloc(1, sizeof(grpo_reward_lend))))
        return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory scoring %u samples", n);
    grpo_reward_lend *lend = *scratch;
    int rc = lend_prepare(lend, samples, n, err);
    if (rc != GRPO_OK) return rc;
    lend_repack(set, lend, k, n);
    rc = score_one(set, k, set->inst0[k] + j % n_inst, (const grpo_sample *)lend->buf, n, row,
                   why, why_size, err);
    return rc == GRPO_OK && !why[0] ? reward_check_row(set->specs[k], samples, first, n, row, err)
                                    : rc;
}

/* The pool's one warning of a batch whose scores of reward k are lost. */
static void warn_lost(void *user, int k, const char *why, uint32_t n) {
    const grpo_reward_set *set = user;
    fprintf(stderr, "warning: [%s] (plugin %s) %s while scoring %u samples in its isolated "
            "child process; its scores for this batch are NaN (no opinion)\n",
            set->specs[k]->section, set->specs[k]->plugin, why, n);
}

static void free_lend(void *scratch) {
    grpo_reward_lend_free(scratch);
    free(scratch);
}

static int start_pool(grpo_reward_set *set, grpo_error *err) {
    grpo_reward_pool_plan plan = {set->n, set->pooled, set->rows_independent, set, score_part,
                                  warn_lost, free_lend};
    return grpo_reward_pool_start(&set->pool, &plan, err);
}

/* The rewards scored on the caller's thread (not pooled), each on the whole batch: R column k
 * of each. Between rewards the lent copy is restored, undoing a plugin's writes. */
static int score_on_caller(grpo_reward_set *set, const grpo_sample *samples, uint32_t n,
                           float *R, int *failed_k, grpo_error *err) {
    int K = set->n, rc = GRPO_OK, lent = 0;
    *failed_k = K;
    float *row = NULL;
    for (int k = 0; rc == GRPO_OK && k < K; k++) {
        if (set->pooled[k]) continue;
        if (!row && !(row = malloc((n ? n : 1) * sizeof *row)))
            return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory scoring %u samples", n);
        if (!lent) rc = lend_prepare(&set->lend, samples, n, err), lent = 1;
        else memcpy(set->lend.buf, set->lend.master, set->lend.size); /* undo the last's writes */
        if (rc != GRPO_OK) break;
        lend_repack(set, &set->lend, k, n);
        char why[300];
        why[0] = '\0';
        rc = score_one(set, k, set->inst0[k], (const grpo_sample *)set->lend.buf, n, row, why,
                       sizeof why, err);
        if (rc == GRPO_OK) rc = reward_check_row(set->specs[k], samples, 0, n, row, err);
        for (uint32_t i = 0; rc == GRPO_OK && i < n; i++) R[(size_t)i * K + k] = row[i];
        if (rc != GRPO_OK) *failed_k = k;
    }
    free(row);
    return rc;
}

int grpo_reward_set_begin(grpo_reward_set *set, const grpo_sample *samples, uint32_t n,
                          uint32_t G, float *R, grpo_error *err) {
    set->samples = samples, set->n_samples = n, set->R = R;
    return set->pool ? grpo_reward_pool_begin(set->pool, samples, n, G, R, err) : GRPO_OK;
}

void grpo_reward_set_row_done(grpo_reward_set *set, uint32_t i) {
    if (set->pool) grpo_reward_pool_row_done(set->pool, i);
}

int grpo_reward_set_finish(grpo_reward_set *set, int complete, grpo_error *err) {
    int failed_k = set->n, rc = GRPO_OK;
    if (complete) /* this thread's rewards while the pool's threads finish theirs */
        rc = score_on_caller(set, set->samples, set->n_samples, set->R, &failed_k, err);
    grpo_error perr;
    grpo_error_init(&perr);
    int rc2 = set->pool ? grpo_reward_pool_finish(set->pool, complete, &perr) : GRPO_OK;
    if (!complete) return GRPO_OK; /* the batch failed before its rows ended: the caller's error */
    /* of two errors, the one of the reward listed first */
    if (rc2 != GRPO_OK && (rc == GRPO_OK || grpo_reward_pool_failed(set->pool) < failed_k)) {
        *err = perr;
        return rc2;
    }
    return rc;
}

int grpo_reward_set_score_group(grpo_reward_set *set, uint32_t first, uint32_t n,
                                grpo_error *err) {
    int failed_k;
    int rc = score_on_caller(set, set->samples + first, n, set->R + (size_t)first * set->n,
                             &failed_k, err);
    if (rc == GRPO_OK && set->pool) grpo_reward_pool_wait_group(set->pool, first);
    return rc;
}

int grpo_reward_set_finish_groups(grpo_reward_set *set, grpo_error *err) {
    return set->pool ? grpo_reward_pool_finish(set->pool, 1, err) : GRPO_OK;
}

int grpo_reward_set_score(grpo_reward_set *set, const grpo_sample *samples, uint32_t n, float *R,
                          grpo_error *err) {
    int rc = grpo_reward_set_begin(set, samples, n, 0, R, err);
    if (rc == GRPO_OK && set->pool) grpo_reward_pool_all_done(set->pool);
    return rc == GRPO_OK ? grpo_reward_set_finish(set, 1, err) : rc;
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
