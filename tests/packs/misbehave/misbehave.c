/*
 * misbehave.c — reward plugins that break the rules of grpo/reward.h at run time, one per way,
 * for the host's defences (core/train/rewards.c, registry.c): each reward below names what it does.
 * With MB_INIT_NONUL set in the environment, grpo_plugin_init fails with an unterminated message.
 */
#include "grpo/grpo.h"

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

GRPO_PLUGIN_MAGIC()

/* Fills the whole message buffer with 'x' and no NUL: what a careless memcpy leaves behind. */
static int32_t fail_without_nul(grpo_error *err) {
    memset(err->message, 'x', sizeof err->message);
    err->status = GRPO_ERR_INVALID;
    return GRPO_ERR_INVALID;
}

typedef struct mb_state {
    int status;        /* mb.exit: the status for exit() */
    long after, calls; /* mb.abort: abort on score call number after + 1 (after > 0) */
    long sleep_ms;     /* mb.rank*, mb.hash*: the latency of each score call */
} mb_state;

static int32_t mb_create(const grpo_host *host, const grpo_config *cfg, void **state,
                         grpo_error *err) {
    const char *fail_in = grpo_config_get(cfg, "fail_in");
    if (fail_in && strcmp(fail_in, "create") == 0) return fail_without_nul(err);
    const char *lo = grpo_config_get(cfg, "min"), *hi = grpo_config_get(cfg, "max");
    if (lo && hi && atof(lo) > atof(hi)) /* mb.range's own check of its keys */
        return grpo_error_set(err, GRPO_ERR_INVALID, "min = %s is above max = %s; expected "
                              "min <= max", lo, hi);
    const char *text = grpo_config_get(cfg, "tokens"); /* mb.range: needs the run's tokenizer */
    int32_t ids[64];
    if (text && text[0] && (!host->tokenizer || !host->tokenize))
        return grpo_error_set(err, GRPO_ERR_INVALID, "tokens: the host has no tokenizer");
    if (text && text[0] && host->tokenize(host->tokenizer, text, ids, 64, err) < 0)
        return err->status;
    const char *status = grpo_config_get(cfg, "status"), *after = grpo_config_get(cfg, "after");
    mb_state *st = calloc(1, sizeof *st);
    if (!st) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    st->status = status ? atoi(status) : 0;
    st->after = after ? atol(after) : 0;
    const char *sleep_ms = grpo_config_get(cfg, "sleep_ms");
    st->sleep_ms = sleep_ms ? atol(sleep_ms) : 0;
    *state = st;
    return GRPO_OK;
}

static void mb_destroy(void *state) { free(state); }

/* mb.ones: 1 for every sample. */
static int32_t ones_score(void *state, const grpo_sample *s, uint32_t n, float *out,
                          grpo_error *err) {
    (void)state, (void)s, (void)err;
    for (uint32_t i = 0; i < n; i++) out[i] = 1.0f;
    return GRPO_OK;
}

/* mb.half: 2 for the first n/2 samples; the rest of out is left as it was. */
static int32_t half_score(void *state, const grpo_sample *s, uint32_t n, float *out,
                          grpo_error *err) {
    (void)state, (void)s, (void)err;
    for (uint32_t i = 0; i < n / 2; i++) out[i] = 2.0f;
    return GRPO_OK;
}

/* mb.scribble: the sum of the completion ids; then -12345 over every id and 'X' over the first
 * byte of every string it was lent (writing through the const pointers). */
static int32_t scribble_score(void *state, const grpo_sample *s, uint32_t n, float *out,
                              grpo_error *err) {
    (void)state, (void)err;
    for (uint32_t i = 0; i < n; i++) {
        double sum = 0;
        int32_t *ids = (int32_t *)s[i].completion_ids;
        for (uint32_t j = 0; j < s[i].n_completion_ids; j++) sum += ids[j], ids[j] = -12345;
        out[i] = (float)sum;
        char *texts[] = {(char *)s[i].prompt, (char *)s[i].completion};
        for (int t = 0; t < 2; t++)
            if (texts[t] && texts[t][0]) texts[t][0] = 'X';
        for (uint32_t j = 0; j < s[i].n_fields; j++) ((char *)s[i].fields[j].json)[0] = 'X';
        ((grpo_sample *)&s[i])->n_completion_ids = 0;
    }
    return GRPO_OK;
}

static int32_t nonul_score(void *state, const grpo_sample *s, uint32_t n, float *out,
                           grpo_error *err) {
    (void)state, (void)s, (void)n, (void)out;
    return fail_without_nul(err);
}

static int32_t exit_score(void *state, const grpo_sample *s, uint32_t n, float *out,
                          grpo_error *err) {
    (void)s, (void)n, (void)out, (void)err;
    exit(((mb_state *)state)->status);
}

static int32_t segv_score(void *state, const grpo_sample *s, uint32_t n, float *out,
                          grpo_error *err) {
    (void)state, (void)s, (void)n, (void)out, (void)err;
    signal(SIGSEGV, SIG_DFL); /* die of it even where a sanitizer catches SIGSEGV */
    raise(SIGSEGV);
    return GRPO_OK;
}

/* mb.abort: abort() (SIGABRT) when a completion is "boom", or on its score call number after + 1
 * (key after > 0), with the handler the host installed left alone; 1 for every sample otherwise. */
static int32_t abort_score(void *state, const grpo_sample *s, uint32_t n, float *out,
                           grpo_error *err) {
    (void)err;
    mb_state *st = state;
    if (st->after > 0 && ++st->calls > st->after) abort();
    for (uint32_t i = 0; i < n; i++)
        if (s[i].completion && strcmp(s[i].completion, "boom") == 0) abort();
    for (uint32_t i = 0; i < n; i++) out[i] = 1.0f;
    return GRPO_OK;
}

/* mb.null: writes near address 0 (a real SIGSEGV, not a raised one). */
static int32_t null_score(void *state, const grpo_sample *s, uint32_t n, float *out,
                          grpo_error *err) {
    (void)state, (void)s, (void)n, (void)out, (void)err;
    /* address 16 of the unmapped first page: a real fault, not a null store that a compiler
     * may drop or UBSan may stop first; volatile so the store stays */
    volatile int *volatile p = (volatile int *)(uintptr_t)16;
    *p = 1;
    return GRPO_OK;
}

/* Recurses until the stack runs out (each frame keeps a live buffer, so no tail call). */
#pragma GCC diagnostic ignored "-Winfinite-recursion"
__attribute__((noinline)) static long deep(long depth) {
    volatile char frame[256];
    frame[0] = (char)depth;
    return deep(depth + 1) + frame[0];
}

/* mb.deep: overflows the stack (SIGSEGV, for a handler without an alternate stack: none). */
static int32_t deep_score(void *state, const grpo_sample *s, uint32_t n, float *out,
                          grpo_error *err) {
    (void)state, (void)s, (void)err;
    long v = deep(0);
    for (uint32_t i = 0; i < n; i++) out[i] = (float)v;
    return GRPO_OK;
}

/* mb.print: scores 1, after printing to stdout with stdio (unflushed) and with write(2). */
static int32_t print_score(void *state, const grpo_sample *s, uint32_t n, float *out,
                           grpo_error *err) {
    (void)state, (void)s, (void)err;
    printf("mb.print: stdio text on stdout\n");
    static const char raw[] = "mb.print: raw text on fd 1\n";
    if (write(1, raw, sizeof raw - 1) < 0) return GRPO_ERR_IO;
    for (uint32_t i = 0; i < n; i++) out[i] = 1.0f;
    return GRPO_OK;
}

/* mb.nan: NaN (no opinion) for every sample. */
static int32_t nan_score(void *state, const grpo_sample *s, uint32_t n, float *out,
                         grpo_error *err) {
    (void)state, (void)s, (void)err;
    for (uint32_t i = 0; i < n; i++) out[i] = NAN;
    return GRPO_OK;
}

/* mb.sleep: never returns from score (on call number after + 1 when after > 0), else scores 1:
 * a scorer that hangs, for the host's per-call deadline (`timeout`). */
static int32_t sleep_score(void *state, const grpo_sample *s, uint32_t n, float *out,
                           grpo_error *err) {
    mb_state *st = state;
    (void)s, (void)err;
    if (++st->calls > st->after)
        for (;;) pause();
    for (uint32_t i = 0; i < n; i++) out[i] = 1.0f;
    return GRPO_OK;
}

/* The FNV-1a hash of s, in [0, 1). */
static float text_hash(const char *s) {
    uint32_t h = 2166136261u;
    for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return (float)(h % 10007u) / 10007.0f;
}

static void latency(const mb_state *st) {
    if (st->sleep_ms > 0) usleep((useconds_t)st->sleep_ms * 1000);
}

/* mb.hash, mb.hash_serial: each row's hash of its completion (a row alone decides its score),
 * after sleep_ms: a slow scorer whose rows are independent. */
static int32_t hash_score(void *state, const grpo_sample *s, uint32_t n, float *out,
                          grpo_error *err) {
    (void)err;
    latency(state);
    for (uint32_t i = 0; i < n; i++) out[i] = text_hash(s[i].completion);
    return GRPO_OK;
}

/* mb.rank, mb.rank_serial: how many members of the row's group in this call have a shorter
 * completion, plus its hash / 1000, after sleep_ms: a score that needs the whole group. */
static int32_t rank_score(void *state, const grpo_sample *s, uint32_t n, float *out,
                          grpo_error *err) {
    (void)err;
    latency(state);
    for (uint32_t i = 0; i < n; i++) {
        int shorter = 0;
        for (uint32_t j = 0; j < n; j++)
            shorter += s[j].group == s[i].group &&
                       strlen(s[j].completion) < strlen(s[i].completion);
        out[i] = (float)shorter + text_hash(s[i].completion) / 1000.0f;
    }
    return GRPO_OK;
}

#define MB_REWARD(ID, DESC, SCORE)                                                             \
    {(uint32_t)sizeof(grpo_reward_desc), ID, DESC, 0, mb_create, SCORE, mb_destroy}

static const grpo_reward_desc rewards[] = {
    MB_REWARD("mb.ones", "scores every sample 1", ones_score),
    MB_REWARD("mb.half", "writes only the first half of its scores", half_score),
    MB_REWARD("mb.scribble", "scores the sum of the completion ids, then writes garbage",
              scribble_score),
    MB_REWARD("mb.nonul", "fails with an unterminated error message", nonul_score),
    MB_REWARD("mb.exit", "calls exit() from score", exit_score),
    MB_REWARD("mb.segv", "dies of SIGSEGV in score", segv_score),
    MB_REWARD("mb.abort", "calls abort() from score on a completion \"boom\"", abort_score),
    MB_REWARD("mb.null", "writes near address 0 in score", null_score),
    MB_REWARD("mb.deep", "overflows the stack in score", deep_score),
    MB_REWARD("mb.print", "prints to stdout from score, then scores 1", print_score),
    MB_REWARD("mb.nan", "scores NaN for every sample", nan_score),
    MB_REWARD("mb.range", "scores 1; create refuses min > max", ones_score),
    MB_REWARD("mb.sleep", "never returns from score", sleep_score),
    MB_REWARD("mb.sleep_own", "never returns from score; declares a timeout key", sleep_score),
    MB_REWARD("mb.hash", "a slow hash of each completion (rows independent, thread-safe)",
              hash_score),
    MB_REWARD("mb.hash_serial", "mb.hash, declared neither thread-safe nor row by row",
              hash_score),
    MB_REWARD("mb.rank", "a slow rank of each completion's length in its group (per instance)",
              rank_score),
    MB_REWARD("mb.rank_serial", "mb.rank, declared not thread-safe", rank_score),
    MB_REWARD("mb.null_pooled", "mb.null declared thread-safe (scored on a pool thread)",
              null_score),
    MB_REWARD("mb.deep_pooled", "mb.deep declared thread-safe (scored on a pool thread)",
              deep_score),
};

static const grpo_reward_desc *get_reward(uint32_t i) {
    return i < sizeof rewards / sizeof rewards[0] ? &rewards[i] : NULL;
}

GRPO_EXPORT int32_t grpo_plugin_init(const grpo_host *host, grpo_library *lib, grpo_error *err) {
    (void)host;
    if (getenv("MB_INIT_NONUL")) return fail_without_nul(err);
    lib->get_reward = get_reward;
    return GRPO_OK;
}
