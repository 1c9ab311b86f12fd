/*
 * calc.c — calc.calculator, the example environment (grpo/env.h).
 *
 * An episode: the policy may call the calculator, once per turn, with a line "calc: 37*25" (the
 * prefix key) or a <tool_call>{"name": "calc", "arguments": {"expression": "37*25"}}</tool_call>
 * the host parsed; the observation is "\nresult: 925\n" (or "\nerror: ...\n" for an expression it
 * cannot evaluate, counted as a tool error). A turn without a call is the final answer and ends
 * the episode: its last integer is compared with the row's answer field.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpo/grpo.h"

typedef struct calc_state {
    char prefix[64], answer_field[64];
    double correct;
} calc_state;

typedef struct calc_episode {
    const calc_state *s;
    long long answer;  /* the row's answer */
    int has_answer;
    int answered;      /* the final turn's last integer equals answer */
    char obs[128];     /* the current observation */
} calc_episode;

/* ---- a small expression evaluator: integers, + - * /, parentheses ------------------------- */

typedef struct parser {
    const char *p;
    int bad;
} parser;

static long long expr(parser *ps);

static void skip_space(parser *ps) {
    while (*ps->p == ' ') ps->p++;
}

static long long atom(parser *ps) {
    skip_space(ps);
    if (*ps->p == '(') {
        ps->p++;
        long long v = expr(ps);
        skip_space(ps);
        if (*ps->p != ')') ps->bad = 1;
        else ps->p++;
        return v;
    }
    if (*ps->p == '-') {
        ps->p++;
        return -atom(ps);
    }
    if (!isdigit((unsigned char)*ps->p)) {
        ps->bad = 1;
        return 0;
    }
    long long v = 0;
    while (isdigit((unsigned char)*ps->p) && v < 1000000000000LL) v = v * 10 + (*ps->p++ - '0');
    return v;
}

static long long term(parser *ps) {
    long long v = atom(ps);
    for (skip_space(ps); !ps->bad && (*ps->p == '*' || *ps->p == '/'); skip_space(ps)) {
        char op = *ps->p++;
        long long r = atom(ps);
        if (op == '/' && r == 0) ps->bad = 1;
        else v = op == '*' ? v * r : v / r;
    }
    return v;
}

static long long expr(parser *ps) {
    long long v = term(ps);
    for (skip_space(ps); !ps->bad && (*ps->p == '+' || *ps->p == '-'); skip_space(ps)) {
        char op = *ps->p++;
        long long r = term(ps);
        v = op == '+' ? v + r : v - r;
    }
    return v;
}

/* Evaluates text[0..n) into *v; 0 when it is not a whole expression. */
static int evaluate(const char *text, size_t n, long long *v) {
    char buf[128];
    if (n == 0 || n >= sizeof buf) return 0;
    memcpy(buf, text, n);
    buf[n] = '\0';
    parser ps = {buf, 0};
    *v = expr(&ps);
    skip_space(&ps);
    return !ps.bad && *ps.p == '\0';
}

/* ---- the environment ----------------------------------------------------------------------- */

static int32_t calc_create(const grpo_host *host, const grpo_config *cfg, void **state,
                           grpo_error *err) {
    (void)host;
    calc_state *s = calloc(1, sizeof *s);
    if (!s) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    const char *prefix = grpo_config_get(cfg, "prefix"), *field = grpo_config_get(cfg, "answer_field");
    int32_t rc = grpo_config_double(cfg, "correct", 1.0, -1e6, 1e6, &s->correct, err);
    if (rc == GRPO_OK && (!prefix || !*prefix || strlen(prefix) >= sizeof s->prefix))
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "prefix: expected 1 to %zu characters",
                            sizeof s->prefix - 1);
    if (rc == GRPO_OK && (!field || !*field || strlen(field) >= sizeof s->answer_field))
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "answer_field: expected 1 to %zu characters",
                            sizeof s->answer_field - 1);
    if (rc != GRPO_OK) {
        free(s);
        return rc;
    }
    snprintf(s->prefix, sizeof s->prefix, "%s", prefix);
    snprintf(s->answer_field, sizeof s->answer_field, "%s", field);
    *state = s;
    return GRPO_OK;
}

static int32_t calc_reset(void *state, const grpo_sample *sample, void **episode,
                          grpo_env_step *out, grpo_error *err) {
    const calc_state *s = state;
    calc_episode *e = calloc(1, sizeof *e);
    if (!e) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    e->s = s;
    const char *a = grpo_sample_field(sample, s->answer_field);
    if (a) {
        const char *p = a + (*a == '"');
        char *end = NULL;
        e->answer = strtoll(p, &end, 10);
        e->has_answer = end != p;
    }
    out->observation = NULL; /* the task is in the prompt */
    *episode = e;
    return GRPO_OK;
}

/* The expression of the turn's call, into [*b, *b + *n); 0 when the turn makes none. *own 1:
 * the call is in the prefix syntax (the host counted the <tool_call>s it parsed itself). */
static int find_call(const calc_episode *e, const grpo_env_turn *t, char *buf, size_t cap,
                     const char **b, size_t *n, int *own) {
    *own = 0;
    if (t->tool_calls) { /* the host parsed <tool_call> JSON: a call named calc */
        cJSON *calls = cJSON_Parse(t->tool_calls), *c;
        int found = 0;
        cJSON_ArrayForEach(c, calls) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "name");
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(c, "arguments");
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(args, "expression");
            if (!found && cJSON_IsString(name) && !strcmp(name->valuestring, "calc")) {
                snprintf(buf, cap, "%s", cJSON_IsString(x) ? x->valuestring : "");
                found = 1;
            }
        }
        cJSON_Delete(calls);
        if (found) return *b = buf, *n = strlen(buf), 1;
    }
    const char *p = strstr(t->text, e->s->prefix);
    if (!p) return 0;
    p += strlen(e->s->prefix);
    *b = p, *n = strcspn(p, "\n"), *own = 1;
    return 1;
}

/* The last integer of text; 0 when it has none. */
static int last_integer(const char *text, long long *v) {
    int found = 0;
    for (const char *p = text; *p;) {
        if (isdigit((unsigned char)*p)) {
            char *end = NULL;
            *v = strtoll(p, &end, 10);
            found = 1;
            p = end;
        } else {
            p++;
        }
    }
    return found;
}

static int32_t calc_step(void *episode, const grpo_env_turn *turn, grpo_env_step *out,
                         grpo_error *err) {
    (void)err;
    calc_episode *e = episode;
    const char *b = NULL;
    size_t n = 0;
    char buf[128];
    long long v = 0;
    int own = 0;
    if (!find_call(e, turn, buf, sizeof buf, &b, &n, &own)) { /* the final answer */
        e->answered = e->has_answer && last_integer(turn->text, &v) && v == e->answer;
        out->done = 1;
        return GRPO_OK;
    }
    out->tool_calls = (uint32_t)own;
    if (evaluate(b, n, &v)) {
        snprintf(e->obs, sizeof e->obs, "\nresult: %lld\n", v);
    } else {
        snprintf(e->obs, sizeof e->obs, "\nerror: cannot evaluate '%.*s'\n", (int)(n < 60 ? n : 60),
                 b);
        out->tool_errors = 1;
    }
    out->observation = e->obs;
    return GRPO_OK;
}

static int32_t calc_final(void *episode, float *reward, grpo_error *err) {
    (void)err;
    const calc_episode *e = episode;
    *reward = e->answered ? (float)e->s->correct : 0.0f;
    return GRPO_OK;
}

static void calc_close(void *episode) {
    free(episode);
}

static const grpo_env_desc calc_env = {
    .struct_size = sizeof(grpo_env_desc),
    .id = "calc.calculator",
    .description = "a calculator tool: 'calc: EXPR' gets the result; a turn without a call answers",
    .flags = 0,
    .create = calc_create,
    .reset = calc_reset,
    .step = calc_step,
    .final_reward = calc_final,
    .close = calc_close,
    .destroy = free,
};

static const grpo_env_desc *calc_get_env(uint32_t i) {
    return i == 0 ? &calc_env : NULL;
}

GRPO_PLUGIN_MAGIC()

GRPO_EXPORT int32_t grpo_plugin_init(const grpo_host *host, grpo_library *lib, grpo_error *err) {
    (void)host;
    if (!GRPO_HAS_FIELD(lib, grpo_library, get_env))
        return grpo_error_set(err, GRPO_ERR_ABI, "calc: the host has no environments (plugin ABI "
                              "1.5 needed; library struct is %u bytes)", lib->struct_size);
    lib->get_env = calc_get_env;
    return GRPO_OK;
}
