/*
 * reward_wire.h — what an isolated reward's worker process and the trainer say to each other
 * (reward_worker.h), as bytes: a growable buffer written with put_*, a reader with get_*, and
 * the two things worth encoding whole: a batch of samples and a reward section; and frames of
 * those bytes over a socket under a deadline.
 *
 * Encoding: u32 and u64 in the host's byte order (both ends are the same binary on the same
 * machine), a string as u32 length + bytes + NUL (length 0xffffffff: NULL). A batch is u32 n, then
 * per sample: prompt, completion, n_messages x (role, content), n_fields x (key, json),
 * n_completion_ids x i32, group, member, truncated (u32), step, total_steps (u64).
 */
#ifndef GRPO_REWARD_WIRE_H
#define GRPO_REWARD_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "config/run_config.h"
#include "grpo/reward.h"

typedef struct grpo_wire {
    unsigned char *buf;
    size_t len, cap;
    int oom; /* 1 once an allocation failed: the buffer is incomplete */
} grpo_wire;

typedef struct grpo_wire_in {
    const unsigned char *p;
    size_t len, off;
    int bad; /* 1 once a read ran past the end: every later read gives 0 / NULL */
} grpo_wire_in;

void grpo_wire_free(grpo_wire *w);
void grpo_wire_put(grpo_wire *w, const void *bytes, size_t n);
void grpo_wire_u32(grpo_wire *w, uint32_t v);
void grpo_wire_u64(grpo_wire *w, uint64_t v);
void grpo_wire_str(grpo_wire *w, const char *s);

/* n bytes (NULL when fewer are left); pointers point into the reader's bytes. */
const void *grpo_wire_get(grpo_wire_in *r, size_t n);
uint32_t grpo_wire_get_u32(grpo_wire_in *r);
uint64_t grpo_wire_get_u64(grpo_wire_in *r);
const char *grpo_wire_get_str(grpo_wire_in *r);

/* The batch samples[n]. */
void grpo_wire_put_samples(grpo_wire *w, const grpo_sample *samples, uint32_t n);
/* A batch read back into *samples (malloc'd, *n of them; strings point into r's bytes, arrays
 * are malloc'd): free with grpo_wire_samples_free. -1 when the bytes are not a batch or on no
 * memory. */
int grpo_wire_get_samples(grpo_wire_in *r, grpo_sample **samples, uint32_t *n);
void grpo_wire_samples_free(grpo_sample *samples, uint32_t n);

/* A reward section as a worker needs it: name, section, plugin, dir and the plugin's keys. */
void grpo_wire_put_spec(grpo_wire *w, const grpo_reward_spec *spec);
/* Read back into *spec (zeroed first; strings point into r's bytes, the key arrays are malloc'd:
 * free with grpo_wire_spec_free). entry, isolate and timeout stay 0. -1 when malformed. */
int grpo_wire_get_spec(grpo_wire_in *r, grpo_reward_spec *spec);
void grpo_wire_spec_free(grpo_reward_spec *spec);

/* Frames over a stream socket: a u32 length, then the bytes. deadline is a grpo_now() time (metrics.h)
 * (<= 0: none). Sending never raises SIGPIPE. 0; -1 on end of file, a closed or broken socket
 * or no memory; -2 when the deadline passed. A received frame is malloc'd into *buf (*len). */
int grpo_wire_send(int fd, const grpo_wire *w, double deadline);
int grpo_wire_recv(int fd, unsigned char **buf, size_t *len, double deadline);

#endif
