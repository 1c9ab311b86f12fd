/*
 * lm_host.h — what a decoder pack needs from its host, checked in create() before anything else
 * (compiled into each pack that uses it; not part of the SDK).
 */
#ifndef LM_HOST_H
#define LM_HOST_H

#include "grpo/ops.h"
#include "grpo/plugin.h"

/* GRPO_ERR_UNSUPPORTED when host has no op table (host->ops), GRPO_ERR_ABI when its op table is
 * older than this pack's grpo_ops; the errors name id ("dense.causal_lm") and, after the size
 * this pack expects, why (e.g. ": it needs gather_rows/scatter_add_rows", or ""). */
int32_t lm_host_check(const grpo_host *host, const char *id, const char *why, grpo_error *err);

#endif
