/*
 * reward_test_host.h — a reward of the build's packs loaded through the real registry, with the
 * default host whose log counts warnings: what the tests of builtin rewards (test_rewards_exec.c,
 * test_rewards_http.c) start from. Include once per test program.
 */
#ifndef GRPO_REWARD_TEST_HOST_H
#define GRPO_REWARD_TEST_HOST_H

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "grpo/reward.h"
#include "host/host.h"
#include "host/registry.h"

static grpo_registry reg;
static const grpo_reward_desc *desc;
static grpo_host host; /* the default host, with a log that counts warnings */
static int warnings;
static char warned[16384]; /* every warning of the test, one per line */

static void counting_log(int32_t level, const char *who, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[%d] %s: %s\n", level, who, msg);
    if (level != GRPO_LOG_WARN) return;
    warnings++;
    size_t used = strlen(warned);
    snprintf(warned + used, sizeof warned - used, "%s\n", msg);
}

/* Scans GRPO_PACK_BUILD_DIR and loads reward id into desc (warnings counted from 0). */
static void load_reward(const char *id) {
    grpo_error err;
    grpo_error_init(&err);
    char *dirs[] = {GRPO_PACK_BUILD_DIR, NULL};
    memset(&reg, 0, sizeof reg);
    ck_assert_msg(grpo_registry_scan(&reg, dirs, &err) == GRPO_OK, "%s", err.message);
    const grpo_entry *e = grpo_registry_find(&reg, id);
    ck_assert_msg(e != NULL, "no reward %s in %s", id, GRPO_PACK_BUILD_DIR);
    host = *grpo_default_host();
    host.log = counting_log;
    warnings = 0, warned[0] = 0;
    ck_assert_msg(grpo_registry_load(&reg, e, &host, (const void **)&desc, &err) == GRPO_OK,
                  "%s", err.message);
}

#endif
