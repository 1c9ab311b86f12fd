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
        double *a = realloc(s->steps, cap * sizeof *a);
        double *b = a ? realloc(s->values, cap * sizeof *b) : NULL;
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
                                "%s:%d: expected a JSON object with a numeric \"step\"", path,
                                lineno);
        else if (r == -2)
            rc = grpo_error_set(err, GRPO_ERR_NOMEM, "%s:%d: out of memory", path, lineno);
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

/* The min and max over every series of the panel (x: steps, y: values). */
static void panel_range(const grpo_series *s, int n_runs, int stride, int y, double *lo,
                        double *hi) {
    *lo = INFINITY, *hi = -INFINITY;
    for (int r = 0; r < n_runs; r++) {
        const grpo_series *t = &s[r * stride];
        const double *x = y ? t->values : t->steps;
        for (int i = 0; i < t->n; i++) *lo = fmin(*lo, x[i]), *hi = fmax(*hi, x[i]);
    }
    if (!(*hi > *lo)) *lo -= 0.5, *hi += 0.5; /* flat or single-point series */
}

/* A round tick step (1, 2 or 5 times a power of ten) giving at most about 6 ticks over
 * [lo, hi]. */
static double tick_step(double lo, double hi) {
    double raw = (hi - lo) / 5, p = pow(10, floor(log10(raw))), m = raw / p;
    return p * (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10);
}

void grpo_smooth(const double *v, int n, double w, double *out) {
    double last = 0, weight = 1;
    for (int i = 0; i < n; i++) {
        last = last * w + (1 - w) * v[i];
        weight *= w;
        out[i] = w > 0 ? last / (1 - weight) : v[i];
    }
}

static void svg_escape(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

static const char *const colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                     "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

typedef struct frame {
    double x_lo, x_hi, y_lo, y_hi;
    int w, h;
} frame;

static void polyline(FILE *f, const frame *fr, const double *x, const double *y, int n,
                     const char *color, double opacity) {
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-opacity=\"%.2f\" stroke-width=\"1.5\" "
               "points=\"", color, opacity);
    for (int i = 0; i < n; i++)
        fprintf(f, "%.2f,%.2f ", MARGIN_L + fr->w * (x[i] - fr->x_lo) / (fr->x_hi - fr->x_lo),
                MARGIN_T + fr->h * (1 - (y[i] - fr->y_lo) / (fr->y_hi - fr->y_lo)));
    fputs("\"/>\n", f);
}

/* Gridlines and labels at the round values inside [lo, hi] of one axis. */
static void ticks(FILE *f, const frame *fr, int y_axis) {
    double lo = y_axis ? fr->y_lo : fr->x_lo, hi = y_axis ? fr->y_hi : fr->x_hi;
    double step = tick_step(lo, hi);
    for (double v = ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
        double t = (v - lo) / (hi - lo), a = fabs(v) < step * 1e-9 ? 0 : v;
        if (y_axis) {
            double py = MARGIN_T + fr->h * (1 - t);
            fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n"
                       "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" "
                       "text-anchor=\"end\">%.4g</text>\n",
                    MARGIN_L, MARGIN_L + fr->w, py, py, MARGIN_L - 6, py + 4, a);
        } else {
            double px = MARGIN_L + fr->w * t;
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" "
                       "text-anchor=\"middle\">%.4g</text>\n",
                    px, MARGIN_T + fr->h + 16, a);
        }
    }
}

/* Panel of metric m: every run's line (raw faint and smoothed solid when smoothing). */
static void plot_panel(FILE *f, const grpo_series *s, int n_runs, int stride, double smooth,
                       int y0) {
    frame fr = {0, 0, 0, 0, PANEL_W - MARGIN_L - MARGIN_R, PANEL_H - MARGIN_T - MARGIN_B};
    int total = 0;
    for (int r = 0; r < n_runs; r++) total += s[r * stride].n;
    fprintf(f, "<g transform=\"translate(0,%d)\">\n<text x=\"%d\" y=\"20\" font-size=\"14\">", y0,
            MARGIN_L);
    svg_escape(f, s->name);
    fprintf(f, "%s</text>\n", total ? "" : " (no values)");
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
               "stroke=\"#888\"/>\n",
            MARGIN_L, MARGIN_T, fr.w, fr.h);
    if (!total) return (void)fputs("</g>\n", f);
    panel_range(s, n_runs, stride, 0, &fr.x_lo, &fr.x_hi);
    panel_range(s, n_runs, stride, 1, &fr.y_lo, &fr.y_hi);
    ticks(f, &fr, 1), ticks(f, &fr, 0);
    for (int r = 0; r < n_runs; r++) {
        const grpo_series *t = &s[r * stride];
        const char *color = colors[r % (int)(sizeof colors / sizeof colors[0])];
        double *sm = smooth > 0 ? malloc((size_t)(t->n ? t->n : 1) * sizeof *sm) : NULL;
        polyline(f, &fr, t->steps, t->values, t->n, color, sm ? 0.3 : 1.0);
        if (sm) {
            grpo_smooth(t->values, t->n, smooth, sm);
            polyline(f, &fr, t->steps, sm, t->n, color, 1.0);
        }
        free(sm);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" "
               "text-anchor=\"middle\">step</text>\n</g>\n",
            MARGIN_L + fr.w / 2, PANEL_H - 6);
}

void grpo_plot_svg(FILE *f, const grpo_series *series, int n_runs, int n_metrics,
                   const char *const *runs, double smooth, const char *title) {
    int legend = n_runs > 1 ? 18 * n_runs + 6 : 0, height = n_metrics * PANEL_H + 30 + legend;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "font-family=\"sans-serif\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
               "<text x=\"%d\" y=\"20\" font-size=\"16\" font-weight=\"bold\">",
            PANEL_W, height, MARGIN_L);
    svg_escape(f, title);
    fputs("</text>\n", f);
    for (int r = 0; legend && r < n_runs; r++) {
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"4\" fill=\"%s\"/>"
                   "<text x=\"%d\" y=\"%d\" font-size=\"12\">",
                MARGIN_L, 34 + 18 * r, colors[r % (int)(sizeof colors / sizeof colors[0])],
                MARGIN_L + 20, 40 + 18 * r);
        svg_escape(f, runs[r]);
        fputs("</text>\n", f);
    }
    for (int m = 0; m < n_metrics; m++)
        plot_panel(f, &series[m], n_runs, n_metrics, smooth, 30 + legend + m * PANEL_H);
    fputs("</svg>\n", f);
}
