/* cmd_plot.c — `grpo plot METRICS.jsonl... -o OUT.svg [--metrics a,b,...] [--smooth W]`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/plot.h"
#include "grpo/config.h" /* grpo_text_double: --smooth read as a run file's number */

#define MAX_SERIES 16
#define MAX_RUNS 8

static int plot_usage(FILE *f) {
    fputs("usage: grpo plot METRICS.jsonl... -o OUT.svg [--metrics reward,kl,...] [--smooth W]\n"
          "  draws each metric over steps as its own panel (default: reward), one line per\n"
          "  metrics file (up to 8 runs overlaid); --smooth W in [0, 1) draws TensorBoard's\n"
          "  exponential moving average over the faint raw line (default 0.6; 0 = raw only)\n",
          f);
    return f == stdout ? 0 : 2;
}

/* Reads n_metrics names of every run into series[r * n_metrics + m]; prints the error. */
static int read_runs(const char *const *runs, int n_runs, const char *const *names, int n,
                     grpo_series *series) {
    grpo_error err;
    grpo_error_init(&err);
    for (int r = 0; r < n_runs; r++)
        if (grpo_series_read(runs[r], names, n, &series[r * n], &err) != GRPO_OK) {
            fprintf(stderr, "grpo plot: %s\n", err.message);
            grpo_series_free(series, r * n);
            return 1;
        }
    return 0;
}

int cmd_plot(int argc, char **argv) {
    const char *runs[MAX_RUNS], *out = NULL;
    int n_runs = 0;
    double smooth = 0.6;
    char list[1024] = "reward";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return plot_usage(stdout);
        if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && v) out = v, i++;
        else if (!strcmp(a, "--metrics") && v) snprintf(list, sizeof list, "%s", v), i++;
        else if (!strcmp(a, "--smooth") && v && grpo_text_double(v, &smooth) && smooth >= 0 &&
                 smooth < 1)
            i++;
        else if (a[0] != '-' && n_runs < MAX_RUNS) runs[n_runs++] = a;
        else {
            fprintf(stderr, "grpo plot: unexpected argument '%s'%s\n", a,
                    !strcmp(a, "--smooth") ? " (expected a weight in [0, 1))" : "");
            return plot_usage(stderr);
        }
    }
    if (!n_runs || !out) return plot_usage(stderr);
    const char *names[MAX_SERIES];
    int n = 0;
    for (char *tok = strtok(list, ","); tok && n < MAX_SERIES; tok = strtok(NULL, ","))
        names[n++] = tok;
    grpo_series series[MAX_RUNS * MAX_SERIES];
    if (read_runs(runs, n_runs, names, n, series)) return 1;
    FILE *f = fopen(out, "we");
    if (!f) {
        fprintf(stderr, "grpo plot: %s: cannot open for writing\n", out);
        grpo_series_free(series, n_runs * n);
        return 1;
    }
    grpo_plot_svg(f, series, n_runs, n, runs, smooth, n_runs == 1 ? runs[0] : "runs compared");
    int bad = fclose(f) != 0;
    for (int k = 0; k < n_runs * n; k++)
        if (!series[k].n)
            fprintf(stderr, "grpo plot: warning: no values of '%s' in %s\n", series[k].name,
                    runs[k / n]);
    grpo_series_free(series, n_runs * n);
    if (bad) fprintf(stderr, "grpo plot: %s: write failed\n", out);
    return bad;
}
