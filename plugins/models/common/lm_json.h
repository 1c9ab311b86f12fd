/*
 * lm_json.h — reading config.json values with errors that name the key (shared by the decoder
 * packs; each compiles lm_json.c and links the system cJSON).
 */
#ifndef LM_JSON_H
#define LM_JSON_H

#include <cjson/cJSON.h>

#include "grpo/plugin.h"

/* The value of key in o, or NULL when absent or JSON null. */
const cJSON *lm_json_get(const cJSON *o, const char *key);
/* Positive integer key; required (an error naming it) when def < 0, else def when absent. */
int32_t lm_json_int(const cJSON *o, const char *key, int64_t def, int32_t *out, grpo_error *err);
/* Integer key that may be 0 (non-negative), def when absent. */
int32_t lm_json_count(const cJSON *o, const char *key, int32_t def, int32_t *out,
                      grpo_error *err);
/* Positive number key, def when absent. */
int32_t lm_json_float(const cJSON *o, const char *key, double def, float *out, grpo_error *err);
/* Non-negative number key, def when absent. */
int32_t lm_json_nonneg(const cJSON *o, const char *key, double def, float *out,
                       grpo_error *err);
/* Boolean key (true only for JSON true), def when absent. */
int32_t lm_json_bool(const cJSON *o, const char *key, int32_t def);

#endif
