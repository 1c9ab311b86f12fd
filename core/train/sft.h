/*
 * sft.h — `grpo sft`: supervised next-token training on prompt/response pairs, the warm start of
 * R1-style pipelines (and of the embedded default).
 *
 * Data: the run file's data.path; each line's prompt (prompt text as in run.h) and its response
 * (a "response" string field, or the last assistant turn of MiniMind "conversations"). The
 * sequence is prompt ids + response ids + the first EOS id; the loss is the mean negative
 * log-likelihood of the response tokens (EOS included) over the train.batch_prompts examples of
 * a batch, summed over train.grad_accum batches each divided by grad_accum. The response is cut
 * at sampling.max_completion_length tokens. Optimizer, schedule, metrics (loss, grad_norm,
 * learning_rate, num_tokens, step_time), checkpoints and --resume are the trainer's.
 */
#ifndef GRPO_SFT_H
#define GRPO_SFT_H

#include "train/run.h"

typedef struct grpo_sft_opts {
    grpo_run_args run;
    int resume;
    const char *out_dir; /* export the final model here as a Hugging Face directory (optional) */
} grpo_sft_opts;

int grpo_sft(const grpo_sft_opts *o, grpo_error *err);

#endif
