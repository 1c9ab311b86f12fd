/*
 * test_reward_model.c — the reward-model scorer (plugins/rewards/reward_model) and the host's
 * model services it runs on (core/host/host_model.c, ABI 1.1), against transformers.
 *
 * Fixtures: tests/fixtures/reward_model/{llama,qwen2,internlm2}/ and expected.json, made by
 * tools/make_reward_model_fixtures.py: tiny random LlamaForSequenceClassification (pad 0),
 * Qwen2ForSequenceClassification (num_labels 2, pad == eos, texts ending in pad tokens) and an
 * InternLM2ForRewardModel (packed wqkv, NH 6 / NKV 2, biases, reward token appended) whose
 * expected scores come from tools/internlm2_reference.py, itself checked there against
 * transformers' LlamaModel holding the same weights unpacked.
 *
 * Tolerances: scores are computed by the fixture script with the model in float64; ours run in
 * fp32 through 2 layers of C = 32/48 and a C-long head dot product, about 1e-6 relative. We allow
 * 1e-4 * max(1, |expected|): a wrong pooled token, head row, bias, norm eps or q/k/v order moves a
 * score by 1e-1 or more (the raw scores spread over several units). Texts and token ids are
 * compared exactly (rendered by transformers' apply_chat_template, tokenized by HF tokenizers).
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grpo/reward.h"
#include "host/host_model.h"
#include "kernels.h"
#include "host/model_instance.h"
#include "host/host.h"
#include "host/registry.h"
#include "io/safetensors.h"
#include "host/testing.h"
#include "train/rewards.h"
#include "train/run.h"

#define FIXTURES GRPO_SOURCE_DIR "/tests/fixtures/reward_model"

static const char *const models[] = {"llama", "qwen2", "internlm2"};
#define N_MODELS 3

static cJSON *expected;          /* expected.json */
static grpo_host_models *ctx;    /* the model services, over the build's packs */
static grpo_host host;           /* grpo_default_host() pointed at ctx */
static grpo_registry reg;        /* to load the reward pack */

static void ck_ok(int rc, const grpo_error *err) {
    ck_assert_msg(rc == GRPO_OK, "status %d: %s", rc, err->message);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    ck_assert(fread(s, 1, (size_t)n, f) == (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

static void setup(void) {
    grpo_error err;
    grpo_error_init(&err);
    char *text = slurp(FIXTURES "/expected.json");
    expected = cJSON_Parse(text);
    free(text);
    ck_assert(expected != NULL);
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    ck_ok(grpo_host_models_open(&ctx, NULL, dirs, &err), &err);
    host = *grpo_default_host();
    grpo_host_set_models(&host, ctx);
    memset(&reg, 0, sizeof reg);
    ck_ok(grpo_registry_scan(&reg, dirs, &err), &err);
}

static void teardown(void) {
    grpo_registry_free(&reg);
    grpo_host_models_close(ctx);
    cJSON_Delete(expected);
}

static void check_close(double got, double want, const char *what) {
    double tol = 1e-4 * fmax(1.0, fabs(want));
    ck_assert_msg(fabs(got - want) <= tol, "%s: got %.9g, transformers %.9g (tol %.2g)", what, got,
                  want, tol);
    if (getenv("GRPO_TEST_VERBOSE")) printf("%-40s err %.3g\n", what, fabs(got - want));
}

static char *model_dir(const char *name) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", FIXTURES, name);
    return buf;
}

/* messages of a fixture sample + {assistant, reply}. */
static uint32_t sample_messages(const cJSON *sample, const char *reply, grpo_message *out) {
    uint32_t n = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(sample, "messages")) {
        out[n++] = (grpo_message){sizeof(grpo_message),
                                  cJSON_GetObjectItem(m, "role")->valuestring,
                                  cJSON_GetObjectItem(m, "content")->valuestring};
    }
    out[n++] = (grpo_message){sizeof(grpo_message), "assistant", reply};
    return n;
}

/* The answer text an "answer" entry scored: the fixture's rendered text holds it; we rebuild it
 * the same way the script did (MiniMind's regex). */
static char *answer_reply(const char *completion) {
    const char *b = strstr(completion, "<answer>") + 8, *e = strstr(b, "</answer>");
    while (b < e && (*b == ' ' || *b == '\n')) b++;
    while (e > b && (e[-1] == ' ' || e[-1] == '\n')) e--;
    return strndup(b, (size_t)(e - b));
}

/* The head row 0 of the model (score.weight or v_head.weight). */
static float *head_row(struct grpo_host_model *m, const char *name, int32_t C, int32_t K) {
    grpo_error err;
    grpo_error_init(&err);
    float *w = malloc((size_t)K * C * sizeof(float));
    ck_ok(host.model_tensor(m, name, w, (uint64_t)K * C, &err), &err);
    return w;
}

/* ---- the host services against transformers ------------------------------------------- */

START_TEST(host_services_match_transformers) {
    const char *name = models[_i];
    grpo_error err;
    grpo_error_init(&err);
    struct grpo_host_model *m = NULL;
    ck_ok(host.model_load(&host, model_dir(name), &m, &err), &err);
    grpo_host_model_info info = {sizeof info, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL};
    ck_ok(host.model_info(m, &info), &err);
    ck_assert(info.has_tokenizer && info.hidden_size > 0 && info.vocab_size == 517);
    int internlm2 = strcmp(name, "internlm2") == 0;
    int32_t C = info.hidden_size, K = strcmp(name, "qwen2") == 0 ? 2 : 1;
    float *w = head_row(m, internlm2 ? "v_head.weight" : "score.weight", C, K);
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItem(cJSON_GetObjectItem(expected, name), "samples")) {
        const char *completion = cJSON_GetObjectItem(s, "completion")->valuestring;
        for (int k = 0; k < 2; k++) {
            const cJSON *e = cJSON_GetObjectItem(s, k ? "answer" : "full");
            if (!e) continue;
            char *reply = k ? answer_reply(completion) : strdup(completion);
            grpo_message msgs[8];
            uint32_t n = sample_messages(s, reply, msgs);
            char text[4096];
            int32_t len = host.model_render(m, msgs, n, 0, text, sizeof text, &err);
            ck_assert_msg(len >= 0, "%s", err.message);
            ck_assert_str_eq(text, cJSON_GetObjectItem(e, "text")->valuestring);
            /* ids: the text's ids (+ the reward token for InternLM2, appended by the scorer) */
            const cJSON *want = cJSON_GetObjectItem(e, "ids");
            int32_t nw = cJSON_GetArraySize(want), ids[512];
            int32_t ni = host.model_encode(m, text, 0, ids, 512, &err);
            ck_assert_int_eq(ni + internlm2, nw);
            if (internlm2) ids[ni++] = 516;
            for (int32_t t = 0; t < nw; t++)
                ck_assert_int_eq(ids[t], cJSON_GetArrayItem(want, t)->valueint);
            /* the hidden state at transformers' pooled token, through the head */
            int32_t *mask = malloc((size_t)nw * sizeof *mask), at;
            for (int32_t t = 0; t < nw; t++) mask[t] = 1;
            at = cJSON_GetObjectItem(e, "index")->valueint;
            float *h = malloc((size_t)C * sizeof *h);
            ck_ok(host.model_hidden(m, ids, mask, 1, nw, &at, h, &err), &err);
            double raw = 0;
            for (int32_t c = 0; c < C; c++) raw += (double)w[c] * h[c];
            char what[128];
            snprintf(what, sizeof what, "%s %s raw score", name, k ? "answer" : "full");
            check_close(raw, cJSON_GetObjectItem(e, "raw")->valuedouble, what);
            free(h), free(mask), free(reply);
        }
    }
    free(w);
    host.model_free(m);
}
END_TEST

/* Rows scored together, right- and left-padded, give the hidden states of rows scored alone. */
START_TEST(padding_does_not_change_hidden_states) {
    grpo_error err;
    grpo_error_init(&err);
    struct grpo_host_model *m = NULL;
    ck_ok(host.model_load(&host, model_dir(models[_i]), &m, &err), &err);
    grpo_host_model_info info = {sizeof info, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL};
    host.model_info(m, &info);
    int32_t C = info.hidden_size, B = 3, T = 9, len[3] = {9, 4, 6};
    int32_t ids[27], right[27] = {0}, rmask[27] = {0}, left[27] = {0}, lmask[27] = {0};
    for (int32_t i = 0; i < 27; i++) ids[i] = 3 + (i * 37) % 500;
    float *alone = malloc((size_t)B * C * sizeof(float)), *got = malloc((size_t)B * C * 4);
    int32_t at_r[3], at_l[3], ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    for (int32_t b = 0; b < B; b++) {
        int32_t last = len[b] - 1;
        ck_ok(host.model_hidden(m, ids + b * T, ones, 1, len[b], &last, alone + b * C, &err), &err);
        for (int32_t t = 0; t < len[b]; t++) {
            right[b * T + t] = ids[b * T + t], rmask[b * T + t] = 1;
            left[b * T + T - len[b] + t] = ids[b * T + t], lmask[b * T + T - len[b] + t] = 1;
        }
        at_r[b] = last, at_l[b] = T - 1;
    }
    for (int side = 0; side < 2; side++) {
        ck_ok(host.model_hidden(m, side ? left : right, side ? lmask : rmask, B, T,
                                side ? at_l : at_r, got, &err), &err);
        for (int32_t i = 0; i < B * C; i++)
            ck_assert_msg(fabsf(got[i] - alone[i]) <= 1e-5f * fmaxf(1.0f, fabsf(alone[i])),
                          "%s %s-padded: element %d: %g vs alone %g", models[_i],
                          side ? "left" : "right", i, got[i], alone[i]);
    }
    free(alone), free(got);
    host.model_free(m);
}
END_TEST

/* InternLM2's wqkv is unpacked on load; reading it back (the save direction) gives the file. */
START_TEST(internlm2_wqkv_relayout_round_trips) {
    grpo_error err;
    grpo_error_init(&err);
    struct grpo_host_model *m = NULL;
    ck_ok(host.model_load(&host, model_dir("internlm2"), &m, &err), &err);
    grpo_safetensors *st = NULL;
    ck_ok(grpo_st_open(&st, FIXTURES "/internlm2/model.safetensors", &err), &err);
    const char *names[] = {"model.layers.1.attention.wqkv.weight",
                           "model.layers.0.attention.wqkv.bias"};
    for (int k = 0; k < 2; k++) {
        const grpo_st_tensor *t = grpo_st_find(st, names[k]);
        ck_assert_ptr_nonnull(t);
        float *got = malloc(t->numel * sizeof(float));
        ck_ok(host.model_tensor(m, names[k], got, t->numel, &err), &err);
        ck_assert(memcmp(got, t->data, t->numel * sizeof(float)) == 0);
        free(got);
    }
    grpo_st_close(st);
    host.model_free(m);
}
END_TEST

/* Saving an InternLM2 model writes wqkv packed again: every tensor of the saved file equals the
 * original's, bit for bit (so transformers' InternLM2 code loads what we save). */
START_TEST(internlm2_save_writes_the_packed_layout) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *ops = grpo_backend_open("cpu", 0, &err);
    ck_assert_ptr_nonnull(ops);
    grpo_host h = *grpo_default_host();
    h.ops = ops;
    grpo_model *m = NULL;
    ck_ok(grpo_model_open_dir(&m, &reg, &h, model_dir("internlm2"), 0, &err), &err);
    char dir[] = "/tmp/grpo_rm_save_XXXXXX", path[64], cmd[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_ok(grpo_model_save(m, dir, &err), &err);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    grpo_safetensors *a = NULL, *b = NULL;
    ck_ok(grpo_st_open(&a, FIXTURES "/internlm2/model.safetensors", &err), &err);
    ck_ok(grpo_st_open(&b, path, &err), &err);
    ck_assert_uint_eq(grpo_st_count(a), grpo_st_count(b));
    for (size_t i = 0; i < grpo_st_count(a); i++) {
        const grpo_st_tensor *ta = grpo_st_at(a, i), *tb = grpo_st_find(b, ta->name);
        ck_assert_msg(tb && tb->nbytes == ta->nbytes, "%s missing or resized", ta->name);
        ck_assert_msg(memcmp(ta->data, tb->data, ta->nbytes) == 0, "%s differs", ta->name);
    }
    grpo_st_close(a), grpo_st_close(b);
    grpo_model_close(m);
    grpo_backend_close(ops);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* ---- the reward plugin ------------------------------------------------------------------ */

typedef struct plugin {
    const grpo_reward_desc *desc;
    void *state;
} plugin;

/* Creates reward_model.score with every key of its manifest set (as the host resolves them). */
static int plugin_create(plugin *p, const grpo_host *h, const char *const *kv, grpo_error *err) {
    const grpo_entry *e = grpo_registry_find(&reg, "reward_model.score");
    ck_assert_ptr_nonnull(e);
    const void *desc = NULL;
    ck_ok(grpo_registry_load(&reg, e, h, &desc, err), err);
    p->desc = desc;
    const char *keys[32], *values[32];
    uint32_t n = 0;
    for (int i = 0; i < e->n_keys; i++) {
        const char *v = e->keys[i].n_defaults ? e->keys[i].defaults[0] : "";
        for (int j = 0; kv[j]; j += 2)
            if (!strcmp(kv[j], e->keys[i].name)) v = kv[j + 1];
        keys[n] = e->keys[i].name, values[n++] = v;
    }
    grpo_config cfg = {sizeof cfg, n, keys, values, "reward.rm", NULL};
    return p->desc->create(h, &cfg, &p->state, err);
}

START_TEST(plugin_matches_transformers) {
    const char *name = models[_i];
    const cJSON *fx = cJSON_GetObjectItem(expected, name), *c, *s;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(fx, "plugin")) {
        char scale[32], shift[32], clip[32], bs[32], ml[32];
        snprintf(scale, sizeof scale, "%.17g", cJSON_GetObjectItem(c, "scale")->valuedouble);
        snprintf(shift, sizeof shift, "%.17g", cJSON_GetObjectItem(c, "shift")->valuedouble);
        snprintf(clip, sizeof clip, "%.17g", cJSON_GetObjectItem(c, "clip")->valuedouble);
        snprintf(bs, sizeof bs, "%d", cJSON_GetObjectItem(c, "batch_size")->valueint);
        snprintf(ml, sizeof ml, "%d", cJSON_GetObjectItem(c, "max_length")->valueint);
        const char *kv[] = {"model", model_dir(name), "scale", scale, "shift", shift, "clip", clip,
                            "batch_size", bs, "max_length", ml, "text",
                            cJSON_GetObjectItem(c, "text")->valuestring, NULL};
        grpo_error err;
        grpo_error_init(&err);
        plugin p;
        ck_ok(plugin_create(&p, &host, kv, &err), &err);
        grpo_sample samples[8];
        grpo_message msgs[8][8];
        uint32_t n = 0;
        cJSON_ArrayForEach(s, cJSON_GetObjectItem(fx, "samples")) {
            uint32_t nm = sample_messages(s, "", msgs[n]) - 1;
            const char *completion = cJSON_GetObjectItem(s, "completion")->valuestring;
            samples[n] = (grpo_sample){.struct_size = sizeof(grpo_sample), .prompt = "",
                                       .messages = msgs[n], .n_messages = nm,
                                       .completion = completion, .group = n};
            n++;
        }
        float out[8];
        ck_ok(p.desc->score(p.state, samples, n, out, &err), &err);
        const cJSON *want = cJSON_GetObjectItem(c, "rewards");
        for (uint32_t i = 0; i < n; i++) {
            char what[128];
            snprintf(what, sizeof what, "%s plugin (%s, max_length %s) sample %u", name,
                     cJSON_GetObjectItem(c, "text")->valuestring, ml, i);
            check_close(out[i], cJSON_GetArrayItem(want, (int)i)->valuedouble, what);
        }
        p.desc->destroy(p.state);
    }
}
END_TEST

/* A plain-text ChatML prompt is parsed back into messages, as MiniMind does: it scores the same
 * as the message-list prompt it was rendered from. */
START_TEST(plugin_parses_chatml_prompts) {
    const char *kv[] = {"model", model_dir("llama"), NULL};
    grpo_error err;
    grpo_error_init(&err);
    plugin p;
    ck_ok(plugin_create(&p, &host, kv, &err), &err);
    grpo_message msgs[2] = {{sizeof(grpo_message), "system", "You are terse."},
                            {sizeof(grpo_message), "user", "Say hi."}};
    grpo_sample s[2] = {
        {.struct_size = sizeof(grpo_sample), .prompt = "", .messages = msgs, .n_messages = 2,
         .completion = "hi there, friend"},
        {.struct_size = sizeof(grpo_sample),
         .prompt = "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\n Say hi.\n"
                   "<|im_end|>\n<|im_start|>assistant\n",
         .completion = "hi there, friend"}};
    float out[2];
    ck_ok(p.desc->score(p.state, s, 2, out, &err), &err);
    double want = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(
        cJSON_GetObjectItem(expected, "llama"), "samples"), 0), "full"), "raw")->valuedouble;
    check_close(out[0], want, "llama message prompt");
    check_close(out[1], want, "llama ChatML text prompt");
    p.desc->destroy(p.state);
}
END_TEST

START_TEST(plugin_refuses_what_it_cannot_score) {
    grpo_error err;
    grpo_error_init(&err);
    plugin p;
    /* a causal LM is not a reward model */
    const char *lm[] = {"model", GRPO_SOURCE_DIR "/tests/fixtures/dense/llama", NULL};
    ck_assert_int_eq(plugin_create(&p, &host, lm, &err), GRPO_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "not a reward model"), "%s", err.message);
    /* a missing directory names the section and the directory */
    const char *missing[] = {"model", "/nonexistent/rm", NULL};
    ck_assert_int_ne(plugin_create(&p, &host, missing, &err), GRPO_OK);
    ck_assert_msg(strstr(err.message, "[reward.rm]") && strstr(err.message, "/nonexistent/rm"),
                  "%s", err.message);
    /* a label the head does not have */
    const char *label[] = {"model", model_dir("llama"), "label", "1", NULL};
    ck_assert_int_eq(plugin_create(&p, &host, label, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "label 1"), "%s", err.message);
    const char *text[] = {"model", model_dir("llama"), "text", "answer", NULL};
    ck_assert_int_eq(plugin_create(&p, &host, text, &err), GRPO_ERR_INVALID);
    /* a 1.0 host (no model services) is refused, not crashed on */
    grpo_host old = host;
    old.struct_size = (uint32_t)offsetof(grpo_host, model_ctx);
    const char *ok[] = {"model", model_dir("llama"), NULL};
    ck_assert_int_eq(plugin_create(&p, &old, ok, &err), GRPO_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "ABI 1.1"), "%s", err.message);
}
END_TEST

/* A classifier model serves hidden states only: the log-prob path says so. */
START_TEST(classifier_model_has_no_lm_path) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *ops = grpo_backend_open("cpu", 0, &err);
    ck_assert_ptr_nonnull(ops);
    grpo_host h = *grpo_default_host();
    h.ops = ops;
    grpo_model *m = NULL;
    ck_ok(grpo_model_open_dir(&m, &reg, &h, model_dir("qwen2"), 0, &err), &err);
    int32_t ids[2] = {5, 6}, mask[2] = {1, 1}, pos[2] = {0, 1}, tg[2] = {6, -1};
    float logp[2];
    ck_ok(grpo_model_reserve_acts(m, 1, 2, &err), &err);
    grpo_batch b = {sizeof b, 1, 2, ids, mask, pos, tg, 0.0f, 0};
    ck_assert_int_eq(grpo_model_forward(m, &b, logp, NULL, 1.0f, &err), GRPO_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "score.weight"), "%s", err.message);
    grpo_model_close(m);
    grpo_backend_close(ops);
}
END_TEST

/* A run hands a reward model its own environment: the model loads through the run's
 * --plugin-path (the test binary's default path holds no packs and GRPO_PLUGIN_PATH is unset, so
 * nothing else could serve it) on the run's backend (opened with train.threads); a host table
 * without a model context refuses model_load by name instead of falling back to a global one. */
START_TEST(a_run_hands_reward_models_its_environment) {
    unsetenv("GRPO_PLUGIN_PATH");
    char dir[] = "/tmp/grpo-rm-run-XXXXXX", ini[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(ini, sizeof ini, "%s/run.ini", dir);
    FILE *f = fopen(ini, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "[model]\npath = %s\n[train]\nthreads = 1\n"
            "[reward.rm]\nplugin = reward_model.score\nmodel = %s\n",
            model_dir("llama"), model_dir("llama"));
    fclose(f);
    grpo_error err;
    grpo_error_init(&err);
    grpo_run_args a = {.run_file = ini, .extra_plugin_dirs = {GRPO_PACK_BUILD_DIR}, .n_extra = 1};
    grpo_run r;
    ck_ok(grpo_run_open(&r, &a, &err), &err);
    ck_assert_ptr_eq(r.proc.host.model_ctx, r.proc.models);
    ck_assert_ptr_eq(grpo_host_models_ops(r.proc.models), r.proc.ops);
    grpo_reward_set rs = {0};
    ck_ok(grpo_reward_set_create(&rs, &r.cfg, &r.proc.reg, &r.proc.host, &err), &err);
    grpo_reward_set_free(&rs);
    ck_assert_int_ne(grpo_reward_set_create(&rs, &r.cfg, &r.proc.reg, grpo_default_host(), &err),
                     GRPO_OK);
    ck_assert_msg(strstr(err.message, "offers no model services"), "%s", err.message);
    grpo_reward_set_free(&rs);
    grpo_run_close(&r);
    unlink(ini);
    rmdir(dir);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("reward_model");
    TCase *tc = tcase_create("reward_model");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, host_services_match_transformers, 0, N_MODELS);
    tcase_add_loop_test(tc, padding_does_not_change_hidden_states, 0, N_MODELS);
    tcase_add_test(tc, internlm2_wqkv_relayout_round_trips);
    tcase_add_test(tc, internlm2_save_writes_the_packed_layout);
    tcase_add_loop_test(tc, plugin_matches_transformers, 0, N_MODELS);
    tcase_add_test(tc, plugin_parses_chatml_prompts);
    tcase_add_test(tc, plugin_refuses_what_it_cannot_score);
    tcase_add_test(tc, classifier_model_has_no_lm_path);
    tcase_add_test(tc, a_run_hands_reward_models_its_environment);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
