/*
 * best.h — checkpoint.best_metric: the best evaluated step kept as checkpoint-best.
 *
 * Every train.eval_every steps an evaluation writes its metrics (eval.h); when the metric named by
 * checkpoint.best_metric improves strictly on the best so far (higher with checkpoint.best_mode =
 * max, lower with min; the first finite value always counts, a NaN never does), the policy of
 * that step is saved as checkpoint-best (checkpoint.h: swapped in place, never pruned, never
 * resumed from) and st.best records the metric, mode, value and step, which every later
 * checkpoint's trainer_state.json carries ("best"). --resume restores it, so the resumed run
 * compares against the same best. The best is saved before the step's regular checkpoint, so a
 * checkpoint-N that records a best never precedes the checkpoint-best it names.
 */
#ifndef GRPO_BEST_H
#define GRPO_BEST_H

#include "train/metrics.h"
#include "train/rewards.h"
#include "train/session.h"

/* At start, after --resume restored s->st: checkpoint.best_metric off clears st.best; else it
 * needs train.eval_every > 0 and data.eval_path, must name a metric the run's evaluations write
 * with rewards rs (env: with an environment) — an error naming the key and listing them — and
 * eval/accuracy needs a builtin.accuracy reward. A checkpoint-best another run wrote is refused
 * (grpo does not replace it); a resumed best of another metric or mode is dropped with a warning,
 * and a checkpoint-best that is not the resumed best (written by the continuation being replayed)
 * is named in a warning. */
int grpo_best_open(grpo_session *s, const grpo_reward_set *rs, int env, grpo_error *err);

/* After a step's metrics row: when it holds checkpoint.best_metric (an evaluation ran) and the
 * value improves on st.best, st.best becomes this step's and checkpoint-best is saved. */
int grpo_best_update(grpo_session *s, const grpo_metric_row *row, grpo_error *err);

#endif
