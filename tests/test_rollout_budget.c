/*
 * test_rollout_budget.c — over-sampling (sampling.oversample) and a step's token budget
 * (sampling.max_step_tokens), through `grpo train` (GRPO_BINARY_DIR/grpo) on the tiny model:
 *   - oversample = 2 with drop_zero_std_groups starts 8 groups for a batch of 4, keeps 4 whose
 *     rewards differ (completions.jsonl: 16 rows a step, each group of 4 with two different
 *     rewards; no group dropped) and aborts the rest: sampling/aborted_tokens is at least the
 *     4 groups left out x 4 rows x 1 token. The plain dynamic-sampling run of the same data drops
 *     groups, so the keeping is the over-sampling's doing;
 *   - with a pooled reward (scored by group on threads of its own) among the rewards, the
 *     over-sampled run repeats byte for byte (metrics but timings, completions, weights), and
 *     a run stopped at step 2 and resumed ends with the same completions and weights as one that
 *     never stopped (the data cursor advances by the started prompts, resumed from checkpoints);
 *   - max_step_tokens = 100 with two chunks a step: the step generates at least 100 tokens and
 *     at most 100 + one decode step's rows (16), rows are cut (sampling/budget_cut_rows > 0) and
 *     each counts as truncated (completions/clipped_ratio >= cut rows / rows);
 *   - with grpo.mask_truncated_completions the cut rows leave the loss: a budget of 32 tokens
 *     cuts all 16 rows of step 1 after 2 tokens, and the loss and grad_norm are then 0, while
 *     the same run without the mask has a non-zero gradient there (its advantages are not all 0:
 *     a length window of 1 character splits the 2-token rows).
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpo_cli_test.h"

static char tmp[256];
static int max_chars = 10; /* the length reward's window: 0 .. max_chars characters */
/* A reward scored on threads of its own by group (reward_pool.h), always 0 (its pattern never
 * matches): over-sampling waits for each completed group's pooled scores before judging it. */
#define POOLED "[reward.fmt]\nplugin = builtin.format\npattern = ^never$\nworkers = 2\n" \
               "rows_independent = false\n"
static const char *extra_rewards = ""; /* more [reward.NAME] sections */

static void setup(void) {
    tiny_model_dir(tmp, sizeof tmp, "rollout_budget");
    max_chars = 10, extra_rewards = "";
}

static void teardown(void) { sh("rm -rf '%s'", tmp); }

/* tmp/NAME.ini: `steps` steps of 4 prompts x 4 completions (at most 12 tokens), two rewards
 * (accuracy, 0 here, and a length window that splits about half the groups), [sampling] keys
 * sampling_extra, [grpo] keys grpo_extra, [train] keys train_extra; completions logged every
 * step, a checkpoint every 2 steps. */
static void write_run(const char *name, int steps, const char *sampling_extra,
                      const char *grpo_extra, const char *train_extra) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.ini", tmp, name);
    FILE *f = fopen(path, "w");
    ck_assert(f != NULL);
    fprintf(f,
            "[model]\npath = %s/model\n[data]\npath = %s/examples/arith/train.jsonl\n"
            "[sampling]\nnum_generations = 4\nmax_completion_length = 12\n%s"
            "[grpo]\nloss_type = dapo\n%s"
            "[optim]\nlr = 1e-2\n"
            "[train]\nsteps = %d\nbatch_prompts = 4\nmicro_batch = 3\nseed = 7\nthreads = 1\n%s"
            "[log]\ndir = %s/%s\ncompletions_every = 1\n"
            "[checkpoint]\ndir = %s/%s/ckpt\nevery = 2\n"
            "[reward.acc]\nplugin = builtin.accuracy\n"
            "[reward.short]\nplugin = builtin.length\nmin_chars = 0\nmax_chars = %d\n"
            "inside = 1\noutside = 0\n%s",
            tmp, GRPO_SOURCE_DIR, sampling_extra, grpo_extra, steps, train_extra, tmp, name, tmp,
            name, max_chars, extra_rewards);
    fclose(f);
}

/* `grpo train tmp/NAME.ini` (with --resume when resume); must exit 0. */
static void train(const char *name, int resume) {
    char ini[512], log[512];
    snprintf(ini, sizeof ini, "%s/%s.ini", tmp, name);
    snprintf(log, sizeof log, "%s/%s.%d.log", tmp, name, resume);
    char *args[] = {"grpo", "train", ini, "--plugin-path", GRPO_PACK_BUILD_DIR,
                    resume ? "--resume" : NULL, "--allow-change", "train.steps", NULL};
    ck_assert_msg(run_grpo(log, args) == 0, "run %s failed, see %s", name, log);
}

/* Metric `key` of step in tmp/NAME/metrics.jsonl; NaN when that line lacks it. */
static double metric(const char *name, const char *key, int step) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s/metrics.jsonl", tmp, name);
    char *text = slurp(path), *save = NULL;
    ck_assert_msg(text != NULL, "missing %s", path);
    double v = NAN;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(l);
        ck_assert_msg(j != NULL, "%s: not JSON: %s", path, l);
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "step");
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, key);
        if (cJSON_IsNumber(s) && s->valueint == step && cJSON_IsNumber(x)) v = x->valuedouble;
        cJSON_Delete(j);
    }
    free(text);
    return v;
}

/* The summed rewards of step's completions in tmp/NAME/completions.jsonl, in log order, into
 * r[cap]; returns how many. */
static int step_rewards(const char *name, int step, double *r, int cap) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s/completions.jsonl", tmp, name);
    char *text = slurp(path), *save = NULL;
    ck_assert_msg(text != NULL, "missing %s", path);
    int n = 0;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(l);
        ck_assert_msg(j != NULL, "%s: not JSON: %s", path, l);
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "step");
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, "reward");
        if (cJSON_IsNumber(s) && s->valueint == step && cJSON_IsNumber(x) && n < cap)
            r[n++] = x->valuedouble;
        cJSON_Delete(j);
    }
    free(text);
    return n;
}

#define OVER "oversample = 2\n"
#define DYNAMIC "drop_zero_std_groups = true\n"

START_TEST(oversampling_keeps_groups_with_a_spread_and_aborts_the_rest) {
    extra_rewards = POOLED;
    write_run("plain", 4, "", DYNAMIC, "");
    write_run("over", 4, OVER, DYNAMIC, "");
    train("plain", 0);
    train("over", 0);
    double plain_dropped = 0;
    for (int s = 1; s <= 4; s++) {
        plain_dropped += metric("plain", "frac_groups_dropped", s);
        double aborted = metric("over", "sampling/aborted_tokens", s);
        double dropped = metric("over", "frac_groups_dropped", s);
        if (getenv("GRPO_TEST_VERBOSE"))
            printf("step %d: aborted %g, dropped %g (plain run: %g)\n", s, aborted, dropped,
                   metric("plain", "frac_groups_dropped", s));
        ck_assert_msg(aborted >= 4 * 4, "step %d: sampling/aborted_tokens %g: 4 groups of 4 rows "
                      "left out draw at least 16 tokens", s, aborted);
        ck_assert_msg(dropped == 0, "step %d: frac_groups_dropped %g: every kept group should "
                      "have a spread", s, dropped);
        ck_assert_msg(metric("over", "time/rewards_scored_while_decoding", s) >= 0,
                      "step %d: no pooled reward's call counted: the pool was not used", s);
        double r[64];
        int n = step_rewards("over", s, r, 64);
        ck_assert_msg(n == 16, "step %d: %d completions logged, expected 4 groups x 4", s, n);
        for (int k = 0; k < 4; k++) {
            int spread = 0;
            for (int g = 1; g < 4; g++) spread |= r[4 * k + g] != r[4 * k];
            ck_assert_msg(spread, "step %d: kept group %d has 4 equal rewards %g", s, k, r[4 * k]);
        }
    }
    ck_assert_msg(plain_dropped > 0, "the plain dynamic-sampling run dropped no group: the data "
                  "does not show what over-sampling keeps");
    /* the same run again: the same bytes */
    write_run("over2", 4, OVER, DYNAMIC, "");
    train("over2", 0);
    sh("cd '%s' && sed 's/\"step_time.*//' over/metrics.jsonl > a.cut && "
       "sed 's/\"step_time.*//' over2/metrics.jsonl > b.cut && cmp -s a.cut b.cut", tmp);
    sh("cmp -s '%s/over/completions.jsonl' '%s/over2/completions.jsonl'", tmp, tmp);
    sh("cmp -s '%s/over/ckpt/checkpoint-00000004/model.safetensors' "
       "'%s/over2/ckpt/checkpoint-00000004/model.safetensors'", tmp, tmp);
}
END_TEST

START_TEST(an_oversampled_run_resumes_exactly) {
    extra_rewards = POOLED;
    write_run("whole", 4, OVER, DYNAMIC, "");
    write_run("cut", 2, OVER, DYNAMIC, "");
    train("whole", 0);
    train("cut", 0);
    sh("sed -i 's/^steps = 2/steps = 4/' '%s/cut.ini'", tmp);
    train("cut", 1);
    sh("cmp -s '%s/whole/completions.jsonl' '%s/cut/completions.jsonl'", tmp, tmp);
    sh("cmp -s '%s/whole/ckpt/checkpoint-00000004/model.safetensors' "
       "'%s/cut/ckpt/checkpoint-00000004/model.safetensors'", tmp, tmp);
    sh("cmp -s '%s/whole/ckpt/checkpoint-00000004/optimizer.safetensors' "
       "'%s/cut/ckpt/checkpoint-00000004/optimizer.safetensors'", tmp, tmp);
}
END_TEST

START_TEST(a_token_budget_cuts_the_rollout_and_truncates_the_cut_rows) {
    write_run("budget", 3, "max_step_tokens = 100\n", "", "grad_accum = 2\n");
    train("budget", 0);
    for (int s = 1; s <= 3; s++) {
        double n = metric("budget", "sampling/step_tokens", s);
        double cut = metric("budget", "sampling/budget_cut_rows", s);
        double clipped = metric("budget", "completions/clipped_ratio", s);
        if (getenv("GRPO_TEST_VERBOSE"))
            printf("step %d: %g tokens, %g rows cut, clipped ratio %g\n", s, n, cut, clipped);
        /* 2 chunks x 16 rows of at most 12 tokens could draw 384; one decode step draws 16 */
        ck_assert_msg(n >= 100 && n <= 100 + 16, "step %d: %g tokens for a budget of 100", s, n);
        ck_assert_msg(cut > 0, "step %d: no row cut by the budget", s);
        ck_assert_msg(clipped * 32 >= cut, "step %d: %g rows cut, but only %g of 32 truncated",
                      s, cut, clipped * 32);
    }
}
END_TEST

START_TEST(masked_truncated_completions_leave_the_cut_rows_out_of_the_loss) {
    max_chars = 1; /* 2-token rows: the window splits them */
    write_run("kept", 3, "max_step_tokens = 32\n", "", "");
    write_run("masked", 3, "max_step_tokens = 32\n", "mask_truncated_completions = true\n", "");
    train("kept", 0);
    train("masked", 0);
    int all_cut = 0;
    for (int s = 1; s <= 3; s++) {
        double clipped = metric("masked", "completions/clipped_ratio", s);
        double cut = metric("masked", "sampling/budget_cut_rows", s);
        if (getenv("GRPO_TEST_VERBOSE"))
            printf("step %d: clipped %g cut %g grad_norm %g (unmasked %g, |A| %g)\n", s, clipped,
                   cut, metric("masked", "grad_norm", s), metric("kept", "grad_norm", s),
                   metric("kept", "advantage/abs_mean", s));
        if (s > 1 || clipped < 1) continue; /* step 1: both runs hold the same rollout */
        all_cut = 1;
        ck_assert_msg(cut > 0, "step 1: every row truncated but none by the budget");
        ck_assert_msg(metric("masked", "loss", s) == 0 && metric("masked", "grad_norm", s) == 0,
                      "step 1: every row truncated and masked, yet loss %g grad_norm %g",
                      metric("masked", "loss", s), metric("masked", "grad_norm", s));
        ck_assert_msg(metric("kept", "advantage/abs_mean", s) > 0,
                      "step 1: the advantages are all 0: the test shows nothing");
        ck_assert_msg(metric("kept", "grad_norm", s) > 0,
                      "step 1: without the mask the cut rows should train");
    }
    ck_assert_msg(all_cut, "step 1 kept a row the budget did not truncate: lower the budget");
}
END_TEST

int main(void) {
    Suite *s = suite_create("rollout_budget");
    TCase *tc = tcase_create("budget");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, oversampling_keeps_groups_with_a_spread_and_aborts_the_rest);
    tcase_add_test(tc, an_oversampled_run_resumes_exactly);
    tcase_add_test(tc, a_token_budget_cuts_the_rollout_and_truncates_the_cut_rows);
    tcase_add_test(tc, masked_truncated_completions_leave_the_cut_rows_out_of_the_loss);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
