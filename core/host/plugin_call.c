/* plugin_call.c — the record of the plugin call in progress (see plugin_call.h). */
#include "host/plugin_call.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CALL_DEPTH 16 /* deeper calls are counted, and reported as the innermost recorded */

typedef struct plugin_call {
    const char *plugin, *section, *what;
    const char *pack, *library; /* NULL until grpo_plugin_call_origin */
} plugin_call;

/* Each thread's calls (reward scorers run on several threads, train/reward_pool.h); read by the
 * signal handler and the exit guard on the thread that crashed or exited: a call's record is
 * complete before call_depth counts it. */
static _Thread_local plugin_call calls[MAX_CALL_DEPTH];
static _Thread_local volatile sig_atomic_t call_depth;
static volatile long progress_step, progress_batch;
static int guard_registered;
static volatile sig_atomic_t guard_in_child; /* an isolated score call's child: the parent reports */
static int saved_stdout = -1; /* fd 1 as it was before the outermost call, or -1 */
static int stdout_users;      /* threads inside a call: fd 1 is redirected while any is */
static pthread_mutex_t stdout_lock = PTHREAD_MUTEX_INITIALIZER;
static int plugin_stdout = STDERR_FILENO; /* where fd 1 points during calls */

static const plugin_call *innermost(void) {
    return &calls[(call_depth < MAX_CALL_DEPTH ? call_depth : MAX_CALL_DEPTH) - 1];
}

/* Runs when the process exits through exit() (or a return from main) with status (-1: not
 * known). Inside a plugin call that can only be the plugin's doing: say so and make the status
 * non-zero, skipping the remaining exit handlers (they would tear down state the interrupted call
 * may still hold). */
static void exit_guard(int status, void *arg) {
    (void)arg;
    if (call_depth <= 0) return;
    if (guard_in_child) _exit(status & 0xff); /* the parent reads the status and reports it */
    const plugin_call *c = innermost();
    char st[32] = "";
    if (status >= 0) snprintf(st, sizeof st, " (exit status %d)", status);
    fflush(NULL);
    fprintf(stderr, "error: plugin %s%s%s%s called exit() during %s%s; the run ended without its "
            "final checkpoint\n", c->plugin, c->section ? " (section [" : "",
            c->section ? c->section : "", c->section ? "])" : "", c->what, st);
    _exit(GRPO_EXIT_PLUGIN_EXITED);
}

#ifndef __GLIBC__
static void exit_guard_unknown_status(void) { exit_guard(-1, NULL); }
#endif

/* ---- crashes: an async-signal-safe report (no stdio, no malloc) ---------------------------- */

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE};
static const char *const crash_names[] = {"SIGSEGV (segmentation fault)", "SIGBUS (bus error)",
                                          "SIGABRT (abort)", "SIGILL (illegal instruction)",
                                          "SIGFPE (arithmetic exception)"};
#define N_CRASH_SIGNALS (int)(sizeof crash_signals / sizeof crash_signals[0])
static struct sigaction crash_previous[N_CRASH_SIGNALS];

typedef struct sbuf {
    char text[1024];
    size_t n;
} sbuf;

static void put(sbuf *b, const char *s) {
    while (s && *s && b->n < sizeof b->text - 1) b->text[b->n++] = *s++;
}

static void put_long(sbuf *b, long v) {
    char digits[24];
    int n = 0;
    unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;
    do digits[n++] = (char)('0' + u % 10); while ((u /= 10) && n < (int)sizeof digits);
    if (v < 0) put(b, "-");
    while (n > 0 && b->n < sizeof b->text - 1) b->text[b->n++] = digits[--n];
}

static void crash_report(int i) {
    const plugin_call *c = innermost();
    sbuf b = {.n = 0};
    put(&b, "\nfatal: plugin "), put(&b, c->plugin);
    const char *sep = " (";
    if (c->pack) put(&b, sep), put(&b, "pack "), put(&b, c->pack), sep = ", ";
    if (c->library) put(&b, sep), put(&b, "library "), put(&b, c->library), sep = ", ";
    if (c->section) put(&b, sep), put(&b, "section ["), put(&b, c->section), put(&b, "]"), sep = ", ";
    if (sep[0] == ',') put(&b, ")");
    put(&b, " died of "), put(&b, crash_names[i]), put(&b, " during "), put(&b, c->what);
    if (progress_step > 0) put(&b, " at step "), put_long(&b, progress_step);
    if (progress_batch > 0) put(&b, ", batch "), put_long(&b, progress_batch);
    put(&b, "; checkpoints already written are intact\n");
    for (size_t off = 0; off < b.n;) {
        ssize_t w = write(STDERR_FILENO, b.text + off, b.n - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
}

/* Reports (inside a marked call of this process), then hands the signal to the handler that was
 * there before: pending on return, so the process still dies of it and dumps core. */
static void crash_handler(int sig) {
    for (int i = 0; i < N_CRASH_SIGNALS; i++) {
        if (crash_signals[i] != sig) continue;
        if (call_depth > 0 && !guard_in_child) crash_report(i);
        struct sigaction prev = crash_previous[i];
        if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler == SIG_IGN) prev.sa_handler = SIG_DFL;
        sigaction(sig, &prev, NULL);
    }
    raise(sig);
}

/* A stack for the handler when the plugin overflowed its own; only where none is set (a
 * sanitizer may have one). For the thread that marks the first call (the main thread); other
 * threads that call plugins get theirs from grpo_plugin_call_thread_begin. */
static void alt_stack_install(void) {
    static char alt[1 << 16];
    stack_t old;
    if (sigaltstack(NULL, &old) != 0 || !(old.ss_flags & SS_DISABLE)) return;
    stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt, .ss_flags = 0};
    sigaltstack(&ss, NULL);
}

static _Thread_local void *thread_alt; /* grpo_plugin_call_thread_begin's stack, or NULL */

void grpo_plugin_call_thread_begin(void) {
    stack_t old;
    if (sigaltstack(NULL, &old) != 0 || !(old.ss_flags & SS_DISABLE)) return;
    if (!(thread_alt = malloc(1 << 16))) return;
    stack_t ss = {.ss_sp = thread_alt, .ss_size = 1 << 16, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) free(thread_alt), thread_alt = NULL;
}

void grpo_plugin_call_thread_end(void) {
    if (!thread_alt) return;
    stack_t off = {.ss_flags = SS_DISABLE};
    sigaltstack(&off, NULL);
    free(thread_alt), thread_alt = NULL;
}

static void crash_guard_install(void) {
    alt_stack_install();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = crash_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_ONSTACK; /* on the alternate stack when there is one (a stack overflow) */
    for (int i = 0; i < N_CRASH_SIGNALS; i++) sigaction(crash_signals[i], &sa, &crash_previous[i]);
}

/* ---- the call marker ------------------------------------------------------------------------ */

static void guards_install(void) {
#ifdef __GLIBC__
    guard_registered = on_exit(exit_guard, NULL) == 0; /* on_exit also passes the status */
#else
    guard_registered = atexit(exit_guard_unknown_status) == 0;
#endif
    crash_guard_install();
}

/* fd 1 becomes fd 2 (or the caller's trap) while any thread is in a call (plugin_call.h); our
 * own buffered output goes first. */
static void stdout_to_stderr(void) {
    pthread_mutex_lock(&stdout_lock);
    if (stdout_users++ > 0) {
        pthread_mutex_unlock(&stdout_lock);
        return;
    }
    fflush(stdout);
    saved_stdout = dup(STDOUT_FILENO);
    if (saved_stdout >= 0 && dup2(plugin_stdout, STDOUT_FILENO) < 0) {
        close(saved_stdout);
        saved_stdout = -1;
    }
    pthread_mutex_unlock(&stdout_lock);
}

static void stdout_restore(void) {
    pthread_mutex_lock(&stdout_lock);
    if (--stdout_users == 0) {
        fflush(stdout); /* the plugins' buffered text, to stderr */
        if (saved_stdout >= 0) dup2(saved_stdout, STDOUT_FILENO), close(saved_stdout);
        saved_stdout = -1;
    }
    pthread_mutex_unlock(&stdout_lock);
}

void grpo_plugin_call_stdout(int fd) { plugin_stdout = fd >= 0 ? fd : STDERR_FILENO; }

void grpo_plugin_call_begin(const char *plugin, const char *section, const char *what) {
    if (!guard_registered) guards_install();
    if (call_depth == 0 && !guard_in_child) stdout_to_stderr();
    if (call_depth < MAX_CALL_DEPTH)
        calls[call_depth] = (plugin_call){plugin ? plugin : "?", section, what ? what : "a call",
                                          NULL, NULL};
    call_depth++;
}

void grpo_plugin_call_end(void) {
    if (call_depth > 0) call_depth--;
    if (call_depth == 0 && !guard_in_child) stdout_restore();
}

void grpo_plugin_call_origin(const char *pack, const char *library) {
    if (call_depth <= 0 || call_depth > MAX_CALL_DEPTH) return;
    calls[call_depth - 1].pack = pack;
    calls[call_depth - 1].library = library;
}

void grpo_plugin_call_progress(long step, long batch) {
    progress_step = step;
    progress_batch = batch;
}

void grpo_plugin_call_in_child(void) { guard_in_child = 1; }

const char *grpo_plugin_message(grpo_error *err) {
    err->message[sizeof err->message - 1] = '\0';
    return err->message[0] ? err->message : "no message";
}
