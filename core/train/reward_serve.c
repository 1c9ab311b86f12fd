/* reward_serve.c — the worker process of an isolated reward: `grpo __reward-worker` (see
 * reward_serve.h and reward_worker.h). */
#include "train/reward_serve.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/host.h"
#include "host/process.h"
#include "train/reward_wire.h"
#include "train/rewards.h"

typedef struct worker {
    int fd;
    grpo_process proc;
    grpo_reward_spec spec;
    grpo_run_config cfg; /* one reward: spec, in-process, no deadline (the trainer keeps it) */
    grpo_reward_set set;
    int created;
} worker;

static int reply_status(int fd, int32_t st, const char *msg) {
    grpo_wire w = {0};
    grpo_wire_u32(&w, (uint32_t)st);
    grpo_wire_str(&w, msg);
    int rc = grpo_wire_send(fd, &w, 0);
    grpo_wire_free(&w);
    return rc;
}

/* The process context from the setup's pack dirs, backend and threads. */
static int open_process(worker *k, grpo_wire_in *in, grpo_error *err) {
    uint32_t n = grpo_wire_get_u32(in);
    k->proc.host = *grpo_default_host();
    if (in->bad || n > in->len || !(k->proc.plugin_dirs = calloc((size_t)n + 1, sizeof(char *))))
        return grpo_error_set(err, GRPO_ERR_INVALID, "malformed worker setup");
    for (uint32_t i = 0; i < n; i++) {
        const char *d = grpo_wire_get_str(in);
        if (!d || !(k->proc.plugin_dirs[i] = strdup(d)))
            return grpo_error_set(err, GRPO_ERR_INVALID, "malformed worker setup");
    }
    const char *backend = grpo_wire_get_str(in);
    int32_t threads = (int32_t)grpo_wire_get_u32(in);
    if (in->bad || !backend) return grpo_error_set(err, GRPO_ERR_INVALID, "malformed setup");
    int rc = grpo_registry_scan(&k->proc.reg, k->proc.plugin_dirs, err);
    if (rc == GRPO_OK && backend[0])
        rc = grpo_process_backend(&k->proc, backend, threads, GRPO_DTYPE_F32, err);
    k->cfg.train_threads = threads;
    return rc;
}

/* Reads the setup and creates the reward; answers with create's status. */
static int worker_setup(worker *k, unsigned char *buf, size_t len) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_wire_in in = {buf, len, 0, 0};
    int rc = open_process(k, &in, &err);
    if (rc == GRPO_OK && grpo_wire_get_spec(&in, &k->spec) != 0)
        rc = grpo_error_set(&err, GRPO_ERR_INVALID, "malformed worker setup (reward section)");
    if (rc == GRPO_OK && !(k->spec.entry = grpo_registry_find(&k->proc.reg, k->spec.plugin)))
        rc = grpo_error_set(&err, GRPO_ERR_INVALID, "[%s] (plugin %s): the isolated worker "
                            "found no such plugin on its packs", k->spec.section, k->spec.plugin);
    k->cfg.rewards = &k->spec, k->cfg.n_rewards = 1;
    if (rc == GRPO_OK)
        rc = grpo_reward_set_create(&k->set, &k->cfg, &k->proc.reg, &k->proc.host, &err);
    k->created = rc == GRPO_OK;
    return reply_status(k->fd, rc, rc == GRPO_OK ? "" : err.message) == 0 && rc == GRPO_OK ? 0
                                                                                         : -1;
}

/* Scores one batch and answers: status, n scores, message. */
static int worker_batch(worker *k, unsigned char *buf, size_t len) {
    grpo_wire_in in = {buf, len, 0, 0};
    grpo_sample *samples = NULL;
    uint32_t n = 0;
    if (grpo_wire_get_samples(&in, &samples, &n) != 0) return -1;
    float *row = malloc((n ? n : 1) * sizeof *row);
    grpo_error err;
    grpo_error_init(&err);
    int32_t st = row ? grpo_reward_set_score(&k->set, samples, n, row, &err)
                     : grpo_error_set(&err, GRPO_ERR_NOMEM, "out of memory in the worker");
    for (uint32_t i = 0; st != GRPO_OK && row && i < n; i++) row[i] = NAN;
    grpo_wire w = {0};
    grpo_wire_u32(&w, (uint32_t)st);
    if (row) grpo_wire_put(&w, row, (size_t)n * sizeof *row);
    grpo_wire_str(&w, st == GRPO_OK ? "" : err.message);
    int rc = row ? grpo_wire_send(k->fd, &w, 0) : -1;
    grpo_wire_free(&w);
    free(row);
    grpo_wire_samples_free(samples, n);
    return rc;
}

int grpo_reward_worker_main(int fd) {
    worker k = {.fd = fd};
    grpo_plugin_call_in_child(); /* a plugin's exit(N) ends the worker with N; the trainer says */
    unsigned char *setup = NULL, *buf = NULL; /* the reward section points into setup */
    size_t len = 0;
    int rc = grpo_wire_recv(fd, &setup, &len, 0) == 0 ? worker_setup(&k, setup, len) : -1;
    while (rc == 0 && grpo_wire_recv(fd, &buf, &len, 0) == 0) {
        rc = worker_batch(&k, buf, len);
        free(buf);
    }
    if (k.created) grpo_reward_set_free(&k.set);
    grpo_wire_spec_free(&k.spec);
    grpo_process_close(&k.proc);
    free(setup);
    close(fd);
    return rc == 0 ? 0 : 1;
}
