/*
 * exec.c — builtin.exec: rewards computed by an external program in any language, speaking JSON
 * lines on stdin/stdout (the protocol is documented in sdk/EXEC_PROTOCOL.md).
 *
 * The program is started once, without a shell (argv from the run file's `command` lines), and
 * kept alive across batches. Per batch the host sends one line {"samples": [...]} and waits at most
 * `timeout` seconds for one line {"rewards": [...]}. A crash, a timeout or a malformed reply is
 * reported through the host log, the program is stopped (restarted on the next batch), and the
 * batch gets NaN ("no opinion") instead of failing the run.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "builtin.h"

typedef struct exec_state {
    const grpo_host *host;
    char **argv;   /* [argc + 1] owned, NULL-terminated */
    double timeout;
    pid_t pid;     /* 0 when not running */
    int fd;        /* our end of the socketpair: the child's stdin and stdout */
    char *buf;     /* reply bytes read so far */
    size_t len, cap;
    char section[128];
} exec_state;

static void exec_log(const exec_state *s, const char *what) {
    if (s->host && GRPO_HAS_FIELD(s->host, grpo_host, log) && s->host->log)
        s->host->log(GRPO_LOG_WARN, "builtin.exec", "[%s] %s: %s; this batch scores NaN", s->section, s->argv[0], what);
    else fprintf(stderr, "builtin.exec: [%s] %s: %s; this batch scores NaN\n", s->section, s->argv[0], what);
}

static void exec_stop(exec_state *s) {
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
    }
    if (s->fd >= 0) close(s->fd);
    s->pid = 0, s->fd = -1, s->len = 0;
}

static void exec_destroy(void *state) {
    exec_state *s = state;
    if (!s) return;
    if (s->fd >= 0) shutdown(s->fd, SHUT_WR); /* EOF on its stdin: a polite program exits */
    exec_stop(s);
    for (char **a = s->argv; a && *a; a++) free(*a);
    free(s->argv);
    free(s->buf);
    free(s);
}

/* Starts the program with one end of a socketpair as its stdin and stdout (a socket, so writes
 * to a dead program fail with EPIPE through MSG_NOSIGNAL instead of raising SIGPIPE). */
static int exec_start(exec_state *s, char *why, size_t why_size) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return snprintf(why, why_size, "socketpair: %s", strerror(errno)), -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, sv[1], STDOUT_FILENO);
    extern char **environ;
    int rc = posix_spawnp(&s->pid, s->argv[0], &fa, NULL, s->argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(sv[1]);
    if (rc != 0) {
        close(sv[0]);
        s->pid = 0;
        return snprintf(why, why_size, "cannot start: %s", strerror(rc)), -1;
    }
    s->fd = sv[0], s->len = 0;
    return 0;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int send_all(exec_state *s, const char *data, size_t n, char *why, size_t why_size) {
    while (n) {
        ssize_t w = send(s->fd, data, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return snprintf(why, why_size, "write failed: %s", strerror(errno)), -1;
        data += w, n -= (size_t)w;
    }
    return 0;
}

/* Reads until a newline or the deadline; the line (without '\n') is s->buf[0..returned). */
static long read_line(exec_state *s, double deadline, char *why, size_t why_size) {
    for (;;) {
        char *nl = s->len ? memchr(s->buf, '\n', s->len) : NULL;
        if (nl) return nl - s->buf;
        double left = deadline - now_seconds();
        if (left <= 0) return snprintf(why, why_size, "no reply within %g s (timeout)", s->timeout), -1;
        struct pollfd p = {s->fd, POLLIN, 0};
        int r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) continue; /* the deadline check above ends the wait */
        if (s->len + 4096 > s->cap) {
            size_t cap = s->cap ? 2 * s->cap : 65536;
            char *b = realloc(s->buf, cap);
            if (!b) return snprintf(why, why_size, "out of memory"), -1;
            s->buf = b, s->cap = cap;
        }
        ssize_t got = recv(s->fd, s->buf + s->len, s->cap - s->len, 0);
        if (got == 0) return snprintf(why, why_size, "exited or closed its output (crash?)"), -1;
        if (got < 0 && errno != EINTR) return snprintf(why, why_size, "read failed: %s", strerror(errno)), -1;
        if (got > 0) s->len += (size_t)got;
    }
}

static cJSON *sample_json(const grpo_sample *x) {
    cJSON *o = cJSON_CreateObject(), *fields = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "prompt", x->prompt ? x->prompt : "");
    cJSON_AddStringToObject(o, "completion", x->completion ? x->completion : "");
    cJSON *ids = cJSON_AddArrayToObject(o, "completion_ids");
    for (uint32_t i = 0; i < x->n_completion_ids; i++)
        cJSON_AddItemToArray(ids, cJSON_CreateNumber(x->completion_ids[i]));
    cJSON_AddNumberToObject(o, "group", x->group);
    cJSON_AddNumberToObject(o, "member", x->member);
    for (uint32_t i = 0; i < x->n_fields; i++)
        cJSON_AddItemToObject(fields, x->fields[i].key, cJSON_CreateRaw(x->fields[i].json));
    cJSON_AddItemToObject(o, "fields", fields);
    return o;
}

static char *request_line(const grpo_sample *samples, uint32_t n) {
    cJSON *req = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(req, "samples");
    for (uint32_t k = 0; k < n; k++) cJSON_AddItemToArray(arr, sample_json(&samples[k]));
    char *text = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    return text;
}

/* Parses {"rewards": [n numbers or nulls]} into out. */
static int parse_reply(const char *line, size_t len, uint32_t n, float *out, char *why, size_t why_size) {
    cJSON *j = cJSON_ParseWithLength(line, len);
    const cJSON *r = j ? cJSON_GetObjectItemCaseSensitive(j, "rewards") : NULL;
    int ok = cJSON_IsArray(r) && (uint32_t)cJSON_GetArraySize(r) == n;
    uint32_t k = 0;
    const cJSON *v, *items = ok ? r : NULL;
    cJSON_ArrayForEach(v, items) {
        if (cJSON_IsNumber(v)) out[k++] = (float)v->valuedouble;
        else if (cJSON_IsNull(v)) out[k++] = NAN;
        else ok = 0;
    }
    if (!ok) snprintf(why, why_size, "malformed reply: expected {\"rewards\": [%u numbers or nulls]}", n);
    cJSON_Delete(j);
    return ok ? 0 : -1;
}

static int exec_round_trip(exec_state *s, const grpo_sample *samples, uint32_t n, float *out,
                           char *why, size_t why_size) {
    char *req = request_line(samples, n);
    if (!req) return snprintf(why, why_size, "out of memory"), -1;
    double deadline = now_seconds() + s->timeout;
    int rc = send_all(s, req, strlen(req), why, why_size);
    if (rc == 0) rc = send_all(s, "\n", 1, why, why_size);
    free(req);
    long line = rc == 0 ? read_line(s, deadline, why, why_size) : -1;
    if (line < 0) return -1;
    rc = parse_reply(s->buf, (size_t)line, n, out, why, why_size);
    s->len -= (size_t)line + 1;
    memmove(s->buf, s->buf + line + 1, s->len);
    return rc;
}

static int32_t exec_score(void *state, const grpo_sample *samples, uint32_t n, float *out,
                          grpo_error *err) {
    (void)err;
    exec_state *s = state;
    char why[256];
    if ((s->pid || exec_start(s, why, sizeof why) == 0) &&
        exec_round_trip(s, samples, n, out, why, sizeof why) == 0)
        return GRPO_OK;
    exec_log(s, why);
    exec_stop(s);
    for (uint32_t k = 0; k < n; k++) out[k] = NAN;
    return GRPO_OK;
}

static int32_t exec_create(const grpo_host *host, const grpo_config *cfg, void **state,
                           grpo_error *err) {
    exec_state *s = calloc(1, sizeof *s);
    uint32_t argc = grpo_config_count(cfg, "command");
    if (!s || !(s->argv = calloc(argc + 1, sizeof *s->argv))) {
        free(s);
        return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    }
    s->host = host, s->fd = -1;
    snprintf(s->section, sizeof s->section, "%s", cfg->section);
    int32_t rc = argc ? GRPO_OK
                      : grpo_error_set(err, GRPO_ERR_INVALID,
                                       "[%s] command: expected the program and its arguments, one per line", cfg->section);
    for (uint32_t i = 0; rc == GRPO_OK && i < argc; i++)
        if (!(s->argv[i] = strdup(grpo_config_nth(cfg, "command", i))))
            rc = grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    if (rc == GRPO_OK) rc = builtin_config_float(cfg, "timeout", &s->timeout, err);
    if (rc == GRPO_OK && !(s->timeout > 0))
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "[%s] timeout: expected seconds > 0, got %g", cfg->section, s->timeout);
    if (rc != GRPO_OK) return exec_destroy(s), rc;
    *state = s;
    return GRPO_OK;
}

const grpo_reward_desc builtin_exec_reward = {
    /* .struct_size = */ sizeof(grpo_reward_desc),
    /* .id          = */ "builtin.exec",
    /* .description = */ "Rewards from an external program speaking JSON lines (sdk/EXEC_PROTOCOL.md)",
    /* .flags       = */ 0, /* one child process per state */
    /* .create      = */ exec_create,
    /* .score       = */ exec_score,
    /* .destroy     = */ exec_destroy,
};
