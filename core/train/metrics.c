/* metrics.c — per-step metrics as JSON lines and the progress line. */
#include "train/metrics.h"
#include "train/testing.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/files.h"

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

/* Adds the fractions f[e] of one layer's row (E) to the sums of max, min and cv, and each f[e]
 * to sum_frac[e] unless sum_frac is NULL; returns 0 (adding nothing) when the row is empty. */
static int expert_load_layer(const double *row, int E, double *sum_max, double *sum_min,
                             double *sum_cv, double *sum_frac) {
    double total = 0, mx = 0, mn = 1, var = 0, mean = 1.0 / E;
    for (int e = 0; e < E; e++) total += row[e];
    if (!(total > 0)) return 0;
    for (int e = 0; e < E; e++) {
        double f = row[e] / total;
        mx = f > mx ? f : mx, mn = f < mn ? f : mn;
        var += (f - mean) * (f - mean) / E;
        if (sum_frac) sum_frac[e] += f;
    }
    *sum_max += mx, *sum_min += mn, *sum_cv += sqrt(var) / mean;
    return 1;
}

void grpo_metrics_expert_load(grpo_metric_row *row, const double *load, int L, int E) {
    enum { E_NAMED = 8 };
    double sum_max = 0, sum_min = 0, sum_cv = 0, sum_frac[E_NAMED] = {0};
    int n = 0;
    for (int l = 0; E > 0 && l < L; l++)
        n += expert_load_layer(load + (size_t)l * E, E, &sum_max, &sum_min, &sum_cv,
                               E <= E_NAMED ? sum_frac : NULL);
    if (!n) return;
    grpo_metric_set(row, "moe/expert_load/max_frac", sum_max / n);
    grpo_metric_set(row, "moe/expert_load/min_frac", sum_min / n);
    grpo_metric_set(row, "moe/expert_load/cv", sum_cv / n);
    for (int e = 0; E <= E_NAMED && e < E; e++) {
        char name[GRPO_METRIC_NAME_MAX];
        snprintf(name, sizeof name, "moe/expert_load/e%d", e);
        grpo_metric_set(row, name, sum_frac[e] / n);
    }
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

static int log_failed(const grpo_run_log *l, const char *what, grpo_error *err) {
    return grpo_error_set(err, GRPO_ERR_IO, "%s: %s failed: %s", l->path, what,
                          strerror(errno ? errno : EIO));
}

/* Step of a log line ({"step": N, ...}), or -1 when it has none. */
static long line_step(const char *line) {
    const char *s = strstr(line, "\"step\":");
    char *end;
    errno = 0;
    long step = s ? strtol(s + 7, &end, 10) : -1;
    return s && end != s + 7 && errno != ERANGE && step >= 0 ? step : -1;
}

/* Rewrites l->path keeping the lines of steps <= step (replaced atomically: files.h). */
static int log_cut(grpo_run_log *l, long step, grpo_error *err) {
    FILE *in = fopen(l->path, "re");
    if (!in) return errno == ENOENT ? GRPO_OK : log_failed(l, "open", err);
    grpo_atomic_file af;
    int rc = grpo_atomic_open(&af, l->path, err);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while (rc == GRPO_OK && (n = getline(&line, &cap, in)) >= 0) {
        long s = line_step(line);
        if (s >= 0 && s <= step) rc = grpo_atomic_write(&af, line, (size_t)n, err);
    }
    if (rc == GRPO_OK && ferror(in)) rc = log_failed(l, "read", err);
    free(line);
    fclose(in);
    if (rc == GRPO_OK) return grpo_atomic_commit(&af, err);
    grpo_atomic_abort(&af);
    return rc;
}

int grpo_run_log_open(grpo_run_log *l, const char *dir, const char *name, long resume_step,
                      grpo_error *err) {
    l->f = NULL;
    if ((size_t)snprintf(l->path, sizeof l->path, "%s/%s", dir, name) >= sizeof l->path)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: log path too long", dir);
    int rc = resume_step >= 0 ? log_cut(l, resume_step, err) : GRPO_OK;
    if (rc != GRPO_OK) return rc;
    if (!(l->f = fopen(l->path, resume_step >= 0 ? "ae" : "we")))
        return grpo_error_set(err, GRPO_ERR_IO, "cannot open %s: %s", l->path, strerror(errno));
    return GRPO_OK;
}

int grpo_run_log_line(grpo_run_log *l, const char *text, grpo_error *err) {
    errno = 0;
    if (fputs(text, l->f) < 0 || fputc('\n', l->f) == EOF || fflush(l->f) != 0 || ferror(l->f))
        return log_failed(l, "write", err);
    return GRPO_OK;
}

int grpo_run_log_metrics(grpo_run_log *l, long step, const grpo_metric_row *row,
                         grpo_error *err) {
    errno = 0;
    return grpo_metrics_write(l->f, step, row) == 0 ? GRPO_OK : log_failed(l, "write", err);
}

int grpo_run_log_close(grpo_run_log *l, grpo_error *err) {
    if (!l->f) return GRPO_OK;
    errno = 0;
    int bad = ferror(l->f) || fclose(l->f) != 0;
    l->f = NULL;
    return bad ? log_failed(l, "close", err) : GRPO_OK;
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
    static const char *const shown[] = {"loss", "advantage/abs_mean", "reward", "kl",
                                        "completions/mean_length"};
    static const char *const labels[] = {"loss", "|A|", "reward", "kl", "len"};
    for (int i = 0; i < 5; i++) {
        double v = grpo_metric_get(row, shown[i]);
        if (!isnan(v)) fprintf(f, " | %s %.4g", labels[i], v);
    }
    double tps = grpo_metric_get(row, "throughput/tokens_per_s");
    if (!isnan(tps)) fprintf(f, " | %.0f tok/s", tps);
    fputc(isatty(fileno(f)) ? '\r' : '\n', f);
    fflush(f);
}

double grpo_wall_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double grpo_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double grpo_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
