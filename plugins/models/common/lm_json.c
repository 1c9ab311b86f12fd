/*
 * lm_json.c — config.json readers (see lm_json.h).
 */
#include "lm_json.h"

#include <math.h>

const cJSON *lm_json_get(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static int32_t get_integer(const cJSON *o, const char *key, int64_t def, int32_t min,
                           int32_t *out, grpo_error *err) {
    const cJSON *v = lm_json_get(o, key);
    if (!v) {
        if (def < 0)
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "config.json: missing \"%s\" (expected an integer >= %d)", key,
                                  min);
        *out = (int32_t)def;
        return GRPO_OK;
    }
    double d = cJSON_GetNumberValue(v);
    if (!cJSON_IsNumber(v) || d != floor(d) || d < min || d > 1e9)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "config.json: \"%s\" must be an integer >= %d", key, min);
    *out = (int32_t)d;
    return GRPO_OK;
}

int32_t lm_json_int(const cJSON *o, const char *key, int64_t def, int32_t *out, grpo_error *err) {
    return get_integer(o, key, def, 1, out, err);
}

int32_t lm_json_count(const cJSON *o, const char *key, int32_t def, int32_t *out,
                      grpo_error *err) {
    return get_integer(o, key, def, 0, out, err);
}

static int32_t get_number(const cJSON *o, const char *key, double def, int32_t zero_ok,
                          float *out, grpo_error *err) {
    const cJSON *v = lm_json_get(o, key);
    if (!v) {
        *out = (float)def;
        return GRPO_OK;
    }
    double d = cJSON_GetNumberValue(v);
    if (!cJSON_IsNumber(v) || !(zero_ok ? d >= 0 : d > 0) || !isfinite(d))
        return grpo_error_set(err, GRPO_ERR_INVALID, "config.json: \"%s\" must be a %s number",
                              key, zero_ok ? "non-negative" : "positive");
    *out = (float)d;
    return GRPO_OK;
}

int32_t lm_json_float(const cJSON *o, const char *key, double def, float *out, grpo_error *err) {
    return get_number(o, key, def, 0, out, err);
}

int32_t lm_json_nonneg(const cJSON *o, const char *key, double def, float *out,
                       grpo_error *err) {
    return get_number(o, key, def, 1, out, err);
}

int32_t lm_json_bool(const cJSON *o, const char *key, int32_t def) {
    const cJSON *v = lm_json_get(o, key);
    return v ? cJSON_IsTrue(v) : def;
}
