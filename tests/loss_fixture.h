/* loss_fixture.h — reading the JSON fixtures of tests/fixtures/loss (written by
 * tools/make_loss_fixtures.py) in the Check suites of the GRPO math. NaN is stored as null. */
#ifndef GRPO_TEST_LOSS_FIXTURE_H
#define GRPO_TEST_LOSS_FIXTURE_H

#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Parses tests/fixtures/loss/<name>; aborts the test with the path when it cannot. */
static inline cJSON *fixture_load(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/loss/%s", GRPO_SOURCE_DIR, name);
    FILE *f = fopen(path, "rb");
    if (!f) ck_abort_msg("%s: cannot open (run tools/make_loss_fixtures.py)", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(text);
    size_t got = fread(text, 1, (size_t)n, f);
    fclose(f);
    text[got] = 0;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root) ck_abort_msg("%s: not valid JSON", path);
    return root;
}

static inline double json_num(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) ck_abort_msg("fixture: key '%s' missing", key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static inline const char *json_str(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsString(v)) ck_abort_msg("fixture: string key '%s' missing", key);
    return v->valuestring;
}

/* A malloc'ed float copy of the array obj[key] (null -> NaN), its length in *n; NULL when the
 * value is null (an absent optional input). */
static inline float *json_floats(const cJSON *obj, const char *key, int *n) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!a) ck_abort_msg("fixture: key '%s' missing", key);
    if (cJSON_IsNull(a)) return NULL;
    int len = cJSON_GetArraySize(a);
    float *out = malloc(sizeof(float) * (size_t)(len ? len : 1));
    ck_assert_ptr_nonnull(out);
    for (int i = 0; i < len; i++) {
        const cJSON *v = cJSON_GetArrayItem(a, i);
        out[i] = cJSON_IsNumber(v) ? (float)v->valuedouble : NAN;
    }
    if (n) *n = len;
    return out;
}

/* |got - want| <= rel * |want| + abs, with NaN equal only to NaN. */
static inline int close_to(double got, double want, double rel, double abs) {
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    return fabs(got - want) <= rel * fabs(want) + abs;
}

#define ck_assert_close(got, want, rel, abs, what, ...)                                           \
    do {                                                                                          \
        double g_ = (got), w_ = (want);                                                           \
        if (!close_to(g_, w_, rel, abs))                                                          \
            ck_abort_msg(what ": got %.17g, want %.17g", __VA_ARGS__, g_, w_);                    \
    } while (0)

#endif
