/*
 * test_trainer_moe.c — `grpo train` with a mixture-of-experts policy, through the real binary
 * (GRPO_BINARY_DIR/grpo) on a tiny MiniMind2 MoE made by `grpo init-model --moe`:
 *   - init-model --moe: config.json is a MiniMind2 MoE with the asked sizes; --top-k above
 *     --experts is refused naming --top-k;
 *   - expert-load metrics: grpo_metrics_expert_load on hand-computed loads (a balanced layer, a
 *     collapsed one, an empty one skipped; no per-expert names past 8 experts);
 *   - metrics: every step of a run logs a finite aux_loss > 0 and moe/expert_load/{max_frac,
 *     min_frac,cv,e0..e3} that are consistent (fractions summing to 1, min <= 1/E <= max <= 1/K
 *     as top-k picks K different experts, cv >= 0);
 *   - the aux gradient: with a constant reward every advantage is 0, so the policy loss has no
 *     gradient; grad_norm is then exactly 0 with [grpo] aux_loss_coef = 0 and > 0 with 1 (the
 *     router's loss reaches backward through grpo_batch.aux_weight, and only through it);
 *   - learning: the easy reward of test_trainer.c (a completion of at most 8 characters) rises
 *     from < 0.35 over the first 3 steps to > 0.7 over the last 3 with the MoE policy too.
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "train/metrics.h"

#define N_EXPERTS 4
#define TOP_K 2

#include "grpo_cli_test.h"
#include "train/testing.h"

static char tmp[256];

static void setup(void) {
    snprintf(tmp, sizeof tmp, "/tmp/grpo_test_trainer_moe_XXXXXX");
    ck_assert(mkdtemp(tmp) != NULL);
    sh("'%s/grpo' init-model '%s/model' --moe --experts %d --top-k %d --shared 1 --hidden 32 "
       "--layers 1 --heads 2 --kv-heads 1 --intermediate 32 --seed 3 >/dev/null",
       GRPO_BINARY_DIR, tmp, N_EXPERTS, TOP_K);
}

static void teardown(void) { sh("rm -rf '%s'", tmp); }

/* Writes tmp/name.ini: a tiny run of the MoE policy with the given [grpo] lines and rewards,
 * logging under tmp/name; runs it and returns its metrics.jsonl text (caller frees). */
static char *train(const char *name, int steps, const char *grpo, const char *rewards) {
    char path[512], log[512];
    snprintf(path, sizeof path, "%s/%s.ini", tmp, name);
    FILE *f = fopen(path, "w");
    ck_assert(f != NULL);
    fprintf(f,
            "[model]\npath = %s/model\n[data]\npath = %s/examples/arith/train.jsonl\n"
            "[sampling]\nnum_generations = 8\nmax_completion_length = 16\n"
            "[grpo]\nloss_type = dapo\n%s"
            "[optim]\nlr = 1e-2\n"
            "[train]\nsteps = %d\nbatch_prompts = 4\nmicro_batch = 12\nseed = 5\nthreads = 1\n"
            "[log]\ndir = %s/%s\n[checkpoint]\ndir = %s/%s/ckpt\nevery = 0\n%s",
            tmp, GRPO_SOURCE_DIR, grpo, steps, tmp, name, tmp, name, rewards);
    fclose(f);
    snprintf(log, sizeof log, "%s/%s.log", tmp, name);
    char *args[] = {"grpo", "train", path, "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, args) == 0, "run %s failed, see %s", name, log);
    snprintf(path, sizeof path, "%s/%s/metrics.jsonl", tmp, name);
    char *text = slurp(path);
    ck_assert_msg(text != NULL, "missing %s", path);
    return text;
}

/* The finite number name of one metrics line. */
static double metric(const cJSON *line, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(line, name);
    ck_assert_msg(cJSON_IsNumber(v) && isfinite(v->valuedouble), "no finite %s in step %d", name,
                  cJSON_GetObjectItemCaseSensitive(line, "step")->valueint);
    return v->valuedouble;
}

/* Calls check(line, step) on each line of metrics text; returns the number of lines. */
static int each_line(char *text, void (*check)(const cJSON *, void *), void *ctx) {
    char *save = NULL;
    int n = 0;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save), n++) {
        cJSON *j = cJSON_Parse(l);
        ck_assert_msg(j != NULL, "bad metrics line: %s", l);
        check(j, ctx);
        cJSON_Delete(j);
    }
    return n;
}

START_TEST(expert_load_metrics_by_hand) {
    /* layer 0 balanced (fractions 1/4), layer 1 collapsed on expert 0, layer 2 empty (skipped) */
    const double load[3 * 4] = {2, 2, 2, 2, 8, 0, 0, 0, 0, 0, 0, 0};
    grpo_metric_row row;
    grpo_metric_row_clear(&row);
    grpo_metrics_expert_load(&row, load, 3, 4);
    ck_assert_double_eq_tol(grpo_metric_get(&row, "moe/expert_load/max_frac"), 0.625, 1e-12);
    ck_assert_double_eq_tol(grpo_metric_get(&row, "moe/expert_load/min_frac"), 0.125, 1e-12);
    /* cv: 0 for the balanced layer; std of (1,0,0,0) = sqrt(3)/4 over mean 1/4 = sqrt(3) */
    ck_assert_double_eq_tol(grpo_metric_get(&row, "moe/expert_load/cv"), sqrt(3.0) / 2, 1e-12);
    ck_assert_double_eq_tol(grpo_metric_get(&row, "moe/expert_load/e0"), 0.625, 1e-12);
    ck_assert_double_eq_tol(grpo_metric_get(&row, "moe/expert_load/e3"), 0.125, 1e-12);
    ck_assert(isnan(grpo_metric_get(&row, "moe/expert_load/e4")));

    double wide[16];
    for (int e = 0; e < 16; e++) wide[e] = e < 2 ? 1 : 0;
    grpo_metric_row_clear(&row);
    grpo_metrics_expert_load(&row, wide, 1, 16);
    ck_assert_double_eq_tol(grpo_metric_get(&row, "moe/expert_load/max_frac"), 0.5, 1e-12);
    ck_assert(isnan(grpo_metric_get(&row, "moe/expert_load/e0"))); /* E > 8: no names */

    grpo_metric_row_clear(&row);
    grpo_metrics_expert_load(&row, load + 8, 1, 4); /* only the empty layer: nothing */
    ck_assert_int_eq(row.n, 0);
}
END_TEST

static void check_moe_line(const cJSON *j, void *ctx) {
    (void)ctx;
    double aux = metric(j, "aux_loss"), mx = metric(j, "moe/expert_load/max_frac"),
           mn = metric(j, "moe/expert_load/min_frac"), cv = metric(j, "moe/expert_load/cv");
    ck_assert_msg(aux > 0, "aux_loss %g", aux);
    ck_assert_msg(mn <= 1.0 / N_EXPERTS + 1e-9 && mx >= 1.0 / N_EXPERTS - 1e-9 &&
                      mx <= 1.0 / TOP_K + 1e-9 &&
                      mn >= 0 && cv >= 0,
                  "max_frac %g min_frac %g cv %g", mx, mn, cv);
    double sum = 0;
    for (int e = 0; e < N_EXPERTS; e++) {
        char name[32];
        snprintf(name, sizeof name, "moe/expert_load/e%d", e);
        double f = metric(j, name);
        ck_assert_msg(f >= mn - 1e-9 && f <= mx + 1e-9, "%s = %g outside [%g, %g]", name, f, mn,
                      mx);
        sum += f;
    }
    ck_assert_double_eq_tol(sum, 1.0, 1e-6);
}

START_TEST(every_step_logs_aux_loss_and_expert_load) {
    char *text = train("metrics", 4, "", "[reward.acc]\nplugin = builtin.accuracy\n"
                                         "[reward.fmt]\nplugin = builtin.format\n");
    ck_assert_int_eq(each_line(text, check_moe_line, NULL), 4);
    free(text);
}
END_TEST

static void grad_norm_max(const cJSON *j, void *ctx) {
    double g = metric(j, "grad_norm"), *mx = ctx;
    if (g > *mx) *mx = g;
}

START_TEST(aux_gradient_enters_only_through_aux_loss_coef) {
    /* every completion is inside [0, 1000] characters: reward 1, advantages 0 */
    const char *constant = "[reward.const]\nplugin = builtin.length\nmin_chars = 0\n"
                           "max_chars = 1000\ninside = 1\noutside = 1\n";
    char *off = train("aux_off", 2, "aux_loss_coef = 0\n", constant),
         *on = train("aux_on", 2, "aux_loss_coef = 1\n", constant);
    double g_off = 0, g_on = 0;
    ck_assert_int_eq(each_line(off, grad_norm_max, &g_off), 2);
    ck_assert_int_eq(each_line(on, grad_norm_max, &g_on), 2);
    ck_assert_msg(g_off == 0 && g_on > 1e-6,
                  "grad_norm %g with aux_loss_coef = 0 (expected 0), %g with 1 (expected > 0)",
                  g_off, g_on);
    free(off), free(on);
}
END_TEST

typedef struct reward_means {
    double first, last; /* sums over steps 1-3 and 28-30 */
} reward_means;

static void add_reward(const cJSON *j, void *ctx) {
    reward_means *m = ctx;
    int step = cJSON_GetObjectItemCaseSensitive(j, "step")->valueint;
    double r = metric(j, "reward");
    if (step <= 3) m->first += r / 3;
    if (step >= 28) m->last += r / 3;
    check_moe_line(j, NULL);
}

START_TEST(grpo_raises_an_easy_reward_with_moe) {
    char *text = train("learn", 30, "", "[reward.short]\nplugin = builtin.length\nmin_chars = 0\n"
                                        "max_chars = 8\ninside = 1\noutside = 0\n");
    reward_means m = {0, 0};
    ck_assert_int_eq(each_line(text, add_reward, &m), 30);
    if (getenv("GRPO_TEST_VERBOSE")) printf("moe: reward %.3f -> %.3f\n", m.first, m.last);
    ck_assert_msg(m.first < 0.35 && m.last > 0.7,
                  "reward %.3f over steps 1-3, %.3f over 28-30; expected it to rise from < 0.35 "
                  "to > 0.7",
                  m.first, m.last);
    free(text);
}
END_TEST

/* init-model --moe writes a MiniMind2 MoE config (moe.causal_lm's keys) and refuses bad sizes. */
START_TEST(init_model_moe_config_and_bad_sizes) {
    char path[512], log[512];
    snprintf(path, sizeof path, "%s/model/config.json", tmp);
    char *text = slurp(path);
    cJSON *j = cJSON_Parse(text);
    ck_assert(j != NULL);
    const cJSON *arch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "architectures"), 0);
    ck_assert_str_eq(arch->valuestring, "MiniMindForCausalLM");
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "use_moe")));
    ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(j, "n_routed_experts")->valueint, N_EXPERTS);
    ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(j, "num_experts_per_tok")->valueint, TOP_K);
    ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(j, "n_shared_experts")->valueint, 1);
    cJSON_Delete(j);
    free(text);
    snprintf(path, sizeof path, "%s/bad", tmp), snprintf(log, sizeof log, "%s/bad.log", tmp);
    char *args[] = {"grpo", "init-model", path, "--moe", "--experts", "2", "--top-k", "3", NULL};
    ck_assert_int_ne(run_grpo(log, args), 0);
    text = slurp(log);
    ck_assert_msg(text && strstr(text, "--top-k"), "%s", text ? text : "");
    free(text);
}
END_TEST

int main(void) {
    Suite *s = suite_create("trainer_moe");
    TCase *unit = tcase_create("expert load metrics");
    tcase_add_test(unit, expert_load_metrics_by_hand);
    suite_add_tcase(s, unit);
    TCase *tc = tcase_create("end to end");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, init_model_moe_config_and_bad_sizes);
    tcase_add_test(tc, every_step_logs_aux_loss_and_expert_load);
    tcase_add_test(tc, aux_gradient_enters_only_through_aux_loss_coef);
    tcase_add_test(tc, grpo_raises_an_easy_reward_with_moe);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
