/*
 * test_optimizer.c — core/train/optimizer.c against torch.optim.AdamW + clip_grad_norm_ + transformers'
 * cosine schedule with warmup (tests/fixtures/optimizer/adamw.safetensors, made by
 * tools/make_optimizer_fixtures.py): two parameter groups (weight decay on w1, w2; none on b),
 * 3 steps of 2 accumulated micro-batch gradients, one step clipped hard.
 *
 * Tolerances: parameters 2e-6 absolute + 2e-6 relative — the same fp32 operations in the same
 * order as torch's single-tensor AdamW; only the clip coefficient (double here, fp32 in torch)
 * and summation order of the norm differ, ~1e-7 relative. grad_norm 1e-5 relative (torch sums
 * in fp32). lr 1e-7 relative (torch's LambdaLR multiplies in double, stored here as fp32).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "train/optimizer.h"
#include "io/safetensors.h"
#include "io/testing.h"
#include "train/testing.h"

static const char *const names[] = {"w1", "w2", "b"};
#define NT 3

/* A fixture tensor copied into buf (the mapping may be unaligned); numel in *n. */
static const float *tensor(grpo_safetensors *st, const char *name, uint64_t *n) {
    static float buf[4][64];
    static int next;
    const grpo_st_tensor *t = grpo_st_find(st, name);
    ck_assert_msg(t != NULL && t->dtype == GRPO_ST_F32 && t->numel <= 64,
                  "fixture tensor %s missing", name);
    if (n) *n = t->numel;
    float *b = buf[next++ % 4];
    memcpy(b, t->data, t->nbytes);
    return b;
}

static double meta(grpo_safetensors *st, const char *key) {
    const char *v = grpo_st_metadata(st, key);
    ck_assert_msg(v != NULL, "fixture metadata %s missing", key);
    return strtod(v, NULL);
}

START_TEST(adamw_clip_schedule_match_torch) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_safetensors *st;
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/optimizer/adamw.safetensors", GRPO_SOURCE_DIR);
    ck_assert_msg(grpo_st_open(&st, path, &err) == GRPO_OK, "%s", err.message);
    grpo_ops *ops = grpo_backend_open("cpu", 1, &err);
    ck_assert_msg(ops != NULL, "%s", err.message);

    grpo_optim_opts o = {0};
    o.beta1 = meta(st, "beta1"), o.beta2 = meta(st, "beta2"), o.eps = meta(st, "eps");
    o.weight_decay = meta(st, "weight_decay"), o.max_grad_norm = meta(st, "max_grad_norm");
    o.sched.kind = GRPO_LR_COSINE, o.sched.lr = meta(st, "lr");
    o.sched.warmup_steps = (long)meta(st, "warmup"), o.sched.total_steps = (long)meta(st, "total");
    o.sched.num_cycles = 0.5;
    int steps = (int)meta(st, "steps"), micro = (int)meta(st, "micro");

    grpo_optim_tensor t[NT];
    char key[64];
    for (int i = 0; i < NT; i++) {
        snprintf(key, sizeof key, "init.%s", names[i]);
        uint64_t n;
        const float *init = tensor(st, key, &n);
        t[i].n = n, t[i].decay = strcmp(names[i], "b") != 0;
        t[i].param = ops->alloc(ops->ctx, n * 4), t[i].grad = ops->alloc(ops->ctx, n * 4);
        t[i].m = ops->alloc(ops->ctx, n * 4), t[i].v = ops->alloc(ops->ctx, n * 4);
        memcpy(t[i].param, init, n * 4);
    }
    grpo_optimizer opt;
    ck_assert(grpo_optimizer_init(&opt, ops, &o, t, NT, &err) == GRPO_OK);
    float want_norm[8], want_lr[8];
    memcpy(want_norm, tensor(st, "grad_norm", NULL), (size_t)steps * sizeof(float));
    memcpy(want_lr, tensor(st, "lr", NULL), (size_t)steps * sizeof(float));
    for (int s = 0; s < steps; s++) {
        for (int mb = 0; mb < micro; mb++) /* accumulation: gradients add up */
            for (int i = 0; i < NT; i++) {
                snprintf(key, sizeof key, "grad.%d.%d.%s", s, mb, names[i]);
                const float *g = tensor(st, key, NULL);
                for (uint64_t k = 0; k < t[i].n; k++) t[i].grad[k] += g[k];
            }
        grpo_optim_stats stats;
        ck_assert(grpo_optimizer_step(&opt, &stats, &err) == GRPO_OK);
        ck_assert(!stats.skipped);
        ck_assert_msg(fabs(stats.grad_norm - want_norm[s]) <= 1e-5 * want_norm[s],
                      "step %d grad_norm %.8g, torch %.8g", s, stats.grad_norm, want_norm[s]);
        ck_assert_msg(fabs(stats.lr - want_lr[s]) <= 1e-7 * fabs(want_lr[s]) + 1e-12,
                      "step %d lr %.8g, torch %.8g", s, stats.lr, want_lr[s]);
        for (int i = 0; i < NT; i++) {
            snprintf(key, sizeof key, "after.%d.%s", s, names[i]);
            const float *want = tensor(st, key, NULL);
            for (uint64_t k = 0; k < t[i].n; k++) {
                ck_assert_msg(fabsf(t[i].param[k] - want[k]) <= 2e-6f + 2e-6f * fabsf(want[k]),
                              "step %d %s[%llu]: %.9g, torch %.9g", s, names[i],
                              (unsigned long long)k, t[i].param[k], want[k]);
                ck_assert(t[i].grad[k] == 0.0f); /* zeroed for the next accumulation */
            }
        }
    }
    ck_assert_int_eq(opt.step, steps);
    grpo_optimizer_free(&opt);
    for (int i = 0; i < NT; i++) {
        ops->free(ops->ctx, t[i].param), ops->free(ops->ctx, t[i].grad);
        ops->free(ops->ctx, t[i].m), ops->free(ops->ctx, t[i].v);
    }
    grpo_backend_close(ops);
    grpo_st_close(st);
}
END_TEST

/* A NaN gradient skips the update: parameters unchanged, gradients zeroed, step not counted. */
START_TEST(nonfinite_gradient_skips_the_step) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *ops = grpo_backend_open("cpu", 1, &err);
    float *p = ops->alloc(ops->ctx, 16), *g = ops->alloc(ops->ctx, 16);
    float *m = ops->alloc(ops->ctx, 16), *v = ops->alloc(ops->ctx, 16);
    p[0] = 1, p[1] = 2, g[0] = NAN, g[1] = 1;
    grpo_optim_tensor t = {p, g, m, v, 2, 1};
    grpo_optim_opts o = {0.9, 0.999, 1e-8, 0.1, 1.0, {GRPO_LR_CONSTANT, 1e-3, 0, 10, 0.5, 0}};
    grpo_optimizer opt;
    ck_assert(grpo_optimizer_init(&opt, ops, &o, &t, 1, &err) == GRPO_OK);
    grpo_optim_stats s;
    ck_assert(grpo_optimizer_step(&opt, &s, &err) == GRPO_OK);
    ck_assert(s.skipped && isnan(s.grad_norm));
    ck_assert(p[0] == 1 && p[1] == 2 && g[0] == 0 && g[1] == 0 && opt.step == 0);
    grpo_optimizer_free(&opt);
    ops->free(ops->ctx, p), ops->free(ops->ctx, g), ops->free(ops->ctx, m), ops->free(ops->ctx, v);
    grpo_backend_close(ops);
}
END_TEST

/* The backend's AdamW is the scalar formula of kernels/cpu/adamw.c element by element, bit for
 * bit, in vector lanes and in the tail after them (n odd), at 1 and 2 threads: the vectorised
 * loop reorders nothing and fuses nothing. */
START_TEST(adamw_has_the_bits_of_the_scalar_formula) {
    enum { N = 40007 };
    const double lr = 3e-4, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
    const int32_t t = 5;
    for (int32_t threads = 1; threads <= 2; threads++) {
        grpo_error err;
        grpo_error_init(&err);
        grpo_ops *ops = grpo_backend_open("cpu", threads, &err);
        ck_assert_msg(ops != NULL, "%s", err.message);
        float *p = ops->alloc(ops->ctx, N * 4), *g = ops->alloc(ops->ctx, N * 4);
        float *m = ops->alloc(ops->ctx, N * 4), *v = ops->alloc(ops->ctx, N * 4);
        float *pw = malloc(N * 4), *mw = malloc(N * 4), *vw = malloc(N * 4);
        uint32_t r = 11;
        for (int32_t i = 0; i < N; i++) {
            r = r * 1664525u + 1013904223u, p[i] = (float)(r >> 8) / 8388608.0f - 1.0f;
            r = r * 1664525u + 1013904223u, g[i] = ((float)(r >> 8) / 8388608.0f - 1.0f) * 1e-2f;
            m[i] = 0.5f * g[i], v[i] = 3.0f * g[i] * g[i];
        }
        const float decay = (float)(1.0 - lr * wd), w1 = (float)(1.0 - b1), fb2 = (float)b2;
        const float w2 = (float)(1.0 - b2), step = (float)(lr / (1.0 - pow(b1, (double)t)));
        const float bc2 = (float)sqrt(1.0 - pow(b2, (double)t)), e = (float)eps;
        for (int32_t i = 0; i < N; i++) {
            float q = p[i] * decay, mi = m[i] + w1 * (g[i] - m[i]);
            float vi = v[i] * fb2 + w2 * g[i] * g[i];
            mw[i] = mi, vw[i] = vi, pw[i] = q - step * (mi / (sqrtf(vi) / bc2 + e));
        }
        ops->adamw(ops->ctx, p, g, m, v, N, lr, b1, b2, eps, wd, t);
        ops->sync(ops->ctx);
        ck_assert_msg(!memcmp(p, pw, N * 4) && !memcmp(m, mw, N * 4) && !memcmp(v, vw, N * 4),
                      "%d threads: AdamW differs from the scalar formula", threads);
        free(pw), free(mw), free(vw);
        ops->free(ops->ctx, p), ops->free(ops->ctx, g), ops->free(ops->ctx, m),
            ops->free(ops->ctx, v);
        grpo_backend_close(ops);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("optimizer");
    TCase *tc = tcase_create("adamw");
    tcase_add_test(tc, adamw_clip_schedule_match_torch);
    tcase_add_test(tc, nonfinite_gradient_skips_the_step);
    tcase_add_test(tc, adamw_has_the_bits_of_the_scalar_formula);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
