/* eval.c — evaluation on a dataset (see eval.h). */
#include "train/eval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/reward_sum.h"
#include "train/rollout.h"

#define EVAL_BATCH 32 /* prompts per rollout */

/* Sums over episodes: count, turns, tool calls, episodes with a call. */
typedef struct eval_env {
    double n, turns, calls, users;
} eval_env;

/* Scores the B examples from first (one rollout): R (B, K) receives every reward's score. */
static int eval_batch(grpo_run *r, grpo_model *m, grpo_reward_set *rs, grpo_episodes *env,
                      const grpo_dataset *ds, size_t first, int32_t B, const grpo_sampler_opts *so,
                      grpo_rng *rng, float *R, eval_env *es, grpo_error *err) {
    grpo_rollout_batch rb;
    int rc = grpo_rollout_batch_begin(&rb, B, so->G, err);
    rb.env = env;
    for (int32_t b = 0; rc == GRPO_OK && b < B; b++) {
        int keep = 0;
        rc = grpo_rollout_batch_add(&rb, r, ds, &ds->examples[first + b], &keep, err);
        if (rc == GRPO_OK && !keep)
            rc = grpo_error_set(err, GRPO_ERR_INVALID,
                                "%s:%llu: prompt longer than "
                                "data.max_prompt_length (truncation = skip)",
                                ds->path, (unsigned long long)ds->examples[first + b].line);
    }
    if (rc == GRPO_OK) rc = grpo_rollout_batch_run(&rb, r, m, so, rng, rs, err);
    if (rc == GRPO_OK) memcpy(R, rb.R, (size_t)rb.N * rs->n * sizeof(float));
    for (int32_t i = 0; rc == GRPO_OK && env && i < env->N; i++) {
        const grpo_episode *e = &env->ep[i];
        es->n++, es->turns += e->turns, es->calls += e->tool_calls, es->users += e->tool_calls > 0;
    }
    grpo_rollout_batch_free(&rb);
    return rc;
}

int grpo_eval_accuracy_reward(const grpo_reward_set *rs) {
    for (int k = 0; k < rs->n; k++)
        if (!strcmp(rs->specs[k]->plugin, "builtin.accuracy")) return k;
    return -1;
}

int grpo_eval_metric_count(const grpo_reward_set *rs, int env) { return 2 + rs->n + 3 * !!env; }

void grpo_eval_metric_name(const grpo_reward_set *rs, int i, const char *prefix, char *out,
                           size_t size) {
    static const char *const env_names[] = {"env/turns", "env/tool_calls", "env/tool_use_rate"};
    if (i < 2)
        snprintf(out, size, "%s%s", prefix, i ? "accuracy" : "reward");
    else if (i < 2 + rs->n)
        snprintf(out, size, "%srewards/%s/mean", prefix, rs->specs[i - 2]->name);
    else
        snprintf(out, size, "%s%s", prefix, env_names[i - 2 - rs->n]);
}

/* The metrics of grpo_eval_metric_name's order into v: the means of R (n, K) and of sum (n),
 * then with an environment the per-episode means of es. */
static void eval_values(const grpo_reward_set *rs, const float *R, const float *sum, size_t n,
                        const eval_env *es, int env, double *v) {
    int K = rs->n, acc = grpo_eval_accuracy_reward(rs);
    v[0] = grpo_nanmean(sum, (int)n, 1);
    v[1] = acc >= 0 ? grpo_nanmean(R + acc, (int)n, K) : NAN;
    for (int k = 0; k < K; k++) v[2 + k] = grpo_nanmean(R + k, (int)n, K);
    if (!env) return;
    double d = es->n > 0 ? es->n : 1;
    v[2 + K] = es->turns / d, v[3 + K] = es->calls / d, v[4 + K] = es->users / d;
}

int grpo_evaluate(grpo_run *r, grpo_model *m, grpo_reward_set *rs, grpo_episodes *env,
                  const grpo_dataset *ds, size_t n, float temperature, grpo_rng *rng,
                  const char *prefix, grpo_metric_row *row, grpo_error *err) {
    int K = rs->n;
    float *R = malloc((n * K + 1) * sizeof(float)), *w = malloc(((size_t)K + 1) * sizeof(float));
    float *sum = malloc((n + 1) * sizeof(float));
    int nv = grpo_eval_metric_count(rs, env != NULL);
    double *v = malloc((size_t)nv * sizeof(double));
    int rc = R && w && sum && v ? GRPO_OK
                                : grpo_error_set(err, GRPO_ERR_NOMEM, "eval: out of memory");
    grpo_sampler_opts so = {{temperature, 0, 1.0f, 0.0f, 1.0f},
                            1,
                            (int32_t)(env ? r->cfg.env_max_episode_tokens
                                          : r->cfg.sampling_max_completion_length),
                            {0},
                            r->n_eos,
                            r->pad_id,
                            0, NULL, NULL, NULL, 0, 0};
    memcpy(so.eos, r->eos, sizeof so.eos);
    eval_env es = {0};
    for (size_t i = 0; rc == GRPO_OK && i < n; i += EVAL_BATCH)
        rc = eval_batch(r, m, rs, env, ds, i, (int32_t)(n - i < EVAL_BATCH ? n - i : EVAL_BATCH),
                        &so, rng, R + i * K, &es, err);
    if (rc == GRPO_OK) {
        char name[GRPO_METRIC_NAME_MAX];
        grpo_reward_set_weights(rs, w);
        grpo_reward_sum(sum, R, w, (int)n, K);
        eval_values(rs, R, sum, n, &es, env != NULL, v);
        for (int i = 0; i < nv; i++) {
            grpo_eval_metric_name(rs, i, prefix, name, sizeof name);
            grpo_metric_set(row, name, v[i]);
        }
    }
    free(R), free(w), free(sum), free(v);
    return rc;
}
