/*
 * run_record.h — what a run is: its resolved run file and the digest of each input file. Every
 * checkpoint keeps it (trainer_state.json "run"), so that --resume can tell a run file or data
 * file that changed since; the ranks of a data-parallel run compare theirs at start.
 *
 * A record is JSON text:
 *   {"config": {"SECTION.KEY": "VALUE", ...},      every resolved value (grpo_run_config_visit),
 *                                                  rewards as "reward.NAME.KEY"
 *    "files":  {"data.path": "SHA-256 hex", ...}}  data.path, data.eval_path, env.tools when set
 * Two records differ in a key whose value differs or that only one of them has. Input files are
 * compared by their contents alone (a data file moved with the same rows is the same data), and
 * the keys that only say where and how often a run writes and which checkpoints it keeps
 * (log.*, checkpoint.dir, .every, .keep, .best_metric, .best_mode) never count.
 */
#ifndef GRPO_RUN_RECORD_H
#define GRPO_RUN_RECORD_H

#include <stddef.h>

#include "train/run.h"

/* The record of the run r is about to make (malloc'd JSON text); NULL with err set when an input
 * file cannot be read. */
char *grpo_run_record_make(const grpo_run *r, grpo_error *err);

/* The keys in which record a (label_a: "then", "on rank 0") and b differ, leaving out those
 * listed in allow (comma-separated; NULL or "" for none), written into out[cap] as
 * "KEY (A label_a, B label_b), ..." (cut with "..." when long). Returns how many differ; -1 when
 * a record is not a record (out says which). */
int grpo_run_record_diff(const char *a, const char *label_a, const char *b, const char *label_b,
                         const char *allow, char *out, size_t cap);

/* --resume from checkpoint dir: GRPO_OK when its record (in dir/trainer_state.json) and now differ
 * in no key outside allow (`--allow-change`); else an error naming dir and every differing key.
 * A checkpoint written before records were kept is resumed with a warning that nothing was
 * compared. An allowed key that is no key of either record is an error (a typo allows nothing). */
int grpo_run_record_check_resume(const char *dir, const char *now, const char *allow,
                                 grpo_error *err);

/* Data parallel (collective: every rank calls it): GRPO_OK on every rank when every rank's record
 * is rank 0's; else the same error on every rank, naming the lowest rank that differs and its
 * keys. A single process has nothing to compare. */
int grpo_run_record_check_ranks(const char *now, grpo_error *err);

#endif
