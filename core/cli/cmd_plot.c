/* cmd_plot.c — `grpo plot METRICS.jsonl -o OUT.svg [--metrics a,b,...]`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/plot.h"

#define MAX_SERIES 16

static int plot_usage(FILE *f) {
    fputs("usage: grpo plot METRICS.jsonl -o OUT.svg [--metrics reward,kl,...]\n"
          "  draws each metric over steps as its own panel (default: reward)\n", f);
    return f == stdout ? 0 : 2;
}

int cmd_plot(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    char list[1024] = "reward";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return plot_usage(stdout);
        if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--metrics") && i + 1 < argc) snprintf(list, sizeof list, "%s", argv[++i]);
        else if (argv[i][0] != '-' && !in) in = argv[i];
        else {
            fprintf(stderr, "grpo plot: unexpected argument '%s'\n", argv[i]);
            return plot_usage(stderr);
        }
    }
    if (!in || !out) return plot_usage(stderr);
    const char *names[MAX_SERIES];
    int n = 0;
    for (char *tok = strtok(list, ","); tok && n < MAX_SERIES; tok = strtok(NULL, ",")) names[n++] = tok;
    grpo_series series[MAX_SERIES];
    grpo_error err;
    grpo_error_init(&err);
    if (grpo_series_read(in, names, n, series, &err) != GRPO_OK) {
        fprintf(stderr, "grpo plot: %s\n", err.message);
        return 1;
    }
    FILE *f = fopen(out, "we");
    if (!f) {
        fprintf(stderr, "grpo plot: %s: cannot open for writing\n", out);
        grpo_series_free(series, n);
        return 1;
    }
    grpo_plot_svg(f, series, n, in);
    int bad = fclose(f) != 0;
    for (int k = 0; k < n; k++)
        if (!series[k].n) fprintf(stderr, "grpo plot: warning: no values of '%s' in %s\n", names[k], in);
    grpo_series_free(series, n);
    if (bad) fprintf(stderr, "grpo plot: %s: write failed\n", out);
    return bad;
}
