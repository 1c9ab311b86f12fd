/*
 * lm_json.h — reading config.json values with errors that name the key (shared by the decoder
 * packs; each compiles lm_json.c and links the system cJSON).
 */
#ifndef LM_JSON_H
#define LM_JSON_H

#include <cjson/cJSON.h>

#include "grpo/plugin.h"
#include "lm_attn.h"

/* The value of key in o, or NULL when absent or JSON null. */
const cJSON *lm_json_get(const cJSON *o, const char *key);
/* Positive integer key; required (an error naming it) when def < 0, else def when absent. */
int32_t lm_json_int(const cJSON *o, const char *key, int64_t def, int32_t *out, grpo_error *err);
/* Integer key that may be 0 (non-negative), def when absent. */
/* MiniMind's intermediate_size when config.json has none: 64 * ceil((C * 8 / 3) / 64), in 64
 * bits (no overflow at any hidden size C). */
int64_t lm_json_minimind_intermediate(int32_t C);
int32_t lm_json_count(const cJSON *o, const char *key, int32_t def, int32_t *out,
                      grpo_error *err);
/* Positive number key, def when absent. */
int32_t lm_json_float(const cJSON *o, const char *key, double def, float *out, grpo_error *err);
/* Non-negative number key, def when absent. */
int32_t lm_json_nonneg(const cJSON *o, const char *key, double def, float *out,
                       grpo_error *err);
/* Boolean key (true only for JSON true), def when absent. */
int32_t lm_json_bool(const cJSON *o, const char *key, int32_t def);
/* String key, def when absent or not a string. */
const char *lm_json_string(const cJSON *o, const char *key, const char *def);

/* config.json text as a JSON object the caller frees with cJSON_Delete, or NULL when it is not
 * one (GRPO_ERR_INVALID in err). */
cJSON *lm_json_parse(const char *json, grpo_error *err);
/* Refuses what no decoder pack implements (GRPO_ERR_UNSUPPORTED naming the key): a hidden_act
 * other than "silu", a rope_parameters.rope_type other than "default". */
int32_t lm_json_check_act_rope(const cJSON *o, grpo_error *err);
/* The attention block's keys, as transformers' configs default them: hidden_size,
 * num_attention_heads (required), num_key_value_heads (default the heads), head_dim (default
 * hidden_size / heads, which must then divide), rms_norm_eps (default eps), rope_theta (top
 * level, or rope_parameters.rope_theta in transformers 5; default theta). Checks that the heads
 * are a multiple of the kv heads and head_dim is even. qk_norm and the biases are the pack's. */
int32_t lm_json_attn_config(lm_attn_config *a, const cJSON *o, double eps, double theta,
                            grpo_error *err);

#endif
