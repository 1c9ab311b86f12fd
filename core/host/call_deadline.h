/*
 * call_deadline.h — the deadline of an in-process plugin call (a reward's score, rewards.h).
 *
 * A call made in the process cannot be stopped safely: the plugin may hold locks, half-written
 * state or a thread pool. So a watchdog thread (started by the first arm) waits out the deadline,
 * and when the call is still running then it writes one line
 *   error: plugin ID (section [S]) did not return from WHAT within timeout = T s; an in-process
 *   call cannot be stopped safely, so the run ends (checkpoints already written are intact; ...)
 * and ends the process with GRPO_EXIT_PLUGIN_TIMEOUT. Checkpoints are written by rename, never
 * inside a plugin call, so the last one stays whole. Each thread arms its own call (reward
 * scorers run on several threads at once; up to 64 threads, more run without a deadline); the
 * strings are borrowed until disarm.
 */
#ifndef GRPO_CALL_DEADLINE_H
#define GRPO_CALL_DEADLINE_H

/* The exit status of a process whose plugin call ran past its deadline (EX_TEMPFAIL). */
#define GRPO_EXIT_PLUGIN_TIMEOUT 75

/* Arms the deadline: seconds from now (<= 0: none); timeout is the section's value it comes
 * from (the message says "within timeout = T s", or "within S s (a backstop at N x its timeout =
 * T s, which the plugin keeps itself)" when they differ). Returns 0, or -1 when the watchdog
 * thread cannot be started (the call then runs without a deadline). */
int grpo_call_deadline_arm(double seconds, double timeout, const char *plugin,
                           const char *section, const char *what);
/* This thread's call returned in time. */
void grpo_call_deadline_disarm(void);

#endif
