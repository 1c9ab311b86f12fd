/*
 * lm_host.c — the host check of the decoder packs (see lm_host.h).
 */
#include "lm_host.h"

int32_t lm_host_check(const grpo_host *host, const char *id, const char *why, grpo_error *err) {
    if (!host || !GRPO_HAS_FIELD(host, grpo_host, ops) || !host->ops)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "%s: the host provides no compute backend (host->ops)", id);
    if (host->ops->struct_size < sizeof(grpo_ops))
        return grpo_error_set(err, GRPO_ERR_ABI,
                              "%s: the host's op table is older (%u bytes) than this plugin "
                              "expects (%zu%s)", id, host->ops->struct_size, sizeof(grpo_ops),
                              why);
    return GRPO_OK;
}
