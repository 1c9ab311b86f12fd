/* builtin.h — the rewards of the built-in pack and the log helper they share. Config values are
 * read with the SDK's typed readers (grpo/config.h). */
#ifndef GRPO_BUILTIN_REWARDS_H
#define GRPO_BUILTIN_REWARDS_H

#include <stdlib.h>

#include "grpo/reward.h"

extern const grpo_reward_desc builtin_format_reward; /* format.c */
extern const grpo_reward_desc builtin_tags_reward;   /* tags.c */
extern const grpo_reward_desc builtin_accuracy_reward; /* accuracy.c */
extern const grpo_reward_desc builtin_length_reward;   /* length.c */
extern const grpo_reward_desc builtin_overlong_reward; /* length.c */
extern const grpo_reward_desc builtin_repetition_reward; /* repetition.c */
extern const grpo_reward_desc builtin_exec_reward;     /* exec.c */
extern const grpo_reward_desc builtin_env_reward;      /* env_reward.c */
extern const struct grpo_env_desc builtin_exec_env;   /* exec_env.c (grpo/env.h) */

/* One line through the host's log service (stderr when the host has none), from reward `who`. */
void builtin_log(const grpo_host *host, int32_t level, const char *who, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#endif
