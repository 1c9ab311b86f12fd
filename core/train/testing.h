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

/* ---- advantage.c ------------------------------------------------------------------------------- */
/* normalize_then_sum (GDPO). adv[N] out, m out (may be NULL; reward/reward_std describe the plain
 * weighted sum of R, as TRL logs them), R[N,K] and w[K] in. o->scale is ignored (the final
 * normalisation is always over the batch, as in TRL). Status as grpo_advantages, plus
 * GRPO_ERR_INVALID for K < 1 and GRPO_ERR_NOMEM when the [N,K] scratch cannot be allocated. */
int32_t grpo_advantages_gdpo(float *adv, grpo_advantage_metrics *m, const float *R, const float *w,
                             int B, int G, int K, const grpo_advantage_opts *o, grpo_error *err);

/* ---- metrics.c --------------------------------------------------------------------------------- */
/* The value of name, or NaN when absent. */
double grpo_metric_get(const grpo_metric_row *row, const char *name);

/* Appends {"step": step, name: value, ...} as one line to f and flushes it. Returns -1 (errno
 * set) when any part of the line could not be written. */
int grpo_metrics_write(FILE *f, long step, const grpo_metric_row *row);

/* ---- optimizer.c ------------------------------------------------------------------------------- */
/* Over explicit tensors (copied list; buffers borrowed). */
int grpo_optimizer_init(grpo_optimizer *opt, const grpo_ops *ops, const grpo_optim_opts *o,
                        const grpo_optim_tensor *tensors, int n, grpo_error *err);

#endif
