/* reward_wire.c — the bytes between an isolated reward's worker and the trainer (see
 * reward_wire.h). */
#include "train/reward_wire.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "train/metrics.h"

#define NULL_STR 0xffffffffu

void grpo_wire_free(grpo_wire *w) {
    free(w->buf);
    *w = (grpo_wire){0};
}

void grpo_wire_put(grpo_wire *w, const void *bytes, size_t n) {
    if (w->oom) return;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + n) cap *= 2;
        unsigned char *b = realloc(w->buf, cap);
        if (!b) {
            w->oom = 1;
            return;
        }
        w->buf = b, w->cap = cap;
    }
    if (n) memcpy(w->buf + w->len, bytes, n);
    w->len += n;
}

void grpo_wire_u32(grpo_wire *w, uint32_t v) { grpo_wire_put(w, &v, sizeof v); }
void grpo_wire_u64(grpo_wire *w, uint64_t v) { grpo_wire_put(w, &v, sizeof v); }

void grpo_wire_str(grpo_wire *w, const char *s) {
    if (!s) {
        grpo_wire_u32(w, NULL_STR);
        return;
    }
    size_t n = strlen(s);
    grpo_wire_u32(w, (uint32_t)n);
    grpo_wire_put(w, s, n + 1);
}

const void *grpo_wire_get(grpo_wire_in *r, size_t n) {
    if (r->bad || n > r->len - r->off) {
        r->bad = 1;
        return NULL;
    }
    const void *p = r->p + r->off;
    r->off += n;
    return p;
}

uint32_t grpo_wire_get_u32(grpo_wire_in *r) {
    uint32_t v = 0;
    const void *p = grpo_wire_get(r, sizeof v);
    if (p) memcpy(&v, p, sizeof v);
    return v;
}

uint64_t grpo_wire_get_u64(grpo_wire_in *r) {
    uint64_t v = 0;
    const void *p = grpo_wire_get(r, sizeof v);
    if (p) memcpy(&v, p, sizeof v);
    return v;
}

const char *grpo_wire_get_str(grpo_wire_in *r) {
    uint32_t n = grpo_wire_get_u32(r);
    if (n == NULL_STR || r->bad) return NULL;
    const char *s = grpo_wire_get(r, (size_t)n + 1);
    if (s && s[n] != 0) r->bad = 1;
    return r->bad ? NULL : s;
}

/* ---- batches -------------------------------------------------------------------------------- */

void grpo_wire_put_samples(grpo_wire *w, const grpo_sample *samples, uint32_t n) {
    grpo_wire_u32(w, n);
    for (uint32_t i = 0; i < n; i++) {
        const grpo_sample *s = &samples[i];
        grpo_wire_str(w, s->prompt);
        grpo_wire_str(w, s->completion);
        grpo_wire_u32(w, s->messages ? s->n_messages : NULL_STR);
        for (uint32_t j = 0; s->messages && j < s->n_messages; j++)
            grpo_wire_str(w, s->messages[j].role), grpo_wire_str(w, s->messages[j].content);
        grpo_wire_u32(w, s->fields ? s->n_fields : NULL_STR);
        for (uint32_t j = 0; s->fields && j < s->n_fields; j++)
            grpo_wire_str(w, s->fields[j].key), grpo_wire_str(w, s->fields[j].json);
        grpo_wire_u32(w, s->completion_ids ? s->n_completion_ids : NULL_STR);
        if (s->completion_ids)
            grpo_wire_put(w, s->completion_ids, (size_t)s->n_completion_ids * sizeof(int32_t));
        grpo_wire_u32(w, s->group), grpo_wire_u32(w, s->member), grpo_wire_u32(w, s->truncated);
        grpo_wire_u64(w, s->step), grpo_wire_u64(w, s->total_steps);
    }
}

/* A count read before its elements, each at least min_size bytes: NULL_STR stays (an array
 * that was NULL); a count the bytes left cannot hold marks the reader bad. */
static uint32_t get_count(grpo_wire_in *r, size_t min_size) {
    uint32_t n = grpo_wire_get_u32(r);
    if (n != NULL_STR && (size_t)n * min_size > r->len - r->off) r->bad = 1;
    return r->bad ? 0 : n;
}

static int get_sample(grpo_wire_in *r, grpo_sample *s) {
    *s = (grpo_sample){.struct_size = sizeof(grpo_sample)};
    s->prompt = grpo_wire_get_str(r);
    s->completion = grpo_wire_get_str(r);
    uint32_t m = get_count(r, 8);
    if (m != NULL_STR && !r->bad) {
        grpo_message *msg = calloc(m ? m : 1, sizeof *msg);
        if (!msg) return -1;
        for (uint32_t j = 0; j < m; j++)
            msg[j].role = grpo_wire_get_str(r), msg[j].content = grpo_wire_get_str(r);
        s->messages = msg, s->n_messages = m;
    }
    uint32_t f = get_count(r, 8);
    if (f != NULL_STR && !r->bad) {
        grpo_field *fl = calloc(f ? f : 1, sizeof *fl);
        if (!fl) return -1;
        for (uint32_t j = 0; j < f; j++)
            fl[j].key = grpo_wire_get_str(r), fl[j].json = grpo_wire_get_str(r);
        s->fields = fl, s->n_fields = f;
    }
    uint32_t k = get_count(r, sizeof(int32_t));
    if (k != NULL_STR && !r->bad) {
        int32_t *ids = malloc((k ? k : 1) * sizeof *ids);
        const void *p = grpo_wire_get(r, (size_t)k * sizeof *ids);
        if (!ids) return -1;
        if (p) memcpy(ids, p, (size_t)k * sizeof *ids);
        s->completion_ids = ids, s->n_completion_ids = k;
    }
    s->group = grpo_wire_get_u32(r), s->member = grpo_wire_get_u32(r);
    s->truncated = grpo_wire_get_u32(r);
    s->step = grpo_wire_get_u64(r), s->total_steps = grpo_wire_get_u64(r);
    return r->bad ? -1 : 0;
}

int grpo_wire_get_samples(grpo_wire_in *r, grpo_sample **samples, uint32_t *n) {
    uint32_t count = get_count(r, 40);
    *samples = NULL, *n = 0;
    if (r->bad || count == NULL_STR) return -1;
    grpo_sample *s = calloc(count ? count : 1, sizeof *s);
    if (!s) return -1;
    uint32_t i = 0;
    int rc = 0;
    while (rc == 0 && i < count) rc = get_sample(r, &s[i++]);
    *samples = s, *n = i;
    if (rc != 0) {
        grpo_wire_samples_free(s, i);
        *samples = NULL, *n = 0;
    }
    return rc;
}

void grpo_wire_samples_free(grpo_sample *samples, uint32_t n) {
    for (uint32_t i = 0; samples && i < n; i++) {
        free((void *)samples[i].messages);
        free((void *)samples[i].fields);
        free((void *)samples[i].completion_ids);
    }
    free(samples);
}

/* ---- reward sections ------------------------------------------------------------------------ */

void grpo_wire_put_spec(grpo_wire *w, const grpo_reward_spec *spec) {
    grpo_wire_str(w, spec->name), grpo_wire_str(w, spec->section);
    grpo_wire_str(w, spec->plugin), grpo_wire_str(w, spec->dir);
    grpo_wire_u32(w, spec->n);
    for (uint32_t j = 0; j < spec->n; j++)
        grpo_wire_str(w, spec->keys[j]), grpo_wire_str(w, spec->values[j]);
}

int grpo_wire_get_spec(grpo_wire_in *r, grpo_reward_spec *spec) {
    *spec = (grpo_reward_spec){.weight = 1.0};
    spec->name = (char *)grpo_wire_get_str(r), spec->section = (char *)grpo_wire_get_str(r);
    spec->plugin = (char *)grpo_wire_get_str(r), spec->dir = (char *)grpo_wire_get_str(r);
    uint32_t n = get_count(r, 8);
    if (r->bad || n == NULL_STR || !spec->name || !spec->section || !spec->plugin) return -1;
    spec->keys = calloc(n ? n : 1, sizeof *spec->keys);
    spec->values = calloc(n ? n : 1, sizeof *spec->values);
    spec->lines = calloc(n ? n : 1, sizeof *spec->lines);
    if (!spec->keys || !spec->values || !spec->lines) return grpo_wire_spec_free(spec), -1;
    for (uint32_t j = 0; j < n; j++) {
        spec->keys[j] = (char *)grpo_wire_get_str(r);
        spec->values[j] = (char *)grpo_wire_get_str(r);
    }
    spec->n = n;
    for (uint32_t j = 0; j < n; j++)
        if (!spec->keys[j] || !spec->values[j]) r->bad = 1;
    if (r->bad) return grpo_wire_spec_free(spec), -1;
    return 0;
}

void grpo_wire_spec_free(grpo_reward_spec *spec) {
    free(spec->keys), free(spec->values), free(spec->lines);
    spec->keys = spec->values = NULL, spec->lines = NULL, spec->n = 0;
}

/* ---- frames: a u32 length, then the bytes, under a deadline --------------------------------- */

/* Waits until fd is ready for events or the deadline (<= 0: none) passes: 0 ready, -2 deadline. */
static int wait_fd(int fd, short events, double deadline) {
    for (;;) {
        int ms = -1;
        if (deadline > 0) {
            double left = deadline - grpo_now();
            if (left <= 0) return -2;
            ms = (int)(left * 1000) + 1;
        }
        struct pollfd p = {fd, events, 0};
        int r = poll(&p, 1, ms);
        if (r > 0) return 0;
        if (r < 0 && errno != EINTR) return -1;
    }
}

/* 0 when all n bytes went; -1 on a closed or broken socket, -2 at the deadline. */
static int send_all(int fd, const void *buf, size_t n, double deadline) {
    const unsigned char *p = buf;
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            p += w, n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = wait_fd(fd, POLLOUT, deadline);
            if (rc) return rc;
            continue;
        }
        return -1;
    }
    return 0;
}

/* 0 when all n bytes came; -1 at end of file or on an error, -2 at the deadline. */
static int recv_all(int fd, void *buf, size_t n, double deadline) {
    unsigned char *p = buf;
    while (n) {
        ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
        if (r > 0) {
            p += r, n -= (size_t)r;
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = wait_fd(fd, POLLIN, deadline);
            if (rc) return rc;
            continue;
        }
        return -1;
    }
    return 0;
}

int grpo_wire_send(int fd, const grpo_wire *w, double deadline) {
    if (w->oom) return -1;
    uint32_t n = (uint32_t)w->len;
    int rc = send_all(fd, &n, sizeof n, deadline);
    return rc ? rc : send_all(fd, w->buf, w->len, deadline);
}

int grpo_wire_recv(int fd, unsigned char **buf, size_t *len, double deadline) {
    uint32_t n = 0;
    *buf = NULL, *len = 0;
    int rc = recv_all(fd, &n, sizeof n, deadline);
    if (rc) return rc;
    if (!(*buf = malloc(n ? n : 1))) return -1;
    rc = recv_all(fd, *buf, n, deadline);
    if (rc) return free(*buf), *buf = NULL, rc;
    *len = n;
    return 0;
}
