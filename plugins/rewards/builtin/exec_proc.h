/*
 * exec_proc.h — the external program behind builtin.exec (rewards) and builtin.exec_env
 * (environments): started once, without a shell, in its own process group, spoken to in JSON
 * lines through one socket, every exchange under one deadline (sdk/EXEC_PROTOCOL.md).
 *
 * An exchange sends one request line {"id": N, ...} and waits for the line that echoes N; lines
 * answering another id are stale (dropped and counted, one warning per exchange); a line without
 * a numeric id goes to the handler, which calls it malformed. On any failure (crash, end of
 * output, deadline, a malformed line) the caller warns and kills the program; the next exchange
 * starts it again. Ids grow by one per request and are never reused, not even after a restart.
 */
#ifndef GRPO_BUILTIN_EXEC_PROC_H
#define GRPO_BUILTIN_EXEC_PROC_H

#include <cjson/cJSON.h>
#include <spawn.h>
#include <sys/types.h>

#include "builtin.h"
#include "exec_json.h" /* exec_sample_json */

typedef struct exec_proc {
    const grpo_host *host;
    const char *who;   /* "builtin.exec" or "builtin.exec_env", for messages */
    char **argv;       /* [argc + 1] owned, NULL-terminated, as the run file wrote them */
    char *program;     /* argv[0] resolved to an absolute path (exec_path.h) */
    char *dir;         /* where the program runs: the run file's directory; NULL = grpo's */
    double timeout;    /* seconds for one whole exchange */
    uint64_t next_id;  /* id of the next request; never reused, not even after a restart */
    uint64_t starts;   /* how many times the program was started (a restart forgets its state) */
    pid_t owner;       /* the process that created it: only it may exchange */
    pid_t pid;         /* 0 when not running; also the id of its process group */
    int fd;            /* our end of the socketpair (non-blocking): the child's stdin and stdout */
    char *buf;         /* reply bytes read so far, possibly several lines */
    size_t len, cap;
    uint32_t dropped;      /* reply lines of this exchange that answered another request */
    double first_dropped;  /* the id the first of them answered */
    char section[128];
    char last_line[160];   /* the start of the last line handed to the handler (for messages) */
} exec_proc;

/* The awaited reply (or a line without a numeric id): 0 when it is the protocol, -1 (why set)
 * when not. */
typedef int (*exec_reply_fn)(void *ctx, const cJSON *reply, char *why, size_t why_size);

/* Reads command (list) and timeout of cfg, resolves the program and starts it: a command that
 * cannot run is an error naming the section. p is zeroed first; free with exec_proc_free. */
int32_t exec_proc_create(exec_proc *p, const grpo_host *host, const grpo_config *cfg,
                         const char *who, grpo_error *err);
/* Ends the program (end of stdin, then its group killed after a grace second) and frees p. */
void exec_proc_free(exec_proc *p);
/* Kills the program's whole process group now (after a failed exchange). */
void exec_proc_kill(exec_proc *p);
/* One line through the host log: "[SECTION] PROGRAM: what". */
void exec_proc_warn(const exec_proc *p, const char *what);

/* Sends req[len] (one line, "\n"-terminated, carrying "id": id) and hands the reply to fn, all
 * within p->timeout; starts the program first when it is not running. 0, or -1 with why set. */
int exec_proc_exchange(exec_proc *p, uint64_t id, const char *req, size_t len, exec_reply_fn fn,
                       void *ctx, char *why, size_t why_size);
/* The same for a request object: adds "id" (the next one) and sends it. */
int exec_proc_request(exec_proc *p, cJSON *req, exec_reply_fn fn, void *ctx, char *why,
                      size_t why_size);

/* Helpers builtin.code's sandbox (code_sandbox.c) shares: a monotonic clock in seconds, and
 * posix_spawn attributes for a child that leads a new process group with default signals. */
double now_seconds(void);
int exec_attributes(posix_spawnattr_t *at);

#endif
