/*
 * reference.h — the reference model of a GRPO run (grpo.beta > 0) over its life: opened at setup,
 * its log-probs of each micro-batch (the KL term's ref_logp), refreshed towards the policy every
 * grpo.sync_ref_every steps (TRL's sync_ref_model, TR-DPO), saved beside each checkpoint once it
 * has moved, and those copies pruned with their checkpoints.
 *
 * Files: checkpoint.dir/reference-STEP (a saved model, plain files) holds the refreshed reference
 * that goes with checkpoint.dir/checkpoint-STEP. It is saved just before the session commits that
 * checkpoint, so every checkpoint that exists has its reference (a kill in between leaves a
 * reference without a checkpoint, pruned later); --resume loads it from there.
 */
#ifndef GRPO_REFERENCE_H
#define GRPO_REFERENCE_H

#include "train/seqbatch.h"
#include "train/session.h"

typedef struct grpo_reference {
    grpo_model *model; /* the reference model (beta > 0), else NULL */
    int is_base;       /* LoRA, beta > 0: the reference is the policy with its adapters off */
    int32_t compute_dtype; /* GRPO_DTYPE_* of its pass's products (grpo.ref_compute_dtype) */
} grpo_reference;

/* beta > 0: reference.path, which follows model.path (or the --model override) unless the run
 * file sets it; a LoRA run without reference.path uses its frozen base (no second copy); a run
 * resumed after a refresh loads checkpoint.dir/reference-STEP. Nothing when beta = 0.
 * grpo.ref_compute_dtype = bf16: its pass computes in bf16, refused here where the backend
 * cannot (the missing instruction set named). */
int grpo_reference_open(grpo_reference *r, grpo_session *s, grpo_error *err);

/* Whether there is a reference (beta > 0). */
int grpo_reference_on(const grpo_reference *r);

/* The reference log-probs of the completions of the batch in sb (padded or packed rollout rows,
 * seqbatch.h) into out (rows, T): the reference model, or for a LoRA run the policy with its
 * adapters switched off for this one forward (and back on, also after a failed forward), in
 * r->compute_dtype. scale: 1 / temperature. */
int grpo_reference_logp(const grpo_reference *r, grpo_session *s, grpo_seqbatch *sb, float scale,
                        int32_t T, float *out, grpo_error *err);

/* grpo.sync_ref_every (TRL's sync_ref_model, TR-DPO): ref = alpha * policy + (1 - alpha) * ref
 * over every parameter (ops->scale, ops->accumulate: in fp32, per element
 * fl(fl((1 - alpha) ref) + fl(alpha policy))). Both must be the same architecture. */
struct grpo_model;
int grpo_ref_sync(struct grpo_model *ref, const struct grpo_model *policy, double alpha,
                  grpo_error *err);

/* Saves checkpoint.dir/reference-STEP when the step about to be checkpointed (every
 * checkpoint.every and the last) has a refreshed reference; rank 0 only. */
int grpo_reference_checkpoint(const grpo_reference *r, const grpo_session *s, grpo_error *err);

/* With grpo.sync_ref_every: removes the reference-STEP directories of steps before the current
 * one whose checkpoint-STEP is gone (checkpoint.keep); the current step's checkpoint may still be
 * on its way. Best effort (rank 0; a directory that cannot be removed is left). */
void grpo_reference_prune(const grpo_reference *r, const grpo_session *s);

void grpo_reference_close(grpo_reference *r);

#endif
