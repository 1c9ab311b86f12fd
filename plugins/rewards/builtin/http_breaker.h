/*
 * http_breaker.h — the circuit breaker of builtin.http: a dead endpoint turns into batches of
 * NaN at once instead of every batch waiting out its timeouts and retries.
 *
 * Closed (the normal state): every batch calls the endpoint. After `threshold` failed batches in
 * a row (a batch fails when none of its requests got a usable reply) it opens: batches score NaN
 * without a request, except one probe batch every `probe_every` seconds, sent with no retries. A
 * probe that succeeds closes it; one that fails keeps it open until the next probe. While open,
 * the reward warns at most once per HTTP_BREAKER_WARN_EVERY seconds.
 */
#ifndef GRPO_BUILTIN_HTTP_BREAKER_H
#define GRPO_BUILTIN_HTTP_BREAKER_H

#include <stdint.h>

#define HTTP_BREAKER_WARN_EVERY 60.0 /* seconds between two warnings of an open breaker */

typedef enum { HTTP_CALL, HTTP_PROBE, HTTP_SKIP } http_admit;

typedef struct http_breaker {
    uint32_t threshold;   /* failed batches in a row that open it */
    double probe_every;   /* seconds between probes while open */
    uint32_t failed;      /* failed batches in a row */
    int open;
    double next_probe;    /* while open: when the next batch may probe */
    double last_warned;   /* when the open breaker last warned; < 0: not since it opened */
} http_breaker;

/* What the batch starting at `now` does. */
http_admit http_breaker_admit(http_breaker *b, double now);
/* The batch's outcome; returns 1 when this opened the breaker, -1 when it closed it, else 0. */
int http_breaker_record(http_breaker *b, int ok, double now);
/* 1 when an open breaker may warn now (then it counts as warned), else 0. */
int http_breaker_may_warn(http_breaker *b, double now);

#endif
