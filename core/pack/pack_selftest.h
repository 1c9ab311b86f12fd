/*
 * pack_selftest.h — running a reward's self-test vectors ([ID:test.N] sections of its pack.ini,
 * registry.h) the way a run would call it: create with the manifest's defaults and the test's
 * key.* values, one score() call over all the tests as a batch, destroy.
 *
 * Used by `grpo plugins check` and `grpo pack install`, so a pack that does not do what its
 * author wrote down is caught before a run. Besides wrong values it flags two things a run cannot
 * tell from a wrong value: a reward that is NaN ("no opinion") on every test, and one that writes
 * to stdout (grpo's data output: JSONL from `reward score`, `generate`, ...).
 */
#ifndef GRPO_PACK_SELFTEST_H
#define GRPO_PACK_SELFTEST_H

#include "host/registry.h"

typedef struct grpo_selftest_report {
    int n_tests;         /* vectors run (e->n_tests) */
    int n_failed;        /* whose reward was not the expected one */
    int all_nan;         /* every reward was NaN though some test expected a number */
    long stdout_bytes;   /* bytes the plugin wrote to stdout during create/score/destroy */
} grpo_selftest_report;

/* Loads e's pack (registry checks) and runs e's self-tests; an entry without tests passes with
 * rep->n_tests = 0. Returns GRPO_OK when every test gives its expected reward (within its
 * tolerance; NaN only where NaN is expected), the rewards are not all NaN and nothing was
 * written to stdout. Otherwise err says the first problem in one line:
 *   "MANIFEST:LINE: [ID:test.N] expected 0.5 (within 1e-05), got 0"
 *   "ID returned NaN on all 3 self-tests (MANIFEST); ..."
 *   "ID writes to stdout (12 bytes: "debug: ..."); ..."
 * and every failed test is one line on report (when not NULL). e must be a reward entry. Main
 * thread only (stdout is redirected to a temp file around the plugin calls). */
int grpo_entry_selftest(grpo_registry *reg, const grpo_entry *e, const grpo_host *host,
                        FILE *report, grpo_selftest_report *rep, grpo_error *err);

#endif
