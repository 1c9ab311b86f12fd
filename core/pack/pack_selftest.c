/* pack_selftest.c — a reward's self-test vectors, run as a run calls it (pack_selftest.h). */
#include "pack/pack_selftest.h"

#include "grpo/reward.h"
#include "host/plugin_call.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The config one test creates the reward with: for each manifest key, the test's key.* values
 * when it sets that key, else the manifest defaults. keys/values point into e and t. */
typedef struct test_config {
    const char **keys, **values; /* [n] */
    uint32_t n;
} test_config;

static int build_config(const grpo_entry *e, const grpo_selftest *t, test_config *c,
                        grpo_error *err) {
    int cap = t->n_cfg;
    for (int i = 0; i < e->n_keys; i++) cap += e->keys[i].n_defaults;
    c->keys = calloc((size_t)cap + 1, sizeof *c->keys);
    c->values = calloc((size_t)cap + 1, sizeof *c->values);
    c->n = 0;
    if (!c->keys || !c->values) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    for (int i = 0; i < e->n_keys; i++) {
        const grpo_key_def *d = &e->keys[i];
        int set = 0;
        for (int j = 0; j < t->n_cfg; j++)
            if (strcmp(t->cfg_keys[j], d->name) == 0)
                c->keys[c->n] = d->name, c->values[c->n++] = t->cfg_values[j], set = 1;
        if (!set && !d->has_default)
            return grpo_error_set(err, GRPO_ERR_INVALID, "%s:%d: [%s:%s] does not set key.%s, "
                                  "which has no default; expected key.%s = <%s>",
                                  e->pack->manifest_path, t->line, e->id, t->name, d->name,
                                  d->name, grpo_key_type_name(d->type));
        for (int j = 0; !set && j < d->n_defaults; j++)
            c->keys[c->n] = d->name, c->values[c->n++] = d->defaults[j];
    }
    return GRPO_OK;
}

/* The tests as one batch: sample i is test i (group i, member 0); fields point into e. */
static grpo_sample *build_batch(const grpo_entry *e, grpo_field **fields_out) {
    int n_fields = 0;
    for (int i = 0; i < e->n_tests; i++) n_fields += e->tests[i].n_fields;
    grpo_sample *s = calloc((size_t)e->n_tests, sizeof *s);
    grpo_field *f = calloc((size_t)n_fields + 1, sizeof *f);
    if (!s || !f) {
        free(s), free(f);
        return NULL;
    }
    for (int i = 0, k = 0; i < e->n_tests; i++) {
        const grpo_selftest *t = &e->tests[i];
        s[i].struct_size = sizeof s[i];
        s[i].prompt = t->prompt, s[i].completion = t->completion;
        s[i].group = (uint32_t)i;
        s[i].fields = f + k, s[i].n_fields = (uint32_t)t->n_fields;
        for (int j = 0; j < t->n_fields; j++, k++)
            f[k] = (grpo_field){sizeof f[k], t->field_keys[j], t->field_json[j]};
    }
    *fields_out = f;
    return s;
}

/* stdout into a temp file while plugin code runs, so that what it prints is counted (and kept
 * out of grpo's data output). */
typedef struct stdout_trap {
    FILE *tmp;
    int saved;
} stdout_trap;

static void trap_begin(stdout_trap *t) {
    fflush(stdout);
    t->tmp = tmpfile();
    t->saved = t->tmp ? dup(STDOUT_FILENO) : -1;
    if (t->saved >= 0) dup2(fileno(t->tmp), STDOUT_FILENO);
    /* plugin calls point fd 1 at stderr (plugin_call.h): here at the trap instead */
    if (t->tmp) grpo_plugin_call_stdout(fileno(t->tmp));
}

/* Restores stdout; returns the bytes written meanwhile, their start in head. */
static long trap_end(stdout_trap *t, char *head, size_t head_size) {
    fflush(stdout);
    grpo_plugin_call_stdout(-1);
    long n = 0;
    head[0] = '\0';
    if (t->saved >= 0) {
        dup2(t->saved, STDOUT_FILENO);
        close(t->saved);
        fseek(t->tmp, 0, SEEK_END);
        n = ftell(t->tmp);
        rewind(t->tmp);
        size_t got = fread(head, 1, head_size - 1, t->tmp);
        head[got] = '\0';
        for (char *c = head; *c; c++)
            if (*c == '\n' || *c == '\r' || *c == '\t') *c = ' ';
    }
    if (t->tmp) fclose(t->tmp);
    return n;
}

/* create (with the first test's config: tests that set keys differently run one by one),
 * score, destroy. out[n]. */
static int run_batch(const grpo_reward_desc *d, const grpo_entry *e, const grpo_host *host,
                     const grpo_selftest *t, const grpo_sample *samples, uint32_t n, float *out,
                     grpo_error *err) {
    test_config c = {0};
    int rc = build_config(e, t, &c, err);
    grpo_config cfg = {sizeof cfg, c.n, c.keys, c.values, e->id, e->pack->dir};
    void *state = NULL;
    grpo_error inner;
    grpo_error_init(&inner);
    if (rc == GRPO_OK) {
        grpo_plugin_call_begin(e->id, NULL, "create");
        int32_t st = d->create(host, &cfg, &state, &inner);
        grpo_plugin_call_end();
        if (st != GRPO_OK)
            rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s:%d: [%s:%s] create failed: %s",
                                e->pack->manifest_path, t->line, e->id, t->name,
                                grpo_plugin_message(&inner));
    }
    if (rc == GRPO_OK) {
        for (uint32_t i = 0; i < n; i++) out[i] = NAN;
        grpo_plugin_call_begin(e->id, NULL, "score");
        int32_t st = d->score(state, samples, n, out, &inner);
        grpo_plugin_call_end();
        if (st != GRPO_OK)
            rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s:%d: [%s:%s] score failed: %s",
                                e->pack->manifest_path, t->line, e->id, t->name,
                                grpo_plugin_message(&inner));
    }
    if (state) {
        grpo_plugin_call_begin(e->id, NULL, "destroy");
        d->destroy(state);
        grpo_plugin_call_end();
    }
    free(c.keys), free(c.values);
    return rc;
}

/* Whether tests a and b create the reward with the same key.* lines. */
static int same_config(const grpo_selftest *a, const grpo_selftest *b) {
    if (a->n_cfg != b->n_cfg) return 0;
    for (int i = 0; i < a->n_cfg; i++)
        if (strcmp(a->cfg_keys[i], b->cfg_keys[i]) || strcmp(a->cfg_values[i], b->cfg_values[i]))
            return 0;
    return 1;
}

static int passes(const grpo_selftest *t, float got) {
    if (isnan(t->expect)) return isnan(got);
    return !isnan(got) && fabs((double)got - t->expect) <= t->tolerance;
}

/* Checks the scores; the first failure goes to err, each one to report. */
static int judge(const grpo_entry *e, const float *got, FILE *report, grpo_selftest_report *rep,
                 grpo_error *err) {
    int rc = GRPO_OK, nan_got = 0, nan_expected = 0;
    for (int i = 0; i < e->n_tests; i++) {
        const grpo_selftest *t = &e->tests[i];
        nan_got += isnan(got[i]), nan_expected += isnan(t->expect);
        if (passes(t, got[i])) continue;
        rep->n_failed++;
        char line[1200];
        snprintf(line, sizeof line, "%s:%d: [%s:%s] expected %g (within %g), got %g",
                 e->pack->manifest_path, t->line, e->id, t->name, t->expect, t->tolerance,
                 (double)got[i]);
        if (report) fprintf(report, "      %s\n", line);
        if (rc == GRPO_OK) rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s", line);
    }
    if (e->n_tests && nan_got == e->n_tests && nan_expected < e->n_tests) {
        rep->all_nan = 1;
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s returned NaN on all %d self-tests (%s); "
                            "expected a reward on at least the tests that expect one (NaN means "
                            "no opinion)", e->id, e->n_tests, e->pack->manifest_path);
    }
    return rc;
}

int grpo_entry_selftest(grpo_registry *reg, const grpo_entry *e, const grpo_host *host,
                        FILE *report, grpo_selftest_report *rep, grpo_error *err) {
    memset(rep, 0, sizeof *rep);
    if (e->kind != GRPO_KIND_REWARD || e->n_tests == 0) return GRPO_OK;
    const void *desc;
    int rc = grpo_registry_load(reg, e, host, &desc, err);
    if (rc != GRPO_OK) return rc;
    rep->n_tests = e->n_tests;
    grpo_field *fields = NULL;
    grpo_sample *samples = build_batch(e, &fields);
    float *got = calloc((size_t)e->n_tests, sizeof *got);
    if (!samples || !got) rc = grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    stdout_trap trap;
    trap_begin(&trap);
    /* tests with the same key.* lines share one instance and one score() call */
    for (int i = 0; rc == GRPO_OK && i < e->n_tests;) {
        int j = i + 1;
        while (j < e->n_tests && same_config(&e->tests[i], &e->tests[j])) j++;
        rc = run_batch(desc, e, host, &e->tests[i], samples + i, (uint32_t)(j - i), got + i,
                       err);
        i = j;
    }
    char head[48];
    rep->stdout_bytes = trap_end(&trap, head, sizeof head);
    if (rc == GRPO_OK) rc = judge(e, got, report, rep, err);
    if (rc == GRPO_OK && rep->stdout_bytes > 0)
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s writes to stdout (%ld bytes: \"%s\"); "
                            "expected nothing there: stdout carries grpo's data output (log "
                            "through host->log or write to stderr)", e->id, rep->stdout_bytes,
                            head);
    free(samples), free(fields), free(got);
    return rc;
}
