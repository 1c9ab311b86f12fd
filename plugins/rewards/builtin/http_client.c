/* http_client.c — a batch of POST requests through a libcurl multi handle (http_client.h). */
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http_client.h"

#define HTTP_MAX_REPLY (64u << 20) /* a longer reply body is not a reward: the attempt fails */
#define HTTP_POLL_MS 100           /* longest sleep of the loop between checks of the queue */

double http_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t on_data(char *data, size_t size, size_t nmemb, void *ud) {
    http_call *c = ud;
    size_t n = size * nmemb;
    if (n > HTTP_MAX_REPLY - c->reply_len) return 0; /* CURLE_WRITE_ERROR: not retried */
    if (c->reply_len + n + 1 > c->reply_cap) {
        size_t cap = c->reply_cap ? c->reply_cap : 4096;
        while (cap < c->reply_len + n + 1) cap *= 2;
        char *b = realloc(c->reply, cap);
        if (!b) return 0;
        c->reply = b, c->reply_cap = cap;
    }
    memcpy(c->reply + c->reply_len, data, n);
    c->reply_len += n;
    c->reply[c->reply_len] = 0;
    return n;
}

static void set_protocols(CURL *e) {
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85 */
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
}

/* Starts the next attempt of c on a fresh easy handle, for at most `seconds`; -1 when libcurl
 * cannot make one. */
static int start_attempt(http_client *cl, http_call *c, double seconds) {
    CURL *e = curl_easy_init();
    if (!e) return -1;
    free(c->reply);
    c->reply = NULL, c->reply_len = c->reply_cap = 0, c->errbuf[0] = 0;
    curl_easy_setopt(e, CURLOPT_URL, cl->url);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)c->body_len);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, (struct curl_slist *)cl->headers);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(e, CURLOPT_PRIVATE, c);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->errbuf);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)ceil(seconds * 1000));
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "grpo builtin.http");
    set_protocols(e);
    if (curl_multi_add_handle(cl->multi, e) != CURLM_OK) return curl_easy_cleanup(e), -1;
    c->active = 1, c->attempts++;
    return 0;
}

static int transient(CURLcode rc) {
    switch (rc) {
    case CURLE_COULDNT_CONNECT: case CURLE_COULDNT_RESOLVE_HOST: case CURLE_OPERATION_TIMEDOUT:
    case CURLE_GOT_NOTHING: case CURLE_RECV_ERROR: case CURLE_SEND_ERROR: case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR: case CURLE_HTTP2: case CURLE_HTTP2_STREAM:
        return 1;
    default:
        return 0;
    }
}

/* The seconds to wait before retry number c->attempts: doubling from backoff, at least what
 * the server's Retry-After asks, at most backoff_max. */
static double retry_wait(const http_client *cl, const http_call *c, CURL *e) {
    double wait = cl->backoff * pow(2.0, (double)c->attempts - 1);
    curl_off_t after = 0;
    if (curl_easy_getinfo(e, CURLINFO_RETRY_AFTER, &after) == CURLE_OK && (double)after > wait)
        wait = (double)after;
    return wait < cl->backoff_max ? wait : cl->backoff_max;
}

void http_scrub(char *text, size_t *len, const char *secret) {
    size_t k = secret ? strlen(secret) : 0;
    for (char *p = text; k && text && (p = strstr(p, secret)); p += 3) {
        memcpy(p, "***", 3);
        memmove(p + 3, p + k, *len - (size_t)(p + k - text) + 1);
        *len -= k - 3;
    }
}

/* c ends for want of time in the batch's deadline: its last failure (if any), then why. */
static void out_of_time(const http_client *cl, http_call *c, const char *what) {
    char tail[128];
    snprintf(tail, sizeof tail, "%sthe call's timeout = %g s ran out%s", c->why[0] ? "; then " : "",
             cl->call_timeout, what);
    size_t used = strnlen(c->why, sizeof c->why - 1), room = sizeof c->why - 1 - used;
    size_t add = strlen(tail) < room ? strlen(tail) : room;
    memcpy(c->why + used, tail, add);
    c->why[used + add] = '\0';
}

/* An attempt of c ended with rc: done, or a retry scheduled. */
static void finish_attempt(http_client *cl, http_call *c, CURL *e, CURLcode rc, uint32_t retries,
                           double deadline) {
    long status = 0;
    http_scrub(c->reply, &c->reply_len, cl->secret); /* a server may echo the key back */
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    c->status = status, c->active = 0;
    if (rc == CURLE_OK && status >= 200 && status < 300) {
        c->ok = c->done = 1, c->why[0] = 0;
        return;
    }
    int retry;
    if (rc != CURLE_OK) {
        snprintf(c->why, sizeof c->why, "%s", c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc));
        retry = transient(rc);
    } else {
        size_t show = c->reply_len < 120 ? c->reply_len : 120;
        snprintf(c->why, sizeof c->why, "HTTP %ld%s%.*s", status, show ? ": " : "", (int)show,
                 c->reply ? c->reply : "");
        for (char *p = c->why; *p; p++)
            if ((unsigned char)*p < ' ') *p = ' '; /* one log line */
        retry = status == 429 || status >= 500;
    }
    if (retry && c->attempts <= retries) c->not_before = http_now() + retry_wait(cl, c, e);
    else c->done = 1;
    if (!c->done && deadline > 0 && c->not_before >= deadline) /* no time left for a retry */
        c->done = 1, out_of_time(cl, c, "; no retry");
}

/* Starts what may start now, each attempt ending by deadline (0: none); past the deadline what
 * waits is done. Returns the earliest time a waiting call may start. */
static double start_due(http_client *cl, http_call *calls, uint32_t n, uint32_t *active,
                        uint32_t *left, double deadline) {
    double now = http_now(), wake = now + HTTP_POLL_MS / 1000.0;
    double seconds = deadline > 0 && deadline - now < cl->timeout ? deadline - now : cl->timeout;
    for (uint32_t i = 0; i < n; i++) {
        http_call *c = &calls[i];
        if (c->done || c->active) continue;
        if (deadline > 0 && seconds < 0.001) {
            c->done = 1, (*left)--;
            out_of_time(cl, c, c->attempts ? "; no retry" : "; not sent");
        } else if (c->not_before > now) {
            if (c->not_before < wake) wake = c->not_before;
        } else if (*active < cl->concurrency) {
            if (start_attempt(cl, c, seconds) == 0) {
                (*active)++;
            } else {
                snprintf(c->why, sizeof c->why, "libcurl cannot start a request (out of memory?)");
                c->done = 1, (*left)--;
            }
        }
    }
    return wake;
}

static void reset_call(http_call *c) {
    free(c->reply);
    c->reply = NULL, c->reply_len = c->reply_cap = 0;
    c->ok = c->active = c->done = 0, c->status = 0, c->attempts = 0, c->not_before = 0;
    c->why[0] = c->errbuf[0] = 0;
}

void http_client_run(http_client *cl, http_call *calls, uint32_t n, uint32_t retries) {
    uint32_t left = n, active = 0;
    double deadline = cl->call_timeout > 0 ? http_now() + cl->call_timeout : 0;
    for (uint32_t i = 0; i < n; i++) {
        reset_call(&calls[i]);
        if (!calls[i].body) calls[i].done = 1, left--; /* no request could be made */
    }
    while (left) {
        double wake = start_due(cl, calls, n, &active, &left, deadline);
        int running = 0, queued = 0;
        curl_multi_perform(cl->multi, &running);
        CURLMsg *m;
        while ((m = curl_multi_info_read(cl->multi, &queued))) {
            if (m->msg != CURLMSG_DONE) continue;
            CURL *e = m->easy_handle;
            http_call *c = NULL;
            curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&c);
            finish_attempt(cl, c, e, m->data.result, retries, deadline);
            curl_multi_remove_handle(cl->multi, e);
            curl_easy_cleanup(e);
            active--;
            if (c->done) left--;
        }
        if (!left) break;
        double ms = (wake - http_now()) * 1000;
        curl_multi_poll(cl->multi, NULL, 0, ms < 0 ? 0 : ms > HTTP_POLL_MS ? HTTP_POLL_MS : (int)ms,
                        NULL);
    }
}

void http_calls_release(http_call *calls, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) free(calls[i].reply), calls[i].reply = NULL;
}

int http_client_init(http_client *c, const char *url, const char *auth_header, double timeout,
                     uint32_t concurrency, double backoff, double backoff_max, char *why,
                     size_t why_size) {
    memset(c, 0, sizeof *c);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return snprintf(why, why_size, "libcurl cannot initialise"), -1;
    c->timeout = timeout, c->concurrency = concurrency;
    c->backoff = backoff, c->backoff_max = backoff_max;
    struct curl_slist *h = NULL, *t;
    const char *lines[] = {"Content-Type: application/json", "Accept: application/json",
                           "Expect:", auth_header};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        if (!lines[i]) continue;
        if (!(t = curl_slist_append(h, lines[i]))) {
            curl_slist_free_all(h), h = NULL;
            break;
        }
        h = t;
    }
    c->headers = h;
    c->url = strdup(url);
    const char *bearer = "Authorization: Bearer ";
    if (auth_header && strncmp(auth_header, bearer, strlen(bearer)) == 0 &&
        !(c->secret = strdup(auth_header + strlen(bearer))))
        c->headers = NULL, curl_slist_free_all(h);
    c->multi = curl_multi_init();
    if (c->multi) {
        curl_multi_setopt(c->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)concurrency);
        curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, (long)concurrency);
    }
    if (!c->headers || !c->url || !c->multi) {
        http_client_free(c);
        return snprintf(why, why_size, "out of memory"), -1;
    }
    return 0;
}

void http_client_free(http_client *c) {
    if (c->multi) curl_multi_cleanup(c->multi);
    curl_slist_free_all(c->headers); /* the key's header line goes with it */
    if (c->secret) explicit_bzero(c->secret, strlen(c->secret)), free(c->secret);
    free(c->url);
    memset(c, 0, sizeof *c);
    curl_global_cleanup();
}

int http_url_check(const char *url, char *why, size_t why_size) {
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *user = NULL, *pass = NULL;
    int rc = -1;
    if (!u) return snprintf(why, why_size, "out of memory"), -1;
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK)
        snprintf(why, why_size, "'%s' is not a URL", url);
    else if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
             (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0))
        snprintf(why, why_size, "'%s': expected an http:// or https:// URL", url);
    else if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !*host)
        snprintf(why, why_size, "'%s' has no host", url);
    else if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK ||
             curl_url_get(u, CURLUPART_PASSWORD, &pass, 0) == CURLUE_OK)
        snprintf(why, why_size, "a user or password in the URL is refused (it would be logged and "
                 "saved with the run file): give the key through api_key_env");
    else
        rc = 0;
    curl_free(scheme), curl_free(host), curl_free(user), curl_free(pass);
    curl_url_cleanup(u);
    return rc;
}
