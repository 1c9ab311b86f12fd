/*
 * tfevents.h — TensorBoard event files, written the way TensorBoard's own writer writes them, so
 * `tensorboard --logdir LOG_DIR` shows a run while it trains ([log] tensorboard = true).
 *
 * A file is a sequence of TFRecords: uint64 length (little-endian), uint32 masked CRC32C of those
 * 8 bytes, the record, uint32 masked CRC32C of the record (mask: rotate right 15, add 0xa282ead8).
 * Each record is an Event protobuf (tensorflow/core/util/event.proto): wall_time = 1 (double),
 * step = 2 (int64), file_version = 3 ("brain.Event:2", the first event), summary = 5, session_log =
 * 7. A Summary holds Values: tag = 1, simple_value = 2 (float: scalars), tensor = 8 and metadata =
 * 9 (text: a DT_STRING tensor of shape [] and plugin "text"). The protobuf is encoded here by hand
 * (varints, fixed 32/64-bit, length-delimited), fields in number order, as protobuf serializes.
 * tools/make_tfevents_fixture.py writes the same events with TensorBoard's writer (the test
 * compares bytes) and reads a run's files back with TensorBoard's reader.
 */
#ifndef GRPO_TFEVENTS_H
#define GRPO_TFEVENTS_H

#include <stdint.h>
#include <stdio.h>

#include "grpo/plugin.h" /* grpo_error */

typedef struct grpo_tfevents {
    FILE *f;
    char path[4200];
} grpo_tfevents;

/* Creates dir/events.out.tfevents.SECONDS.HOST.grpo and writes the file-version event. With
 * resume_step >= 0, also a SessionLog START at that step: TensorBoard then drops the events of
 * earlier files from that step on (what a resumed run rewrites). */
int grpo_tfevents_open(grpo_tfevents *w, const char *dir, double wall_time, long resume_step,
                       grpo_error *err);
/* One event at step holding the scalars tags[n] = values[n]. */
int grpo_tfevents_scalars(grpo_tfevents *w, double wall_time, long step, const char *const *tags,
                          const double *values, int n, grpo_error *err);
/* One event at step holding text under tag (TensorBoard's text plugin renders it as markdown). */
int grpo_tfevents_text(grpo_tfevents *w, double wall_time, long step, const char *tag,
                       const char *text, grpo_error *err);
/* Closes the file (no-op when not open); a failed close is an error naming it. */
int grpo_tfevents_close(grpo_tfevents *w, grpo_error *err);

#endif
