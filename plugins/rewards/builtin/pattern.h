/*
 * pattern.h — running PCRE2 patterns on model completions (builtin.format, builtin.repetition).
 *
 * A completion is untrusted text: a pattern that backtracks catastrophically on it (`(a+)+$` on
 * "aaaa…b") must cost that one sample, not the run. Every match therefore runs with explicit
 * limits, and a match that hits one scores the sample NaN ("no opinion") with one warning per
 * reward instance.
 */
#ifndef GRPO_BUILTIN_PATTERN_H
#define GRPO_BUILTIN_PATTERN_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* Backtracking steps and nesting depth one match may use. 1e6 steps is a tenth of PCRE2's
 * default and about 15 ms on a pathological pattern; the default format patterns need a few per
 * byte of completion, so 100 KB completions stay far inside it. */
#define BUILTIN_MATCH_LIMIT 1000000u
#define BUILTIN_DEPTH_LIMIT 100000u

/* A match context with the limits above, or NULL when out of memory. The caller frees it with
 * pcre2_match_context_free. */
pcre2_match_context *builtin_match_context(void);

#endif
