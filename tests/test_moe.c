/*
 * test_moe.c — the MoE model plugin (plugins/models/moe) against its references.
 *
 * Fixtures: tests/fixtures/moe/{qwen3moe,qwen3moe_plain,minimind2,minimind2_tok}/, made by
 * tools/make_moe_fixtures.py: a tiny random transformers Qwen3MoeForCausalLM (4 experts, top-2,
 * norm_topk_prob, router_aux_loss_coef 0.05; and 1 layer, 3 experts top-2 without
 * norm_topk_prob, tied head) and two MiniMind2 MoE models checked against a
 * PyTorch reference of MiniMind2's MoE math (seq_aux with 4 experts top-2 + 1 shared expert;
 * token-level aux with 3 experts top-1 + 2 shared experts). reference.safetensors holds the
 * reference logits, log-probs, coefficient * aux loss, expert load, every parameter gradient of
 * sum(w * logp) + aux (router included), the aux-only router gradients, and greedy generate()
 * outputs; all differentiated in float64.
 *
 * Tolerances (our fp32 against the exact float64 model):
 *   logits, logp   1e-4 absolute (as the dense tests: fp32 rounding is ~1e-6; any real error,
 *                  e.g. a token sent to the wrong expert or a missing shared expert, moves
 *                  them by 1e-2 or more). The fixture script guarantees every real token's
 *                  k-th vs (k+1)-th router probability margin is > 1e-3, so fp32 routes exactly
 *                  as float64 does.
 *   aux            1e-5 relative (a sum of a few hundred fp32 probabilities).
 *   expert load    exact (integer counts of real tokens).
 *   gradients      per tensor max |g - ref| <= 1e-4 * max |ref| + 1e-6 (relative to the
 *                  tensor's scale; expert grads are sums over few tokens, router grads pass
 *                  through softmax, top-k renormalisation and the aux term; observed ~1e-6).
 *   greedy tokens  exact (each reference step has a top-1/top-2 logit margin > 1e-3).
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
#include "host/model_instance.h"
#include "frozen_forward.h"
#include "test_model_io.h"
#include "host/host.h"
#include "host/registry.h"
#include "io/safetensors.h"
#include "host/sampler.h"

static const char *const fixtures[] = {"qwen3moe", "minimind2", "minimind2_tok",
                                       "qwen3moe_plain"};
#define N_FIXTURES 4

typedef struct fixture {
    const char *name;
    grpo_ops *ops;
    grpo_host host;
    grpo_registry reg;
    const grpo_model_desc *desc;
    grpo_model *m;
    grpo_safetensors *ref;
    int32_t B, T, V;
    int32_t *ids, *mask, *pos, *targets; /* (B,T) host arrays */
    test_batch dev;                      /* the same in backend memory */
} fixture;

/* GRPO_TEST_VERBOSE=1 prints the measured errors (for the record in reports). */
static void report(const char *what, const char *model, double worst) {
    if (getenv("GRPO_TEST_VERBOSE")) printf("%-14s %-44s max err %.3g\n", model, what, worst);
}

static void ck_ok(int rc, const grpo_error *err) {
    ck_assert_msg(rc == GRPO_OK, "status %d: %s", rc, err->message);
}

static char *fixture_dir(const char *name) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/tests/fixtures/moe/%s", GRPO_SOURCE_DIR, name);
    return buf;
}

static void *ref_tensor(const fixture *f, const char *name, int64_t *n) {
    const grpo_st_tensor *t = grpo_st_find(f->ref, name);
    ck_assert_msg(t != NULL, "reference tensor %s missing", name);
    void *p = malloc(t->nbytes ? t->nbytes : 4);
    memcpy(p, t->data, t->nbytes);
    if (n) *n = (int64_t)t->numel;
    return p;
}

/* The moe.causal_lm descriptor, loaded from the built packs. */
static const grpo_model_desc *load_desc(grpo_registry *reg, const grpo_host *host) {
    grpo_error err;
    grpo_error_init(&err);
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    ck_ok(grpo_registry_scan(reg, dirs, &err), &err);
    const grpo_entry *e = grpo_registry_find(reg, "moe.causal_lm");
    ck_assert_msg(e != NULL, "moe.causal_lm not found under %s", GRPO_PACK_BUILD_DIR);
    const void *vd = NULL;
    ck_ok(grpo_registry_load(reg, e, host, &vd, &err), &err);
    return vd;
}

static void fixture_open(fixture *f, const char *name, int trainable) {
    grpo_error err;
    grpo_error_init(&err);
    memset(f, 0, sizeof *f);
    f->name = name;
    f->ops = test_backend_open(0, &err);
    ck_assert_msg(f->ops != NULL, "%s", err.message);
    f->host = *grpo_default_host();
    f->host.ops = f->ops;
    f->desc = load_desc(&f->reg, &f->host);
    ck_ok(grpo_model_open(&f->m, f->desc, &f->host, fixture_dir(name), NULL, trainable, &err),
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
static grpo_batch full_batch(const fixture *f, float aux_weight) {
    grpo_batch b = f->dev.b;
    b.aux_weight = aux_weight;
    return b;
}

static int32_t *columns(const int32_t *a, int32_t B, int32_t T, int32_t t) {
    int32_t *o = malloc((size_t)B * t * sizeof(int32_t));
    for (int32_t b = 0; b < B; b++) memcpy(o + (size_t)b * t, a + (size_t)b * T, t * sizeof(int32_t));
    return o;
}

/* ---- tests ------------------------------------------------------------------------------- */

START_TEST(logp_aux_and_load_match_reference) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, fixtures[_i], 0);
    ck_ok(grpo_model_reserve_acts(f.m, f.B, f.T, &err), &err);
    grpo_batch b = full_batch(&f, 0.0f);
    float *logp = calloc((size_t)f.B * f.T, sizeof(float));
    ck_ok(test_forward(f.m, &b, logp, NULL, 1.0f, &err), &err);
    float *ref = ref_tensor(&f, "logp", NULL);
    double worst = 0;
    for (int32_t i = 0; i < f.B * f.T; i++)
        if (f.targets[i] >= 0) worst = fmax(worst, fabs(logp[i] - ref[i]));
    report("logp", fixtures[_i], worst);
    ck_assert_msg(worst < 1e-4, "%s: max |logp - reference| = %g", fixtures[_i], worst);

    float *aux = ref_tensor(&f, "aux", NULL), got = f.desc->aux_loss(f.m->inst);
    report("aux (relative)", fixtures[_i], fabs(got - aux[0]) / aux[0]);
    ck_assert_msg(fabs(got - aux[0]) <= 1e-5 * aux[0], "%s: aux %.8g, reference %.8g",
                  fixtures[_i], got, aux[0]);

    int64_t n;
    float *load = ref_tensor(&f, "load", &n);
    int32_t L = 0, E = 0;
    const float *got_load = f.desc->expert_load(f.m->inst, &L, &E);
    ck_assert(got_load != NULL);
    ck_assert_int_eq((int64_t)L * E, n);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(got_load[i] == load[i], "%s: load[%d][%d] = %g, reference %g",
                      fixtures[_i], (int)(i / E), (int)(i % E), got_load[i], load[i]);
    free(logp), free(ref), free(aux), free(load);
    fixture_close(&f);
}
END_TEST

/* Prefill of the first t columns gives the reference logits at column t-1 (every t whose column
 * t-1 is real in every row). */
START_TEST(prefill_logits_match_reference) {
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

/* Prefill 4 columns, then decode the rest one column at a time (each step routes R = B tokens):
 * every step's logits equal the reference logits at that column. */
START_TEST(decode_logits_match_reference) {
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

/* Compares the gradient of parameter i with reference tensor prefix + name. */
static void check_grad(fixture *f, uint32_t i, const char *prefix) {
    const grpo_param_desc *d = &f->m->params[i];
    char name[256];
    snprintf(name, sizeof name, "%s%s", prefix, d->name);
    int64_t n;
    float *ref = ref_tensor(f, name, &n);
    ck_assert_int_eq(n, (int64_t)f->m->numel[i]);
    float *g = test_host_floats(f->ops, f->m->grad_ptr[i], (uint64_t)n);
    double worst = 0, scale = 0;
    for (int64_t k = 0; k < n; k++) {
        worst = fmax(worst, fabs(g[k] - ref[k]));
        scale = fmax(scale, fabs(ref[k]));
    }
    free(g);
    report(name, f->name, scale > 0 ? worst / scale : worst);
    ck_assert_msg(scale > 0, "%s: reference gradient %s is all zero", f->name, name);
    ck_assert_msg(worst <= 1e-4 * scale + 1e-6, "%s: %s: max |diff| %g vs max |ref| %g", f->name,
                  name, worst, scale);
    free(ref);
}

START_TEST(every_gradient_matches_reference) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, fixtures[_i], 1);
    ck_ok(grpo_model_reserve_acts(f.m, f.B, f.T, &err), &err);
    grpo_batch b = full_batch(&f, 1.0f); /* loss = sum(w * logp) + aux */
    float *logp = calloc((size_t)f.B * f.T, sizeof(float));
    float *dlogp = ref_tensor(&f, "dlogp", NULL);
    grpo_model_zero_grad(f.m);
    ck_ok(test_forward(f.m, &b, logp, NULL, 1.0f, &err), &err);
    ck_ok(test_backward(f.m, &b, dlogp, 1.0f, &err), &err);
    int compared = 0, tied = 0;
    for (uint32_t i = 0; i < f.m->n_params; i++) {
        if (f.m->params[i].flags & GRPO_PARAM_TIED) { /* its grad is its target's */
            tied++;
            continue;
        }
        check_grad(&f, i, "grad.");
        compared++;
    }
    ck_assert_int_eq(compared + tied, (int)f.m->n_params);
    /* a second forward+backward accumulates: grads double */
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

/* With dlogp = 0 and aux_weight = 1, the router gradients are d aux / d gate alone. */
START_TEST(aux_gradient_alone_matches_reference) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, fixtures[_i], 1);
    ck_ok(grpo_model_reserve_acts(f.m, f.B, f.T, &err), &err);
    grpo_batch b = full_batch(&f, 1.0f);
    float *logp = calloc((size_t)f.B * f.T, sizeof(float));
    float *dlogp = calloc((size_t)f.B * f.T, sizeof(float));
    grpo_model_zero_grad(f.m);
    ck_ok(test_forward(f.m, &b, logp, NULL, 1.0f, &err), &err);
    ck_ok(test_backward(f.m, &b, dlogp, 1.0f, &err), &err);
    int routers = 0;
    for (uint32_t i = 0; i < f.m->n_params; i++)
        if (strstr(f.m->params[i].name, ".mlp.gate.weight")) {
            check_grad(&f, i, "auxgrad.");
            routers++;
        }
    int32_t L = 0, E = 0;
    f.desc->expert_load(f.m->inst, &L, &E);
    ck_assert_int_eq(routers, L);
    /* aux_weight 0: no gradient at all */
    grpo_model_zero_grad(f.m);
    b.aux_weight = 0.0f;
    ck_ok(test_forward(f.m, &b, logp, NULL, 1.0f, &err), &err);
    ck_ok(test_backward(f.m, &b, dlogp, 1.0f, &err), &err);
    for (uint32_t i = 0; i < f.m->n_params; i++) {
        float *g = test_host_floats(f.ops, f.m->grad_ptr[i], f.m->numel[i]);
        for (uint64_t k = 0; k < f.m->numel[i]; k++)
            ck_assert_msg(g[k] == 0.0f, "%s has a gradient without any loss",
                          f.m->params[i].name);
        free(g);
    }
    free(logp), free(dlogp);
    fixture_close(&f);
}
END_TEST

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
            int32_t want = ref[r * N + k], got = k < out.len[r] ? out.ids[r * N + k] : 0;
            ck_assert_msg(got == want, "%s row %d step %d: got %d, reference %d", out_name, r, k,
                          got, want);
        }
    grpo_rollout_free(&out);
    free(prompt), free(mask), free(ref);
}

START_TEST(greedy_generate_matches_reference) {
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

/* save -> reload gives identical parameters under the same Hugging Face names.
 * GRPO_TEST_KEEP_SAVED=DIR also keeps DIR/<fixture> for tools/check_hf_load.py (qwen3moe loads in
 * transformers as Qwen3MoeForCausalLM with no missing/unexpected keys). */
/* The reference model's forward, not chunked in a mixture of experts, equals the training
 * forward (frozen_forward.h). */
START_TEST(frozen_forward_in_chunks_matches_training_forward) {
    fixture tr, fr;
    fixture_open(&tr, fixtures[_i], 1);
    fixture_open(&fr, fixtures[_i], 0);
    check_frozen_forward_in_chunks(tr.m, fr.m, fixtures[_i], tr.ids, tr.mask, tr.pos, tr.targets,
                                   tr.B, tr.T, tr.V, 0);
    fixture_close(&fr);
    fixture_close(&tr);
}
END_TEST

START_TEST(save_reload_round_trip) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, fixtures[_i], 1);
    char dir[] = "/tmp/grpo_test_moe_XXXXXX";
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
    ck_ok(grpo_model_open(&m2, f.desc, &f.host, dir, NULL, 0, &err), &err);
    ck_assert_uint_eq(m2->n_params, f.m->n_params);
    for (uint32_t i = 0; i < m2->n_params; i++) {
        ck_assert_str_eq(m2->params[i].name, f.m->params[i].name);
        float *a = test_host_floats(f.ops, m2->param_ptr[i], m2->numel[i]);
        float *b = test_host_floats(f.ops, f.m->param_ptr[i], m2->numel[i]);
        ck_assert(memcmp(a, b, m2->numel[i] * 4) == 0);
        free(a), free(b);
    }
    grpo_model_close(m2);
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
    fixture_close(&f);
}
END_TEST

/* A few AdamW steps on -mean(logp) + aux (every fixture's batch): the log-likelihood of the
 * targets rises and the balance loss stays finite — the gradients train the model, router
 * included. (The trainer's own loop is tested with the trainer.) */
START_TEST(adamw_steps_raise_logp) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, fixtures[_i], 1);
    ck_ok(grpo_model_reserve_acts(f.m, f.B, f.T, &err), &err);
    grpo_batch b = full_batch(&f, 1.0f);
    int32_t n = f.B * f.T, count = 0;
    float *logp = calloc(n, sizeof(float)), *dlogp = calloc(n, sizeof(float));
    for (int32_t i = 0; i < n; i++) count += f.targets[i] >= 0;
    for (int32_t i = 0; i < n; i++) dlogp[i] = f.targets[i] >= 0 ? -1.0f / count : 0.0f;
    const grpo_ops *o = f.ops;
    double first = 0, last = 0;
    uint64_t P = f.m->section;
    float *params = f.m->block; /* the params section */
    for (int step = 1; step <= 20; step++) {
        grpo_model_zero_grad(f.m);
        ck_ok(test_forward(f.m, &b, logp, NULL, 1.0f, &err), &err);
        double mean = 0;
        for (int32_t i = 0; i < n; i++) mean += logp[i] / count;
        if (step == 1) first = mean;
        last = mean;
        ck_assert(isfinite(f.desc->aux_loss(f.m->inst)));
        ck_ok(test_backward(f.m, &b, dlogp, 1.0f, &err), &err);
        o->adamw(o->ctx, params, f.m->grads, f.m->adam_m, f.m->adam_v, P, 1e-2f, 0.9f, 0.999f,
                 1e-8f, 0.0f, step);
    }
    report("mean logp gain", f.name, last - first);
    ck_assert_msg(last > first + 0.5, "%s: mean logp %g -> %g after 20 steps", f.name, first,
                  last);
    free(logp), free(dlogp);
    fixture_close(&f);
}
END_TEST

/* [model] router_aux_coef overrides config.json's coefficient: aux_loss() scales with it. */
START_TEST(router_aux_coef_key_overrides_config) {
    fixture f;
    grpo_error err;
    grpo_error_init(&err);
    fixture_open(&f, "minimind2", 0); /* aux_loss_alpha 0.1 in config.json */
    const char *keys[] = {"router_aux_coef"}, *values[] = {"0.25"};
    grpo_config cfg = {sizeof(grpo_config), 1, keys, values, "model", NULL};
    grpo_model *m = NULL;
    ck_ok(grpo_model_open(&m, f.desc, &f.host, fixture_dir("minimind2"), &cfg, 0, &err), &err);
    ck_ok(grpo_model_reserve_acts(m, f.B, f.T, &err), &err);
    grpo_batch b = full_batch(&f, 0.0f);
    float *logp = calloc((size_t)f.B * f.T, sizeof(float));
    ck_ok(test_forward(m, &b, logp, NULL, 1.0f, &err), &err);
    float *aux = ref_tensor(&f, "aux", NULL), got = f.desc->aux_loss(m->inst);
    ck_assert_msg(fabs(got - 2.5 * aux[0]) <= 1e-5 * aux[0], "aux %g, want 2.5 x %g", got, aux[0]);
    values[0] = "zero";
    grpo_model *bad = NULL;
    ck_assert_int_eq(grpo_model_open(&bad, f.desc, &f.host, fixture_dir("minimind2"), &cfg, 0,
                                     &err), GRPO_ERR_INVALID);
    ck_assert(strstr(err.message, "router_aux_coef") != NULL);
    free(logp), free(aux);
    grpo_model_close(m);
    fixture_close(&f);
}
END_TEST

/* Lookup by architecture: MiniMindForCausalLM is served by dense and moe; dense refuses a
 * use_moe config, so the MiniMind2 MoE directory opens with moe.causal_lm; Qwen3-MoE too. */
START_TEST(open_dir_finds_the_moe_plugin) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *ops = grpo_backend_open("cpu", 1, &err);
    grpo_host host = *grpo_default_host();
    host.ops = ops;
    grpo_registry reg = {0};
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    ck_ok(grpo_registry_scan(&reg, dirs, &err), &err);
    for (int i = 0; i < N_FIXTURES; i++) {
        grpo_model *m = NULL;
        ck_ok(grpo_model_open_dir(&m, &reg, &host, fixture_dir(fixtures[i]), 0, &err), &err);
        ck_assert_str_eq(m->desc->id, "moe.causal_lm");
        grpo_model_close(m);
    }
    /* a MiniMind config both refuse: both refusals are reported */
    char dir[] = "/tmp/grpo_test_moe_XXXXXX", path[256];
    ck_assert(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"architectures\":[\"MiniMindForCausalLM\"],\"model_type\":\"minimind\","
          "\"use_moe\":true,\"num_experts\":4,\"hidden_size\":32,\"num_hidden_layers\":1,"
          "\"num_attention_heads\":4,\"vocab_size\":50}", f);
    fclose(f);
    grpo_model *m = NULL;
    ck_assert_int_eq(grpo_model_open_dir(&m, &reg, &host, dir, 0, &err), GRPO_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "dense.causal_lm") && strstr(err.message, "moe.causal_lm") &&
                      strstr(err.message, "minimind-3"), "%s", err.message);
    unlink(path), rmdir(dir);
    grpo_registry_free(&reg);
    grpo_backend_close(ops);
}
END_TEST

/* What the plugin does not implement is refused by name. */
START_TEST(unsupported_configs_are_refused) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *ops = grpo_backend_open("cpu", 1, &err);
    grpo_host host = *grpo_default_host();
    host.ops = ops;
    grpo_registry reg = {0};
    const grpo_model_desc *desc = load_desc(&reg, &host);
    grpo_config cfg = {sizeof(grpo_config), 0, NULL, NULL, "model", NULL};
#define BASE "\"hidden_size\":32,\"num_hidden_layers\":1,\"num_attention_heads\":4,\"vocab_size\":50"
    static const struct {
        const char *json, *word;
    } cases[] = {
        {"{\"model_type\":\"minimind\"," BASE "}", "use_moe"},
        {"{\"model_type\":\"minimind\",\"use_moe\":true,\"num_experts\":4," BASE "}", "minimind-3"},
        {"{\"model_type\":\"minimind\",\"use_moe\":true,\"scoring_func\":\"sigmoid\"," BASE "}",
         "scoring_func"},
        {"{\"model_type\":\"qwen3_moe\",\"num_experts\":4,\"moe_intermediate_size\":8,"
         "\"mlp_only_layers\":[0]," BASE "}", "mlp_only_layers"},
        {"{\"model_type\":\"qwen3_moe\",\"num_experts\":4,\"moe_intermediate_size\":8,"
         "\"decoder_sparse_step\":2," BASE "}", "decoder_sparse_step"},
        {"{\"model_type\":\"llama\"," BASE "}", "model_type"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        void *inst = NULL;
        ck_assert_int_eq(desc->create(&host, cases[i].json, &cfg, &inst, &err),
                         GRPO_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(err.message, cases[i].word) != NULL, "case %zu: %s", i,
                      err.message);
    }
    /* too many experts for the router's per-token arrays */
    void *big = NULL;
    const char *many = "{\"model_type\":\"qwen3_moe\",\"num_experts\":100000,"
                       "\"moe_intermediate_size\":8," BASE "}";
    ck_assert_int_eq(desc->create(&host, many, &cfg, &big, &err), GRPO_ERR_UNSUPPORTED);
    ck_assert(strstr(err.message, "experts") != NULL);
    /* num_experts_per_tok > experts is invalid */
    void *inst = NULL;
    const char *bad = "{\"model_type\":\"qwen3_moe\",\"num_experts\":2,\"num_experts_per_tok\":3,"
                      "\"moe_intermediate_size\":8," BASE "}";
    ck_assert_int_eq(desc->create(&host, bad, &cfg, &inst, &err), GRPO_ERR_INVALID);
    /* MiniMind2 defaults: 4 experts, 1 shared, intermediate 64*ceil(8/3*32/64) = 128, tied */
    const char *mm = "{\"model_type\":\"minimind\",\"use_moe\":true," BASE "}";
    ck_ok(desc->create(&host, mm, &cfg, &inst, &err), &err);
    uint32_t n = desc->n_params(inst);
    ck_assert_uint_eq(n, 1 + (7 + 5 * 3) + 2); /* embed, layer (ln1 q k v o ln2 gate + 15), norm, head */
    grpo_param_desc d = {sizeof d, NULL, 0, {0}, 0, 0};
    desc->param(inst, n - 1, &d);
    ck_assert(d.flags & GRPO_PARAM_TIED);
    desc->param(inst, n - 3, &d);
    ck_assert_str_eq(d.name, "model.layers.0.mlp.shared_experts.0.down_proj.weight");
    ck_assert_int_eq(d.shape[1], 128);
    desc->destroy(inst);
#undef BASE
    grpo_registry_free(&reg);
    grpo_backend_close(ops);
}
END_TEST

/* The row ops on a hand-computable case with a repeated index. */
START_TEST(row_ops_gather_and_weighted_scatter) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *o = grpo_backend_open("cpu", 2, &err);
    float inp[3 * 2] = {1, 2, 3, 4, 5, 6}, g[4 * 2];
    int32_t idx[4] = {2, 0, 2, 1};
    o->gather_rows(o->ctx, g, inp, idx, 4, 2);
    float want_g[8] = {5, 6, 1, 2, 5, 6, 3, 4};
    for (int i = 0; i < 8; i++) ck_assert(g[i] == want_g[i]);
    float out[3 * 2] = {0}, w[4] = {0.5f, 2.0f, 1.0f, -1.0f};
    o->scatter_add_rows(o->ctx, out, g, idx, w, 4, 2);
    float want_o[6] = {2, 4, -3, -4, 7.5f, 9};
    for (int i = 0; i < 6; i++) ck_assert(out[i] == want_o[i]);
    float dinp[8], dw[4], dout[6] = {1, 0, 0, 1, 1, 1};
    o->scatter_add_rows_backward(o->ctx, dinp, dw, dout, g, idx, w, 4, 2);
    float want_d[8] = {0.5f, 0.5f, 2, 0, 1, 1, 0, -1}, want_w[4] = {11, 1, 11, 4};
    for (int i = 0; i < 8; i++) ck_assert(dinp[i] == want_d[i]);
    for (int i = 0; i < 4; i++) ck_assert(dw[i] == want_w[i]);
    grpo_backend_close(o);
}
END_TEST

int main(void) {
    test_backend_require();
    Suite *s = suite_create("moe");
    TCase *tc = tcase_create("reference parity");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, logp_aux_and_load_match_reference, 0, N_FIXTURES);
    tcase_add_loop_test(tc, prefill_logits_match_reference, 0, N_FIXTURES);
    tcase_add_loop_test(tc, decode_logits_match_reference, 0, N_FIXTURES);
    tcase_add_loop_test(tc, every_gradient_matches_reference, 0, N_FIXTURES);
    tcase_add_loop_test(tc, aux_gradient_alone_matches_reference, 0, N_FIXTURES);
    tcase_add_loop_test(tc, greedy_generate_matches_reference, 0, N_FIXTURES);
    tcase_add_loop_test(tc, adamw_steps_raise_logp, 0, N_FIXTURES);
    tcase_add_loop_test(tc, frozen_forward_in_chunks_matches_training_forward, 0, N_FIXTURES);
    tcase_add_loop_test(tc, save_reload_round_trip, 0, N_FIXTURES);
    tcase_add_test(tc, router_aux_coef_key_overrides_config);
    tcase_add_test(tc, open_dir_finds_the_moe_plugin);
    tcase_add_test(tc, unsupported_configs_are_refused);
    tcase_add_test(tc, row_ops_gather_and_weighted_scatter);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
