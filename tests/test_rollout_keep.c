/*
 * test_rollout_keep.c — the rollout's activations reused by the training forward
 * (train.reuse_rollout; grpo/model.h keep_rollout, 1.10): the sampler's prefill and decode
 * (grpo_sampler_opts.keep) write what the training forward of their rows keeps into the model's
 * keep block, and a forward of those rows with grpo_batch.kept = 1 takes it instead of running
 * its layers again.
 *
 * For each fixture (llama; qwen3: q/k norm, tied head; a model of head dim 64; llama and qwen3
 * as frozen bases under their peft LoRA adapters, tests/fixtures/lora): G rows per
 * prompt decode at temperature 0.8, ending at different steps before max_new (the sampler's
 * end_at hook), with the keep armed. Then, for the training batch as wide as its longest
 * completion (the trainer's, narrower than the keep when no row ran to max_new) and as wide as
 * max_new:
 *   - the kept forward's log-probs and entropies, and every parameter gradient of a backward
 *     from it (the adapters' with LoRA), have the bits of a forward that computes the layers
 *     (memcmp), and its log-probs are the sampler's;
 *   - with LoRA, the reference's pass (the base, adapters off) between the rollout and the
 *     kept forward leaves the keep (its log-probs differ from the adapted model's: the
 *     adapters count), and a kept forward with LoRA dropout on is refused;
 *   - the kept forward reads the rollout, not the layers: with a layer-0 weight changed after
 *     the rollout, a computing forward's log-probs move and the kept forward's do not;
 *   - what the rollout does not write (the keep block is NaN before it) reaches no result;
 *   - a kept forward is refused once the keep is consumed, and keep_rollout refuses a
 *     prefix_of that does not run over consecutive rows.
 *
 * The LoRA reference decoded beside the rollout (grpo_sampler_opts.ref_logp; grpo/model.h
 * set_lora_rows, 1.11), for both LoRA fixtures, with the keep armed and not: the same rollout
 * with its reference rows has the same completions (ids, lengths, log-probs) as without; each
 * token's reference log-prob (grpo_rollout.rlogp) has the bits of the reference forward (the
 * base, adapters off) of the training batch, as the rows end apart (the reference rows leave
 * with theirs); a kept rollout is still the computing forward's. MoE packs refuse
 * set_lora_rows (their experts run gathered rows).
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
#include "host/sampler.h"
#include "host/sampling.h"
#include "kernels.h"

enum { NP = 2, G = 3, TN = 10, P = 7, N = NP * G, TMAX = P + TN };
static const float SCALE = 1.25f; /* 1 / temperature 0.8 */

typedef struct fixture {
    grpo_ops *ops;
    grpo_host host;
    grpo_registry reg;
    grpo_model *m;
    grpo_lora lora; /* adapters on a frozen base, or none (lora.n 0) */
} fixture;

static void ck_ok(int rc, const grpo_error *err) {
    ck_assert_msg(rc == GRPO_OK, "status %d: %s", rc, err->message);
}

static uint32_t lcg(uint32_t *s) { return (*s = *s * 1103515245u + 12345u) >> 8; }

/* The model of dir; lora: the peft adapters of tests/fixtures/lora/LORA on it, frozen (NULL: a
 * trainable model). */
static void fixture_open(fixture *f, const char *dir, const char *lora) {
    grpo_error err;
    grpo_error_init(&err);
    memset(f, 0, sizeof *f);
    f->ops = grpo_backend_open("cpu", 1, &err);
    ck_assert_msg(f->ops != NULL, "%s", err.message);
    f->host = *grpo_default_host();
    f->host.ops = f->ops;
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    ck_ok(grpo_registry_scan(&f->reg, dirs, &err), &err);
    ck_ok(grpo_model_open_dir(&f->m, &f->reg, &f->host, dir, lora == NULL, &err), &err);
    if (!lora) return;
    grpo_lora_opts o = {4, 8.0, strcmp(lora, "qwen3") == 0, "all-linear", 0.0};
    char ldir[4096];
    snprintf(ldir, sizeof ldir, "%s/tests/fixtures/lora/%s", GRPO_SOURCE_DIR, lora);
    ck_ok(grpo_lora_attach(&f->lora, f->m, &o, 1, &err), &err);
    ck_ok(grpo_lora_load(&f->lora, ldir, &err), &err);
}

static void fixture_close(fixture *f) {
    grpo_lora_free(&f->lora);
    grpo_model_close(f->m);
    grpo_registry_free(&f->reg);
    grpo_backend_close(f->ops);
}

/* The training batch of the rollout's rows (seqbatch.c's layout): prompts left-padded to P,
 * completions right-padded to tc; completion token c of row n is the target at P + c - 1. */
typedef struct batch {
    int32_t T;
    int32_t ids[N * TMAX], mask[N * TMAX], pos[N * TMAX], targets[N * TMAX];
} batch;

static void batch_make(batch *b, int32_t tc, const int32_t *prompt, const int32_t *pmask,
                       const grpo_rollout *ro) {
    memset(b, 0, sizeof *b);
    int32_t T = b->T = P + tc;
    for (int32_t n = 0; n < N; n++) {
        int32_t *ids = b->ids + n * T, *mk = b->mask + n * T, *tg = b->targets + n * T;
        for (int32_t c = 0; c < P; c++)
            ids[c] = prompt[(n / G) * P + c], mk[c] = pmask[(n / G) * P + c];
        for (int32_t c = 0; c < ro->len[n]; c++) ids[P + c] = ro->ids[n * TN + c], mk[P + c] = 1;
        for (int32_t c = 0; c < T; c++) tg[c] = -1;
        for (int32_t c = 0; c < ro->len[n]; c++) tg[P + c - 1] = ro->ids[n * TN + c];
        for (int32_t c = 0, k = 0; c < T; c++) b->pos[n * T + c] = mk[c] ? k++ : 0;
    }
}

typedef struct pass {
    float logp[N * TMAX], ent[N * TMAX];
    float *grads;
} pass;

/* The gradients a backward writes: the adapters' with LoRA, else the model's. */
static float *grads_of(const fixture *f) {
    return f->lora.n ? f->lora.block + f->lora.floats : f->m->grads;
}
static uint64_t grad_floats(const fixture *f) {
    return f->lora.n ? f->lora.floats : f->m->section;
}

static int same_at_targets(const batch *b, const float *x, const float *y);

/* The kept (kept = 1) or computing forward of b, then (dlogp not NULL) the backward of dlogp:
 * log-probs, entropies, gradients into out. */
static int pass_run(fixture *f, const batch *b, int kept, const float *dlogp, pass *out,
                    grpo_error *err) {
    grpo_batch gb = {sizeof(grpo_batch), N, b->T, b->ids, b->mask, b->pos, b->targets, 0.0f,
                     kept};
    memset(out->logp, 0, sizeof out->logp), memset(out->ent, 0, sizeof out->ent);
    int rc = kept ? GRPO_OK : grpo_model_reserve_acts(f->m, N, b->T, err);
    if (rc == GRPO_OK) rc = grpo_model_forward(f->m, &gb, out->logp, out->ent, SCALE, err);
    if (rc != GRPO_OK || !dlogp) return rc;
    if (f->lora.n)
        grpo_lora_zero_grad(&f->lora);
    else
        grpo_model_zero_grad(f->m);
    rc = grpo_model_backward(f->m, &gb, dlogp, SCALE, err);
    if (rc == GRPO_OK) memcpy(out->grads, grads_of(f), grad_floats(f) * sizeof(float));
    return rc;
}

/* With LoRA: the KL reference's pass between the rollout and the kept forward (the trainer's
 * order): the base model's forward of b, adapters off, which must leave the keep; its
 * log-probs must differ from the adapted model's (adapted), or the adapters prove nothing. */
static void reference_pass(fixture *f, const batch *b, const float *adapted, const char *dir) {
    grpo_error err;
    grpo_error_init(&err);
    pass *r = calloc(1, sizeof *r);
    ck_ok(grpo_lora_enable(&f->lora, 0, &err), &err);
    ck_ok(pass_run(f, b, 0, NULL, r, &err), &err);
    ck_ok(grpo_lora_enable(&f->lora, 1, &err), &err);
    ck_assert_msg(!same_at_targets(b, r->logp, adapted),
                  "%s: the base's log-probs are the adapted model's: LoRA proves nothing", dir);
    free(r);
}

static void rollout_ref(fixture *f, grpo_sampler_opts *o, int keep, int ref,
                        const int32_t *prompt, const int32_t *pmask, grpo_rollout *ro);

/* The rollout of the prompts (seed 5), its rows' activations kept (keep) or not. The keep
 * block is NaN before a kept rollout: what it does not write must not reach the results. */
static void rollout(fixture *f, grpo_sampler_opts *o, int keep, const int32_t *prompt,
                    const int32_t *pmask, grpo_rollout *ro) {
    rollout_ref(f, o, keep, 0, prompt, pmask, ro);
}

/* A run with the base's reference rows (ref) or without. */
static void rollout_ref(fixture *f, grpo_sampler_opts *o, int keep, int ref,
                        const int32_t *prompt, const int32_t *pmask, grpo_rollout *ro) {
    grpo_error err;
    grpo_error_init(&err);
    if (keep) {
        int32_t prefix_of[N];
        for (int32_t n = 0; n < N; n++) prefix_of[n] = n / G;
        grpo_rollout_keep k;
        ck_ok(grpo_model_keep_for(f->m, N, P, TN, NP, prefix_of, &k, &err), &err);
        for (uint64_t i = 0; i < f->m->keep_bytes / sizeof(float); i++) k.acts[i] = NAN;
    }
    grpo_rng rng[N]; /* one stream a row, as the trainer's */
    for (int32_t n = 0; n < N; n++) grpo_rng_seed_stream(&rng[n], 5, 0, (uint64_t)n);
    grpo_rollout_free(ro);
    memset(ro, 0, sizeof *ro);
    o->keep = keep, o->ref_logp = ref;
    grpo_sampler_batch q = {prompt, pmask, NP, P, rng, NULL, ro};
    grpo_sampler_stats st;
    ck_ok(grpo_sampler_run_queue(f->m, o, &q, 1, 0, &st, &err), &err);
    o->ref_logp = 0;
    ck_assert_int_eq(st.kept, keep);
    ck_assert_int_eq(st.ref_rows, ref);
    ck_assert(ref ? ro->rlogp != NULL : ro->rlogp == NULL);
}

/* Whether x and y hold the same bits at b's completion positions. */
static int same_at_targets(const batch *b, const float *x, const float *y) {
    for (int32_t i = 0; i < N * b->T; i++)
        if (b->targets[i] >= 0 && memcmp(&x[i], &y[i], sizeof x[i]) != 0) return 0;
    return 1;
}

/* Layer 0's up_proj weight times s. */
static void scale_weight(fixture *f, float s) {
    grpo_error err;
    grpo_error_init(&err);
    int wi = grpo_model_param_index(f->m, "model.layers.0.mlp.up_proj.weight");
    ck_assert_int_ge(wi, 0);
    uint64_t wn = f->m->numel[wi];
    float *w = malloc(wn * sizeof(float));
    ck_ok(grpo_model_read_param(f->m, (uint32_t)wi, w, &err), &err);
    for (uint64_t i = 0; i < wn; i++) w[i] *= s;
    ck_ok(grpo_model_write_param(f->m, (uint32_t)wi, w, &err), &err);
    free(w);
}

/* The checks of the file's header on the batch of width tc. */
static void keep_width(fixture *f, grpo_sampler_opts *o, int32_t tc, const int32_t *prompt,
                       const int32_t *pmask, const char *dir) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_rollout ro = {0};
    rollout(f, o, 1, prompt, pmask, &ro);
    batch b;
    batch_make(&b, tc, prompt, pmask, &ro);
    uint32_t r = 7;
    float dlogp[N * TMAX];
    for (int32_t i = 0; i < N * b.T; i++)
        dlogp[i] = b.targets[i] >= 0 ? (float)(lcg(&r) % 2001) / 1000.0f - 1.0f : 0.0f;
    pass *a = calloc(1, sizeof *a), *c = calloc(1, sizeof *c);
    const uint64_t ng = grad_floats(f);
    a->grads = malloc(ng * sizeof(float));
    c->grads = malloc(ng * sizeof(float));
    const int lora = f->lora.n > 0;
    if (lora) { /* the adapted log-probs to tell the base's from: the sampler's */
        float sampled[N * TMAX] = {0};
        for (int32_t n = 0; n < N; n++)
            for (int32_t t = 0; t < ro.len[n]; t++)
                sampled[n * b.T + P + t - 1] = ro.plogp[n * TN + t];
        reference_pass(f, &b, sampled, dir);
    }
    ck_ok(pass_run(f, &b, 1, dlogp, a, &err), &err);
    ck_ok(pass_run(f, &b, 0, dlogp, c, &err), &err);
    ck_assert_msg(same_at_targets(&b, a->logp, c->logp), "%s width %d: log-probs differ", dir,
                  tc);
    ck_assert_msg(same_at_targets(&b, a->ent, c->ent), "%s width %d: entropies differ", dir, tc);
    int nonzero = 0;
    for (uint64_t i = 0; i < ng; i++) nonzero |= c->grads[i] != 0.0f;
    ck_assert_msg(nonzero, "%s: all gradients 0: the comparison would prove nothing", dir);
    ck_assert_msg(memcmp(a->grads, c->grads, ng * sizeof(float)) == 0,
                  "%s width %d: gradients from the kept forward differ", dir, tc);
    for (int32_t n = 0; n < N; n++)
        for (int32_t t = 0; t < ro.len[n]; t++) {
            float got = ro.plogp[n * TN + t], want = a->logp[n * b.T + P + t - 1];
            ck_assert_msg(memcmp(&got, &want, sizeof got) == 0,
                          "%s row %d token %d: sampler %.9g, kept forward %.9g", dir, n, t,
                          (double)got, (double)want);
        }
    /* consumed: a second kept forward is refused */
    grpo_error_init(&err);
    ck_assert_int_eq(pass_run(f, &b, 1, NULL, c, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "no rollout was kept") != NULL, "%s", err.message);
    if (lora) { /* LoRA dropout on (a training pass's): the kept rollout is not its forward
                 * (refused twice over: the keep checks it, and dropout turns the prefix off) */
        rollout(f, o, 1, prompt, pmask, &ro);
        f->lora.dropout = 0.25;
        ck_ok(grpo_lora_dropout(&f->lora, 1, 3, &err), &err);
        grpo_error_init(&err);
        ck_assert_int_eq(pass_run(f, &b, 1, NULL, c, &err), GRPO_ERR_INVALID);
        ck_ok(grpo_lora_dropout(&f->lora, 0, 0, &err), &err);
        f->lora.dropout = 0.0;
    }
    /* it reads the rollout: a layer weight changed after it moves only a computing forward */
    rollout(f, o, 1, prompt, pmask, &ro);
    scale_weight(f, 1.5f);
    ck_ok(pass_run(f, &b, 1, NULL, c, &err), &err);
    ck_assert_msg(same_at_targets(&b, a->logp, c->logp), "%s: the kept forward moved", dir);
    ck_ok(pass_run(f, &b, 0, NULL, c, &err), &err);
    ck_assert_msg(!same_at_targets(&b, a->logp, c->logp),
                  "%s: the changed weight moved nothing: the check proves nothing", dir);
    scale_weight(f, 1.0f / 1.5f);
    free(a->grads), free(c->grads), free(a), free(c);
    grpo_rollout_free(&ro);
}

/* The prompts of the cases (lengths 5 and 7, left-padded to P) and the sampler's options: G
 * rows per prompt at temperature 0.8 that end apart (end_at), all before max_new. */
static grpo_sampler_opts case_setup(const fixture *f, int32_t *prompt, int32_t *pmask) {
    const int32_t pl[NP] = {5, 7};
    uint32_t r = 99;
    memset(prompt, 0, NP * P * sizeof *prompt), memset(pmask, 0, NP * P * sizeof *pmask);
    for (int32_t j = 0; j < NP; j++)
        for (int32_t c = P - pl[j]; c < P; c++)
            prompt[j * P + c] = (int32_t)(lcg(&r) % (uint32_t)(grpo_model_vocab(f->m) - 1)) + 1,
                       pmask[j * P + c] = 1;
    grpo_sampler_opts o = {{0.8f, 0, 1.0f, 0.0f, 1.0f}, G, TN, {0}, 0, 0, 1,
                           NULL, NULL, NULL, 0, 0};
    static const int32_t end_at[G] = {3, 8, 6};
    o.end_at = end_at, o.eos[0] = 1, o.n_eos = 1;
    return o;
}

static void keep_case(const char *dir, const char *lora) {
    fixture f;
    fixture_open(&f, dir, lora);
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_msg(grpo_model_can_keep_rollout(f.m), "%s: no keep_rollout", dir);
    int32_t prompt[NP * P], pmask[NP * P];
    grpo_sampler_opts o = case_setup(&f, prompt, pmask);
    grpo_rollout ro = {0};
    rollout(&f, &o, 0, prompt, pmask, &ro);
    int32_t shortest = TN, longest = 0;
    for (int32_t n = 0; n < N; n++)
        shortest = ro.len[n] < shortest ? ro.len[n] : shortest,
        longest = ro.len[n] > longest ? ro.len[n] : longest;
    ck_assert_msg(shortest < longest, "%s: every row ran as long", dir);
    ck_assert_msg(longest < TN, "%s: a row ran to max_new: the narrower batch is not tried", dir);
    grpo_rollout_free(&ro);
    ck_ok(grpo_model_set_shared_prefix(f.m, P, &err), &err);
    keep_width(&f, &o, longest, prompt, pmask, dir); /* the trainer's: narrower than the keep */
    keep_width(&f, &o, TN, prompt, pmask, dir);
    /* a prefix_of that jumps is refused */
    int32_t bad[N], row_of[N];
    for (int32_t n = 0; n < N; n++) bad[n] = n / G * 2, row_of[n] = n;
    grpo_rollout_keep wrong;
    ck_ok(grpo_model_keep_for(f.m, N, P, TN, NP, bad, &wrong, &err), &err);
    wrong.row_of = row_of;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_model_keep_rollout(f.m, &wrong, &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "prefix_of") != NULL, "%s", err.message);
    fixture_close(&f);
}

/* A model of head dim 64 made by `grpo init-model` into the build tree. */
static const char *model_hd64(void) {
    static char dir[4096];
    char cmd[3 * 4096];
    snprintf(dir, sizeof dir, "%s/tests/rollout_keep_models/hd64", GRPO_BINARY_DIR);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && '%s/grpo' init-model '%s' --hidden 128 --heads 2 "
             "--kv-heads 1 --layers 2 --seed 5 >/dev/null", dir, GRPO_BINARY_DIR, dir);
    ck_assert_msg(system(cmd) == 0, "%s: failed", cmd);
    return dir;
}

START_TEST(kept_forward_is_the_computing_forward) {
    char dir[4096];
    static const char *const bases[] = {"dense/llama", "dense/qwen3"};
    static const char *const loras[] = {"llama", "qwen3"};
    if (_i == 2)
        snprintf(dir, sizeof dir, "%s", model_hd64());
    else
        snprintf(dir, sizeof dir, "%s/tests/fixtures/%s", GRPO_SOURCE_DIR, bases[_i % 3]);
    keep_case(dir, _i >= 3 ? loras[_i - 3] : NULL); /* 3, 4: the bases of 0, 1 with LoRA */
}
END_TEST

/* The checks of the header's second paragraph, on the LoRA fixture lora over its base. */
static void ref_rows_case(const char *lora, int keep) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/dense/%s", GRPO_SOURCE_DIR, lora);
    fixture f;
    fixture_open(&f, dir, lora);
    grpo_error err;
    grpo_error_init(&err);
    int32_t prompt[NP * P], pmask[NP * P];
    grpo_sampler_opts o = case_setup(&f, prompt, pmask);
    ck_ok(grpo_model_set_shared_prefix(f.m, P, &err), &err);
    grpo_rollout plain = {0}, ro = {0};
    rollout_ref(&f, &o, keep, 0, prompt, pmask, &plain);
    rollout_ref(&f, &o, keep, 1, prompt, pmask, &ro);
    int32_t longest = 0;
    for (int32_t n = 0; n < N; n++) longest = ro.len[n] > longest ? ro.len[n] : longest;
    ck_assert_msg(memcmp(plain.len, ro.len, sizeof ro.len[0] * N) == 0 &&
                      memcmp(plain.ids, ro.ids, sizeof ro.ids[0] * N * TN) == 0 &&
                      memcmp(plain.logp, ro.logp, sizeof ro.logp[0] * N * TN) == 0 &&
                      memcmp(plain.plogp, ro.plogp, sizeof ro.plogp[0] * N * TN) == 0,
                  "%s: the reference rows changed the completions", lora);
    batch b;
    batch_make(&b, longest, prompt, pmask, &ro);
    pass *ref = calloc(1, sizeof *ref), *kept = calloc(1, sizeof *kept);
    pass *full = calloc(1, sizeof *full);
    ck_ok(grpo_lora_enable(&f.lora, 0, &err), &err); /* the reference forward: adapters off */
    ck_ok(pass_run(&f, &b, 0, NULL, ref, &err), &err);
    ck_ok(grpo_lora_enable(&f.lora, 1, &err), &err);
    int differ = 0;
    for (int32_t n = 0; n < N; n++)
        for (int32_t t = 0; t < ro.len[n]; t++) {
            float got = ro.rlogp[n * TN + t], want = ref->logp[n * b.T + P + t - 1];
            ck_assert_msg(memcmp(&got, &want, sizeof got) == 0,
                          "%s row %d token %d: decoded reference %.9g, reference forward %.9g",
                          lora, n, t, (double)got, (double)want);
            differ |= got != ro.plogp[n * TN + t];
        }
    ck_assert_msg(differ, "%s: the reference is the adapted model: the check proves nothing",
                  lora);
    if (keep) { /* the reference rows are not kept: the kept forward is still the policy's */
        ck_ok(pass_run(&f, &b, 1, NULL, kept, &err), &err);
        ck_ok(pass_run(&f, &b, 0, NULL, full, &err), &err);
        ck_assert_msg(same_at_targets(&b, kept->logp, full->logp) &&
                          same_at_targets(&b, kept->ent, full->ent),
                      "%s: the kept forward differs beside reference rows", lora);
    }
    free(ref), free(kept), free(full);
    grpo_rollout_free(&plain), grpo_rollout_free(&ro);
    fixture_close(&f);
}

START_TEST(reference_rows_are_the_reference_forward) {
    ref_rows_case(_i % 2 ? "qwen3" : "llama", _i / 2);
}
END_TEST

/* An MoE pack runs its experts on gathered rows: it refuses set_lora_rows (the sampler then
 * leaves the reference to its forward); every row again (n < 0) is no change. */
START_TEST(moe_refuses_lora_rows) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/moe/qwen3moe", GRPO_SOURCE_DIR);
    fixture f;
    fixture_open(&f, dir, NULL);
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_model_set_lora_rows(f.m, 2, &err), GRPO_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "set_lora_rows") != NULL, "%s", err.message);
    grpo_error_init(&err);
    ck_ok(grpo_model_set_lora_rows(f.m, -1, &err), &err);
    fixture_close(&f);
}
END_TEST

int main(void) {
    Suite *s = suite_create("rollout_keep");
    TCase *tc = tcase_create("rollout_keep");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, kept_forward_is_the_computing_forward, 0, 5);
    tcase_add_loop_test(tc, reference_rows_are_the_reference_forward, 0, 4);
    tcase_add_test(tc, moe_refuses_lora_rows);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
