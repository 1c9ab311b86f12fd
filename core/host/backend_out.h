/*
 * backend_out.h — a tensor in backend memory as a tensor to write (io/safetensors.h,
 * grpo_st_out), so that a model or its optimizer state is saved without a host copy of the
 * whole: on a backend whose buffers are host memory (cpu, grpo_backend_host_memory) the writer
 * reads the tensor where it lies; elsewhere (cuda) it is downloaded, when its turn comes, into
 * the writer's one-tensor buffer. The file's bytes are the same either way.
 */
#ifndef GRPO_HOST_BACKEND_OUT_H
#define GRPO_HOST_BACKEND_OUT_H

#include <stdint.h>

#include "grpo/ops.h"
#include "io/safetensors.h"

/* numel fp32 values at p, in the memory of ops. */
typedef struct grpo_backend_src {
    const grpo_ops *ops;
    const float *p;
    uint64_t numel;
} grpo_backend_src;

/* Sets o->data (host memory) or o->read and o->ctx = src (src filled here; it must outlive the
 * write) for the numel floats at p; o's name and shape are the caller's. */
void grpo_backend_out(grpo_st_out *o, grpo_backend_src *src, const grpo_ops *ops, const float *p,
                      uint64_t numel);

#endif
