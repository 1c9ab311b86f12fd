/* episode.c — the environment plugin and the episodes of a batch (see episode.h). */
#include "train/episode.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/plugin_call.h"
#include "train/reward_batch.h"
#include "base/nomem.h"

/* Content no template changes, to find where the policy's turn sits in a rendering. */
#define TURN_MARKER "GRPO_TURN_7f3a"

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    return d ? memcpy(d, s, n) : NULL;
}

/* Marks a call into the env plugin of spec for crash and exit() reports (plugin_call.h). */
static void spec_call_begin(const grpo_reward_spec *spec, const char *what) {
    grpo_plugin_call_begin(spec->plugin, "env", what);
    grpo_plugin_call_origin(spec->entry->pack->name, spec->entry->pack->library_path);
}

static void call_begin(const grpo_episodes *E, const char *what) {
    spec_call_begin(&E->run->cfg.env, what);
}

/* A failure of plugin as one line naming [env] and the plugin (once: a message that already
 * starts with "[env] " keeps only its rest). */
static int plugin_fail(const char *plugin, int32_t st, grpo_error *inner, const char *what,
                       grpo_error *err) {
    const char *msg = grpo_plugin_message(inner);
    if (!strncmp(msg, "[env] ", 6)) msg += 6;
    return grpo_error_set(err, st < 0 ? st : GRPO_ERR_INTERNAL, "[env] (plugin %s) %s: %s",
                          plugin, what, msg);
}

static int env_fail(const grpo_episodes *E, int32_t st, grpo_error *inner, const char *what,
                    grpo_error *err) {
    return plugin_fail(E->run->cfg.env.plugin, st, inner, what, err);
}

/* Loads the [env] plugin of cfg and creates its run state. */
static int env_create(const grpo_run_config *cfg, grpo_registry *reg, const grpo_host *host,
                      const grpo_env_desc **desc, void **state, grpo_error *err) {
    const grpo_reward_spec *spec = &cfg->env;
    if (!spec->entry)
        return grpo_error_set(err, GRPO_ERR_INVALID, "[env]: no env.plugin to open");
    const void *d = NULL;
    int rc = grpo_registry_load(reg, spec->entry, host, &d, err);
    if (rc != GRPO_OK) return rc;
    grpo_config c = grpo_reward_spec_config(spec);
    grpo_error inner;
    grpo_error_init(&inner);
    spec_call_begin(spec, "create");
    int32_t st = ((const grpo_env_desc *)d)->create(host, &c, state, &inner);
    grpo_plugin_call_end();
    if (st != GRPO_OK) return plugin_fail(spec->plugin, st, &inner, "failed to create", err);
    *desc = d;
    return GRPO_OK;
}

int grpo_episodes_open(grpo_episodes *E, grpo_run *r, grpo_error *err) {
    memset(E, 0, sizeof *E);
    E->run = r;
    E->max_turns = (int32_t)r->cfg.env_max_turns;
    return env_create(&r->cfg, &r->proc.reg, &r->proc.host, &E->desc, &E->state, err);
}

int grpo_episodes_try(const grpo_run_config *cfg, grpo_registry *reg, const grpo_host *host,
                      grpo_error *err) {
    const grpo_env_desc *desc = NULL;
    void *state = NULL;
    int rc = env_create(cfg, reg, host, &desc, &state, err);
    if (rc != GRPO_OK) return rc;
    spec_call_begin(&cfg->env, "destroy");
    desc->destroy(state);
    grpo_plugin_call_end();
    return GRPO_OK;
}

/* Closes every open episode of the batch and frees its buffers. */
static void episodes_clear(grpo_episodes *E) {
    for (int32_t i = 0; E->ep && i < E->N; i++) {
        grpo_episode *e = &E->ep[i];
        if (e->inst) {
            call_begin(E, "close");
            E->desc->close(e->inst);
            grpo_plugin_call_end();
        }
        free(e->obs);
        for (int k = 0; k < 4; k++) free(e->fields_json[k]);
    }
    free(E->ep);
    E->ep = NULL, E->N = 0;
}

void grpo_episodes_close(grpo_episodes *E) {
    if (!E->desc) return;
    episodes_clear(E);
    call_begin(E, "destroy");
    E->desc->destroy(E->state);
    grpo_plugin_call_end();
    memset(E, 0, sizeof *E);
}

/* Replaces e's observation tokens with text's. */
static int set_obs(grpo_episodes *E, grpo_episode *e, const char *text, grpo_error *err) {
    free(e->obs);
    e->obs = NULL, e->n_obs = 0;
    if (!text || !*text) return GRPO_OK;
    grpo_tok_ids v = {0};
    int rc = grpo_tokenizer_encode(E->run->tok, text, strlen(text), 0, &v, err);
    if (rc != GRPO_OK) return rc;
    e->obs = v.data, e->n_obs = (int32_t)v.n;
    return GRPO_OK;
}

/* 1 when the episode's prompt went through the model's chat template (a tool role exists). */
static int templated(const grpo_episodes *E, const grpo_episode *e) {
    return e->ex->messages && !E->run->simple_format && E->run->tpl;
}

/* The text that follows the policy's turn (which ended with the token eos) when the template
 * renders a tool message holding obs after it, up to the next generation prompt. */
static int render_tool(grpo_episodes *E, const grpo_episode *e, int32_t eos, const char *obs,
                       char **out, grpo_error *err) {
    uint32_t n = e->ex->n_messages;
    grpo_message *m = malloc((n + 2) * sizeof *m);
    if (!m) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    memcpy(m, e->ex->messages, n * sizeof *m);
    m[n] = (grpo_message){sizeof *m, "assistant", TURN_MARKER};
    m[n + 1] = (grpo_message){sizeof *m, "tool", obs};
    grpo_chat_options o = {1, NULL, NULL, E->run->tools_json, NULL, 0};
    char *all = NULL;
    int rc = grpo_chat_template_render(E->run->tpl, m, n + 2, &o, &all, err);
    free(m);
    if (rc != GRPO_OK) return rc;
    const char *at = strstr(all, TURN_MARKER);
    if (!at) {
        free(all);
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "[env]: the chat template drops the "
                              "assistant's content when a tool message follows; expected it "
                              "kept, to render observations after a turn");
    }
    at += strlen(TURN_MARKER);
    grpo_tok_text t = {0};
    if (grpo_tokenizer_decode(E->run->tok, &eos, 1, 0, &t, err) == GRPO_OK && t.data &&
        strncmp(at, t.data, strlen(t.data)) == 0)
        at += strlen(t.data); /* the policy already wrote its end-of-turn token */
    grpo_tok_text_free(&t);
    *out = dup_str(at);
    free(all);
    return *out ? GRPO_OK : grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
}

int grpo_episodes_begin(grpo_episodes *E, char *const *prompt_text,
                        const grpo_example *const *ex, int32_t B, int32_t G, grpo_error *err) {
    episodes_clear(E);
    E->N = B * G, E->G = G;
    if (!(E->ep = calloc((size_t)E->N, sizeof *E->ep)))
        return grpo_nomem(err, "the batch's episodes (rows)", (uint64_t)E->N * sizeof *E->ep);
    grpo_reward_batch rb = {0};
    int rc = grpo_reward_batch_init(&rb, (uint32_t)E->N, err);
    for (int32_t i = 0; rc == GRPO_OK && i < E->N; i++) {
        grpo_episode *e = &E->ep[i];
        e->ex = ex[i / G], e->prompt = prompt_text[i / G], e->reward = NAN;
        grpo_reward_batch_set(&rb, (uint32_t)i, e->prompt, e->ex, "", NULL, 0, (uint32_t)(i / G),
                              (uint32_t)(i % G), 0);
        grpo_env_step out = {sizeof out, NULL, 0, NAN, 0, 0};
        grpo_error inner;
        grpo_error_init(&inner);
        call_begin(E, "reset");
        int32_t st = E->desc->reset(E->state, &rb.samples[i], &e->inst, &out, &inner);
        grpo_plugin_call_end();
        if (st != GRPO_OK) {
            e->inst = NULL;
            rc = env_fail(E, st, &inner, "failed to reset an episode", err);
        } else {
            rc = set_obs(E, e, out.observation, err);
        }
    }
    grpo_reward_batch_free(&rb);
    return rc;
}

/* The sampler asks for row n's first tokens: its reset observation. */
static int turns_begin(void *user, int32_t row, const int32_t **obs, int32_t *n_obs,
                       grpo_error *err) {
    grpo_episodes *E = user;
    (void)err;
    *obs = E->ep[row].obs, *n_obs = E->ep[row].n_obs;
    E->ep[row].obs_tokens += *n_obs;
    return GRPO_OK;
}

/* Appends the <tool_call> body [b, e) to calls, or says why it is malformed. */
static void take_call(const char *b, const char *e, int32_t k, cJSON *calls, char **why) {
    char *body = malloc((size_t)(e - b) + 1);
    if (!body) return;
    memcpy(body, b, (size_t)(e - b));
    body[e - b] = '\0';
    cJSON *j = cJSON_Parse(body);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    char msg[300];
    msg[0] = '\0';
    if (!j)
        snprintf(msg, sizeof msg, "tool call %d is not JSON: '%.80s'", (int)k + 1, body);
    else if (!cJSON_IsObject(j) || !cJSON_IsString(name))
        snprintf(msg, sizeof msg, "tool call %d has no string \"name\"; expected "
                 "{\"name\": ..., \"arguments\": {...}}, got '%.80s'", (int)k + 1, body);
    if (msg[0]) {
        if (!*why) *why = dup_str(msg);
        cJSON_Delete(j);
    } else {
        cJSON_AddItemToArray(calls, j);
    }
    free(body);
}

void grpo_parse_tool_calls(const char *text, char **calls, int32_t *n_calls, char **why) {
    static const char open[] = "<tool_call>", close[] = "</tool_call>";
    *calls = NULL, *n_calls = 0, *why = NULL;
    if (!strstr(text, open)) return;
    cJSON *arr = cJSON_CreateArray();
    if (!arr) return;
    int32_t k = 0;
    for (const char *p = strstr(text, open); p; p = strstr(p, open), k++) {
        p += strlen(open);
        const char *e = strstr(p, close);
        if (!e) {
            char msg[200];
            snprintf(msg, sizeof msg, "tool call %d has no %s; expected <tool_call>{json}%s",
                     (int)k + 1, close, close);
            if (!*why) *why = dup_str(msg);
            break;
        }
        take_call(p, e, k, arr, why);
        p = e + strlen(close);
    }
    *n_calls = cJSON_GetArraySize(arr);
    if (*n_calls) *calls = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
}

/* Calls step() for row n's finished turn ids[n_ids] and fills out. */
static int env_step(grpo_episodes *E, grpo_episode *e, const int32_t *ids, int32_t n_ids,
                    grpo_env_step *out, grpo_error *err) {
    char *text = grpo_run_decode(E->run, ids, n_ids), *calls = NULL, *why = NULL;
    int32_t n_calls = 0;
    grpo_parse_tool_calls(text ? text : "", &calls, &n_calls, &why);
    grpo_env_turn turn = {sizeof turn, (uint32_t)e->turns, text ? text : "", ids,
                          (uint32_t)n_ids, calls, why};
    grpo_error inner;
    grpo_error_init(&inner);
    call_begin(E, "step");
    int32_t st = E->desc->step(e->inst, &turn, out, &inner);
    grpo_plugin_call_end();
    e->tool_calls += n_calls + (int32_t)out->tool_calls;
    e->tool_errors += (why != NULL) + (int32_t)out->tool_errors;
    free(text), free(calls), free(why);
    return st == GRPO_OK ? GRPO_OK : env_fail(E, st, &inner, "failed to step an episode", err);
}

/* The sampler's row n drew an EOS: the environment's answer to the turn. */
static int turns_end(void *user, int32_t row, const int32_t *ids, int32_t n_ids, int32_t room,
                     const int32_t **obs, int32_t *n_obs, int *done, grpo_error *err) {
    grpo_episodes *E = user;
    grpo_episode *e = &E->ep[row];
    grpo_env_step out = {sizeof out, NULL, 0, NAN, 0, 0};
    int rc = env_step(E, e, ids, n_ids, &out, err);
    if (rc != GRPO_OK) return rc;
    e->turns++;
    if (!isnan(out.reward)) e->step_reward += out.reward, e->n_step_rewards++;
    e->done = out.done != 0;
    *done = e->done || e->turns >= E->max_turns;
    *obs = NULL, *n_obs = 0;
    if (*done) return GRPO_OK;
    char *text = NULL;
    const char *o = out.observation ? out.observation : "";
    if (templated(E, e) && (rc = render_tool(E, e, ids[n_ids - 1], o, &text, err)) != GRPO_OK) {
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err->message);
        return grpo_error_set(err, rc, "[env] (plugin %s): rendering an observation as a "
                              "{\"role\": \"tool\"} message through the chat template: %s",
                              E->run->cfg.env.plugin, why);
    }
    if (rc == GRPO_OK) rc = set_obs(E, e, text ? text : o, err);
    free(text);
    if (rc != GRPO_OK) return rc;
    *obs = e->obs, *n_obs = e->n_obs;
    if (e->n_obs <= room) e->obs_tokens += e->n_obs;
    return GRPO_OK;
}

int grpo_episodes_finish(grpo_episodes *E, grpo_error *err) {
    int rc = GRPO_OK;
    for (int32_t i = 0; i < E->N; i++) {
        grpo_episode *e = &E->ep[i];
        float final = NAN;
        grpo_error inner;
        grpo_error_init(&inner);
        if (rc == GRPO_OK && e->inst) {
            call_begin(E, "final_reward");
            int32_t st = E->desc->final_reward(e->inst, &final, &inner);
            grpo_plugin_call_end();
            if (st != GRPO_OK) rc = env_fail(E, st, &inner, "failed to give a final reward", err);
        }
        if (e->inst) {
            call_begin(E, "close");
            E->desc->close(e->inst);
            grpo_plugin_call_end();
            e->inst = NULL;
        }
        e->reward = isnan(final) ? (e->n_step_rewards ? (float)e->step_reward : NAN)
                                 : final + (float)e->step_reward;
    }
    return rc;
}

uint32_t grpo_episodes_fields(const grpo_episodes *E, int32_t i, grpo_field *fields) {
    grpo_episode *e = &E->ep[i];
    uint32_t n = e->ex->n_fields;
    if (n) memcpy(fields, e->ex->fields, n * sizeof *fields);
    static const char *const names[4] = {"env_reward", "env_turns", "env_tool_calls",
                                         "env_tool_errors"};
    char buf[4][48];
    if (isnan(e->reward))
        snprintf(buf[0], sizeof buf[0], "null");
    else
        snprintf(buf[0], sizeof buf[0], "%.9g", (double)e->reward);
    snprintf(buf[1], sizeof buf[1], "%d", (int)e->turns);
    snprintf(buf[2], sizeof buf[2], "%d", (int)e->tool_calls);
    snprintf(buf[3], sizeof buf[3], "%d", (int)e->tool_errors);
    for (int k = 0; k < 4; k++) {
        free(e->fields_json[k]);
        e->fields_json[k] = dup_str(buf[k]);
        fields[n++] = (grpo_field){sizeof(grpo_field), names[k],
                                   e->fields_json[k] ? e->fields_json[k] : "null"};
    }
    return n;
}

const grpo_sampler_turns *grpo_episodes_turns(grpo_episodes *E) {
    E->turns = (grpo_sampler_turns){E, turns_begin, turns_end};
    return &E->turns;
}
