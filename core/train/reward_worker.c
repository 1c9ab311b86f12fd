/* reward_worker.c — an isolated reward's worker process as the trainer sees it: started by exec
 * of the grpo binary, spoken to over a socket, killed at its deadline (see reward_worker.h; the
 * worker's own side is reward_serve.c). */
#include "train/reward_worker.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "grpo/ops.h"
#include "train/metrics.h"
#include "train/reward_wire.h"

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
    int rc = grpo_wire_send(w->fd, &setup, 0);
    grpo_wire_free(&setup);
    if (rc == 0) rc = grpo_wire_recv(w->fd, &reply, &len, 0);
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

int grpo_reward_worker_score(grpo_reward_worker *w, const grpo_reward_spec *spec, double seconds,
                             const grpo_sample *samples, uint32_t n, float *row, int32_t *st,
                             grpo_error *inner, char *why, size_t why_size) {
    double deadline = seconds > 0 ? grpo_now() + seconds : 0;
    grpo_wire req = {0};
    grpo_wire_put_samples(&req, samples, n);
    unsigned char *reply = NULL;
    size_t len = 0;
    int rc = grpo_wire_send(w->fd, &req, deadline);
    grpo_wire_free(&req);
    if (rc == 0) rc = grpo_wire_recv(w->fd, &reply, &len, deadline);
    if (rc == -2) {
        worker_kill(w);
        if (seconds == spec->timeout)
            snprintf(why, why_size, "did not answer within timeout = %g s and was killed "
                     "(SIGKILL)", seconds);
        else
            snprintf(why, why_size, "did not answer within %g s (a backstop at %g x its timeout "
                     "= %g s) and was killed (SIGKILL)", seconds, seconds / spec->timeout,
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
