/*
 * test_dense.c — the dense model plugin (plugins/models/dense) against transformers.
 *
 * Fixtures: tests/fixtures/dense/{llama,qwen2,qwen3}/, made by tools/make_dense_fixtures.py:
 * tiny random LlamaForCausalLM (untied, eps 1e-5: MiniMind2's naming), Qwen2ForCausalLM (q/k/v
 * bias), Qwen3ForCausalLM (q/k norm, tied head, head_dim != hidden/heads: minimind-3's naming),
 * and reference.safetensors with transformers' logits, log-probs, every parameter gradient of
 * sum(w * logp) (computed in float64) and greedy generate() outputs (fp32, eager attention);
 * entropy.safetensors (tools/make_entropy_fixtures.py, llama and qwen3) with the gradients of
 * sum(w * logp + u * entropy) at logit scale 0.7, the entropy bonus's path (ABI 1.4).
 *
 * Tolerances (our fp32 against the exact float64 model; logits have std ~1, |logp| < 10):
 *   logits, logp      1e-4 absolute: fp32 rounding through 2 layers of C=32 dot products and a
 *                     V=128 logsumexp is ~1e-6; 1e-4 leaves room for BLAS summation order
 *                     while still catching any real error (a wrong bias or eps moves them 1e-2+).
 *   gradients         per tensor: max |g - ref| <= 1e-4 * max |ref| + 1e-6 — relative to the
 *                     tensor's own scale, because grads of different tensors differ by orders of
 *                     magnitude; observed error is ~1e-6 relative.
 *   greedy tokens     exact: the fixture script checks every greedy step has a top-1/top-2 margin
 *                     > 1e-3, far above fp32 noise.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels.h"
#include "test_backend.h"
#include "io/hfdir.h"
#include "host/model_instance.h"
#include "frozen_forward.h"
#include "test_model_io.h"
#include "host/host.h"
#include "host/registry.h"
#include "io/safetensors.h"
#include "host/sampler.h"
#include "host/testing.h"

static const char *const fixtures[] = {"llama", "qwen2", "qwen3"};
#define N_FIXTURES 3

/* ---- a loaded fixture: model + reference ------------------------------------------------- */
typedef struct fixture {
    grpo_ops *ops;
    grpo_host host;
    grpo_registry reg;
    grpo_model *m;
    grpo_safetensors *ref;
    int32_t B, T, V;
    int32_t *ids, *mask, *pos, *targets; /* (B,T) host arrays */
    test_batch dev;                      /* the same in backend memory */
} fixture;

/* GRPO_TEST_VERBOSE=1 prints the measured errors (for the record in reports). */
static void report(const char *what, const char *model, double worst) {
    if (getenv("GRPO_TEST_VERBOSE")) printf("%-8s %-40s max err %.3g\n", model, what, worst);
}

static void ck_ok(int rc, const grpo_error *err) {
    ck_assert_msg(rc == GRPO_OK, "status %d: %s", rc, err->message);
}

static char *fixture_dir(const char *name) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/tests/fixtures/dense/%s", GRPO_SOURCE_DIR, name);
    return buf;
}

/* A reference tensor copied into a malloc'd buffer (I32 or F32 as stored); numel in *n. */
static void *ref_tensor(const fixture *f, const char *name, int64_t *n) {
    const grpo_st_tensor *t = grpo_st_find(f->ref, name);
    ck_assert_msg(t != NULL, "reference tensor %s missing", name);
    ck_assert(t->dtype == GRPO_ST_F32 || t->dtype == GRPO_ST_I32);
    void *p = malloc(t->nbytes ? t->nbytes : 4);
    memcpy(p, t->data, t->nbytes);
    if (n) *n = (int64_t)t->numel;
    return p;
}

static void fixture_open(fixture *f, const char *name, int trainable) {
    grpo_error err;
    grpo_error_init(&err);
    memset(f, 0, sizeof *f);
    f->ops = test_backend_open(0, &err);
    ck_assert_msg(f->ops != NULL, "%s", err.message);
    f->host = *grpo_default_host();
    f->host.ops = f->ops;
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    ck_ok(grpo_registry_scan(&f->reg, dirs, &err), &err);
    ck_ok(grpo_model_open_dir(&f->m, &f->reg, &f->host, fixture_dir(name), trainable, &err),
          &err);
    char path[4200];
    snprintf(path, sizeof path, "%s/reference.safetensors", fixture_dir(name));
    ck_ok(grpo_st_open(&f->ref, path, &err), &err);
    const grpo_st_tensor *ids = grpo_st_find(f->ref, "ids");
    f->B = (int32_t)ids->shape[0], f->T = (int32_t)ids->shape[1];
    f->V = grpo_model_vocab(f->m);
    f->ids = ref_tensor(f, "ids", NULL), f->mask = ref_tensor(f, "mask", NULL);
    f->pos = ref_tensor(f, "pos", NULL), f->targets = ref_tensor(f, "targets", NULL);
    f->dev = test_batch_make(f->ops, f->B, f->T, f->ids, f->mask, f->pos, f->targets, 0.0f);
}

static void fixture_close(fixture *f) {
    test_batch_free(&f->dev);
    free(f->ids), free(f->mask), free(f->pos), free(f->targets);
    grpo_st_close(f->ref);
    grpo_model_close(f->m);
    grpo_registry_free(&f->reg);
    grpo_backend_close(f->ops);
}

/* The fixture's batch in backend memory (what grpo_model_forward takes). */
static grpo_batch full_batch(const fixture *f) { return f->dev.b; }

/* Columns [0,t) of a (B,T) array into a (B,t) one. */
static int32_t *columns(const int32_t *a, int32_t B, int32_t T, int32_t t) {
    int32_t *o = malloc((size_t)B * t * sizeof(int32_t));
    for (int32_t b = 0; b < B; b++)
        memcpy(o + (size_t)b * t, a + (size_t)b * T, t * sizeof(int32_t));
    return o;
}

/* ---- tests ------------------------------------------------------------------------------- */

START_TEST(logp_matches_transformers) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, fixtures[_i], 0);
    ck_ok(grpo_model_reserve_acts(f.m, f.B, f.T, &err), &err);
    grpo_batch b = full_batch(&f);
    float *logp = calloc((size_t)f.B * f.T, sizeof(float));
    ck_ok(test_forward(f.m, &b, logp, NULL, 1.0f, &err), &err);
    float *ref = ref_tensor(&f, "logp", NULL);
    double worst = 0;
    for (int32_t i = 0; i < f.B * f.T; i++)
        if (f.targets[i] >= 0) worst = fmax(worst, fabs(logp[i] - ref[i]));
    report("logp", fixtures[_i], worst);
    ck_assert_msg(worst < 1e-4, "%s: max |logp - transformers| = %g", fixtures[_i], worst);
    free(logp), free(ref);
    fixture_close(&f);
}
END_TEST

/* With scale s (1/temperature) the forward gives log softmax(s * logits)[target] and the entropy
 * of softmax(s * logits), both computed here in double from transformers' logits. */
START_TEST(scaled_logp_and_entropy_match_transformers_logits) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, fixtures[_i], 0);
    ck_ok(grpo_model_reserve_acts(f.m, f.B, f.T, &err), &err);
    grpo_batch b = full_batch(&f);
    size_t NT = (size_t)f.B * f.T;
    float *logp = calloc(NT, sizeof(float)), *ent = calloc(NT, sizeof(float));
    float *logits = ref_tensor(&f, "logits", NULL);
    const float scale = 0.7f;
    ck_ok(test_forward(f.m, &b, logp, ent, scale, &err), &err);
    double worst_lp = 0, worst_ent = 0;
    for (size_t n = 0; n < NT; n++) {
        if (!f.mask[n]) continue;
        const float *z = logits + n * f.V;
        double mx = -1e300, s = 0, u = 0;
        for (int32_t v = 0; v < f.V; v++) mx = fmax(mx, scale * z[v]);
        for (int32_t v = 0; v < f.V; v++) {
            double e = exp(scale * z[v] - mx);
            s += e, u += e * (scale * z[v] - mx);
        }
        double lse = mx + log(s), entropy = log(s) - u / s;
        /* the head computes rows with a target only (grpo/ops.h); the others stay 0 */
        if (f.targets[n] < 0) {
            ck_assert_msg(ent[n] == 0.0f && logp[n] == 0.0f, "%s: row %zu without target", fixtures[_i], n);
            continue;
        }
        worst_ent = fmax(worst_ent, fabs(ent[n] - entropy));
        worst_lp = fmax(worst_lp, fabs(logp[n] - (scale * z[f.targets[n]] - lse)));
    }
    report("logp at scale 0.7", fixtures[_i], worst_lp);
    report("entropy at scale 0.7", fixtures[_i], worst_ent);
    ck_assert_msg(worst_lp < 1e-4 && worst_ent < 1e-4, "%s: scaled logp err %g, entropy err %g",
                  fixtures[_i], worst_lp, worst_ent);
    free(logp), free(ent), free(logits);
    fixture_close(&f);
}
END_TEST

/* Prefill of the first t columns gives transformers' logits at column t-1, for every t whose
 * column t-1 is real in every row. */
START_TEST(prefill_logits_match_transformers) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, fixtures[_i], 0);
    float *ref = ref_tensor(&f, "logits", NULL); /* (B,T,V) */
    ck_ok(grpo_model_reserve_kv(f.m, f.B, f.T, f.T, &err), &err);
    float *logits = malloc((size_t)f.B * f.V * sizeof(float));
    int checked = 0;
    for (int32_t t = 1; t <= f.T; t++) {
        int all_real = 1;
        for (int32_t b = 0; b < f.B; b++) all_real &= f.mask[b * f.T + t - 1];
        if (!all_real) continue;
        int32_t *ids = columns(f.ids, f.B, f.T, t), *mask = columns(f.mask, f.B, f.T, t);
        int32_t *pos = columns(f.pos, f.B, f.T, t);
        ck_ok(test_prefill(f.m, f.B, t, ids, mask, pos, logits, &err), &err);
        double worst = 0;
        for (int32_t b = 0; b < f.B; b++)
            for (int32_t v = 0; v < f.V; v++)
                worst = fmax(worst, fabs(logits[b * f.V + v] -
                                         ref[((size_t)b * f.T + t - 1) * f.V + v]));
        report("prefill logits", fixtures[_i], worst);
        ck_assert_msg(worst < 1e-4, "%s: prefill t=%d: max |logit diff| = %g", fixtures[_i], t,
                      worst);
        checked++;
        free(ids), free(mask), free(pos);
    }
    ck_assert_int_ge(checked, 5);
    free(logits), free(ref);
    fixture_close(&f);
}
END_TEST

/* Prefill 4 columns, then decode the rest of the batch one column at a time: every step's logits
 * equal the training forward's (transformers' logits at that column). */
START_TEST(decode_logits_match_forward) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, fixtures[_i], 0);
    float *ref = ref_tensor(&f, "logits", NULL);
    int32_t t0 = 4, S = f.T;
    ck_ok(grpo_model_reserve_kv(f.m, f.B, S, t0, &err), &err);
    float *logits = malloc((size_t)f.B * f.V * sizeof(float));
    int32_t *ids = columns(f.ids, f.B, f.T, t0), *mask = columns(f.mask, f.B, f.T, t0);
    int32_t *pos = columns(f.pos, f.B, f.T, t0);
    ck_ok(test_prefill(f.m, f.B, t0, ids, mask, pos, logits, &err), &err);
    int32_t *cmask = calloc((size_t)f.B * S, sizeof(int32_t));
    int32_t tok[8], tpos[8], len[8];
    for (int32_t t = t0; t < f.T; t++) {
        for (int32_t b = 0; b < f.B; b++) {
            for (int32_t s = 0; s <= t; s++) cmask[b * S + s] = f.mask[b * f.T + s];
            tok[b] = f.ids[b * f.T + t], tpos[b] = f.pos[b * f.T + t], len[b] = t + 1;
        }
        ck_ok(test_decode(f.m, f.B, tok, tpos, cmask, len, logits, &err), &err);
        double worst = 0;
        for (int32_t b = 0; b < f.B; b++)
            for (int32_t v = 0; v < f.V; v++)
                worst = fmax(worst, fabs(logits[b * f.V + v] -
                                         ref[((size_t)b * f.T + t) * f.V + v]));
        report("decode logits", fixtures[_i], worst);
        ck_assert_msg(worst < 1e-4, "%s: decode column %d: max |logit diff| = %g", fixtures[_i],
                      t, worst);
    }
    free(ids), free(mask), free(pos), free(cmask), free(logits), free(ref);
    fixture_close(&f);
}
END_TEST

/* Every bound gradient of f against the grad.<name> tensors of ref (see the header's
 * tolerance); returns how many tensors were compared (tied ones are their target's). */
static int compare_grads(fixture *f, const grpo_safetensors *ref, const char *label) {
    int compared = 0;
    for (uint32_t i = 0; i < f->m->n_params; i++) {
        const grpo_param_desc *d = &f->m->params[i];
        if (d->flags & GRPO_PARAM_TIED) continue; /* its grad is its target's (compared there) */
        char name[256];
        snprintf(name, sizeof name, "grad.%s", d->name);
        const grpo_st_tensor *t = grpo_st_find(ref, name);
        ck_assert_msg(t && t->dtype == GRPO_ST_F32, "%s: reference tensor %s missing", label, name);
        ck_assert_int_eq((int64_t)t->numel, (int64_t)f->m->numel[i]);
        float *g = test_host_floats(f->ops, f->m->grad_ptr[i], t->numel);
        const float *r = (const float *)t->data;
        double worst = 0, scale = 0;
        for (uint64_t k = 0; k < t->numel; k++) {
            worst = fmax(worst, fabs(g[k] - r[k]));
            scale = fmax(scale, fabs(r[k]));
        }
        free(g);
        report(d->name, label, worst / scale);
        ck_assert_msg(scale > 0, "%s: reference gradient of %s is all zero", label, name);
        ck_assert_msg(worst <= 1e-4 * scale + 1e-6, "%s: %s: max |diff| %g vs max |ref| %g",
                      label, d->name, worst, scale);
        compared++;
    }
    return compared;
}

START_TEST(every_gradient_matches_transformers) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, fixtures[_i], 1);
    ck_ok(grpo_model_reserve_acts(f.m, f.B, f.T, &err), &err);
    grpo_batch b = full_batch(&f);
    float *logp = calloc((size_t)f.B * f.T, sizeof(float));
    float *dlogp = ref_tensor(&f, "dlogp", NULL);
    grpo_model_zero_grad(f.m);
    ck_ok(test_forward(f.m, &b, logp, NULL, 1.0f, &err), &err);
    ck_ok(test_backward(f.m, &b, dlogp, 1.0f, &err), &err);
    int compared = compare_grads(&f, f.ref, fixtures[_i]);
    ck_assert_int_eq(compared, (int)f.m->n_params - (strcmp(fixtures[_i], "qwen3") == 0));
    /* a second backward accumulates: grads double */
    float *g0 = test_host_floats(f.ops, f.m->grad_ptr[0], f.m->numel[0]);
    ck_ok(test_forward(f.m, &b, logp, NULL, 1.0f, &err), &err);
    ck_ok(test_backward(f.m, &b, dlogp, 1.0f, &err), &err);
    float *g1 = test_host_floats(f.ops, f.m->grad_ptr[0], f.m->numel[0]);
    for (uint64_t k = 0; k < f.m->numel[0]; k++)
        ck_assert(fabsf(g1[k] - 2 * g0[k]) <= 1e-5f + 1e-5f * fabsf(g0[k]));
    free(g0), free(g1), free(logp), free(dlogp);
    fixture_close(&f);
}
END_TEST

/* A frozen model sharing the policy's work memory (grpo_model_share_work: a reference, a
 * rollout copy) runs its forward and its prefill between the policy's passes without changing
 * a bit of the policy's gradients or of its own log-probs; a policy backward, or a decode,
 * after another model's pass took the memory is refused instead of reading its data. */
START_TEST(shared_work_memory_between_passes) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, fixtures[_i], 1);
    grpo_model *fr = NULL;
    ck_ok(grpo_model_open_dir(&fr, &f.reg, &f.host, fixture_dir(fixtures[_i]), 0, &err), &err);
    grpo_batch b = full_batch(&f);
    size_t n = (size_t)f.B * f.T;
    float *logp = calloc(n, 4), *lf0 = calloc(n, 4), *lf1 = calloc(n, 4), *lg = malloc(4096 * 4);
    float *dlogp = ref_tensor(&f, "dlogp", NULL);
    ck_assert_int_le((int64_t)f.B * f.V, 4096);
    int32_t *ones = malloc(n * 4), *pos = malloc(n * 4); /* a prompt without padding */
    for (size_t i = 0; i < n; i++) ones[i] = 1, pos[i] = (int32_t)(i % (size_t)f.T);
    /* alone: the frozen model's log-probs, the policy's gradients */
    ck_ok(grpo_model_reserve_acts(fr, f.B, f.T, &err), &err);
    ck_ok(test_forward(fr, &b, lf0, NULL, 1.0f, &err), &err);
    grpo_model_zero_grad(f.m);
    ck_ok(grpo_model_reserve_acts(f.m, f.B, f.T, &err), &err);
    ck_ok(test_forward(f.m, &b, logp, NULL, 1.0f, &err), &err);
    ck_ok(test_backward(f.m, &b, dlogp, 1.0f, &err), &err);
    float *g0 = test_host_floats(f.ops, f.m->grads, f.m->section);
    /* shared: a prefill and a forward of the frozen model, then the policy's step */
    ck_ok(grpo_model_share_work(fr, f.m, &err), &err);
    ck_ok(grpo_model_reserve_kv(fr, f.B, f.T, f.T, &err), &err);
    ck_ok(test_prefill(fr, f.B, f.T, f.ids, ones, pos, lg, &err), &err);
    ck_ok(grpo_model_reserve_acts(fr, f.B, f.T, &err), &err);
    ck_ok(test_forward(fr, &b, lf1, NULL, 1.0f, &err), &err);
    ck_assert(memcmp(lf0, lf1, n * 4) == 0);
    grpo_model_zero_grad(f.m);
    ck_ok(grpo_model_reserve_acts(f.m, f.B, f.T, &err), &err);
    ck_ok(test_forward(f.m, &b, logp, NULL, 1.0f, &err), &err);
    ck_ok(test_backward(f.m, &b, dlogp, 1.0f, &err), &err);
    float *g1 = test_host_floats(f.ops, f.m->grads, f.m->section);
    ck_assert(memcmp(g0, g1, f.m->section * 4) == 0);
    /* a pass in between: the policy's backward, the frozen model's decode are refused */
    ck_ok(test_forward(f.m, &b, logp, NULL, 1.0f, &err), &err);
    ck_ok(grpo_model_reserve_acts(fr, f.B, f.T, &err), &err);
    ck_ok(test_forward(fr, &b, lf1, NULL, 1.0f, &err), &err);
    ck_assert_int_eq(test_backward(f.m, &b, dlogp, 1.0f, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "another model's pass"), "%s", err.message);
    ck_ok(grpo_model_reserve_kv(fr, f.B, f.T, f.T, &err), &err);
    ck_ok(grpo_model_reserve_acts(f.m, f.B, f.T, &err), &err);
    ck_assert_int_eq(test_prefill(fr, f.B, f.T, f.ids, ones, pos, lg, &err),
                     GRPO_ERR_INVALID);
    free(g0), free(g1), free(logp), free(lf0), free(lf1), free(lg), free(dlogp);
    free(ones), free(pos);
    grpo_model_close(fr);
    fixture_close(&f);
}
END_TEST

/* The entropy bonus (ABI 1.4): forward at scale 0.7 gives transformers' entropies, and
 * backward_entropy of sum(w * logp + u * entropy) gives every gradient (entropy.safetensors, made
 * by tools/make_entropy_fixtures.py for llama, untied head, and qwen3, tied). A descriptor from a
 * pack built before 1.4 (a smaller struct_size) is refused by name instead. */
static const char *const entropy_fixtures[] = {"llama", "qwen3"};

START_TEST(entropy_gradient_matches_transformers) {
    const char *name = entropy_fixtures[_i];
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, name, 1);
    char path[4300];
    snprintf(path, sizeof path, "%s/entropy.safetensors", fixture_dir(name));
    grpo_safetensors *ref;
    ck_ok(grpo_st_open(&ref, path, &err), &err);
    const float *want_ent = (const float *)grpo_st_find(ref, "entropy")->data;
    const float *dlogp = (const float *)grpo_st_find(ref, "dlogp")->data;
    const float *dent = (const float *)grpo_st_find(ref, "dentropy")->data;
    float scale = *(const float *)grpo_st_find(ref, "scale")->data;
    ck_ok(grpo_model_reserve_acts(f.m, f.B, f.T, &err), &err);
    grpo_batch b = full_batch(&f);
    size_t n = (size_t)f.B * f.T;
    float *logp = calloc(n, sizeof(float)), *ent = calloc(n, sizeof(float));
    grpo_model_zero_grad(f.m);
    ck_ok(test_forward(f.m, &b, logp, ent, scale, &err), &err);
    double worst = 0;
    for (size_t i = 0; i < n; i++)
        if (f.targets[i] >= 0) worst = fmax(worst, fabs(ent[i] - want_ent[i]));
    report("entropy at scale 0.7", name, worst);
    ck_assert_msg(worst < 1e-4, "%s: max |entropy - transformers| = %g", name, worst);
    ck_assert(grpo_model_has_entropy_backward(f.m));
    ck_ok(test_backward_entropy(f.m, &b, dlogp, dent, ent, scale, &err), &err);
    ck_assert_int_eq(compare_grads(&f, ref, name),
                     (int)f.m->n_params - (strcmp(name, "qwen3") == 0));
    /* as a pack built before 1.4 exports it: the host refuses, naming the pack */
    const grpo_model_desc *real = f.m->desc;
    grpo_model_desc old = *real;
    old.struct_size = (uint32_t)offsetof(grpo_model_desc, backward_entropy);
    f.m->desc = &old;
    ck_assert(!grpo_model_has_entropy_backward(f.m));
    ck_assert_int_eq(test_backward_entropy(f.m, &b, dlogp, dent, ent, scale, &err),
                     GRPO_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, real->id) && strstr(err.message, "1.4"), "%s", err.message);
    f.m->desc = real;
    free(logp), free(ent);
    grpo_st_close(ref);
    fixture_close(&f);
}
END_TEST

/* Greedy generation (the sampler, one completion per prompt) equals transformers' generate():
 * one row, a left-padded batch, and that batch with an EOS at which rows stop at different steps
 * (rows then drop out of the batch). */
static void check_generate(fixture *f, const char *prompt_name, const char *mask_name,
                           const char *out_name, int32_t eos) {
    grpo_error err;
    grpo_error_init(&err);
    int64_t n;
    int32_t *prompt = ref_tensor(f, prompt_name, &n);
    const grpo_st_tensor *pt = grpo_st_find(f->ref, prompt_name);
    int32_t R = (int32_t)pt->shape[0], P = (int32_t)pt->shape[1];
    int32_t *mask = mask_name ? ref_tensor(f, mask_name, NULL) : NULL;
    if (!mask) {
        mask = malloc((size_t)R * P * sizeof(int32_t));
        for (int64_t i = 0; i < (int64_t)R * P; i++) mask[i] = 1;
    }
    int32_t *ref = ref_tensor(f, out_name, NULL);
    int32_t N = (int32_t)grpo_st_find(f->ref, out_name)->shape[1];
    /* the sampler, greedy, one completion per prompt, stopping at eos (-1: never) */
    grpo_sampler_opts o = {{0.0f, 0, 1.0f, 0.0f, 1.0f}, 1, N, {eos}, eos >= 0, 0, 0, NULL, NULL,
                           NULL, 0, 0};
    grpo_rollout out = {0};
    grpo_rng rng;
    grpo_rng_seed(&rng, 1);
    ck_ok(grpo_sampler_run(f->m, &o, prompt, mask, R, P, &rng, &out, &err), &err);
    for (int32_t r = 0; r < R; r++)
        for (int32_t k = 0; k < N; k++) {
            /* past a row's end transformers pads with 0 */
            int32_t want = ref[r * N + k], got = k < out.len[r] ? out.ids[r * N + k] : 0;
            ck_assert_msg(got == want, "%s row %d step %d: got %d, transformers %d", out_name, r,
                          k, got, want);
        }
    grpo_rollout_free(&out);
    free(prompt), free(mask), free(ref);
}

START_TEST(greedy_generate_matches_transformers) {
    fixture f;
    fixture_open(&f, fixtures[_i], 0);
    check_generate(&f, "gen1.prompt", NULL, "gen1.out", -1);
    check_generate(&f, "genb.prompt", "genb.mask", "genb.out", -1);
    int32_t *eos = ref_tensor(&f, "gene.eos", NULL);
    check_generate(&f, "genb.prompt", "genb.mask", "gene.out", eos[0]);
    free(eos);
    fixture_close(&f);
}
END_TEST

/* GRPO's fan-out: prefill a prompt once into cache row 0, kv_copy_row it to rows 1..G-1, decode
 * the G rows: every row continues exactly like transformers' greedy generate of that prompt. */
START_TEST(prompt_fan_out_by_kv_copy_row) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, fixtures[_i], 0);
    int64_t P;
    int32_t *prompt = ref_tensor(&f, "gen1.prompt", &P), *want = ref_tensor(&f, "gen1.out", NULL);
    enum { G = 3, STEPS = 4 };
    int32_t S = (int32_t)P + STEPS;
    ck_ok(grpo_model_reserve_kv(f.m, G, S, (int32_t)P, &err), &err);
    int32_t *mask = malloc(P * sizeof(int32_t)), *pos = malloc(P * sizeof(int32_t));
    for (int32_t t = 0; t < P; t++) mask[t] = 1, pos[t] = t;
    float *logits = malloc((size_t)G * f.V * sizeof(float));
    ck_ok(test_prefill(f.m, 1, (int32_t)P, prompt, mask, pos, logits, &err), &err);
    for (int32_t r = 1; r < G; r++)
        ck_ok(grpo_model_kv_copy_row(f.m, r, 0, (int32_t)P, &err), &err);
    int32_t cmask[G * 16] = {0}, tok[G], tpos[G], len[G];
    ck_assert_int_le(S, 16);
    for (int32_t step = 0; step < STEPS; step++) {
        for (int32_t r = 0; r < G; r++) {
            for (int32_t s = 0; s <= (int32_t)P + step; s++) cmask[r * S + s] = 1;
            tok[r] = want[step], tpos[r] = (int32_t)P + step, len[r] = (int32_t)P + step + 1;
        }
        ck_ok(test_decode(f.m, G, tok, tpos, cmask, len, logits, &err), &err);
        for (int32_t r = 0; r < G; r++) {
            int32_t best = 0;
            for (int32_t v = 1; v < f.V; v++)
                if (logits[r * f.V + v] > logits[r * f.V + best]) best = v;
            ck_assert_msg(best == want[step + 1], "%s row %d step %d: argmax %d, transformers %d",
                          fixtures[_i], r, step, best, want[step + 1]);
            for (int32_t v = 0; v < f.V; v++) /* same math per row; BLAS may order sums apart */
                ck_assert(fabsf(logits[r * f.V + v] - logits[v]) < 1e-5f);
        }
    }
    free(prompt), free(want), free(mask), free(pos), free(logits);
    fixture_close(&f);
}
END_TEST

/* The host refuses a cache-row copy outside the reserved cache (no cache, a row past R, more
 * slots than S) with a message naming the rows, instead of writing past the KV buffer. */
START_TEST(kv_copy_row_outside_the_cache_is_refused) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, fixtures[0], 0);
    ck_assert_int_eq(grpo_model_kv_copy_row(f.m, 1, 0, 1, &err), GRPO_ERR_INVALID);
    ck_ok(grpo_model_reserve_kv(f.m, 2, 4, 4, &err), &err);
    ck_ok(grpo_model_kv_copy_row(f.m, 1, 0, 4, &err), &err);
    ck_ok(grpo_model_kv_copy_row(f.m, 1, 1, 4, &err), &err); /* onto itself: nothing to do */
    ck_assert_int_eq(grpo_model_kv_copy_row(f.m, 2, 0, 4, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "row 0 to row 2") && strstr(err.message, "2 rows x 4 slots"),
                  "%s", err.message);
    ck_assert_int_eq(grpo_model_kv_copy_row(f.m, 1, 0, 5, &err), GRPO_ERR_INVALID);
    ck_assert_int_eq(grpo_model_kv_copy_row(f.m, 0, -1, 1, &err), GRPO_ERR_INVALID);
    fixture_close(&f);
}
END_TEST

/* save -> reload gives identical parameters; a tied head is not written. */
/* The reference model's chunked forward equals the training forward (frozen_forward.h). */
START_TEST(frozen_forward_in_chunks_matches_training_forward) {
    fixture tr, fr;
    fixture_open(&tr, fixtures[_i], 1);
    fixture_open(&fr, fixtures[_i], 0);
    check_frozen_forward_in_chunks(tr.m, fr.m, fixtures[_i], tr.ids, tr.mask, tr.pos, tr.targets,
                                   tr.B, tr.T, tr.V, 1);
    fixture_close(&fr);
    fixture_close(&tr);
}
END_TEST

START_TEST(save_reload_round_trip) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, fixtures[_i], 1);
    char dir[] = "/tmp/grpo_test_dense_XXXXXX";
    ck_assert(mkdtemp(dir) != NULL);
    ck_ok(grpo_model_save(f.m, dir, &err), &err);
    const char *keep = getenv("GRPO_TEST_KEEP_SAVED"); /* for tools/check_hf_load.py */
    if (keep) {
        char kept[4200];
        snprintf(kept, sizeof kept, "%s/%s", keep, fixtures[_i]);
        mkdir(keep, 0755);
        ck_ok(grpo_model_save(f.m, kept, &err), &err);
    }
    grpo_model *m2 = NULL;
    ck_ok(grpo_model_open_dir(&m2, &f.reg, &f.host, dir, 0, &err), &err);
    ck_assert_uint_eq(m2->n_params, f.m->n_params);
    for (uint32_t i = 0; i < m2->n_params; i++) {
        ck_assert_str_eq(m2->params[i].name, f.m->params[i].name);
        float *a = test_host_floats(f.ops, m2->param_ptr[i], m2->numel[i]);
        float *b = test_host_floats(f.ops, f.m->param_ptr[i], m2->numel[i]);
        ck_assert(memcmp(a, b, m2->numel[i] * 4) == 0);
        free(a), free(b);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    grpo_safetensors *st = NULL;
    ck_ok(grpo_st_open(&st, path, &err), &err);
    int tied = strcmp(fixtures[_i], "qwen3") == 0;
    ck_assert_int_eq(grpo_st_find(st, "lm_head.weight") == NULL, tied);
    ck_assert_uint_eq(grpo_st_count(st), f.m->n_params - tied);
    grpo_st_close(st);
    grpo_model_close(m2);
    unlink(path);
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
    fixture_close(&f);
}
END_TEST

/* Writes the llama fixture's tensors into dir/model.safetensors, dropping `drop`, adding an
 * extra tensor when extra != NULL, and giving `reshape` a wrong shape; plus its config.json. */
static void write_variant(const char *dir, const char *drop, const char *extra,
                          const char *reshape) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_safetensors *st = NULL;
    ck_ok(grpo_hf_open_weights(fixture_dir("llama"), &st, &err), &err);
    size_t n = grpo_st_count(st), k = 0;
    grpo_st_out *outs = calloc(n + 1, sizeof *outs);
    for (size_t i = 0; i < n; i++) {
        const grpo_st_tensor *t = grpo_st_at(st, i);
        if (drop && strcmp(t->name, drop) == 0) continue;
        float *d = malloc(t->numel * sizeof(float));
        ck_ok(grpo_st_read_f32(st, t->name, d, t->ndim, t->shape, &err), &err);
        outs[k] = (grpo_st_out){.name = t->name, .data = d, .ndim = t->ndim};
        memcpy(outs[k].shape, t->shape, sizeof t->shape);
        if (reshape && strcmp(t->name, reshape) == 0) /* same numel, transposed shape */
            outs[k].shape[0] = t->shape[1], outs[k].shape[1] = t->shape[0];
        k++;
    }
    static float zeros[4];
    if (extra) outs[k++] = (grpo_st_out){.name = extra, .data = zeros, .ndim = 1, .shape = {4}};
    char *json = NULL;
    ck_ok(grpo_hf_read_config(fixture_dir("llama"), &json, &err), &err);
    ck_ok(grpo_hf_save(dir, json, outs, k, GRPO_ST_F32, NULL, &err), &err);
    for (size_t i = 0; i < k; i++)
        if (outs[i].data != zeros) free((void *)outs[i].data);
    free(outs), free(json);
    grpo_st_close(st);
}

/* Loading refuses a missing, an unexpected and a mis-shaped tensor, naming file and tensor. */
START_TEST(load_errors_name_the_tensor) {
    fixture f;
    fixture_open(&f, "llama", 0);
    grpo_error err;
    grpo_error_init(&err);
    char dir[] = "/tmp/grpo_test_dense_bad_XXXXXX";
    ck_assert(mkdtemp(dir) != NULL);
    struct { const char *drop, *extra, *reshape, *want; } cases[] = {
        {"model.norm.weight", NULL, NULL, "missing tensor model.norm.weight"},
        {NULL, "model.layers.0.mlp.extra.weight", NULL,
         "unexpected tensor model.layers.0.mlp.extra.weight"},
        {NULL, NULL, "model.layers.1.mlp.gate_proj.weight",
         "model.layers.1.mlp.gate_proj.weight"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        write_variant(dir, cases[c].drop, cases[c].extra, cases[c].reshape);
        grpo_model *m = NULL;
        int rc = grpo_model_open_dir(&m, &f.reg, &f.host, dir, 0, &err);
        ck_assert_msg(rc != GRPO_OK && m == NULL, "case %zu loaded", c);
        ck_assert_msg(strstr(err.message, cases[c].want) && strstr(err.message, dir),
                      "case %zu: message '%s' lacks '%s'", c, err.message, cases[c].want);
    }
    char path[4200];
    const char *files[] = {"model.safetensors", "config.json"};
    for (int i = 0; i < 2; i++) snprintf(path, sizeof path, "%s/%s", dir, files[i]), unlink(path);
    rmdir(dir);
    fixture_close(&f);
}
END_TEST

START_TEST(unsupported_config_is_refused) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *ops = grpo_backend_open("cpu", 1, &err);
    grpo_host host = *grpo_default_host();
    host.ops = ops;
    grpo_registry reg = {0};
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    ck_ok(grpo_registry_scan(&reg, dirs, &err), &err);
    const grpo_entry *e = grpo_registry_find_architecture(&reg, "MiniMindForCausalLM");
    ck_assert(e != NULL);
    ck_assert_str_eq(e->id, "dense.causal_lm");
    const void *vd = NULL;
    ck_ok(grpo_registry_load(&reg, e, &host, &vd, &err), &err);
    const grpo_model_desc *desc = vd;
    grpo_config cfg = {sizeof(grpo_config), 0, NULL, NULL, "model", NULL};
    void *inst = NULL;
    const char *moe = "{\"model_type\":\"minimind\",\"hidden_size\":64,\"num_hidden_layers\":2,"
                      "\"num_attention_heads\":4,\"vocab_size\":100,\"use_moe\":true}";
    ck_assert_int_eq(desc->create(&host, moe, &cfg, &inst, &err), GRPO_ERR_UNSUPPORTED);
    ck_assert(strstr(err.message, "use_moe") != NULL);
    /* MiniMind defaults: intermediate 64*ceil(8/3*512/64) = 1408, tied head */
    const char *mm = "{\"model_type\":\"minimind\",\"hidden_size\":512,\"num_hidden_layers\":1,"
                     "\"num_attention_heads\":8,\"num_key_value_heads\":2,\"vocab_size\":6400}";
    ck_ok(desc->create(&host, mm, &cfg, &inst, &err), &err);
    grpo_param_desc d = {sizeof d, NULL, 0, {0}, 0, 0};
    uint32_t n = desc->n_params(inst);
    desc->param(inst, n - 1, &d);
    ck_assert_str_eq(d.name, "lm_head.weight");
    ck_assert(d.flags & GRPO_PARAM_TIED);
    desc->param(inst, 8, &d); /* layer 0: ln1 q k v o ln2 gate up down -> index 8 = up */
    ck_assert_str_eq(d.name, "model.layers.0.mlp.up_proj.weight");
    ck_assert_int_eq(d.shape[0], 1408);
    desc->destroy(inst);
    grpo_registry_free(&reg);
    grpo_backend_close(ops);
}
END_TEST

int main(void) {
    test_backend_require();
    Suite *s = suite_create("dense");
    TCase *tc = tcase_create("transformers parity");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, logp_matches_transformers, 0, N_FIXTURES);
    tcase_add_loop_test(tc, scaled_logp_and_entropy_match_transformers_logits, 0, N_FIXTURES);
    tcase_add_loop_test(tc, entropy_gradient_matches_transformers, 0, 2);
    tcase_add_loop_test(tc, prefill_logits_match_transformers, 0, N_FIXTURES);
    tcase_add_loop_test(tc, decode_logits_match_forward, 0, N_FIXTURES);
    tcase_add_loop_test(tc, every_gradient_matches_transformers, 0, N_FIXTURES);
    tcase_add_loop_test(tc, greedy_generate_matches_transformers, 0, N_FIXTURES);
    tcase_add_loop_test(tc, prompt_fan_out_by_kv_copy_row, 0, N_FIXTURES);
    tcase_add_test(tc, kv_copy_row_outside_the_cache_is_refused);
    tcase_add_loop_test(tc, frozen_forward_in_chunks_matches_training_forward, 0, N_FIXTURES);
    tcase_add_loop_test(tc, save_reload_round_trip, 0, N_FIXTURES);
    tcase_add_loop_test(tc, shared_work_memory_between_passes, 0, N_FIXTURES);
    tcase_add_test(tc, load_errors_name_the_tensor);
    tcase_add_test(tc, unsupported_config_is_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
