/*
 * plugin_call.h — calls into plugin code: the record of the call in progress, which turns a
 * plugin's exit() into an error instead of a silent exit 0, and the NUL a plugin's message may
 * lack. Used by everything that calls a plugin (registry, models, rewards); depends on nothing
 * but the SDK.
 */
#ifndef GRPO_PLUGIN_CALL_H
#define GRPO_PLUGIN_CALL_H

#include "grpo/plugin.h"

/* The exit status of a process whose plugin called exit() during a marked call (EX_SOFTWARE). */
#define GRPO_EXIT_PLUGIN_EXITED 70

/* Marks a call into plugin code (what: "grpo_plugin_init", "create", "score", "destroy", ...) by
 * plugin (its id or pack), for the section it serves (NULL when none) until the matching
 * grpo_plugin_call_end. While a call is marked, a plugin that calls exit() does not end the run
 * quietly with its status: an exit handler prints
 *   error: plugin ID (section [S]) called exit() during WHAT (exit status N); the run ended
 *   without its final checkpoint
 * and ends the process with GRPO_EXIT_PLUGIN_EXITED. _exit(), abort() and signals bypass exit
 * handlers; `isolate = true` in a [reward.NAME] section covers those. Calls nest (a reward's
 * create may load a model); the strings are borrowed until the end. Main thread only. */
void grpo_plugin_call_begin(const char *plugin, const char *section, const char *what);
void grpo_plugin_call_end(void);
/* In the child process of an isolated call: a plugin's exit(N) ends the child with status N and
 * no message, for the parent to report. */
void grpo_plugin_call_in_child(void);

/* Names the pack and library of the innermost marked call (borrowed until its end), for the crash
 * report below. Callers that know the registry entry call it right after grpo_plugin_call_begin. */
void grpo_plugin_call_origin(const char *pack, const char *library);
/* Where the run is, for the crash report: training step (1-based) and generation batch of the
 * step (1-based); 0 for "not known". Kept until changed (a trainer sets it before each batch). */
void grpo_plugin_call_progress(long step, long batch);

/* Crashes inside a marked call. The first grpo_plugin_call_begin installs a handler for SIGSEGV,
 * SIGBUS, SIGABRT, SIGILL and SIGFPE: a signal raised while a call is marked prints (one write(),
 * async-signal-safe)
 *   fatal: plugin ID (pack P, library L, section [S]) died of SIGSEGV during WHAT at step N,
 *   batch B; checkpoints already written are intact
 * then the handler that was there before (default: die, core dump) gets the signal again. Outside
 * a marked call, and in an isolated call's child, it only passes the signal on. Checkpoints are
 * written by rename (checkpoint.h), never inside a plugin call, so the last one stays valid.
 *
 * A plugin's stdout. While the outermost call is marked, fd 1 is a duplicate of fd 2: whatever a
 * plugin prints (printf, puts, write(1, ...)) lands on stderr, never inside grpo's data output
 * (JSONL on stdout). Begin flushes stdout first (grpo's own lines go where they were meant to);
 * end flushes it again (the plugin's buffered text goes to stderr) and puts fd 1 back. Every
 * command gets this without writing its output differently. A thread a plugin leaves running
 * that prints between calls is not covered. grpo_plugin_call_stdout(fd) sends it to fd instead
 * (the pack self-tests count what a plugin prints); -1 returns to stderr. */
void grpo_plugin_call_stdout(int fd);

/* A thread other than the main one that calls plugins (the reward pool's, train/reward_pool.h)
 * gives itself a stack of its own for the crash report above (so a plugin that overflows its
 * stack there is reported too) at its start, and frees it with _end before it ends. */
void grpo_plugin_call_thread_begin(void);
void grpo_plugin_call_thread_end(void);

/* A plugin filled err (grpo_error_set, or by hand): forces the NUL it may have left out (the host
 * never reads past the buffer) and returns the message, or "no message" when it is empty. */
const char *grpo_plugin_message(grpo_error *err);

#endif
