/*
 * nomem.h — the one message for an allocation that failed: what the buffer is for and its size,
 * so an out-of-memory error under a memory limit (ulimit -v, a cgroup) says which buffer of which
 * shape did not fit, never a bare "out of memory".
 */
#ifndef GRPO_NOMEM_H
#define GRPO_NOMEM_H

#include <stdint.h>

#include "grpo/plugin.h"

/* Sets err to GRPO_ERR_NOMEM "out of memory for WHAT (N bytes = M MiB)"; returns the status. */
static inline int32_t grpo_nomem(grpo_error *err, const char *what, uint64_t bytes) {
    return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory for %s (%llu bytes = %.1f MiB)", what,
                          (unsigned long long)bytes, (double)bytes / 1048576.0);
}

#endif
