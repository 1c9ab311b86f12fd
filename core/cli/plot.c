/* plot.c — SVG line charts of metrics over steps, no dependencies beyond cJSON. */
#include "cli/plot.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { PANEL_W = 720, PANEL_H = 220, MARGIN_L = 70, MARGIN_R = 20, MARGIN_T = 30, MARGIN_B = 40 };

static int series_push(grpo_series *s, double step, double value) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        double *a = realloc(s->steps, cap * sizeof *a), *b = a ? realloc(s->values, cap * sizeof *b) : NULL;
        if (a) s->steps = a;
        if (!b) return -1;
        s->values = b, s->cap = cap;
    }
    s->steps[s->n] = step, s->values[s->n++] = value;
    return 0;
}

static int series_add_line(const char *line, grpo_series *out, int n_names) {
    cJSON *j = cJSON_Parse(line);
    const cJSON *step = j ? cJSON_GetObjectItemCaseSensitive(j, "step") : NULL;
    if (!cJSON_IsNumber(step)) {
        cJSON_Delete(j);
        return -1;
    }
    for (int k = 0; k < n_names; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, out[k].name);
        if (cJSON_IsNumber(v) && isfinite(v->valuedouble) &&
            series_push(&out[k], step->valuedouble, v->valuedouble) != 0) {
            cJSON_Delete(j);
            return -2;
        }
    }
    cJSON_Delete(j);
    return 0;
}

int grpo_series_read(const char *path, const char *const *names, int n_names, grpo_series *out,
                     grpo_error *err) {
    memset(out, 0, (size_t)n_names * sizeof *out);
    for (int k = 0; k < n_names; k++) snprintf(out[k].name, sizeof out[k].name, "%s", names[k]);
    FILE *f = fopen(path, "re");
    if (!f) return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot open metrics file", path);
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, rc = GRPO_OK;
    while (rc == GRPO_OK && getline(&line, &cap, f) > 0) {
        lineno++;
        if (strspn(line, " \t\r\n") == strlen(line)) continue;
        int r = series_add_line(line, out, n_names);
        if (r == -1)
            rc = grpo_error_set(err, GRPO_ERR_INVALID,
                                "%s:%d: expected a JSON object with a numeric \"step\"", path, lineno);
        else if (r == -2) rc = grpo_error_set(err, GRPO_ERR_NOMEM, "%s:%d: out of memory", path, lineno);
    }
    free(line);
    fclose(f);
    if (rc != GRPO_OK) grpo_series_free(out, n_names);
    return rc;
}

void grpo_series_free(grpo_series *s, int n) {
    for (int k = 0; k < n; k++) {
        free(s[k].steps);
        free(s[k].values);
        s[k].steps = s[k].values = NULL;
        s[k].n = s[k].cap = 0;
    }
}

static void range_of(const double *x, int n, double *lo, double *hi) {
    *lo = INFINITY, *hi = -INFINITY;
    for (int i = 0; i < n; i++) *lo = fmin(*lo, x[i]), *hi = fmax(*hi, x[i]);
    if (!(*hi > *lo)) *lo -= 0.5, *hi += 0.5; /* flat or single-point series */
}

static void svg_escape(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
}

static void plot_panel(FILE *f, const grpo_series *s, int y0) {
    const int w = PANEL_W - MARGIN_L - MARGIN_R, h = PANEL_H - MARGIN_T - MARGIN_B;
    double x_lo, x_hi, y_lo, y_hi;
    fprintf(f, "<g transform=\"translate(0,%d)\">\n<text x=\"%d\" y=\"20\" font-size=\"14\">", y0, MARGIN_L);
    svg_escape(f, s->name);
    fprintf(f, "%s</text>\n", s->n ? "" : " (no values)");
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n",
            MARGIN_L, MARGIN_T, w, h);
    if (!s->n) return (void)fputs("</g>\n", f);
    range_of(s->steps, s->n, &x_lo, &x_hi);
    range_of(s->values, s->n, &y_lo, &y_hi);
    for (int t = 0; t <= 4; t++) { /* 5 ticks on each axis */
        double fy = t / 4.0, yv = y_lo + fy * (y_hi - y_lo), xv = x_lo + fy * (x_hi - x_lo);
        double py = MARGIN_T + h * (1 - fy), px = MARGIN_L + w * fy;
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%.4g</text>\n",
                MARGIN_L - 6, py + 4, yv);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%.4g</text>\n",
                px, MARGIN_T + h + 16, xv);
    }
    fputs("<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"", f);
    for (int i = 0; i < s->n; i++)
        fprintf(f, "%.2f,%.2f ", MARGIN_L + w * (s->steps[i] - x_lo) / (x_hi - x_lo),
                MARGIN_T + h * (1 - (s->values[i] - y_lo) / (y_hi - y_lo)));
    fprintf(f, "\"/>\n<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">step</text>\n</g>\n",
            MARGIN_L + w / 2, PANEL_H - 6);
}

void grpo_plot_svg(FILE *f, const grpo_series *series, int n, const char *title) {
    int height = n * PANEL_H + 30;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
               "<text x=\"%d\" y=\"20\" font-size=\"16\" font-weight=\"bold\">", PANEL_W, height, MARGIN_L);
    svg_escape(f, title);
    fputs("</text>\n", f);
    for (int k = 0; k < n; k++) plot_panel(f, &series[k], 30 + k * PANEL_H);
    fputs("</svg>\n", f);
}
