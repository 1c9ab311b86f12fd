/* builtin.h — the rewards and the environment of the built-in pack (the table of builtin.c).
 * Config values are read with the SDK's typed readers (grpo/config.h); the log helper the
 * rewards share is builtin_log.h. */
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
extern const grpo_reward_desc builtin_http_reward;     /* http.c */
extern const grpo_reward_desc builtin_code_reward;     /* code.c */
extern const struct grpo_env_desc builtin_exec_env;   /* exec_env.c (grpo/env.h) */

#endif
