/*
 * step_log.h — what one GRPO step logs (trainer.h): its metrics line's own part (rewards over
 * every rank's rows, [env] episode means, the loss's metrics and importance-sampling ones, TRL
 * names), its phase timings (time/...), and its completions (completions.jsonl, gathered to rank
 * 0, and TensorBoard's text plugin). Internal to the trainer's files.
 */
#ifndef GRPO_STEP_LOG_H
#define GRPO_STEP_LOG_H

#include "train/trainer_internal.h"

/* rewards/..., reward, frac_reward_zero_std, completions/..., env/..., loss, kl, entropy,
 * clip_ratio/... (or cispo_clip_ratio), sampling/... into row, in that order. */
void grpo_trainer_log_metrics(trainer *t, const loss_sums *sums, grpo_metric_row *row);

/* time/PHASE (wall s) and time/cpu/PHASE (CPU s of all threads) of the step into row. */
void grpo_trainer_log_timings(const trainer *t, grpo_metric_row *row);

/* Every sample of the first chunk as JSON lines into completions.jsonl, each with the rank that
 * drew it (gathered to rank 0, which writes them; TensorBoard gets rank 0's as markdown); rank
 * 0's first one also on stderr. Every rank must call it (a collective). */
int grpo_trainer_log_completions(trainer *t, grpo_error *err);

#endif
