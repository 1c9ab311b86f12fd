/*
 * host.c — the host services table this process hands to plugins (grpo/plugin.h, grpo_host).
 * ops and the tokenizer stay NULL here; the trainer fills its own copy when it has them.
 * The 1.1 model services are set with model_ctx NULL: the process default context (host_model.h).
 * Also here: the record of the plugin call in progress, which turns a plugin's exit() into an
 * error instead of a silent exit 0 (registry.h, grpo_plugin_call_begin).
 */
#include "host_model.h"
#include "registry.h"
#include "rng.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char *const level_names[] = {"error", "warning", "info", "debug"};

/* One line on stderr: "grpo [LEVEL] WHO: message". */
static void host_log(int32_t level, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void host_log(int32_t level, const char *who, const char *fmt, ...) {
    const char *name = level >= 0 && level <= GRPO_LOG_DEBUG ? level_names[level] : "log";
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "grpo [%s] %s: %s\n", name, who ? who : "?", msg);
}

/* 64-byte aligned (a cache line, and enough for any SIMD load); size 0 gives a valid pointer. */
static void *host_alloc(uint64_t size) {
    if (size > SIZE_MAX - 64) return NULL;
    size_t n = ((size_t)size + 63) & ~(size_t)63;
    return aligned_alloc(64, n ? n : 64);
}

static void host_free(void *ptr) { free(ptr); }

static const grpo_host default_host = {
    /* .struct_size = */ sizeof(grpo_host),
    /* .abi_major   = */ GRPO_ABI_MAJOR,
    /* .abi_minor   = */ GRPO_ABI_MINOR,
    /* .log         = */ host_log,
    /* .alloc       = */ host_alloc,
    /* .free        = */ host_free,
    /* .rng_next    = */ grpo_rng_next,
    /* .ops         = */ NULL,
    /* .tokenizer   = */ NULL,
    /* .tokenize    = */ NULL,
    /* .detokenize  = */ NULL,
    /* .model_ctx   = */ NULL,
    /* .model_load  = */ grpo_hm_load,
    /* .model_free  = */ grpo_hm_free,
    /* .model_info  = */ grpo_hm_info,
    /* .model_hidden = */ grpo_hm_hidden,
    /* .model_tensor = */ grpo_hm_tensor,
    /* .model_encode = */ grpo_hm_encode,
    /* .model_render = */ grpo_hm_render,
};

const grpo_host *grpo_default_host(void) { return &default_host; }

/* ---- the plugin call in progress ------------------------------------------------------------ */

#define MAX_CALL_DEPTH 16 /* deeper calls are counted, and reported as the innermost recorded */

typedef struct plugin_call {
    const char *plugin, *section, *what;
} plugin_call;

static plugin_call calls[MAX_CALL_DEPTH];
static int call_depth;
static int guard_registered;
static int guard_in_child; /* an isolated score call's child: the parent reports, not us */

/* Runs when the process exits through exit() (or a return from main) with status (-1: not
 * known). Inside a plugin call that can only be the plugin's doing: say so and make the status
 * non-zero, skipping the remaining exit handlers (they would tear down state the interrupted call
 * may still hold). */
static void exit_guard(int status, void *arg) {
    (void)arg;
    if (call_depth <= 0) return;
    if (guard_in_child) _exit(status & 0xff); /* the parent reads the status and reports it */
    const plugin_call *c = &calls[(call_depth < MAX_CALL_DEPTH ? call_depth : MAX_CALL_DEPTH) - 1];
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

void grpo_plugin_call_begin(const char *plugin, const char *section, const char *what) {
    if (!guard_registered) {
#ifdef __GLIBC__
        guard_registered = on_exit(exit_guard, NULL) == 0; /* on_exit also passes the status */
#else
        guard_registered = atexit(exit_guard_unknown_status) == 0;
#endif
    }
    if (call_depth < MAX_CALL_DEPTH)
        calls[call_depth] = (plugin_call){plugin ? plugin : "?", section, what ? what : "a call"};
    call_depth++;
}

void grpo_plugin_call_end(void) {
    if (call_depth > 0) call_depth--;
}

void grpo_plugin_call_in_child(void) { guard_in_child = 1; }

const char *grpo_plugin_message(grpo_error *err) {
    err->message[sizeof err->message - 1] = '\0';
    return err->message[0] ? err->message : "no message";
}
