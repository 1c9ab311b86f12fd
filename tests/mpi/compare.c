/*
 * compare.c — the comparisons of tests/mpi/train_mpi.sh (not a Check suite):
 *   compare params A.safetensors B.safetensors TOL
 *       every tensor of A is in B with the same element count and max |a - b| <= TOL
 *   compare metrics A.jsonl B.jsonl RTOL ATOL
 *       the same lines and keys; every number within a relative RTOL, |a - b| <= RTOL *
 *       max(|a|, |b|), or, for numbers near zero only, within the absolute floor ATOL:
 *       |a - b| <= ATOL. ATOL is for metrics that are sums cancelling to ~0 (a loss of
 *       zero-mean advantages of size ~1), whose difference is the rounding of their O(1) terms,
 *       not a fraction of their value (train_mpi.sh: 1e-7, fp32's epsilon for terms of size
 *       <= 1). Not compared: the timings (time/comm, logged by several ranks only, and the
 *       phases time/...), world_size, the decode schedule (sampling/live_rows_max,
 *       sampling/refills and the KV memory it held, sampling/kv_pages_max and kv_bytes_max: a
 *       rank decodes its own share of rows) and train/positions (the cells
 *       computed: how rows fall into packs depends on the ranks), which differ by design
 * Prints the largest difference and what broke the tolerance; exit 0 when within it, 1 when not,
 * 2 on unreadable input.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/files.h"
#include "io/safetensors.h"

static int params(const char *a, const char *b, double tol) {
    grpo_safetensors *sa = NULL, *sb = NULL;
    grpo_error err;
    grpo_error_init(&err);
    if (grpo_st_open(&sa, a, &err) != GRPO_OK || grpo_st_open(&sb, b, &err) != GRPO_OK) {
        fprintf(stderr, "compare: %s\n", err.message);
        grpo_st_close(sa);
        return 2;
    }
    double worst = 0;
    char where[256] = "";
    int bad = 0;
    for (size_t i = 0; i < grpo_st_count(sa) && !bad; i++) {
        const grpo_st_tensor *ta = grpo_st_at(sa, i), *tb = grpo_st_find(sb, ta->name);
        float *x = malloc(ta->numel * sizeof *x), *y = malloc(ta->numel * sizeof *y);
        if (!tb || tb->numel != ta->numel || !x || !y ||
            grpo_st_read_f32(sa, ta->name, x, ta->ndim, ta->shape, &err) != GRPO_OK ||
            grpo_st_read_f32(sb, ta->name, y, ta->ndim, ta->shape, &err) != GRPO_OK) {
            fprintf(stderr, "compare: %s: %s is missing or of another shape in %s\n", a, ta->name,
                    b);
            bad = 2;
        }
        for (uint64_t k = 0; !bad && k < ta->numel; k++) {
            double d = fabs((double)x[k] - y[k]);
            if (d > worst || isnan(d)) {
                worst = isnan(d) ? INFINITY : d;
                snprintf(where, sizeof where, "%s", ta->name);
            }
        }
        free(x), free(y);
    }
    grpo_st_close(sa), grpo_st_close(sb);
    if (bad) return bad;
    printf("params: max |a - b| = %.3g (%s), tolerance %.3g\n", worst, where, tol);
    return worst <= tol ? 0 : 1;
}

/* train/positions: the cells computed, which depend on how a micro-batch's rows fall into
 * packs (a pack shares the prompt of its rows of one group), so on the ranks */
static int skipped(const char *key) {
    return !strcmp(key, "step_time") || !strcmp(key, "throughput/tokens_per_s") ||
           !strcmp(key, "world_size") || !strncmp(key, "time/", 5) || /* comm, phases */
           !strcmp(key, "sampling/live_rows_max") || !strcmp(key, "sampling/refills") ||
           !strcmp(key, "sampling/kv_pages_max") || !strcmp(key, "sampling/kv_bytes_max") ||
           !strcmp(key, "train/positions");
}

/* |a - b| over max(|a|, |b|) (0 when both are 0); NaN when either is. */
static double rel_diff(double a, double b) {
    double d = fabs(a - b), m = fmax(fabs(a), fabs(b));
    return m > 0 ? d / m : d;
}

/* Compares the numbers of two metrics lines; returns 1 when one is off (said on stderr). worst:
 * the largest relative difference among those within RTOL. */
static int line_differs(const cJSON *x, const cJSON *y, double rtol, double atol,
                        double *worst) {
    int bad = 0;
    for (const cJSON *e = x->child; e; e = e->next) {
        if (skipped(e->string)) continue;
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(y, e->string);
        double a = cJSON_IsNumber(e) ? e->valuedouble : NAN;
        double b = f && cJSON_IsNumber(f) ? f->valuedouble : NAN;
        double d = rel_diff(a, b);
        int both_null = cJSON_IsNull(e) && f && cJSON_IsNull(f);
        if (!f || (isnan(d) && !both_null) || (d > rtol && !(fabs(a - b) <= atol))) {
            double step = cJSON_GetNumberValue(cJSON_GetObjectItem(x, "step"));
            fprintf(stderr, "compare: step %g: %s is %.9g and %.9g (relative %.3g, absolute "
                            "%.3g)\n", step, e->string, a, b, d, fabs(a - b));
            bad = 1;
        } else if (d <= rtol && d > *worst)
            *worst = d;
    }
    return bad;
}

static int metrics(const char *a, const char *b, double rtol, double atol) {
    char *ta = NULL, *tb = NULL;
    grpo_error err;
    grpo_error_init(&err);
    if (grpo_read_file(a, &ta, NULL, &err) != GRPO_OK ||
        grpo_read_file(b, &tb, NULL, &err) != GRPO_OK) {
        fprintf(stderr, "compare: %s\n", err.message);
        free(ta);
        return 2;
    }
    int bad = 0, lines = 0;
    double worst = 0;
    char *sa, *sb, *la = strtok_r(ta, "\n", &sa), *lb = strtok_r(tb, "\n", &sb);
    for (; la && lb; la = strtok_r(NULL, "\n", &sa), lb = strtok_r(NULL, "\n", &sb), lines++) {
        cJSON *x = cJSON_Parse(la), *y = cJSON_Parse(lb);
        if (!x || !y) bad = 2, fprintf(stderr, "compare: line %d is not JSON\n", lines + 1);
        else bad |= line_differs(x, y, rtol, atol, &worst) |
                   line_differs(y, x, rtol, atol, &worst);
        cJSON_Delete(x), cJSON_Delete(y);
    }
    if (la || lb) bad = 1, fprintf(stderr, "compare: %s and %s differ in length\n", a, b);
    free(ta), free(tb);
    printf("metrics: %d lines, max relative difference %.3g (of those within it), tolerance %.3g"
           " relative, %.3g absolute near zero\n", lines, worst, rtol, atol);
    return bad;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "params")) return params(argv[2], argv[3], atof(argv[4]));
    if (argc == 6 && !strcmp(argv[1], "metrics"))
        return metrics(argv[2], argv[3], atof(argv[4]), atof(argv[5]));
    fprintf(stderr, "usage: compare params A.safetensors B.safetensors TOL\n"
                    "       compare metrics A.jsonl B.jsonl RTOL ATOL\n");
    return 2;
}
