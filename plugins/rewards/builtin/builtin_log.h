/* builtin_log.h — the log helper the built-in rewards share (builtin_log.c). */
#ifndef GRPO_BUILTIN_LOG_H
#define GRPO_BUILTIN_LOG_H

#include "grpo/plugin.h"

/* One line through the host's log service (stderr when the host has none), from reward `who`. */
void builtin_log(const grpo_host *host, int32_t level, const char *who, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#endif
