/*
 * metrics.h — what a person sees of a run: one JSON line of metrics per step (TRL's names where
 * one exists: reward, reward_std, rewards/NAME/mean, kl, entropy, completions/mean_length,
 * completions/clipped_ratio, clip_ratio/..., frac_reward_zero_std, grad_norm, learning_rate,
 * step_time, num_tokens) and a one-line progress report. Our own additions are namespaced:
 * throughput/tokens_per_s (tokens sampled and trained per second of the step), and for a MoE
 * policy (one whose model has expert_load(), grpo/model.h) aux_loss (the router's auxiliary loss,
 * mean over micro-batches, already times the model's own coefficient) and the expert load of the
 * step's training forwards (every real prompt and completion token; routed top-k assignments,
 * so each token counts K times): with
 * f[l][e] = assignments to expert e in layer l / all assignments in layer l,
 *   moe/expert_load/max_frac  mean over layers of max_e f[l][e] (1/E balanced; at most 1/K, as
 *                             a token's K assignments go to K different experts)
 *   moe/expert_load/min_frac  mean over layers of min_e f[l][e] (1/E when balanced)
 *   moe/expert_load/cv        mean over layers of std_e f[l][e] / mean_e f[l][e] (population
 *                             std; 0 when balanced, larger the more uneven)
 *   moe/expert_load/eN        mean over layers of f[l][N], for each expert N when E <= 8.
 */
#ifndef GRPO_METRICS_H
#define GRPO_METRICS_H

#include <stdio.h>

#include "grpo/plugin.h"

#define GRPO_METRICS_MAX 96
#define GRPO_METRIC_NAME_MAX 64

/* The metrics of one step, in insertion order. Setting a name twice overwrites it. */
typedef struct grpo_metric_row {
    int n;
    char names[GRPO_METRICS_MAX][GRPO_METRIC_NAME_MAX];
    double values[GRPO_METRICS_MAX];
} grpo_metric_row;

void grpo_metric_row_clear(grpo_metric_row *row);
/* Sets name = value (NaN is written as null). Names past GRPO_METRICS_MAX are dropped. */
void grpo_metric_set(grpo_metric_row *row, const char *name, double value);

/* The moe/expert_load/... metrics above from load (L,E): tokens routed to each expert of each
 * layer. Layers with no assignment are skipped; nothing is set when none has any. */
void grpo_metrics_expert_load(grpo_metric_row *row, const double *load, int L, int E);

/* A JSON-lines log of a run (metrics.jsonl, completions.jsonl) in log.dir, each line starting
 * with {"step": N. Every write, flush and the close are checked: a full disk is an error naming
 * the file, never a silently torn log. */
typedef struct grpo_run_log {
    FILE *f;
    char path[4200];
} grpo_run_log;

/* Opens DIR/NAME: fresh (truncated) when resume_step < 0, else keeps the lines whose step is
 * <= resume_step (a resumed run rewrites what follows; lines of any length) and appends. */
int grpo_run_log_open(grpo_run_log *l, const char *dir, const char *name, long resume_step,
                      grpo_error *err);
/* Appends text and a newline, then flushes. */
int grpo_run_log_line(grpo_run_log *l, const char *text, grpo_error *err);
/* grpo_metrics_write() into the log, with its error named. */
int grpo_run_log_metrics(grpo_run_log *l, long step, const grpo_metric_row *row, grpo_error *err);
/* Closes the log (no-op when not open); a failed close is an error naming the file. */
int grpo_run_log_close(grpo_run_log *l, grpo_error *err);

/* "step 12/100 ( 12%) | 3m04s left | loss 0.031 | reward 0.512 | kl 0.0012 | 1234 tok/s" to f
 * (the metrics of row that exist), ending in
 * '\r' on a terminal (overwritten by the next) and '\n' otherwise. elapsed is seconds since the
 * run (or resume) started, steps_done the steps made in that time. */
void grpo_progress_print(FILE *f, long step, long total, double elapsed, long steps_done,
                         const grpo_metric_row *row);

/* Seconds of a monotonic clock. */
double grpo_now(void);
/* CPU seconds of the process, all its threads (what a phase costs on a shared machine, where
 * waiting for a core is not counted). */
double grpo_cpu_now(void);
/* Seconds since the epoch (the wall clock TensorBoard's events carry). */
double grpo_wall_time(void);

#endif
