/* metrics.c — per-step metrics as JSON lines and the progress line. */
#include "metrics.h"

#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void grpo_metric_row_clear(grpo_metric_row *row) { row->n = 0; }

static int metric_index(const grpo_metric_row *row, const char *name) {
    for (int i = 0; i < row->n; i++)
        if (strcmp(row->names[i], name) == 0) return i;
    return -1;
}

void grpo_metric_set(grpo_metric_row *row, const char *name, double value) {
    int i = metric_index(row, name);
    if (i < 0) {
        if (row->n == GRPO_METRICS_MAX) return;
        i = row->n++;
        snprintf(row->names[i], GRPO_METRIC_NAME_MAX, "%s", name);
    }
    row->values[i] = value;
}

double grpo_metric_get(const grpo_metric_row *row, const char *name) {
    int i = metric_index(row, name);
    return i < 0 ? NAN : row->values[i];
}

/* Metric names are ours (ASCII, no quotes), so they are written without escaping. */
int grpo_metrics_write(FILE *f, long step, const grpo_metric_row *row) {
    fprintf(f, "{\"step\": %ld", step);
    for (int i = 0; i < row->n; i++) {
        if (isfinite(row->values[i])) fprintf(f, ", \"%s\": %.9g", row->names[i], row->values[i]);
        else fprintf(f, ", \"%s\": null", row->names[i]);
    }
    fputs("}\n", f);
    return fflush(f) == 0 && !ferror(f) ? 0 : -1;
}

static void format_duration(char *out, size_t size, double seconds) {
    long s = (long)(seconds + 0.5);
    if (s >= 3600) snprintf(out, size, "%ldh%02ldm", s / 3600, s / 60 % 60);
    else snprintf(out, size, "%ldm%02lds", s / 60, s % 60);
}

void grpo_progress_print(FILE *f, long step, long total, double elapsed, long steps_done,
                         const grpo_metric_row *row) {
    char eta[32] = "?";
    if (steps_done > 0 && total >= step)
        format_duration(eta, sizeof eta, elapsed / steps_done * (double)(total - step));
    fprintf(f, "step %ld/%ld (%3ld%%) | %s left", step, total, total ? 100 * step / total : 0, eta);
    static const char *const shown[] = {"reward", "kl", "completions/mean_length"};
    static const char *const labels[] = {"reward", "kl", "len"};
    for (int i = 0; i < 3; i++) {
        double v = grpo_metric_get(row, shown[i]);
        if (!isnan(v)) fprintf(f, " | %s %.4g", labels[i], v);
    }
    double tps = grpo_metric_get(row, "throughput/tokens_per_s");
    if (!isnan(tps)) fprintf(f, " | %.0f tok/s", tps);
    fputc(isatty(fileno(f)) ? '\r' : '\n', f);
    fflush(f);
}

double grpo_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
