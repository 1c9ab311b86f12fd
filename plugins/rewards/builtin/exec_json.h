/*
 * exec_json.h — the JSON of the exec reward protocol (sdk/EXEC_PROTOCOL.md) that builtin.exec
 * (over a child's stdin/stdout) and builtin.http (over HTTP POST) both speak: a sample as the
 * protocol writes it, one batch's request {"id": N, "samples": [...]}, and the rewards array of
 * a reply.
 */
#ifndef GRPO_BUILTIN_EXEC_JSON_H
#define GRPO_BUILTIN_EXEC_JSON_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "builtin.h"

/* A sample as the protocol writes it: prompt, completion, completion_ids, group, member, fields. */
cJSON *exec_sample_json(const grpo_sample *x);

/* {"id": id, "samples": [n samples]} plus "\n" as one malloc'd string of *len bytes (the newline
 * counted); NULL when out of memory. */
char *exec_request_text(uint64_t id, const grpo_sample *samples, uint32_t n, size_t *len);

/* Stores the n rewards of a reply's "rewards" array r in out[n]: a number, or null (NaN). A
 * value that is no finite float (1e999, 1e39) is NaN and described in warn ("" when every value
 * was one). 0, or -1 when r is not an array of n numbers or nulls (out then partly written). */
int exec_rewards_take(const cJSON *r, uint32_t n, float *out, char *warn, size_t warn_size);

#endif
