/*
 * exec.c — builtin.exec: rewards computed by an external program in any language, speaking JSON
 * lines on stdin/stdout (the protocol is documented in sdk/EXEC_PROTOCOL.md).
 *
 * The program is resolved (exec_path.h) and started by create() (exec_proc.h), so a command that
 * cannot run is an error before any training work; it runs without a shell (argv from the run
 * file's `command` lines), in its own process group, with none of grpo's file descriptors but
 * stdin, stdout (one socket) and stderr, and is kept alive across batches.
 *
 * Per batch the host sends one line {"id": N, "samples": [...]} and expects one line
 * {"id": N, "rewards": [...]}; N grows by one per batch and is never reused. The whole exchange,
 * writing included, has one deadline of `timeout` seconds (the socket is non-blocking and polled
 * both ways), so a program that never reads cannot stall the run. A reply to another id is stale
 * (an extra line of an earlier batch): it is dropped, with one warning per batch, and the wait
 * goes on. A crash, the deadline or a malformed reply is logged, the program's whole process
 * group is killed (restarted on the next batch) and the batch gets NaN ("no opinion") instead of
 * failing the run.
 * A reward that is not a finite float (1e999, 1e39) is NaN with a warning. Scoring in a forked
 * child (isolate = true) is refused: what score() changes in the state would be lost with it.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "builtin.h"
#include "exec_json.h"
#include "exec_proc.h"

/* Stores the n rewards of reply r in out; a value that is no finite float is NaN and counted in
 * the one warning of this batch. 0, or -1 when r is not n numbers or nulls. */
static int store_rewards(exec_proc *s, const cJSON *r, uint32_t n, float *out) {
    char warn[256];
    if (exec_rewards_take(r, n, out, warn, sizeof warn) != 0) return -1;
    if (warn[0]) exec_proc_warn(s, warn);
    return 0;
}

typedef struct reply_ctx {
    exec_proc *s;
    uint64_t id;
    uint32_t n;
    float *out;
} reply_ctx;

/* The reply to the batch's request: its n rewards into out. */
static int take_rewards(void *ctx, const cJSON *reply, char *why, size_t why_size) {
    reply_ctx *c = ctx;
    if (reply && store_rewards(c->s, cJSON_GetObjectItemCaseSensitive(reply, "rewards"), c->n,
                               c->out) == 0)
        return 0;
    snprintf(why, why_size, "malformed reply: expected {\"id\": %llu, \"rewards\": [%u numbers "
             "or nulls]} (sdk/EXEC_PROTOCOL.md)", (unsigned long long)c->id, c->n);
    return -1;
}

static int32_t exec_score(void *state, const grpo_sample *samples, uint32_t n, float *out,
                          grpo_error *err) {
    exec_proc *s = state;
    /* In a forked child (the host's isolate = true) the next id, the read buffer and a restarted
     * program would be lost with the child: ids would repeat and stale lines pass as replies. */
    if (getpid() != s->owner)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "[%s] builtin.exec cannot score in a forked child process (isolate = "
                              "true); remove isolate: its program already runs in its own process",
                              s->section);
    char why[256];
    size_t len = 0;
    uint64_t id = s->next_id++;
    s->dropped = 0;
    char *req = exec_request_text(id, samples, n, &len);
    int rc = req ? 0 : (snprintf(why, sizeof why, "out of memory"), -1);
    reply_ctx c = {s, id, n, out};
    if (rc == 0) rc = exec_proc_exchange(s, id, req, len, take_rewards, &c, why, sizeof why);
    free(req);
    if (s->dropped) { /* one warning per batch, however many lines */
        char what[256];
        snprintf(what, sizeof what, "dropped %u reply line%s answering another request while waiting "
                 "for request %llu (first: request %.17g); replies must echo the request's id",
                 s->dropped, s->dropped > 1 ? "s" : "", (unsigned long long)id, s->first_dropped);
        exec_proc_warn(s, what);
    }
    if (rc == 0) return GRPO_OK;
    char what[320];
    snprintf(what, sizeof what, "%s; this batch scores NaN (the program is restarted)", why);
    exec_proc_warn(s, what);
    exec_proc_kill(s);
    for (uint32_t k = 0; k < n; k++) out[k] = NAN;
    return GRPO_OK;
}

static void exec_destroy(void *state) {
    if (!state) return;
    exec_proc_free(state);
    free(state);
}

static int32_t exec_create(const grpo_host *host, const grpo_config *cfg, void **state,
                           grpo_error *err) {
    exec_proc *s = malloc(sizeof *s);
    if (!s) return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", cfg->section);
    int32_t rc = exec_proc_create(s, host, cfg, "builtin.exec", err);
    if (rc != GRPO_OK) return free(s), rc;
    *state = s;
    return GRPO_OK;
}

const grpo_reward_desc builtin_exec_reward = {
    .struct_size = sizeof(grpo_reward_desc),
    .id = "builtin.exec",
    .description = "Rewards from an external program speaking JSON lines (sdk/EXEC_PROTOCOL.md)",
    .flags = 0, /* one child process per state */
    .create = exec_create,
    .score = exec_score,
    .destroy = exec_destroy,
};
