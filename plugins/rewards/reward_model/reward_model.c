/*
 * reward_model.c — the reward_model pack's exports and reward_model.score: create (options, the
 * model and its head), score (texts -> raw scores -> scale/shift, clip, blend) and destroy.
 *
 * Per sample, with f(x) = clip(scale * x + shift) (clip 0: none):
 *   text = full      reward = f(score(prompt + completion))
 *   text = minimind  reward = (1 - w) f(score(prompt + completion)) + w f(score(prompt + answer))
 *                    when the completion has <answer>...</answer> (w = answer_weight, 0.6), else
 *                    f(score(prompt + completion)) — MiniMind's train_grpo.py.
 * score() is a reward model's scalar for a text: see rm_text.c (which text, which token) and
 * rm_score.c (the head).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "reward_model.h"

GRPO_PLUGIN_MAGIC()

/* The section's options (pack.ini), with its defaults for a host that leaves keys out. */
static int32_t read_options(rm_state *s, const grpo_config *cfg, grpo_error *err) {
    static const char *const texts[] = {"full", "minimind", NULL};
    const double any = HUGE_VAL;
    int32_t rc = grpo_config_choice(cfg, "text", texts, 0, &s->minimind, err);
    if (rc == GRPO_OK) rc = grpo_config_bool(cfg, "add_special_tokens", 0, &s->add_special, err);
    if (rc == GRPO_OK)
        rc = grpo_config_double(cfg, "answer_weight", 0.6, -any, any, &s->answer_weight, err);
    if (rc == GRPO_OK) rc = grpo_config_double(cfg, "scale", 1.0, -any, any, &s->scale, err);
    if (rc == GRPO_OK) rc = grpo_config_double(cfg, "shift", 0.0, -any, any, &s->shift, err);
    if (rc == GRPO_OK) rc = grpo_config_double(cfg, "clip", 0.0, 0, any, &s->clip, err);
    if (rc == GRPO_OK) rc = grpo_config_int(cfg, "label", 0, 0, 1 << 20, &s->label, err);
    if (rc == GRPO_OK)
        rc = grpo_config_int(cfg, "batch_size", 8, 1, 1 << 16, &s->batch_size, err);
    if (rc == GRPO_OK)
        rc = grpo_config_int(cfg, "max_length", 2048, 0, 1 << 24, &s->max_length, err);
    if (rc == GRPO_OK)
        rc = grpo_config_int(cfg, "reward_token_id", -1, -1, INT32_MAX, &s->reward_token, err);
    return rc;
}

/* An integer of config.json, or def when absent / null. */
static int32_t json_int(const cJSON *o, const char *key, int32_t def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsArray(v)) v = cJSON_GetArrayItem(v, 0);
    return cJSON_IsNumber(v) ? (int32_t)cJSON_GetNumberValue(v) : def;
}

/* The kind of reward model, its head and its pooling ids, from config.json. */
static int32_t read_model(rm_state *s, const char *section, grpo_error *err) {
    grpo_host_model_info info = {.struct_size = sizeof info};
    s->host->model_info(s->model, &info);
    s->C = info.hidden_size;
    const char *arch = info.architecture ? info.architecture : "";
    size_t n = strlen(arch), k = strlen("ForSequenceClassification");
    if (strcmp(arch, "InternLM2ForRewardModel") == 0)
        s->kind = RM_INTERNLM2;
    else if (n > k && strcmp(arch + n - k, "ForSequenceClassification") == 0)
        s->kind = RM_SEQCLS;
    else
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "[%s] %s: architecture %s is not a reward model (expected "
                              "*ForSequenceClassification or InternLM2ForRewardModel)", section,
                              info.dir, arch);
    if (s->kind == RM_INTERNLM2 && s->max_length == 1)
        return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] max_length 1 leaves no room for text "
                              "before InternLM2's reward token", section);
    if (!info.has_tokenizer)
        return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] %s: no tokenizer.json (the reward "
                              "model's own tokenizer is required)", section, info.dir);
    cJSON *o = cJSON_Parse(info.config_json);
    if (!o) return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] %s/config.json: not JSON", section,
                                  info.dir);
    s->pad_id = json_int(o, "pad_token_id", -1);
    /* labels as transformers counts them: id2label's size, else num_labels, else 2 */
    const cJSON *labels = cJSON_GetObjectItemCaseSensitive(o, "id2label");
    s->K = s->kind == RM_INTERNLM2 ? 1
           : cJSON_IsObject(labels) ? cJSON_GetArraySize(labels)
                                    : json_int(o, "num_labels", 2);
    if (s->kind == RM_INTERNLM2 && s->reward_token < 0)
        s->reward_token = json_int(o, "reward_token_id", -1);
    cJSON_Delete(o);
    if (s->K < 1 || s->C < 1)
        return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] %s: expected num_labels >= 1 and a "
                              "model plugin with hidden states", section, info.dir);
    if (s->kind == RM_INTERNLM2 && (s->reward_token < 0 || s->reward_token >= info.vocab_size))
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "[%s] %s: reward token id %d is not in the vocabulary [0,%d) (set "
                              "reward_token_id, or config.json's)", section, info.dir,
                              s->reward_token, info.vocab_size);
    const char *head = s->kind == RM_INTERNLM2 ? "v_head.weight" : "score.weight";
    s->head = malloc((size_t)s->K * s->C * sizeof(float));
    if (!s->head) return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", section);
    int32_t rc = s->host->model_tensor(s->model, head, s->head, (uint64_t)s->K * s->C, err);
    if (rc != GRPO_OK) return rc;
    if (s->label >= s->K)
        return grpo_error_set(err, GRPO_ERR_INVALID, "[%s] label %d: the model has %d label(s)",
                              section, s->label, s->K);
    return GRPO_OK;
}

static void rm_destroy(void *state) {
    rm_state *s = state;
    if (!s) return;
    if (s->model) s->host->model_free(s->model);
    free(s->head);
    free(s->name);
    free(s);
}

/* A path of the run file: relative ones are relative to its directory (ABI 1.2
 * grpo_config.dir), as the host resolves every path; an older host gives no directory. */
static int run_file_path(const grpo_config *cfg, const char *value, char *out, size_t cap) {
    const char *base = GRPO_HAS_FIELD(cfg, grpo_config, dir) ? cfg->dir : NULL;
    int n = value[0] == '/' || !base ? snprintf(out, cap, "%s", value)
                                     : snprintf(out, cap, "%s/%s", base, value);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static int32_t rm_create(const grpo_host *host, const grpo_config *cfg, void **state,
                         grpo_error *err) {
    *state = NULL;
    if (!host || !GRPO_HAS_FIELD(host, grpo_host, model_render) || !host->model_load ||
        !host->model_free || !host->model_info || !host->model_hidden || !host->model_tensor ||
        !host->model_encode || !host->model_render)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "[%s] reward_model.score needs the host's model services (plugin "
                              "ABI 1.1); this host does not provide them", cfg->section);
    rm_state *s = calloc(1, sizeof *s);
    if (!s || !(s->name = strdup(cfg->section ? cfg->section : "reward"))) {
        free(s);
        return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    }
    s->host = host;
    const char *given = grpo_config_get(cfg, "model");
    char dir[4096];
    int32_t rc = read_options(s, cfg, err);
    if (rc == GRPO_OK && (!given || !*given))
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "[%s] model: expected a Hugging Face "
                            "directory", cfg->section);
    if (rc == GRPO_OK && run_file_path(cfg, given, dir, sizeof dir) != 0)
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "[%s] model: path too long", cfg->section);
    if (rc == GRPO_OK) {
        rc = host->model_load(host, dir, &s->model, err);
        if (rc != GRPO_OK) {
            char why[sizeof err->message];
            snprintf(why, sizeof why, "%s", err->message);
            grpo_error_set(err, rc, "[%s] model %s: %s", cfg->section, dir, why);
        }
    }
    if (rc == GRPO_OK) rc = read_model(s, cfg->section, err);
    if (rc != GRPO_OK) {
        rm_destroy(s);
        return rc;
    }
    *state = s;
    return GRPO_OK;
}

/* f(x) = clip(scale * x + shift); NaN stays NaN. */
static double transform(const rm_state *s, double x) {
    double v = s->scale * x + s->shift;
    if (s->clip > 0) v = v < -s->clip ? -s->clip : v > s->clip ? s->clip : v;
    return v;
}

static int32_t rm_score(void *state, const grpo_sample *samples, uint32_t n, float *out,
                        grpo_error *err) {
    rm_state *s = state;
    /* texts: [0,n) the full completions, then one per sample with an <answer> (minimind) */
    rm_text *texts = calloc(2 * (size_t)n + 1, sizeof *texts);
    int32_t *answer_of = malloc(((size_t)n + 1) * sizeof *answer_of); /* text index or -1 */
    double *raw = malloc((2 * (size_t)n + 1) * sizeof *raw);
    int32_t rc = texts && answer_of && raw ? GRPO_OK
                                           : grpo_error_set(err, GRPO_ERR_NOMEM,
                                                            "[%s] out of memory", s->name);
    uint32_t m = n;
    for (uint32_t i = 0; rc == GRPO_OK && i < n; i++) {
        rc = rm_text_build(s, &samples[i], samples[i].completion, &texts[i], err);
        answer_of[i] = -1;
        char *answer = s->minimind && rc == GRPO_OK ? rm_answer_content(samples[i].completion)
                                                    : NULL;
        if (answer) {
            rc = rm_text_build(s, &samples[i], answer, &texts[m], err);
            answer_of[i] = (int32_t)m++;
            free(answer);
        }
    }
    if (rc == GRPO_OK) rc = rm_score_texts(s, texts, m, raw, err);
    for (uint32_t i = 0; rc == GRPO_OK && i < n; i++) {
        double v = transform(s, raw[i]);
        if (answer_of[i] >= 0)
            v = (1.0 - s->answer_weight) * v + s->answer_weight * transform(s, raw[answer_of[i]]);
        out[i] = (float)v;
    }
    for (uint32_t i = 0; texts && i < m; i++) free(texts[i].ids);
    free(texts), free(answer_of), free(raw);
    return rc;
}

static const grpo_reward_desc score_desc = {
    .struct_size = sizeof(grpo_reward_desc),
    .id = "reward_model.score",
    .description = "Reward model score: a sequence-classification (score.weight) or InternLM2 "
                   "reward model (v_head) from a Hugging Face directory",
    .flags = 0,
    .create = rm_create,
    .score = rm_score,
    .destroy = rm_destroy,
};

static const grpo_reward_desc *get_reward(uint32_t index) {
    return index == 0 ? &score_desc : NULL;
}

GRPO_EXPORT int32_t grpo_plugin_init(const grpo_host *host, grpo_library *lib, grpo_error *err) {
    (void)host, (void)err;
    if (GRPO_HAS_FIELD(lib, grpo_library, get_reward)) lib->get_reward = get_reward;
    return GRPO_OK;
}
