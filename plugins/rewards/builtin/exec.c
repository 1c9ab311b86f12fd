/*
 * exec.c — builtin.exec: rewards computed by an external program in any language, speaking JSON
 * lines on stdin/stdout (the protocol is documented in sdk/EXEC_PROTOCOL.md).
 *
 * The program is resolved (exec_path.h) and started by create(), so a command that cannot run is
 * an error before any training work; it runs without a shell (argv from the run file's `command`
 * lines), in its own process group, with none of grpo's file descriptors but stdin, stdout (one
 * socket) and stderr, and is kept alive across batches.
 *
 * Per batch the host sends one line {"id": N, "samples": [...]} and expects one line
 * {"id": N, "rewards": [...]}; N grows by one per batch and is never reused. The whole exchange,
 * writing included, has one deadline of `timeout` seconds (the socket is non-blocking and polled
 * both ways), so a program that never reads cannot stall the run. A reply to another id is stale
 * (an extra line of an earlier batch): it is dropped, with one warning per batch, and the wait
 * goes on. A crash, the deadline or a malformed reply is logged, the program's whole process
 * group is killed (restarted on the next batch) and the batch gets NaN ("no opinion") instead of
 * failing the run.
 * A reward that is not a finite float (1e999, 1e39) is NaN with a warning. Scoring in a forked
 * child (isolate = true) is refused: what score() changes in the state would be lost with it.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
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
#include "exec_path.h"

#define EXEC_MAX_LINE (64u << 20) /* a longer reply line is not the protocol: stop reading it */
#define EXEC_GRACE_S 1.0          /* teardown: time a program has to exit after end of stdin */

typedef struct exec_state {
    const grpo_host *host;
    char **argv;       /* [argc + 1] owned, NULL-terminated, as the run file wrote them */
    char *program;     /* argv[0] resolved to an absolute path (exec_path.h) */
    char *dir;         /* where the program runs: the run file's directory; NULL = grpo's */
    double timeout;    /* seconds for one whole exchange */
    uint64_t next_id;  /* id of the next request; never reused, not even after a restart */
    pid_t owner;       /* the process that created the state: only it may score (see exec_score) */
    pid_t pid;         /* 0 when not running; also the id of its process group */
    int fd;            /* our end of the socketpair (non-blocking): the child's stdin and stdout */
    char *buf;         /* reply bytes read so far, possibly several lines */
    size_t len, cap;
    uint32_t dropped;      /* reply lines of this exchange that answered another request */
    double first_dropped;  /* the id the first of them answered */
    char section[128];
} exec_state;

static void exec_warn(const exec_state *s, const char *what) {
    builtin_log(s->host, GRPO_LOG_WARN, "builtin.exec", "[%s] %s: %s", s->section, s->argv[0], what);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Kills the program's whole process group (helpers it started too) and reaps it. The leader is
 * not reaped before the kill, so its pid, the group id, cannot have been reused. */
static void exec_kill(exec_state *s) {
    if (s->pid > 0) {
        kill(-s->pid, SIGKILL);
        while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR) {}
    }
    if (s->fd >= 0) close(s->fd);
    s->pid = 0, s->fd = -1, s->len = 0;
}

/* Teardown: end of stdin asks the program to exit; after EXEC_GRACE_S its group is killed anyway
 * (a helper it left behind included). WNOWAIT keeps the exited leader a zombie until the kill. */
static void exec_stop_politely(exec_state *s) {
    if (s->pid > 0) {
        shutdown(s->fd, SHUT_WR);
        double until = now_seconds() + EXEC_GRACE_S;
        siginfo_t info;
        do {
            memset(&info, 0, sizeof info);
            if (waitid(P_PID, (id_t)s->pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid)
                break;
            nanosleep(&(struct timespec){0, 5000000}, NULL);
        } while (now_seconds() < until);
    }
    exec_kill(s);
}

static void exec_destroy(void *state) {
    exec_state *s = state;
    if (!s) return;
    exec_stop_politely(s);
    for (char **a = s->argv; a && *a; a++) free(*a);
    free(s->argv);
    free(s->program);
    free(s->dir);
    free(s->buf);
    free(s);
}

/* The child's file actions: the socket as stdin and stdout, stderr shared, every other
 * descriptor closed (grpo's own files must not leak into it even where core/ forgot O_CLOEXEC),
 * and the run file's directory as working directory. */
static int exec_file_actions(const exec_state *s, posix_spawn_file_actions_t *fa, int child_fd) {
    int rc = posix_spawn_file_actions_init(fa);
    if (rc) return rc;
    rc = posix_spawn_file_actions_adddup2(fa, child_fd, STDIN_FILENO);
    if (!rc) rc = posix_spawn_file_actions_adddup2(fa, child_fd, STDOUT_FILENO);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
    if (!rc) rc = posix_spawn_file_actions_addclosefrom_np(fa, STDERR_FILENO + 1);
#endif /* elsewhere SOCK_CLOEXEC keeps our socket out, and grpo's files rely on O_CLOEXEC */
    if (!rc && s->dir) rc = posix_spawn_file_actions_addchdir_np(fa, s->dir);
    if (rc) posix_spawn_file_actions_destroy(fa);
    return rc;
}

/* The child leads a new process group (so one kill reaches its helpers), with default signal
 * dispositions and mask: grpo's SIG_IGN of SIGPIPE, if any, must not carry over. */
static int exec_attributes(posix_spawnattr_t *at) {
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    int rc = posix_spawnattr_init(at);
    if (rc) return rc;
    rc = posix_spawnattr_setflags(at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                          POSIX_SPAWN_SETSIGDEF);
    if (!rc) rc = posix_spawnattr_setpgroup(at, 0);
    if (!rc) rc = posix_spawnattr_setsigmask(at, &none);
    if (!rc) rc = posix_spawnattr_setsigdefault(at, &all);
    if (rc) posix_spawnattr_destroy(at);
    return rc;
}

/* Starts the program with one end of a socketpair as its stdin and stdout (a socket, so writes
 * to a dead program fail with EPIPE through MSG_NOSIGNAL instead of raising SIGPIPE). */
static int exec_start(exec_state *s, char *why, size_t why_size) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return snprintf(why, why_size, "socketpair: %s", strerror(errno)), -1;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    int rc = exec_file_actions(s, &fa, sv[1]);
    if (rc == 0 && (rc = exec_attributes(&at)) != 0) posix_spawn_file_actions_destroy(&fa);
    if (rc == 0) {
        extern char **environ;
        rc = posix_spawn(&s->pid, s->program, &fa, &at, s->argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&at);
    }
    close(sv[1]);
    if (rc == 0 && fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK) != 0) rc = errno;
    s->fd = sv[0], s->len = 0;
    if (rc != 0) {
        if (s->pid > 0) exec_kill(s);
        else close(sv[0]), s->fd = -1;
        s->pid = 0;
        return snprintf(why, why_size, "cannot start %s: %s", s->program, strerror(rc)), -1;
    }
    return 0;
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

/* {"id": id, "samples": [...]}\n as one malloc'd string. */
static char *request_line(uint64_t id, const grpo_sample *samples, uint32_t n, size_t *len) {
    cJSON *req = cJSON_CreateObject();
    cJSON_AddNumberToObject(req, "id", (double)id);
    cJSON *arr = cJSON_AddArrayToObject(req, "samples");
    for (uint32_t k = 0; k < n; k++) cJSON_AddItemToArray(arr, sample_json(&samples[k]));
    char *text = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    char *line = text ? realloc(text, (*len = strlen(text)) + 2) : NULL;
    if (!line) return free(text), NULL;
    line[(*len)++] = '\n', line[*len] = 0;
    return line;
}

/* Stores the n rewards of reply r in out; a value that is no finite float is NaN and counted in
 * the one warning of this batch. 0, or -1 when r is not n numbers or nulls. */
static int store_rewards(exec_state *s, const cJSON *r, uint32_t n, float *out) {
    if (!cJSON_IsArray(r) || (uint32_t)cJSON_GetArraySize(r) != n) return -1;
    uint32_t k = 0, bad = 0, first = 0;
    double first_value = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, r) {
        if (cJSON_IsNull(v)) {
            out[k++] = NAN;
            continue;
        }
        if (!cJSON_IsNumber(v)) return -1;
        double d = v->valuedouble;
        int ok = isfinite(d) && fabs(d) <= FLT_MAX;
        if (!ok && !bad++) first = k, first_value = d;
        out[k++] = ok ? (float)d : NAN;
    }
    if (bad) {
        char what[256];
        snprintf(what, sizeof what, "%u of %u rewards are not finite floats (sample %u: %g); they "
                 "score NaN", bad, n, first, first_value);
        exec_warn(s, what);
    }
    return 0;
}

/* One complete reply line: 1 when it answers request id (rewards in out), 0 when it answers
 * another request (dropped, counted in s->dropped), -1 when it is not the protocol (why set). */
static int take_reply(exec_state *s, const char *line, size_t len, uint64_t id, uint32_t n,
                      float *out, char *why, size_t why_size) {
    cJSON *j = cJSON_ParseWithLength(line, len);
    const cJSON *jid = cJSON_GetObjectItemCaseSensitive(j, "id");
    int rc = -1;
    if (cJSON_IsNumber(jid) && jid->valuedouble != (double)id) {
        if (!s->dropped++) s->first_dropped = jid->valuedouble;
        rc = 0;
    } else if (cJSON_IsNumber(jid) &&
               store_rewards(s, cJSON_GetObjectItemCaseSensitive(j, "rewards"), n, out) == 0) {
        rc = 1;
    } else {
        snprintf(why, why_size, "malformed reply: expected {\"id\": %llu, \"rewards\": [%u numbers "
                 "or nulls]} (sdk/EXEC_PROTOCOL.md)", (unsigned long long)id, n);
    }
    cJSON_Delete(j);
    return rc;
}

/* Handles every complete line in the buffer; 1 when the reply to id was among them. */
static int take_lines(exec_state *s, uint64_t id, uint32_t n, float *out, char *why,
                      size_t why_size) {
    char *nl;
    while (s->len && (nl = memchr(s->buf, '\n', s->len))) {
        size_t line = (size_t)(nl - s->buf);
        int rc = take_reply(s, s->buf, line, id, n, out, why, why_size);
        s->len -= line + 1;
        memmove(s->buf, s->buf + line + 1, s->len);
        if (rc) return rc;
    }
    if (s->len > EXEC_MAX_LINE)
        return snprintf(why, why_size, "reply line longer than %u MiB", EXEC_MAX_LINE >> 20), -1;
    return 0;
}

/* Reads what the socket has now; -1 (why set) at end of output or on an error. */
static int read_some(exec_state *s, char *why, size_t why_size) {
    if (s->len + 4096 > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 65536;
        char *b = realloc(s->buf, cap);
        if (!b) return snprintf(why, why_size, "out of memory"), -1;
        s->buf = b, s->cap = cap;
    }
    ssize_t got = recv(s->fd, s->buf + s->len, s->cap - s->len, 0);
    if (got == 0) return snprintf(why, why_size, "exited or closed its output (crash?)"), -1;
    if (got < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
        return snprintf(why, why_size, "read failed: %s", strerror(errno)), -1;
    if (got > 0) s->len += (size_t)got;
    return 0;
}

/* Writes what the socket takes now of req[*sent..len); -1 (why set) when the program is gone. */
static int write_some(exec_state *s, const char *req, size_t len, size_t *sent, char *why,
                      size_t why_size) {
    ssize_t w = send(s->fd, req + *sent, len - *sent, MSG_NOSIGNAL);
    if (w < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
        return snprintf(why, why_size, "write failed: %s", strerror(errno)), -1;
    if (w > 0) *sent += (size_t)w;
    return 0;
}

/* Sends request id and waits for its reply, both before one deadline. Replies are read while
 * the request is still being written (a chatty program cannot deadlock us) but only handled once
 * it is all out, so a reply never leaves half a request behind. */
static int exec_exchange(exec_state *s, uint64_t id, const char *req, size_t len, uint32_t n,
                         float *out, char *why, size_t why_size) {
    double deadline = now_seconds() + s->timeout;
    size_t sent = 0;
    for (;;) {
        int rc = sent == len ? take_lines(s, id, n, out, why, why_size) : 0;
        if (rc) return rc > 0 ? 0 : -1;
        double left = deadline - now_seconds();
        if (left <= 0)
            return snprintf(why, why_size, sent < len ? "did not read the request within %g s "
                            "(timeout)" : "no reply within %g s (timeout)", s->timeout), -1;
        struct pollfd p = {s->fd, (short)(POLLIN | (sent < len ? POLLOUT : 0)), 0};
        int r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno != EINTR) return snprintf(why, why_size, "poll: %s", strerror(errno)), -1;
        if (r <= 0) continue; /* the deadline check above ends the wait */
        if ((p.revents & POLLOUT) && write_some(s, req, len, &sent, why, why_size) != 0) return -1;
        if ((p.revents & (POLLIN | POLLHUP | POLLERR)) && read_some(s, why, why_size) != 0) return -1;
    }
}

static int32_t exec_score(void *state, const grpo_sample *samples, uint32_t n, float *out,
                          grpo_error *err) {
    exec_state *s = state;
    /* In a forked child (the host's isolate = true) the next id, the read buffer and a restarted
     * program would be lost with the child: ids would repeat and stale lines pass as replies. */
    if (getpid() != s->owner)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "[%s] builtin.exec cannot score in a forked child process (isolate = "
                              "true); remove isolate: its program already runs in its own process",
                              s->section);
    char why[256];
    size_t len = 0;
    uint64_t id = s->next_id++;
    s->dropped = 0;
    char *req = request_line(id, samples, n, &len);
    int rc = req ? 0 : (snprintf(why, sizeof why, "out of memory"), -1);
    if (rc == 0 && !s->pid) rc = exec_start(s, why, sizeof why);
    if (rc == 0) rc = exec_exchange(s, id, req, len, n, out, why, sizeof why);
    free(req);
    if (s->dropped) { /* one warning per batch, however many lines */
        char what[256];
        snprintf(what, sizeof what, "dropped %u reply line%s answering another request while waiting "
                 "for request %llu (first: request %.17g); replies must echo the request's id",
                 s->dropped, s->dropped > 1 ? "s" : "", (unsigned long long)id, s->first_dropped);
        exec_warn(s, what);
    }
    if (rc == 0) return GRPO_OK;
    char what[320];
    snprintf(what, sizeof what, "%s; this batch scores NaN (the program is restarted)", why);
    exec_warn(s, what);
    exec_kill(s);
    for (uint32_t k = 0; k < n; k++) out[k] = NAN;
    return GRPO_OK;
}

/* The run file's directory, against which a relative program path resolves and where the
 * program runs (ABI 1.2 grpo_config.dir); NULL, the current directory, from an older host. */
static const char *exec_run_dir(const grpo_config *cfg) {
    return GRPO_HAS_FIELD(cfg, grpo_config, dir) ? cfg->dir : NULL;
}

/* Copies argv, resolves the program and reads timeout; a command that cannot run is an error. */
static int32_t exec_configure(exec_state *s, const grpo_config *cfg, uint32_t argc, grpo_error *err) {
    if (!argc)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "[%s] command: expected the program and its arguments, one per line", cfg->section);
    for (uint32_t i = 0; i < argc; i++)
        if (!(s->argv[i] = strdup(grpo_config_nth(cfg, "command", i))))
            return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    const char *dir = exec_run_dir(cfg);
    char why[256];
    if (dir && !(s->dir = strdup(dir)))
        return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    if (!(s->program = builtin_exec_resolve(s->argv[0], dir, why, sizeof why)))
        return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] command: cannot run '%s'%s%s%s: %s",
                              cfg->section, s->argv[0], dir ? " (run file directory " : "",
                              dir ? dir : "", dir ? ")" : "", why);
    int32_t rc = grpo_config_double(cfg, "timeout", 60, -HUGE_VAL, HUGE_VAL, &s->timeout, err);
    if (rc == GRPO_OK && !(s->timeout > 0 && s->timeout < 1e6))
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "[%s] timeout: expected seconds in (0, 1e6), got %g",
                            cfg->section, s->timeout);
    return rc;
}

static int32_t exec_create(const grpo_host *host, const grpo_config *cfg, void **state,
                           grpo_error *err) {
    exec_state *s = calloc(1, sizeof *s);
    uint32_t argc = grpo_config_count(cfg, "command");
    if (!s || !(s->argv = calloc(argc + 1, sizeof *s->argv))) {
        free(s);
        return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    }
    s->host = host, s->fd = -1, s->next_id = 1, s->owner = getpid();
    snprintf(s->section, sizeof s->section, "%s", cfg->section);
    int32_t rc = exec_configure(s, cfg, argc, err);
    char why[256];
    if (rc == GRPO_OK && exec_start(s, why, sizeof why) != 0) /* e.g. a script's missing interpreter */
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "[%s] command: %s", cfg->section, why);
    if (rc != GRPO_OK) return exec_destroy(s), rc;
    *state = s;
    return GRPO_OK;
}

const grpo_reward_desc builtin_exec_reward = {
    .struct_size = sizeof(grpo_reward_desc),
    .id = "builtin.exec",
    .description = "Rewards from an external program speaking JSON lines (sdk/EXEC_PROTOCOL.md)",
    .flags = 0, /* one child process per state */
    .create = exec_create,
    .score = exec_score,
    .destroy = exec_destroy,
};
