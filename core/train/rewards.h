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
 *   value; builtin.http's bounds its whole call, retries included). An
 *   in-process call past it cannot be stopped safely: the run ends with an error naming the
 *   plugin, the section and the deadline (call_deadline.h). Create and destroy have none.
 * - Scoring overlaps decoding (reward_pool.h): an isolated reward, or an in-process one whose
 *   manifest says thread_safe = true or per_instance, scores on `workers` threads of its own
 *   (each with its own worker process or instance where it has several), a row as soon as it
 *   ends when the manifest says rows_independent = true, else a group once its last row ends.
 *   Any other reward is called on the trainer's thread with the whole batch after it decoded,
 *   as before: a plugin not declared thread-safe may rely on the trainer's thread (the host's
 *   model services share the backend the sampler is using). Scores land in R by sample index,
 *   so they and every log are the same whatever the workers and the order calls finish in.
 * - With `isolate = true` in its section, the plugin runs in a worker process of its own
 *   (reward_worker.h): the grpo binary started again in a hidden worker mode, never a fork of
 *   the (multithreaded) trainer, so it has its own thread pools and backend. The worker loads
 *   the pack, creates the reward (a failure there fails the run as an in-process create does)
 *   and scores batch after batch, keeping the plugin's state between them. A crash, signal or
 *   exit() there, or a batch past its deadline (the worker is killed: SIGKILL), makes that
 *   batch's scores NaN with one warning naming the section, the plugin and what happened (the
 *   batch's other parts are not sent), and the run goes on; the next call starts a new worker
 *   (a new instance: state is lost then).
 *   Each worker costs a process start and its own copy of what create loads.
 */
#ifndef GRPO_REWARDS_H
#define GRPO_REWARDS_H

#include <stddef.h>

#include "config/run_config.h"
#include "grpo/reward.h"
#include "host/registry.h"
#include "train/reward_worker.h"

/* The batch as lent to plugins: samples, messages, fields, ids and strings in one block whose
 * pointers point into itself (buf), and a byte copy of it (master) to restore the block before
 * each reward. Both hold size bytes. Each thread that scores has its own. */
typedef struct grpo_reward_lend {
    unsigned char *buf, *master;
    size_t size, cap;
} grpo_reward_lend;

struct grpo_reward_pool;

typedef struct grpo_reward_set {
    int n;                           /* K */
    const grpo_reward_spec **specs;  /* [K] borrowed from the run config */
    const grpo_reward_desc **descs;  /* [K] borrowed from the loaded packs */
    /* Reward k's instances are inst0[k] .. inst0[k+1]-1 of states and workers: one, or one per
     * worker when isolated or declared thread_safe = per_instance (registry.h). */
    int *inst0;                      /* [K+1] */
    void **states;                   /* [inst0[K]] plugin instances (destroyed by free) */
    grpo_reward_worker *workers;     /* [inst0[K]] isolated rewards' worker processes (pid 0:
                                        none) */
    int *pooled;                     /* [K] > 0: scored on this many of the pool's threads while
                                        the batch decodes (reward_pool.h); 0: on the caller's
                                        thread after the batch, whole */
    int *rows_independent;           /* [K] pooled parts are single rows, else groups */
    int *warned;                     /* [K] 1 once reward k was warned of unwritten scores */
    int *warned_nan;                 /* [K] 1 once reward k was warned of a step of all NaN */
    grpo_reward_lend lend;           /* the caller's thread's copy of the batch */
    grpo_reward_worker_env worker_env; /* how workers start (set when any reward is isolated) */
    struct grpo_reward_pool *pool;   /* NULL when no reward is pooled */
    /* the batch in progress (grpo_reward_set_begin .. finish), borrowed */
    const grpo_sample *samples;
    uint32_t n_samples;
    float *R;
} grpo_reward_set;

/* Loads each reward's pack and creates its instance from the resolved section. On failure every
 * instance created so far is destroyed and err names the section and the plugin. */
int grpo_reward_set_create(grpo_reward_set *set, const grpo_run_config *cfg, grpo_registry *reg,
                           const grpo_host *host, grpo_error *err);
void grpo_reward_set_free(grpo_reward_set *set);

/* Scores n samples with every reward into R (N, K): R[i*K + k] is reward k's score of sample i
 * (the layout reward_sum.h combines). NaN ("no opinion") passes through; an infinite score or a
 * plugin error fails with the section, plugin and sample named (of several, the first reward's).
 * samples is never handed to a plugin (see above): it is unchanged afterwards whatever the
 * plugins do. The same as begin, every sample done at once, finish. */
int grpo_reward_set_score(grpo_reward_set *set, const grpo_sample *samples, uint32_t n, float *R,
                          grpo_error *err);

/* Scoring while a batch decodes (train/rollout.c). begin: samples[n] (borrowed; sample i is
 * read only after row_done(i)) into R (n, K); G > 0: group g is samples g*G .. g*G+G-1, else a
 * group is a run of samples with the same group number. row_done(i): sample i is complete;
 * pooled rewards score it (rows_independent) or its group once the group is complete, on their
 * threads. finish(complete = 1): every sample was done; scores the batch with the other
 * rewards on this thread, then waits for the pool; errors as grpo_reward_set_score. complete = 0:
 * the batch failed; waits and drops what was scored. */
int grpo_reward_set_begin(grpo_reward_set *set, const grpo_sample *samples, uint32_t n,
                          uint32_t G, float *R, grpo_error *err);
void grpo_reward_set_row_done(grpo_reward_set *set, uint32_t i);
int grpo_reward_set_finish(grpo_reward_set *set, int complete, grpo_error *err);
/* A batch begun with begin and scored group by group as each completes (the trainer's
 * over-sampling, train/rollout.c), whose other rows may never be done. score_group: samples
 * [first, first+n) (one group, every row done) with this thread's rewards, then waits for the
 * pool's parts of that group: their scores are all in R. finish_groups (instead of finish):
 * waits for the pool; NaN columns of lost workers, the pooled rewards' first error; nothing is
 * scored again. After a failure, finish(complete = 0) drains the pool. */
int grpo_reward_set_score_group(grpo_reward_set *set, uint32_t first, uint32_t n,
                                grpo_error *err);
int grpo_reward_set_finish_groups(grpo_reward_set *set, grpo_error *err);

void grpo_reward_lend_free(grpo_reward_lend *l);

/* The share of NaN ("no opinion") scores of each reward in R (N, K), into nan_frac (K). A reward
 * that is NaN for every one of the N samples of a step (a broken reward scores nothing, quietly)
 * is warned of once, naming its section, plugin and step; later steps show in
 * rewards/NAME/nan_frac. N = 0 gives 0. */
void grpo_reward_set_nan_check(grpo_reward_set *set, const float *R, int N, long step,
                               double *nan_frac);
/* The weights w (K) of the sections, for grpo_reward_sum. */
void grpo_reward_set_weights(const grpo_reward_set *set, float *w);

#endif
