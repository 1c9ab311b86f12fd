/* reward_worker.c — an isolated reward's worker process: started by exec of the grpo binary,
 * spoken to over a socket, killed at its deadline (see reward_worker.h). */
#include "train/reward_worker.h"

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

#include "host/host.h"
#include "host/process.h"
#include "train/reward_wire.h"
#include "train/rewards.h"

extern char **environ;

static const char *worker_program; /* NULL: none set (reward_worker.h) */

void grpo_reward_worker_set_program(const char *path) { worker_program = path; }

/* ---- the environment a worker is started with ----------------------------------------------- */

int grpo_reward_worker_env_init(grpo_reward_worker_env *env, const grpo_registry *reg,
                                const grpo_host *host, int32_t threads, grpo_error *err) {
    *env = (grpo_reward_worker_env){.program = worker_program, .threads = threads};
    env->dirs = calloc(reg->n_packs ? (size_t)reg->n_packs : 1, sizeof *env->dirs);
    env->backend = strdup(host && host->ops && host->ops->name ? host->ops->name : "");
    int ok = env->dirs && env->backend;
    for (int i = 0; ok && i < reg->n_packs; i++)
        ok = (env->dirs[env->n_dirs++] = strdup(reg->packs[i]->dir)) != NULL;
    if (ok) return GRPO_OK;
    grpo_reward_worker_env_free(env);
    return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory setting up isolated rewards");
}

void grpo_reward_worker_env_free(grpo_reward_worker_env *env) {
    for (int i = 0; env->dirs && i < env->n_dirs; i++) free(env->dirs[i]);
    free(env->dirs);
    free(env->backend);
    *env = (grpo_reward_worker_env){0};
}

/* ---- frames: a u32 length, then the bytes, under a deadline --------------------------------- */

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Waits until fd is ready for events or the deadline (<= 0: none) passes: 0 ready, -2 deadline. */
static int wait_fd(int fd, short events, double deadline) {
    for (;;) {
        int ms = -1;
        if (deadline > 0) {
            double left = deadline - now_seconds();
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

static int send_frame(int fd, const grpo_wire *w, double deadline) {
    if (w->oom) return -1;
    uint32_t n = (uint32_t)w->len;
    int rc = send_all(fd, &n, sizeof n, deadline);
    return rc ? rc : send_all(fd, w->buf, w->len, deadline);
}

/* A frame into *buf (malloc'd, *len bytes): 0, -1 (end of file, error, no memory), -2. */
static int recv_frame(int fd, unsigned char **buf, size_t *len, double deadline) {
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

/* ---- the trainer's side ---------------------------------------------------------------------- */

/* "was killed by SIGSEGV (Segmentation fault)" or "called exit(3)" from a waitpid status. */
static void describe_death(int status, char *why, size_t size) {
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
        const char *abbrev = sigabbrev_np(sig);
#else
        const char *abbrev = NULL;
#endif
        if (abbrev)
            snprintf(why, size, "was killed by SIG%s (%s)", abbrev, strsignal(sig));
        else
            snprintf(why, size, "was killed by signal %d (%s)", sig, strsignal(sig));
    } else if (WIFEXITED(status)) {
        snprintf(why, size, "called exit(%d)", WEXITSTATUS(status));
    } else {
        snprintf(why, size, "stopped with wait status %#x", (unsigned)status);
    }
}

static int reap(pid_t pid) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

/* The worker ended on its own (the socket closed): reaped, and why says how. */
static void worker_died(grpo_reward_worker *w, char *why, size_t why_size) {
    close(w->fd);
    describe_death(reap(w->pid), why, why_size);
    w->pid = 0, w->fd = -1;
}

static void worker_kill(grpo_reward_worker *w) {
    kill(w->pid, SIGKILL);
    close(w->fd);
    reap(w->pid);
    w->pid = 0, w->fd = -1;
}

void grpo_reward_worker_stop(grpo_reward_worker *w) {
    if (w->pid <= 0) return;
    close(w->fd); /* end of file: the worker destroys its reward and exits */
    int status = 0;
    for (int i = 0; i < 100; i++) {
        pid_t r = waitpid(w->pid, &status, WNOHANG);
        if (r == w->pid || (r < 0 && errno != EINTR)) {
            w->pid = 0, w->fd = -1;
            return;
        }
        usleep(10000);
    }
    kill(w->pid, SIGKILL);
    reap(w->pid);
    w->pid = 0, w->fd = -1;
}

/* Starts the process: the binary in worker mode, its stdin our socket's other end. */
static int spawn(grpo_reward_worker *w, const grpo_reward_worker_env *env, grpo_error *err) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "cannot make a socket for an isolated reward: %s",
                              strerror(errno));
    const char *program = env->program;
    if (!program) {
        close(sv[0]), close(sv[1]);
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "isolated rewards need the grpo binary "
                              "to run their worker in, and this program named none "
                              "(grpo_reward_worker_set_program)");
    }
    char *argv[] = {(char *)"grpo", (char *)GRPO_REWARD_WORKER_ARG, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
    pid_t pid = 0;
    int rc = posix_spawn(&pid, program, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(sv[1]);
    if (rc != 0) {
        close(sv[0]);
        return grpo_error_set(err, GRPO_ERR_IO, "cannot start the isolated reward worker %s: %s",
                              program, strerror(rc));
    }
    w->pid = pid, w->fd = sv[0];
    return GRPO_OK;
}

int grpo_reward_worker_start(grpo_reward_worker *w, const grpo_reward_worker_env *env,
                             const grpo_reward_spec *spec, grpo_error *err) {
    *w = (grpo_reward_worker){0, -1};
    if (spawn(w, env, err) != GRPO_OK) return err->status;
    grpo_wire setup = {0};
    grpo_wire_u32(&setup, (uint32_t)env->n_dirs);
    for (int i = 0; i < env->n_dirs; i++) grpo_wire_str(&setup, env->dirs[i]);
    grpo_wire_str(&setup, env->backend);
    grpo_wire_u32(&setup, (uint32_t)env->threads);
    grpo_wire_put_spec(&setup, spec);
    unsigned char *reply = NULL;
    size_t len = 0;
    int rc = send_frame(w->fd, &setup, 0);
    grpo_wire_free(&setup);
    if (rc == 0) rc = recv_frame(w->fd, &reply, &len, 0);
    if (rc != 0) {
        char why[160];
        worker_died(w, why, sizeof why);
        return grpo_error_set(err, GRPO_ERR_INTERNAL, "[%s] (plugin %s): its isolated worker "
                              "process %s while creating the reward", spec->section,
                              spec->plugin, why);
    }
    grpo_wire_in in = {reply, len, 0, 0};
    int32_t st = (int32_t)grpo_wire_get_u32(&in);
    const char *msg = grpo_wire_get_str(&in);
    if (in.bad) st = GRPO_ERR_INTERNAL, msg = "the worker's reply to create was malformed";
    if (st != GRPO_OK) grpo_error_set(err, st, "%s", msg ? msg : "no message");
    free(reply);
    if (st != GRPO_OK) grpo_reward_worker_stop(w);
    return st;
}

int grpo_reward_worker_score(grpo_reward_worker *w, const grpo_reward_spec *spec,
                             const grpo_sample *samples, uint32_t n, float *row, int32_t *st,
                             grpo_error *inner, char *why, size_t why_size) {
    double deadline = spec->timeout > 0 ? now_seconds() + spec->timeout : 0;
    grpo_wire req = {0};
    grpo_wire_put_samples(&req, samples, n);
    unsigned char *reply = NULL;
    size_t len = 0;
    int rc = send_frame(w->fd, &req, deadline);
    grpo_wire_free(&req);
    if (rc == 0) rc = recv_frame(w->fd, &reply, &len, deadline);
    if (rc == -2) {
        worker_kill(w);
        snprintf(why, why_size, "did not answer within timeout = %g s and was killed (SIGKILL)",
                 spec->timeout);
        return -1;
    }
    if (rc != 0) {
        worker_died(w, why, why_size);
        return -1;
    }
    grpo_wire_in in = {reply, len, 0, 0};
    *st = (int32_t)grpo_wire_get_u32(&in);
    const void *scores = grpo_wire_get(&in, (size_t)n * sizeof *row);
    const char *msg = grpo_wire_get_str(&in);
    if (!in.bad) {
        memcpy(row, scores, (size_t)n * sizeof *row);
        snprintf(inner->message, sizeof inner->message, "%s", msg ? msg : "");
        inner->status = *st;
    }
    free(reply);
    if (in.bad) {
        worker_kill(w);
        snprintf(why, why_size, "sent a malformed reply and was killed");
        return -1;
    }
    return 0;
}

/* ---- the worker's side ----------------------------------------------------------------------- */

typedef struct worker {
    int fd;
    grpo_process proc;
    grpo_reward_spec spec;
    grpo_run_config cfg; /* one reward: spec, in-process, no deadline (the trainer keeps it) */
    grpo_reward_set set;
    int created;
} worker;

static int reply_status(int fd, int32_t st, const char *msg) {
    grpo_wire w = {0};
    grpo_wire_u32(&w, (uint32_t)st);
    grpo_wire_str(&w, msg);
    int rc = send_frame(fd, &w, 0);
    grpo_wire_free(&w);
    return rc;
}

/* The process context from the setup's pack dirs, backend and threads. */
static int open_process(worker *k, grpo_wire_in *in, grpo_error *err) {
    uint32_t n = grpo_wire_get_u32(in);
    k->proc.host = *grpo_default_host();
    if (in->bad || n > in->len || !(k->proc.plugin_dirs = calloc((size_t)n + 1, sizeof(char *))))
        return grpo_error_set(err, GRPO_ERR_INVALID, "malformed worker setup");
    for (uint32_t i = 0; i < n; i++) {
        const char *d = grpo_wire_get_str(in);
        if (!d || !(k->proc.plugin_dirs[i] = strdup(d)))
            return grpo_error_set(err, GRPO_ERR_INVALID, "malformed worker setup");
    }
    const char *backend = grpo_wire_get_str(in);
    int32_t threads = (int32_t)grpo_wire_get_u32(in);
    if (in->bad || !backend) return grpo_error_set(err, GRPO_ERR_INVALID, "malformed setup");
    int rc = grpo_registry_scan(&k->proc.reg, k->proc.plugin_dirs, err);
    if (rc == GRPO_OK && backend[0])
        rc = grpo_process_backend(&k->proc, backend, threads, GRPO_DTYPE_F32, err);
    k->cfg.train_threads = threads;
    return rc;
}

/* Reads the setup and creates the reward; answers with create's status. */
static int worker_setup(worker *k, unsigned char *buf, size_t len) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_wire_in in = {buf, len, 0, 0};
    int rc = open_process(k, &in, &err);
    if (rc == GRPO_OK && grpo_wire_get_spec(&in, &k->spec) != 0)
        rc = grpo_error_set(&err, GRPO_ERR_INVALID, "malformed worker setup (reward section)");
    if (rc == GRPO_OK && !(k->spec.entry = grpo_registry_find(&k->proc.reg, k->spec.plugin)))
        rc = grpo_error_set(&err, GRPO_ERR_INVALID, "[%s] (plugin %s): the isolated worker "
                            "found no such plugin on its packs", k->spec.section, k->spec.plugin);
    k->cfg.rewards = &k->spec, k->cfg.n_rewards = 1;
    if (rc == GRPO_OK)
        rc = grpo_reward_set_create(&k->set, &k->cfg, &k->proc.reg, &k->proc.host, &err);
    k->created = rc == GRPO_OK;
    return reply_status(k->fd, rc, rc == GRPO_OK ? "" : err.message) == 0 && rc == GRPO_OK ? 0
                                                                                         : -1;
}

/* Scores one batch and answers: status, n scores, message. */
static int worker_batch(worker *k, unsigned char *buf, size_t len) {
    grpo_wire_in in = {buf, len, 0, 0};
    grpo_sample *samples = NULL;
    uint32_t n = 0;
    if (grpo_wire_get_samples(&in, &samples, &n) != 0) return -1;
    float *row = malloc((n ? n : 1) * sizeof *row);
    grpo_error err;
    grpo_error_init(&err);
    int32_t st = row ? grpo_reward_set_score(&k->set, samples, n, row, &err)
                     : grpo_error_set(&err, GRPO_ERR_NOMEM, "out of memory in the worker");
    for (uint32_t i = 0; st != GRPO_OK && row && i < n; i++) row[i] = NAN;
    grpo_wire w = {0};
    grpo_wire_u32(&w, (uint32_t)st);
    if (row) grpo_wire_put(&w, row, (size_t)n * sizeof *row);
    grpo_wire_str(&w, st == GRPO_OK ? "" : err.message);
    int rc = row ? send_frame(k->fd, &w, 0) : -1;
    grpo_wire_free(&w);
    free(row);
    grpo_wire_samples_free(samples, n);
    return rc;
}

int grpo_reward_worker_main(int fd) {
    worker k = {.fd = fd};
    grpo_plugin_call_in_child(); /* a plugin's exit(N) ends the worker with N; the trainer says */
    unsigned char *setup = NULL, *buf = NULL; /* the reward section points into setup */
    size_t len = 0;
    int rc = recv_frame(fd, &setup, &len, 0) == 0 ? worker_setup(&k, setup, len) : -1;
    while (rc == 0 && recv_frame(fd, &buf, &len, 0) == 0) {
        rc = worker_batch(&k, buf, len);
        free(buf);
    }
    if (k.created) grpo_reward_set_free(&k.set);
    grpo_wire_spec_free(&k.spec);
    grpo_process_close(&k.proc);
    free(setup);
    close(fd);
    return rc == 0 ? 0 : 1;
}
