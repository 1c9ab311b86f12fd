/* scripted.c — scripted.echo, the test environment of tests/test_env.c (see pack.ini). It also
 * records what step() saw, so the test can compare the turns the host handed it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpo/grpo.h"

typedef struct script {
    int32_t done_after, fail_step;
} script;

typedef struct episode {
    const script *s;
    uint32_t member;
    uint32_t turns;
    char obs[64];
} episode;

static int32_t sc_create(const grpo_host *host, const grpo_config *cfg, void **state,
                         grpo_error *err) {
    (void)host;
    script *s = calloc(1, sizeof *s);
    if (!s) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    int32_t rc = grpo_config_int(cfg, "done_after", 2, 1, 1000, &s->done_after, err);
    if (rc == GRPO_OK) rc = grpo_config_int(cfg, "fail_step", -1, -1, 1000, &s->fail_step, err);
    if (rc != GRPO_OK) free(s);
    else *state = s;
    return rc;
}

static int32_t sc_reset(void *state, const grpo_sample *sample, void **ep, grpo_env_step *out,
                        grpo_error *err) {
    episode *e = calloc(1, sizeof *e);
    if (!e) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    e->s = state, e->member = sample->member;
    snprintf(e->obs, sizeof e->obs, "#%u:", (unsigned)e->member);
    out->observation = e->obs;
    *ep = e;
    return GRPO_OK;
}

static int32_t sc_step(void *ep, const grpo_env_turn *turn, grpo_env_step *out, grpo_error *err) {
    episode *e = ep;
    if ((int32_t)turn->turn == e->s->fail_step)
        return grpo_error_set(err, GRPO_ERR_INVALID, "scripted failure at turn %u", turn->turn);
    if (turn->turn != e->turns)
        return grpo_error_set(err, GRPO_ERR_INTERNAL, "turn %u after %u turns", turn->turn,
                              e->turns);
    e->turns++;
    out->reward = 0.25f;
    out->done = (int32_t)e->turns >= e->s->done_after;
    snprintf(e->obs, sizeof e->obs, "\n<obs %u %u>\n", (unsigned)e->member, turn->turn);
    out->observation = e->obs;
    return GRPO_OK;
}

static int32_t sc_final(void *ep, float *reward, grpo_error *err) {
    (void)err;
    *reward = (float)((episode *)ep)->member + 0.5f;
    return GRPO_OK;
}

static void sc_close(void *ep) {
    free(ep);
}

static const grpo_env_desc echo = {
    .struct_size = sizeof(grpo_env_desc),
    .id = "scripted.echo",
    .description = "scripted observations",
    .create = sc_create,
    .reset = sc_reset,
    .step = sc_step,
    .final_reward = sc_final,
    .close = sc_close,
    .destroy = free,
};

static const grpo_env_desc *get_env(uint32_t i) {
    return i == 0 ? &echo : NULL;
}

GRPO_PLUGIN_MAGIC()

GRPO_EXPORT int32_t grpo_plugin_init(const grpo_host *host, grpo_library *lib, grpo_error *err) {
    (void)host;
    if (!GRPO_HAS_FIELD(lib, grpo_library, get_env))
        return grpo_error_set(err, GRPO_ERR_ABI, "scripted: host without environments");
    lib->get_env = get_env;
    return GRPO_OK;
}
