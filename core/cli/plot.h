/*
 * plot.h — `grpo plot`: metrics.jsonl → a standalone SVG, one panel per metric over steps.
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

/* Writes the SVG: panels stacked vertically, each with its own y range, axes ticks and title. */
void grpo_plot_svg(FILE *f, const grpo_series *series, int n, const char *title);

#endif
