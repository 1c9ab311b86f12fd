/*
 * test_recompute.c — activation recomputation (train.gradient_checkpointing; the packs'
 * set_gradient_checkpointing, ABI 1.5; plugins/models/common/lm_decoder.c).
 *
 * With it on, forward() keeps only each layer's input and backward() recomputes one layer's
 * activations at a time with the same op calls as the forward, so everything must come out bit
 * for bit as without it (memcmp, no tolerance): the log-probs and entropies of forward(), every
 * parameter gradient of backward() and backward_entropy(), on the dense fixtures (llama: plain;
 * qwen3: q/k norm, tied head) and the MoE fixtures (minimind2, qwen3moe: router, experts, the
 * aux-loss gradient through grpo_batch.aux_weight, and the router's aux loss and expert load,
 * which the recomputed layers must not count twice), and every LoRA adapter gradient on a
 * frozen base (llama, qwen3, minimind2 with peft's adapters of tests/fixtures/lora). The
 * activation block must be smaller with it on, and a pack without the slot is refused by name
 * when it is asked for (and not when it is not).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/host.h"
#include "host/lora.h"
#include "host/model_instance.h"
#include "host/registry.h"
#include "io/safetensors.h"
#include "kernels.h"

static const char *const models[] = {"dense/llama", "dense/qwen3", "moe/minimind2",
                                     "moe/qwen3moe"};
#define N_MODELS 4
/* LoRA fixtures (tests/fixtures/lora/NAME on base) and their peft target modules. */
static const char *const lora_names[] = {"llama", "qwen3", "minimind2"};
static const char *const lora_bases[] = {"dense/llama", "dense/qwen3", "moe/minimind2"};
static const char *const lora_targets[] = {"all-linear", "all-linear",
                                           "q_proj,v_proj,gate_proj,up_proj,down_proj"};
static const int lora_rslora[] = {0, 1, 0};
#define N_LORA 3

typedef struct fixture {
    grpo_ops *ops;
    grpo_host host;
    grpo_registry reg;
    grpo_model *m;
    grpo_lora lora;
    grpo_safetensors *ref;
    grpo_batch b;
    size_t n;                    /* B*T */
    float *dlogp, *dentropy;     /* (B,T) fixed loss weights */
} fixture;

static void ck_ok(int rc, const grpo_error *err) {
    ck_assert_msg(rc == GRPO_OK, "status %d: %s", rc, err->message);
}

static const void *ref_data(const fixture *f, const char *name) {
    const grpo_st_tensor *t = grpo_st_find(f->ref, name);
    ck_assert_msg(t != NULL, "reference tensor %s missing", name);
    return t->data;
}

/* Opens tests/fixtures/BASE (trainable, or frozen for LoRA) and its reference batch. */
static void fixture_open(fixture *f, const char *base, int trainable) {
    grpo_error err;
    grpo_error_init(&err);
    memset(f, 0, sizeof *f);
    f->ops = grpo_backend_open("cpu", 0, &err);
    ck_assert_msg(f->ops != NULL, "%s", err.message);
    f->host = *grpo_default_host();
    f->host.ops = f->ops;
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    ck_ok(grpo_registry_scan(&f->reg, dirs, &err), &err);
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/%s", GRPO_SOURCE_DIR, base);
    ck_ok(grpo_model_open_dir(&f->m, &f->reg, &f->host, dir, trainable, &err), &err);
    snprintf(path, sizeof path, "%s/reference.safetensors", dir);
    ck_ok(grpo_st_open(&f->ref, path, &err), &err);
    const grpo_st_tensor *ids = grpo_st_find(f->ref, "ids");
    ck_assert(ids != NULL);
    int32_t B = (int32_t)ids->shape[0], T = (int32_t)ids->shape[1];
    /* aux_weight 0.5: the MoE router's aux-loss gradient is part of what is compared */
    f->b = (grpo_batch){sizeof(grpo_batch), B, T, ref_data(f, "ids"), ref_data(f, "mask"),
                        ref_data(f, "pos"), ref_data(f, "targets"), 0.5f, 0};
    f->n = (size_t)B * T;
    f->dlogp = malloc(f->n * sizeof(float)), f->dentropy = malloc(f->n * sizeof(float));
    for (size_t i = 0; i < f->n; i++) { /* any fixed weights of both signs */
        f->dlogp[i] = (float)sin(0.7 * (double)i + 0.3);
        f->dentropy[i] = (float)cos(1.3 * (double)i);
    }
}

static void fixture_close(fixture *f) {
    grpo_lora_free(&f->lora);
    grpo_st_close(f->ref);
    grpo_model_close(f->m);
    grpo_registry_free(&f->reg);
    grpo_backend_close(f->ops);
    free(f->dlogp), free(f->dentropy);
}

/* What one training pass produces: forward's log-probs and entropies, the gradients (the
 * model's or the adapters'), and a MoE model's aux loss and expert load. */
typedef struct pass {
    float *logp, *ent, *grads, *load;
    size_t n_grads, n_load;
    float aux;
} pass;

static void pass_free(pass *p) { free(p->logp), free(p->ent), free(p->grads), free(p->load); }

/* forward + backward (entropy: backward_entropy) with recomputation on or off. */
static pass run_pass(fixture *f, int recompute, int entropy) {
    grpo_error err;
    grpo_error_init(&err);
    pass p = {calloc(f->n, sizeof(float)), calloc(f->n, sizeof(float)), NULL, NULL, 0, 0, 0};
    ck_ok(grpo_model_set_gradient_checkpointing(f->m, recompute, &err), &err);
    ck_ok(grpo_model_reserve_acts(f->m, f->b.B, f->b.T, &err), &err);
    if (f->lora.n) grpo_lora_zero_grad(&f->lora);
    else grpo_model_zero_grad(f->m);
    ck_ok(grpo_model_forward(f->m, &f->b, p.logp, p.ent, 1.0f, &err), &err);
    if (entropy)
        ck_ok(grpo_model_backward_entropy(f->m, &f->b, f->dlogp, f->dentropy, p.ent, 1.0f, &err),
              &err);
    else
        ck_ok(grpo_model_backward(f->m, &f->b, f->dlogp, 1.0f, &err), &err);
    /* cpu backend: the blocks are host memory */
    const float *g = f->lora.n ? f->lora.block + f->lora.floats : f->m->grads;
    p.n_grads = f->lora.n ? f->lora.floats : f->m->section;
    p.grads = malloc(p.n_grads * sizeof(float));
    memcpy(p.grads, g, p.n_grads * sizeof(float));
    const grpo_model_desc *d = f->m->desc;
    if (d->aux_loss) p.aux = d->aux_loss(f->m->inst);
    if (d->expert_load) {
        int32_t L = 0, E = 0;
        const float *load = d->expert_load(f->m->inst, &L, &E);
        ck_assert(load != NULL && L > 0 && E > 0);
        p.n_load = (size_t)L * E;
        p.load = malloc(p.n_load * sizeof(float));
        memcpy(p.load, load, p.n_load * sizeof(float));
    }
    return p;
}

/* Bit for bit: the same floats, compared as bytes. */
static void same_bits(const char *model, const char *what, const float *a, const float *b,
                      size_t n) {
    size_t i = 0;
    while (i < n && memcmp(a + i, b + i, sizeof(float)) == 0) i++;
    ck_assert_msg(i == n, "%s: %s[%zu] differs with recomputation: %.9g vs %.9g", model, what, i,
                  i < n ? a[i] : 0.0f, i < n ? b[i] : 0.0f);
}

static void same_pass(const char *model, const pass *off, const pass *on, size_t n) {
    same_bits(model, "logp", off->logp, on->logp, n);
    same_bits(model, "entropy", off->ent, on->ent, n);
    ck_assert_uint_eq(off->n_grads, on->n_grads);
    same_bits(model, "gradient", off->grads, on->grads, off->n_grads);
    double gmax = 0;
    for (size_t i = 0; i < off->n_grads; i++) gmax = fmax(gmax, fabs(off->grads[i]));
    ck_assert_msg(gmax > 0, "%s: all gradients zero: the comparison would prove nothing", model);
    same_bits(model, "aux loss", &off->aux, &on->aux, 1);
    ck_assert_uint_eq(off->n_load, on->n_load);
    if (off->n_load) same_bits(model, "expert load", off->load, on->load, off->n_load);
}

/* Recomputation on and off, twice each way round (on after off and off after on). */
static void compare(fixture *f, const char *model, int entropy) {
    pass off = run_pass(f, 0, entropy), on = run_pass(f, 1, entropy);
    same_pass(model, &off, &on, f->n);
    pass off2 = run_pass(f, 0, entropy); /* switching back restores the full layout */
    same_pass(model, &off, &off2, f->n);
    pass_free(&off), pass_free(&on), pass_free(&off2);
}

START_TEST(recomputation_gives_the_same_gradients) {
    fixture f;
    fixture_open(&f, models[_i], 1);
    compare(&f, models[_i], 0);
    fixture_close(&f);
}
END_TEST

START_TEST(recomputation_gives_the_same_entropy_gradients) {
    fixture f;
    fixture_open(&f, models[_i], 1);
    ck_assert(grpo_model_has_entropy_backward(f.m));
    compare(&f, models[_i], 1);
    fixture_close(&f);
}
END_TEST

START_TEST(recomputation_gives_the_same_lora_gradients) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, lora_bases[_i], 0); /* a frozen base: only the adapters train */
    grpo_lora_opts o = {4, 8.0, lora_rslora[_i], lora_targets[_i], 0.0};
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/lora/%s", GRPO_SOURCE_DIR, lora_names[_i]);
    ck_ok(grpo_lora_attach(&f.lora, f.m, &o, 1, &err), &err);
    ck_ok(grpo_lora_load(&f.lora, dir, &err), &err); /* peft's adapters: B != 0 */
    ck_assert_ptr_null(f.m->grads);
    compare(&f, lora_names[_i], 0);
    compare(&f, lora_names[_i], 1);
    /* with lora.dropout: the recomputed layers redraw the forward's masks from its seed */
    f.lora.dropout = 0.2;
    ck_ok(grpo_lora_dropout(&f.lora, 1, 77, &err), &err);
    compare(&f, lora_names[_i], 0);
    fixture_close(&f);
}
END_TEST

/* The point of it: the activation block shrinks (per layer only its (N,C) input is kept). */
START_TEST(recomputation_shrinks_the_activation_block) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, models[_i], 1);
    const grpo_model_desc *d = f.m->desc;
    int32_t B = 4, T = 64;
    uint64_t full = d->activation_floats(f.m->inst, B, T);
    ck_ok(grpo_model_set_gradient_checkpointing(f.m, 1, &err), &err);
    uint64_t kept = d->activation_floats(f.m->inst, B, T);
    ck_assert_msg(kept < full, "%s: %llu floats with recomputation, %llu without", models[_i],
                  (unsigned long long)kept, (unsigned long long)full);
    ck_ok(grpo_model_set_gradient_checkpointing(f.m, 0, &err), &err);
    ck_assert_uint_eq(d->activation_floats(f.m->inst, B, T), full);
    fixture_close(&f);
}
END_TEST

/* A backward needs the forward of the same layout: switching in between is refused. */
START_TEST(switching_between_forward_and_backward_is_refused) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, "dense/llama", 1);
    ck_ok(grpo_model_reserve_acts(f.m, f.b.B, f.b.T, &err), &err);
    float *logp = calloc(f.n, sizeof(float));
    ck_ok(grpo_model_forward(f.m, &f.b, logp, NULL, 1.0f, &err), &err);
    ck_ok(grpo_model_set_gradient_checkpointing(f.m, 1, &err), &err);
    ck_ok(grpo_model_reserve_acts(f.m, f.b.B, f.b.T, &err), &err);
    ck_assert_int_ne(grpo_model_backward(f.m, &f.b, f.dlogp, 1.0f, &err), GRPO_OK);
    ck_assert_msg(strstr(err.message, "must follow the forward"), "%s", err.message);
    free(logp);
    fixture_close(&f);
}
END_TEST

/* A pack built before ABI 1.5 has no slot: asking for recomputation names the pack and the
 * key; not asking for it is fine. */
START_TEST(a_pack_without_the_slot_is_refused_by_name) {
    grpo_model_desc d = {.struct_size = (uint32_t)offsetof(grpo_model_desc,
                                                           set_gradient_checkpointing),
                         .id = "old.lm"};
    grpo_model m = {.desc = &d};
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_model_set_gradient_checkpointing(&m, 0, &err), GRPO_OK);
    ck_assert_int_eq(grpo_model_set_gradient_checkpointing(&m, 1, &err), GRPO_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "old.lm") &&
                      strstr(err.message, "train.gradient_checkpointing"),
                  "%s", err.message);
}
END_TEST

int main(void) {
    Suite *s = suite_create("recompute");
    TCase *tc = tcase_create("recompute");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, recomputation_gives_the_same_gradients, 0, N_MODELS);
    tcase_add_loop_test(tc, recomputation_gives_the_same_entropy_gradients, 0, N_MODELS);
    tcase_add_loop_test(tc, recomputation_gives_the_same_lora_gradients, 0, N_LORA);
    tcase_add_loop_test(tc, recomputation_shrinks_the_activation_block, 0, N_MODELS);
    tcase_add_test(tc, switching_between_forward_and_backward_is_refused);
    tcase_add_test(tc, a_pack_without_the_slot_is_refused_by_name);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
