/*
 * kernels.h — compute backends. The op table itself (grpo_ops) is part of the SDK
 * (sdk/include/grpo/ops.h) because model plugins call it; this header is the host's side:
 * how a backend is opened and closed.
 */
#ifndef GRPO_KERNELS_H
#define GRPO_KERNELS_H

#include "grpo/ops.h"
#include "grpo/plugin.h"

#endif
