/*
 * test_resume.c — nothing a run has done is lost, through the real binary on a tiny model:
 *   - a run resumed from a checkpoint that checkpoint.keep later prunes goes on saving (the
 *     policy's tokenizer files are held in memory, not re-read from the pruned directory);
 *   - a run SIGKILLed twice and resumed twice with keep = 2 writes the same metrics and the same
 *     final weights as a run that never stopped;
 *   - --resume skips a corrupt newest checkpoint, a stray empty checkpoint-N directory and a
 *     trainer_state.json with out-of-range values, naming each, and falls back to the newest one
 *     that loads;
 *   - checkpoint.dir entries that are symbolic links are refused, and nothing they point at is
 *     deleted; checkpoint.dir with missing parents is created before any work;
 *   - a resumed sft logs each step once;
 *   - a metrics.jsonl on a full disk (/dev/full) is an error naming the file, not exit 0
 *     (long log lines surviving a resume: test_metrics.c).
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "grpo_cli_test.h"

static char tmp[256];

/* tmp/NAME.ini: 12 GRPO steps of the tiny model on data (NULL: the embedded arithmetic prompts),
 * log_keys added to [log]; checkpoints as ckpt says (NULL: every 2 keeping 2 under tmp/NAME). */
static void write_run(const char *name, const char *log_keys, const char *data,
                      const char *ckpt) {
    char path[512], def_data[512], def_ckpt[512];
    snprintf(path, sizeof path, "%s/%s.ini", tmp, name);
    snprintf(def_data, sizeof def_data, "%s/examples/arith/train.jsonl", GRPO_SOURCE_DIR);
    snprintf(def_ckpt, sizeof def_ckpt, "dir = %s/%s/ckpt\nevery = 2\nkeep = 2\n", tmp, name);
    FILE *f = fopen(path, "w");
    ck_assert(f != NULL);
    fprintf(f,
            "[model]\npath = %s/model\n"
            "[data]\npath = %s\n"
            "[sampling]\nnum_generations = 4\nmax_completion_length = 8\ntemperature = 1.0\n"
            "[grpo]\nbeta = 0.04\nloss_type = dapo\n"
            "[optim]\nlr = 1e-2\n"
            "[train]\nsteps = 12\nbatch_prompts = 2\nseed = 7\nthreads = 1\n"
            "[log]\ndir = %s/%s\n%s"
            "[checkpoint]\n%s"
            "[reward.len]\nplugin = builtin.length\n",
            tmp, data ? data : def_data, tmp, name, log_keys ? log_keys : "",
            ckpt ? ckpt : def_ckpt);
    fclose(f);
}

static void setup(void) { tiny_model_dir(tmp, sizeof tmp, "resume"); }

static void teardown(void) { sh("rm -rf '%s'", tmp); }

/* Runs `grpo train tmp/NAME.ini [--resume --allow-change train.steps]` (the tests here go on to
 * more steps than the run first had), output in tmp/NAME.LOGNAME.log; returns the exit status
 * and, when out is non-NULL, the output (malloc'd). */
static int train(const char *name, int resume, const char *logname, char **out) {
    char ini[512], log[512];
    snprintf(ini, sizeof ini, "%s/%s.ini", tmp, name);
    snprintf(log, sizeof log, "%s/%s.%s.log", tmp, name, logname);
    char *args[] = {"grpo", "train", ini, "--plugin-path", GRPO_PACK_BUILD_DIR,
                    resume ? "--resume" : NULL, "--allow-change", "train.steps", NULL};
    int rc = run_grpo(log, args);
    if (out) *out = slurp(log);
    return rc;
}

static int exists(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int exists(const char *fmt, ...) {
    char path[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof path, fmt, ap);
    va_end(ap);
    struct stat st;
    return lstat(path, &st) == 0;
}

/* The checkpoint-N directory names under tmp/NAME/ckpt, space-separated in sorted order. */
static void checkpoints(const char *name, char *out, size_t cap) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ls '%s/%s/ckpt' | grep '^checkpoint-' | tr '\\n' ' '", tmp, name);
    FILE *p = popen(cmd, "r");
    ck_assert(p != NULL);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    pclose(p);
}

/* Number of lines of a file. */
static int count_lines(const char *path) {
    char *s = slurp(path);
    ck_assert_msg(s != NULL, "missing %s", path);
    int n = 0;
    for (char *p = s; *p; p++) n += *p == '\n';
    free(s);
    return n;
}

START_TEST(resume_survives_pruning_its_own_checkpoint) {
    write_run("r", NULL, NULL, NULL);
    sh("sed -i 's/^steps = 12/steps = 2/' '%s/r.ini'", tmp);
    ck_assert_int_eq(train("r", 0, "first", NULL), 0);
    ck_assert(exists("%s/r/ckpt/checkpoint-00000002", tmp));
    sh("sed -i 's/^steps = 2/steps = 12/' '%s/r.ini'", tmp);
    char *out = NULL;
    int rc = train("r", 1, "second", &out);
    ck_assert_msg(rc == 0, "resumed run failed: %s", out);
    ck_assert_ptr_nonnull(strstr(out, "checkpoint-00000002 (step 2)"));
    free(out);
    char names[512];
    checkpoints("r", names, sizeof names);
    ck_assert_str_eq(names, "checkpoint-00000010 checkpoint-00000012 ");
    ck_assert(exists("%s/r/ckpt/checkpoint-00000012/tokenizer.json", tmp));
    char m[512];
    snprintf(m, sizeof m, "%s/r/metrics.jsonl", tmp);
    ck_assert_int_eq(count_lines(m), 12);
}
END_TEST

/* Starts `grpo train tmp/NAME.ini`, kills it with SIGKILL once checkpoint-STEP exists. */
static void train_and_kill(const char *name, int resume, long step) {
    char ini[512], log[512], ck[512];
    snprintf(ini, sizeof ini, "%s/%s.ini", tmp, name);
    snprintf(log, sizeof log, "%s/%s.kill%ld.log", tmp, name, step);
    snprintf(ck, sizeof ck, "%s/%s/ckpt/checkpoint-%08ld", tmp, name, step);
    char *args[] = {"grpo", "train", ini, "--plugin-path", GRPO_PACK_BUILD_DIR,
                    resume ? "--resume" : NULL, "--allow-change", "train.steps", NULL};
    pid_t pid = spawn(log, args);
    struct stat st;
    for (int i = 0; i < 600000 && stat(ck, &st) != 0; i++) usleep(100);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    ck_assert_msg(WIFSIGNALED(status), "the run ended before it could be killed; see %s", log);
}

START_TEST(killed_twice_with_keep_2_resumes_the_same_trajectory) {
    write_run("a", "completions_every = 1\n", NULL, NULL);
    write_run("b", "completions_every = 1\n", NULL, NULL);
    /* longer steps, so the 8 steps after checkpoint 4 outlast the wait for it on a busy machine */
    sh("sed -i 's/^num_generations = 4/num_generations = 8/; "
       "s/^max_completion_length = 8/max_completion_length = 32/' '%s/a.ini' '%s/b.ini'",
       tmp, tmp);
    ck_assert_int_eq(train("a", 0, "whole", NULL), 0);
    train_and_kill("b", 0, 4);
    train_and_kill("b", 1, 8);
    char *out = NULL;
    ck_assert_msg(train("b", 1, "last", &out) == 0, "last resume failed: %s", out);
    free(out);
    /* every metric but the timings, which come last in each line */
    sh("cd '%s' && sed 's/\"step_time.*//' a/metrics.jsonl > a.cut && "
       "sed 's/\"step_time.*//' b/metrics.jsonl > b.cut && cmp -s a.cut b.cut",
       tmp);
    sh("cmp -s '%s/a/completions.jsonl' '%s/b/completions.jsonl'", tmp, tmp);
    sh("cmp -s '%s/a/ckpt/checkpoint-00000012/model.safetensors' "
       "'%s/b/ckpt/checkpoint-00000012/model.safetensors'",
       tmp, tmp);
    sh("cmp -s '%s/a/ckpt/checkpoint-00000012/optimizer.safetensors' "
       "'%s/b/ckpt/checkpoint-00000012/optimizer.safetensors'",
       tmp, tmp);
    char names[512];
    checkpoints("b", names, sizeof names);
    ck_assert_str_eq(names, "checkpoint-00000010 checkpoint-00000012 ");
}
END_TEST

/* A finished 4-step run of NAME (checkpoints 2 and 4), then steps raised back to 12. */
static void two_checkpoints(const char *name) {
    write_run(name, NULL, NULL, NULL);
    sh("sed -i 's/^steps = 12/steps = 4/' '%s/%s.ini'", tmp, name);
    ck_assert_int_eq(train(name, 0, "first", NULL), 0);
    sh("sed -i 's/^steps = 4/steps = 6/' '%s/%s.ini'", tmp, name);
}

/* --resume after damage: exits 0, resumed from checkpoint 2, names what it skipped. */
static void resumes_from_2_skipping(const char *name, const char *skipped_why) {
    char *out = NULL;
    int rc = train(name, 1, "resume", &out);
    ck_assert_msg(rc == 0, "resume failed: %s", out);
    ck_assert_msg(strstr(out, "resuming from") && strstr(out, "checkpoint-00000002 (step 2)"),
                  "did not fall back to checkpoint 2: %s", out);
    ck_assert_msg(strstr(out, "warning: --resume: skipping") && strstr(out, skipped_why),
                  "no warning naming '%s': %s", skipped_why, out);
    free(out);
    ck_assert(exists("%s/%s/ckpt/checkpoint-00000006/model.safetensors", tmp, name));
}

START_TEST(corrupt_newest_checkpoint_falls_back) {
    two_checkpoints("c");
    sh("truncate -s 100 '%s/c/ckpt/checkpoint-00000004/model.safetensors'", tmp);
    resumes_from_2_skipping("c", "checkpoint-00000004");
}
END_TEST

START_TEST(stray_empty_checkpoint_directory_is_skipped) {
    two_checkpoints("e");
    sh("mkdir '%s/e/ckpt/checkpoint-00000009'", tmp);
    sh("rm -rf '%s/e/ckpt/checkpoint-00000004'", tmp);
    resumes_from_2_skipping("e", "checkpoint-00000009");
}
END_TEST

START_TEST(trainer_state_values_are_range_checked) {
    static const char *const bad[] = {"\"step\": 1e300", "\"step\": -3", "\"step\": 2.5",
                                      "\"optimizer_step\": 99", "\"num_tokens\": -1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[16];
        snprintf(name, sizeof name, "s%zu", i);
        two_checkpoints(name);
        const char *key = strchr(bad[i] + 1, '"');
        sh("sed -i -E 's/\"%.*s\":[^,]*/%s/' '%s/%s/ckpt/checkpoint-00000004/trainer_state.json'",
           (int)(key - bad[i] - 1), bad[i] + 1, bad[i], tmp, name);
        resumes_from_2_skipping(name, "expected a");
    }
}
END_TEST

START_TEST(links_in_checkpoint_dir_are_refused_not_followed) {
    static const char *const links[] = {".checkpoint-00000002.tmp", "checkpoint-00000001"};
    for (int i = 0; i < 2; i++) {
        char name[8];
        snprintf(name, sizeof name, "l%d", i);
        write_run(name, NULL, NULL, NULL);
        sh("mkdir -p '%s/%s/ckpt' '%s/victim%d' && echo keep > '%s/victim%d/precious'", tmp, name,
           tmp, i, tmp, i);
        sh("ln -s '%s/victim%d' '%s/%s/ckpt/%s'", tmp, i, tmp, name, links[i]);
        char *out = NULL;
        ck_assert_int_ne(train(name, 0, "run", &out), 0);
        ck_assert_msg(strstr(out, links[i]) && strstr(out, "is a symbolic link"),
                      "no error naming the link: %s", out);
        ck_assert_msg(!strstr(out, "step 1/"), "refused only after training: %s", out);
        free(out);
        ck_assert(exists("%s/victim%d/precious", tmp, i));
    }
}
END_TEST

START_TEST(checkpoint_dir_parents_are_created_up_front) {
    write_run("p", NULL, NULL, "dir = deep/er/ckpt\nevery = 2\n");
    sh("sed -i 's/^steps = 12/steps = 2/' '%s/p.ini'", tmp);
    sh("cd '%s' && '%s/grpo' train p.ini --plugin-path '%s' > p.log 2>&1", tmp, GRPO_BINARY_DIR,
       GRPO_PACK_BUILD_DIR);
    ck_assert(exists("%s/deep/er/ckpt/checkpoint-00000002/model.safetensors", tmp));
    write_run("q", NULL, NULL, "dir =\nevery = 2\n");
    char *out = NULL;
    ck_assert_int_ne(train("q", 0, "run", &out), 0);
    ck_assert_msg(strstr(out, "checkpoint.dir") && !strstr(out, "step 1/"),
                  "an empty checkpoint.dir was not refused up front: %s", out);
    free(out);
}
END_TEST

START_TEST(full_disk_metrics_is_an_error) {
    write_run("f", NULL, NULL, NULL);
    sh("sed -i 's/^steps = 12/steps = 2/' '%s/f.ini'", tmp);
    sh("mkdir -p '%s/f' && ln -s /dev/full '%s/f/metrics.jsonl'", tmp, tmp);
    char *out = NULL;
    ck_assert_int_ne(train("f", 0, "run", &out), 0);
    ck_assert_msg(strstr(out, "metrics.jsonl") && strstr(out, "No space left on device"),
                  "the full disk was not reported: %s", out);
    free(out);
}
END_TEST

/* grpo sft resumed from a checkpoint older than its last logged step writes each step once: the
 * log is cut back to the checkpoint's step (it used to append duplicates). */
START_TEST(resumed_sft_logs_each_step_once) {
    char path[512];
    snprintf(path, sizeof path, "%s/sft.ini", tmp);
    FILE *f = fopen(path, "w");
    ck_assert(f != NULL);
    fprintf(f,
            "[model]\npath = %s/model\n[data]\npath = %s/examples/arith/sft.jsonl\n"
            "[optim]\nlr = 1e-3\n[train]\nsteps = 4\nbatch_prompts = 2\nthreads = 1\n"
            "[log]\ndir = %s/sft\n[checkpoint]\ndir = %s/sft/ckpt\nevery = 2\nkeep = 0\n",
            tmp, GRPO_SOURCE_DIR, tmp, tmp);
    fclose(f);
    char log[512];
    snprintf(log, sizeof log, "%s/sft.log", tmp);
    char *args[] = {"grpo", "sft", path, "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, args) == 0, "sft failed, see %s", log);
    /* as if killed after logging step 4 but before its checkpoint */
    sh("rm -rf '%s/sft/ckpt/checkpoint-00000004'", tmp);
    char *r_args[] = {"grpo", "sft", path, "--resume", "--plugin-path", GRPO_PACK_BUILD_DIR, NULL};
    ck_assert_msg(run_grpo(log, r_args) == 0, "resumed sft failed, see %s", log);
    snprintf(path, sizeof path, "%s/sft/metrics.jsonl", tmp);
    char *text = slurp(path), *save = NULL;
    ck_assert_msg(text != NULL, "no %s", path);
    int want = 1;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save), want++) {
        cJSON *j = cJSON_Parse(l);
        ck_assert_msg(j && cJSON_GetObjectItem(j, "step")->valueint == want,
                      "metrics line %d is not step %d: %s", want, want, l);
        cJSON_Delete(j);
    }
    ck_assert_int_eq(want, 5);
    free(text);
}
END_TEST

Suite *resume_suite(void) {
    Suite *s = suite_create("resume");
    TCase *tc = tcase_create("resume");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, resume_survives_pruning_its_own_checkpoint);
    tcase_add_test(tc, killed_twice_with_keep_2_resumes_the_same_trajectory);
    tcase_add_test(tc, corrupt_newest_checkpoint_falls_back);
    tcase_add_test(tc, stray_empty_checkpoint_directory_is_skipped);
    tcase_add_test(tc, trainer_state_values_are_range_checked);
    tcase_add_test(tc, links_in_checkpoint_dir_are_refused_not_followed);
    tcase_add_test(tc, checkpoint_dir_parents_are_created_up_front);
    tcase_add_test(tc, full_disk_metrics_is_an_error);
    tcase_add_test(tc, resumed_sft_logs_each_step_once);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(resume_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
