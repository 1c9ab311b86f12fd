/*
 * lm_json.c — config.json readers, and the keys every decoder pack reads alike (see lm_json.h).
 */
#include "lm_json.h"

#include <math.h>
#include <string.h>

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
                                  "config.json: missing \"%s\" (expected a %s integer)", key,
                                  min ? "positive" : "non-negative");
        if (def > 1000000000) /* a default derived from another key (intermediate_size) */
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "config.json: \"%s\" missing and its default %lld is above "
                                  "1e9 (expected a smaller model)", key, (long long)def);
        *out = (int32_t)def;
        return GRPO_OK;
    }
    double d = cJSON_GetNumberValue(v);
    if (!cJSON_IsNumber(v) || d != floor(d) || d < min || d > 1e9)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "config.json: \"%s\" must be a %s integer", key,
                              min ? "positive" : "non-negative");
    *out = (int32_t)d;
    return GRPO_OK;
}

int32_t lm_json_int(const cJSON *o, const char *key, int64_t def, int32_t *out, grpo_error *err) {
    return get_integer(o, key, def, 1, out, err);
}

int64_t lm_json_minimind_intermediate(int32_t C) {
    return 64 * (((int64_t)C * 8 / 3 + 63) / 64);
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

const char *lm_json_string(const cJSON *o, const char *key, const char *def) {
    const cJSON *v = lm_json_get(o, key);
    return v && cJSON_IsString(v) ? v->valuestring : def;
}

cJSON *lm_json_parse(const char *json, grpo_error *err) {
    cJSON *o = cJSON_Parse(json);
    if (o && cJSON_IsObject(o)) return o;
    cJSON_Delete(o);
    grpo_error_set(err, GRPO_ERR_INVALID, "config.json: not a JSON object");
    return NULL;
}

int32_t lm_json_check_act_rope(const cJSON *o, grpo_error *err) {
    const cJSON *act = lm_json_get(o, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "config.json: hidden_act other than \"silu\" is not supported");
    const cJSON *rp = lm_json_get(o, "rope_parameters");
    const cJSON *rt = rp ? lm_json_get(rp, "rope_type") : NULL;
    if (rt && (!cJSON_IsString(rt) || strcmp(rt->valuestring, "default") != 0))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "config.json: rope_parameters.rope_type must be \"default\"");
    return GRPO_OK;
}

/* head_dim: given, or hidden_size / heads when that divides. */
static int32_t attn_head_dim(lm_attn_config *a, const cJSON *o, grpo_error *err) {
    if (!lm_json_get(o, "head_dim") && a->C % a->NH != 0)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "config.json: hidden_size (%d) is not a multiple of "
                              "num_attention_heads (%d) and there is no head_dim", a->C, a->NH);
    return lm_json_int(o, "head_dim", a->C / a->NH, &a->HD, err);
}

int32_t lm_json_attn_config(lm_attn_config *a, const cJSON *o, double eps, double theta,
                            grpo_error *err) {
    int32_t st;
    if ((st = lm_json_int(o, "hidden_size", -1, &a->C, err)) != GRPO_OK ||
        (st = lm_json_int(o, "num_attention_heads", -1, &a->NH, err)) != GRPO_OK ||
        (st = lm_json_int(o, "num_key_value_heads", a->NH, &a->NKV, err)) != GRPO_OK ||
        (st = attn_head_dim(a, o, err)) != GRPO_OK ||
        (st = lm_json_float(o, "rms_norm_eps", eps, &a->eps, err)) != GRPO_OK)
        return st;
    const cJSON *rp = lm_json_get(o, "rope_parameters");
    const cJSON *rope_obj = rp && lm_json_get(rp, "rope_theta") ? rp : o;
    if ((st = lm_json_float(rope_obj, "rope_theta", theta, &a->rope_theta, err)) != GRPO_OK)
        return st;
    if (a->NH % a->NKV != 0)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "config.json: num_attention_heads (%d) must be a multiple of "
                              "num_key_value_heads (%d)", a->NH, a->NKV);
    if (a->HD % 2 != 0)
        return grpo_error_set(err, GRPO_ERR_INVALID, "config.json: head_dim (%d) must be even",
                              a->HD);
    return GRPO_OK;
}
