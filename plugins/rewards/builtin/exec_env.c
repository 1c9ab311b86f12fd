/*
 * exec_env.c — builtin.exec_env: an environment (grpo/env.h) that is an external program in any
 * language, speaking builtin.exec's JSON lines (exec_proc.h, sdk/EXEC_PROTOCOL.md): one program
 * for the run, every episode named by a number.
 *
 *   {"id": N, "type": "reset", "episode": E, "sample": {prompt, group, member, fields, ...}}
 *       -> {"id": N, "observation": "..." or null}
 *   {"id": N, "type": "step", "episode": E, "turn": K, "text": "...", "tool_calls": [...] or
 *    null, "tool_error": "..." or null}
 *       -> {"id": N, "observation": "...", "done": false, "reward": 0.1 or null,
 *           "tool_calls": 1, "tool_errors": 0}   (done, reward and the counts optional)
 *   {"id": N, "type": "final", "episode": E}  -> {"id": N, "reward": 1.0 or null}
 *
 * "final" is an episode's last message. A crash, the deadline or a malformed line is one warning
 * naming the program, the request and the line; the program is killed (restarted by the next
 * request) and every episode it held ends there without a reward (NaN: no opinion); the run
 * goes on — unless the program timed out MAX_TIMEOUTS exchanges in a row: a program that never
 * answers would make every episode wait its whole timeout (at the defaults about half an hour a
 * step) for ever, so the next reset or step fails the run, naming the program.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_proc.h"
#include "grpo/env.h"

#define MAX_TIMEOUTS 3 /* consecutive exchanges past the deadline that end the run */

typedef struct xenv {
    exec_proc p;
    uint64_t next_episode;
    int timeouts; /* consecutive exchanges that ran past p.timeout (0 after any answer) */
} xenv;

typedef struct xepisode {
    xenv *env;
    uint64_t number; /* E of the protocol */
    uint64_t start;  /* the program start that holds its state; another start: it is lost */
    int dead;        /* a request of it failed */
    char *obs;       /* the last observation (owned) */
} xepisode;

/* What one reply carries (NaN / -1 for absent). */
typedef struct xreply {
    const char *type;
    uint64_t id, episode;
    char *obs;
    int done;
    float reward;
    int32_t tool_calls, tool_errors;
} xreply;

static int bad_reply(const xreply *r, char *why, size_t why_size) {
    snprintf(why, why_size, "malformed reply to request %llu (%s of episode %llu): expected "
             "{\"id\": %llu%s} (sdk/EXEC_PROTOCOL.md)", (unsigned long long)r->id, r->type,
             (unsigned long long)r->episode, (unsigned long long)r->id,
             !strcmp(r->type, "final") ? ", \"reward\": number or null"
             : !strcmp(r->type, "reset") ? ", \"observation\": text or null"
                                         : ", \"observation\": text or null, \"done\": true or "
                                           "false, \"reward\": number or null");
    return -1;
}

/* A count key: absent 0, else a non-negative integer. */
static int count_of(const cJSON *reply, const char *key, int32_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(reply, key);
    *out = 0;
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e6) return -1;
    *out = (int32_t)v->valuedouble;
    return 0;
}

static int take_reply(void *ctx, const cJSON *reply, char *why, size_t why_size) {
    xreply *r = ctx;
    if (!reply) return bad_reply(r, why, why_size);
    const cJSON *obs = cJSON_GetObjectItemCaseSensitive(reply, "observation");
    const cJSON *done = cJSON_GetObjectItemCaseSensitive(reply, "done");
    const cJSON *rw = cJSON_GetObjectItemCaseSensitive(reply, "reward");
    if ((obs && !cJSON_IsString(obs) && !cJSON_IsNull(obs)) || (done && !cJSON_IsBool(done)) ||
        (rw && !cJSON_IsNumber(rw) && !cJSON_IsNull(rw)) ||
        count_of(reply, "tool_calls", &r->tool_calls) ||
        count_of(reply, "tool_errors", &r->tool_errors))
        return bad_reply(r, why, why_size);
    if (cJSON_IsNumber(rw) && !(isfinite(rw->valuedouble) && fabs(rw->valuedouble) < 3e38))
        return bad_reply(r, why, why_size);
    r->done = cJSON_IsTrue(done);
    r->reward = cJSON_IsNumber(rw) ? (float)rw->valuedouble : NAN;
    if (cJSON_IsString(obs) && !(r->obs = strdup(obs->valuestring))) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    return 0;
}

/* The program start a request reaches now: the running one, or the next. */
static uint64_t holder(const exec_proc *p) {
    return p->pid ? p->starts : p->starts + 1;
}

/* Sends req (owned) for episode e; on failure warns, kills the program and marks e dead. An
 * episode whose program was restarted since its reset is dead without a word (the failure that
 * restarted it was warned of). */
static int request(xepisode *e, cJSON *req, xreply *r) {
    exec_proc *p = &e->env->p;
    r->id = p->next_id, r->episode = e->number, r->reward = NAN;
    if (e->start != holder(p)) {
        cJSON_Delete(req);
        return e->dead = 1, -1;
    }
    cJSON_AddStringToObject(req, "type", r->type);
    cJSON_AddNumberToObject(req, "episode", (double)e->number);
    char why[512];
    p->last_line[0] = '\0';
    int rc = req ? exec_proc_request(p, req, take_reply, r, why, sizeof why) : -1;
    cJSON_Delete(req);
    e->env->timeouts = rc == 0 ? 0 : strstr(why, "(timeout)") ? e->env->timeouts + 1 : 0;
    if (rc == 0) return 0;
    char what[900];
    snprintf(what, sizeof what, "%s%s%s%s; episode %llu ends without a reward (the program is "
             "restarted; its other open episodes end too)", why, p->last_line[0] ? "; line: '" : "",
             p->last_line, p->last_line[0] ? "'" : "", (unsigned long long)e->number);
    exec_proc_warn(p, what);
    exec_proc_kill(p);
    free(r->obs), r->obs = NULL;
    e->dead = 1;
    return -1;
}

/* GRPO_OK, or the error that ends the run once the program timed out MAX_TIMEOUTS times in a
 * row. */
static int32_t check_timeouts(const xenv *x, grpo_error *err) {
    if (x->timeouts < MAX_TIMEOUTS) return GRPO_OK;
    return grpo_error_set(err, GRPO_ERR_INVALID,
                          "[%s] builtin.exec_env: the program %s gave no reply within timeout = "
                          "%g s %d times in a row; expected a program that answers (the run ends "
                          "rather than wait that long on every episode)",
                          x->p.section, x->p.program, x->p.timeout, x->timeouts);
}

static int32_t xenv_create(const grpo_host *host, const grpo_config *cfg, void **state,
                           grpo_error *err) {
    xenv *x = calloc(1, sizeof *x);
    if (!x) return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    int32_t rc = exec_proc_create(&x->p, host, cfg, "builtin.exec_env", err);
    if (rc != GRPO_OK) return free(x), rc;
    *state = x;
    return GRPO_OK;
}

static void xenv_destroy(void *state) {
    exec_proc_free(state);
    free(state);
}

static int32_t xenv_reset(void *state, const grpo_sample *sample, void **episode,
                          grpo_env_step *out, grpo_error *err) {
    xenv *x = state;
    xepisode *e = calloc(1, sizeof *e);
    if (!e) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    e->env = x, e->number = x->next_episode++;
    e->start = holder(&x->p);
    cJSON *req = cJSON_CreateObject();
    if (req) cJSON_AddItemToObject(req, "sample", exec_sample_json(sample));
    xreply r = {.type = "reset"};
    if (request(e, req, &r) == 0) e->obs = r.obs, out->observation = e->obs;
    int32_t rc = check_timeouts(x, err);
    if (rc != GRPO_OK) { /* a failed reset leaves no episode to close */
        free(e->obs), free(e);
        return rc;
    }
    *episode = e;
    return GRPO_OK;
}

static int32_t xenv_step(void *episode, const grpo_env_turn *turn, grpo_env_step *out,
                         grpo_error *err) {
    xepisode *e = episode;
    if (e->dead) return out->done = 1, check_timeouts(e->env, err);
    cJSON *req = cJSON_CreateObject();
    if (req) {
        cJSON_AddNumberToObject(req, "turn", turn->turn);
        cJSON_AddStringToObject(req, "text", turn->text);
        cJSON *calls = turn->tool_calls ? cJSON_Parse(turn->tool_calls) : NULL;
        cJSON_AddItemToObject(req, "tool_calls", calls ? calls : cJSON_CreateNull());
        if (turn->tool_error) cJSON_AddStringToObject(req, "tool_error", turn->tool_error);
        else cJSON_AddNullToObject(req, "tool_error");
    }
    xreply r = {.type = "step"};
    if (request(e, req, &r) != 0) return out->done = 1, check_timeouts(e->env, err);
    free(e->obs);
    e->obs = r.obs;
    out->observation = e->obs, out->done = r.done, out->reward = r.reward;
    out->tool_calls = (uint32_t)r.tool_calls, out->tool_errors = (uint32_t)r.tool_errors;
    return GRPO_OK;
}

static int32_t xenv_final(void *episode, float *reward, grpo_error *err) {
    (void)err;
    xepisode *e = episode;
    *reward = NAN;
    if (e->dead) return GRPO_OK;
    xreply r = {.type = "final"};
    if (request(e, cJSON_CreateObject(), &r) == 0) *reward = r.reward;
    free(r.obs);
    return GRPO_OK;
}

static void xenv_close(void *episode) {
    xepisode *e = episode;
    free(e->obs);
    free(e);
}

const grpo_env_desc builtin_exec_env = {
    .struct_size = sizeof(grpo_env_desc),
    .id = "builtin.exec_env",
    .description = "an environment that is an external program speaking JSON lines",
    .flags = 0,
    .create = xenv_create,
    .reset = xenv_reset,
    .step = xenv_step,
    .final_reward = xenv_final,
    .close = xenv_close,
    .destroy = xenv_destroy,
};
