/*
 * test_best_checkpoint.c — checkpoint.best_metric through the real binary on a tiny model: 12 GRPO
 * steps evaluated every 2 (eval/reward of a length-window reward, which moves as the policy
 * learns), and
 *   - checkpoint-best is the step whose eval/reward in metrics.jsonl is the best (max and min: the
 *     first of equal values), its weights those of checkpoint-STEP of that step, and every
 *     checkpoint's trainer_state.json records the best so far;
 *   - checkpoint.keep = 1 never prunes it, and --resume goes on from checkpoint-N, not from it;
 *   - a run stopped at step 4 and resumed to 12 ends with the same checkpoint-best (same record,
 *     same weights) as one that never stopped: in max mode the best moves after the resume, in
 *     min mode it stays the one found before it (a resumed run that forgot it would replace it);
 *   - a checkpoint-best newer than the checkpoint resumed (a run killed between them) is named in
 *     a warning and the replayed steps find and save the same best again;
 *   - a resume that changes checkpoint.best_metric (no --allow-change needed) drops the resumed
 *     best with a warning and finds the best afresh;
 *   - without the key there is no checkpoint-best and no "best" record.
 * The bad values of the keys are in tests/bad_inputs (ckpt_best_*).
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "grpo_cli_test.h"

static char tmp[256];

static void setup(void) { tiny_model_dir(tmp, sizeof tmp, "best"); }

static void teardown(void) { sh("rm -rf '%s'", tmp); }

/* tmp/NAME.ini: `steps` GRPO steps, an evaluation every 2 on 32 prompts, a checkpoint every 2
 * keeping keep, logs in tmp/NAME, checkpoints in tmp/NAME/ckpt; best = the [checkpoint] lines of
 * the keys under test ("" for none). */
static void write_run(const char *name, int steps, int keep, const char *best) {
    char path[512], data[512];
    snprintf(path, sizeof path, "%s/%s.ini", tmp, name);
    snprintf(data, sizeof data, "%s/examples/arith/train.jsonl", GRPO_SOURCE_DIR);
    FILE *f = fopen(path, "w");
    ck_assert(f != NULL);
    fprintf(f,
            "[model]\npath = %s/model\n"
            "[data]\npath = %s\neval_path = %s\n"
            "[sampling]\nnum_generations = 4\nmax_completion_length = 8\ntemperature = 1.0\n"
            "[grpo]\nbeta = 0.04\nloss_type = dapo\n"
            "[optim]\nlr = 1e-2\n"
            "[train]\nsteps = %d\nbatch_prompts = 2\nseed = 7\nthreads = 1\n"
            "eval_every = 2\neval_limit = 32\n"
            "[log]\ndir = %s/%s\n"
            "[checkpoint]\ndir = %s/%s/ckpt\nevery = 2\nkeep = %d\n%s"
            "[reward.len]\nplugin = builtin.length\nmin_chars = 10\n",
            tmp, data, data, steps, tmp, name, tmp, name, keep, best);
    fclose(f);
}

/* `grpo train tmp/NAME.ini [--resume --allow-change train.steps]`; the output (malloc'd) into
 * *out when out is non-NULL. Fails the test unless it exits 0. */
static void train(const char *name, int resume, const char *logname, char **out) {
    char ini[512], log[512];
    snprintf(ini, sizeof ini, "%s/%s.ini", tmp, name);
    snprintf(log, sizeof log, "%s/%s.%s.log", tmp, name, logname);
    char *args[] = {"grpo", "train", ini, "--plugin-path", GRPO_PACK_BUILD_DIR,
                    resume ? "--resume" : NULL, "--allow-change", "train.steps", NULL};
    int rc = run_grpo(log, args);
    char *text = slurp(log);
    ck_assert_msg(rc == 0, "grpo train %s failed (%d): %s", name, rc, text);
    if (out) *out = text;
    else free(text);
}

/* Evaluations of run NAME: eval/reward of every step that has one (metrics.jsonl). */
typedef struct evals {
    int n;
    long step[64];
    double value[64];
} evals;

static evals read_evals(const char *name) {
    char path[512], line[8192];
    snprintf(path, sizeof path, "%s/%s/metrics.jsonl", tmp, name);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "missing %s", path);
    evals e = {0};
    while (fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "eval/reward");
        if (cJSON_IsNumber(v) && e.n < 64) {
            e.step[e.n] = (long)cJSON_GetObjectItemCaseSensitive(j, "step")->valuedouble;
            e.value[e.n++] = v->valuedouble;
        }
        cJSON_Delete(j);
    }
    fclose(f);
    ck_assert_int_eq(e.n, 6); /* steps 2, 4, ..., 12 */
    return e;
}

/* The best eval/reward (max) of the run NAME stopped at step `upto` (its evaluations 2..upto). */
static double read_evals_upto(const char *name, long upto) {
    char path[512], line[8192];
    snprintf(path, sizeof path, "%s/%s/metrics.jsonl", tmp, name);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "missing %s", path);
    double best = -INFINITY;
    while (fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "eval/reward");
        long step = (long)cJSON_GetObjectItemCaseSensitive(j, "step")->valuedouble;
        if (cJSON_IsNumber(v) && step <= upto && v->valuedouble > best) best = v->valuedouble;
        cJSON_Delete(j);
    }
    fclose(f);
    return best;
}

/* The index of the best evaluation (higher with max, lower otherwise; the first of equals). */
static int best_of(const evals *e, int max) {
    int b = 0;
    for (int i = 1; i < e->n; i++)
        if (max ? e->value[i] > e->value[b] : e->value[i] < e->value[b]) b = i;
    return b;
}

/* The "best" record of tmp/NAME/ckpt/DIR/trainer_state.json (NULL when it has none); its step
 * into *step when step is non-NULL. The caller deletes the returned document. */
static cJSON *best_record(const char *name, const char *dir, long *step, const cJSON **best) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s/ckpt/%s/trainer_state.json", tmp, name, dir);
    char *text = slurp(path);
    ck_assert_msg(text != NULL, "missing %s", path);
    cJSON *j = cJSON_Parse(text);
    free(text);
    ck_assert_msg(j != NULL, "%s: not JSON", path);
    if (step) *step = (long)cJSON_GetObjectItemCaseSensitive(j, "step")->valuedouble;
    *best = cJSON_GetObjectItemCaseSensitive(j, "best");
    return j;
}

/* tmp/NAME/ckpt/DIR records the best {metric eval/reward, mode, value, step}. */
static void check_record(const char *name, const char *dir, int max, double value, long step) {
    const cJSON *b;
    cJSON *j = best_record(name, dir, NULL, &b);
    ck_assert_msg(cJSON_IsObject(b), "%s/%s: no best record", name, dir);
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(b, "metric")->valuestring, "eval/reward");
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(b, "mode")->valuestring, max ? "max" : "min");
    double v = cJSON_GetObjectItemCaseSensitive(b, "value")->valuedouble;
    ck_assert_msg(fabs(v - value) < 1e-6, "%s/%s: best value %.9g, metrics.jsonl %.9g", name, dir,
                  v, value);
    ck_assert_int_eq((long)cJSON_GetObjectItemCaseSensitive(b, "step")->valuedouble, step);
    cJSON_Delete(j);
}

static const char *best_keys(int max) {
    return max ? "best_metric = eval/reward\nbest_mode = max\n"
               : "best_metric = eval/reward\nbest_mode = min\n";
}

/* checkpoint-best of a keep = 0 run (every checkpoint kept) is the best evaluated step's. */
static long best_is_the_best_evaluated_step(int max) {
    const char *name = max ? "max" : "min";
    write_run(name, 12, 0, best_keys(max));
    train(name, 0, "run", NULL);
    evals e = read_evals(name);
    int b = best_of(&e, max);
    long step;
    const cJSON *rec;
    cJSON *j = best_record(name, "checkpoint-best", &step, &rec);
    cJSON_Delete(j);
    ck_assert_int_eq(step, e.step[b]);
    check_record(name, "checkpoint-best", max, e.value[b], e.step[b]);
    /* its weights are those of that step */
    sh("cmp -s '%s/%s/ckpt/checkpoint-best/model.safetensors' "
       "'%s/%s/ckpt/checkpoint-%08ld/model.safetensors'",
       tmp, name, tmp, name, e.step[b]);
    /* every checkpoint records the best up to its step */
    for (int i = 0; i < e.n; i++) {
        char dir[64];
        int bi = 0;
        for (int k = 1; k <= i; k++)
            if (max ? e.value[k] > e.value[bi] : e.value[k] < e.value[bi]) bi = k;
        snprintf(dir, sizeof dir, "checkpoint-%08ld", e.step[i]);
        check_record(name, dir, max, e.value[bi], e.step[bi]);
    }
    return e.step[b];
}

START_TEST(best_is_the_best_evaluated_step_max_and_min) {
    long at_max = best_is_the_best_evaluated_step(1);
    long at_min = best_is_the_best_evaluated_step(0);
    /* the premise: the metric moves, so the mode picks another step */
    ck_assert_msg(at_max != at_min, "eval/reward best at step %ld in both modes", at_max);
}
END_TEST

START_TEST(keep_1_never_prunes_best_and_resume_skips_it) {
    write_run("k", 12, 1, best_keys(1));
    train("k", 0, "run", NULL);
    sh("test \"$(ls '%s/k/ckpt' | tr '\\n' ' ')\" = 'checkpoint-00000012 checkpoint-best '", tmp);
    evals e = read_evals("k");
    int b = best_of(&e, 1);
    ck_assert_msg(e.step[b] < 12, "premise: the best is not the last step (%ld)", e.step[b]);
    check_record("k", "checkpoint-best", 1, e.value[b], e.step[b]);
    sh("sed -i 's/^steps = 12/steps = 14/' '%s/k.ini'", tmp);
    char *out = NULL;
    train("k", 1, "resumed", &out);
    ck_assert_msg(strstr(out, "checkpoint-00000012 (step 12)") != NULL, "%s", out);
    free(out);
    sh("test -d '%s/k/ckpt/checkpoint-best' && test -d '%s/k/ckpt/checkpoint-00000014'", tmp, tmp);
}
END_TEST

/* A run stopped at step 4 and resumed to 12 against one that never stopped. */
static void resume_keeps_the_best(int max) {
    char a[16], r[16];
    snprintf(a, sizeof a, "a_%s", max ? "max" : "min");
    snprintf(r, sizeof r, "r_%s", max ? "max" : "min");
    write_run(a, 12, 1, best_keys(max));
    train(a, 0, "run", NULL);
    write_run(r, 4, 1, best_keys(max));
    train(r, 0, "first", NULL);
    sh("sed -i 's/^steps = 4/steps = 12/' '%s/%s.ini'", tmp, r);
    char *out = NULL;
    train(r, 1, "resumed", &out);
    evals e = read_evals(a);
    int b = best_of(&e, max);
    /* the premise of each mode: max finds its best after the resume, min before it */
    if (max) {
        ck_assert_msg(e.step[b] > 4, "premise: max best after step 4 (%ld)", e.step[b]);
        ck_assert_msg(strstr(out, "/checkpoint-best (step") != NULL, "%s", out);
    } else {
        ck_assert_msg(e.step[b] <= 4, "premise: min best by step 4 (%ld)", e.step[b]);
        ck_assert_msg(strstr(out, "/checkpoint-best (step") == NULL,
                      "the resumed run replaced the best it resumed with: %s", out);
    }
    free(out);
    check_record(a, "checkpoint-best", max, e.value[b], e.step[b]);
    check_record(r, "checkpoint-best", max, e.value[b], e.step[b]);
    check_record(r, "checkpoint-00000012", max, e.value[b], e.step[b]);
    sh("cmp -s '%s/%s/ckpt/checkpoint-best/model.safetensors' "
       "'%s/%s/ckpt/checkpoint-best/model.safetensors'",
       tmp, a, tmp, r);
}

START_TEST(resume_keeps_comparing_against_the_same_best) {
    resume_keeps_the_best(1);
    resume_keeps_the_best(0);
}
END_TEST

/* checkpoint.best_metric / best_mode may change on resume (no --allow-change): the resumed best,
 * of another metric, is dropped with a warning and the best is found afresh after the resume. */
START_TEST(a_changed_best_metric_starts_afresh) {
    write_run("c", 4, 1, best_keys(1));
    train("c", 0, "first", NULL);
    check_record("c", "checkpoint-00000004", 1, read_evals_upto("c", 4), 4);
    sh("sed -i 's/^steps = 4/steps = 12/; "
       "s|^best_metric = .*|best_metric = eval/rewards/len/mean|; "
       "s/^best_mode = max/best_mode = min/' '%s/c.ini'",
       tmp);
    char *out = NULL;
    train("c", 1, "resumed", &out);
    ck_assert_msg(strstr(out, "the best is found afresh") != NULL, "%s", out);
    free(out);
    evals e = read_evals("c"); /* eval/reward = eval/rewards/len/mean: one reward of weight 1 */
    int b = 2;                 /* the first evaluation after the resume (step 6) */
    ck_assert_int_eq(e.step[b], 6);
    for (int i = b + 1; i < e.n; i++)
        if (e.value[i] < e.value[b]) b = i;
    const cJSON *rec;
    cJSON *j = best_record("c", "checkpoint-best", NULL, &rec);
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(rec, "metric")->valuestring,
                     "eval/rewards/len/mean");
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(rec, "mode")->valuestring, "min");
    ck_assert_int_eq((long)cJSON_GetObjectItemCaseSensitive(rec, "step")->valuedouble, e.step[b]);
    cJSON_Delete(j);
}
END_TEST

/* A run killed after saving checkpoint-best at a step past its newest checkpoint-N: the resume
 * names it in a warning and replays those steps, finding (and saving) the same best again. */
START_TEST(a_best_from_the_replayed_steps_is_replaced) {
    write_run("p", 12, 0, best_keys(1));
    train("p", 0, "run", NULL);
    evals e = read_evals("p");
    int b = best_of(&e, 1);
    ck_assert_msg(e.step[b] > 4, "premise: max best after step 4 (%ld)", e.step[b]);
    sh("cd '%s/p/ckpt' && for s in 6 8 10 12; do rm -r checkpoint-0000000$s checkpoint-000000$s "
       "2>/dev/null; done; ls -d checkpoint-00000004 checkpoint-best >/dev/null",
       tmp);
    char *out = NULL, want[128];
    train("p", 1, "resumed", &out);
    snprintf(want, sizeof want, "checkpoint-best holds step %ld, but the resumed checkpoint's best "
             "is step 4", e.step[b]);
    ck_assert_msg(strstr(out, want) != NULL, "%s", out);
    snprintf(want, sizeof want, "/checkpoint-best (step %ld,", e.step[b]);
    ck_assert_msg(strstr(out, want) != NULL, "%s", out);
    free(out);
    check_record("p", "checkpoint-best", 1, e.value[b], e.step[b]);
}
END_TEST

START_TEST(off_by_default) {
    write_run("off", 4, 0, "");
    train("off", 0, "run", NULL);
    sh("test ! -e '%s/off/ckpt/checkpoint-best'", tmp);
    const cJSON *b;
    cJSON *j = best_record("off", "checkpoint-00000004", NULL, &b);
    ck_assert_ptr_null(b);
    cJSON_Delete(j);
}
END_TEST

static Suite *best_suite(void) {
    Suite *s = suite_create("best_checkpoint");
    TCase *tc = tcase_create("best_checkpoint");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, best_is_the_best_evaluated_step_max_and_min);
    tcase_add_test(tc, keep_1_never_prunes_best_and_resume_skips_it);
    tcase_add_test(tc, resume_keeps_comparing_against_the_same_best);
    tcase_add_test(tc, a_changed_best_metric_starts_afresh);
    tcase_add_test(tc, a_best_from_the_replayed_steps_is_replaced);
    tcase_add_test(tc, off_by_default);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(best_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
