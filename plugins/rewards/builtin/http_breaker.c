/* http_breaker.c — the circuit breaker of builtin.http (http_breaker.h). */
#include "http_breaker.h"

http_admit http_breaker_admit(http_breaker *b, double now) {
    if (!b->open) return HTTP_CALL;
    if (now < b->next_probe) return HTTP_SKIP;
    b->next_probe = now + b->probe_every; /* a probe's own wait does not delay the next one */
    return HTTP_PROBE;
}

int http_breaker_record(http_breaker *b, int ok, double now) {
    if (ok) {
        int was_open = b->open;
        b->failed = 0, b->open = 0;
        return was_open ? -1 : 0;
    }
    if (b->open) return 0;
    if (++b->failed < b->threshold) return 0;
    b->open = 1, b->next_probe = now + b->probe_every, b->last_warned = -1;
    return 1;
}

int http_breaker_may_warn(http_breaker *b, double now) {
    if (b->last_warned >= 0 && now - b->last_warned < HTTP_BREAKER_WARN_EVERY) return 0;
    b->last_warned = now;
    return 1;
}
