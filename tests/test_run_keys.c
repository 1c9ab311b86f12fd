/*
 * test_run_keys.c — every run-file key that selects a training path is seen to take it: a short
 * `grpo train` (2 steps of the tiny model, GRPO_BINARY_DIR/grpo) with the key against the same
 * run without it.
 *   - keys that change the maths (loss types and their normalisers, GSPO's sequence-level ratio,
 *     the top-entropy mask, dynamic sampling, GDPO, the importance weights of a bf16 rollout
 *     copy, a LoRA base held in bf16, over-sampling, a step's token budget): the gradient
 *     (grad_norm of step 1 or 2) differs from the plain run's by more than fp32 rounding (1e-4
 *     relative; the same run repeats bit for bit, test_trainer.c). A key the trainer ignored
 *     would give the plain run's numbers. Keys that only act off-policy (GSPO, sapo, cispo: at
 *     ratio 1 they give the plain gradient) run with num_iterations = 2 on both sides, so step 2
 *     is off-policy;
 *   - where a metric says the path ran (frac_groups_dropped, the bf16 copy's log-prob
 *     difference, over-sampling's aborted tokens, the rows a token budget cut), it is there and
 *     not 0;
 *   - the sampler's log-probs are compared with training's on every run (fp32: rounding only);
 *   - train.max_tokens_per_microbatch (packed micro-batches) removes the padding
 *     (train/padding_frac 0) and leaves the update the padded run's, to fp32 rounding;
 *   - keys that must not change the results: train.gradient_checkpointing shrinks the policy's
 *     activation bytes per token (metric perf/activation_bytes_per_token; that the results stay
 *     the same is test_trainer.c's); train.shared_prefix is test_trainer.c's (it agrees with the
 *     plain path to rounding, and differs from it in the last bits, which shows it ran).
 *   - the bf16-compute keys (CPUs with avx512_bf16; skipped elsewhere, where test_gemm_bf16.c
 *     and the bad_inputs cases show the refusal): grpo.ref_compute_dtype = bf16 makes the KL of
 *     step 1 (policy = reference) > 0, where the fp32 reference gives exactly 0;
 *     sampling.compute_dtype = bf16 changes the sampler's log-probs: their mean difference from
 *     training's (sampling_logp_difference, > 0) differs from the bf16 copy's computed in fp32 by
 *     more than rounding (the same run repeats bit for bit), the importance ratio is not 1; the
 *     loss, KL and grad_norm stay finite; train.compute_dtype = bf16 makes the KL of step 1 > 0
 *     and training's log-probs differ from the (fp32) sampler's, and leaves step 1's grad_norm
 *     within 2 % of fp32's, not equal to it.
 *   - sampling.max_live_rows (continuous decode): with grad_accum = 2 the default (one chunk's
 *     16 rows) refills the decode batch with the second chunk's rows (sampling/refills > 0,
 *     sampling/live_rows_max 16); a cap of 3 keeps sampling/live_rows_max at 3 or less; every
 *     metric of the results (rewards, lengths, loss, grad_norm) is the same bits in both (a row's
 *     tokens do not depend on the schedule: test_continuous_decode.c).
 *   - sampling.continuous = false: with grad_accum = 2 each chunk decodes alone (refills 0,
 *     live_rows_max 16), the results the same bits as the default's.
 * Whether each path is right is the business of test_loss.c, test_advantage.c, test_recompute.c,
 * test_shared_prefix.c and test_trainer.c; this file only shows that the key reaches it.
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpo_cli_test.h"
#include "kernels.h"

static char tmp[256];

static void setup(void) { tiny_model_dir(tmp, sizeof tmp, "run_keys"); }

static void teardown(void) { sh("rm -rf '%s'", tmp); }

/* Trains name.ini for 2 steps: the tiny model, 4 prompts x 4 completions in micro-batches of 3,
 * two rewards (the accuracy, 0 here, and a length window that splits about half the groups),
 * sampling keys sampling_extra, [grpo] keys grpo_extra (which may open further sections after
 * it), and --set set unless NULL. Its metrics.jsonl path into metrics. */
static void key_run_sets3(const char *name, const char *sampling_extra, const char *grpo_extra,
                          const char *set, const char *set2, const char *set3, char *metrics,
                          size_t size) {
    char path[512], log[512];
    snprintf(path, sizeof path, "%s/%s.ini", tmp, name);
    FILE *f = fopen(path, "w");
    ck_assert(f != NULL);
    fprintf(f,
            "[model]\npath = %s/model\n[data]\npath = %s/examples/arith/train.jsonl\n"
            "[sampling]\nnum_generations = 4\nmax_completion_length = 12\n%s"
            "[grpo]\n%s"
            "[optim]\nlr = 1e-2\n"
            "[train]\nsteps = 2\nbatch_prompts = 4\nmicro_batch = 3\nseed = 7\nthreads = 1\n"
            "[log]\ndir = %s/%s\n[checkpoint]\ndir = %s/%s/ckpt\nevery = 0\n"
            "[reward.acc]\nplugin = builtin.accuracy\n"
            "[reward.short]\nplugin = builtin.length\nmin_chars = 0\nmax_chars = 10\n"
            "inside = 1\noutside = 0\n",
            tmp, GRPO_SOURCE_DIR, sampling_extra, grpo_extra, tmp, name, tmp, name);
    fclose(f);
    snprintf(log, sizeof log, "%s/%s.log", tmp, name);
    char *args[] = {"grpo", "train", path, "--plugin-path", GRPO_PACK_BUILD_DIR,
                    NULL,   NULL,    NULL, NULL,           NULL, NULL, NULL};
    if (set) args[5] = "--set", args[6] = (char *)set;
    if (set && set2) args[7] = "--set", args[8] = (char *)set2;
    if (set && set2 && set3) args[9] = "--set", args[10] = (char *)set3;
    ck_assert_msg(run_grpo(log, args) == 0, "run %s failed, see %s", name, log);
    snprintf(metrics, size, "%s/%s/metrics.jsonl", tmp, name);
}

/* key_run_sets3 with two --set at most. */
static void key_run_sets(const char *name, const char *sampling_extra, const char *grpo_extra,
                         const char *set, const char *set2, char *metrics, size_t size) {
    key_run_sets3(name, sampling_extra, grpo_extra, set, set2, NULL, metrics, size);
}

/* key_run_sets with one --set at most. */
static void key_run(const char *name, const char *sampling_extra, const char *grpo_extra,
                    const char *set, char *metrics, size_t size) {
    key_run_sets(name, sampling_extra, grpo_extra, set, NULL, metrics, size);
}

/* Metric name of step in a metrics.jsonl; NaN when the line has no such metric. */
static double metric_at(const char *path, const char *name, int step) {
    char *text = slurp(path), *save = NULL;
    ck_assert_msg(text != NULL, "missing %s", path);
    double v = NAN;
    int found = 0;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(l);
        ck_assert_msg(j != NULL, "%s: not JSON: %s", path, l);
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "step");
        if (cJSON_IsNumber(s) && s->valueint == step) {
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, name);
            found = 1;
            if (cJSON_IsNumber(x)) v = x->valuedouble;
        }
        cJSON_Delete(j);
    }
    free(text);
    ck_assert_msg(found, "%s: no step %d", path, step);
    return v;
}

/* Whether a and b differ by more than rounding: 1e-4 relative to the larger. */
static int differs(double a, double b) { return fabs(a - b) > 1e-4 * fmax(fabs(a), fabs(b)); }

/* Metrics names[0..n) at step s are the same bits in both runs' files (a schedule that must not
 * change the results: `keyed` names the key in the message). */
static void ck_same_bits(const char *plain, const char *keyed, const char *const *names, size_t n,
                         int s, const char *key) {
    for (size_t k = 0; k < n; k++) {
        double a = metric_at(plain, names[k], s), b = metric_at(keyed, names[k], s);
        ck_assert_msg(memcmp(&a, &b, sizeof a) == 0, "step %d: %s %.17g with %s, %.17g with "
                      "the default", s, names[k], b, key, a);
    }
}

/* A key that changes the maths: the run with sampling/grpo keys `key` against the run with
 * `plain`; ran, when not NULL, a metric the keyed run logs > 0 at step 1 or 2 when its path ran. */
typedef struct key_case {
    const char *what;
    const char *plain_sampling, *plain_grpo;
    const char *key_sampling, *key_grpo;
    const char *ran;
} key_case;

#define OFF "num_iterations = 2\n"
static const key_case maths_keys[] = {
    {"loss_type = grpo", "", "loss_type = dapo\n", "", "loss_type = grpo\n", NULL},
    {"loss_type = bnpo", "", "loss_type = dapo\n", "", "loss_type = bnpo\n", NULL},
    {"loss_type = dr_grpo", "", "loss_type = dapo\n", "", "loss_type = dr_grpo\n", NULL},
    {"loss_type = cispo", "", "loss_type = dapo\n" OFF, "", "loss_type = cispo\n" OFF,
     "cispo_clip_ratio"},
    {"loss_type = sapo", "", "loss_type = grpo\n" OFF, "", "loss_type = sapo\n" OFF, NULL},
    {"importance_sampling_level = sequence", "", "loss_type = grpo\n" OFF, "",
     "loss_type = grpo\nimportance_sampling_level = sequence\n" OFF, NULL},
    {"top_entropy_quantile = 0.5", "", "loss_type = dapo\n", "",
     "loss_type = dapo\ntop_entropy_quantile = 0.5\n", NULL},
    {"drop_zero_std_groups = true", "", "loss_type = dapo\nbeta = 0.04\n", "",
     "loss_type = dapo\nbeta = 0.04\ndrop_zero_std_groups = true\n", "frac_groups_dropped"},
    {"reward_aggregation = normalize_then_sum", "", "loss_type = dapo\n", "",
     "loss_type = dapo\nreward_aggregation = normalize_then_sum\n", NULL},
    /* the importance weights: capped at 0.5 (ratios sit near 1) they halve each token's term */
    {"sampling.is_cap = 0.5 (bf16 rollout)", "weights_dtype = bf16\nis_mode = token_truncate\n",
     "loss_type = dapo\n", "weights_dtype = bf16\nis_mode = token_truncate\nis_cap = 0.5\n",
     "loss_type = dapo\n", "sampling/importance_sampling_ratio/clipped_frac"},
    {"sampling.weights_dtype = bf16", "", "loss_type = dapo\n", "weights_dtype = bf16\n",
     "loss_type = dapo\n", "sampling/sampling_logp_difference/mean"},
    {"lora.base_dtype = bf16", "", "loss_type = dapo\n[lora]\nr = 4\nalpha = 8\n", "",
     "loss_type = dapo\n[lora]\nr = 4\nalpha = 8\nbase_dtype = bf16\n", NULL},
    /* over-sampling keeps other groups than the first 4 prompts (and none without a spread) */
    {"sampling.oversample = 2", "", "loss_type = dapo\ndrop_zero_std_groups = true\n",
     "oversample = 2\n", "loss_type = dapo\ndrop_zero_std_groups = true\n",
     "sampling/aborted_tokens"},
    /* a budget of 60 tokens cuts the 16 rows of up to 12 tokens short */
    {"sampling.max_step_tokens = 60", "", "loss_type = dapo\n", "max_step_tokens = 60\n",
     "loss_type = dapo\n", "sampling/budget_cut_rows"},
};
#undef OFF

START_TEST(a_key_that_changes_the_maths_changes_the_update) {
    const key_case *k = &maths_keys[_i];
    char plain[512], keyed[512];
    key_run("plain", k->plain_sampling, k->plain_grpo, NULL, plain, sizeof plain);
    key_run("keyed", k->key_sampling, k->key_grpo, NULL, keyed, sizeof keyed);
    double a[2], b[2];
    for (int s = 0; s < 2; s++)
        a[s] = metric_at(plain, "grad_norm", s + 1), b[s] = metric_at(keyed, "grad_norm", s + 1);
    if (getenv("GRPO_TEST_VERBOSE"))
        printf("%s: grad_norm %.7g %.7g -> %.7g %.7g\n", k->what, a[0], a[1], b[0], b[1]);
    ck_assert_msg(differs(a[0], b[0]) || differs(a[1], b[1]),
                  "%s: grad_norm %.9g, %.9g equals the plain run's %.9g, %.9g: the key was "
                  "ignored", k->what, b[0], b[1], a[0], a[1]);
    if (k->ran) {
        double r1 = metric_at(keyed, k->ran, 1), r2 = metric_at(keyed, k->ran, 2);
        ck_assert_msg(r1 > 0 || r2 > 0, "%s: %s is %g, %g: its path did not run", k->what,
                      k->ran, r1, r2);
    }
}
END_TEST

/* train.gradient_checkpointing keeps only each layer's input for backward (and one layer's
 * activations, recomputed): on a 4-layer model the policy's activation bytes per token
 * (perf/activation_bytes_per_token) are fewer than without it. */
START_TEST(gradient_checkpointing_shrinks_the_activations) {
    char plain[512], keyed[512];
    sh("rm -rf '%s/model' && '%s/grpo' init-model '%s/model' --hidden 32 --layers 4 --heads 2 "
       "--kv-heads 1 --intermediate 64 --seed 3 >/dev/null",
       tmp, GRPO_BINARY_DIR, tmp);
    key_run("plain", "", "", NULL, plain, sizeof plain);
    key_run("keyed", "", "", "train.gradient_checkpointing=true", keyed, sizeof keyed);
    double a = metric_at(plain, "perf/activation_bytes_per_token", 1),
           b = metric_at(keyed, "perf/activation_bytes_per_token", 1);
    if (getenv("GRPO_TEST_VERBOSE"))
        printf("activation bytes per token: %g, with gradient checkpointing %g\n", a, b);
    ck_assert_msg(a > 0 && b > 0 && b < 0.9 * a,
                  "activation bytes per token %g with gradient checkpointing, %g without", b, a);
}
END_TEST

/* Every run compares the sampler's log-prob of each drawn token with the training forward's
 * (sampling/sampling_logp_difference/max, TRL's name): on the fp32 path they are the same bits
 * by construction (the cpu kernels sum in an order the batch does not change, and the sampler's
 * log-softmax is the head's: issue 32), so the difference is exactly 0 and the importance ratio
 * exactly 1 on every token (min = max = 1); with the bf16 rollout copy they differ by bf16
 * rounding — which shows the metric compares two computations rather than one with itself. */
START_TEST(the_sampler_log_probs_are_compared_on_every_run) {
    char fp32[512], bf16[512];
    key_run("plain", "", "loss_type = dapo\n", NULL, fp32, sizeof fp32);
    key_run("keyed", "weights_dtype = bf16\n", "loss_type = dapo\n", NULL, bf16, sizeof bf16);
    for (int s = 1; s <= 2; s++) {
        double a = metric_at(fp32, "sampling/sampling_logp_difference/max", s);
        double am = metric_at(fp32, "sampling/sampling_logp_difference/mean", s);
        double b = metric_at(bf16, "sampling/sampling_logp_difference/max", s);
        double rmin = metric_at(fp32, "sampling/importance_sampling_ratio/min", s);
        double rmax = metric_at(fp32, "sampling/importance_sampling_ratio/max", s);
        if (getenv("GRPO_TEST_VERBOSE"))
            printf("step %d: logp difference max fp32 %g, bf16 copy %g; fp32 ratio [%.9g, %.9g]\n",
                   s, a, b, rmin, rmax);
        ck_assert_msg(a == 0 && am == 0,
                      "step %d: fp32 sampling_logp_difference max %g mean %g: expected 0", s, a,
                      am);
        ck_assert_msg(rmin == 1 && rmax == 1, "step %d: fp32 importance ratio in [%.9g, %.9g]",
                      s, rmin, rmax);
        ck_assert_msg(isfinite(b) && b > 1e-4,
                      "step %d: the bf16 copy's difference %g: expected bf16 rounding (> 1e-4)",
                      s, b);
    }
}
END_TEST

/* train.max_tokens_per_microbatch: the micro-batches of 3 rows run packed, in passes of at most
 * 20 tokens (8-token prompts at most + 12 completion tokens: one row a pass here), with
 * no padding (train/padding_frac 0, where the padded run pads its left-padded prompts and short
 * completions), and the update is the padded run's: grad_norm within fp32 rounding (the loss of
 * each pack is normalised as its whole micro-batch; the forward's bits are the padded ones,
 * test_packed_training.c). The reference pass (beta) runs packed too. */
START_TEST(packed_microbatches_have_no_padding_and_the_same_update) {
    char plain[512], keyed[512];
    const char *grpo = "loss_type = grpo\nbeta = 0.04\n";
    key_run_sets("plain", "", grpo, "data.max_prompt_length=8", NULL, plain, sizeof plain);
    key_run_sets("keyed", "", grpo, "data.max_prompt_length=8",
                 "train.max_tokens_per_microbatch=20", keyed, sizeof keyed);
    for (int s = 1; s <= 2; s++) {
        double pa = metric_at(plain, "train/padding_frac", s);
        double pk = metric_at(keyed, "train/padding_frac", s);
        double ga = metric_at(plain, "grad_norm", s), gk = metric_at(keyed, "grad_norm", s);
        double la = metric_at(plain, "loss", s), lk = metric_at(keyed, "loss", s);
        if (getenv("GRPO_TEST_VERBOSE"))
            printf("step %d: padding_frac %g -> %g, grad_norm %.9g -> %.9g, loss %.9g -> %.9g\n",
                   s, pa, pk, ga, gk, la, lk);
        ck_assert_msg(pa > 0, "step %d: the padded run's padding_frac %g: expected padding", s,
                      pa);
        ck_assert_msg(pk == 0, "step %d: the packed run's padding_frac %g: expected 0", s, pk);
        ck_assert_msg(ga > 0 && fabs(ga - gk) <= 1e-5 * ga,
                      "step %d: grad_norm packed %.9g, padded %.9g", s, gk, ga);
        ck_assert_msg(fabs(la - lk) <= 1e-5 * fabs(la) + 1e-9, "step %d: loss packed %.9g, "
                      "padded %.9g", s, lk, la);
    }
}
END_TEST

/* sampling.max_live_rows: the cap is kept, the rows refill, the results stay (above). */
START_TEST(max_live_rows_caps_the_decode_batch_and_keeps_the_results) {
    char plain[512], keyed[512];
    const char *grpo = "loss_type = dapo\n";
    key_run_sets("plain", "", grpo, "train.grad_accum=2", NULL, plain, sizeof plain);
    key_run_sets("keyed", "", grpo, "train.grad_accum=2", "sampling.max_live_rows=3", keyed,
                 sizeof keyed);
    static const char *const same[] = {"reward", "reward_std", "completions/mean_length",
                                       "completions/min_length", "completions/max_length",
                                       "loss", "grad_norm", "num_tokens"};
    for (int s = 1; s <= 2; s++) {
        double lp = metric_at(plain, "sampling/live_rows_max", s);
        double lk = metric_at(keyed, "sampling/live_rows_max", s);
        double rp = metric_at(plain, "sampling/refills", s);
        double rk = metric_at(keyed, "sampling/refills", s);
        if (getenv("GRPO_TEST_VERBOSE"))
            printf("step %d: live_rows_max %g -> %g, refills %g -> %g\n", s, lp, lk, rp, rk);
        ck_assert_msg(lp == 16 && rp > 0, "step %d: default cap: live_rows_max %g (expected "
                      "16), refills %g (expected > 0: the second chunk refills)", s, lp, rp);
        ck_assert_msg(lk > 0 && lk <= 3 && rk > 0, "step %d: max_live_rows = 3: live_rows_max "
                      "%g, refills %g", s, lk, rk);
        ck_same_bits(plain, keyed, same, sizeof same / sizeof same[0], s, "max_live_rows = 3");
    }
}
END_TEST

/* sampling.continuous = false: each chunk decodes alone (no refills), the results stay. */
START_TEST(continuous_false_decodes_each_chunk_alone) {
    char plain[512], keyed[512];
    const char *grpo = "loss_type = dapo\n";
    key_run_sets("plain", "", grpo, "train.grad_accum=2", NULL, plain, sizeof plain);
    key_run_sets("static", "", grpo, "train.grad_accum=2", "sampling.continuous=false", keyed,
                 sizeof keyed);
    static const char *const same[] = {"reward", "completions/mean_length", "loss", "grad_norm"};
    for (int s = 1; s <= 2; s++) {
        double rp = metric_at(plain, "sampling/refills", s);
        double rk = metric_at(keyed, "sampling/refills", s);
        double lk = metric_at(keyed, "sampling/live_rows_max", s);
        ck_assert_msg(rp > 0 && rk == 0 && lk == 16, "step %d: refills %g by default, %g with "
                      "continuous = false (expected 0), live_rows_max %g (expected 16)", s, rp,
                      rk, lk);
        ck_same_bits(plain, keyed, same, sizeof same / sizeof same[0], s, "continuous = false");
    }
}
END_TEST

/* Packs that share their groups' prompts (train.shared_prefix, the default) against packs that
 * do not: fewer positions (train/positions: each prompt once per pack instead of once per row;
 * micro-batches of 3 rows, one pack each at K = 600), the same update within fp32 rounding. */
START_TEST(packed_microbatches_share_their_prompts) {
    char plain[512], keyed[512];
    const char *grpo = "loss_type = grpo\nbeta = 0.04\n";
    key_run_sets("pk_noshare", "", grpo, "train.max_tokens_per_microbatch=600",
                 "train.shared_prefix=false", plain, sizeof plain);
    key_run_sets("pk_share", "", grpo, "train.max_tokens_per_microbatch=600", NULL, keyed,
                 sizeof keyed);
    for (int s = 1; s <= 2; s++) {
        double pa = metric_at(plain, "train/positions", s);
        double pk = metric_at(keyed, "train/positions", s);
        double ga = metric_at(plain, "grad_norm", s), gk = metric_at(keyed, "grad_norm", s);
        if (getenv("GRPO_TEST_VERBOSE"))
            printf("step %d: positions %g -> %g, grad_norm %.9g -> %.9g\n", s, pa, pk, ga, gk);
        ck_assert_msg(pk > 0 && pk < pa, "step %d: positions shared %g, unshared %g: expected "
                      "fewer", s, pk, pa);
        ck_assert_msg(metric_at(keyed, "train/padding_frac", s) == 0, "step %d: padding", s);
        ck_assert_msg(ga > 0 && fabs(ga - gk) <= 1e-5 * ga,
                      "step %d: grad_norm shared %.9g, unshared %.9g", s, gk, ga);
    }
}
END_TEST

/* 1 when this CPU computes in bf16 (the cpu backend's rule: grpo_backend_set_compute); else 0
 * and a note. */
static int bf16_cpu(void) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *ops = grpo_backend_open("cpu", 1, &err);
    ck_assert_msg(ops != NULL, "cpu backend: %s", err.message);
    int ok = grpo_backend_set_compute(ops, GRPO_DTYPE_BF16, &err) == GRPO_OK;
    if (!ok) fprintf(stderr, "test_run_keys: bf16 compute skipped: %s\n", err.message);
    grpo_backend_close(ops);
    return ok;
}

/* The learning metrics of both steps are finite. */
static void assert_finite(const char *metrics) {
    static const char *const names[] = {"loss", "grad_norm", "kl"};
    for (int s = 1; s <= 2; s++)
        for (int k = 0; k < 3; k++) {
            double v = metric_at(metrics, names[k], s);
            ck_assert_msg(isfinite(v), "%s: step %d %s = %g", metrics, s, names[k], v);
        }
}

START_TEST(ref_compute_dtype_bf16_computes_the_reference_in_bf16) {
    if (!bf16_cpu()) return;
    char plain[512], keyed[512];
    key_run("plain", "", "loss_type = dapo\nbeta = 0.04\n", NULL, plain, sizeof plain);
    key_run("keyed", "", "loss_type = dapo\nbeta = 0.04\nref_compute_dtype = bf16\n", NULL,
            keyed, sizeof keyed);
    double a = metric_at(plain, "kl", 1), b = metric_at(keyed, "kl", 1);
    if (getenv("GRPO_TEST_VERBOSE")) printf("kl at step 1: fp32 reference %g, bf16 %g\n", a, b);
    ck_assert_msg(a == 0, "fp32 reference: kl %g at step 1 (the policy is the reference)", a);
    ck_assert_msg(b > 0, "grpo.ref_compute_dtype = bf16: kl %g at step 1: the reference pass "
                  "gave the policy's fp32 log-probs", b);
    assert_finite(keyed);
}
END_TEST

START_TEST(sampling_compute_dtype_bf16_computes_the_rollout_in_bf16) {
    if (!bf16_cpu()) return;
    char plain[512], keyed[512];
    key_run("plain", "weights_dtype = bf16\n", "loss_type = dapo\nbeta = 0.04\n", NULL, plain,
            sizeof plain);
    key_run("keyed", "weights_dtype = bf16\ncompute_dtype = bf16\n",
            "loss_type = dapo\nbeta = 0.04\n", NULL, keyed, sizeof keyed);
    double a = metric_at(plain, "sampling/sampling_logp_difference/mean", 1);
    double b = metric_at(keyed, "sampling/sampling_logp_difference/mean", 1);
    double r = metric_at(keyed, "sampling/importance_sampling_ratio/max", 1);
    if (getenv("GRPO_TEST_VERBOSE"))
        printf("logp difference mean at step 1: bf16 copy %g, bf16 compute %g (ratio max %g)\n",
               a, b, r);
    ck_assert_msg(isfinite(b) && b > 0 && differs(a, b), "sampling.compute_dtype = bf16: the "
                  "sampler's log-probs are %.9g from training's, as the bf16 copy's in fp32 "
                  "(%.9g): the key was ignored", b, a);
    ck_assert_msg(r != 1, "importance ratio max %g: the rollout's log-probs are training's", r);
    assert_finite(keyed);
}
END_TEST

/* train.compute_dtype = bf16: the policy's training passes in bf16. Step 1 samples the same
 * completions (the rollout stays fp32), so its numbers compare: the KL against the fp32
 * reference (= the policy) is > 0 where fp32 gives exactly 0 (the forward ran in bf16), the
 * sampler's log-probs differ from training's (sampling_logp_difference, 0 up to rounding in
 * fp32), and the gradient norm is fp32's within 2 % (the products' errors are bounded by
 * 2^-7 of their magnitudes each, test_gemm_bf16.c, and mostly cancel) but not its value. That
 * the backward's products themselves run in bf16 is test_gemm_bf16.c's (cpu_sgemm follows the
 * compute dtype the pass sets). */
START_TEST(train_compute_dtype_bf16_computes_the_policy_in_bf16) {
    if (!bf16_cpu()) return;
    char plain[512], keyed[512];
    key_run("plain", "", "loss_type = dapo\nbeta = 0.04\n", NULL, plain, sizeof plain);
    key_run("keyed", "", "loss_type = dapo\nbeta = 0.04\n", "train.compute_dtype=bf16", keyed,
            sizeof keyed);
    double ka = metric_at(plain, "kl", 1), kb = metric_at(keyed, "kl", 1);
    double da = metric_at(plain, "sampling/sampling_logp_difference/mean", 1);
    double db = metric_at(keyed, "sampling/sampling_logp_difference/mean", 1);
    double ga = metric_at(plain, "grad_norm", 1), gb = metric_at(keyed, "grad_norm", 1);
    if (getenv("GRPO_TEST_VERBOSE"))
        printf("step 1: kl %g -> %g, logp difference %g -> %g, grad_norm %.9g -> %.9g\n", ka,
               kb, da, db, ga, gb);
    ck_assert_msg(ka == 0 && kb > 0, "train.compute_dtype = bf16: kl at step 1 %g (fp32 %g): "
                  "the policy's forward gave the fp32 reference's log-probs", kb, ka);
    ck_assert_msg(db > da && differs(da, db), "sampling_logp_difference %g with bf16, %g with "
                  "fp32: training's log-probs are the sampler's", db, da);
    ck_assert_msg(ga > 0 && fabs(gb - ga) <= 0.02 * ga && gb != ga,
                  "grad_norm at step 1: bf16 %.9g, fp32 %.9g: expected within 2 %% and not equal",
                  gb, ga);
    assert_finite(keyed);
}
END_TEST

/* bf16 end to end: the bf16 rollout copy decoding in bf16 compute (sampling.weights_dtype and
 * compute_dtype) and the policy training in bf16 compute on its fp32 masters
 * (train.compute_dtype) compute every token alike: the same bf16 weights (the copy's, or the
 * masters rounded as packed), the embedding rows at bf16 precision on both sides
 * (kernels/cpu/embedding.c), the same product chains. So the sampler's log-probs are training's,
 * bit for bit, on every step (difference 0, importance ratios exactly 1), where the bf16 copy
 * with fp32 training differs by bf16 rounding (the_sampler_log_probs_are_compared_on_every_run). */
START_TEST(bf16_sampling_and_bf16_training_compute_alike) {
    if (!bf16_cpu()) return;
    char keyed[512];
    key_run("keyed", "weights_dtype = bf16\ncompute_dtype = bf16\n",
            "loss_type = dapo\nbeta = 0.04\n", "train.compute_dtype=bf16", keyed, sizeof keyed);
    for (int s = 1; s <= 2; s++) {
        double d = metric_at(keyed, "sampling/sampling_logp_difference/max", s);
        double rmin = metric_at(keyed, "sampling/importance_sampling_ratio/min", s);
        double rmax = metric_at(keyed, "sampling/importance_sampling_ratio/max", s);
        if (getenv("GRPO_TEST_VERBOSE"))
            printf("step %d: bf16 sampler vs bf16 training, logp difference max %g, ratio "
                   "[%.9g, %.9g]\n", s, d, rmin, rmax);
        ck_assert_msg(d == 0 && rmin == 1 && rmax == 1, "step %d: bf16 sampler against bf16 "
                      "training: logp difference max %g, importance ratio in [%.9g, %.9g]: "
                      "expected the same bits", s, d, rmin, rmax);
    }
    assert_finite(keyed);
}
END_TEST

/* With every pass in bf16, the rollout copy's activations serve the policy's bf16 training
 * forward (train.reuse_rollout; grpo_rollout_keep.written, 1.11): the copy's prefill and decode
 * write them into the policy's keep block, and the policy takes them as written. Every metric
 * of both steps is the same bits as with the key off, and perf/rollout_reused shows the path
 * ran (1 against 0). One pass per generation batch (train.micro_batch = 0). */
START_TEST(bf16_training_reuses_the_bf16_copys_rollout) {
    if (!bf16_cpu()) return;
    static const char *const same[] = {"loss", "grad_norm", "kl", "entropy", "reward",
                                       "sampling/sampling_logp_difference/max",
                                       "sampling/importance_sampling_ratio/min"};
    char plain[512], keyed[512];
    const char *samp = "weights_dtype = bf16\ncompute_dtype = bf16\n";
    const char *grpo = "loss_type = dapo\nbeta = 0.04\n";
    key_run_sets3("plain", samp, grpo, "train.compute_dtype=bf16", "train.micro_batch=0",
                  "train.reuse_rollout=false", plain, sizeof plain);
    key_run_sets3("keyed", samp, grpo, "train.compute_dtype=bf16", "train.micro_batch=0", NULL,
                  keyed, sizeof keyed);
    for (int s = 1; s <= 2; s++) {
        ck_same_bits(plain, keyed, same, sizeof same / sizeof same[0], s, "reuse_rollout");
        ck_assert_msg(metric_at(plain, "perf/rollout_reused", s) == 0 &&
                          metric_at(keyed, "perf/rollout_reused", s) == 1,
                      "step %d: perf/rollout_reused %g (key off: %g): expected 1 (0)", s,
                      metric_at(keyed, "perf/rollout_reused", s),
                      metric_at(plain, "perf/rollout_reused", s));
    }
    assert_finite(keyed);
}
END_TEST

/* sampling.compute_dtype = bf16 in a LoRA run: the policy (base + adapters) samples with bf16
 * products, so the sampler's log-probs differ from training's fp32 ones, and the importance
 * weights enter the loss. Both runs mask every token whose ratio passes a cap of 0.5
 * (sampling.is_mode = token_mask): every ratio is near 1, so with the weights applied every
 * token's policy term is 0, and at step 1 (adapters B = 0: policy = reference, the KL's gradient
 * exactly 0) the gradient norm is exactly 0; the fp32 run applies no weights (grad_norm > 0)
 * and its log-probs are training's (difference 0). */
START_TEST(lora_sampling_compute_dtype_bf16_samples_in_bf16_with_is_weights) {
    if (!bf16_cpu()) return;
    char plain[512], keyed[512];
    const char *lora = "loss_type = dapo\nbeta = 0.04\n[lora]\nr = 4\nalpha = 8\n";
    key_run("plain", "is_mode = token_mask\nis_cap = 0.5\n", lora, NULL, plain, sizeof plain);
    key_run("keyed", "is_mode = token_mask\nis_cap = 0.5\ncompute_dtype = bf16\n", lora, NULL,
            keyed, sizeof keyed);
    double da = metric_at(plain, "sampling/sampling_logp_difference/mean", 1);
    double db = metric_at(keyed, "sampling/sampling_logp_difference/mean", 1);
    double ga = metric_at(plain, "grad_norm", 1), gb = metric_at(keyed, "grad_norm", 1);
    if (getenv("GRPO_TEST_VERBOSE"))
        printf("LoRA step 1: logp difference %g -> %g, grad_norm %.9g -> %.9g\n", da, db, ga, gb);
    ck_assert_msg(da == 0 && db > 0, "LoRA sampling.compute_dtype = bf16: sampler-training logp "
                  "difference %g (fp32 sampling %g): the rollout did not run in bf16", db, da);
    ck_assert_msg(ga > 0 && gb == 0, "grad_norm at step 1 with every ratio masked: %.9g (fp32 "
                  "sampling, no weights: %.9g): the importance weights did not enter the loss",
                  gb, ga);
    assert_finite(keyed);
}
END_TEST

int main(void) {
    Suite *s = suite_create("run_keys");
    TCase *tc = tcase_create("keys");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, a_key_that_changes_the_maths_changes_the_update, 0,
                        (int)(sizeof maths_keys / sizeof maths_keys[0]));
    tcase_add_test(tc, gradient_checkpointing_shrinks_the_activations);
    tcase_add_test(tc, the_sampler_log_probs_are_compared_on_every_run);
    tcase_add_test(tc, packed_microbatches_have_no_padding_and_the_same_update);
    tcase_add_test(tc, max_live_rows_caps_the_decode_batch_and_keeps_the_results);
    tcase_add_test(tc, continuous_false_decodes_each_chunk_alone);
    tcase_add_test(tc, packed_microbatches_share_their_prompts);
    tcase_add_test(tc, ref_compute_dtype_bf16_computes_the_reference_in_bf16);
    tcase_add_test(tc, sampling_compute_dtype_bf16_computes_the_rollout_in_bf16);
    tcase_add_test(tc, train_compute_dtype_bf16_computes_the_policy_in_bf16);
    tcase_add_test(tc, bf16_sampling_and_bf16_training_compute_alike);
    tcase_add_test(tc, bf16_training_reuses_the_bf16_copys_rollout);
    tcase_add_test(tc, lora_sampling_compute_dtype_bf16_samples_in_bf16_with_is_weights);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
