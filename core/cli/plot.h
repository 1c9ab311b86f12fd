/*
 * plot.h — `grpo plot` and `grpo report`: metrics.jsonl files → a standalone SVG, one panel per
 * metric over steps, one line per run (several runs overlaid for comparison). Axis ticks fall on
 * round values (1, 2 or 5 times a power of ten). With smoothing w in (0, 1) each line is drawn
 * faint as logged and solid smoothed, by TensorBoard's formula: an exponential moving average
 * last = w * last + (1 - w) * value, debiased by 1 - w^k after k values.
 */
#ifndef GRPO_PLOT_H
#define GRPO_PLOT_H

#include <stdio.h>

#include "grpo/plugin.h"

/* One series: the finite values of a metric and the steps they were logged at. */
typedef struct grpo_series {
    char name[64];
    double *steps, *values; /* [n] owned */
    int n, cap;
} grpo_series;

/* Reads metrics (JSON lines with "step") from path into one series per name (n_names). Lines
 * where a metric is null or absent are skipped for that metric. A malformed line is an error
 * naming path:line. */
int grpo_series_read(const char *path, const char *const *names, int n_names, grpo_series *out,
                     grpo_error *err);
void grpo_series_free(grpo_series *s, int n);

/* Writes the SVG: n_metrics panels stacked vertically, each with its own y range, ticks and
 * title; series[r * n_metrics + m] is run r's metric m (runs[r] names it in the legend when there
 * are several). smooth: 0 = lines as logged, else the EMA weight described above. */
void grpo_plot_svg(FILE *f, const grpo_series *series, int n_runs, int n_metrics,
                   const char *const *runs, double smooth, const char *title);

/* TensorBoard's smoothing of v[n] into out[n] (weight w in [0, 1); 0 copies). */
void grpo_smooth(const double *v, int n, double w, double *out);

#endif
