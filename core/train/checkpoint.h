/*
 * checkpoint.h — atomic checkpoint directories.
 *
 * A checkpoint is a directory ROOT/checkpoint-STEP (STEP zero-padded to 8 digits) holding whatever
 * the trainer writes into it (the model as a Hugging Face directory, optimizer moments, state).
 * It is built under ROOT/.checkpoint-STEP.tmp, every file fsynced, then renamed into place and
 * the root fsynced: a reader sees a whole checkpoint or none. A failed write (full disk, ...)
 * removes the temporary directory and leaves every earlier checkpoint as it was. After a commit
 * only the newest `keep` checkpoints up to its step remain (keep <= 0 keeps all). Removal never
 * follows a symbolic link, and a checkpoint entry that is one is refused.
 *
 * ROOT/checkpoint-best (checkpoint.best_metric) is a checkpoint like the others, built under
 * ROOT/.checkpoint-best.tmp. It is never listed, pruned or resumed from (its name has no step).
 * rename(2) cannot replace a non-empty directory, so a new best takes the old one's place by a
 * swap that never leaves a moment with no checkpoint-best on disk once one exists: the two are
 * exchanged atomically (renameat2 RENAME_EXCHANGE), then the old one, now under the temporary
 * name, is removed. On a filesystem without the exchange (EINVAL, ENOSYS) the swap is two renames,
 * the old one to ROOT/.checkpoint-best.old and the new one into place; a crash between them leaves
 * the old best under .checkpoint-best.old, and grpo_ckpt_prepare (every start, every save) puts it
 * back, or removes it when the new one made it into place.
 */
#ifndef GRPO_CHECKPOINT_H
#define GRPO_CHECKPOINT_H

#include <stddef.h>

#include "grpo/plugin.h"

typedef struct grpo_ckpt {
    char root[4096];
    char tmp[4096];   /* ROOT/.checkpoint-STEP.tmp while open */
    char final[4096]; /* ROOT/checkpoint-STEP */
    long step;
    char run_id[33]; /* the saving run's mark (train_state.h): prune removes only its own */
    int best;        /* ROOT/checkpoint-best: committed by a swap, nothing pruned */
} grpo_ckpt;

/* Checks root before any work is done: not empty, created with its parents when missing,
 * writable, and no checkpoint entry in it a symbolic link (grpo never follows one). */
int grpo_ckpt_prepare(const char *root, grpo_error *err);

/* Creates ROOT (if missing; see grpo_ckpt_prepare) and a fresh temporary directory for step. */
int grpo_ckpt_begin(grpo_ckpt *c, const char *root, long step, grpo_error *err);
/* The same for ROOT/checkpoint-best, the checkpoint of evaluated step `step`. */
int grpo_ckpt_begin_best(grpo_ckpt *c, const char *root, long step, grpo_error *err);
/* Path of file name inside the open checkpoint, written into out (size bytes). */
int grpo_ckpt_path(const grpo_ckpt *c, const char *name, char *out, size_t size);
/* Writes bytes to name inside the open checkpoint and fsyncs it; errors name the file. */
int grpo_ckpt_write(grpo_ckpt *c, const char *name, const void *data, size_t len, grpo_error *err);
/* fsyncs a file some other writer made inside the checkpoint (e.g. the safetensors writer). */
int grpo_ckpt_sync_file(grpo_ckpt *c, const char *name, grpo_error *err);
/* Makes the checkpoint visible (rename + fsync) and prunes to the newest keep. An existing
 * checkpoint of the same step is replaced (checkpoint-best: swapped, see above; keep unused). On
 * failure the temporary directory is removed. */
int grpo_ckpt_commit(grpo_ckpt *c, int keep, grpo_error *err);
/* Removes the temporary directory (after a failed write). */
void grpo_ckpt_abort(grpo_ckpt *c);

/* Steps of the checkpoints under root, newest first, into *steps (malloc'd; the caller frees).
 * Returns the count (0 when root does not exist), or a negative status: an entry that is a
 * symbolic link (checkpoint-N or .checkpoint-N.tmp) is refused by name. */
int grpo_ckpt_list(const char *root, long **steps, grpo_error *err);

/* ROOT/checkpoint-best into out. */
int grpo_ckpt_best_dir(const char *root, char *out, size_t size);

/* ROOT/checkpoint-best's trainer_state.json: its step into *step and 1 when it carries run_id
 * as its mark into *mine. Returns 0 when there is no checkpoint-best, 1 when there is one (*step
 * -1 when its trainer_state.json cannot be read). */
int grpo_ckpt_best_read(const char *root, const char *run_id, long *step, int *mine);

/* ROOT/checkpoint-STEP into out. */
int grpo_ckpt_dir(const char *root, long step, char *out, size_t size);

/* The newest complete checkpoint under root: its directory into out and its step. Returns
 * GRPO_ERR_IO with a message naming root when there is none. */
int grpo_ckpt_latest(const char *root, char *out, size_t size, long *step, grpo_error *err);

#endif
