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

/* A plugin filled err (grpo_error_set, or by hand): forces the NUL it may have left out (the host
 * never reads past the buffer) and returns the message, or "no message" when it is empty. */
const char *grpo_plugin_message(grpo_error *err);

#endif
