/*
 * test_lora.c — LoRA adapters (core/host/lora.c, the packs' set_lora, ABI 1.4) against peft.
 *
 * Fixtures: tests/fixtures/lora/{llama,qwen3}/ made by tools/make_lora_fixtures.py: peft's
 * save_pretrained() of random r = 4, alpha = 8, all-linear adapters (rsLoRA for qwen3) on the
 * dense fixtures; tests/fixtures/lora/minimind2/: adapters on q/v and on every routed and shared
 * expert's gate/up/down of the MoE fixture moe/minimind2 (routing unchanged); and
 * reference.safetensors with peft's float64 log-probs of the dense fixture's
 * batch, the gradient of every lora_A / lora_B for sum(w * logp), and merge_and_unload()'s
 * weights. Checked here, on a frozen base (no gradient block):
 *   - the adapters load from peft's own file and give peft's log-probs (1e-4, as test_dense);
 *   - every adapter gradient matches (per tensor 1e-4 of its max, as test_dense);
 *   - disabled, the model is the base again (the reference of a LoRA run): the dense fixture's
 *     log-probs, from the smaller forward-only activation block; enabled again, the adapted
 *     log-probs and the same gradients after a new reservation;
 *   - saved again, the file holds peft's names with the same values, and adapter_config.json
 *     says LORA, r, lora_alpha, use_rslora;
 *   - peft's adapter_config.json opens the directory, and merging gives merge_and_unload()'s
 *     weights (and the adapted log-probs with the adapters detached);
 *   - target_modules that match nothing, a file with a tensor for a module not adapted here,
 *     and a target the pack keeps in another layout (InternLM2's packed wqkv) are refused by
 *     name.
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/files.h"
#include "host/host.h"
#include "host/lora.h"
#include "host/model_instance.h"
#include "host/registry.h"
#include "io/safetensors.h"
#include "kernels.h"
#include "test_backend.h"
#include "test_model_io.h"
#include "tmpdir.h"

/* The fixtures: base model directory, adapter targets, adapters, modules named in the config. */
static const char *const names[] = {"llama", "qwen3", "minimind2"};
static const char *const bases[] = {"dense/llama", "dense/qwen3", "moe/minimind2"};
static const char *const targets[] = {"all-linear", "all-linear",
                                      "q_proj,v_proj,gate_proj,up_proj,down_proj"};
static const int rslora[] = {0, 1, 0};
static const uint32_t n_adapters[] = {14, 14, 34}; /* MoE: 4 experts + 1 shared, x3, + q, v */
static const int n_modules[] = {7, 7, 5};
#define N_FIXTURES 3

typedef struct fixture {
    grpo_ops *ops;
    grpo_host host;
    grpo_registry reg;
    grpo_model *m;
    grpo_lora lora;
    grpo_safetensors *dense, *ref;
    int32_t B, T;
    const int32_t *targets; /* (B,T) the batch's, host memory (the reference file's) */
    test_batch b;           /* the batch in backend memory: b.b is what the model takes */
    char dir[4096];
} fixture;

static void ck_ok(int rc, const grpo_error *err) {
    ck_assert_msg(rc == GRPO_OK, "status %d: %s", rc, err->message);
}

static const float *tensor(const grpo_safetensors *st, const char *name) {
    const grpo_st_tensor *t = grpo_st_find(st, name);
    ck_assert_msg(t != NULL, "reference tensor %s missing", name);
    return (const float *)t->data;
}

static grpo_lora_opts opts(int i, const char *targets) {
    return (grpo_lora_opts){4, 8.0, rslora[i], targets, 0.0};
}

static void fixture_open(fixture *f, int i) {
    grpo_error err;
    grpo_error_init(&err);
    memset(f, 0, sizeof *f);
    f->ops = test_backend_open(0, &err);
    ck_assert_msg(f->ops != NULL, "%s", err.message);
    f->host = *grpo_default_host();
    f->host.ops = f->ops;
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    ck_ok(grpo_registry_scan(&f->reg, dirs, &err), &err);
    char base[4096], path[4200];
    snprintf(base, sizeof base, "%s/tests/fixtures/%s", GRPO_SOURCE_DIR, bases[i]);
    snprintf(f->dir, sizeof f->dir, "%s/tests/fixtures/lora/%s", GRPO_SOURCE_DIR, names[i]);
    ck_ok(grpo_model_open_dir(&f->m, &f->reg, &f->host, base, 0, &err), &err); /* frozen */
    snprintf(path, sizeof path, "%s/reference.safetensors", base);
    ck_ok(grpo_st_open(&f->dense, path, &err), &err);
    snprintf(path, sizeof path, "%s/reference.safetensors", f->dir);
    ck_ok(grpo_st_open(&f->ref, path, &err), &err);
    const grpo_st_tensor *ids = grpo_st_find(f->dense, "ids");
    f->B = (int32_t)ids->shape[0], f->T = (int32_t)ids->shape[1];
    f->targets = (const int32_t *)grpo_st_find(f->dense, "targets")->data;
    f->b = test_batch_make(f->ops, f->B, f->T, (const int32_t *)ids->data,
                           (const int32_t *)grpo_st_find(f->dense, "mask")->data,
                           (const int32_t *)grpo_st_find(f->dense, "pos")->data, f->targets,
                           0.0f);
    grpo_lora_opts o = opts(i, targets[i]);
    ck_ok(grpo_lora_attach(&f->lora, f->m, &o, 1, &err), &err);
    ck_ok(grpo_lora_load(&f->lora, f->dir, &err), &err);
    ck_ok(grpo_model_reserve_acts(f->m, f->B, f->T, &err), &err);
}

static void fixture_close(fixture *f) {
    test_batch_free(&f->b);
    grpo_lora_free(&f->lora);
    grpo_st_close(f->dense), grpo_st_close(f->ref);
    grpo_model_close(f->m);
    grpo_registry_free(&f->reg);
    grpo_backend_close(f->ops);
}

/* max |logp - want| over the positions with a target */
static double logp_error(fixture *f, const float *want) {
    grpo_error err;
    grpo_error_init(&err);
    size_t n = (size_t)f->B * f->T;
    float *logp = calloc(n, sizeof(float));
    ck_ok(test_forward(f->m, &f->b.b, logp, NULL, 1.0f, &err), &err);
    double worst = 0;
    for (size_t k = 0; k < n; k++)
        if (f->targets[k] >= 0) worst = fmax(worst, fabs(logp[k] - want[k]));
    free(logp);
    return worst;
}

START_TEST(peft_adapters_give_peft_logp_and_gradients) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, _i);
    ck_assert_uint_eq(f.lora.n, n_adapters[_i]);
    double e = logp_error(&f, tensor(f.ref, "logp"));
    ck_assert_msg(e < 1e-4, "%s: max |logp - peft| = %g", names[_i], e);
    grpo_lora_zero_grad(&f.lora);
    ck_ok(test_backward(f.m, &f.b.b, tensor(f.dense, "dlogp"), 1.0f, &err), &err);
    size_t P = f.lora.floats;
    float *g = test_host_floats(f.ops, f.lora.block + P, P); /* the adapters' gradients */
    for (uint32_t i = 0; i < f.lora.n; i++) {
        char a[600], b[600];
        grpo_lora_names(&f.lora, i, a, b, sizeof a);
        const char *nm[2] = {a, b};
        const float *ours[2] = {g + (f.lora.ad[i].dA - (f.lora.block + P)),
                                g + (f.lora.ad[i].dB - (f.lora.block + P))};
        for (int k = 0; k < 2; k++) {
            char key[700];
            snprintf(key, sizeof key, "grad.%s", nm[k]);
            const grpo_st_tensor *t = grpo_st_find(f.ref, key);
            ck_assert_msg(t != NULL, "%s missing", key);
            const float *r = (const float *)t->data;
            double worst = 0, scale = 0;
            for (uint64_t j = 0; j < t->numel; j++) {
                worst = fmax(worst, fabs(ours[k][j] - r[j]));
                scale = fmax(scale, fabs(r[j]));
            }
            ck_assert_msg(scale > 0, "%s: %s is all zero", names[_i], key);
            ck_assert_msg(worst <= 1e-4 * scale + 1e-6, "%s: %s: max |diff| %g vs max %g",
                          names[_i], key, worst, scale);
        }
    }
    /* disabled: the base model, i.e. the dense fixture's log-probs, */
    ck_ok(grpo_lora_enable(&f.lora, 0, &err), &err);
    e = logp_error(&f, tensor(f.dense, "logp"));
    ck_assert_msg(e < 1e-4, "%s: adapters off: max |logp - base| = %g", names[_i], e);
    /* ... in the forward-only layout (lm_decoder.c frozen): a smaller block, reserved as such;
     * turning the adapters on drops that reservation (core/host/model_instance.c) */
    uint64_t off = f.m->desc->activation_floats(f.m->inst, f.B, f.T);
    ck_ok(grpo_model_reserve_acts(f.m, f.B, f.T, &err), &err);
    ck_assert_uint_eq(f.m->acts_bytes, off * sizeof(float));
    ck_ok(grpo_lora_enable(&f.lora, 1, &err), &err);
    ck_assert_uint_lt(off, f.m->desc->activation_floats(f.m->inst, f.B, f.T));
    ck_assert_uint_eq(f.m->acts_bytes, 0);
    size_t n = (size_t)f.B * f.T;
    float *logp = calloc(n, sizeof(float));
    ck_assert_int_eq(test_forward(f.m, &f.b.b, logp, NULL, 1.0f, &err), GRPO_ERR_INVALID);
    free(logp);
    ck_ok(grpo_model_reserve_acts(f.m, f.B, f.T, &err), &err);
    e = logp_error(&f, tensor(f.ref, "logp"));
    ck_assert_msg(e < 1e-4, "%s: adapters on again: max |logp - peft| = %g", names[_i], e);
    grpo_lora_zero_grad(&f.lora); /* backward again after the new reservation: the same bits */
    ck_ok(test_backward(f.m, &f.b.b, tensor(f.dense, "dlogp"), 1.0f, &err), &err);
    float *g2 = test_host_floats(f.ops, f.lora.block + P, P);
    ck_assert_msg(!memcmp(g, g2, P * sizeof(float)), "%s: gradients after re-enabling differ",
                  names[_i]);
    free(g), free(g2);
    fixture_close(&f);
}
END_TEST

START_TEST(saved_adapters_are_peft_files) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, _i);
    char tmp[256], path[4400];
    tmpdir_make(tmp, sizeof tmp, "lora");
    ck_ok(grpo_lora_save(&f.lora, tmp, "my/base", &err), &err);
    grpo_safetensors *mine, *theirs;
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", tmp);
    ck_ok(grpo_st_open(&mine, path, &err), &err);
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", f.dir);
    ck_ok(grpo_st_open(&theirs, path, &err), &err);
    ck_assert_uint_eq(grpo_st_count(mine), grpo_st_count(theirs));
    for (size_t k = 0; k < grpo_st_count(theirs); k++) {
        const grpo_st_tensor *t = grpo_st_at(theirs, k), *u = grpo_st_find(mine, t->name);
        ck_assert_msg(u != NULL, "saved file lacks %s", t->name);
        ck_assert_uint_eq(u->numel, t->numel);
        ck_assert_mem_eq(u->data, t->data, t->nbytes); /* fp32 both: the same bits */
    }
    grpo_st_close(mine), grpo_st_close(theirs);
    snprintf(path, sizeof path, "%s/adapter_config.json", tmp);
    char *text = NULL;
    size_t len;
    ck_ok(grpo_read_file(path, &text, &len, &err), &err);
    cJSON *c = cJSON_Parse(text);
    ck_assert_str_eq(cJSON_GetObjectItem(c, "peft_type")->valuestring, "LORA");
    ck_assert_str_eq(cJSON_GetObjectItem(c, "base_model_name_or_path")->valuestring, "my/base");
    ck_assert_int_eq(cJSON_GetObjectItem(c, "r")->valueint, 4);
    ck_assert(cJSON_GetObjectItem(c, "lora_alpha")->valuedouble == 8.0);
    ck_assert_int_eq(cJSON_IsTrue(cJSON_GetObjectItem(c, "use_rslora")), rslora[_i]);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(c, "target_modules")), n_modules[_i]);
    cJSON_Delete(c), free(text);
    tmpdir_remove(tmp);
    fixture_close(&f);
}
END_TEST

START_TEST(bad_targets_and_strange_tensors_are_refused) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, 0);
    grpo_lora l2;
    grpo_lora_opts o = opts(0, "nothing_proj");
    ck_assert_int_ne(grpo_lora_attach(&l2, f.m, &o, 1, &err), GRPO_OK);
    ck_assert_msg(strstr(err.message, "nothing_proj") != NULL, "%s", err.message);
    grpo_lora_free(&f.lora);
    o = opts(0, "q_proj,v_proj"); /* the file also adapts k, o, gate, up, down */
    ck_ok(grpo_lora_attach(&f.lora, f.m, &o, 1, &err), &err);
    ck_assert_uint_eq(f.lora.n, 4);
    ck_assert_int_ne(grpo_lora_load(&f.lora, f.dir, &err), GRPO_OK);
    ck_assert_msg(strstr(err.message, "lora_A") || strstr(err.message, "lora_B"), "%s",
                  err.message);
    /* InternLM2's packed wqkv is kept in another layout than its file: refused by name; its
     * other projections take adapters */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/reward_model/internlm2", GRPO_SOURCE_DIR);
    grpo_model *m2;
    ck_ok(grpo_model_open_dir(&m2, &f.reg, &f.host, dir, 0, &err), &err);
    o = opts(0, "all-linear");
    ck_assert_int_eq(grpo_lora_attach(&l2, m2, &o, 1, &err), GRPO_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "attention.wqkv.weight") != NULL, "%s", err.message);
    o = opts(0, "wo,w1,w2,w3");
    ck_ok(grpo_lora_attach(&l2, m2, &o, 1, &err), &err);
    ck_assert_uint_gt(l2.n, 0);
    grpo_lora_free(&l2);
    grpo_model_close(m2);
    fixture_close(&f);
}
END_TEST

/* grpo_lora_open_dir reads peft's adapter_config.json, and merging gives peft's
 * merge_and_unload() weights (1e-5: fp32 sums of r = 4 products) with the adapters detached:
 * the merged model alone gives the adapted log-probs. */
START_TEST(open_dir_and_merge_match_peft) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, _i);
    grpo_lora_free(&f.lora);
    ck_ok(grpo_lora_open_dir(&f.lora, f.m, f.dir, &err), &err);
    ck_assert_uint_eq(f.lora.n, n_adapters[_i]);
    ck_assert_int_eq(f.lora.use_rslora, rslora[_i]);
    double e = logp_error(&f, tensor(f.ref, "logp"));
    ck_assert_msg(e < 1e-4, "%s: open_dir: max |logp - peft| = %g", names[_i], e);
    uint32_t n = f.lora.n;
    uint32_t *params = malloc(n * sizeof *params);
    for (uint32_t i = 0; i < n; i++) params[i] = f.lora.ad[i].param;
    ck_ok(grpo_lora_merge(&f.lora, &err), &err);
    for (uint32_t i = 0; i < n; i++) {
        char key[600];
        snprintf(key, sizeof key, "merged.%s", f.m->params[params[i]].name);
        const grpo_st_tensor *t = grpo_st_find(f.ref, key);
        ck_assert_msg(t && t->numel == f.m->numel[params[i]], "%s missing or misshapen", key);
        double worst = 0;
        float *merged = test_host_floats(f.ops, f.m->param_ptr[params[i]], t->numel);
        for (uint64_t k = 0; k < t->numel; k++)
            worst = fmax(worst, fabs(merged[k] - ((const float *)t->data)[k]));
        free(merged);
        ck_assert_msg(worst < 1e-5, "%s: %s: max |merged - peft| = %g", names[_i], key, worst);
    }
    e = logp_error(&f, tensor(f.ref, "logp"));
    ck_assert_msg(e < 1e-4, "%s: merged: max |logp - peft| = %g", names[_i], e);
    free(params);
    fixture_close(&f);
}
END_TEST

/* The dropout op (grpo/ops.h 1.5): a fraction p of the elements zeroed, the others scaled by
 * 1 / (1 - p) exactly, the mask a function of (seed, index) alone (in place or not, any seed
 * gives its own), p = 0 the identity. */
START_TEST(dropout_op_keeps_1_minus_p_scaled) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *o = grpo_backend_open("cpu", 2, &err);
    ck_assert_msg(o != NULL, "%s", err.message);
    const uint64_t n = 1 << 20;
    const float p = 0.3f;
    float *x = malloc(n * 4), *y = malloc(n * 4), *z = malloc(n * 4);
    for (uint64_t i = 0; i < n; i++) x[i] = 1.0f + (float)(i % 97);
    o->dropout(o->ctx, y, x, n, p, 42);
    uint64_t kept = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (y[i] == 0.0f) continue;
        kept++;
        ck_assert_msg(y[i] == x[i] * (1.0f / (1.0f - p)), "element %llu: %g of %g",
                      (unsigned long long)i, y[i], x[i]);
        ck_assert(grpo_dropout_keeps(42, i, p));
    }
    /* binomial: 1 - p of n kept, sd sqrt(n p (1-p)) ~ 470; 5 sd */
    double want = (1.0 - p) * n, sd = sqrt(n * p * (1.0 - p));
    ck_assert_msg(fabs(kept - want) < 5 * sd, "kept %llu of %llu, expected %.0f",
                  (unsigned long long)kept, (unsigned long long)n, want);
    memcpy(z, x, n * 4);
    o->dropout(o->ctx, z, z, n, p, 42); /* in place: the same */
    ck_assert(memcmp(y, z, n * 4) == 0);
    o->dropout(o->ctx, z, x, n, p, 43); /* another seed: another mask */
    ck_assert(memcmp(y, z, n * 4) != 0);
    o->dropout(o->ctx, z, x, n, 0.0f, 42);
    ck_assert(memcmp(x, z, n * 4) == 0);
    free(x), free(y), free(z);
    grpo_backend_close(o);
}
END_TEST

/* sum(w * logp) of the fixture's batch, in double. */
static double weighted_logp(fixture *f, const float *w) {
    grpo_error err;
    grpo_error_init(&err);
    size_t n = (size_t)f->B * f->T;
    float *logp = calloc(n, sizeof(float));
    ck_ok(test_forward(f->m, &f->b.b, logp, NULL, 1.0f, &err), &err);
    double s = 0;
    for (size_t k = 0; k < n; k++)
        if (f->targets[k] >= 0) s += (double)w[k] * logp[k];
    free(logp);
    return s;
}

/* lora.dropout: with one seed (one mask) the adapters' gradients are the derivatives of that
 * pass's loss: central differences on elements of A and B of the first and the last layer
 * (the first layer's A sees the dropout's backward in every layer above it). The dropped pass
 * differs from the undropped one, and the same seed gives the same pass. */
START_TEST(dropout_gradients_are_the_derivatives_of_the_dropped_pass) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, _i);
    const float *w = tensor(f.dense, "dlogp");
    double plain = weighted_logp(&f, w);
    f.lora.dropout = 0.25;
    ck_ok(grpo_lora_dropout(&f.lora, 1, 1234, &err), &err);
    double dropped = weighted_logp(&f, w);
    ck_assert_msg(fabs(dropped - plain) > 1e-4, "dropout changed nothing: %g", dropped);
    ck_assert(weighted_logp(&f, w) == dropped); /* the mask is the seed's */
    grpo_lora_zero_grad(&f.lora);
    size_t n = (size_t)f.B * f.T;
    float *lp = calloc(n, sizeof(float));
    ck_ok(test_forward(f.m, &f.b.b, lp, NULL, 1.0f, &err), &err);
    ck_ok(test_backward(f.m, &f.b.b, w, 1.0f, &err), &err);
    free(lp);
    uint32_t which[2] = {0, f.lora.n - 1};
    int checked = 0;
    for (int k = 0; k < 2; k++) {
        const grpo_lora_adapter *a = &f.lora.ad[which[k]];
        float *params[2] = {a->A, a->B}, *grads[2] = {a->dA, a->dB};
        for (int t = 0; t < 2; t++)
            for (int e = 0; e < 3; e++) {
                size_t at = (size_t)e * 5 + 1; /* a few elements of each */
                float keep = test_get(f.ops, params[t] + at);
                const double h = 1e-2;
                test_set(f.ops, params[t] + at, keep + (float)h);
                double up = weighted_logp(&f, w);
                test_set(f.ops, params[t] + at, keep - (float)h);
                double down = weighted_logp(&f, w);
                test_set(f.ops, params[t] + at, keep);
                double fd = (up - down) / (2 * h), g = test_get(f.ops, grads[t] + at);
                ck_assert_msg(fabs(fd - g) <= 2e-3 + 2e-2 * fabs(fd),
                              "%s adapter %u %s[%zu]: analytic %.6g, finite differences %.6g",
                              names[_i], which[k], t ? "B" : "A", at, g, fd);
                checked += fabs(fd) > 1e-3;
            }
    }
    ck_assert_msg(checked >= 4, "only %d of the checked derivatives are away from 0", checked);
    ck_ok(grpo_lora_dropout(&f.lora, 0, 0, &err), &err);
    ck_assert(fabs(weighted_logp(&f, w) - plain) < 1e-9 * fabs(plain) + 1e-9); /* off again */
    fixture_close(&f);
}
END_TEST

Suite *lora_suite(void) {
    Suite *s = suite_create("lora");
    TCase *tc = tcase_create("peft");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, peft_adapters_give_peft_logp_and_gradients, 0, N_FIXTURES);
    tcase_add_loop_test(tc, saved_adapters_are_peft_files, 0, N_FIXTURES);
    tcase_add_loop_test(tc, open_dir_and_merge_match_peft, 0, 2); /* the MoE has no merged.* */
    tcase_add_test(tc, bad_targets_and_strange_tensors_are_refused);
    tcase_add_test(tc, dropout_op_keeps_1_minus_p_scaled);
    tcase_add_loop_test(tc, dropout_gradients_are_the_derivatives_of_the_dropped_pass, 0,
                        N_FIXTURES);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    test_backend_require();
    SRunner *sr = srunner_create(lora_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
