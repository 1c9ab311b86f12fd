/* grpo/grpo.h — everything a plugin may include, in one header. */
#ifndef GRPO_GRPO_H
#define GRPO_GRPO_H
#include "grpo/plugin.h"
#include "grpo/config.h" /* (plugin.h includes it too) */
#include "grpo/reward.h"
#include "grpo/ops.h"
#include "grpo/model.h"
#include "grpo/env.h"
#endif
