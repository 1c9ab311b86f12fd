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
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "dense.h"

static const cJSON *get(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

/* Integer key: required when def < 0. */
static int32_t get_int(const cJSON *o, const char *key, int64_t def, int32_t *out,
                       grpo_error *err) {
    const cJSON *v = get(o, key);
    if (!v) {
        if (def < 0)
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "config.json: missing \"%s\" (expected a positive integer)", key);
        *out = (int32_t)def;
        return GRPO_OK;
    }
    double d = cJSON_GetNumberValue(v);
    if (!cJSON_IsNumber(v) || d != floor(d) || d < 1 || d > 1e9)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "config.json: \"%s\" must be a positive integer", key);
    *out = (int32_t)d;
    return GRPO_OK;
}

static int32_t get_float(const cJSON *o, const char *key, double def, float *out,
                         grpo_error *err) {
    const cJSON *v = get(o, key);
    if (!v) {
        *out = (float)def;
        return GRPO_OK;
    }
    if (!cJSON_IsNumber(v) || !(cJSON_GetNumberValue(v) > 0))
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "config.json: \"%s\" must be a positive number", key);
    *out = (float)cJSON_GetNumberValue(v);
    return GRPO_OK;
}

static int32_t get_bool(const cJSON *o, const char *key, int32_t def) {
    const cJSON *v = get(o, key);
    return v ? cJSON_IsTrue(v) : def;
}

/* head, n_labels from "architectures"[0] and id2label / num_labels. */
static void parse_head(dense_config *c, const cJSON *o) {
    const cJSON *a = get(o, "architectures");
    const cJSON *f = cJSON_IsArray(a) ? cJSON_GetArrayItem(a, 0) : NULL;
    const char *arch = cJSON_IsString(f) ? f->valuestring : "";
    size_t n = strlen(arch), k = strlen("ForSequenceClassification");
    c->head = DENSE_HEAD_LM, c->n_labels = 0;
    if (n > k && strcmp(arch + n - k, "ForSequenceClassification") == 0) {
        const cJSON *labels = get(o, "id2label"), *nl = get(o, "num_labels");
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
    const cJSON *act = get(o, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "config.json: hidden_act other than \"silu\" is not supported");
    const char *flags[] = {"use_moe", "mlp_bias", "use_sliding_window"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (get_bool(o, flags[i], 0))
            return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                                  "config.json: \"%s\": true is not supported by dense.causal_lm%s",
                                  flags[i], i == 0 ? " (use the moe pack)" : "");
    const cJSON *rs = get(o, "rope_scaling"), *rst = rs ? get(rs, "type") : NULL;
    if (internlm2 && cJSON_IsString(rst) && strcmp(rst->valuestring, "dynamic") == 0)
        rs = NULL; /* dynamic NTK: plain RoPE up to max_position_embeddings */
    if (rs)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "config.json: \"rope_scaling\" is not supported (default RoPE only)");
    const cJSON *rp = get(o, "rope_parameters"), *rt = rp ? get(rp, "rope_type") : NULL;
    if (rt && (!cJSON_IsString(rt) || strcmp(rt->valuestring, "default") != 0))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "config.json: rope_parameters.rope_type must be \"default\"");
    return GRPO_OK;
}

int32_t dense_config_parse(dense_config *c, const char *json, grpo_error *err) {
    memset(c, 0, sizeof *c);
    cJSON *o = cJSON_Parse(json);
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return grpo_error_set(err, GRPO_ERR_INVALID, "config.json: not a JSON object");
    }
    const cJSON *mt = get(o, "model_type");
    const char *type = mt && cJSON_IsString(mt) ? mt->valuestring : "llama";
    int32_t minimind = strcmp(type, "minimind") == 0, st;
    c->internlm2 = strcmp(type, "internlm2") == 0;
    parse_head(c, o);
    if ((st = check_supported(o, c->internlm2, err)) != GRPO_OK) goto done;
    if ((st = get_int(o, "hidden_size", -1, &c->C, err)) != GRPO_OK ||
        (st = get_int(o, "num_hidden_layers", -1, &c->L, err)) != GRPO_OK ||
        (st = get_int(o, "num_attention_heads", -1, &c->NH, err)) != GRPO_OK)
        goto done;
    if (!get(o, "head_dim") && c->C % c->NH != 0) {
        st = grpo_error_set(err, GRPO_ERR_INVALID,
                            "config.json: hidden_size (%d) is not a multiple of "
                            "num_attention_heads (%d) and there is no head_dim", c->C, c->NH);
        goto done;
    }
    if ((st = get_int(o, "num_key_value_heads", c->NH, &c->NKV, err)) != GRPO_OK ||
        (st = get_int(o, "head_dim", c->C / c->NH, &c->HD, err)) != GRPO_OK ||
        (st = get_int(o, "vocab_size", -1, &c->V, err)) != GRPO_OK)
        goto done;
    int64_t idef = minimind ? 64 * (((int64_t)(c->C * 8 / 3) + 63) / 64) : -1;
    if ((st = get_int(o, "intermediate_size", idef, &c->I, err)) != GRPO_OK) goto done;
    if ((st = get_float(o, "rms_norm_eps", minimind ? 1e-5 : 1e-6, &c->eps, err)) != GRPO_OK)
        goto done;
    const cJSON *rp = get(o, "rope_parameters");
    const cJSON *rope_obj = rp && get(rp, "rope_theta") ? rp : o;
    if ((st = get_float(rope_obj, "rope_theta", minimind ? 1e6 : 10000.0, &c->rope_theta,
                        err)) != GRPO_OK)
        goto done;
    int32_t attention_bias = get_bool(o, "attention_bias", 0);
    c->qkv_bias = strcmp(type, "qwen2") == 0 || attention_bias;
    c->o_bias = strcmp(type, "qwen2") != 0 && attention_bias;
    c->qk_norm = strcmp(type, "qwen3") == 0;
    c->tied = get_bool(o, "tie_word_embeddings", minimind);
    if (c->internlm2) {
        c->qkv_bias = c->o_bias = get_bool(o, "bias", 1);
        const cJSON *rs = get(o, "rope_scaling");
        if (rs && (st = get_int(o, "max_position_embeddings", -1, &c->rope_max, err)) != GRPO_OK)
            goto done;
    }
    if (c->head != DENSE_HEAD_LM && c->n_labels < 1) {
        st = grpo_error_set(err, GRPO_ERR_INVALID,
                            "config.json: a classifier needs num_labels >= 1 (id2label)");
        goto done;
    }
    if (c->NH % c->NKV != 0)
        st = grpo_error_set(err, GRPO_ERR_INVALID,
                            "config.json: num_attention_heads (%d) must be a multiple of "
                            "num_key_value_heads (%d)", c->NH, c->NKV);
    else if (c->HD % 2 != 0)
        st = grpo_error_set(err, GRPO_ERR_INVALID, "config.json: head_dim (%d) must be even",
                            c->HD);
done:
    cJSON_Delete(o);
    return st;
}
