/*
 * code.c — builtin.code: runs the completion's last fenced code block (```...```) as Python
 * against the row's tests, in a sandbox (code_sandbox.h), and scores the fraction of tests passed
 * (scoring = fraction) or 1 only when all pass (scoring = all).
 *
 * The row's `field` (default "tests") is either
 *   - a string of Python statements (asserts) run after the code in its namespace, one test per
 *     top-level statement: one program run per sample; or
 *   - a list of {"input": "...", "output": "..."}: one run per pair, the input on stdin; a pair
 *     passes when the run exits 0 within its limits and its stdout equals the output, line by line
 *     with trailing whitespace and trailing empty lines ignored. After a pair times out the
 *     sample's remaining pairs count as failed without running (a loop costs one deadline).
 * A completion without a complete fenced block scores 0; a row without the field, or with tests
 * of neither form, scores NaN (no opinion) with one warning per reward instance.
 *
 * sandbox = bwrap (default) refuses to start, saying why, where bubblewrap cannot build its
 * namespaces; sandbox = none runs the code unisolated and warns so at every start.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "builtin.h"
#include "builtin_log.h"
#include "code_sandbox.h"

typedef struct code_state {
    const grpo_host *host;
    code_sandbox sb;
    int32_t all_or_nothing; /* scoring = all */
    int warned;             /* the one warning about a row's tests was given */
    char field[128];
    char section[128];
} code_state;

static void code_warn_once(code_state *s, const char *what) {
    if (s->warned++) return;
    builtin_log(s->host, GRPO_LOG_WARN, "builtin.code", "[%s] %s (warned once)", s->section, what);
}

/* The content of the last complete fenced block (a line starting with ```, an info string such
 * as "python" ignored, up to the next line starting with ```), malloc'd; NULL when none. */
static char *last_fenced_block(const char *text) {
    const char *open = NULL, *best = NULL;
    size_t best_len = 0;
    for (const char *line = text; line;) {
        const char *q = line, *nl = strchr(line, '\n');
        while (*q == ' ' || *q == '\t') q++;
        if (!strncmp(q, "```", 3)) {
            if (!open)
                open = nl ? nl + 1 : NULL;
            else
                best = open, best_len = (size_t)(line - open), open = NULL;
            if (!nl) break;
        }
        line = nl ? nl + 1 : NULL;
    }
    return best ? strndup(best, best_len) : NULL;
}

/* Equal outputs: line by line, trailing whitespace and trailing empty lines ignored. */
static size_t trimmed_end(const char *s, size_t n) {
    while (n && isspace((unsigned char)s[n - 1])) n--;
    return n;
}

static int same_output(const char *a, size_t an, const char *b, size_t bn) {
    an = trimmed_end(a, an), bn = trimmed_end(b, bn);
    size_t i = 0, j = 0;
    while (i < an && j < bn) {
        const char *ea = memchr(a + i, '\n', an - i), *eb = memchr(b + j, '\n', bn - j);
        size_t la = (ea ? (size_t)(ea - a) : an) - i, lb = (eb ? (size_t)(eb - b) : bn) - j;
        size_t ta = trimmed_end(a + i, la), tb = trimmed_end(b + j, lb);
        if (ta != tb || memcmp(a + i, b + j, ta)) return 0;
        i += la + 1, j += lb + 1;
    }
    return i >= an && j >= bn;
}

static float fraction(const code_state *s, uint32_t passed, uint32_t total) {
    if (s->all_or_nothing) return passed == total ? 1.0f : 0.0f;
    return (float)passed / (float)total;
}

/* Counts the harness's "NONCE total N" and distinct "NONCE pass I" lines (code_harness.h);
 * total -1 when it never said, -2 when it said the tests do not parse. */
static uint32_t count_passes(const char *out, size_t len, const char *nonce, int64_t *total) {
    size_t nl = strlen(nonce);
    uint32_t passed = 0;
    unsigned char *seen = NULL;
    *total = -1;
    for (const char *p = out, *end = out + len; p < end;) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e) e = end;
        if ((size_t)(e - p) > nl && !strncmp(p, nonce, nl) && p[nl] == ' ') {
            const char *w = p + nl + 1;
            long long v = strtoll(w + (w[0] == 't' ? 6 : 5), NULL, 10);
            if (*total == -1 && !strncmp(w, "bad", 3))
                *total = -2;
            else if (*total == -1 && !strncmp(w, "total ", 6) && v >= 0 && v < (1 << 24))
                *total = v, seen = calloc((size_t)v + 1, 1);
            else if (*total >= 0 && !strncmp(w, "pass ", 5) && v >= 0 && v < *total && seen &&
                     !seen[v])
                seen[v] = 1, passed++;
        }
        p = e + 1;
    }
    free(seen);
    return passed;
}

/* asserts: one run; NaN when the statements do not parse or the run could not start. */
static float score_asserts(code_state *s, const char *code, const char *tests) {
    unsigned char r[8];
    char nonce[24], why[256];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) return NAN;
    snprintf(nonce, sizeof nonce, "G%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4],
             r[5], r[6], r[7]);
    char *text = NULL;
    if (asprintf(&text, "%s\n%s", nonce, tests) < 0) return NAN;
    code_run run;
    int rc = code_sandbox_run(&s->sb, "asserts", code, text, "", 0, 0, &run, why, sizeof why);
    free(text);
    if (rc != 0) return code_warn_once(s, why), NAN;
    int64_t total;
    uint32_t passed = count_passes(run.out, run.len, nonce, &total);
    free(run.out);
    if (total == -2) return code_warn_once(s, "a row's tests are not Python statements; NaN"), NAN;
    if (total == 0) return code_warn_once(s, "a row's tests hold no statement; NaN"), NAN;
    return total < 0 ? 0.0f : fraction(s, passed, (uint32_t)total);
}

/* One {"input", "output"} pair: 1 passed, 0 failed, 2 timed out, -1 could not run. */
static int run_pair(code_state *s, const char *code, const char *input, const char *output) {
    code_run run;
    char why[256];
    if (code_sandbox_run(&s->sb, "io", code, "", input, strlen(input), 0, &run, why, sizeof why))
        return code_warn_once(s, why), -1;
    int rc = run.timed_out ? 2
                           : run.exited && run.exit_code == 0 &&
                                 same_output(run.out, run.len, output, strlen(output));
    free(run.out);
    return rc;
}

/* io pairs: one run each, until one times out. */
static float score_pairs(code_state *s, const char *code, const cJSON *pairs) {
    uint32_t total = (uint32_t)cJSON_GetArraySize(pairs), passed = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, pairs) {
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(t, "input");
        const cJSON *out = cJSON_GetObjectItemCaseSensitive(t, "output");
        if ((in && !cJSON_IsString(in)) || !cJSON_IsString(out))
            return code_warn_once(s, "a row's tests are not {\"input\": string, \"output\": "
                                     "string} pairs; NaN"),
                   NAN;
    }
    cJSON_ArrayForEach(t, pairs) {
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(t, "input");
        int rc = run_pair(s, code, in ? in->valuestring : "",
                          cJSON_GetObjectItemCaseSensitive(t, "output")->valuestring);
        if (rc < 0) return NAN;
        if (rc == 2) break;
        passed += (uint32_t)rc;
    }
    return total ? fraction(s, passed, total)
                 : (code_warn_once(s, "a row's tests are an empty list; NaN"), NAN);
}

static float score_one(code_state *s, const grpo_sample *x) {
    const char *json = grpo_sample_field(x, s->field);
    cJSON *tests = json ? cJSON_Parse(json) : NULL;
    float v = NAN;
    if (!tests || cJSON_IsNull(tests)) {
        if (json && !tests) code_warn_once(s, "a row's tests field is not JSON; NaN");
    } else if (!cJSON_IsString(tests) && !cJSON_IsArray(tests)) {
        code_warn_once(s, "a row's tests are neither a string of asserts nor a list of pairs; NaN");
    } else {
        char *code = last_fenced_block(x->completion ? x->completion : "");
        v = !code                   ? 0.0f
            : cJSON_IsString(tests) ? score_asserts(s, code, tests->valuestring)
                                    : score_pairs(s, code, tests);
        free(code);
    }
    cJSON_Delete(tests);
    return v;
}

static int32_t code_score(void *state, const grpo_sample *samples, uint32_t n, float *out,
                          grpo_error *err) {
    (void)err;
    for (uint32_t k = 0; k < n; k++) out[k] = score_one(state, &samples[k]);
    return GRPO_OK;
}

static void code_destroy(void *state) {
    code_state *s = state;
    if (!s) return;
    code_sandbox_free(&s->sb);
    free(s);
}

/* The limits keys (pack.ini gives the same defaults). */
static int32_t read_limits(const grpo_config *cfg, code_limits *l, grpo_error *err) {
    int32_t rc = grpo_config_double(cfg, "time_limit", 10, 0.01, 3600, &l->time_limit, err);
    if (rc == GRPO_OK) rc = grpo_config_int(cfg, "cpu_limit", 10, 1, 3600, &l->cpu_s, err);
    if (rc == GRPO_OK)
        rc = grpo_config_int(cfg, "memory_mb", 1024, 64, 1 << 20, &l->memory_mb, err);
    if (rc == GRPO_OK) rc = grpo_config_int(cfg, "file_mb", 16, 1, 1 << 16, &l->file_mb, err);
    if (rc == GRPO_OK) rc = grpo_config_int(cfg, "processes", 64, 8, 1 << 16, &l->processes, err);
    if (rc == GRPO_OK) rc = grpo_config_int(cfg, "output_kb", 1024, 1, 1 << 20, &l->output_kb, err);
    return rc;
}

/* Builds the sandbox and runs its probe; sandbox = none warns, a refused sandbox is an error. */
static int32_t code_start(code_state *s, const grpo_config *cfg, int isolate,
                          const code_limits *lim, grpo_error *err) {
    const char *python = grpo_config_get(cfg, "python");
    char why[512];
    if (!isolate)
        builtin_log(s->host, GRPO_LOG_WARN, "builtin.code",
                    "[%s] sandbox = none: the completions' "
                    "code runs WITHOUT isolation, as this user, with only rlimits and a deadline; "
                    "use it only with code you trust",
                    s->section);
    if (code_sandbox_init(&s->sb, isolate, lim, python ? python : "/usr/bin/python3", why,
                          sizeof why) == 0)
        return GRPO_OK;
    /* not root: RLIMIT_NPROC counts every process and thread of grpo's user */
    const char *nproc = geteuid() ? "; \"Resource temporarily unavailable\" can also mean that "
                                    "grpo's user already runs `processes` (a key) processes"
                                  : "";
    return grpo_error_set(
        err, GRPO_ERR_INVALID, "[%s] builtin.code cannot run programs%s: %s%s%s", s->section,
        isolate ? " in its sandbox (bubblewrap)" : "", why, isolate ? nproc : "",
        isolate ? ". The kernel must allow unprivileged user namespaces "
                  "(user.max_user_namespaces > 0; kernel.unprivileged_userns_clone = 1 "
                  "where it exists; AppArmor's restrict_unprivileged_userns = 0); "
                  "`sandbox = none` runs without isolation (unsafe)"
                : "");
}

static int32_t code_create(const grpo_host *host, const grpo_config *cfg, void **state,
                           grpo_error *err) {
    static const char *const sandboxes[] = {"bwrap", "none", NULL};
    static const char *const scorings[] = {"fraction", "all", NULL};
    code_state *s = calloc(1, sizeof *s);
    if (!s) return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    s->host = host;
    snprintf(s->section, sizeof s->section, "%s", cfg->section);
    const char *field = grpo_config_get(cfg, "field");
    snprintf(s->field, sizeof s->field, "%s", field ? field : "tests");
    int32_t none = 0;
    code_limits lim;
    int32_t rc = grpo_config_choice(cfg, "sandbox", sandboxes, 0, &none, err);
    if (rc == GRPO_OK)
        rc = grpo_config_choice(cfg, "scoring", scorings, 0, &s->all_or_nothing, err);
    if (rc == GRPO_OK) rc = read_limits(cfg, &lim, err);
    if (rc == GRPO_OK) rc = code_start(s, cfg, !none, &lim, err);
    if (rc != GRPO_OK) return code_destroy(s), rc;
    *state = s;
    return GRPO_OK;
}

const grpo_reward_desc builtin_code_reward = {
    .struct_size = sizeof(grpo_reward_desc),
    .id = "builtin.code",
    .description =
        "The completion's last fenced code block run against the row's tests in a sandbox",
    .flags = 0, /* runs programs one at a time */
    .create = code_create,
    .score = code_score,
    .destroy = code_destroy,
};
