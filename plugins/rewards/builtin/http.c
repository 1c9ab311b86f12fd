/*
 * http.c — builtin.http: rewards and judges behind an HTTP server (libcurl, http_client.h).
 *
 * mode = exec: the exec protocol (sdk/EXEC_PROTOCOL.md) over HTTP POST: each batch (or each
 * chunk of batch_size samples) is one request {"id": N, "samples": [...]}, answered by
 * {"id": N, "rewards": [...]} (the id may be left out; a different one is refused).
 * mode = judge: an OpenAI-compatible chat-completions judge, one request per sample
 * (http_judge.h).
 *
 * Requests run concurrently (max_concurrency), each attempt under `attempt_timeout` seconds,
 * retried with backoff on 429, 5xx and transport failures, the whole score call under the
 * section's `timeout` (the host's key, which this reward keeps itself: what is unanswered then
 * is NaN; http_client.h). Whatever fails costs its samples
 * (NaN, "no opinion") with one warning per batch, never the run; a dead endpoint opens the
 * circuit breaker (http_breaker.h). The API key is read from the environment variable that
 * api_key_env names, at create; it lives only in the request header and is cut out of every
 * message this reward logs.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "builtin_log.h"
#include "exec_json.h"
#include "http_breaker.h"
#include "http_client.h"
#include "http_judge.h"

#define WHO "builtin.http"

typedef struct http_state {
    const grpo_host *host;
    char section[128];
    char *url;
    char *key;          /* the API key (NULL: none); scrubbed from messages, zeroed at destroy */
    int judge;          /* mode = judge */
    uint32_t retries, batch_size;
    uint64_t next_id;   /* exec mode: the id of the next request */
    uint64_t skipped;   /* batches the open breaker scored NaN without a request */
    pid_t owner;
    http_client client;
    http_breaker breaker;
    http_judge j;
} http_state;

/* What one batch met, for its one warning. */
typedef struct batch_report {
    uint32_t failed, malformed, unscored, usable; /* requests; samples for unscored */
    char first_failed[256], first_malformed[256], first_unscored[256];
} batch_report;

/* Replaces every occurrence of the API key in msg by "***" (replies are scrubbed already, by
 * http_client.c: this guards what else a message may quote). */
static void redact(const http_state *s, char *msg) {
    size_t len = strlen(msg);
    http_scrub(msg, &len, s->key);
}

static void http_warn(const http_state *s, const char *fmt, const char *a, const char *b) {
    char msg[900];
    snprintf(msg, sizeof msg, fmt, a, b);
    redact(s, msg);
    builtin_log(s->host, GRPO_LOG_WARN, WHO, "[%s] %s: %s", s->section, s->url, msg);
}

static void note(uint32_t *count, char *first, size_t size, const char *why) {
    if (!(*count)++) snprintf(first, size, "%s", why);
}

/* The batch's one warning, when something went wrong. */
static void report_batch(const http_state *s, const batch_report *r, uint32_t requests) {
    char msg[900];
    size_t u = 0;
    msg[0] = 0;
    if (r->failed)
        u += (size_t)snprintf(msg + u, sizeof msg - u, "%u of %u requests failed (first: %s); ",
                              r->failed, requests, r->first_failed);
    if (r->malformed && u < sizeof msg)
        u += (size_t)snprintf(msg + u, sizeof msg - u, "%u replies malformed (first: %s); ",
                              r->malformed, r->first_malformed);
    if (r->unscored && u < sizeof msg)
        u += (size_t)snprintf(msg + u, sizeof msg - u, "%u samples got no score (first: %s); ",
                              r->unscored, r->first_unscored);
    if (u) http_warn(s, "%s%s", msg, "those samples score NaN");
}

/* exec mode: the reply of chunk id for n samples into out. */
static void take_exec_reply(const http_call *c, uint64_t id, uint32_t n, float *out,
                            batch_report *r, const http_state *s) {
    cJSON *d = cJSON_Parse(c->reply);
    const cJSON *jid = cJSON_GetObjectItemCaseSensitive(d, "id");
    char warn[256];
    if ((jid && (!cJSON_IsNumber(jid) || jid->valuedouble != (double)id)) ||
        exec_rewards_take(cJSON_GetObjectItemCaseSensitive(d, "rewards"), n, out, warn,
                          sizeof warn) != 0) {
        for (uint32_t k = 0; k < n; k++) out[k] = NAN;
        snprintf(warn, sizeof warn, "expected {\"id\": %llu, \"rewards\": [%u numbers or nulls]}"
                 " (sdk/EXEC_PROTOCOL.md), got '%.60s'", (unsigned long long)id, n,
                 c->reply ? c->reply : "");
        note(&r->malformed, r->first_malformed, sizeof r->first_malformed, warn);
    } else {
        r->usable++;
        if (warn[0]) http_warn(s, "%s%s", warn, "");
    }
    cJSON_Delete(d);
}

/* exec mode: the batch in chunks of batch_size samples, one request each. */
static void score_exec(http_state *s, const grpo_sample *x, uint32_t n, float *out,
                       uint32_t retries, batch_report *r, uint32_t *requests) {
    uint32_t size = s->batch_size && s->batch_size < n ? s->batch_size : n;
    uint32_t m = (n + size - 1) / size;
    http_call *calls = calloc(m, sizeof *calls);
    uint64_t first = s->next_id;
    s->next_id += m, *requests = m;
    for (uint32_t i = 0; calls && i < m; i++) {
        uint32_t k = i * size, len = n - k < size ? n - k : size;
        calls[i].body = exec_request_text(first + i, x + k, len, &calls[i].body_len);
    }
    if (calls) http_client_run(&s->client, calls, m, retries);
    for (uint32_t i = 0; i < m; i++) {
        uint32_t k = i * size, len = n - k < size ? n - k : size;
        if (calls && calls[i].ok) take_exec_reply(&calls[i], first + i, len, out + k, r, s);
        else note(&r->failed, r->first_failed, sizeof r->first_failed,
                  calls && calls[i].body ? calls[i].why : "out of memory");
    }
    for (uint32_t i = 0; calls && i < m; i++) free((char *)calls[i].body);
    if (calls) http_calls_release(calls, m);
    free(calls);
}

/* judge mode: sample k's reply into out[k]. */
static void take_judge_reply(const http_state *s, const http_call *c, float *out,
                             batch_report *r) {
    char why[256];
    void *doc;
    const char *content;
    if (!http_judge_content(c->reply, &doc, &content, why, sizeof why)) {
        note(&r->malformed, r->first_malformed, sizeof r->first_malformed, why);
        return;
    }
    r->usable++;
    *out = http_judge_score(&s->j, content, why, sizeof why);
    if (isnan(*out)) note(&r->unscored, r->first_unscored, sizeof r->first_unscored, why);
    cJSON_Delete(doc);
}

/* judge mode: one request per sample. */
static void score_judge(http_state *s, const grpo_sample *x, uint32_t n, float *out,
                        uint32_t retries, batch_report *r, uint32_t *requests) {
    http_call *calls = calloc(n, sizeof *calls);
    char why[256];
    *requests = n;
    for (uint32_t k = 0; calls && k < n; k++) {
        calls[k].body = http_judge_request(&s->j, &x[k], &calls[k].body_len, why, sizeof why);
        if (!calls[k].body) note(&r->unscored, r->first_unscored, sizeof r->first_unscored, why);
    }
    if (calls) http_client_run(&s->client, calls, n, retries);
    for (uint32_t k = 0; k < n; k++) {
        if (calls && calls[k].ok) take_judge_reply(s, &calls[k], &out[k], r);
        else if (!calls || calls[k].body)
            note(&r->failed, r->first_failed, sizeof r->first_failed,
                 calls ? calls[k].why : "out of memory");
    }
    for (uint32_t k = 0; calls && k < n; k++) free((char *)calls[k].body);
    if (calls) http_calls_release(calls, n);
    free(calls);
}

/* An open breaker's batch: NaN at once, and a warning at most once a minute. */
static void skip_batch(http_state *s, double now) {
    s->skipped++;
    if (!http_breaker_may_warn(&s->breaker, now)) return;
    char n[32];
    snprintf(n, sizeof n, "%llu", (unsigned long long)s->skipped);
    http_warn(s, "still not answering: %s batch(es) scored NaN without a request so far%s", n,
              " (circuit breaker open; probing it again periodically)");
}

/* The breaker's account of a batch that called the endpoint (ok: some reply was usable). */
static void breaker_after(http_state *s, int ok, http_admit a, const batch_report *r,
                          uint32_t requests) {
    double now = http_now();
    int ev = http_breaker_record(&s->breaker, ok, now);
    if (a == HTTP_PROBE && !ok) { /* a failed probe: the open breaker's rate-limited warning */
        if (http_breaker_may_warn(&s->breaker, now))
            http_warn(s, "probe failed (%s)%s", r->failed ? r->first_failed : r->first_malformed,
                      "; the circuit breaker stays open, batches score NaN");
        return;
    }
    report_batch(s, r, requests);
    if (ev > 0) {
        char what[200];
        http_breaker_may_warn(&s->breaker, now);
        snprintf(what, sizeof what, "circuit breaker open after %u failed batch(es) in a row "
                 "(no usable reply): batches score NaN without a request, one probe every %g s",
                 s->breaker.threshold, s->breaker.probe_every);
        http_warn(s, "%s%s", what, " (warned at most once a minute while it stays open)");
        s->skipped = 0;
    } else if (ev < 0) {
        builtin_log(s->host, GRPO_LOG_INFO, WHO, "[%s] %s: answers again; circuit breaker closed",
                    s->section, s->url);
    }
}

static int32_t http_score(void *state, const grpo_sample *x, uint32_t n, float *out,
                          grpo_error *err) {
    http_state *s = state;
    if (getpid() != s->owner) /* the breaker, the ids and the connections live in the parent */
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "[%s] builtin.http cannot score in a forked child process (isolate "
                              "= true); remove isolate: a failed request already costs only its "
                              "samples", s->section);
    for (uint32_t k = 0; k < n; k++) out[k] = NAN;
    if (!n) return GRPO_OK;
    http_admit a = http_breaker_admit(&s->breaker, http_now());
    if (a == HTTP_SKIP) return skip_batch(s, http_now()), GRPO_OK;
    batch_report r;
    memset(&r, 0, sizeof r);
    uint32_t requests = 0, retries = a == HTTP_PROBE ? 0 : s->retries;
    if (s->judge) score_judge(s, x, n, out, retries, &r, &requests);
    else score_exec(s, x, n, out, retries, &r, &requests);
    breaker_after(s, r.usable > 0 || r.failed + r.malformed == 0, a, &r, requests);
    return GRPO_OK;
}

/* api_key_env: the variable's value becomes the Authorization header (*header, malloc'd). */
static int32_t read_key(http_state *s, const grpo_config *cfg, char **header, grpo_error *err) {
    const char *name = grpo_config_get(cfg, "api_key_env");
    *header = NULL;
    if (!name || !*name) return GRPO_OK;
    const char *key = getenv(name);
    if (!key || !*key)
        return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] api_key_env: the environment variable "
                              "%s is %s (the API key is read from it, never from the run file)",
                              cfg->section, name, key ? "empty" : "not set");
    for (const char *p = key; *p; p++)
        if ((unsigned char)*p < ' ' || *p == 0x7f)
            return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] api_key_env: the value of %s has "
                                  "a control character (a newline?); it cannot go in a header",
                                  cfg->section, name);
    size_t len = strlen(key) + sizeof "Authorization: Bearer ";
    if (!(s->key = strdup(key)) || !(*header = malloc(len)))
        return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    snprintf(*header, len, "Authorization: Bearer %s", key);
    return GRPO_OK;
}

/* The limits of the requests: *t per attempt, *call for the whole score call, and the rest. */
static int32_t read_limits(http_state *s, const grpo_config *cfg, double *t, double *call,
                           int32_t *conc, double *backoff, double *cap, grpo_error *err) {
    int32_t retries = 0, fails = 0, batch = 0;
    int32_t rc = grpo_config_double(cfg, "attempt_timeout", 30, 0.001, 1e6, t, err);
    if (rc == GRPO_OK) rc = grpo_config_double(cfg, "timeout", 120, 0.001, 1e6, call, err);
    if (rc == GRPO_OK) rc = grpo_config_int(cfg, "max_concurrency", 8, 1, 1024, conc, err);
    if (rc == GRPO_OK) rc = grpo_config_int(cfg, "retries", 3, 0, 100, &retries, err);
    if (rc == GRPO_OK) rc = grpo_config_double(cfg, "backoff", 0.5, 0, 3600, backoff, err);
    if (rc == GRPO_OK) rc = grpo_config_double(cfg, "backoff_max", 10, 0, 3600, cap, err);
    if (rc == GRPO_OK) rc = grpo_config_int(cfg, "batch_size", 0, 0, 1 << 20, &batch, err);
    if (rc == GRPO_OK) rc = grpo_config_int(cfg, "breaker_failures", 3, 1, 1000000, &fails, err);
    if (rc == GRPO_OK)
        rc = grpo_config_double(cfg, "breaker_probe", 30, 0.001, 1e6, &s->breaker.probe_every, err);
    s->retries = (uint32_t)retries, s->batch_size = (uint32_t)batch;
    s->breaker.threshold = (uint32_t)fails;
    return rc;
}

static int32_t http_configure(http_state *s, const grpo_config *cfg, grpo_error *err) {
    static const char *const modes[] = {"exec", "judge", NULL};
    int32_t mode = 0, conc = 8;
    double timeout = 30, call = 120, backoff = 0.5, cap = 10;
    const char *url = grpo_config_get(cfg, "url");
    char why[256], *header = NULL;
    if (!url || http_url_check(url, why, sizeof why) != 0)
        return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] url: %s", cfg->section,
                              url ? why : "expected the endpoint's http:// or https:// URL");
    if (!(s->url = strdup(url)))
        return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    int32_t rc = grpo_config_choice(cfg, "mode", modes, 0, &mode, err);
    if (rc == GRPO_OK) rc = read_limits(s, cfg, &timeout, &call, &conc, &backoff, &cap, err);
    if (rc == GRPO_OK && (s->judge = mode == 1)) rc = http_judge_create(&s->j, cfg, err);
    if (rc == GRPO_OK) rc = read_key(s, cfg, &header, err);
    if (rc == GRPO_OK && http_client_init(&s->client, url, header, timeout, (uint32_t)conc, backoff,
                                          cap, why, sizeof why) != 0)
        rc = grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] %s", cfg->section, why);
    s->client.call_timeout = call;
    if (header) explicit_bzero(header, strlen(header)), free(header);
    return rc;
}

static void http_destroy(void *state) {
    http_state *s = state;
    if (!s) return;
    if (s->client.multi) http_client_free(&s->client);
    http_judge_free(&s->j);
    if (s->key) explicit_bzero(s->key, strlen(s->key)), free(s->key);
    free(s->url);
    free(s);
}

static int32_t http_create(const grpo_host *host, const grpo_config *cfg, void **state,
                           grpo_error *err) {
    http_state *s = calloc(1, sizeof *s);
    if (!s) return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    s->host = host, s->owner = getpid(), s->next_id = 1;
    snprintf(s->section, sizeof s->section, "%s", cfg->section);
    int32_t rc = http_configure(s, cfg, err);
    if (rc != GRPO_OK) return http_destroy(s), rc;
    *state = s;
    return GRPO_OK;
}

const grpo_reward_desc builtin_http_reward = {
    .struct_size = sizeof(grpo_reward_desc),
    .id = "builtin.http",
    .description = "Rewards and judges behind an HTTP server: the exec protocol over POST, or an "
                   "OpenAI-compatible chat-completions judge",
    .flags = 0, /* one client, breaker and id sequence per state */
    .create = http_create,
    .score = http_score,
    .destroy = http_destroy,
};
