/* builtin_log.c — one log line of a built-in reward, through the host's log service. */
#include <stdarg.h>
#include <stdio.h>

#include "builtin_log.h"

void builtin_log(const grpo_host *host, int32_t level, const char *who, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (host && GRPO_HAS_FIELD(host, grpo_host, log) && host->log) host->log(level, who, "%s", msg);
    else fprintf(stderr, "%s: %s\n", who, msg);
}
