/* rewards.c — creating the run's reward instances and scoring batches with them (what a plugin
 * can and cannot do to the run is listed in rewards.h). */
#include "train/rewards.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
    *set = (grpo_reward_set){0};
}

static int reward_create_one(grpo_reward_set *set, int k, grpo_registry *reg,
                             const grpo_host *host, grpo_error *err) {
    const grpo_reward_spec *spec = set->specs[k];
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
    if (!set->specs || !set->descs || !set->states || !set->warned || !set->warned_nan) {
        grpo_reward_set_free(set);
        return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory creating %d rewards", K);
    }
    set->n = K;
    for (int k = 0; k < K; k++) set->specs[k] = &cfg->rewards[k];
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

static int write_all(int fd, const void *buf, size_t n) {
    const unsigned char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

/* Reads until end of file or cap bytes; returns the count. */
static size_t read_all(int fd, void *buf, size_t cap) {
    unsigned char *p = buf;
    size_t got = 0;
    while (got < cap) {
        ssize_t r = read(fd, p + got, cap - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    return got;
}

/* "was killed by SIGSEGV (Segmentation fault)" or "called exit(3)" from a waitpid status. */
static void describe_death(int status, char *why, size_t size) {
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
        const char *abbrev = sigabbrev_np(sig);
#else
        const char *abbrev = NULL;
#endif
        if (abbrev)
            snprintf(why, size, "was killed by SIG%s (%s)", abbrev, strsignal(sig));
        else
            snprintf(why, size, "was killed by signal %d (%s)", sig, strsignal(sig));
    } else if (WIFEXITED(status)) {
        snprintf(why, size, "called exit(%d)", WEXITSTATUS(status));
    } else {
        snprintf(why, size, "stopped with wait status %#x", (unsigned)status);
    }
}

/* The child's report through the pipe: status, then n scores, then the error message. */
static size_t report_size(uint32_t n) {
    return sizeof(int32_t) + (size_t)n * sizeof(float) + sizeof(((grpo_error *)0)->message);
}

/* score() in a forked child: *st, row and inner as a direct call fills them, or why set when the
 * child died before reporting (crash, signal, exit). Fails only when no child could be run. */
static int score_in_child(const grpo_reward_desc *d, void *state, const grpo_sample *samples,
                          uint32_t n, float *row, int32_t *st, grpo_error *inner, char *why,
                          size_t why_size, grpo_error *err) {
    size_t size = report_size(n);
    unsigned char *report = malloc(size);
    int fd[2];
    /* close-on-exec: a program the plugin starts must not hold the pipe open after the child */
    if (!report || pipe2(fd, O_CLOEXEC) != 0) {
        free(report);
        return grpo_error_set(err, GRPO_ERR_IO, "cannot set up an isolated score call: %s",
                              report ? strerror(errno) : "out of memory");
    }
    fflush(NULL); /* the child must not write our buffered output a second time */
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        grpo_plugin_call_in_child();
        int32_t s = d->score(state, samples, n, row, inner);
        fflush(NULL);
        int bad = write_all(fd[1], &s, sizeof s) || write_all(fd[1], row, n * sizeof *row) ||
                  write_all(fd[1], inner->message, sizeof inner->message);
        _exit(bad ? 1 : 0);
    }
    close(fd[1]);
    if (pid < 0) {
        close(fd[0]);
        free(report);
        return grpo_error_set(err, GRPO_ERR_IO, "cannot fork for an isolated score call: %s",
                              strerror(errno));
    }
    size_t got = read_all(fd[0], report, size);
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (got == size && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        memcpy(st, report, sizeof *st);
        memcpy(row, report + sizeof *st, n * sizeof *row);
        memcpy(inner->message, report + sizeof *st + n * sizeof *row, sizeof inner->message);
        inner->status = *st;
    } else {
        describe_death(status, why, why_size);
    }
    free(report);
    return GRPO_OK;
}

/* Reward k scores the lent batch into row (n). NaN for scores it left unwritten (one warning per
 * reward) and, when isolated, for all of them when its child died (one warning per batch). */
static int score_one(grpo_reward_set *set, int k, const grpo_sample *lent, uint32_t n,
                     float *row, grpo_error *err) {
    const grpo_reward_spec *spec = set->specs[k];
    const grpo_reward_desc *d = set->descs[k];
    for (uint32_t i = 0; i < n; i++) row[i] = unwritten_value();
    grpo_error inner;
    grpo_error_init(&inner);
    char why[160] = "";
    int32_t st = GRPO_OK;
    int rc = GRPO_OK;
    call_begin(spec, "score");
    if (spec->isolate)
        rc = score_in_child(d, set->states[k], lent, n, row, &st, &inner, why, sizeof why, err);
    else
        st = d->score(set->states[k], lent, n, row, &inner);
    grpo_plugin_call_end();
    if (rc != GRPO_OK) return rc;
    if (st != GRPO_OK)
        return grpo_error_set(err, inner.status ? inner.status : GRPO_ERR_INTERNAL,
                              "[%s] (plugin %s) failed to score: %s", spec->section, spec->plugin,
                              grpo_plugin_message(&inner));
    if (why[0]) {
        fprintf(stderr, "warning: [%s] (plugin %s) %s while scoring %u samples in its isolated "
                "child process; its scores for this batch are NaN (no opinion)\n", spec->section,
                spec->plugin, why, n);
        for (uint32_t i = 0; i < n; i++) row[i] = NAN;
        return GRPO_OK;
    }
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
