/*
 * http_client.h — the HTTP side of builtin.http: one batch of POST requests to one URL through a
 * libcurl multi handle, at most `concurrency` in flight, each attempt under one deadline, failed
 * attempts retried with exponential backoff.
 *
 * Retried: HTTP 429 and 5xx, and transport failures (refused or dropped connection, nothing or
 * half a reply, the attempt's deadline). Not retried: any other status (a 4xx says the request
 * itself is wrong) and a 2xx, whatever its body. The wait before retry k (1, 2, ...) is
 * min(backoff_max, backoff * 2^(k-1)) seconds, or the server's Retry-After when that is longer,
 * still capped by backoff_max. A batch (http_client_run) has a deadline of its own, call_timeout
 * seconds (the reward section's `timeout`): no attempt outlasts it, no retry starts after it, and
 * a request not yet sent then is not sent (each fails with the reason). So one request takes at
 * most min(call_timeout, (retries + 1) * attempt_timeout + the sum of its waits), and a batch at
 * most call_timeout.
 *
 * Redirects are not followed, only http and https are spoken, and the request headers (which may
 * hold an API key) are never logged nor put into a failure's cause; every reply has the key
 * replaced by "***" before anything reads it, so no message quoting a reply can carry it.
 */
#ifndef GRPO_BUILTIN_HTTP_CLIENT_H
#define GRPO_BUILTIN_HTTP_CLIENT_H

#include <stddef.h>
#include <stdint.h>

/* One request of a batch and, after http_client_run, what came of it. */
typedef struct http_call {
    const char *body;   /* borrowed: the JSON request */
    size_t body_len;
    /* results */
    int ok;             /* 1: a 2xx reply, in reply */
    long status;        /* HTTP status of the last attempt; 0 when none came */
    char *reply;        /* [reply_len + 1] the last attempt's body, NUL-terminated (malloc'd) */
    size_t reply_len;
    uint32_t attempts;  /* attempts made */
    char why[256];      /* !ok: the cause of the last attempt's failure */
    /* private to http_client.c */
    double not_before;  /* monotonic seconds before which the next attempt waits */
    int active, done;
    size_t reply_cap;
    char errbuf[256];   /* libcurl's message of the last attempt (CURL_ERROR_SIZE) */
} http_call;

typedef struct http_client {
    void *multi;                 /* CURLM */
    void *headers;               /* struct curl_slist: Content-Type, Authorization */
    char *url;
    char *secret;                /* the key of the Authorization header, scrubbed from replies */
    double timeout;              /* seconds per attempt (attempt_timeout) */
    double call_timeout;         /* seconds per batch, all attempts and waits (timeout); 0: none */
    double backoff, backoff_max; /* seconds */
    uint32_t concurrency;
} http_client;

/* A client for url; auth_header ("Authorization: Bearer ...") may be NULL. timeout is per
 * attempt; set c->call_timeout after for a batch deadline. 0, or -1 (why set). */
int http_client_init(http_client *c, const char *url, const char *auth_header, double timeout,
                     uint32_t concurrency, double backoff, double backoff_max, char *why,
                     size_t why_size);
/* Runs calls[n] (results reset first) with up to `retries` retries each; returns when every
 * call has succeeded or failed for good, by call_timeout at the latest. A call whose body is
 * NULL is skipped (not ok). */
void http_client_run(http_client *c, http_call *calls, uint32_t n, uint32_t retries);
/* Frees the replies of calls[n]. */
void http_calls_release(http_call *calls, uint32_t n);
void http_client_free(http_client *c);
/* 0 when url is an http:// or https:// URL with a host and no user or password in it, else -1
 * with why set (credentials belong in api_key_env). */
int http_url_check(const char *url, char *why, size_t why_size);
/* Replaces every occurrence of secret (NULL: none) in text[*len] by "***", in place. */
void http_scrub(char *text, size_t *len, const char *secret);
/* Monotonic seconds. */
double http_now(void);

#endif
