/*
 * dense_config.c — config.json → dense_config, for the Hugging Face model types llama, qwen2,
 * qwen3 and minimind (MiniMind2). Keys and their defaults follow transformers' config classes:
 *   head_dim             default hidden_size / num_attention_heads
 *   num_key_value_heads  default num_attention_heads
 *   intermediate_size    MiniMind: null means 64 * ceil(hidden_size * 8/3 / 64)
 *   rope_theta           top-level (transformers 4.x, MiniMind) or rope_parameters.rope_theta (5.x)
 *   tie_word_embeddings  default false (llama, qwen2, qwen3), true (minimind: always tied)
 *   q/k/v bias           qwen2 always; llama/qwen3 when attention_bias (o_proj too)
 *   q_norm/k_norm        qwen3
 * internlm2 (InternLM2's remote code): "bias" gives wqkv and wo biases; rms_norm_eps default
 * 1e-6; rope_scaling {"type": "dynamic"} is accepted because dynamic NTK changes RoPE only past
 * max_position_embeddings, which forward/hidden then refuse.
 * The head follows "architectures"[0]: *ForSequenceClassification has score.weight (num_labels
 * rows: the size of id2label, else num_labels, else 2 as in transformers), InternLM2ForRewardModel
 * v_head.weight (1 row), anything else an LM head.
 * Values are read with the readers shared with the moe pack (common/lm_json.c).
 */
#include <string.h>

#include "dense.h"
#include "lm_json.h"

/* head, n_labels from "architectures"[0] and id2label / num_labels. */
static void parse_head(dense_config *c, const cJSON *o) {
    const cJSON *a = lm_json_get(o, "architectures");
    const cJSON *f = cJSON_IsArray(a) ? cJSON_GetArrayItem(a, 0) : NULL;
    const char *arch = cJSON_IsString(f) ? f->valuestring : "";
    size_t n = strlen(arch), k = strlen("ForSequenceClassification");
    c->head = DENSE_HEAD_LM, c->n_labels = 0;
    if (n > k && strcmp(arch + n - k, "ForSequenceClassification") == 0) {
        const cJSON *labels = lm_json_get(o, "id2label"), *nl = lm_json_get(o, "num_labels");
        c->head = DENSE_HEAD_SCORE;
        c->n_labels = cJSON_IsObject(labels) ? cJSON_GetArraySize(labels)
                      : cJSON_IsNumber(nl)   ? (int32_t)cJSON_GetNumberValue(nl)
                                             : 2;
    } else if (strcmp(arch, "InternLM2ForRewardModel") == 0) {
        c->head = DENSE_HEAD_VALUE, c->n_labels = 1;
    }
}

/* Refuses what this plugin does not implement, naming the key. */
static int32_t check_supported(const cJSON *o, int32_t internlm2, grpo_error *err) {
    int32_t st = lm_json_check_act_rope(o, err);
    if (st != GRPO_OK) return st;
    const char *flags[] = {"use_moe", "mlp_bias", "use_sliding_window"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (lm_json_bool(o, flags[i], 0))
            return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                                  "config.json: \"%s\": true is not supported by dense.causal_lm%s",
                                  flags[i], i == 0 ? " (use the moe pack)" : "");
    const cJSON *rs = lm_json_get(o, "rope_scaling"), *rst = rs ? lm_json_get(rs, "type") : NULL;
    if (internlm2 && cJSON_IsString(rst) && strcmp(rst->valuestring, "dynamic") == 0)
        rs = NULL; /* dynamic NTK: plain RoPE up to max_position_embeddings */
    if (rs)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "config.json: \"rope_scaling\" is not supported (default RoPE only)");
    return GRPO_OK;
}

/* q/k/v and o_proj biases, q/k norm, the InternLM2 keys. */
static int32_t parse_variant(dense_config *c, const cJSON *o, const char *type,
                             grpo_error *err) {
    int32_t attention_bias = lm_json_bool(o, "attention_bias", 0);
    c->attn.qkv_bias = strcmp(type, "qwen2") == 0 || attention_bias;
    c->attn.o_bias = strcmp(type, "qwen2") != 0 && attention_bias;
    c->attn.qk_norm = strcmp(type, "qwen3") == 0;
    if (!c->internlm2) return GRPO_OK;
    c->attn.qkv_bias = c->attn.o_bias = lm_json_bool(o, "bias", 1);
    if (!lm_json_get(o, "rope_scaling")) return GRPO_OK;
    return lm_json_int(o, "max_position_embeddings", -1, &c->rope_max, err);
}

static int32_t parse(dense_config *c, const cJSON *o, grpo_error *err) {
    const char *type = lm_json_string(o, "model_type", "llama");
    int32_t minimind = strcmp(type, "minimind") == 0, st;
    c->internlm2 = strcmp(type, "internlm2") == 0;
    parse_head(c, o);
    if ((st = check_supported(o, c->internlm2, err)) != GRPO_OK ||
        (st = lm_json_attn_config(&c->attn, o, minimind ? 1e-5 : 1e-6,
                                  minimind ? 1e6 : 10000.0, err)) != GRPO_OK ||
        (st = lm_json_int(o, "num_hidden_layers", -1, &c->L, err)) != GRPO_OK ||
        (st = lm_json_int(o, "vocab_size", -1, &c->V, err)) != GRPO_OK)
        return st;
    int64_t idef = minimind ? lm_json_minimind_intermediate(c->attn.C) : -1;
    if ((st = lm_json_int(o, "intermediate_size", idef, &c->I, err)) != GRPO_OK ||
        (st = parse_variant(c, o, type, err)) != GRPO_OK)
        return st;
    c->tied = lm_json_bool(o, "tie_word_embeddings", minimind);
    if (c->head != DENSE_HEAD_LM && c->n_labels < 1)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "config.json: a classifier needs num_labels >= 1 (id2label)");
    return GRPO_OK;
}

int32_t dense_config_parse(dense_config *c, const char *json, grpo_error *err) {
    memset(c, 0, sizeof *c);
    cJSON *o = lm_json_parse(json, err);
    if (!o) return GRPO_ERR_INVALID;
    int32_t st = parse(c, o, err);
    cJSON_Delete(o);
    return st;
}
