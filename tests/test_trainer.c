/*
 * test_trainer.c — `grpo train` end to end through the real binary (GRPO_BINARY_DIR/grpo) on a
 * tiny model made by `grpo init-model` and the embedded arithmetic prompts:
 *   - kill and resume: a run SIGKILLed after its step-3 checkpoint and resumed with --resume
 *     writes the same metrics, step for step, as a run that never stopped (every metric except
 *     the timings step_time, throughput/... and time/...), and its final weights are identical;
 *     also with grpo.sync_ref_every = 2 (the refreshed reference is resumed: kl would differ
 *     otherwise);
 *   - learning: with a reward the tiny model can satisfy (a completion of at most 8 characters,
 *     reward 1, else 0), the mean reward of the first 3 steps is below 0.35 and of the last 3
 *     above 0.7 (observed: ~0.1 -> 0.77..1.0), for every loss type (and with beta > 0,
 *     num_iterations = 2, micro-batches, sapo, GSPO, the top-entropy mask, dynamic sampling,
 *     GDPO, a refreshed reference; that each of these keys changes the update at all is
 *     test_run_keys.c's);
 *   - rewards see the training step and train.steps (tests/packs/progress);
 *   - train.gradient_checkpointing leaves every metric unchanged; each metrics line ends with
 *     the per-phase timings (time/...);
 *   - the entropy bonus alone (constant reward, beta 0) raises the policy's entropy;
 *   - options this build cannot honour (sync_ref_every without beta, TRL's vespo) are refused
 *     by name;
 *     a sign error anywhere in loss -> d logp -> backward -> AdamW makes it fall instead;
 *   - sft: the response loss halves in 30 steps and the exported model evaluates;
 *   - bad input: --resume without a checkpoint, a tokenizer larger than the model's vocabulary,
 *     and a run file without rewards each fail with a message naming the problem; a prompt whose
 *     completions no reward can score is reported with its file:line.
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "grpo_cli_test.h"
#include "io/safetensors.h"

static char tmp[256];

/* name.ini: the small run below with sampling_extra in [sampling] and extra after [grpo]'s
 * keys (more [grpo] keys, or further sections). */
static void write_run_sampling(const char *name, const char *sampling_extra, const char *extra) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.ini", tmp, name);
    FILE *f = fopen(path, "w");
    ck_assert(f != NULL);
    fprintf(f,
            "[model]\npath = %s/model\n"
            "[data]\npath = %s/examples/arith/train.jsonl\n"
            "[sampling]\nnum_generations = 4\nmax_completion_length = 12\ntemperature = 1.0\n%s"
            "[grpo]\nbeta = 0.04\nloss_type = dapo\n%s"
            "[optim]\nlr = 1e-2\n"
            "[train]\nsteps = 10\nbatch_prompts = 2\nmicro_batch = 3\nseed = 7\nthreads = 1\n"
            "[log]\ndir = %s/%s\n"
            "[checkpoint]\ndir = %s/%s/ckpt\nevery = 3\nkeep = 0\n"
            "[reward.acc]\nplugin = builtin.accuracy\n"
            "[reward.len]\nplugin = builtin.length\n",
            tmp, GRPO_SOURCE_DIR, sampling_extra, extra, tmp, name, tmp, name);
    fclose(f);
}

static void write_run(const char *name, const char *extra) { write_run_sampling(name, "", extra); }

static void setup(void) { tiny_model_dir(tmp, sizeof tmp, "trainer"); }

static void teardown(void) { sh("rm -rf '%s'", tmp); }

/* Two metric values agree: equal (tol 0), or numbers within tol relative to the larger (plus
 * 1e-12 absolute, for zeros). The sampler-against-training log-prob difference is itself a
 * measure of rounding (~1e-7 on the fp32 path): two runs that agree to rounding agree in it to
 * tol absolute, not relative. */
static int metric_agrees(const cJSON *x, const cJSON *y, double tol) {
    if (!y) return 0;
    if (tol == 0 || !cJSON_IsNumber(x) || !cJSON_IsNumber(y)) return cJSON_Compare(x, y, 1);
    double a = x->valuedouble, b = y->valuedouble;
    if (x->string && !strncmp(x->string, "sampling/sampling_logp_difference/", 34))
        return fabs(a - b) <= tol;
    return fabs(a - b) <= tol * fmax(fabs(a), fabs(b)) + 1e-12;
}

/* Whether metric name is a timing or a perf/ figure (what the run costs, not what it learns). */
static int not_a_result(const char *name) {
    return !strcmp(name, "step_time") || !strncmp(name, "throughput/", 11) ||
           !strncmp(name, "time/", 5) || !strncmp(name, "perf/", 5);
}

/* Compares two metrics.jsonl files line by line, skipping the timing and perf/ metrics and
 * those named cost... (NULL: none; a cost the compared runs differ in): values agree to tol
 * (metric_agrees). */
static void metrics_agree_but(const char *a_path, const char *b_path, int want_lines,
                              double tol, const char *cost) {
    char *a = slurp(a_path), *b = slurp(b_path);
    ck_assert_msg(a && b, "missing %s or %s", a_path, b_path);
    char *sa, *sb, *la = strtok_r(a, "\n", &sa), *lb = strtok_r(b, "\n", &sb);
    int lines = 0;
    for (; la && lb; la = strtok_r(NULL, "\n", &sa), lb = strtok_r(NULL, "\n", &sb), lines++) {
        cJSON *ja = cJSON_Parse(la), *jb = cJSON_Parse(lb);
        ck_assert(ja && jb);
        ck_assert_int_eq(cJSON_GetArraySize(ja), cJSON_GetArraySize(jb));
        for (cJSON *x = ja->child; x; x = x->next) {
            if (not_a_result(x->string) || (cost && !strncmp(x->string, cost, strlen(cost))))
                continue;
            cJSON *y = cJSON_GetObjectItemCaseSensitive(jb, x->string);
            ck_assert_msg(metric_agrees(x, y, tol), "line %d: %s differs: %s vs %s", lines + 1,
                          x->string, cJSON_PrintUnformatted(x),
                          y ? cJSON_PrintUnformatted(y) : "-");
        }
        cJSON_Delete(ja), cJSON_Delete(jb);
    }
    ck_assert_msg(!la && !lb, "metrics files differ in length");
    ck_assert_int_eq(lines, want_lines);
    free(a), free(b);
}

static void metrics_agree(const char *a_path, const char *b_path, int want_lines, double tol) {
    metrics_agree_but(a_path, b_path, want_lines, tol, NULL);
}

/* How many values of the training metrics (timings and perf/ aside) of two metrics.jsonl files
 * differ at all (bit for bit), line by line. */
static int metrics_differing(const char *a_path, const char *b_path) {
    char *a = slurp(a_path), *b = slurp(b_path);
    ck_assert_msg(a && b, "missing %s or %s", a_path, b_path);
    char *sa, *sb, *la = strtok_r(a, "\n", &sa), *lb = strtok_r(b, "\n", &sb);
    int n = 0;
    for (; la && lb; la = strtok_r(NULL, "\n", &sa), lb = strtok_r(NULL, "\n", &sb)) {
        cJSON *ja = cJSON_Parse(la), *jb = cJSON_Parse(lb);
        ck_assert(ja && jb);
        for (cJSON *x = ja->child; x; x = x->next)
            n += !not_a_result(x->string) &&
                 !metric_agrees(x, cJSON_GetObjectItemCaseSensitive(jb, x->string), 0);
        cJSON_Delete(ja), cJSON_Delete(jb);
    }
    free(a), free(b);
    return n;
}

/* The same metrics, bit for bit (timings aside). */
static void same_metrics(const char *a_path, const char *b_path, int want_lines) {
    metrics_agree(a_path, b_path, want_lines, 0);
}

/* --set changes keys after the file, is checked like a line of it (naming --set as the place),
 * and the resolved configuration the run records in log.dir/config.ini shows it. */
START_TEST(set_overrides_change_the_run) {
    char ini[512], log[512], path[512];
    write_run("s", "");
    snprintf(ini, sizeof ini, "%s/s.ini", tmp), snprintf(log, sizeof log, "%s/s.log", tmp);
    char *args[] = {"grpo", "train", ini, "--set", "train.steps=3", "--set",
                    "reward.len.weight = 0.5", "--set", "log.tensorboard=true", "--plugin-path",
                    GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, args) == 0, "run with --set failed, see %s", log);
    snprintf(path, sizeof path, "%s/s/metrics.jsonl", tmp);
    char *m = slurp(path), *c = NULL;
    int lines = 0;
    for (char *p = m; p && *p; p++) lines += *p == '\n';
    ck_assert_int_eq(lines, 3);
    snprintf(path, sizeof path, "%s/s/config.ini", tmp);
    ck_assert_ptr_nonnull(c = slurp(path));
    ck_assert_msg(strstr(c, "steps = 3") && strstr(c, "weight = 0.5"), "%s", c);
    ck_assert_msg(strstr(strstr(c, "steps = 3"), "; from --set"), "%s", c);
    sh("test -s \"$(ls '%s'/s/events.out.tfevents.*.grpo)\"", tmp); /* [log] tensorboard */
    free(m), free(c);
    char *bad[] = {"grpo", "train", ini, "--set", "train.stepz=3", "--set", "grpo.beta=x",
                   "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_int_eq(run_grpo(log, bad), 1);
    char *out = slurp(log);
    ck_assert_msg(strstr(out, "--set train.stepz=3: unknown key 'stepz' in [train] (did you mean "
                              "steps?)") &&
                      strstr(out, "--set grpo.beta=x: grpo.beta: expected a finite number"),
                  "%s", out);
    free(out);
}
END_TEST

/* Each checkpoint is a model directory with a model card: README.md with the Hub's front matter
 * and the run's rewards and resolved run file; the input model's own README.md is kept beside it
 * as base_model_README.md, never overwritten. */
START_TEST(checkpoints_carry_a_model_card) {
    char ini[512], log[512], path[600];
    write_run("c", "");
    sh("printf '# the base model card\\n' > '%s/model/README.md'", tmp);
    snprintf(ini, sizeof ini, "%s/c.ini", tmp), snprintf(log, sizeof log, "%s/c.log", tmp);
    char *args[] = {"grpo", "train", ini, "--set", "train.steps=2", "--plugin-path",
                    GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, args) == 0, "run failed, see %s", log);
    snprintf(path, sizeof path, "%s/c/ckpt/checkpoint-00000002/README.md", tmp);
    char *card = slurp(path);
    ck_assert_msg(card, "no %s", path);
    const char *want[] = {"---\nlibrary_name: grpo\nbase_model: \"", "- reinforcement-learning\n",
                          "pipeline_tag: text-generation\n---\n", "loss_type dapo, beta 0.04",
                          "| acc | 1 | `builtin.accuracy` | builtin ", "## Metrics at step 2",
                          "| reward |", "```ini\n", "steps = 2"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(card, want[i]), "README.md lacks '%s':\n%s", want[i], card);
    free(card);
    snprintf(path, sizeof path, "%s/c/ckpt/checkpoint-00000002/base_model_README.md", tmp);
    char *base = slurp(path);
    ck_assert_msg(base && !strcmp(base, "# the base model card\n"), "%s: %s", path,
                  base ? base : "(missing)");
    free(base);
    sh("rm '%s/model/README.md'", tmp);
}
END_TEST

/* train.eval_every: eval/... metrics every N steps, and the training itself unchanged (the
 * evaluation draws from its own RNG stream): every other metric equals a run without it. */
START_TEST(evaluation_does_not_change_training) {
    char ini[512], log[512], a_path[512], b_path[512];
    write_run("ea", ""), write_run("eb", "");
    snprintf(ini, sizeof ini, "%s/ea.ini", tmp), snprintf(log, sizeof log, "%s/ea.log", tmp);
    char *a_args[] = {"grpo", "train", ini, "--set", "train.steps=4", "--plugin-path",
                      GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, a_args) == 0, "run failed, see %s", log);
    char eval_path[600];
    snprintf(eval_path, sizeof eval_path, "data.eval_path=%s/examples/arith/eval.jsonl",
             GRPO_SOURCE_DIR);
    snprintf(ini, sizeof ini, "%s/eb.ini", tmp), snprintf(log, sizeof log, "%s/eb.log", tmp);
    char *b_args[] = {"grpo", "train", ini, "--set", "train.steps=4", "--set", eval_path,
                      "--set", "train.eval_every=2", "--set", "train.eval_limit=8", "--set",
                      "train.eval_temperature=1", "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, b_args) == 0, "run with eval failed, see %s", log);
    snprintf(a_path, sizeof a_path, "%s/ea/metrics.jsonl", tmp);
    snprintf(b_path, sizeof b_path, "%s/eb/metrics.jsonl", tmp);
    char *a = slurp(a_path), *b = slurp(b_path), *sa, *sb;
    int evals = 0, line = 0;
    for (char *la = strtok_r(a, "\n", &sa), *lb = strtok_r(b, "\n", &sb); la && lb;
         la = strtok_r(NULL, "\n", &sa), lb = strtok_r(NULL, "\n", &sb), line++) {
        cJSON *ja = cJSON_Parse(la), *jb = cJSON_Parse(lb);
        for (cJSON *y = jb->child; y; y = y->next) {
            if (!strncmp(y->string, "eval", 4)) {
                evals += !strcmp(y->string, "eval/accuracy") ||
                         !strcmp(y->string, "eval_sampled/reward");
                continue;
            }
            if (!strcmp(y->string, "step_time") || !strncmp(y->string, "throughput/", 11) ||
                !strncmp(y->string, "time/", 5))
                continue;
            cJSON *x = cJSON_GetObjectItemCaseSensitive(ja, y->string);
            ck_assert_msg(x && cJSON_Compare(x, y, 1), "line %d: %s differs with evaluation on",
                          line + 1, y->string);
        }
        cJSON_Delete(ja), cJSON_Delete(jb);
    }
    ck_assert_int_eq(line, 4);
    ck_assert_int_eq(evals, 4); /* steps 2 and 4, greedy and sampled */
    free(a), free(b);
}
END_TEST

/* train.gradient_checkpointing recomputes the activations in backward with the same ops: every
 * metric (loss, kl, rewards, grad_norm, ...) of every step equals the run without it, with the
 * policy's forward/backward split into micro-batches (micro_batch = 3) and a reference (beta). */
START_TEST(gradient_checkpointing_does_not_change_training) {
    char ini[512], log[512], a_path[512], b_path[512];
    write_run("gca", ""), write_run("gcb", "");
    snprintf(ini, sizeof ini, "%s/gca.ini", tmp), snprintf(log, sizeof log, "%s/gca.log", tmp);
    char *a_args[] = {"grpo", "train", ini, "--set", "train.steps=3", "--plugin-path",
                      GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, a_args) == 0, "run failed, see %s", log);
    snprintf(ini, sizeof ini, "%s/gcb.ini", tmp), snprintf(log, sizeof log, "%s/gcb.log", tmp);
    char *b_args[] = {"grpo", "train", ini, "--set", "train.steps=3", "--set",
                      "train.gradient_checkpointing=true", "--plugin-path", GRPO_PACK_BUILD_DIR,
                      NULL};
    ck_assert_msg(run_grpo(log, b_args) == 0, "run with recomputation failed, see %s", log);
    snprintf(a_path, sizeof a_path, "%s/gca/metrics.jsonl", tmp);
    snprintf(b_path, sizeof b_path, "%s/gcb/metrics.jsonl", tmp);
    same_metrics(a_path, b_path, 3);
}
END_TEST

/* Metric key of every line of a metrics file: each equals want. */
static void metric_is(const char *path, const char *key, double want, int want_lines) {
    char *text = slurp(path), *save = NULL;
    int lines = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
        ck_assert_msg(cJSON_IsNumber(v) && v->valuedouble == want, "%s line %d: %s is not %g",
                      path, lines + 1, key, want);
        cJSON_Delete(j), lines++;
    }
    ck_assert_int_eq(lines, want_lines);
    free(text);
}

/* Metric key of the first line of a metrics file. */
static double first_metric(const char *path, const char *key) {
    char *text = slurp(path);
    ck_assert_msg(text != NULL, "missing %s", path);
    char *nl = strchr(text, '\n');
    if (nl) *nl = '\0';
    cJSON *j = cJSON_Parse(text);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    ck_assert_msg(cJSON_IsNumber(v), "%s: no %s on its first line", path, key);
    double x = v->valuedouble;
    cJSON_Delete(j), free(text);
    return x;
}

/* train.reuse_rollout (the default): the policy's training forward takes the activations its
 * rollout computed (the same bits as computing them): every metric of a 3-step run with one
 * pass per generation batch (micro_batch 0) and a reference (beta) equals the run with the key
 * off, and perf/rollout_reused shows the path ran: 1 on every step with it, 0 without. With
 * micro-batches of 3 rows (not the whole batch) nothing is reused. The same with LoRA adapters
 * (loop 1), whose reference pass (the base, adapters off) runs between the rollout and the
 * policy's forward on the same model. */
START_TEST(reusing_the_rollout_does_not_change_training) {
    char ini[512], log[512], a_path[512], b_path[512];
    const char *extra = _i ? "[lora]\nr = 4\nalpha = 8\n" : "";
    write_run("rra", extra), write_run("rrb", extra), write_run("rrc", extra);
    snprintf(ini, sizeof ini, "%s/rra.ini", tmp), snprintf(log, sizeof log, "%s/rra.log", tmp);
    char *a_args[] = {"grpo", "train", ini, "--set", "train.steps=3", "--set",
                      "train.micro_batch=0", "--set", "train.reuse_rollout=false",
                      "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, a_args) == 0, "run without reuse failed, see %s", log);
    snprintf(ini, sizeof ini, "%s/rrb.ini", tmp), snprintf(log, sizeof log, "%s/rrb.log", tmp);
    char *b_args[] = {"grpo", "train", ini, "--set", "train.steps=3", "--set",
                      "train.micro_batch=0", "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, b_args) == 0, "run with reuse failed, see %s", log);
    snprintf(a_path, sizeof a_path, "%s/rra/metrics.jsonl", tmp);
    snprintf(b_path, sizeof b_path, "%s/rrb/metrics.jsonl", tmp);
    same_metrics(a_path, b_path, 3);
    metric_is(a_path, "perf/rollout_reused", 0, 3);
    metric_is(b_path, "perf/rollout_reused", 1, 3);
    snprintf(ini, sizeof ini, "%s/rrc.ini", tmp), snprintf(log, sizeof log, "%s/rrc.log", tmp);
    char *c_args[] = {"grpo", "train", ini, "--set", "train.steps=1", "--plugin-path",
                      GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, c_args) == 0, "run in micro-batches failed, see %s", log);
    snprintf(a_path, sizeof a_path, "%s/rrc/metrics.jsonl", tmp);
    metric_is(a_path, "perf/rollout_reused", 0, 1);
}
END_TEST

/* grpo.ref_from_rollout (the default): a LoRA run's KL reference (the base, adapters off) is
 * decoded beside its rollout and its log-probs taken there (the same bits as the reference
 * forward): every metric of a 3-step run (kl included) equals the run with the key off but the
 * KV cache's memory (its base rows' pages: more), and
 * perf/reference_decoded shows the path ran: 1 on every step with it, 0 without. Loop 1 trains
 * in micro-batches of 3 rows (the decoded reference serves every pass of the chunk) and loop 2
 * with packed rows. Without LoRA the reference is another model: nothing is decoded. */
START_TEST(decoding_the_reference_does_not_change_training) {
    static const char *const pass[] = {"train.micro_batch=0", "train.micro_batch=3",
                                       "train.max_tokens_per_microbatch=600"};
    char ini[512], log[512], a_path[512], b_path[512];
    const char *lora = "[lora]\nr = 4\nalpha = 8\n";
    write_run("dra", lora), write_run("drb", lora), write_run("drc", "");
    snprintf(ini, sizeof ini, "%s/dra.ini", tmp), snprintf(log, sizeof log, "%s/dra.log", tmp);
    char *a_args[] = {"grpo", "train", ini, "--set", "train.steps=3", "--set", (char *)pass[_i],
                      "--set", "grpo.ref_from_rollout=false", "--plugin-path",
                      GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, a_args) == 0, "run with the reference forward failed, see %s",
                  log);
    snprintf(ini, sizeof ini, "%s/drb.ini", tmp), snprintf(log, sizeof log, "%s/drb.log", tmp);
    char *b_args[] = {"grpo", "train", ini, "--set", "train.steps=3", "--set", (char *)pass[_i],
                      "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, b_args) == 0, "run with the decoded reference failed, see %s",
                  log);
    snprintf(a_path, sizeof a_path, "%s/dra/metrics.jsonl", tmp);
    snprintf(b_path, sizeof b_path, "%s/drb/metrics.jsonl", tmp);
    metrics_agree_but(a_path, b_path, 3, 0, "sampling/kv_"); /* the cache holds twice the rows */
    ck_assert_msg(first_metric(b_path, "sampling/kv_pages_max") >
                      first_metric(a_path, "sampling/kv_pages_max"),
                  "the decoded reference's base rows hold no KV cache pages of their own");
    metric_is(a_path, "perf/reference_decoded", 0, 3);
    metric_is(b_path, "perf/reference_decoded", 1, 3);
    if (_i) return;
    snprintf(ini, sizeof ini, "%s/drc.ini", tmp), snprintf(log, sizeof log, "%s/drc.log", tmp);
    char *c_args[] = {"grpo", "train", ini, "--set", "train.steps=1", "--plugin-path",
                      GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, c_args) == 0, "run without LoRA failed, see %s", log);
    snprintf(a_path, sizeof a_path, "%s/drc/metrics.jsonl", tmp);
    metric_is(a_path, "perf/reference_decoded", 0, 1);
}
END_TEST

/* train.shared_prefix (the default) computes each prompt once for its completions in the
 * reference and policy passes: every metric of a 3-step run agrees with the run that computes
 * every row in full, to fp32 rounding carried through 3 optimizer steps: 2e-5 relative (the
 * passes agree to ~1e-6, test_shared_prefix.c; measured here: 3.5e-7 at worst, on the loss),
 * and some value differs in its last bits, which shows the shared path ran. Micro-batches of 3
 * rows straddle the groups of 4 (rows of one prompt are shared within a micro-batch, a lone row
 * is not). */
START_TEST(shared_prefix_changes_training_only_by_rounding) {
    char ini[512], log[512], a_path[512], b_path[512];
    write_run("spa", ""), write_run("spb", "");
    snprintf(ini, sizeof ini, "%s/spa.ini", tmp), snprintf(log, sizeof log, "%s/spa.log", tmp);
    char *a_args[] = {"grpo", "train", ini, "--set", "train.steps=3", "--set",
                      "train.shared_prefix=false", "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, a_args) == 0, "run in full failed, see %s", log);
    snprintf(ini, sizeof ini, "%s/spb.ini", tmp), snprintf(log, sizeof log, "%s/spb.log", tmp);
    char *b_args[] = {"grpo", "train", ini, "--set", "train.steps=3", "--plugin-path",
                      GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, b_args) == 0, "run with shared prompts failed, see %s", log);
    snprintf(a_path, sizeof a_path, "%s/spa/metrics.jsonl", tmp);
    snprintf(b_path, sizeof b_path, "%s/spb/metrics.jsonl", tmp);
    metrics_agree(a_path, b_path, 3, 2e-5);
    /* the shared path ran: it sums in another order, so some value differs in its last bits */
    ck_assert_msg(metrics_differing(a_path, b_path) > 0,
                  "every metric equals the run without shared prompts, bit for bit: the "
                  "shared-prefix path did not run");
}
END_TEST

/* Every metrics line ends with the timings: step_time, throughput/..., then the phases
 * time/{rollout,reference,policy,optimizer} (wall s) and time/cpu/... (CPU s), each >= 0; the
 * wall phases lie inside the step (their sum <= step_time), and rollout and policy take time. */
START_TEST(metrics_end_with_the_phase_timings) {
    static const char *const phases[] = {"rollout", "reference", "policy", "optimizer"};
    char ini[512], log[512], path[512], key[64];
    write_run("ph", "");
    snprintf(ini, sizeof ini, "%s/ph.ini", tmp), snprintf(log, sizeof log, "%s/ph.log", tmp);
    char *args[] = {"grpo", "train", ini, "--set", "train.steps=2", "--plugin-path",
                    GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, args) == 0, "run failed, see %s", log);
    snprintf(path, sizeof path, "%s/ph/metrics.jsonl", tmp);
    char *text = slurp(path), *save = NULL;
    int lines = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(line);
        ck_assert(j != NULL);
        const cJSON *step = cJSON_GetObjectItemCaseSensitive(j, "step_time"), *x = step;
        ck_assert(cJSON_IsNumber(step));
        double sum = 0;
        for (int k = 0; k < 2; k++)
            for (int ph = 0; ph < 4; ph++) {
                snprintf(key, sizeof key, "time/%s%s", k ? "cpu/" : "", phases[ph]);
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
                ck_assert_msg(cJSON_IsNumber(v) && v->valuedouble >= 0, "line %d: %s", lines + 1,
                              key);
                if (!k) sum += v->valuedouble;
                if (ph == 0 || ph == 2) ck_assert_msg(v->valuedouble > 0, "%s is 0", key);
            }
        ck_assert_msg(sum <= step->valuedouble, "phases %g s > step_time %g s", sum,
                      step->valuedouble);
        while (x->next) x = x->next; /* the last key is a phase: the timings come last */
        ck_assert_str_eq(x->string, "time/cpu/optimizer");
        cJSON_Delete(j);
        lines++;
    }
    ck_assert_int_eq(lines, 2);
    free(text);
}
END_TEST

/* [grpo] keys (and sections after it) of each kill-and-resume run, and [sampling] keys: a bf16
 * rollout copy is refreshed from the resumed policy, a LoRA base held in bf16 reloaded, LoRA
 * dropout draws the same masks (seeded by step and pass). */
static const char *const resume_variants[] = {"", "sync_ref_every = 2\nsync_ref_alpha = 0.5\n",
                                              "[lora]\nr = 4\nalpha = 8\n", "",
                                              "[lora]\nr = 4\nalpha = 8\nbase_dtype = bf16\n",
                                              "[lora]\nr = 4\nalpha = 8\ndropout = 0.1\n"};
static const char *const resume_sampling[] = {"", "", "", "weights_dtype = bf16\n", "", ""};

START_TEST(killed_run_resumes_the_same_trajectory) {
    char ini[512], log[512], ck[512];
    write_run_sampling("a", resume_sampling[_i], resume_variants[_i]);
    write_run_sampling("b", resume_sampling[_i], resume_variants[_i]);
    snprintf(ini, sizeof ini, "%s/a.ini", tmp), snprintf(log, sizeof log, "%s/a.log", tmp);
    char *a_args[] = {"grpo", "train", ini, "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, a_args) == 0, "uninterrupted run failed, see %s", log);

    snprintf(ini, sizeof ini, "%s/b.ini", tmp), snprintf(log, sizeof log, "%s/b1.log", tmp);
    snprintf(ck, sizeof ck, "%s/b/ckpt/checkpoint-00000003", tmp);
    char *b_args[] = {"grpo", "train", ini, "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    pid_t pid = spawn(log, b_args);
    struct stat st;
    for (int i = 0; i < 600000 && stat(ck, &st) != 0; i++) usleep(100);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    ck_assert_msg(WIFSIGNALED(status), "the run ended before it could be killed; see %s", log);

    snprintf(log, sizeof log, "%s/b2.log", tmp);
    char *r_args[] = {"grpo", "train", ini, "--resume", "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, r_args) == 0, "resumed run failed, see %s", log);
    char *resumed = slurp(log); /* it must have continued, not started over */
    ck_assert_msg(resumed && strstr(resumed, "resuming from") && !strstr(resumed, "step 1/10"),
                  "the second run did not resume: %s", resumed ? resumed : "");
    free(resumed);

    char ma[512], mb[512];
    snprintf(ma, sizeof ma, "%s/a/metrics.jsonl", tmp),
        snprintf(mb, sizeof mb, "%s/b/metrics.jsonl", tmp);
    same_metrics(ma, mb, 10);
    /* a LoRA run checkpoints its adapters (PEFT's file), not the frozen base */
    const char *weights = strstr(resume_variants[_i], "[lora]") ? "adapter_model.safetensors"
                                                                  : "model.safetensors";
    sh("cmp -s '%s/a/ckpt/checkpoint-00000010/%s' '%s/b/ckpt/checkpoint-00000010/%s'", tmp,
       weights, tmp, weights);
    sh("cmp -s '%s/a/ckpt/checkpoint-00000010/optimizer.safetensors' "
       "'%s/b/ckpt/checkpoint-00000010/optimizer.safetensors'",
       tmp, tmp);
}
END_TEST

/* The mean of metric name over steps [from, to] of a metrics.jsonl. */
static double mean_metric(const char *path, const char *name, int from, int to) {
    char *text = slurp(path), *save = NULL;
    ck_assert_msg(text != NULL, "missing %s", path);
    double sum = 0;
    int n = 0;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(l);
        int step = cJSON_GetObjectItemCaseSensitive(j, "step")->valueint;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);
        if (step >= from && step <= to) {
            ck_assert_msg(cJSON_IsNumber(v), "%s: step %d has no %s", path, step, name);
            sum += v->valuedouble, n++;
        }
        cJSON_Delete(j);
    }
    free(text);
    ck_assert_int_eq(n, to - from + 1);
    return sum / n;
}

static const char *const learn_variants[] = {
    "loss_type = dapo\n",
    "loss_type = grpo\n",
    "loss_type = bnpo\n",
    "loss_type = dr_grpo\n",
    "loss_type = cispo\nepsilon_high = 5.0\n",
    "loss_type = dapo\nbeta = 0.04\nnum_iterations = 2\n",
    "loss_type = sapo\n",
    "loss_type = grpo\nimportance_sampling_level = sequence\n",
    "loss_type = dapo\ntop_entropy_quantile = 0.5\n",
    "loss_type = grpo\nentropy_coef = 0.01\n",
    "loss_type = dapo\ndrop_zero_std_groups = true\n",
    "loss_type = dapo\ndrop_zero_std_groups = true\nresample_rounds = 2\n",
    "loss_type = dapo\nreward_aggregation = normalize_then_sum\n",
    "loss_type = grpo\nbeta = 0.04\nsync_ref_every = 5\n",
};

/* Trains the easy-reward run (short completions score 1) with sampling_extra in [sampling] and
 * grpo_extra in [grpo], 40 steps; its metrics.jsonl path into metrics. */
static void learn_run(const char *name, const char *sampling_extra, const char *grpo_extra,
                      char *metrics, size_t size) {
    char path[512], log[512];
    snprintf(path, sizeof path, "%s/%s.ini", tmp, name);
    FILE *f = fopen(path, "w");
    fprintf(f,
            "[model]\npath = %s/model\n[data]\npath = %s/examples/arith/train.jsonl\n"
            "[sampling]\nnum_generations = 8\nmax_completion_length = 16\n%s"
            "[grpo]\n%s"
            "[optim]\nlr = 1e-2\n"
            "[train]\nsteps = 40\nbatch_prompts = 4\nmicro_batch = 12\nseed = 5\nthreads = 1\n"
            "[log]\ndir = %s/%s\n[checkpoint]\ndir = %s/%s/ckpt\nevery = 0\n"
            "[reward.short]\nplugin = builtin.length\nmin_chars = 0\nmax_chars = 8\n"
            "inside = 1\noutside = 0\n",
            tmp, GRPO_SOURCE_DIR, sampling_extra, grpo_extra, tmp, name, tmp, name);
    fclose(f);
    snprintf(log, sizeof log, "%s/%s.log", tmp, name);
    char *args[] = {"grpo", "train", path, "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, args) == 0, "run failed, see %s", log);
    snprintf(metrics, size, "%s/%s/metrics.jsonl", tmp, name);
}

START_TEST(grpo_raises_an_easy_reward) {
    char metrics[512];
    learn_run("learn", "", learn_variants[_i], metrics, sizeof metrics);
    double first = mean_metric(metrics, "reward", 1, 3),
           last = mean_metric(metrics, "reward", 38, 40);
    if (getenv("GRPO_TEST_VERBOSE"))
        printf("%s-> reward %.3f -> %.3f\n", learn_variants[_i], first, last);
    ck_assert_msg(first < 0.35 && last > 0.7,
                  "[grpo] %s: reward %.3f over steps 1-3, %.3f over "
                  "38-40; expected it to rise from < 0.35 to > 0.7",
                  learn_variants[_i], first, last);
}
END_TEST

/* sampling.weights_dtype = bf16: the rollout samples from a bf16 copy of the policy, refreshed
 * every step, and the loss corrects for the difference (is_correction.h). It still learns, and
 * the copy is close to the policy but not equal: the log-prob differences are small and not all
 * zero, the ratios stay near 1. Each is_mode once. */
static const char *const is_modes[] = {"sequence_mask", "token_truncate", "token_mask",
                                       "sequence_truncate"};

START_TEST(a_bf16_rollout_copy_learns_with_the_correction) {
    char metrics[512], sampling[128];
    snprintf(sampling, sizeof sampling, "weights_dtype = bf16\nis_mode = %s\n", is_modes[_i]);
    learn_run("bf16", sampling, "loss_type = dapo\n", metrics, sizeof metrics);
    double first = mean_metric(metrics, "reward", 1, 3),
           last = mean_metric(metrics, "reward", 38, 40);
    double diff = mean_metric(metrics, "sampling/sampling_logp_difference/mean", 1, 40);
    double dmax = mean_metric(metrics, "sampling/sampling_logp_difference/max", 1, 40);
    double ratio = mean_metric(metrics, "sampling/importance_sampling_ratio/mean", 1, 40);
    if (getenv("GRPO_TEST_VERBOSE"))
        printf("bf16 rollout %s: reward %.3f -> %.3f, |logp diff| mean %.2e max %.2e, ratio "
               "%.4f\n", is_modes[_i], first, last, diff, dmax, ratio);
    ck_assert_msg(first < 0.35 && last > 0.7, "bf16 rollout: reward %.3f -> %.3f", first, last);
    ck_assert_msg(diff > 0 && diff < 0.05 && dmax < 0.5,
                  "bf16 rollout: |logp - sampling logp| mean %g, max %g", diff, dmax);
    ck_assert_msg(fabs(ratio - 1) < 0.05, "bf16 rollout: mean ratio %g", ratio);
}
END_TEST

/* grpo sft on the embedded task: the response loss falls, and --out loads back for eval. */
START_TEST(sft_loss_falls_and_exports) {
    char path[512], log[512], metrics[512], out[512];
    snprintf(path, sizeof path, "%s/sft.ini", tmp);
    FILE *f = fopen(path, "w");
    fprintf(f,
            "[model]\npath = %s/model\n[data]\npath = %s/examples/arith/sft.jsonl\n"
            "[sampling]\nmax_completion_length = 32\n[optim]\nlr = 1e-2\n"
            "[train]\nsteps = 30\nbatch_prompts = 8\nseed = 5\nthreads = 1\n"
            "[log]\ndir = %s/sft\n[checkpoint]\ndir = %s/sft/ckpt\nevery = 0\n"
            "[reward.acc]\nplugin = builtin.accuracy\n",
            tmp, GRPO_SOURCE_DIR, tmp, tmp);
    fclose(f);
    snprintf(log, sizeof log, "%s/sft.log", tmp), snprintf(out, sizeof out, "%s/sft_out", tmp);
    char *args[] = {"grpo", "sft", path, "--out", out, "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, args) == 0, "sft failed, see %s", log);
    snprintf(metrics, sizeof metrics, "%s/sft/metrics.jsonl", tmp);
    double first = mean_metric(metrics, "loss", 1, 3), last = mean_metric(metrics, "loss", 28, 30);
    ck_assert_msg(last < 0.5 * first, "sft loss %.3f -> %.3f; expected it to halve", first, last);
    char *eval[] = {
        "grpo", "eval", path, "--model", out, "--limit", "8", "--plugin-path", GRPO_PACK_BUILD_DIR,
        NULL};
    ck_assert_msg(run_grpo(log, eval) == 0, "eval of the sft output failed, see %s", log);
    char *text = slurp(log);
    ck_assert_msg(strstr(text, "\"accuracy\"") && strstr(text, "\"n\": 8"), "%s", text);
    free(text);
}
END_TEST

/* LoRA on the embedded task: a full SFT warm start (a random head gives the layers nothing to
 * steer: LoRA cannot train the head), then GRPO with r = 8 adapters on the frozen SFT model and
 * beta > 0 (the reference is that model with the adapters off): the easy reward rises, kl
 * becomes > 0, the checkpoint is PEFT's adapter directory, and sft --out with LoRA writes one
 * too. */
START_TEST(lora_grpo_learns_on_an_sft_model) {
    char path[512], log[512], metrics[512], out[600];
    snprintf(path, sizeof path, "%s/warm.ini", tmp);
    FILE *f = fopen(path, "w");
    fprintf(f,
            "[model]\npath = %s/model\n[data]\npath = %s/examples/arith/sft.jsonl\n"
            "[optim]\nlr = 1e-2\n[train]\nsteps = 30\nbatch_prompts = 8\nseed = 5\nthreads = 1\n"
            "[log]\ndir = %s/warm\n[checkpoint]\ndir = %s/warm/ckpt\nevery = 0\n",
            tmp, GRPO_SOURCE_DIR, tmp, tmp);
    fclose(f);
    snprintf(log, sizeof log, "%s/warm.log", tmp), snprintf(out, sizeof out, "%s/warm_out", tmp);
    char *sft[] = {"grpo", "sft", path, "--out", out, "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, sft) == 0, "sft failed, see %s", log);
    snprintf(path, sizeof path, "%s/lora.ini", tmp);
    f = fopen(path, "w");
    fprintf(f,
            "[model]\npath = %s\n[data]\npath = %s/examples/arith/train.jsonl\n"
            "[sampling]\nnum_generations = 8\nmax_completion_length = 16\n"
            "[grpo]\nloss_type = dapo\nbeta = 0.04\n[optim]\nlr = 2e-2\n"
            "[lora]\nr = 8\nalpha = 16\n"
            "[train]\nsteps = 40\nbatch_prompts = 4\nmicro_batch = 12\nseed = 5\nthreads = 1\n"
            "[log]\ndir = %s/lora\n[checkpoint]\ndir = %s/lora/ckpt\nevery = 0\n"
            "[reward.short]\nplugin = builtin.length\nmin_chars = 0\nmax_chars = 8\n"
            "inside = 1\noutside = 0\n",
            out, GRPO_SOURCE_DIR, tmp, tmp);
    fclose(f);
    snprintf(log, sizeof log, "%s/lora.log", tmp);
    char *args[] = {"grpo", "train", path, "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, args) == 0, "LoRA run failed, see %s", log);
    snprintf(metrics, sizeof metrics, "%s/lora/metrics.jsonl", tmp);
    double first = mean_metric(metrics, "reward", 1, 3),
           last = mean_metric(metrics, "reward", 36, 40), kl = mean_metric(metrics, "kl", 36, 40);
    if (getenv("GRPO_TEST_VERBOSE")) printf("LoRA: reward %.3f -> %.3f, kl %.4g\n", first, last, kl);
    ck_assert_msg(first < 0.35 && last > 0.6, "LoRA: reward %.3f over steps 1-3, %.3f over 36-40",
                  first, last);
    ck_assert_msg(kl > 0, "LoRA: kl %g: the reference (adapters off) never differed", kl);
    sh("grep -q '^library_name: peft$' '%s/lora/ckpt/checkpoint-00000040/README.md' && "
       "grep -q '^LoRA adapters (PEFT' '%s/lora/ckpt/checkpoint-00000040/README.md'", tmp, tmp);
    sh("test -s '%s/lora/ckpt/checkpoint-00000040/adapter_model.safetensors' && "
       "grep -q '\"peft_type\":.*\"LORA\"' '%s/lora/ckpt/checkpoint-00000040/adapter_config.json'"
       " && test ! -e '%s/lora/ckpt/checkpoint-00000040/model.safetensors'",
       tmp, tmp, tmp);
    /* eval finds the LoRA checkpoint and applies it to model.path; merge-lora folds it into a
     * plain model that evaluates (greedy) to the same numbers, and generates the same tokens */
    char ev1[600], ev2[600], merged[600], ckpt[600];
    snprintf(ckpt, sizeof ckpt, "%s/lora/ckpt/checkpoint-00000040", tmp);
    snprintf(merged, sizeof merged, "%s/merged", tmp);
    snprintf(ev1, sizeof ev1, "%s/eval1.log", tmp), snprintf(ev2, sizeof ev2, "%s/eval2.log", tmp);
    char *eval1[] = {"grpo", "eval", path, "--limit", "8", "--plugin-path", GRPO_PACK_BUILD_DIR,
                     NULL};
    ck_assert_msg(run_grpo(ev1, eval1) == 0, "eval of the LoRA checkpoint failed, see %s", ev1);
    char *merge[] = {"grpo", "merge-lora", out, ckpt, merged, "--plugin-path",
                     GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, merge) == 0, "merge-lora failed, see %s", log);
    char *eval2[] = {"grpo", "eval", path, "--model", merged, "--limit", "8", "--plugin-path",
                     GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(ev2, eval2) == 0, "eval of the merged model failed, see %s", ev2);
    char *t1 = slurp(ev1), *t2 = slurp(ev2);
    const char *r1 = strstr(t1, "\"n\": 8"), *r2 = strstr(t2, "\"n\": 8");
    ck_assert_msg(strstr(t1, "\"adapter\"") && r1 && r2, "%s\n%s", t1, t2);
    ck_assert_msg(strcmp(r1, r2) == 0, "adapter and merged model differ:\n%s\n%s", t1, t2);
    free(t1), free(t2);
    char *gen1[] = {"grpo", "generate", "--model", out, "--adapter", ckpt, "--prompt-ids",
                    "49,43,50,61", "--max-new-tokens", "12", "--plugin-path", GRPO_PACK_BUILD_DIR,
                    NULL};
    char *gen2[] = {"grpo", "generate", "--model", merged, "--prompt-ids", "49,43,50,61",
                    "--max-new-tokens", "12", "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(ev1, gen1) == 0 && run_grpo(ev2, gen2) == 0, "generate failed: %s %s",
                  ev1, ev2);
    sh("cmp -s '%s' '%s'", ev1, ev2);
    /* sft --out with LoRA: the adapters, in PEFT's format */
    sh("sed -i 's/^lr = 2e-2$/lr = 1e-2/; s|^path = .*train.jsonl$|path = %s/examples/arith/sft.jsonl|;"
       " s/^steps = 40$/steps = 3/' '%s'", GRPO_SOURCE_DIR, path);
    snprintf(out, sizeof out, "%s/lora_sft_out", tmp);
    char sft_log[4200]; /* a new run: a log.dir of its own (the train run's is taken) */
    snprintf(sft_log, sizeof sft_log, "log.dir=%s/lora_sft_log", tmp);
    char *sft2[] = {"grpo", "sft", path, "--out", out, "--set", sft_log, "--plugin-path",
                    GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, sft2) == 0, "LoRA sft failed, see %s", log);
    sh("test -s '%s/adapter_model.safetensors' && test -s '%s/adapter_config.json' && "
       "test ! -e '%s/model.safetensors'", out, out, out);
}
END_TEST

static void expect_failure(char *const args[], const char *needle) {
    char log[512];
    snprintf(log, sizeof log, "%s/fail.log", tmp);
    ck_assert_int_ne(run_grpo(log, args), 0);
    char *text = slurp(log);
    ck_assert_msg(text && strstr(text, needle), "expected '%s' in: %s", needle, text ? text : "");
    free(text);
}

/* The entropy bonus alone: every completion gets the same reward (advantages 0) and beta = 0,
 * so entropy_coef is the only gradient. The fresh tiny model is close to uniform (entropy within
 * ~0.01 of log V), so the measure is the gap log V - entropy: the bonus must close most of it;
 * with entropy_coef = 0 nothing moves the weights and the gap stays. Returns gap(steps 7-8) /
 * gap(steps 1-2). */
static double entropy_gap_ratio(const char *name, const char *coef) {
    char path[512], logf[512], metrics[512];
    snprintf(path, sizeof path, "%s/%s.ini", tmp, name);
    FILE *f = fopen(path, "w");
    ck_assert(f != NULL);
    fprintf(f,
            "[model]\npath = %s/model\n[data]\npath = %s/examples/arith/train.jsonl\n"
            "[sampling]\nnum_generations = 8\nmax_completion_length = 12\n"
            "[grpo]\nloss_type = grpo\nbeta = 0\nentropy_coef = %s\n"
            "[optim]\nlr = 1e-2\nweight_decay = 0\n"
            "[train]\nsteps = 8\nbatch_prompts = 2\nseed = 3\nthreads = 1\n"
            "[log]\ndir = %s/%s\n[checkpoint]\ndir = %s/%s/ckpt\nevery = 0\n"
            "[reward.same]\nplugin = builtin.length\nmin_chars = 0\nmax_chars = 100000\n"
            "inside = 1\noutside = 1\n",
            tmp, GRPO_SOURCE_DIR, coef, tmp, name, tmp, name);
    fclose(f);
    snprintf(logf, sizeof logf, "%s/%s.log", tmp, name);
    char *args[] = {"grpo", "train", path, "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(logf, args) == 0, "run failed, see %s", logf);
    snprintf(metrics, sizeof metrics, "%s/%s/metrics.jsonl", tmp, name);
    double first = mean_metric(metrics, "entropy", 1, 2), last = mean_metric(metrics, "entropy", 7, 8);
    snprintf(path, sizeof path, "%s/model/config.json", tmp);
    char *text = slurp(path);
    cJSON *cfg = cJSON_Parse(text);
    double logv = log(cJSON_GetNumberValue(cJSON_GetObjectItem(cfg, "vocab_size")));
    cJSON_Delete(cfg), free(text);
    ck_assert_msg(first < logv && first > logv - 1, "%s: entropy %.4f, log V %.4f", name, first,
                  logv);
    if (getenv("GRPO_TEST_VERBOSE"))
        printf("entropy_coef %s: entropy %.5f -> %.5f (log V %.5f)\n", coef, first, last, logv);
    return (logv - last) / (logv - first);
}

START_TEST(the_entropy_bonus_alone_raises_the_entropy) {
    double with = entropy_gap_ratio("ent1", "0.5"), without = entropy_gap_ratio("ent0", "0");
    ck_assert_msg(with < 0.5, "entropy_coef = 0.5: the gap to log V kept %.3f of itself", with);
    ck_assert_msg(without > 0.8 && without < 1.25,
                  "entropy_coef = 0: the gap to log V changed to %.3f of itself", without);
}
END_TEST

START_TEST(unsupported_options_are_refused) {
    char ini[512];
    char *args[] = {"grpo", "train", ini, "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    write_run("u2", "sync_ref_every = 3\n");
    snprintf(ini, sizeof ini, "%s/u2.ini", tmp);
    sh("sed -i 's/^beta = 0.04$/beta = 0/' '%s'", ini); /* no reference model */
    expect_failure(args, "grpo.sync_ref_every = 3 needs grpo.beta > 0");
    write_run("u3", "");
    snprintf(ini, sizeof ini, "%s/u3.ini", tmp);
    sh("sed -i 's/^loss_type = dapo$/loss_type = vespo/' '%s'", ini); /* a TRL type not built */
    expect_failure(args, "not implemented");
    /* a LoRA run samples from its frozen base: the bf16 copy is the base itself, not a copy */
    write_run_sampling("u4", "weights_dtype = bf16\n", "[lora]\nr = 4\n");
    snprintf(ini, sizeof ini, "%s/u4.ini", tmp);
    expect_failure(args, "lora.base_dtype = bf16");
}
END_TEST

/* Runs the progress pack's rewards for 3 steps of 2 prompts with drop_zero_std_groups and
 * resample_rounds = rounds; returns the path of its metrics.jsonl (static buffer). */
static const char *progress_run(const char *name, int rounds) {
    static char metrics[512];
    char path[512], log[512], packs[512];
    snprintf(path, sizeof path, "%s/%s.ini", tmp, name);
    FILE *f = fopen(path, "w");
    fprintf(f,
            "[model]\npath = %s/model\n[data]\npath = %s/examples/arith/train.jsonl\n"
            "[sampling]\nnum_generations = 2\nmax_completion_length = 4\n"
            "[grpo]\ndrop_zero_std_groups = true\nresample_rounds = %d\n"
            "[train]\nsteps = 3\nbatch_prompts = 2\nthreads = 1\n"
            "[log]\ndir = %s/%s\n[checkpoint]\ndir = %s/%s/ckpt\nevery = 0\n"
            "[reward.step]\nplugin = pg.step\n[reward.total]\nplugin = pg.total\n",
            tmp, GRPO_SOURCE_DIR, rounds, tmp, name, tmp, name);
    fclose(f);
    snprintf(log, sizeof log, "%s/%s.log", tmp, name);
    snprintf(packs, sizeof packs, "%s/tests/plugins/progress", GRPO_BINARY_DIR);
    char *args[] = {"grpo", "train", path, "--plugin-path", packs, NULL};
    ck_assert_msg(run_grpo(log, args) == 0, "run failed, see %s", log);
    snprintf(metrics, sizeof metrics, "%s/%s/metrics.jsonl", tmp, name);
    return metrics;
}

/* The progress pack's rewards score each sample with its step and total_steps: in metrics.jsonl
 * rewards/step/mean is the steps taken before the batch (logged step - 1), rewards/total/mean is
 * train.steps; and dynamic sampling logs the fraction of groups it dropped (every group here:
 * pg.step and pg.total give all members the same reward). With resample_rounds = 2 each step
 * generates 2 more batches of 2 fresh prompts (all dropped again): about 3x the tokens.
 * train/padding_frac (the padded share of the policy micro-batches' positions) is logged every
 * step, in [0, 1). */
START_TEST(rewards_see_the_training_step) {
    const char *metrics = progress_run("progress", 0);
    for (int step = 1; step <= 3; step++) {
        ck_assert_double_eq(mean_metric(metrics, "rewards/step/mean", step, step), step - 1);
        ck_assert_double_eq(mean_metric(metrics, "rewards/total/mean", step, step), 3);
        ck_assert_double_eq(mean_metric(metrics, "frac_groups_dropped", step, step), 1);
        double pad = mean_metric(metrics, "train/padding_frac", step, step); /* every step */
        ck_assert_msg(pad >= 0 && pad < 1, "train/padding_frac %g at step %d", pad, step);
    }
    double once = mean_metric(metrics, "num_tokens", 3, 3);
    metrics = progress_run("resampled", 2);
    double thrice = mean_metric(metrics, "num_tokens", 3, 3);
    ck_assert_double_eq(mean_metric(metrics, "rewards/step/mean", 3, 3), 2);
    ck_assert_double_eq(mean_metric(metrics, "frac_groups_dropped", 3, 3), 1);
    ck_assert_msg(thrice > 2.5 * once, "num_tokens %g with resampling, %g without", thrice, once);
}
END_TEST

/* Every tensor of ref_dir/model.safetensors is fl(fl((1 - a) prev) + fl(a policy)) of the same
 * tensors in prev_dir and policy_dir (TRL's sync_ref_model, in fp32 as ops->scale/accumulate). */
static void check_mix(const char *ref_dir, const char *prev_dir, const char *policy_dir, float a) {
    char p[3][600];
    const char *dirs[3] = {ref_dir, prev_dir, policy_dir};
    grpo_safetensors *st[3] = {NULL, NULL, NULL};
    grpo_error err;
    grpo_error_init(&err);
    for (int k = 0; k < 3; k++) {
        snprintf(p[k], sizeof p[k], "%s/model.safetensors", dirs[k]);
        ck_assert_msg(grpo_st_open(&st[k], p[k], &err) == GRPO_OK, "%s", err.message);
    }
    size_t checked = 0;
    for (size_t i = 0; i < grpo_st_count(st[0]); i++) {
        const grpo_st_tensor *r = grpo_st_at(st[0], i);
        const grpo_st_tensor *o = grpo_st_find(st[1], r->name), *q = grpo_st_find(st[2], r->name);
        ck_assert_msg(o && q && r->dtype == GRPO_ST_F32, "%s", r->name);
        for (uint64_t j = 0; j < r->numel; j++) {
            float rv, ov, qv;
            memcpy(&rv, (const char *)r->data + 4 * j, 4), memcpy(&ov, (const char *)o->data + 4 * j, 4);
            memcpy(&qv, (const char *)q->data + 4 * j, 4);
            float want = ov * (float)(1.0 - a) + qv * a;
            ck_assert_msg(rv == want, "%s[%llu]: %.9g, want %.9g", r->name, (unsigned long long)j,
                          rv, want);
        }
        checked += r->numel;
    }
    ck_assert_uint_gt(checked, 1000);
    for (int k = 0; k < 3; k++) grpo_st_close(st[k]);
}

/* sync_ref_every = 2, alpha = 0.25 over 4 steps, a checkpoint every 2: reference-2 mixes the
 * policy of step 2 into the initial model, reference-4 the policy of step 4 into reference-2. */
START_TEST(sync_ref_mixes_policy_into_reference) {
    char ini[512], log[512], d[4][600];
    write_run("s", "sync_ref_every = 2\nsync_ref_alpha = 0.25\n");
    snprintf(ini, sizeof ini, "%s/s.ini", tmp), snprintf(log, sizeof log, "%s/s.log", tmp);
    sh("sed -i 's/^steps = 10$/steps = 4/; s/^every = 3$/every = 2/' '%s'", ini);
    char *args[] = {"grpo", "train", ini, "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, args) == 0, "run failed, see %s", log);
    snprintf(d[0], sizeof d[0], "%s/s/ckpt/reference-00000002", tmp);
    snprintf(d[1], sizeof d[1], "%s/model", tmp);
    snprintf(d[2], sizeof d[2], "%s/s/ckpt/checkpoint-00000002", tmp);
    check_mix(d[0], d[1], d[2], 0.25f);
    snprintf(d[3], sizeof d[3], "%s/s/ckpt/reference-00000004", tmp);
    snprintf(d[2], sizeof d[2], "%s/s/ckpt/checkpoint-00000004", tmp);
    check_mix(d[3], d[0], d[2], 0.25f);
}
END_TEST

/* A reward library built against SDK 1.2 (pack pg12) indexes the samples with 1.2's smaller
 * sizeof(grpo_sample): the host lays the array out at that stride for it, so sample i is the one
 * it reads (pg12.member scores i % G) and the 1.3 fields are not there (pg12.step: NaN). */
START_TEST(old_sdk_rewards_read_their_own_layout) {
    char path[512], log[512], packs[512], comp[512];
    snprintf(path, sizeof path, "%s/old.ini", tmp);
    FILE *f = fopen(path, "w");
    fprintf(f,
            "[model]\npath = %s/model\n[data]\npath = %s/examples/arith/train.jsonl\n"
            "[sampling]\nnum_generations = 4\nmax_completion_length = 4\n"
            "[train]\nsteps = 1\nbatch_prompts = 2\nthreads = 1\n"
            "[log]\ndir = %s/old\ncompletions_every = 1\n"
            "[checkpoint]\ndir = %s/old/ckpt\nevery = 0\n"
            "[reward.member]\nplugin = pg12.member\n[reward.step]\nplugin = pg12.step\n",
            tmp, GRPO_SOURCE_DIR, tmp, tmp);
    fclose(f);
    snprintf(log, sizeof log, "%s/old.log", tmp);
    snprintf(packs, sizeof packs, "%s/tests/plugins/progress12", GRPO_BINARY_DIR);
    char *args[] = {"grpo", "train", path, "--plugin-path", packs, NULL};
    ck_assert_msg(run_grpo(log, args) == 0, "run failed, see %s", log);
    snprintf(comp, sizeof comp, "%s/old/completions.jsonl", tmp);
    char *text = slurp(comp), *save = NULL;
    ck_assert_msg(text != NULL, "no %s", comp);
    int i = 0;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save), i++) {
        cJSON *j = cJSON_Parse(l), *rw = cJSON_GetObjectItemCaseSensitive(j, "rewards");
        cJSON *member = cJSON_GetObjectItemCaseSensitive(rw, "member");
        ck_assert_msg(cJSON_IsNumber(member) && member->valuedouble == i % 4, "sample %d: %s", i, l);
        ck_assert_msg(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(rw, "step")), "%s", l);
        cJSON_Delete(j);
    }
    ck_assert_int_eq(i, 8);
    free(text);
}
END_TEST

START_TEST(resume_without_checkpoint_fails_clearly) {
    char ini[512];
    write_run("c", "");
    snprintf(ini, sizeof ini, "%s/c.ini", tmp);
    char *args[] = {"grpo", "train", ini, "--resume", "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    expect_failure(args, "--resume");
}
END_TEST

START_TEST(tokenizer_larger_than_model_is_refused) {
    char ini[512];
    /* the tiny BPE tokenizer fixture (520 ids) has more ids than the tiny model's 264 rows */
    sh("cp -r '%s/model' '%s/model_bigtok' && cp '%s/tests/fixtures/tokenizer/tiny/tokenizer.json' "
       "'%s/model_bigtok/'",
       tmp, tmp, GRPO_SOURCE_DIR, tmp);
    write_run("d", "");
    snprintf(ini, sizeof ini, "%s/d.ini", tmp);
    char model[512];
    snprintf(model, sizeof model, "%s/model_bigtok", tmp);
    char *args[] = {"grpo", "train", ini, "--model", model, "--plugin-path", GRPO_PACK_BUILD_DIR,
                    NULL};
    expect_failure(args, "expected vocab_size >=");
}
END_TEST

START_TEST(run_without_rewards_is_refused) {
    char path[512];
    snprintf(path, sizeof path, "%s/e.ini", tmp);
    FILE *f = fopen(path, "w");
    fprintf(f, "[model]\npath = %s/model\n[data]\npath = %s/examples/arith/train.jsonl\n", tmp,
            GRPO_SOURCE_DIR);
    fclose(f);
    char *args[] = {"grpo", "train", path, "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    expect_failure(args, "reward");
}
END_TEST

/* Rows without the gold answer: builtin.accuracy has no opinion (NaN) on every completion; the
 * run goes on (advantages 0) and says which prompt it could not score. */
START_TEST(all_nan_group_is_reported) {
    char path[512], log[512];
    snprintf(path, sizeof path, "%s/nan.ini", tmp);
    FILE *f = fopen(path, "w");
    fprintf(f,
            "[model]\npath = %s/model\n[data]\npath = %s/examples/arith/sft.jsonl\n"
            "[sampling]\nnum_generations = 2\nmax_completion_length = 4\n"
            "[train]\nsteps = 1\nbatch_prompts = 1\nthreads = 1\n"
            "[log]\ndir = %s/nan\n[checkpoint]\ndir = %s/nan/ckpt\nevery = 0\n"
            "[reward.acc]\nplugin = builtin.accuracy\n",
            tmp, GRPO_SOURCE_DIR, tmp, tmp);
    fclose(f);
    snprintf(log, sizeof log, "%s/nan.log", tmp);
    char *args[] = {"grpo", "train", path, "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, args) == 0, "run failed, see %s", log);
    char *text = slurp(log);
    ck_assert_msg(strstr(text, "sft.jsonl:") && strstr(text, "every reward returned NaN"), "%s",
                  text);
    free(text);
}
END_TEST

/* data.max_prompt_length = 3 cuts "12+95=" to its last 3 tokens (bytes, for init-model's
 * tokenizer): what rewards receive as the prompt (and the completions log shows) is that "95=",
 * the text the policy saw, not the full prompt. */
START_TEST(rewards_see_the_prompt_the_policy_saw) {
    char path[512], log[512], comp[512];
    snprintf(path, sizeof path, "%s/cut.ini", tmp);
    FILE *f = fopen(path, "w");
    fprintf(f,
            "[model]\npath = %s/model\n[data]\npath = %s/examples/arith/train.jsonl\n"
            "max_prompt_length = 3\n"
            "[sampling]\nnum_generations = 2\nmax_completion_length = 4\n"
            "[train]\nsteps = 1\nbatch_prompts = 2\nthreads = 1\n"
            "[log]\ndir = %s/cut\ncompletions_every = 1\n"
            "[checkpoint]\ndir = %s/cut/ckpt\nevery = 0\n"
            "[reward.acc]\nplugin = builtin.accuracy\n",
            tmp, GRPO_SOURCE_DIR, tmp, tmp);
    fclose(f);
    snprintf(log, sizeof log, "%s/cut.log", tmp);
    char *args[] = {"grpo", "train", path, "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, args) == 0, "run failed, see %s", log);
    snprintf(comp, sizeof comp, "%s/cut/completions.jsonl", tmp);
    char *text = slurp(comp), *save = NULL;
    ck_assert_msg(text != NULL, "no %s", comp);
    int lines = 0;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save), lines++) {
        cJSON *j = cJSON_Parse(l);
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "prompt");
        ck_assert_msg(cJSON_IsString(p) && strlen(p->valuestring) == 3 &&
                          p->valuestring[2] == '=' && p->valuestring[0] != '+',
                      "prompt seen by rewards: %s", l);
        cJSON_Delete(j);
    }
    ck_assert_int_eq(lines, 4);
    free(text);
}
END_TEST

int main(void) {
    Suite *s = suite_create("trainer");
    TCase *tc = tcase_create("end to end");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, killed_run_resumes_the_same_trajectory, 0,
                        (int)(sizeof resume_variants / sizeof resume_variants[0]));
    tcase_add_test(tc, set_overrides_change_the_run);
    tcase_add_test(tc, checkpoints_carry_a_model_card);
    tcase_add_test(tc, evaluation_does_not_change_training);
    tcase_add_test(tc, gradient_checkpointing_does_not_change_training);
    tcase_add_test(tc, shared_prefix_changes_training_only_by_rounding);
    tcase_add_loop_test(tc, reusing_the_rollout_does_not_change_training, 0, 2);
    tcase_add_loop_test(tc, decoding_the_reference_does_not_change_training, 0, 3);
    tcase_add_test(tc, metrics_end_with_the_phase_timings);
    tcase_add_test(tc, the_entropy_bonus_alone_raises_the_entropy);
    tcase_add_test(tc, lora_grpo_learns_on_an_sft_model);
    tcase_add_loop_test(tc, grpo_raises_an_easy_reward, 0,
                        (int)(sizeof learn_variants / sizeof learn_variants[0]));
    tcase_add_loop_test(tc, a_bf16_rollout_copy_learns_with_the_correction, 0, 4);
    tcase_add_test(tc, sft_loss_falls_and_exports);
    tcase_add_test(tc, resume_without_checkpoint_fails_clearly);
    tcase_add_test(tc, unsupported_options_are_refused);
    tcase_add_test(tc, sync_ref_mixes_policy_into_reference);
    tcase_add_test(tc, rewards_see_the_training_step);
    tcase_add_test(tc, old_sdk_rewards_read_their_own_layout);
    tcase_add_test(tc, tokenizer_larger_than_model_is_refused);
    tcase_add_test(tc, run_without_rewards_is_refused);
    tcase_add_test(tc, all_nan_group_is_reported);
    tcase_add_test(tc, rewards_see_the_prompt_the_policy_saw);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
