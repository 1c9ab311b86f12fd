/* fuzz_exec_reply.c — the reply bytes an external program sends builtin.exec (rewards) and
 * builtin.exec_env (environments), sdk/EXEC_PROTOCOL.md: split into lines by the pack's own
 * reader (exec_proc.c take_lines: ids, stale lines, the line limit) and handed to each reply
 * handler, exec.c take_rewards and exec_env.c take_reply. Those are static functions of the
 * builtin pack, so this file compiles the pack's sources in (one translation unit). The first
 * input byte picks the reward count and the exec_env request type. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#include "../../plugins/rewards/builtin/exec_proc.c"
#include "../../plugins/rewards/builtin/exec.c"
#include "../../plugins/rewards/builtin/exec_env.c"

/* The pack's warnings (a non-finite reward, ...) go nowhere: printed, they fill the log. */
static void quiet_log(int32_t level, const char *who, const char *fmt, ...) {
    (void)level, (void)who, (void)fmt;
}

/* A program that is not running, its read buffer holding data[0..size). */
static void fake_proc(exec_proc *s, const char *who, const uint8_t *data, size_t size) {
    static char *argv[] = {"fuzz-program", NULL};
    static grpo_host host;
    host.struct_size = sizeof host, host.log = quiet_log;
    memset(s, 0, sizeof *s);
    s->host = &host, s->who = who, s->argv = argv, s->fd = -1, s->next_id = 7;
    snprintf(s->section, sizeof s->section, "fuzz");
    s->buf = malloc(size ? size : 1);
    if (!s->buf) abort();
    memcpy(s->buf, data, size);
    s->len = s->cap = size;
}

/* Every line of the buffer through take_lines, as exec_proc_exchange calls it for request id. */
static void take_all(exec_proc *s, uint64_t id, exec_reply_fn fn, void *ctx, xreply *r) {
    char why[256];
    int rc;
    do {
        size_t before = s->len;
        rc = take_lines(s, id, fn, ctx, why, sizeof why);
        if (r) free(r->obs), r->obs = NULL;
        if (s->len == before) break; /* no complete line was taken */
    } while (rc != 0 && s->len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint32_t n = data[0] % 9; /* rewards the exec request asked for */
    static const char *const types[] = {"reset", "step", "final"};
    exec_proc s;
    fake_proc(&s, "builtin.exec", data + 1, size - 1);
    float out[8];
    reply_ctx c = {&s, 7, n, out};
    take_all(&s, 7, take_rewards, &c, NULL);
    free(s.buf);

    fake_proc(&s, "builtin.exec_env", data + 1, size - 1);
    xreply r;
    memset(&r, 0, sizeof r);
    r.type = types[data[0] % 3], r.id = 7, r.episode = 3, r.reward = NAN;
    take_all(&s, 7, take_reply, &r, &r);
    free(s.buf);
    return 0;
}
