/* plugin_call.c — the record of the plugin call in progress (see plugin_call.h). */
#include "host/plugin_call.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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
