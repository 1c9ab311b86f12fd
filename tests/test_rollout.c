/*
 * test_rollout.c — the reward batch constructor (core/train/reward_batch.c) and the rollout stage
 * (core/train/rollout.c) that `grpo train` and `grpo eval` share:
 *   - a rollout's samples are group-major (sample i: prompt i / G, member i % G) and point at the
 *     prompt text, the example's messages and fields, completion i's text, ids, length and
 *     truncation flag;
 *   - a text-only sample (`grpo reward score`) has no ids and keeps the group it was given;
 *   - the stage on a tiny `grpo init-model` model: B*G completions, each the decode of its sampled
 *     row, scored exactly as a batch built by hand from them; it refuses a prompt past B and a run
 *     before all B prompts are in.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* only sh and tiny_model_dir are used here, not the binary-running helpers */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "grpo_cli_test.h"
#pragma GCC diagnostic pop
#include "train/reward_batch.h"
#include "train/rollout.h"

static void ck_ok(int rc, const grpo_error *err) {
    ck_assert_msg(rc == GRPO_OK, "status %d: %s", rc, err->message);
}

START_TEST(rollout_samples_are_group_major) {
    enum { B = 2, G = 3, N = B * G, T = 4 };
    int32_t ids[N * T], len[N] = {4, 1, 2, 3, 4, 0};
    uint8_t trunc[N] = {1, 0, 0, 0, 1, 0};
    for (int i = 0; i < N * T; i++) ids[i] = i;
    grpo_rollout roll = {.N = N, .T = T, .ids = ids, .len = len, .truncated = trunc};
    grpo_message msg[1] = {{sizeof(grpo_message), "user", "2+2?"}};
    grpo_field fld[2] = {{sizeof(grpo_field), "answer", "\"4\""}, {sizeof(grpo_field), "k", "1"}};
    grpo_example ex0 = {.messages = msg, .n_messages = 1, .fields = fld, .n_fields = 2};
    grpo_example ex1 = {.prompt = "plain", .fields = fld + 1, .n_fields = 1};
    const grpo_example *ex[B] = {&ex0, &ex1};
    char *prompt[B] = {"p0", "p1"};
    char *comp[N] = {"a", "b", "c", "d", "e", "f"};
    grpo_reward_batch rb;
    grpo_error err;
    grpo_error_init(&err);
    ck_ok(grpo_reward_batch_from_rollout(&rb, prompt, ex, G, comp, &roll, &err), &err);
    ck_assert_uint_eq(rb.n, N);
    for (int i = 0; i < N; i++) {
        const grpo_sample *s = &rb.samples[i];
        ck_assert_uint_eq(s->struct_size, sizeof(grpo_sample));
        ck_assert_ptr_eq(s->prompt, prompt[i / G]);
        ck_assert_ptr_eq(s->messages, ex[i / G]->messages);
        ck_assert_uint_eq(s->n_messages, ex[i / G]->n_messages);
        ck_assert_ptr_eq(s->fields, ex[i / G]->fields);
        ck_assert_uint_eq(s->n_fields, ex[i / G]->n_fields);
        ck_assert_ptr_eq(s->completion, comp[i]);
        ck_assert_ptr_eq(s->completion_ids, ids + i * T);
        ck_assert_uint_eq(s->n_completion_ids, (uint32_t)len[i]);
        ck_assert_uint_eq(s->group, (uint32_t)(i / G));
        ck_assert_uint_eq(s->member, (uint32_t)(i % G));
        ck_assert_uint_eq(s->truncated, trunc[i]);
    }
    grpo_reward_batch_free(&rb);
    ck_assert_ptr_null(rb.samples);
}
END_TEST

START_TEST(text_only_sample_has_no_ids) {
    grpo_reward_batch rb;
    grpo_error err;
    grpo_error_init(&err);
    ck_ok(grpo_reward_batch_init(&rb, 0, &err), &err);
    ck_assert_ptr_nonnull(rb.samples); /* an empty input file still scores (nothing) */
    grpo_reward_batch_free(&rb);
    ck_ok(grpo_reward_batch_init(&rb, 2, &err), &err);
    grpo_example none = {0};
    grpo_reward_batch_set(&rb, 1, "", &none, "42", NULL, 0, 7, 2, 0);
    const grpo_sample *s = &rb.samples[1];
    ck_assert_str_eq(s->completion, "42");
    ck_assert_ptr_null(s->completion_ids);
    ck_assert_ptr_null(s->messages);
    ck_assert_uint_eq(s->n_completion_ids, 0);
    ck_assert_uint_eq(s->group, 7);
    ck_assert_uint_eq(s->member, 2);
    grpo_reward_batch_free(&rb);
}
END_TEST

/* The stage end to end on a tiny random model and the arithmetic prompts. */
START_TEST(stage_scores_what_it_sampled) {
    char tmp[256], ini[512];
    tiny_model_dir(tmp, sizeof tmp, "rollout");
    snprintf(ini, sizeof ini, "%s/run.ini", tmp);
    FILE *f = fopen(ini, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "[model]\npath = %s/model\n"
            "[data]\npath = %s/examples/arith/train.jsonl\n"
            "[sampling]\nnum_generations = 3\nmax_completion_length = 6\ntemperature = 1.0\n"
            "[train]\nthreads = 1\n"
            "[reward.acc]\nplugin = builtin.accuracy\n"
            "[reward.len]\nplugin = builtin.length\n",
            tmp, GRPO_SOURCE_DIR);
    fclose(f);
    grpo_error err;
    grpo_error_init(&err);
    grpo_run_args a = {.run_file = ini, .extra_plugin_dirs = {GRPO_PACK_BUILD_DIR}, .n_extra = 1};
    grpo_run r;
    ck_ok(grpo_run_open(&r, &a, &err), &err);
    grpo_model *m = NULL;
    grpo_dataset *ds = NULL;
    grpo_reward_set rs = {0};
    ck_ok(grpo_run_open_model(&r, r.model_dir, 0, &m, &err), &err);
    char *path = grpo_run_path(&r, r.cfg.data_path);
    ck_ok(grpo_run_dataset(&r, path, &ds, &err), &err);
    ck_ok(grpo_reward_set_create(&rs, &r.cfg, &r.proc.reg, &r.proc.host, &err), &err);
    grpo_sampler_opts so = {{1.0f, 0, 1.0f, 0.0f, 1.0f}, 3, 6, {0}, r.n_eos, r.pad_id,
                            0, NULL, NULL, NULL, 0, 0};
    memcpy(so.eos, r.eos, sizeof so.eos);
    grpo_rng rng;
    grpo_rng_seed(&rng, 11);

    grpo_rollout_batch b;
    int keep = 0;
    ck_ok(grpo_rollout_batch_begin(&b, 2, 3, &err), &err);
    ck_ok(grpo_rollout_batch_add(&b, &r, ds, &ds->examples[0], &keep, &err), &err);
    ck_assert_int_eq(keep, 1);
    ck_assert_int_ne(grpo_rollout_batch_run(&b, &r, m, &so, &rng, &rs, &err), GRPO_OK);
    ck_assert_msg(strstr(err.message, "1 of 2 prompts"), "%s", err.message);
    ck_ok(grpo_rollout_batch_add(&b, &r, ds, &ds->examples[1], &keep, &err), &err);
    ck_assert_int_ne(grpo_rollout_batch_add(&b, &r, ds, &ds->examples[2], &keep, &err), GRPO_OK);
    ck_assert_msg(strstr(err.message, "already holds 2 prompts"), "%s", err.message);
    ck_ok(grpo_rollout_batch_run(&b, &r, m, &so, &rng, &rs, &err), &err);

    ck_assert_int_eq(b.N, 6);
    ck_assert_int_eq(b.roll.N, 6);
    ck_assert_ptr_eq(b.ex[1], &ds->examples[1]);
    for (int i = 0; i < b.N; i++) {
        char *want = grpo_run_decode(&r, b.roll.ids + (size_t)i * b.roll.T, b.roll.len[i]);
        ck_assert_str_eq(b.completion[i], want);
        free(want);
    }
    grpo_reward_batch rb;
    float R[6 * 2];
    ck_ok(grpo_reward_batch_from_rollout(&rb, b.prompt_text, b.ex, b.G, b.completion, &b.roll,
                                         &err),
          &err);
    ck_ok(grpo_reward_set_score(&rs, rb.samples, rb.n, R, &err), &err);
    ck_assert_int_eq(rs.n, 2);
    ck_assert_mem_eq(R, b.R, sizeof R);
    grpo_reward_batch_free(&rb);

    grpo_rollout_batch_free(&b);
    grpo_rollout_batch_free(&b); /* freeing twice is harmless: free zeroes the batch */
    free(path);
    grpo_reward_set_free(&rs);
    grpo_dataset_free(ds);
    grpo_model_close(m);
    grpo_run_close(&r);
    sh("rm -rf '%s'", tmp);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("rollout");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, rollout_samples_are_group_major);
    tcase_add_test(tc, text_only_sample_has_no_ids);
    tcase_add_test(tc, stage_scores_what_it_sampled);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *r = srunner_create(suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
