/* builtin.c — the built-in reward pack's library: the handshake and the table of its rewards and
 * environments. */
#include "builtin.h"
#include "grpo/env.h"

GRPO_PLUGIN_MAGIC()

static const grpo_reward_desc *builtin_get_reward(uint32_t index) {
    static const grpo_reward_desc *const rewards[] = {&builtin_format_reward, &builtin_tags_reward,
                                                      &builtin_accuracy_reward, &builtin_length_reward,
                                                      &builtin_overlong_reward, &builtin_repetition_reward,
                                                      &builtin_exec_reward, &builtin_env_reward,
                                                      &builtin_http_reward, &builtin_code_reward};
    return index < sizeof rewards / sizeof rewards[0] ? rewards[index] : NULL;
}

static const grpo_env_desc *builtin_get_env(uint32_t index) {
    return index == 0 ? &builtin_exec_env : NULL;
}

GRPO_EXPORT int32_t grpo_plugin_init(const grpo_host *host, grpo_library *lib, grpo_error *err) {
    (void)host;
    if (!GRPO_HAS_FIELD(lib, grpo_library, get_reward))
        return grpo_error_set(err, GRPO_ERR_ABI, "builtin: host library struct too small (%u bytes)",
                              lib->struct_size);
    lib->get_reward = builtin_get_reward;
    if (GRPO_HAS_FIELD(lib, grpo_library, get_env)) lib->get_env = builtin_get_env; /* 1.5 */
    return GRPO_OK;
}
