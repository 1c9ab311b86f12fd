/* test_config.c — run files: resolved values and defaults, every error with its FILE:LINE message,
 * reward sections against hand-made manifests, continuation lines, list keys, dump round trip.
 * Expected values are read off the fixture files in tests/fixtures/config/ by hand. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/run_config.h"
#include "config/testing.h"

#define FIXTURES GRPO_SOURCE_DIR "/tests/fixtures/config/"

/* ---- a registry made by hand: what pack.ini of the builtin pack declares ---------------- */

static char *fmt_patterns[] = {"^<think>\\n.*?\\n</think>\\n<answer>\\n.*?\\n</answer>$",
                               "^<think>\\n.*?\\n</think>\\n\\n<answer>\\n.*?\\n</answer>$"};
static char *fmt_value[] = {"0.5"}, *yes[] = {"true"}, *no[] = {"false"};
#define KEY(n, t, defs, nd, h) \
    {.name = n, .type = t, .defaults = defs, .n_defaults = nd, .has_default = defs != NULL, .help = h}
static grpo_key_def fmt_keys[] = {
    KEY("pattern", GRPO_KEY_LIST, fmt_patterns, 2, "PCRE2 pattern"),
    KEY("value", GRPO_KEY_FLOAT, fmt_value, 1, "reward when a pattern matches"),
    KEY("dotall", GRPO_KEY_BOOL, yes, 1, "'.' matches newlines"),
    KEY("full_match", GRPO_KEY_BOOL, no, 1, "match to the end"),
};
static char *tags_tag[] = {"<think>", "</think>", "<answer>", "</answer>"};
static char *tags_value[] = {"0.25"};
static grpo_key_def tags_keys[] = {
    KEY("tag", GRPO_KEY_LIST, tags_tag, 4, "a tag to count"),
    KEY("value", GRPO_KEY_FLOAT, tags_value, 1, "reward per tag found once"),
};
/* a third-party reward with a required key (no default in its manifest) */
static grpo_key_def judge_keys[] = {KEY("url", GRPO_KEY_STRING, NULL, 0, "judge endpoint")};
static char *dense_archs[] = {"LlamaForCausalLM"};
static grpo_pack builtin_pack, acme_pack;
#define ENTRY(i, k, d, kd, nk, p) \
    {.id = i, .kind = k, .description = d, .keys = kd, .n_keys = nk, .pack = p}
static grpo_entry builtin_entries[] = {
    ENTRY("builtin.format", GRPO_KIND_REWARD, "regex format", fmt_keys, 4, &builtin_pack),
    ENTRY("builtin.tags", GRPO_KIND_REWARD, "tag count", tags_keys, 2, &builtin_pack),
    {.id = "builtin.dense", .kind = GRPO_KIND_MODEL, .description = "dense models",
     .architectures = dense_archs, .n_architectures = 1, .pack = &builtin_pack},
};
static grpo_entry acme_entries[] = {
    ENTRY("acme.judge", GRPO_KIND_REWARD, "LLM judge", judge_keys, 1, &acme_pack)};
static grpo_pack builtin_pack = {.name = "builtin", .version = "0.1.0", .abi_major = 1,
                                 .entries = builtin_entries, .n_entries = 3};
static grpo_pack acme_pack = {.name = "acme", .version = "1.0", .abi_major = 1,
                              .entries = acme_entries, .n_entries = 1};
static grpo_pack *packs[] = {&builtin_pack, &acme_pack};
static const grpo_registry reg = {.packs = packs, .n_packs = 2};

/* ---- helpers ---------------------------------------------------------------------------- */

/* Whether some message of d equals want (prefix = 0) or starts with it (prefix = 1). */
static int has_message(const grpo_diag *d, const char *want, int prefix) {
    for (int i = 0; i < d->n; i++)
        if (prefix ? strncmp(d->msg[i], want, strlen(want)) == 0 : strcmp(d->msg[i], want) == 0)
            return 1;
    return 0;
}

static void print_diag(const grpo_diag *d) {
    for (int i = 0; i < d->n; i++) fprintf(stderr, "  got: %s\n", d->msg[i]);
}

/* Loads the fixture file and expects failure with the message FIXTURES file ":" rest. */
static void expect_file_error(const char *file, unsigned flags, const char *rest, int prefix) {
    char path[1024], want[2048];
    snprintf(path, sizeof path, "%s%s", FIXTURES, file);
    snprintf(want, sizeof want, "%s%s", path, rest);
    grpo_run_config cfg;
    grpo_diag d = {0};
    grpo_error err;
    grpo_error_init(&err);
    int rc = grpo_run_config_load(&cfg, path, &reg, flags, &d, &err);
    if (!has_message(&d, want, prefix)) print_diag(&d), fprintf(stderr, " want: %s\n", want);
    ck_assert_int_eq(rc, GRPO_ERR_INVALID);
    ck_assert(has_message(&d, want, prefix));
    ck_assert_int_eq(err.status, GRPO_ERR_INVALID);
    ck_assert_str_eq(err.message, d.n == 1 ? d.msg[0] : err.message);
    ck_assert(cfg.path == NULL && cfg.n_rewards == 0); /* nothing half-loaded */
    grpo_diag_free(&d);
}

/* Loads text (named t.ini) and expects failure with the message "t.ini" rest. */
static void expect_text_error(const char *text, unsigned flags, const char *rest, int prefix) {
    char want[2048];
    snprintf(want, sizeof want, "t.ini%s", rest);
    grpo_run_config cfg;
    grpo_diag d = {0};
    int rc = grpo_run_config_load_string(&cfg, "t.ini", text, &reg, flags, &d, NULL);
    if (!has_message(&d, want, prefix)) print_diag(&d), fprintf(stderr, " want: %s\n", want);
    ck_assert_int_ne(rc, GRPO_OK);
    ck_assert(has_message(&d, want, prefix));
    grpo_diag_free(&d);
}

static grpo_run_config load_ok(const char *name, const char *text, unsigned flags) {
    grpo_run_config cfg;
    grpo_diag d = {0};
    int rc = grpo_run_config_load_string(&cfg, name, text, &reg, flags, &d, NULL);
    if (rc != GRPO_OK) print_diag(&d);
    ck_assert_int_eq(rc, GRPO_OK);
    grpo_diag_free(&d);
    return cfg;
}

/* ---- valid files ------------------------------------------------------------------------ */

/* The warnings of grpo_run_config_warn_cannot_learn for text, in buf; returns their count. */
static int cannot_learn(const char *text, char *buf, size_t size) {
    grpo_run_config cfg = load_ok("w.ini", text, 0);
    FILE *f = fmemopen(buf, size, "w");
    int n = grpo_run_config_warn_cannot_learn(&cfg, f);
    fclose(f);
    grpo_run_config_free(&cfg);
    return n;
}

START_TEST(runs_that_cannot_learn_are_named) {
    char buf[2048];
    ck_assert_int_eq(cannot_learn("[sampling]\ntemperature = 0\nnum_generations = 4\n"
                                  "[reward.t]\nplugin = builtin.tags\n", buf, sizeof buf), 1);
    ck_assert_msg(strstr(buf, "warning: w.ini:2: sampling.temperature = 0 with "
                              "sampling.num_generations = 4") != NULL, "%s", buf);
    ck_assert_int_eq(cannot_learn("[reward.t]\nplugin = builtin.tags\nweight = 0\n"
                                  "[reward.u]\nplugin = builtin.tags\nweight = 0.0\n", buf,
                                  sizeof buf), 1);
    ck_assert_msg(strstr(buf, "every reward weight is 0 (reward.t.weight, reward.u.weight)"),
                  "%s", buf);
    /* one weighted reward, or sampling at temperature > 0: no warning */
    ck_assert_int_eq(cannot_learn("[reward.t]\nplugin = builtin.tags\nweight = 0\n"
                                  "[reward.u]\nplugin = builtin.tags\n", buf, sizeof buf), 0);
    ck_assert_int_eq(cannot_learn("[sampling]\ntemperature = 0.01\n[reward.t]\n"
                                  "plugin = builtin.tags\n", buf, sizeof buf), 0);
}
END_TEST

START_TEST(empty_file_gives_documented_defaults) {
    grpo_run_config cfg = load_ok("t.ini", "", 0);
    ck_assert_str_eq(cfg.model_path, "");
    ck_assert_int_eq(cfg.model_backend, GRPO_BACKEND_CPU);
    ck_assert_int_eq(cfg.model_dtype, GRPO_CFG_DTYPE_F32);
    ck_assert_int_eq(cfg.sampling_num_generations, 8);
    ck_assert_int_eq(cfg.sampling_max_completion_length, 256);
    ck_assert(cfg.sampling_temperature == 1.0 && cfg.sampling_top_p == 1.0);
    ck_assert(cfg.sampling_min_p == 0.0 && cfg.sampling_repetition_penalty == 1.0);
    ck_assert_int_eq(cfg.sampling_top_k, 0);
    ck_assert_int_eq(cfg.grpo_loss_type, GRPO_LOSS_DAPO);
    ck_assert(cfg.grpo_beta == 0.0 && cfg.grpo_epsilon_low == 0.2 && cfg.grpo_epsilon_high == 0.2);
    ck_assert(cfg.grpo_delta == 0.0 && cfg.grpo_advantage_clamp == 0.0);
    ck_assert_int_eq(cfg.grpo_scale_rewards, GRPO_SCALE_GROUP);
    ck_assert_int_eq(cfg.grpo_std_unbiased, 1);
    ck_assert_int_eq(cfg.grpo_mask_truncated_completions, 0);
    ck_assert(cfg.optim_lr == 1e-6 && cfg.optim_beta1 == 0.9 && cfg.optim_beta2 == 0.999);
    ck_assert(cfg.optim_eps == 1e-8 && cfg.optim_max_grad_norm == 1.0);
    ck_assert_int_eq(cfg.optim_schedule, GRPO_SCHEDULE_CONSTANT);
    ck_assert_int_eq(cfg.train_seed, 42);
    ck_assert_int_eq(cfg.data_seed, 42); /* "@train.seed" */
    ck_assert_int_eq(cfg.sampling_seed, 42);
    ck_assert_int_eq(cfg.data_truncation, GRPO_TRUNCATE_LEFT);
    ck_assert_int_eq(cfg.data_bad_lines, GRPO_BAD_LINES_FAIL);
    ck_assert_str_eq(cfg.log_dir, "runs");
    for (int i = 0; i < GRPO_RUN_N_KEYS; i++) ck_assert_int_eq(cfg.line[i], 0);
    ck_assert_int_eq(cfg.n_rewards, 0);
    grpo_run_config_free(&cfg);
}
END_TEST

START_TEST(full_file_resolves_values_and_defaults) {
    grpo_run_config cfg;
    grpo_diag d = {0};
    int rc = grpo_run_config_load(&cfg, FIXTURES "valid_full.ini", &reg,
                                  GRPO_CONFIG_TRAIN | GRPO_CONFIG_CHECK_PATHS, &d, NULL);
    if (rc) print_diag(&d);
    ck_assert_int_eq(rc, GRPO_OK);
    ck_assert_str_eq(cfg.model_path, ".");
    ck_assert_int_eq(cfg.line[GRPO_KEYIDX_model_path], 4);
    ck_assert_str_eq(cfg.reference_path, "."); /* default: = model.path */
    ck_assert_int_eq(cfg.line[GRPO_KEYIDX_reference_path], 0);
    ck_assert_str_eq(cfg.data_path, "prompts.jsonl");
    ck_assert_int_eq(cfg.data_max_prompt_length, 128);
    ck_assert_int_eq(cfg.data_truncation, GRPO_TRUNCATE_SKIP);
    ck_assert_int_eq(cfg.data_shuffle, 0);
    ck_assert_str_eq(cfg.data_chat_template,
                     "<|im_start|>user\\n{prompt}<|im_end|>\\n<|im_start|>assistant\\n");
    ck_assert_int_eq(cfg.sampling_num_generations, 4); /* inline comment stripped */
    ck_assert_int_eq(cfg.sampling_top_k, 50);
    ck_assert(cfg.sampling_temperature == 0.7 && cfg.sampling_top_p == 0.9);
    ck_assert(cfg.sampling_min_p == 0.05 && cfg.sampling_repetition_penalty == 1.1);
    ck_assert_int_eq(cfg.sampling_seed, 7);
    ck_assert_int_eq(cfg.data_seed, 123); /* follows train.seed */
    ck_assert_int_eq(cfg.grpo_loss_type, GRPO_LOSS_GRPO);
    ck_assert(cfg.grpo_beta == 0.02 && cfg.grpo_epsilon_low == 0.1);
    ck_assert(cfg.grpo_epsilon_high == 0.1); /* follows epsilon_low, as TRL */
    ck_assert(cfg.grpo_delta == 1.5 && cfg.grpo_advantage_clamp == 10 && cfg.grpo_aux_loss_coef == 0.5);
    ck_assert_int_eq(cfg.grpo_num_iterations, 2);
    ck_assert_int_eq(cfg.grpo_scale_rewards, GRPO_SCALE_BATCH);
    ck_assert_int_eq(cfg.grpo_std_unbiased, 0);
    ck_assert_int_eq(cfg.grpo_mask_truncated_completions, 1);
    ck_assert(cfg.optim_lr == 8e-8 && cfg.optim_weight_decay == 0.01);
    ck_assert_int_eq(cfg.optim_schedule, GRPO_SCHEDULE_MINIMIND_COSINE);
    ck_assert_int_eq(cfg.optim_warmup_steps, 10);
    ck_assert_int_eq(cfg.train_steps, 20);
    ck_assert_int_eq(cfg.train_batch_prompts, 2);
    ck_assert_int_eq(cfg.train_grad_accum, 2);
    ck_assert_int_eq(cfg.train_micro_batch, 4);
    ck_assert_int_eq(cfg.train_threads, 1);
    ck_assert_int_eq(cfg.train_gradient_checkpointing, 1);
    ck_assert_str_eq(cfg.log_dir, "runs/test;v1"); /* ';' without whitespace before it */
    ck_assert_int_eq(cfg.log_every, 5);
    ck_assert_int_eq(cfg.checkpoint_keep, 0);
    ck_assert_int_eq(cfg.n_rewards, 2);
    grpo_diag_free(&d);
    grpo_run_config_free(&cfg);
}
END_TEST

START_TEST(reward_keys_lists_continuations_and_manifest_defaults) {
    grpo_run_config cfg;
    ck_assert_int_eq(grpo_run_config_load(&cfg, FIXTURES "valid_full.ini", &reg, 0, NULL, NULL), 0);
    const grpo_reward_spec *fmt = grpo_run_config_reward(&cfg, "fmt");
    ck_assert_ptr_nonnull(fmt);
    ck_assert_str_eq(fmt->plugin, "builtin.format");
    ck_assert_ptr_eq(fmt->entry, &builtin_entries[0]);
    ck_assert(fmt->weight == 2.0);
    ck_assert_int_eq(fmt->line, 61);
    grpo_config c = grpo_reward_spec_config(fmt);
    ck_assert_str_eq(c.section, "reward.fmt");
    ck_assert_uint_eq(c.n, 5); /* pattern x2 (file), value, dotall (defaults), full_match */
    ck_assert_uint_eq(grpo_config_count(&c, "pattern"), 2);
    /* the continuation line is joined with nothing between */
    ck_assert_str_eq(grpo_config_nth(&c, "pattern", 0),
                     "^<think>\\n.*?\\n</think>\\n<answer>\\n.*?\\n</answer>$");
    ck_assert_str_eq(grpo_config_nth(&c, "pattern", 1), "^<answer>.*</answer>$");
    ck_assert_str_eq(grpo_config_get(&c, "value"), "0.5");
    ck_assert_str_eq(grpo_config_get(&c, "dotall"), "true");
    ck_assert_str_eq(grpo_config_get(&c, "full_match"), "yes");
    ck_assert_int_eq(fmt->lines[0], 64);
    ck_assert_int_eq(fmt->lines[2], 0); /* value: manifest default */

    const grpo_reward_spec *tags = grpo_run_config_reward(&cfg, "tags");
    ck_assert(tags->weight == 0.5);
    c = grpo_reward_spec_config(tags);
    ck_assert_uint_eq(grpo_config_count(&c, "tag"), 4);
    ck_assert_str_eq(grpo_config_nth(&c, "tag", 3), "</answer>");
    ck_assert_str_eq(grpo_config_get(&c, "value"), "0.25");
    grpo_run_config_free(&cfg);
}
END_TEST

START_TEST(list_keys_accumulate_in_order) {
    grpo_run_config cfg = load_ok("t.ini",
                                  "[reward.t]\nplugin = builtin.tags\ntag = <a>\nvalue = 1\n"
                                  "tag = </a>\ntag = <b>\n",
                                  0);
    grpo_config c = grpo_reward_spec_config(&cfg.rewards[0]);
    ck_assert_uint_eq(c.n, 4);
    ck_assert_str_eq(c.keys[0], "tag");
    ck_assert_str_eq(c.values[0], "<a>");
    ck_assert_str_eq(c.values[1], "</a>");
    ck_assert_str_eq(c.values[2], "<b>");
    ck_assert_str_eq(c.keys[3], "value");
    ck_assert_str_eq(c.values[3], "1");
    ck_assert(cfg.rewards[0].weight == 1.0);
    grpo_run_config_free(&cfg);
}
END_TEST

START_TEST(continuation_lines_join_without_separator) {
    grpo_run_config cfg = load_ok("t.ini",
                                  "[data]\nchat_template = <|user|>{prompt}\n"
                                  "   <|assistant|>\n\t\\n\n[train]\nsteps = 3\n",
                                  0);
    ck_assert_str_eq(cfg.data_chat_template, "<|user|>{prompt}<|assistant|>\\n");
    ck_assert_int_eq(cfg.line[GRPO_KEYIDX_data_chat_template], 2);
    ck_assert_int_eq(cfg.train_steps, 3);
    grpo_run_config_free(&cfg);
}
END_TEST

START_TEST(semicolons_bom_and_crlf) {
    grpo_run_config cfg = load_ok("t.ini",
                                  "\xEF\xBB\xBF[log]\r\ndir =;x;y ; comment\r\n"
                                  "# comment\r\n[checkpoint]\r\ndir = a;b\r\n",
                                  0);
    ck_assert_str_eq(cfg.log_dir, ";x;y");
    ck_assert_str_eq(cfg.checkpoint_dir, "a;b");
    grpo_run_config_free(&cfg);
}
END_TEST

START_TEST(input_paths_are_relative_to_the_run_file) {
    grpo_run_config cfg = load_ok("dir/sub/run.ini", "[model]\npath = m\n", 0);
    char *p = grpo_run_config_input_path(&cfg, cfg.model_path);
    ck_assert_str_eq(p, "dir/sub/m");
    free(p);
    p = grpo_run_config_input_path(&cfg, "/abs/x");
    ck_assert_str_eq(p, "/abs/x");
    free(p);
    grpo_run_config_free(&cfg);
}
END_TEST

/* ---- every error, with its message ------------------------------------------------------ */

START_TEST(unknown_key_suggests_nearest) {
    expect_file_error("bad_unknown_key.ini", 0,
                      ":2: unknown key 'num_generation' in [sampling] (did you mean "
                      "num_generations?)",
                      0);
    expect_text_error("[grpo]\nlr = 1\n", 0, ":2: unknown key 'lr' in [grpo]; it is a key of [optim]",
                      0);
}
END_TEST

/* A typo whose right spelling lives in another section: [grpo] has num_iterations, but
 * num_generations (one edit away) is the key meant, and it belongs to [sampling]. */
START_TEST(unknown_key_suggests_across_sections) {
    expect_text_error("[grpo]\nnum_generation = 4\n", 0,
                      ":2: unknown key 'num_generation' in [grpo]; num_generations is a key of "
                      "[sampling]",
                      0);
    /* the section's own key wins a tie: seeds is one edit from train.seed and data.seed */
    expect_text_error("[train]\nseeds = 4\n", 0,
                      ":2: unknown key 'seeds' in [train] (did you mean seed?)", 0);
    /* a typo of another section's key with nothing near in this one */
    expect_text_error("[train]\nlearning_rat = 1\n", 0,
                      ":2: unknown key 'learning_rat' in [train] (see `grpo config keys`)", 0);
}
END_TEST

/* libgomp segfaults on absurd thread counts: train.threads is bounded and the error says so. */
START_TEST(train_threads_is_bounded) {
    expect_text_error("[train]\nthreads = 100000\n", 0,
                      ":2: train.threads: expected an integer in [0, 1024], got 100000", 0);
    grpo_run_config cfg = load_ok("t.ini", "[train]\nthreads = 1024\n", 0);
    ck_assert_int_eq(cfg.train_threads, 1024);
    grpo_run_config_free(&cfg);
}
END_TEST

START_TEST(wrong_type_is_an_error) {
    expect_file_error("bad_type.ini", 0,
                      ":2: sampling.num_generations: expected an integer, got 'eight'", 0);
    expect_text_error("[data]\nshuffle = maybe\n", 0,
                      ":2: data.shuffle: expected true or false, got 'maybe'", 0);
}
END_TEST

START_TEST(out_of_range_is_an_error) {
    expect_file_error("bad_range.ini", 0,
                      ":3: sampling.num_generations: expected an integer in [2, 4096], got 1", 0);
    expect_text_error("[sampling]\ntop_p = 0\n", 0,
                      ":2: sampling.top_p: expected a number in (0, 1], got 0", 0);
    expect_text_error("[optim]\nlr = 0\n", 0, ":2: optim.lr: expected a number > 0, got 0", 0);
    expect_text_error("[grpo]\ndelta = 0.5\n", 0,
                      ":2: grpo.delta: expected 0 (off) or a bound above 1, got 0.5", 0);
}
END_TEST

/* --set: applied after the file (replacing its value, adding a missing section), marked as not
 * from the file (line < 0), and a malformed one is named as the place of its error. */
START_TEST(set_overrides_apply_after_the_file) {
    char path[] = "/tmp/grpo-set-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char *text = "[grpo]\nbeta = 0.1\n";
    ck_assert(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    const char *sets[] = {"grpo.beta=0.25", " train.steps = 5 ", "optim.lr=1e-3"};
    grpo_run_config cfg;
    grpo_diag d = {0};
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_msg(grpo_run_config_load_set(&cfg, path, sets, 3, &reg, 0, &d, &err) == GRPO_OK,
                  "%s", err.message);
    ck_assert(cfg.grpo_beta == 0.25 && cfg.train_steps == 5 && cfg.optim_lr == 1e-3);
    ck_assert_int_lt(cfg.line[GRPO_KEYIDX_grpo_beta], 0);
    ck_assert_int_eq(cfg.line[GRPO_KEYIDX_grpo_epsilon_low], 0);
    grpo_run_config_free(&cfg);
    const char *bad[] = {"grpo.beta", "grpo.beta=-1", "train.steps=3", "train.steps=4"};
    ck_assert_int_ne(grpo_run_config_load_set(&cfg, path, bad, 4, &reg, 0, &d, &err), GRPO_OK);
    ck_assert(has_message(&d, "--set grpo.beta: expected SECTION.KEY=VALUE", 1));
    ck_assert(has_message(&d, "--set grpo.beta=-1: grpo.beta: expected", 1));
    ck_assert(has_message(&d, "--set train.steps=4: duplicate key train.steps (first set at --set "
                              "train.steps=3)", 0));
    grpo_diag_free(&d);
    /* a value over 4095 bytes used to become empty; one with a line break made directories
     * with newlines in their names: both are errors naming the key */
    char *long_set = malloc(5000 + 16);
    memcpy(long_set, "log.dir=", 8);
    memset(long_set + 8, 'x', 5000);
    long_set[5008] = '\0';
    const char *edge[] = {long_set, "checkpoint.dir=a\nb", "log.every=\r"};
    memset(&d, 0, sizeof d);
    ck_assert_int_ne(grpo_run_config_load_set(&cfg, path, edge, 3, &reg, 0, &d, &err), GRPO_OK);
    ck_assert(has_message(&d, "--set log.dir: the value is 5000 bytes; the limit is 4095", 0));
    ck_assert(has_message(&d, "--set checkpoint.dir: the value holds a line break", 1));
    ck_assert(has_message(&d, "--set log.every: the value holds a line break", 1));
    grpo_diag_free(&d);
    free(long_set);
    unlink(path);
}
END_TEST

START_TEST(bad_choice_lists_choices) {
    expect_file_error("bad_choice.ini", 0,
                      ":2: grpo.loss_type: expected one of grpo, bnpo, dr_grpo, dapo, cispo, sapo, "
                      "got 'dapoo' (did you mean dapo?)",
                      0);
    /* TRL loss types grpo knows of but does not implement are refused by name, not as typos */
    expect_text_error("[grpo]\nloss_type = vespo\n", 0,
                      ":2: grpo.loss_type: 'vespo' is not implemented in grpo; expected one of "
                      "grpo, bnpo, dr_grpo, dapo, cispo, sapo",
                      0);
}
END_TEST

START_TEST(duplicate_section_names_both_lines) {
    expect_file_error("bad_duplicate_section.ini", 0,
                      ":7: duplicate section [grpo] (first at line 1); write its keys in one "
                      "section",
                      0);
    expect_text_error("[reward.a]\nplugin = builtin.tags\n[reward.a]\nplugin = builtin.tags\n", 0,
                      ":3: duplicate section [reward.a] (first at line 1); give each reward its "
                      "own NAME",
                      0);
}
END_TEST

START_TEST(duplicate_key_names_both_lines) {
    expect_file_error("bad_duplicate_key.ini", 0,
                      ":4: duplicate key optim.lr (first set at line 2)", 0);
    expect_text_error("[reward.a]\nplugin = builtin.tags\nvalue = 1\nvalue = 2\n", 0,
                      ":4: duplicate key reward.a.value (first set at line 3; only list keys "
                      "repeat)",
                      0);
    expect_text_error("[reward.a]\nplugin = builtin.tags\nplugin = builtin.tags\n", 0,
                      ":3: duplicate key reward.a.plugin (first set at line 2)", 0);
}
END_TEST

START_TEST(too_long_line_says_so) {
    expect_file_error("bad_long_line.ini", 0,
                      ":3: line is 210 characters long; the limit is 199 (split a long value over "
                      "indented continuation lines)",
                      0);
    /* exactly at the limit is fine */
    char text[400];
    snprintf(text, sizeof text, "[data]\nchat_template = {prompt}%0175d\n", 0);
    ck_assert_int_eq((int)strlen("chat_template = ") + 183, GRPO_INI_MAX_LINE_CHARS);
    grpo_run_config cfg = load_ok("t.ini", text, 0);
    ck_assert_int_eq((int)strlen(cfg.data_chat_template), 183);
    grpo_run_config_free(&cfg);
    /* the continuation lines of a refused line do not cascade into more errors */
    grpo_diag d = {0};
    snprintf(text, sizeof text, "[data]\nchat_template = %0190d\n  more\n", 0);
    ck_assert_int_ne(grpo_run_config_load_string(&cfg, "t.ini", text, &reg, 0, &d, NULL), 0);
    ck_assert_int_eq(d.n, 1);
    grpo_diag_free(&d);
}
END_TEST

START_TEST(missing_required_names_the_section) {
    expect_file_error("bad_missing_required.ini", GRPO_CONFIG_TRAIN,
                      ": no [model] section; a training run needs model.path: the Hugging Face "
                      "model directory",
                      1);
    expect_file_error("bad_missing_required.ini", GRPO_CONFIG_TRAIN,
                      ":2: [data] has no path; expected path = the training prompts", 1);
    expect_text_error("[model]\npath = .\n[data]\npath = x\n", GRPO_CONFIG_TRAIN,
                      ": no [reward.NAME] section; a training run needs at least one reward", 1);
    expect_text_error("[model]\npath =\n", GRPO_CONFIG_TRAIN, ":2: model.path is empty", 1);
    /* without GRPO_CONFIG_TRAIN (e.g. scoring rewards) nothing is required */
    grpo_run_config cfg;
    ck_assert_int_eq(grpo_run_config_load(&cfg, FIXTURES "bad_missing_required.ini", &reg, 0,
                                          NULL, NULL),
                     GRPO_OK);
    grpo_run_config_free(&cfg);
}
END_TEST

START_TEST(unknown_plugin_suggests_nearest) {
    expect_file_error("bad_unknown_plugin.ini", 0,
                      ":2: no plugin 'builtin.formt' on the plugin path (did you mean "
                      "builtin.format?)",
                      0);
    expect_text_error("[reward.x]\nplugin = zzz.judge\n", 0,
                      ":2: no plugin 'zzz.judge' on the plugin path (reward plugins found: "
                      "builtin.format, builtin.tags, acme.judge)",
                      0);
    grpo_run_config cfg;
    grpo_diag d = {0};
    ck_assert_int_ne(grpo_run_config_load_string(&cfg, "t.ini", "[reward.x]\nplugin = a.b\n", NULL,
                                                 0, &d, NULL),
                     0);
    ck_assert(has_message(&d, "t.ini:2: no plugin 'a.b' on the plugin path (no reward plugins were "
                              "found: use --plugin-path or GRPO_PLUGIN_PATH)",
                          0));
    grpo_diag_free(&d);
    expect_text_error("[model]\nplugin = builtin.dens\n", 0,
                      ":2: no plugin 'builtin.dens' on the plugin path (did you mean "
                      "builtin.dense?)",
                      0);
    expect_text_error("[model]\nplugin = builtin.tags\n", 0,
                      ":2: 'builtin.tags' is a reward plugin; model.plugin needs a model plugin", 0);
    grpo_run_config model = load_ok("t.ini", "[model]\nplugin = builtin.dense\n", 0);
    ck_assert_ptr_eq(model.model_entry, &builtin_entries[2]);
    grpo_run_config_free(&model);
    expect_text_error("[reward.m]\nplugin = builtin.dense\n", 0,
                      ":2: 'builtin.dense' is a model plugin; [reward.m] needs a reward plugin", 0);
    expect_text_error("[reward.m]\nweight = 1\n", 0,
                      ":1: [reward.m] has no plugin key; expected plugin = pack.id (see `grpo "
                      "plugins list`)",
                      0);
    expect_text_error("[reward.]\n", 0,
                      ":1: bad reward section [reward.]: expected [reward.NAME] with a NAME of "
                      "letters, digits, '_' or '-'",
                      0);
}
END_TEST

START_TEST(plugin_keys_are_checked_against_the_manifest) {
    expect_file_error("bad_plugin_key_type.ini", 0,
                      ":3: reward.fmt.value: expected a finite number, got 'high' (float key of "
                      "builtin.format)",
                      0);
    expect_file_error("bad_plugin_unknown_key.ini", 0,
                      ":3: unknown key 'patern' for plugin builtin.format in [reward.fmt] (did you "
                      "mean pattern?)",
                      0);
    expect_text_error("[reward.a]\nplugin = builtin.tags\nweight = heavy\n", 0,
                      ":3: reward.a.weight: expected a finite number, got 'heavy'", 0);
    expect_text_error("\n[reward.j]\nplugin = acme.judge\n", 0,
                      ":2: [reward.j] has no url; plugin acme.judge requires it (string: judge "
                      "endpoint)",
                      0);
    grpo_run_config cfg = load_ok("t.ini", "[reward.j]\nplugin = acme.judge\nurl = http://x\n", 0);
    grpo_config c = grpo_reward_spec_config(&cfg.rewards[0]);
    ck_assert_str_eq(grpo_config_get(&c, "url"), "http://x");
    grpo_run_config_free(&cfg);
}
END_TEST

START_TEST(unknown_section_suggests_nearest) {
    expect_file_error("bad_unknown_section.ini", 0,
                      ":1: unknown section [sampler] (did you mean [sampling]?)", 0);
    expect_text_error("[rewards.fmt]\n", 0,
                      ":1: unknown section [rewards.fmt] (did you mean [reward.fmt]?)", 0);
    expect_text_error("[zzz]\n", 0, ":1: unknown section [zzz]; expected one of [model]", 1);
}
END_TEST

START_TEST(syntax_errors_name_the_line) {
    expect_file_error("bad_syntax.ini", 0, ":1: expected ']' to close the section header", 0);
    expect_file_error("bad_continuation_gap.ini", 0,
                      ":4: indented line continues the key above across the blank or comment "
                      "line 3; remove the indentation if it starts a new key",
                      0);
    expect_text_error("[data]\nchat_template = a\n    b ;c\n", 0,
                      ":3: ';' after whitespace on a continuation line: inih would keep the "
                      "comment in the value; put comments on their own line",
                      0);
    expect_text_error("x = 1\n[data]\n", 0,
                      ":1: key 'x' before any [section] header; expected a [section] first", 0);
    expect_text_error("[data]\njust words\n", 0,
                      ":2: expected 'key = value', a [section] header or a ';' comment; got "
                      "'just words'", 0);
    expect_text_error("[data]\nchat_template = a\xff\n", 0,
                      ":2: invalid UTF-8 at byte 18 of the line", 0);
    char text[128];
    snprintf(text, sizeof text, "[reward.%043d]\n", 0); /* 50 characters */
    expect_text_error(text, 0, ":1: section name 'reward.", 1);
}
END_TEST

START_TEST(paths_must_exist_when_checked) {
    grpo_run_config cfg;
    grpo_diag d = {0};
    const char *text = "[model]\npath = no_such_model\n[data]\npath = .\n";
    ck_assert_int_ne(grpo_run_config_load_string(&cfg, FIXTURES "t.ini", text, &reg,
                                                 GRPO_CONFIG_CHECK_PATHS, &d, NULL),
                     0);
    ck_assert(has_message(&d, FIXTURES "t.ini:2: model.path: no directory 'no_such_model' "
                                       "(looked at " FIXTURES "no_such_model: ",
                          1));
    ck_assert(has_message(&d, FIXTURES "t.ini:4: data.path: '.' is not a file (looked at " FIXTURES
                                       ".)",
                          0));
    grpo_diag_free(&d);
}
END_TEST

START_TEST(all_problems_are_reported_and_counted) {
    grpo_run_config cfg;
    grpo_diag d = {0};
    grpo_error err;
    grpo_error_init(&err);
    int rc = grpo_run_config_load_string(&cfg, "t.ini",
                                         "[grpo]\nbeta = -1\nloss = dapo\n[optim]\nlr = x\n", &reg,
                                         0, &d, &err);
    ck_assert_int_eq(rc, GRPO_ERR_INVALID);
    ck_assert_int_eq(d.n, 3);
    ck_assert_str_eq(err.message, "t.ini:3: unknown key 'loss' in [grpo] (did you mean "
                                  "loss_type?) (and 2 more problems)");
    grpo_diag_free(&d);
    rc = grpo_run_config_load(&cfg, FIXTURES "no_such_file.ini", &reg, 0, NULL, &err);
    ck_assert_int_eq(rc, GRPO_ERR_IO);
    ck_assert_str_eq(err.message, FIXTURES "no_such_file.ini: cannot open: No such file or "
                                           "directory");
}
END_TEST

/* ---- writing back ----------------------------------------------------------------------- */

static char *dump_to_string(const grpo_run_config *cfg) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(grpo_run_config_dump(cfg, f), 0);
    fclose(f);
    return buf;
}

static void assert_same_config(const grpo_run_config *a, const grpo_run_config *b) {
    for (int i = 0; i < GRPO_RUN_N_KEYS; i++) ck_assert_str_eq(a->text[i], b->text[i]);
    ck_assert_int_eq(a->sampling_num_generations, b->sampling_num_generations);
    ck_assert(a->grpo_epsilon_high == b->grpo_epsilon_high && a->optim_lr == b->optim_lr);
    ck_assert_int_eq(a->grpo_loss_type, b->grpo_loss_type);
    ck_assert_int_eq(a->n_rewards, b->n_rewards);
    for (int r = 0; r < a->n_rewards; r++) {
        const grpo_reward_spec *x = &a->rewards[r], *y = &b->rewards[r];
        ck_assert_str_eq(x->name, y->name);
        ck_assert_str_eq(x->plugin, y->plugin);
        ck_assert(x->weight == y->weight);
        ck_assert_uint_eq(x->n, y->n);
        for (uint32_t j = 0; j < x->n; j++) {
            ck_assert_str_eq(x->keys[j], y->keys[j]);
            ck_assert_str_eq(x->values[j], y->values[j]);
        }
    }
}

START_TEST(dump_reads_back_to_the_same_config) {
    grpo_run_config a, b;
    ck_assert_int_eq(grpo_run_config_load(&a, FIXTURES "valid_full.ini", &reg, 0, NULL, NULL), 0);
    char *text = dump_to_string(&a);
    ck_assert_ptr_nonnull(strstr(text, "\ndtype = f32"));
    ck_assert_ptr_nonnull(strstr(text, "; default\n"));
    ck_assert_ptr_nonnull(strstr(text, "path = .                                ; default: = "
                                       "model.path\n"));
    grpo_diag d = {0};
    int rc = grpo_run_config_load_string(&b, FIXTURES "dump.ini", text, &reg,
                                         GRPO_CONFIG_TRAIN | GRPO_CONFIG_CHECK_PATHS, &d, NULL);
    if (rc) print_diag(&d), fprintf(stderr, "%s", text);
    ck_assert_int_eq(rc, 0);
    assert_same_config(&a, &b);
    free(text);
    grpo_run_config_free(&a);
    grpo_run_config_free(&b);
    grpo_diag_free(&d);
}
END_TEST

START_TEST(dump_splits_long_values_and_keeps_leading_semicolons) {
    /* a 366-character value written as continuation lines, with blanks, ';' and '#' inside */
    char text[2048];
    int n;
    /* (a continuation line may not hold ' ;': build the value without it) */
    n = snprintf(text, sizeof text, "[data]\nchat_template =;start{prompt}");
    for (int i = 0; i < 40; i++)
        n += snprintf(text + n, sizeof text - (size_t)n, "\n  a b;c#d%02d", i);
    snprintf(text + n, sizeof text - (size_t)n, "\n[reward.t]\nplugin = builtin.tags\n");
    grpo_run_config a = load_ok("t.ini", text, 0);
    ck_assert_int_eq((int)strlen(a.data_chat_template), 14 + 40 * 9);
    char *dump = dump_to_string(&a);
    for (char *line = dump, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        ck_assert_ptr_nonnull(nl);
        ck_assert_int_le((int)(nl - line), GRPO_INI_MAX_LINE_CHARS);
    }
    ck_assert_ptr_nonnull(strstr(dump, "\nchat_template =;start{prompt}"));
    grpo_run_config b = load_ok("t.ini", dump, 0);
    assert_same_config(&a, &b);
    free(dump);
    grpo_run_config_free(&a);
    grpo_run_config_free(&b);
}
END_TEST

START_TEST(dump_refuses_unwritable_values) {
    grpo_run_config a = load_ok("t.ini", "", 0);
    free(a.text[GRPO_KEYIDX_log_dir]);
    a.text[GRPO_KEYIDX_log_dir] = strdup("a ;b");
    FILE *f = fopen("/dev/null", "w");
    ck_assert_int_eq(grpo_run_config_dump(&a, f), -1);
    fclose(f);
    grpo_run_config_free(&a);
}
END_TEST

START_TEST(documentation_is_a_valid_run_file_of_defaults) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    grpo_run_config_document(f);
    fclose(f);
    grpo_run_config doc = load_ok("keys.ini", buf, 0), def = load_ok("t.ini", "", 0);
    assert_same_config(&doc, &def);
    /* every key is documented */
    const grpo_run_key *k = grpo_run_keys();
    for (int i = 0; i < GRPO_RUN_N_KEYS; i++) {
        char want[128];
        snprintf(want, sizeof want, "\n%s%s =", k[i].def[0] == '@' ? "; " : "", k[i].name);
        ck_assert_msg(strstr(buf, want), "%s.%s not documented", k[i].section, k[i].name);
    }
    free(buf);
    grpo_run_config_free(&doc);
    grpo_run_config_free(&def);
}
END_TEST

START_TEST(edit_distance_and_suggestions) {
    ck_assert_int_eq(grpo_edit_distance("kitten", "sitting"), 3);
    ck_assert_int_eq(grpo_edit_distance("", "abc"), 3);
    ck_assert_int_eq(grpo_edit_distance("Beta", "beta"), 0);
    const char *c[] = {"beta", "delta", "epsilon_low", "loss_type"};
    ck_assert_str_eq(grpo_suggest("delt", c, 4), "delta");
    ck_assert_str_eq(grpo_suggest("epsilon", c, 4), "epsilon_low"); /* a part of the name */
    ck_assert_ptr_null(grpo_suggest("zzzzzz", c, 4));
    ck_assert_ptr_null(grpo_suggest("x", c, 4));
}
END_TEST

/* ---- with the real registry: manifests read by grpo_registry_scan ---------------------- */

START_TEST(resolves_against_scanned_manifests) {
    grpo_registry scanned = {0};
    grpo_error err;
    grpo_error_init(&err);
    char *dirs[] = {FIXTURES "packs", NULL};
    ck_assert_int_eq(grpo_registry_scan(&scanned, dirs, &err), GRPO_OK);
    grpo_run_config a, b;
    grpo_diag d = {0};
    int rc = grpo_run_config_load(&a, FIXTURES "cli_check.ini", &scanned,
                                  GRPO_CONFIG_TRAIN | GRPO_CONFIG_CHECK_PATHS, &d, NULL);
    if (rc) print_diag(&d);
    ck_assert_int_eq(rc, GRPO_OK);
    const grpo_reward_spec *fmt = grpo_run_config_reward(&a, "fmt");
    grpo_config c = grpo_reward_spec_config(fmt);
    ck_assert_uint_eq(grpo_config_count(&c, "pattern"), 1); /* the file's list replaces defaults */
    ck_assert_str_eq(grpo_config_get(&c, "pattern"), "^<answer>.*</answer>$");
    ck_assert_str_eq(grpo_config_get(&c, "value"), "0.5");
    const grpo_reward_spec *judge = grpo_run_config_reward(&a, "judge");
    ck_assert(judge->weight == -0.5);
    c = grpo_reward_spec_config(judge);
    ck_assert_str_eq(grpo_config_get(&c, "url"), "http://localhost:8000/score;v=1");
    char *text = dump_to_string(&a);
    ck_assert_int_eq(grpo_run_config_load_string(&b, FIXTURES "dump.ini", text, &scanned,
                                                 GRPO_CONFIG_TRAIN | GRPO_CONFIG_CHECK_PATHS, &d,
                                                 NULL),
                     GRPO_OK);
    assert_same_config(&a, &b);
    grpo_run_config_free(&b);
    /* a key the manifest gives no default must be set */
    ck_assert_int_ne(grpo_run_config_load_string(&b, "t.ini", "[reward.j]\nplugin = cfgtest.judge\n",
                                                 &scanned, 0, &d, NULL),
                     GRPO_OK);
    ck_assert(has_message(&d, "t.ini:1: [reward.j] has no url; plugin cfgtest.judge requires it "
                              "(string: where the judge listens)",
                          0));
    free(text);
    grpo_run_config_free(&a);
    grpo_run_config_free(&b);
    grpo_diag_free(&d);
    grpo_registry_free(&scanned);
}
END_TEST

START_TEST(example_run_file_is_valid) {
    grpo_run_config cfg;
    grpo_diag d = {0};
    int rc = grpo_run_config_load(&cfg, GRPO_SOURCE_DIR "/examples/minimind_format.ini", &reg,
                                  GRPO_CONFIG_TRAIN, &d, NULL);
    if (rc) print_diag(&d);
    ck_assert_int_eq(rc, GRPO_OK);
    ck_assert_int_eq(cfg.grpo_loss_type, GRPO_LOSS_GRPO);
    ck_assert(cfg.grpo_beta == 0.02 && cfg.grpo_advantage_clamp == 10);
    ck_assert_int_eq(cfg.optim_schedule, GRPO_SCHEDULE_MINIMIND_COSINE);
    ck_assert_int_eq(cfg.n_rewards, 2);
    grpo_config f = grpo_reward_spec_config(grpo_run_config_reward(&cfg, "format"));
    grpo_config t = grpo_reward_spec_config(grpo_run_config_reward(&cfg, "tags"));
    ck_assert_uint_eq(grpo_config_count(&f, "pattern"), 2);
    ck_assert_str_eq(grpo_config_nth(&f, "pattern", 0), fmt_patterns[0]);
    ck_assert_str_eq(grpo_config_nth(&f, "pattern", 1), fmt_patterns[1]);
    ck_assert_uint_eq(grpo_config_count(&t, "tag"), 4);
    grpo_run_config_free(&cfg);
    /* and against the real builtin pack, which the build makes next to the tests (the test
     * depends on it: its absence is a broken build, not a skip) */
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    grpo_registry built = {0};
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_msg(grpo_registry_scan(&built, dirs, &err) == GRPO_OK, "%s", err.message);
    ck_assert_msg(grpo_registry_find(&built, "builtin.format") != NULL,
                  "the builtin pack is not built in %s", GRPO_PACK_BUILD_DIR);
    rc = grpo_run_config_load(&cfg, GRPO_SOURCE_DIR "/examples/minimind_format.ini", &built,
                              GRPO_CONFIG_TRAIN, &d, NULL);
    if (rc) print_diag(&d);
    ck_assert_int_eq(rc, GRPO_OK);
    grpo_run_config_free(&cfg);
    grpo_registry_free(&built);
    grpo_diag_free(&d);
}
END_TEST

/* ---- random run files: no crash, every failure explained, every success round-trips ------ */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t next_rand(void) { /* xorshift64*: deterministic, fine for picking pieces */
    rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}

START_TEST(random_files_fail_cleanly_or_round_trip) {
    /* Sections with lines that are valid in them (each section used once, each line at most
     * once, list keys excepted); now and then one line from the bad list goes anywhere. */
    static const char *const sections[][8] = {
        {"[model]", "path = .", "backend = cuda", "dtype=bf16", NULL},
        {"[data]", "path = p.jsonl", "chat_template = <u>{prompt}", "    <a>\\n", "shuffle = off", NULL},
        {"[grpo]", "beta = 0.5", "loss_type = bnpo", "delta = 2", "; comment", "", NULL},
        {"[log]", "dir =;semi", "every = 5", "completions_every: 3", NULL},
        {"[reward.a]", "plugin = builtin.tags", "tag = <x>", "tag = \xc3\xa9t\xc3\xa9", "weight = -1", NULL},
        {"[reward.b]", "plugin = builtin.format", "pattern = a;b", "pattern = ^x", "  y$",
         "value = 2", "full_match = on", NULL},
    };
    static const char *const bad[] = {
        "[sampling", "[reward.]", "[zz]", "beta = -1", "value = x", "key without equals",
        "= empty name", "\xff\xfe", "seed = 99999999999999999999", "top_p = 1e-300", "lr = 1e400",
        "num_generations = 1", "    ;x", "  a ;b", "path = twice"};
    const int n_sec = (int)(sizeof sections / sizeof sections[0]);
    const int n_bad_p = (int)(sizeof bad / sizeof bad[0]);
    char text[4096];
    int n_ok = 0, n_bad = 0;
    for (int iter = 0; iter < 3000; iter++) {
        size_t len = 0;
        int used = 0, corrupt = next_rand() % 3 == 0;
        for (int k = 0; k < n_sec; k++) {
            int sec = (int)(next_rand() % (unsigned)n_sec);
            if (used & (1 << sec) || next_rand() % 3 == 0) continue;
            used |= 1 << sec;
            len += (size_t)snprintf(text + len, sizeof text - len, "%s\n", sections[sec][0]);
            for (int l = 1; sections[sec][l]; l++) {
                if (next_rand() % 4 == 0) continue;
                if (corrupt && next_rand() % 6 == 0) {
                    len += (size_t)snprintf(text + len, sizeof text - len, "%s\n",
                                            bad[next_rand() % (unsigned)n_bad_p]);
                    corrupt = 0;
                }
                if (next_rand() % 200 == 0) { /* now and then a line too long for inih */
                    memset(text + len, 'w', 230);
                    len += 230;
                }
                len += (size_t)snprintf(text + len, sizeof text - len, "%s%s", sections[sec][l],
                                        next_rand() % 8 ? "\n" : "\r\n");
            }
        }
        text[len] = '\0';
        grpo_run_config a, b;
        grpo_diag d = {0};
        grpo_error err;
        grpo_error_init(&err);
        int rc = grpo_run_config_load_string(&a, "r.ini", text, &reg, 0, &d, &err);
        if (rc != GRPO_OK) {
            n_bad++;
            ck_assert_int_eq(rc, GRPO_ERR_INVALID);
            ck_assert_int_gt(d.n, 0);
            for (int i = 0; i < d.n; i++) ck_assert_msg(strncmp(d.msg[i], "r.ini", 5) == 0, "%s", d.msg[i]);
            ck_assert_ptr_null(strstr(err.message, "internal"));
        } else {
            n_ok++;
            char *dump = dump_to_string(&a);
            grpo_diag d2 = {0};
            int rc2 = grpo_run_config_load_string(&b, "r.ini", dump, &reg, 0, &d2, NULL);
            if (rc2) print_diag(&d2), fprintf(stderr, "input:\n%s\ndump:\n%s", text, dump);
            ck_assert_int_eq(rc2, GRPO_OK);
            assert_same_config(&a, &b);
            grpo_run_config_free(&b);
            grpo_diag_free(&d2);
            free(dump);
            grpo_run_config_free(&a);
        }
        grpo_diag_free(&d);
    }
    fprintf(stderr, "random run files: %d valid (round-tripped), %d refused\n", n_ok, n_bad);
    ck_assert(n_ok > 100 && n_bad > 100); /* both paths exercised */
}
END_TEST

START_TEST(random_bytes_never_crash_the_reader) {
    static const char alphabet[] = "[]=:;# \t\r\n\n\nabcdeilmnoprstw.0123456789-_\xc3\xa9\xff";
    char text[700];
    for (int iter = 0; iter < 5000; iter++) {
        size_t n = next_rand() % (sizeof text - 1);
        for (size_t i = 0; i < n; i++) text[i] = alphabet[next_rand() % (sizeof alphabet - 1)];
        text[n] = '\0';
        grpo_ini_doc doc;
        grpo_diag d = {0};
        int rc = grpo_ini_read_string(&doc, "b.ini", text, &d);
        ck_assert(rc == 0 ? d.n == 0 : d.n > 0);
        for (int s = 0; s < doc.n_sections; s++)
            for (int e = 0; e < doc.sections[s].n_entries; e++)
                ck_assert_int_le(doc.sections[s].entries[e].line, doc.n_lines);
        grpo_ini_doc_free(&doc);
        grpo_diag_free(&d);
        grpo_run_config cfg;
        if (grpo_run_config_load_string(&cfg, "b.ini", text, &reg, 0, NULL, NULL) == GRPO_OK)
            grpo_run_config_free(&cfg);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("config");
    TCase *ok = tcase_create("valid"), *bad = tcase_create("errors"), *out = tcase_create("dump");
    tcase_add_test(ok, empty_file_gives_documented_defaults);
    tcase_add_test(ok, full_file_resolves_values_and_defaults);
    tcase_add_test(ok, reward_keys_lists_continuations_and_manifest_defaults);
    tcase_add_test(ok, list_keys_accumulate_in_order);
    tcase_add_test(ok, continuation_lines_join_without_separator);
    tcase_add_test(ok, semicolons_bom_and_crlf);
    tcase_add_test(ok, input_paths_are_relative_to_the_run_file);
    tcase_add_test(ok, edit_distance_and_suggestions);
    tcase_add_test(bad, unknown_key_suggests_nearest);
    tcase_add_test(bad, unknown_key_suggests_across_sections);
    tcase_add_test(bad, train_threads_is_bounded);
    tcase_add_test(bad, wrong_type_is_an_error);
    tcase_add_test(bad, out_of_range_is_an_error);
    tcase_add_test(bad, bad_choice_lists_choices);
    tcase_add_test(bad, set_overrides_apply_after_the_file);
    tcase_add_test(bad, duplicate_section_names_both_lines);
    tcase_add_test(bad, duplicate_key_names_both_lines);
    tcase_add_test(bad, too_long_line_says_so);
    tcase_add_test(bad, missing_required_names_the_section);
    tcase_add_test(bad, unknown_plugin_suggests_nearest);
    tcase_add_test(bad, plugin_keys_are_checked_against_the_manifest);
    tcase_add_test(bad, unknown_section_suggests_nearest);
    tcase_add_test(bad, syntax_errors_name_the_line);
    tcase_add_test(bad, paths_must_exist_when_checked);
    tcase_add_test(bad, all_problems_are_reported_and_counted);
    tcase_add_test(out, dump_reads_back_to_the_same_config);
    tcase_add_test(out, dump_splits_long_values_and_keeps_leading_semicolons);
    tcase_add_test(out, dump_refuses_unwritable_values);
    tcase_add_test(out, documentation_is_a_valid_run_file_of_defaults);
    tcase_add_test(out, resolves_against_scanned_manifests);
    tcase_add_test(out, example_run_file_is_valid);
    tcase_add_test(out, runs_that_cannot_learn_are_named);
    tcase_add_test(out, random_files_fail_cleanly_or_round_trip);
    tcase_add_test(out, random_bytes_never_crash_the_reader);
    suite_add_tcase(s, ok);
    suite_add_tcase(s, bad);
    suite_add_tcase(s, out);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
