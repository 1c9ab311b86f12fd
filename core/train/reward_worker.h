/*
 * reward_worker.h — an isolated reward (`isolate = true`): its plugin runs in a worker process,
 * a fresh exec of the grpo binary in its hidden worker mode (`grpo __reward-worker`), never a
 * bare fork of the trainer. The trainer may hold its CPU thread pool, CUDA state and locks
 * other threads took; a forked copy that uses them deadlocks. The worker opens its own process
 * context (the packs of the trainer's registry, its backend and thread count), loads the pack,
 * creates the reward and scores batch after batch, its state kept between batches.
 *
 * They speak over one socket (reward_wire.h framing, each message a u32 length + bytes):
 *   trainer -> worker  setup: the pack dirs, backend ("" = none), threads, the section
 *   worker -> trainer  i32 status of create + message
 *   trainer -> worker  a batch (reward_wire.h)
 *   worker -> trainer  i32 status, n floats, message
 * and the worker ends when the socket closes. A plugin's exit() or crash in the worker ends only
 * the worker; what it prints to stdout goes to stderr (fd 1 of the worker is stderr).
 *
 * Deadlines: a batch's whole exchange (writing included) has the seconds the caller gives (the
 * section's timeout, rewards.h); past them the worker is killed (SIGKILL) and reaped. Creating
 * has no deadline (a reward model may take long to load).
 */
#ifndef GRPO_REWARD_WORKER_H
#define GRPO_REWARD_WORKER_H

#include <stddef.h>
#include <sys/types.h>

#include "config/run_config.h"
#include "grpo/plugin.h"
#include "grpo/reward.h"
#include "host/registry.h"

/* The argument that puts the grpo binary in worker mode. */
#define GRPO_REWARD_WORKER_ARG "__reward-worker"

/* The grpo binary workers run: set by grpo's main to /proc/self/exe; a program that links
 * libgrpo (a test) sets the built grpo's path. Unset, an isolated reward cannot start (an error
 * that says so): starting another program's own main in its place could be anything. path is
 * borrowed for the process's life. */
void grpo_reward_worker_set_program(const char *path);

/* Where a worker comes from and what its process context is. */
typedef struct grpo_reward_worker_env {
    const char *program; /* the grpo binary (grpo_reward_worker_set_program; NULL: none) */
    char **dirs;         /* [n_dirs] owned: the pack dirs of the trainer's registry, scan order */
    int n_dirs;
    char *backend;       /* owned; "" = no backend (plugins get no ops) */
    int32_t threads;
} grpo_reward_worker_env;

typedef struct grpo_reward_worker {
    pid_t pid; /* 0 when not running */
    int fd;    /* our end of the socket */
} grpo_reward_worker;

/* env from the trainer's registry and host (host->ops names the backend); free with _free. */
int grpo_reward_worker_env_init(grpo_reward_worker_env *env, const grpo_registry *reg,
                                const grpo_host *host, int32_t threads, grpo_error *err);
void grpo_reward_worker_env_free(grpo_reward_worker_env *env);

/* Starts a worker and creates spec's reward in it. GRPO_OK; else err says why: create failed
 * (its message, named like an in-process create's), or the worker died (how), or could not be
 * started. On failure w is stopped. */
int grpo_reward_worker_start(grpo_reward_worker *w, const grpo_reward_worker_env *env,
                             const grpo_reward_spec *spec, grpo_error *err);

/* Scores samples[n] into row in the worker, within seconds (<= 0: none). Fills *st and inner as
 * a direct call would, and returns 0; or returns -1 with why set ("was killed by SIGSEGV ...",
 * "did not answer within 5 s and was killed") when the worker died or was killed (it is stopped
 * then: the next batch starts a new one). */
int grpo_reward_worker_score(grpo_reward_worker *w, const grpo_reward_spec *spec, double seconds,
                             const grpo_sample *samples, uint32_t n, float *row, int32_t *st,
                             grpo_error *inner, char *why, size_t why_size);

/* Ends the worker: closes the socket (it destroys its reward and exits), waits up to a second,
 * then kills it. Safe on a stopped worker. */
void grpo_reward_worker_stop(grpo_reward_worker *w);

#endif
