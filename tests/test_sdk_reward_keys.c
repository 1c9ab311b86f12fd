/*
 * test_sdk_reward_keys.c — the reward packs read their keys with the SDK's typed readers
 * (grpo/config.h): a value the manifest's type lets through but the reward cannot use is refused
 * at create() with the reader's one-line message (section, key, what was expected, the value).
 * The packs are loaded through the registry as a run loads them; the config is the manifest's
 * defaults with one key replaced, as the host builds it.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "grpo/grpo.h"
#include "host/host.h"
#include "host/registry.h"

#define MAX_KV 32

static grpo_registry reg;

static void registry_setup(void) {
    grpo_error err;
    grpo_error_init(&err);
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    memset(&reg, 0, sizeof reg);
    ck_assert_msg(grpo_registry_scan(&reg, dirs, &err) == GRPO_OK, "%s", err.message);
}

static void registry_teardown(void) { grpo_registry_free(&reg); }

/* The reward_model pack checks that the host has model services before it reads its keys; these
 * stand in for them (a bad key is refused before any is called). */
static int32_t no_load(const grpo_host *h, const char *dir, struct grpo_host_model **out,
                       grpo_error *err) {
    (void)h, (void)dir, (void)out;
    return grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "test host: no models");
}
static void no_free(struct grpo_host_model *m) { (void)m; }
static int32_t no_info(const struct grpo_host_model *m, grpo_host_model_info *out) {
    (void)m, (void)out;
    return GRPO_ERR_UNSUPPORTED;
}
static int32_t no_hidden(struct grpo_host_model *m, const int32_t *ids, const int32_t *mask,
                         int32_t B, int32_t T, const int32_t *at, float *out, grpo_error *err) {
    (void)m, (void)ids, (void)mask, (void)B, (void)T, (void)at, (void)out, (void)err;
    return GRPO_ERR_UNSUPPORTED;
}
static int32_t no_tensor(struct grpo_host_model *m, const char *name, float *out, uint64_t n,
                         grpo_error *err) {
    (void)m, (void)name, (void)out, (void)n, (void)err;
    return GRPO_ERR_UNSUPPORTED;
}
static int32_t no_encode(struct grpo_host_model *m, const char *text, int32_t add_special,
                         int32_t *ids, int32_t cap, grpo_error *err) {
    (void)m, (void)text, (void)add_special, (void)ids, (void)cap, (void)err;
    return GRPO_ERR_UNSUPPORTED;
}
static int32_t no_render(struct grpo_host_model *m, const struct grpo_message *msgs, uint32_t n,
                         int32_t gen, char *out, int32_t cap, grpo_error *err) {
    (void)m, (void)msgs, (void)n, (void)gen, (void)out, (void)cap, (void)err;
    return GRPO_ERR_UNSUPPORTED;
}

static grpo_host test_host(void) {
    grpo_host h = *grpo_default_host();
    h.model_load = no_load, h.model_free = no_free, h.model_info = no_info;
    h.model_hidden = no_hidden, h.model_tensor = no_tensor, h.model_encode = no_encode;
    h.model_render = no_render;
    return h;
}

/* Creates reward id from its manifest defaults with key = value; returns the status, err holds
 * the message. A state that was created is destroyed. */
static int32_t create_with(const char *id, const char *key, const char *value, grpo_error *err) {
    const grpo_entry *e = grpo_registry_find(&reg, id);
    ck_assert_msg(e != NULL, "%s not found in %s", id, GRPO_PACK_BUILD_DIR);
    grpo_host host = test_host();
    const grpo_reward_desc *d = NULL;
    ck_assert_msg(grpo_registry_load(&reg, e, &host, (const void **)&d, err) == GRPO_OK, "%s",
                  err->message);
    const char *keys[MAX_KV], *values[MAX_KV];
    uint32_t n = 0;
    for (int k = 0; k < e->n_keys; k++) {
        if (!strcmp(e->keys[k].name, key)) {
            keys[n] = key, values[n++] = value;
            continue;
        }
        for (int v = 0; v < e->keys[k].n_defaults && n < MAX_KV; v++)
            keys[n] = e->keys[k].name, values[n++] = e->keys[k].defaults[v];
    }
    grpo_config cfg = {.struct_size = sizeof cfg, .n = n, .keys = keys, .values = values,
                       .section = "reward.t"};
    void *state = NULL;
    grpo_error_init(err);
    int32_t rc = d->create(&host, &cfg, &state, err);
    if (rc == GRPO_OK) d->destroy(state);
    return rc;
}

static void expect_refused(const char *id, const char *key, const char *value, const char *msg) {
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(create_with(id, key, value, &err), GRPO_ERR_INVALID);
    ck_assert_str_eq(err.message, msg);
}

START_TEST(builtin_rewards_refuse_bad_values_by_key) {
    expect_refused("builtin.repetition", "n", "17",
                   "[reward.t] n: expected an integer in [1, 16], got '17'");
    expect_refused("builtin.repetition", "n", "2.5",
                   "[reward.t] n: expected an integer, got '2.5'");
    expect_refused("builtin.repetition", "scope", "think",
                   "[reward.t] scope: expected one of answer, all, got 'think'");
    expect_refused("builtin.accuracy", "match", "fuzzy",
                   "[reward.t] match: expected one of exact, numeric, got 'fuzzy'");
    expect_refused("builtin.accuracy", "extract", "first",
                   "[reward.t] extract: expected one of answer_tag, boxed, last_number, auto, got "
                   "'first'");
    expect_refused("builtin.accuracy", "tolerance", "-1",
                   "[reward.t] tolerance: expected a number >= 0, got '-1'");
    expect_refused("builtin.format", "combine", "all",
                   "[reward.t] combine: expected one of any, sum, got 'all'");
    expect_refused("builtin.format", "dotall", "maybe",
                   "[reward.t] dotall: expected true or false, got 'maybe'");
    expect_refused("builtin.tags", "value", "0x1",
                   "[reward.t] value: expected a finite number, got '0x1'");
    expect_refused("builtin.length", "min_chars", "x",
                   "[reward.t] min_chars: expected a finite number, got 'x'");
    expect_refused("builtin.overlong", "cache", "inf",
                   "[reward.t] cache: expected a finite number, got 'inf'");
}
END_TEST

START_TEST(builtin_rewards_accept_their_defaults) {
    const char *ids[] = {"builtin.format", "builtin.tags", "builtin.accuracy", "builtin.length",
                         "builtin.overlong", "builtin.repetition"};
    grpo_error err;
    for (int i = 0; i < 6; i++)
        ck_assert_msg(create_with(ids[i], "", "", &err) == GRPO_OK, "%s: %s", ids[i],
                      err.message);
}
END_TEST

START_TEST(reward_model_refuses_bad_values_by_key) {
    expect_refused("reward_model.score", "text", "answer",
                   "[reward.t] text: expected one of full, minimind, got 'answer'");
    expect_refused("reward_model.score", "add_special_tokens", "sometimes",
                   "[reward.t] add_special_tokens: expected true or false, got 'sometimes'");
    expect_refused("reward_model.score", "clip", "-3",
                   "[reward.t] clip: expected a number >= 0, got '-3'");
    expect_refused("reward_model.score", "batch_size", "0",
                   "[reward.t] batch_size: expected an integer in [1, 65536], got '0'");
    expect_refused("reward_model.score", "reward_token_id", "-2",
                   "[reward.t] reward_token_id: expected an integer >= -1, got '-2'");
    expect_refused("reward_model.score", "label", "1.0",
                   "[reward.t] label: expected an integer, got '1.0'");
}
END_TEST

int main(void) {
    Suite *s = suite_create("sdk_reward_keys");
    TCase *tc = tcase_create("reward_keys");
    tcase_add_checked_fixture(tc, registry_setup, registry_teardown);
    tcase_add_test(tc, builtin_rewards_refuse_bad_values_by_key);
    tcase_add_test(tc, builtin_rewards_accept_their_defaults);
    tcase_add_test(tc, reward_model_refuses_bad_values_by_key);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
