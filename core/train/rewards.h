/*
 * rewards.h — the run's reward functions: one instance per [reward.NAME] section, created through
 * the registry (the same path a third-party pack takes), scoring batches of samples.
 *
 * Dimension letters: K reward functions, N samples (B prompts x G completions, group-major).
 *
 * What a plugin can and cannot do to the run:
 * - It scores a private copy of the batch: every string and id array of the samples is copied
 *   into scratch owned by the set (and restored before each reward), so a plugin that writes
 *   through the const pointers changes neither training state nor what the next reward sees.
 * - Its score buffer starts as NaN before every call: scores it leaves unwritten count as "no
 *   opinion" (one warning per reward), never as another reward's values.
 * - Its error message is read only up to the end of its buffer (a missing NUL is supplied).
 * - A call to exit() inside create, score or destroy is reported and the process ends with a
 *   non-zero status (registry.h, grpo_plugin_call_begin).
 * - A crash (SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE) inside those calls is reported with the
 *   plugin, its pack and library, the section, and the step and batch the trainer last set
 *   (grpo_plugin_call_progress), before the process dies of it (plugin_call.h).
 * - What it prints to stdout goes to stderr, never into grpo's data output (plugin_call.h).
 * - Every score call has a deadline: the section's `timeout` (seconds; default 60, or the
 *   manifest's default of a `timeout` key the plugin declares itself, as builtin.exec does: such a
 *   plugin gets the value and keeps it itself, and the host's deadline is a backstop at 10 x the
 *   value; builtin.http's is per attempt, with retries). An
 *   in-process call past it cannot be stopped safely: the run ends with an error naming the
 *   plugin, the section and the deadline (call_deadline.h). Create and destroy have none.
 * - With `isolate = true` in its section, the plugin runs in a worker process of its own
 *   (reward_worker.h): the grpo binary started again in a hidden worker mode, never a fork of
 *   the (multithreaded) trainer, so it has its own thread pools and backend. The worker loads
 *   the pack, creates the reward (a failure there fails the run as an in-process create does)
 *   and scores batch after batch, keeping the plugin's state between them. A crash, signal or
 *   exit() there, or a batch past its deadline (the worker is killed: SIGKILL), makes that
 *   batch's scores NaN with one warning naming the section, the plugin and what happened, and
 *   the run goes on; the next batch starts a new worker (a new instance: state is lost then).
 *   Each worker costs a process start and its own copy of what create loads.
 */
#ifndef GRPO_REWARDS_H
#define GRPO_REWARDS_H

#include <stddef.h>

#include "config/run_config.h"
#include "grpo/reward.h"
#include "host/registry.h"
#include "train/reward_worker.h"

typedef struct grpo_reward_set {
    int n;                           /* K */
    const grpo_reward_spec **specs;  /* [K] borrowed from the run config */
    const grpo_reward_desc **descs;  /* [K] borrowed from the loaded packs */
    void **states;                   /* [K] plugin instances (destroyed by free) */
    int *warned;                     /* [K] 1 once reward k was warned of unwritten scores */
    int *warned_nan;                 /* [K] 1 once reward k was warned of a step of all NaN */
    /* The batch as lent to plugins: samples, messages, fields, ids and strings in one block whose
     * pointers point into itself, and a byte copy of it to restore the block before each reward.
     * Both hold lend_size bytes. */
    unsigned char *lend, *lend_master;
    size_t lend_size, lend_cap;
    grpo_reward_worker *workers;       /* [K] isolated rewards' worker processes (pid 0: none) */
    grpo_reward_worker_env worker_env; /* how they start (set when any reward is isolated) */
} grpo_reward_set;

/* Loads each reward's pack and creates its instance from the resolved section. On failure every
 * instance created so far is destroyed and err names the section and the plugin. */
int grpo_reward_set_create(grpo_reward_set *set, const grpo_run_config *cfg, grpo_registry *reg,
                           const grpo_host *host, grpo_error *err);
void grpo_reward_set_free(grpo_reward_set *set);

/* Scores n samples with every reward into R (N, K): R[i*K + k] is reward k's score of sample i
 * (the layout reward_sum.h combines). NaN ("no opinion") passes through; an infinite score or a
 * plugin error fails with the section, plugin and sample named. samples is never handed to a
 * plugin (see above): it is unchanged afterwards whatever the plugins do. */
int grpo_reward_set_score(grpo_reward_set *set, const grpo_sample *samples, uint32_t n, float *R,
                          grpo_error *err);
/* The share of NaN ("no opinion") scores of each reward in R (N, K), into nan_frac (K). A reward
 * that is NaN for every one of the N samples of a step (a broken reward scores nothing, quietly)
 * is warned of once, naming its section, plugin and step; later steps show in
 * rewards/NAME/nan_frac. N = 0 gives 0. */
void grpo_reward_set_nan_check(grpo_reward_set *set, const float *R, int N, long step,
                               double *nan_frac);
/* The weights w (K) of the sections, for grpo_reward_sum. */
void grpo_reward_set_weights(const grpo_reward_set *set, float *w);

#endif
