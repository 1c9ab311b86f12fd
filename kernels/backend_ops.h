/*
 * backend_ops.h — what a backend generates from the op list (grpo/ops_list.h): one prototype
 * per op, PREFIX_NAME (cpu_matmul_forward, cuda_matmul_forward), and the op members of its table
 * as designated initialisers in grpo_ops order, so no op is spelled by hand in a backend's
 * header and the table cannot be filled out of order.
 *
 * A backend that leaves an optional op out (the list's `optional` column) says so in its table
 * file, before the table, with `#define PREFIX_NAME NULL` (cpu: `#define cpu_sample_rows NULL`);
 * the registry (backend_registry.c) refuses a table that lacks an op that is not optional.
 * Plain C and C++ (the cuda sources include it; C++ takes designated initialisers in order).
 */
#ifndef GRPO_BACKEND_OPS_H
#define GRPO_BACKEND_OPS_H

#include "grpo/ops.h"

#define GRPO_BACKEND_OP_PROTO(P, minor, optional, ret, name, params) ret P##_##name params;
#define GRPO_BACKEND_OP_INIT(P, minor, optional, ret, name, params) .name = P##_##name,

/* ret PREFIX_NAME(params); for every op of the list */
#define GRPO_BACKEND_DECLARE_OPS(PREFIX) GRPO_OPS_LIST(GRPO_BACKEND_OP_PROTO, PREFIX)

/* .NAME = PREFIX_NAME, for every op of the list, inside a grpo_ops initialiser after .ctx */
#define GRPO_BACKEND_OP_INITIALIZERS(PREFIX) GRPO_OPS_LIST(GRPO_BACKEND_OP_INIT, PREFIX)

#endif /* GRPO_BACKEND_OPS_H */
