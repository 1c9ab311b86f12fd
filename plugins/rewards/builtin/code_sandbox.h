/*
 * code_sandbox.h — running one untrusted Python program for builtin.code (code.c).
 *
 * isolate = 1 (sandbox = bwrap): the program runs under bubblewrap with new user, PID, IPC,
 * network, UTS and mount namespaces, as uid/gid 65534 inside, no capabilities, no network, a
 * read-only /usr (/bin, /lib, /lib64 when they exist) and nothing else of the host but a private
 * tmpfs at /tmp (its working directory), a fresh /proc and a minimal /dev; the root is read-only.
 * When grpo runs as root it first drops to a fresh unprivileged uid/gid per program (setpriv;
 * code_sandbox.c): bubblewrap then builds the namespaces unprivileged, and RLIMIT_NPROC, which the
 * kernel never applies to root, caps the processes (a fork bomb) of that program alone.
 * Both modes: rlimits (prlimit) on address space, CPU seconds, file size, processes and core
 * files; a wall-clock deadline after which the program's process group is killed (with the PID
 * namespace, everything it started); stdout read up to a byte cap, the program killed beyond it;
 * stderr discarded. isolate = 0 (sandbox = none) runs the program directly with the same limits
 * in a scratch directory: no isolation at all.
 *
 * The program is the fixed harness (code_harness.h), given the solution on fd 3 and the tests on
 * fd 4 (memfds), so neither appears in its argv.
 */
#ifndef GRPO_BUILTIN_CODE_SANDBOX_H
#define GRPO_BUILTIN_CODE_SANDBOX_H

#include <stddef.h>
#include <stdint.h>

typedef struct code_limits {
    double time_limit;   /* wall-clock seconds per program */
    int32_t cpu_s;       /* RLIMIT_CPU seconds */
    int32_t memory_mb;   /* RLIMIT_AS */
    int32_t file_mb;     /* RLIMIT_FSIZE, and the tmpfs's size is 4x this */
    int32_t processes;   /* RLIMIT_NPROC (per user: uid 65534 when grpo is root) */
    int32_t output_kb;   /* stdout bytes read; the program is killed past them */
} code_limits;

typedef struct code_sandbox {
    int isolate;       /* 1: bubblewrap; 0: sandbox = none */
    code_limits lim;
    char **argv;       /* [argc + 1] prlimit ... [setpriv ...] [bwrap ...] python -c HARNESS */
    uint32_t argc;     /* the mode ("io" or "asserts") is appended per run at argv[argc - 1] */
    uint32_t uid_arg;  /* as root: the index of setpriv's --reuid (then --regid), set per run */
    char *scratch;     /* sandbox = none: the working directory (removed at free) */
} code_sandbox;

/* What one run did. */
typedef struct code_run {
    char *out;         /* stdout (at most output_kb KiB), NUL-terminated; malloc'd */
    size_t len;
    int exited;        /* 1 when it exited by itself, with exit_code */
    int exit_code;
    int timed_out;     /* killed at the deadline */
    int overflowed;    /* killed for writing more than the output cap */
} code_run;

/* Finds prlimit, setpriv (root only) and bwrap (isolate), builds the command line and runs a
 * probe program through it: 0, or -1 with why saying what refused (e.g. the kernel's namespaces).
 * python is the interpreter's absolute path. Free with code_sandbox_free either way. */
int code_sandbox_init(code_sandbox *sb, int isolate, const code_limits *lim, const char *python,
                      char *why, size_t why_size);
void code_sandbox_free(code_sandbox *sb);

/* Runs the harness in mode "io" or "asserts" with code on fd 3, tests on fd 4 and input[in_len]
 * on stdin; fills r (free r->out). 0, or -1 with why when it could not be started at all.
 * merge_stderr sends stderr to r->out too (the probe's diagnostics). */
int code_sandbox_run(const code_sandbox *sb, const char *mode, const char *code,
                     const char *tests, const char *input, size_t in_len, int merge_stderr,
                     code_run *r, char *why, size_t why_size);

#endif
