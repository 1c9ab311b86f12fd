/*
 * cmd_report.c — `grpo report LOG_DIR -o report.html`: one self-contained HTML page of a run,
 * read in any browser: the curves of its metrics (the SVG of `grpo plot`, smoothed), the run file
 * as the run resolved it (log.dir/config.ini), and the sampled completions of the last step that
 * logged them (log.dir/completions.jsonl) with their per-reward scores and advantages.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/files.h"
#include "cli/cli.h"
#include "cli/plot.h"

#define MAX_METRICS 12

/* The metrics shown when they were logged, in this order. */
static const char *const wanted[] = {"reward", "eval/accuracy", "eval/reward", "kl", "loss",
                                     "entropy", "completions/mean_length", "grad_norm"};

static int report_usage(FILE *f) {
    fputs("usage: grpo report LOG_DIR -o REPORT.html\n"
          "  one HTML page of a run: its curves (metrics.jsonl), its resolved run file\n"
          "  (config.ini) and the completions of the last logged step (completions.jsonl)\n",
          f);
    return f == stdout ? 0 : 2;
}

static void html_escape(FILE *f, const char *s) {
    for (; s && *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

/* The curves: every wanted metric the run logged, one panel each. */
static int curves(FILE *f, const char *metrics, grpo_error *err) {
    grpo_series all[MAX_METRICS], shown[MAX_METRICS];
    int n = (int)(sizeof wanted / sizeof wanted[0]), k = 0;
    if (grpo_series_read(metrics, wanted, n, all, err) != GRPO_OK) return err->status;
    for (int i = 0; i < n; i++)
        if (all[i].n) shown[k++] = all[i];
        else grpo_series_free(&all[i], 1);
    const char *runs[] = {metrics};
    fputs("<h2>Curves</h2>\n", f);
    if (k) grpo_plot_svg(f, shown, 1, k, runs, 0.6, metrics);
    else fputs("<p>(no metrics logged yet)</p>\n", f);
    grpo_series_free(shown, k);
    return GRPO_OK;
}

static void run_file(FILE *f, const char *path) {
    char *text = NULL;
    size_t len = 0;
    fputs("<h2>Run file</h2>\n", f);
    if (grpo_read_file(path, &text, &len, NULL) != GRPO_OK) {
        fputs("<p>(no config.ini: written by runs since grpo 0.1 at start)</p>\n", f);
        return;
    }
    fputs("<pre>", f);
    html_escape(f, text);
    fputs("</pre>\n", f);
    free(text);
}

static void completion_row(FILE *f, const cJSON *j) {
    const cJSON *rw = cJSON_GetObjectItemCaseSensitive(j, "rewards"), *r;
    fputs("<tr><td><pre>", f);
    html_escape(f, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "prompt")));
    fputs("</pre></td><td><pre>", f);
    html_escape(f, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "completion")));
    fputs("</pre></td><td>", f);
    cJSON_ArrayForEach(r, rw) {
        html_escape(f, r->string);
        if (cJSON_IsNumber(r)) fprintf(f, " %.4g<br>", r->valuedouble);
        else fputs(" -<br>", f);
    }
    const cJSON *tot = cJSON_GetObjectItemCaseSensitive(j, "reward");
    const cJSON *adv = cJSON_GetObjectItemCaseSensitive(j, "advantage");
    fprintf(f, "</td><td>%.4g</td><td>%.4g</td></tr>\n",
            cJSON_IsNumber(tot) ? tot->valuedouble : NAN,
            cJSON_IsNumber(adv) ? adv->valuedouble : NAN);
}

/* The step of a completions.jsonl line, or -1. */
static double line_step(const char *line, cJSON **json) {
    *json = cJSON_Parse(line);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(*json, "step");
    return cJSON_IsNumber(st) ? st->valuedouble : -1;
}

/* The lines of completions.jsonl whose step is the last one there, as a table. */
static void completions(FILE *f, const char *path) {
    char *text = NULL;
    size_t len = 0;
    fputs("<h2>Completions</h2>\n", f);
    if (grpo_read_file(path, &text, &len, NULL) != GRPO_OK) {
        fputs("<p>(no completions.jsonl: set [log] completions_every)</p>\n", f);
        return;
    }
    double last = -1;
    cJSON *j;
    for (char *l = text, *e; *l; l = e + (*e != 0)) { /* pass 1: the last step */
        e = l + strcspn(l, "\n");
        char c = *e;
        *e = 0;
        double st = line_step(l, &j);
        cJSON_Delete(j);
        *e = c;
        last = st > last ? st : last;
    }
    fprintf(f, "<h3>step %.0f</h3>\n<table><tr><th>prompt</th><th>completion</th><th>rewards</th>"
               "<th>reward</th><th>advantage</th></tr>\n", last);
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (line_step(l, &j) == last) completion_row(f, j);
        cJSON_Delete(j);
    }
    fputs("</table>\n", f);
    free(text);
}

static int write_report(FILE *f, const char *dir, grpo_error *err) {
    char metrics[4200], config[4200], comp[4200];
    int rc = grpo_path_join(metrics, sizeof metrics, dir, "metrics.jsonl", err);
    if (rc == GRPO_OK) rc = grpo_path_join(config, sizeof config, dir, "config.ini", err);
    if (rc == GRPO_OK) rc = grpo_path_join(comp, sizeof comp, dir, "completions.jsonl", err);
    if (rc != GRPO_OK) return rc;
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>grpo run ", f);
    html_escape(f, dir);
    fputs("</title>\n<style>body{font-family:sans-serif;margin:2em}pre{white-space:pre-wrap;"
          "margin:0}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px;"
          "vertical-align:top;text-align:left}</style></head><body>\n<h1>grpo run ", f);
    html_escape(f, dir);
    fputs("</h1>\n", f);
    if ((rc = curves(f, metrics, err)) != GRPO_OK) return rc;
    run_file(f, config);
    completions(f, comp);
    fputs("</body></html>\n", f);
    return GRPO_OK;
}

int cmd_report(int argc, char **argv) {
    const char *dir = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return report_usage(stdout);
        if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc)
            out = argv[++i];
        else if (argv[i][0] != '-' && !dir) dir = argv[i];
        else {
            fprintf(stderr, "grpo report: unexpected argument '%s'\n", argv[i]);
            return report_usage(stderr);
        }
    }
    if (!dir || !out) return report_usage(stderr);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    grpo_error err;
    grpo_error_init(&err);
    int rc = f ? write_report(f, dir, &err) : grpo_error_set(&err, GRPO_ERR_NOMEM, "out of memory");
    if (f && fclose(f) != 0 && rc == GRPO_OK)
        rc = grpo_error_set(&err, GRPO_ERR_NOMEM, "out of memory");
    if (rc == GRPO_OK) rc = grpo_write_file_atomic(out, text, len, &err);
    free(text);
    if (rc != GRPO_OK) fprintf(stderr, "grpo report: %s\n", err.message);
    return rc == GRPO_OK ? 0 : 1;
}
