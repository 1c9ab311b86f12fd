/* exec_proc.c — the external program of builtin.exec and builtin.exec_env (exec_proc.h). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "builtin_log.h"
#include "exec_path.h"
#include "exec_proc.h"

#define EXEC_MAX_LINE (64u << 20) /* a longer reply line is not the protocol: stop reading it */
#define EXEC_GRACE_S 1.0          /* teardown: time a program has to exit after end of stdin */

void exec_proc_warn(const exec_proc *s, const char *what) {
    builtin_log(s->host, GRPO_LOG_WARN, s->who, "[%s] %s: %s", s->section, s->argv[0], what);
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Kills the program's whole process group (helpers it started too) and reaps it. The leader is
 * not reaped before the kill, so its pid, the group id, cannot have been reused. */
void exec_proc_kill(exec_proc *s) {
    if (s->pid > 0) {
        kill(-s->pid, SIGKILL);
        while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR) {}
    }
    if (s->fd >= 0) close(s->fd);
    s->pid = 0, s->fd = -1, s->len = 0;
}

/* Teardown: end of stdin asks the program to exit; after EXEC_GRACE_S its group is killed anyway
 * (a helper it left behind included). WNOWAIT keeps the exited leader a zombie until the kill. */
static void exec_stop_politely(exec_proc *s) {
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
    exec_proc_kill(s);
}

void exec_proc_free(exec_proc *s) {
    if (!s->argv) return;
    exec_stop_politely(s);
    for (char **a = s->argv; *a; a++) free(*a);
    free(s->argv), free(s->program), free(s->dir), free(s->buf);
    memset(s, 0, sizeof *s);
}

/* The child's file actions: the socket as stdin and stdout, stderr shared, every other
 * descriptor closed (grpo's own files must not leak into it even where core/ forgot O_CLOEXEC),
 * and the run file's directory as working directory. */
static int exec_file_actions(const exec_proc *s, posix_spawn_file_actions_t *fa, int child_fd) {
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
int exec_attributes(posix_spawnattr_t *at) {
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
static int exec_start(exec_proc *s, char *why, size_t why_size) {
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
    s->fd = sv[0], s->len = 0, s->starts++;
    if (rc != 0) {
        if (s->pid > 0) exec_proc_kill(s);
        else close(sv[0]), s->fd = -1;
        s->pid = 0;
        return snprintf(why, why_size, "cannot start %s: %s", s->program, strerror(rc)), -1;
    }
    return 0;
}

/* One complete line: 1 when it answers request id (taken by fn), 0 when it answers another
 * request (dropped, counted in s->dropped), -1 when it is not the protocol (why set). */
static int take_line(exec_proc *s, const char *line, size_t len, uint64_t id, exec_reply_fn fn,
                     void *ctx, char *why, size_t why_size) {
    cJSON *j = cJSON_ParseWithLength(line, len);
    const cJSON *jid = cJSON_GetObjectItemCaseSensitive(j, "id");
    int rc = 1;
    snprintf(s->last_line, sizeof s->last_line, "%.*s", (int)(len < 150 ? len : 150), line);
    if (cJSON_IsNumber(jid) && jid->valuedouble != (double)id) {
        if (!s->dropped++) s->first_dropped = jid->valuedouble;
        rc = 0;
    } else if (fn(ctx, cJSON_IsNumber(jid) ? j : NULL, why, why_size) != 0) {
        rc = -1;
    }
    cJSON_Delete(j);
    return rc;
}

/* Handles every complete line in the buffer; 1 when the reply to id was among them. */
static int take_lines(exec_proc *s, uint64_t id, exec_reply_fn fn, void *ctx, char *why,
                      size_t why_size) {
    char *nl;
    while (s->len && (nl = memchr(s->buf, '\n', s->len))) {
        size_t line = (size_t)(nl - s->buf);
        int rc = take_line(s, s->buf, line, id, fn, ctx, why, why_size);
        s->len -= line + 1;
        memmove(s->buf, s->buf + line + 1, s->len);
        if (rc) return rc;
    }
    if (s->len > EXEC_MAX_LINE)
        return snprintf(why, why_size, "reply line longer than %u MiB", EXEC_MAX_LINE >> 20), -1;
    return 0;
}

/* Reads what the socket has now; -1 (why set) at end of output or on an error. */
static int read_some(exec_proc *s, char *why, size_t why_size) {
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
static int write_some(exec_proc *s, const char *req, size_t len, size_t *sent, char *why,
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
int exec_proc_exchange(exec_proc *s, uint64_t id, const char *req, size_t len, exec_reply_fn fn,
                       void *ctx, char *why, size_t why_size) {
    if (!s->pid && exec_start(s, why, why_size) != 0) return -1;
    s->dropped = 0;
    double deadline = now_seconds() + s->timeout;
    size_t sent = 0;
    for (;;) {
        int rc = sent == len ? take_lines(s, id, fn, ctx, why, why_size) : 0;
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

/* The run file's directory, against which a relative program path resolves and where the
 * program runs (ABI 1.2 grpo_config.dir); NULL, the current directory, from an older host. */
static const char *exec_run_dir(const grpo_config *cfg) {
    return GRPO_HAS_FIELD(cfg, grpo_config, dir) ? cfg->dir : NULL;
}

/* Copies argv, resolves the program and reads timeout; a command that cannot run is an error. */
static int32_t exec_configure(exec_proc *s, const grpo_config *cfg, uint32_t argc, grpo_error *err) {
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

int32_t exec_proc_create(exec_proc *s, const grpo_host *host, const grpo_config *cfg,
                         const char *who, grpo_error *err) {
    memset(s, 0, sizeof *s);
    uint32_t argc = grpo_config_count(cfg, "command");
    if (!(s->argv = calloc(argc + 1, sizeof *s->argv)))
        return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    s->host = host, s->who = who, s->fd = -1, s->next_id = 1, s->owner = getpid();
    snprintf(s->section, sizeof s->section, "%s", cfg->section);
    int32_t rc = exec_configure(s, cfg, argc, err);
    char why[256];
    if (rc == GRPO_OK && exec_start(s, why, sizeof why) != 0) /* e.g. a script's missing interpreter */
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "[%s] command: %s", cfg->section, why);
    if (rc != GRPO_OK) exec_proc_free(s);
    return rc;
}

int exec_proc_request(exec_proc *s, cJSON *req, exec_reply_fn fn, void *ctx, char *why,
                      size_t why_size) {
    uint64_t id = s->next_id++;
    cJSON_AddNumberToObject(req, "id", (double)id);
    char *text = cJSON_PrintUnformatted(req);
    size_t len = text ? strlen(text) : 0;
    char *line = text ? realloc(text, len + 2) : NULL;
    if (!line) {
        free(text);
        return snprintf(why, why_size, "out of memory"), -1;
    }
    line[len++] = '\n', line[len] = 0;
    int rc = exec_proc_exchange(s, id, line, len, fn, ctx, why, why_size);
    free(line);
    return rc;
}
