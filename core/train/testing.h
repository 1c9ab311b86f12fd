/*
 * train/testing.h — entry points of the train layer that only tests and fuzzers call: white-box
 * checks of a module's inner steps (the module itself calls them). They are not part of the
 * layer's interface: no file of core/ outside train/ includes this header (scripts/check_layers.sh
 * checks it).
 */
#ifndef GRPO_TRAIN_TESTING_H
#define GRPO_TRAIN_TESTING_H

#include "train/advantage.h"
#include "train/metrics.h"
#include "train/optimizer.h"

/* ---- metrics.c --------------------------------------------------------------------------------- */
/* The value of name, or NaN when absent. */
double grpo_metric_get(const grpo_metric_row *row, const char *name);

/* Appends {"step": step, name: value, ...} as one line to f and flushes it. Returns -1 (errno
 * set) when any part of the line could not be written. */
int grpo_metrics_write(FILE *f, long step, const grpo_metric_row *row);

/* ---- checkpoint.c ------------------------------------------------------------------------------ */
/* on: checkpoint-best is swapped by two renames, as on a filesystem without RENAME_EXCHANGE. */
void grpo_ckpt_no_exchange(int on);

/* ---- optimizer.c ------------------------------------------------------------------------------- */
/* Over explicit tensors (copied list; buffers borrowed). */
int grpo_optimizer_init(grpo_optimizer *opt, const grpo_ops *ops, const grpo_optim_opts *o,
                        const grpo_optim_tensor *tensors, int n, grpo_error *err);

#endif
