/*
 * moe_config.c — config.json -> moe_config for two flavours:
 *
 * MiniMind2 MoE (model_type "minimind", use_moe: true). Llama attention (no bias, no q/k norm),
 * tied head, rms_norm_eps 1e-5, rope_theta 1e6; experts and shared experts are SwiGLU MLPs of
 * intermediate_size (null: 64 * ceil(hidden_size * 8/3 / 64)). Keys and defaults:
 *   n_routed_experts 4, num_experts_per_tok 2, n_shared_experts 1, scoring_func "softmax"
 *   (the only one), norm_topk_prob true (applied only when top-k > 1, ÷ (sum + 1e-20)),
 *   aux_loss_alpha 0.1, seq_aux true.
 * minimind-3's MoE (num_experts / moe_intermediate_size / router_aux_loss_coef without
 * n_routed_experts) is refused as unsupported.
 *
 * Qwen3-MoE (model_type "qwen3_moe"). Qwen3 attention (q/k norm),
 * untied head by default, rms_norm_eps 1e-6, rope_theta 10000 (top level or
 * rope_parameters); attention_bias is refused. Keys and defaults (transformers' Qwen3MoeConfig):
 *   num_experts (saved by transformers 5 as num_local_experts) required, num_experts_per_tok 8,
 *   moe_intermediate_size required, norm_topk_prob false (÷ sum, no epsilon),
 *   router_aux_loss_coef 0.001, decoder_sparse_step 1 and mlp_only_layers [] (every layer
 *   sparse: anything else is refused as unsupported).
 */
#include <string.h>

#include "lm_json.h"
#include "moe.h"

/* Features no flavour implements, refused naming the key. */
static int32_t check_common(const cJSON *o, grpo_error *err) {
    int32_t st = lm_json_check_act_rope(o, err);
    if (st != GRPO_OK) return st;
    const char *flags[] = {"mlp_bias", "use_sliding_window", "inference_rope_scaling"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (lm_json_bool(o, flags[i], 0))
            return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                                  "config.json: \"%s\": true is not supported by moe.causal_lm",
                                  flags[i]);
    if (lm_json_get(o, "rope_scaling"))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "config.json: \"rope_scaling\" is not supported (default RoPE only)");
    return GRPO_OK;
}

/* The attention part (common/lm_json.c), layers and vocab. */
static int32_t parse_attention(moe_config *c, const cJSON *o, double eps, double theta,
                               grpo_error *err) {
    int32_t st;
    if ((st = lm_json_attn_config(&c->attn, o, eps, theta, err)) != GRPO_OK ||
        (st = lm_json_int(o, "num_hidden_layers", -1, &c->L, err)) != GRPO_OK)
        return st;
    return lm_json_int(o, "vocab_size", -1, &c->V, err);
}

static int32_t parse_minimind(moe_config *c, const cJSON *o, grpo_error *err) {
    int32_t st;
    if (!lm_json_bool(o, "use_moe", 0))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "config.json: minimind without \"use_moe\": true is a dense model "
                              "(use dense.causal_lm)");
    if (!lm_json_get(o, "n_routed_experts") && lm_json_get(o, "num_experts"))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "config.json: minimind-3 MoE (\"num_experts\" without "
                              "\"n_routed_experts\") is not supported; MiniMind2 MoE is");
    const cJSON *sf = lm_json_get(o, "scoring_func");
    if (sf && (!cJSON_IsString(sf) || strcmp(sf->valuestring, "softmax") != 0))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "config.json: scoring_func other than \"softmax\" is not supported");
    if ((st = parse_attention(c, o, 1e-5, 1e6, err)) != GRPO_OK) return st;
    int64_t idef = lm_json_minimind_intermediate(c->attn.C);
    if ((st = lm_json_int(o, "intermediate_size", idef, &c->I, err)) != GRPO_OK ||
        (st = lm_json_int(o, "n_routed_experts", 4, &c->E, err)) != GRPO_OK ||
        (st = lm_json_int(o, "num_experts_per_tok", 2, &c->K, err)) != GRPO_OK ||
        (st = lm_json_count(o, "n_shared_experts", 1, &c->NS, err)) != GRPO_OK ||
        (st = lm_json_nonneg(o, "aux_loss_alpha", 0.1, &c->aux_coef, err)) != GRPO_OK)
        return st;
    c->IS = c->I;
    c->norm_topk = lm_json_bool(o, "norm_topk_prob", 1) && c->K > 1;
    c->norm_eps = 1e-20f;
    c->aux_kind = lm_json_bool(o, "seq_aux", 1) ? MOE_AUX_SEQ : MOE_AUX_TOKEN;
    c->tied = lm_json_bool(o, "tie_word_embeddings", 1);
    return GRPO_OK;
}

static int32_t parse_qwen3_moe(moe_config *c, const cJSON *o, grpo_error *err) {
    int32_t st, step = 1;
    const cJSON *only = lm_json_get(o, "mlp_only_layers");
    if (only && (!cJSON_IsArray(only) || cJSON_GetArraySize(only) != 0))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "config.json: non-empty \"mlp_only_layers\" (dense layers among "
                              "sparse ones) is not supported; every layer must be sparse");
    if ((st = lm_json_int(o, "decoder_sparse_step", 1, &step, err)) != GRPO_OK) return st;
    if (step != 1)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "config.json: \"decoder_sparse_step\": %d is not supported (only "
                              "1: every layer sparse)", step);
    if ((st = parse_attention(c, o, 1e-6, 10000.0, err)) != GRPO_OK) return st;
    const char *ekey = lm_json_get(o, "num_experts") ? "num_experts" : "num_local_experts";
    if ((st = lm_json_int(o, ekey, -1, &c->E, err)) != GRPO_OK ||
        (st = lm_json_int(o, "num_experts_per_tok", 8, &c->K, err)) != GRPO_OK ||
        (st = lm_json_int(o, "moe_intermediate_size", -1, &c->I, err)) != GRPO_OK ||
        (st = lm_json_nonneg(o, "router_aux_loss_coef", 0.001, &c->aux_coef, err)) != GRPO_OK)
        return st;
    c->NS = 0, c->IS = 0;
    c->norm_topk = lm_json_bool(o, "norm_topk_prob", 0);
    c->norm_eps = 0.0f;
    c->aux_kind = MOE_AUX_GLOBAL;
    c->attn.qk_norm = 1;
    c->tied = lm_json_bool(o, "tie_word_embeddings", 0);
    c->qwen = 1;
    return GRPO_OK;
}

int32_t moe_config_parse(moe_config *c, const char *json, grpo_error *err) {
    memset(c, 0, sizeof *c);
    cJSON *o = lm_json_parse(json, err);
    if (!o) return GRPO_ERR_INVALID;
    const char *type = lm_json_string(o, "model_type", "");
    int32_t st = check_common(o, err);
    if (st == GRPO_OK) {
        if (strcmp(type, "minimind") == 0)
            st = parse_minimind(c, o, err);
        else if (strcmp(type, "qwen3_moe") == 0)
            st = parse_qwen3_moe(c, o, err);
        else
            st = grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                                "config.json: model_type \"%s\" is not served by moe.causal_lm "
                                "(expected \"minimind\" with use_moe, or \"qwen3_moe\")", type);
    }
    if (st == GRPO_OK && c->E > MOE_MAX_EXPERTS)
        st = grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                            "config.json: %d experts; at most %d are supported", c->E,
                            MOE_MAX_EXPERTS);
    if (st == GRPO_OK && c->K > c->E)
        st = grpo_error_set(err, GRPO_ERR_INVALID,
                            "config.json: num_experts_per_tok (%d) exceeds the number of "
                            "experts (%d)", c->K, c->E);
    if (st == GRPO_OK && lm_json_bool(o, "attention_bias", 0))
        st = grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                            "config.json: \"attention_bias\": true is not supported by "
                            "moe.causal_lm");
    cJSON_Delete(o);
    return st;
}
