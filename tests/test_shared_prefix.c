/*
 * test_shared_prefix.c — prompts computed once per group in training passes (the packs'
 * set_shared_prefix, ABI 1.6; plugins/models/common/lm_prefix.h; the ops
 * prefix_attention_forward/backward).
 *
 * The same GRPO-shaped batch — 4 prompts of different lengths left-padded to P columns, 3, 3, 3
 * and 1 completions of different lengths right-padded after them — runs with every row in full
 * (set_shared_prefix 0) and with the prompts shared (P); log-probs, entropies and every
 * parameter gradient (the model's, or the LoRA adapters' on a frozen base) must agree, on the
 * dense fixtures (llama: plain; qwen3: q/k norm, tied head), with gradient checkpointing, and
 * through backward_entropy. A counting op table shows the shared path really ran. Where the
 * pack cannot share (a backend without the 1.6 ops, the MoE pack, LoRA dropout) the results
 * must be those of the plain path bit for bit. The cuda backend's prefix ops in the whole model
 * are the case tagged "cuda_emu": `test_shared_prefix --emulated-cuda`, ctest
 * test_shared_prefix_emu (tests/cuda.cmake: the host emulation in its strict mode; a skip where it
 * cannot open, a failure under CI: tests/test_skip.h).
 *
 * Tolerance. The shared path forms the same sums in another order: a prompt token's weight
 * gradient sums its G rows' output gradients before the product with its input, a completion
 * query's softmax runs over two key segments (two GEMMs), and the GEMMs see other row counts.
 * Each is a reordering of fp32 sums of at most a few hundred terms here, so the results differ
 * by a few hundred ulps of the largest terms at most: |a - b| <= 1e-4 |b| + 1e-5 max|b| over
 * the tensor (a gradient's largest entries set the scale of its sums), log-probs and entropies
 * to 1e-5 absolute + 1e-5 relative. (Measured: gradients within 2.3e-6 of their largest entry,
 * log-probs and entropies within 2.4e-7 relative; a 0.1 % error in the prefix keys' gradient
 * fails every case.)
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
#include "kernels.h"
#include "test_model_io.h"
#include "test_skip.h"

enum { NP = 4, P = 9, TC = 7, T = P + TC };
static const int32_t plen[NP] = {9, 5, 7, 3};  /* prompt lengths (left-padded to P) */
static const int32_t group[NP] = {3, 3, 3, 1}; /* completions per prompt */
static const int32_t clen[10] = {7, 4, 1, 6, 7, 2, 5, 3, 7, 4}; /* completion lengths */
#define B 10

static int prefix_calls; /* prefix_attention_forward calls through the counting table */
static void (*real_prefix_forward)(void *, float *, float *, const float *, const float *,
                                   const float *, const int32_t *, const float *, const float *,
                                   const int32_t *, const int32_t *, int32_t, int32_t, int32_t,
                                   int32_t, int32_t, int32_t, int32_t);

static void counting_prefix_forward(void *ctx, float *out, float *lse, const float *q,
                                    const float *k, const float *v, const int32_t *mask,
                                    const float *kp, const float *vp, const int32_t *pmask,
                                    const int32_t *prefix_of, int32_t b, int32_t t, int32_t bp,
                                    int32_t p, int32_t nh, int32_t nkv, int32_t hd) {
    prefix_calls++;
    real_prefix_forward(ctx, out, lse, q, k, v, mask, kp, vp, pmask, prefix_of, b, t, bp, p, nh,
                        nkv, hd);
}

typedef struct fixture {
    grpo_ops *ops;  /* the cpu backend's table */
    grpo_ops table; /* what the model uses: a copy, counting or stripped */
    grpo_host host;
    grpo_registry reg;
    grpo_model *m;
    grpo_lora lora;
    int32_t ids[B * T], mask[B * T], pos[B * T], targets[B * T];
    test_batch b; /* the same in backend memory: b.b is what the model takes */
    float dlogp[B * T], dentropy[B * T];
} fixture;

static void ck_ok(int rc, const grpo_error *err) {
    ck_assert_msg(rc == GRPO_OK, "status %d: %s", rc, err->message);
}

/* Prompt j's tokens then completion i's, as the trainer lays them out (seqbatch.c). */
static void make_batch(fixture *f, int32_t V) {
    uint32_t s = 12345;
    int32_t prompt[NP][P];
    for (int32_t j = 0; j < NP; j++)
        for (int32_t c = 0; c < P; c++) prompt[j][c] = (int32_t)((s = s * 1103515245u + 12345u) >> 8) % (V - 1) + 1;
    for (int32_t j = 0, r = 0; j < NP; j++)
        for (int32_t g = 0; g < group[j]; g++, r++) {
            int32_t *ids = f->ids + r * T, *mask = f->mask + r * T, *tg = f->targets + r * T;
            for (int32_t c = 0; c < T; c++) {
                int real = c < P ? c >= P - plen[j] : c - P < clen[r];
                ids[c] = !real ? 0
                         : c < P ? prompt[j][c]
                                 : (int32_t)((s = s * 1103515245u + 12345u) >> 8) % (V - 1) + 1;
                mask[c] = real;
                tg[c] = -1;
            }
            for (int32_t c = P; c < T; c++)
                if (mask[c]) tg[c - 1] = ids[c];
            for (int32_t c = 0, n = 0; c < T; c++) f->pos[r * T + c] = mask[c] ? n++ : 0;
        }
    for (int32_t i = 0; i < B * T; i++) { /* any fixed weights of both signs */
        f->dlogp[i] = f->targets[i] >= 0 ? (float)sin(0.7 * i + 0.3) : 0.0f;
        f->dentropy[i] = f->targets[i] >= 0 ? (float)cos(1.3 * i) : 0.0f;
    }
    f->b = test_batch_make(&f->table, B, T, f->ids, f->mask, f->pos, f->targets, 0.5f);
}

/* Opens tests/fixtures/BASE (trainable, or frozen for LoRA) on a copy of BACKEND's table:
 * counting (strip = 0) or without the 1.6 ops (strip = 1: NULL, as in a backend that does not
 * implement them yet; a table older than the pack is refused before any pass). */
static void fixture_open_on(fixture *f, const char *backend, const char *base, int trainable,
                           int strip) {
    grpo_error err;
    grpo_error_init(&err);
    memset(f, 0, sizeof *f);
    f->ops = grpo_backend_open(backend, 0, &err);
    ck_assert_msg(f->ops != NULL, "%s", err.message);
    f->table = *f->ops;
    real_prefix_forward = f->ops->prefix_attention_forward;
    f->table.prefix_attention_forward = counting_prefix_forward;
    if (strip) f->table.prefix_attention_forward = NULL, f->table.prefix_attention_backward = NULL;
    f->host = *grpo_default_host();
    f->host.ops = &f->table;
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    ck_ok(grpo_registry_scan(&f->reg, dirs, &err), &err);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/%s", GRPO_SOURCE_DIR, base);
    ck_ok(grpo_model_open_dir(&f->m, &f->reg, &f->host, dir, trainable, &err), &err);
    make_batch(f, f->m->desc->vocab_size(f->m->inst));
}

static void fixture_open(fixture *f, const char *base, int trainable, int strip) {
    fixture_open_on(f, "cpu", base, trainable, strip);
}

static void fixture_close(fixture *f) {
    test_batch_free(&f->b);
    grpo_lora_free(&f->lora);
    grpo_model_close(f->m);
    grpo_registry_free(&f->reg);
    grpo_backend_close(f->ops);
}

typedef struct pass {
    float logp[B * T], ent[B * T];
    float *grads;
    size_t n_grads;
    int prefix_calls;
} pass;

/* forward + backward (entropy: backward_entropy) with the prompts shared (P) or not (0). */
static pass *run_pass(fixture *f, int32_t share, int entropy) {
    grpo_error err;
    grpo_error_init(&err);
    pass *p = calloc(1, sizeof *p);
    prefix_calls = 0;
    ck_ok(grpo_model_reserve_acts(f->m, B, T, &err), &err);
    ck_ok(grpo_model_set_shared_prefix(f->m, share, &err), &err);
    if (f->lora.n) grpo_lora_zero_grad(&f->lora);
    else grpo_model_zero_grad(f->m);
    ck_ok(test_forward(f->m, &f->b.b, p->logp, p->ent, 1.0f, &err), &err);
    ck_ok(test_backward_entropy(f->m, &f->b.b, f->dlogp, entropy ? f->dentropy : NULL, p->ent,
                                1.0f, &err), &err);
    const float *g = f->lora.n ? f->lora.block + f->lora.floats : f->m->grads; /* backend's */
    p->n_grads = f->lora.n ? f->lora.floats : f->m->section;
    p->grads = malloc(p->n_grads * sizeof(float));
    f->ops->sync(f->ops->ctx);
    f->ops->download(f->ops->ctx, p->grads, g, p->n_grads * sizeof(float));
    p->prefix_calls = prefix_calls;
    return p;
}

static void pass_free(pass *p) { free(p->grads), free(p); }

static void close_to(const char *model, const char *what, const float *got, const float *want,
                     size_t n, double atol, double rtol, double scale_tol) {
    double mx = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(want[i]));
    ck_assert_msg(mx > 0, "%s: %s all zero: the comparison would prove nothing", model, what);
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        ck_assert_msg(d <= atol + rtol * fabs(want[i]) + scale_tol * mx,
                      "%s: %s[%zu] shared %.9g, in full %.9g", model, what, i, (double)got[i],
                      (double)want[i]);
    }
}

/* Shared against in full: the tolerances of the header; the shared run used prefix attention. */
static void compare(fixture *f, const char *model, int entropy) {
    pass *full = run_pass(f, 0, entropy), *shared = run_pass(f, P, entropy);
    ck_assert_int_eq(full->prefix_calls, 0);
    ck_assert_msg(shared->prefix_calls > 0, "%s: the shared run did not share", model);
    close_to(model, "logp", shared->logp, full->logp, B * T, 1e-5, 1e-5, 0);
    close_to(model, "entropy", shared->ent, full->ent, B * T, 1e-5, 1e-5, 0);
    ck_assert_uint_eq(shared->n_grads, full->n_grads);
    close_to(model, "gradient", shared->grads, full->grads, full->n_grads, 0, 1e-4, 1e-5);
    pass_free(full), pass_free(shared);
}

/* Where the pack cannot share, P changes nothing: the same bits as in full. */
static void same_as_full(fixture *f, const char *model) {
    pass *full = run_pass(f, 0, 0), *asked = run_pass(f, P, 0);
    ck_assert_int_eq(asked->prefix_calls, 0);
    ck_assert_mem_eq(asked->logp, full->logp, sizeof full->logp);
    ck_assert_mem_eq(asked->ent, full->ent, sizeof full->ent);
    ck_assert_uint_eq(asked->n_grads, full->n_grads);
    ck_assert_msg(memcmp(asked->grads, full->grads, full->n_grads * sizeof(float)) == 0,
                  "%s: gradients differ where nothing may be shared", model);
    pass_free(full), pass_free(asked);
}

static const char *const dense[] = {"dense/llama", "dense/qwen3"};

/* A frozen model (the reference) that runs a batch in row chunks (model_instance.h) ends each
 * chunk where a prompt ends: 3 prompts of 4 rows of 64 tokens, a block of 6 rows, give chunks
 * of 4, 4, 4 (each prompt's prefix computed once; 6 + 6 would split the second prompt), with the
 * log-probs and entropies of one chunk of all 12 rows, bit for bit. */
START_TEST(frozen_chunks_end_where_prompts_do) {
    enum { NQ = 3, GQ = 4, BQ = NQ * GQ, PQ = 40, TQ = 64 };
    fixture f;
    fixture_open(&f, "dense/llama", 0, 0);
    grpo_error err;
    grpo_error_init(&err);
    int32_t V = f.m->desc->vocab_size(f.m->inst);
    static int32_t ids[BQ * TQ], mask[BQ * TQ], pos[BQ * TQ], tg[BQ * TQ];
    uint32_t s = 777;
    for (int32_t r = 0; r < BQ; r++)
        for (int32_t c = 0; c < TQ; c++) {
            int32_t i = r * TQ + c;
            if (c < PQ && r % GQ) ids[i] = ids[i - TQ]; /* the group's prompt */
            else ids[i] = (int32_t)((s = s * 1103515245u + 12345u) >> 8) % (V - 1) + 1;
            mask[i] = 1, pos[i] = c, tg[i] = c >= PQ - 1 && c + 1 < TQ ? ids[i + 1] : -1;
        }
    test_batch b = test_batch_make(&f.table, BQ, TQ, ids, mask, pos, tg, 0.0f);
    static float l6[BQ * TQ], e6[BQ * TQ], l12[BQ * TQ], e12[BQ * TQ];
    ck_ok(grpo_model_set_shared_prefix(f.m, PQ, &err), &err);
    f.m->fwd_budget = f.m->desc->activation_floats(f.m->inst, 6, TQ) * sizeof(float);
    ck_ok(grpo_model_reserve_acts(f.m, BQ, TQ, &err), &err);
    ck_assert_int_eq(f.m->acts_B, 6);
    ck_ok(test_forward(f.m, &b.b, l6, e6, 1.0f, &err), &err);
    ck_assert_int_eq(f.m->fwd_chunks, 3);
    f.m->fwd_budget = UINT64_MAX;
    ck_ok(grpo_model_reserve_acts(f.m, BQ, TQ, &err), &err);
    ck_assert_int_eq(f.m->acts_B, BQ);
    ck_ok(test_forward(f.m, &b.b, l12, e12, 1.0f, &err), &err);
    ck_assert_int_eq(f.m->fwd_chunks, 1);
    int real = 0;
    for (int32_t i = 0; i < BQ * TQ; i++) real += tg[i] >= 0 && l12[i] != 0.0f;
    ck_assert_int_gt(real, BQ * (TQ - PQ) / 2);
    ck_assert_msg(!memcmp(l6, l12, sizeof l6) && !memcmp(e6, e12, sizeof e6),
                  "chunks of 4 rows against one of 12: log-probs or entropies differ");
    test_batch_free(&b);
    fixture_close(&f);
}
END_TEST

START_TEST(shared_prompts_give_the_same_logprobs_and_gradients) {
    fixture f;
    fixture_open(&f, dense[_i], 1, 0);
    compare(&f, dense[_i], 0);
    compare(&f, dense[_i], 1); /* backward_entropy */
    fixture_close(&f);
}
END_TEST

START_TEST(shared_prompts_with_gradient_checkpointing) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, dense[_i], 1, 0);
    ck_ok(grpo_model_set_gradient_checkpointing(f.m, 1, &err), &err);
    compare(&f, dense[_i], 0);
    fixture_close(&f);
}
END_TEST

START_TEST(shared_prompts_with_lora_adapters) {
    static const char *const names[] = {"llama", "qwen3"};
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, dense[_i], 0, 0); /* a frozen base: only the adapters train */
    grpo_lora_opts o = {4, 8.0, _i == 1, "all-linear", 0.0};
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/lora/%s", GRPO_SOURCE_DIR, names[_i]);
    ck_ok(grpo_lora_attach(&f.lora, f.m, &o, 1, &err), &err);
    ck_ok(grpo_lora_load(&f.lora, dir, &err), &err); /* peft's adapters: B != 0 */
    compare(&f, names[_i], 0);
    /* lora_dropout draws a mask per token: shared prompt tokens would share draws, so the
     * pack runs every row in full */
    f.lora.dropout = 0.2;
    ck_ok(grpo_lora_dropout(&f.lora, 1, 77, &err), &err);
    same_as_full(&f, names[_i]);
    fixture_close(&f);
}
END_TEST

/* The cuda backend's prefix ops (kernels/cuda/attention.cu) in the whole model, under the host
 * emulation (no GPU needed; its op-level parity is tests/test_cuda_prefix_attention.c); main
 * checked that it opens. */
START_TEST(shared_prompts_on_the_emulated_cuda_backend) {
    fixture f;
    fixture_open_on(&f, "cuda", dense[_i], 1, 0);
    compare(&f, dense[_i], 0);
    fixture_close(&f);
}
END_TEST

START_TEST(a_backend_without_prefix_attention_runs_every_row) {
    fixture f;
    fixture_open(&f, "dense/llama", 1, 1);
    same_as_full(&f, "llama on a backend without prefix attention");
    fixture_close(&f);
}
END_TEST

START_TEST(the_moe_pack_runs_every_row) {
    /* its router's aux loss and expert load count every row's tokens */
    fixture f;
    fixture_open(&f, "moe/minimind2", 1, 0);
    same_as_full(&f, "minimind2");
    fixture_close(&f);
}
END_TEST

START_TEST(a_pack_without_the_slot_is_left_alone) {
    grpo_model_desc d = {.struct_size = (uint32_t)offsetof(grpo_model_desc, set_shared_prefix),
                         .id = "old.lm"};
    grpo_model m = {.desc = &d};
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_model_set_shared_prefix(&m, P, &err), GRPO_OK);
}
END_TEST

/* "--emulated-cuda": the cases tagged cuda_emu only, after the emulated backend opened (skip or
 * fail without it); no argument: every other case. */
static const char *emulated_cuda_only(int argc, char **argv) {
    if (argc < 2) return NULL;
    if (argc != 2 || strcmp(argv[1], "--emulated-cuda") != 0) {
        fprintf(stderr, "usage: %s [--emulated-cuda]\n", argv[0]);
        exit(2);
    }
    const char *emu = getenv("GRPO_CUDA_EMULATION");
    if (!emu || strcmp(emu, "1") != 0) {
        fprintf(stderr, "%s --emulated-cuda: GRPO_CUDA_EMULATION=1 is not set\n", argv[0]);
        exit(2);
    }
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *o = grpo_backend_open("cuda", 0, &err);
    if (!o) {
        char what[1200];
        snprintf(what, sizeof what, "cuda backend (emulation) not available here: %s",
                 err.message);
        test_skip_or_fail(what);
    }
    grpo_backend_close(o);
    return "cuda_emu";
}

int main(int argc, char **argv) {
    const char *only = emulated_cuda_only(argc, argv);
    Suite *s = suite_create("shared_prefix");
    TCase *tc = tcase_create("shared_prefix");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, shared_prompts_give_the_same_logprobs_and_gradients, 0, 2);
    tcase_add_loop_test(tc, shared_prompts_with_gradient_checkpointing, 0, 2);
    tcase_add_loop_test(tc, shared_prompts_with_lora_adapters, 0, 2);
    tcase_add_test(tc, frozen_chunks_end_where_prompts_do);
    tcase_add_test(tc, a_backend_without_prefix_attention_runs_every_row);
    tcase_add_test(tc, the_moe_pack_runs_every_row);
    tcase_add_test(tc, a_pack_without_the_slot_is_left_alone);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("cuda_emu");
    tcase_set_tags(te, "cuda_emu");
    tcase_set_timeout(te, 600);
    tcase_add_loop_test(te, shared_prompts_on_the_emulated_cuda_backend, 0, 2);
    suite_add_tcase(s, te);
    SRunner *sr = srunner_create(s);
    srunner_run_tagged(sr, NULL, NULL, only, only ? NULL : "cuda_emu", CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
