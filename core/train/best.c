/* best.c — keeping the best evaluated checkpoint (see best.h). */
#include "train/best.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/comm.h"
#include "train/checkpoint.h"
#include "train/eval.h"

/* The prefixes of the evaluations a run makes (train_setup.c: greedy, and sampled when
 * train.eval_temperature > 0); their count. */
static int eval_prefixes(const grpo_run_config *cfg, const char *prefix[2]) {
    prefix[0] = GRPO_EVAL_PREFIX, prefix[1] = GRPO_EVAL_SAMPLED_PREFIX;
    return cfg->train_eval_temperature > 0 ? 2 : 1;
}

/* checkpoint.best_metric is a metric the evaluations write; else an error listing them. */
static int check_metric(const grpo_run_config *cfg, const grpo_reward_set *rs, int env,
                        grpo_error *err) {
    const char *prefix[2], *metric = cfg->checkpoint_best_metric;
    char name[GRPO_METRIC_NAME_MAX], list[2048] = "";
    int np = eval_prefixes(cfg, prefix), n = grpo_eval_metric_count(rs, env);
    for (int p = 0; p < np; p++)
        for (int i = 0; i < n; i++) {
            grpo_eval_metric_name(rs, i, prefix[p], name, sizeof name);
            if (!strcmp(name, metric) && i == 1 && grpo_eval_accuracy_reward(rs) < 0)
                return grpo_error_set(err, GRPO_ERR_INVALID,
                                      "%s: checkpoint.best_metric = %s: accuracy is the score of "
                                      "a builtin.accuracy reward and this run has none (it would "
                                      "be NaN at every evaluation); expected such a reward or "
                                      "another metric",
                                      cfg->path, metric);
            if (!strcmp(name, metric)) return GRPO_OK;
            if (i == 1 && grpo_eval_accuracy_reward(rs) < 0) continue; /* NaN: not offered */
            size_t len = strlen(list);
            snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", name);
        }
    return grpo_error_set(err, GRPO_ERR_INVALID,
                          "%s: checkpoint.best_metric = %s is no metric this run's evaluations "
                          "write; expected one of: %s",
                          cfg->path, metric, list);
}

/* checkpoint.dir/checkpoint-best against this run and its resumed best (rank 0). */
static int check_best_dir(grpo_session *s, grpo_error *err) {
    const grpo_best *b = &s->st.best;
    long step;
    int mine, there = grpo_ckpt_best_read(s->cfg->checkpoint_dir, s->st.run_id, &step, &mine);
    char dir[4200];
    grpo_ckpt_best_dir(s->cfg->checkpoint_dir, dir, sizeof dir);
    if (there && !mine)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: checkpoint.best_metric: this checkpoint-best was not written by "
                              "this run (its trainer_state.json lacks this run's run_id) and grpo "
                              "does not replace it; expected it moved away, or another "
                              "checkpoint.dir",
                              dir);
    if (there && b->metric[0] && step != b->step)
        fprintf(stderr,
                "warning: %s holds step %ld, but the resumed checkpoint's best is step %ld (%s = "
                "%.17g): it is replaced at the first evaluation that beats that\n",
                dir, step, b->step, b->metric, b->value);
    else if (there && !b->metric[0])
        fprintf(stderr,
                "warning: %s holds step %ld, but the resumed checkpoint (step %ld) records no "
                "best of %s: it is replaced at the first evaluation\n",
                dir, step, s->st.step, s->cfg->checkpoint_best_metric);
    else if (!there && b->metric[0])
        fprintf(stderr,
                "warning: %s is missing; the resumed checkpoint's best is step %ld (%s = %.17g): "
                "it is written again at the first evaluation that beats that\n",
                dir, b->step, b->metric, b->value);
    return GRPO_OK;
}

int grpo_best_open(grpo_session *s, const grpo_reward_set *rs, int env, grpo_error *err) {
    const grpo_run_config *cfg = s->cfg;
    grpo_best *b = &s->st.best;
    int min = cfg->checkpoint_best_mode == GRPO_BEST_MIN;
    if (!cfg->checkpoint_best_metric[0]) {
        memset(b, 0, sizeof *b); /* off: a resumed best is no longer kept */
        return GRPO_OK;
    }
    if (cfg->train_eval_every <= 0 || !cfg->data_eval_path[0])
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: checkpoint.best_metric = %s needs evaluations to compare: "
                              "expected train.eval_every > 0 (now %lld) and data.eval_path (now "
                              "%s)",
                              cfg->path, cfg->checkpoint_best_metric, cfg->train_eval_every,
                              cfg->data_eval_path[0] ? cfg->data_eval_path : "empty");
    int rc = check_metric(cfg, rs, env, err);
    if (rc != GRPO_OK) return rc;
    if (b->metric[0] && (strcmp(b->metric, cfg->checkpoint_best_metric) || b->min != min)) {
        fprintf(stderr,
                "warning: checkpoint.best_metric: the resumed best is %s (%s) and this run keeps "
                "%s (%s): the best is found afresh from the next evaluation on\n",
                b->metric, b->min ? "min" : "max", cfg->checkpoint_best_metric,
                min ? "min" : "max");
        memset(b, 0, sizeof *b);
    }
    return grpo_comm_rank() == 0 ? check_best_dir(s, err) : GRPO_OK;
}

int grpo_best_update(grpo_session *s, const grpo_metric_row *row, grpo_error *err) {
    const grpo_run_config *cfg = s->cfg;
    const char *metric = cfg->checkpoint_best_metric;
    grpo_best *b = &s->st.best;
    int i = 0, min = cfg->checkpoint_best_mode == GRPO_BEST_MIN;
    if (!metric[0]) return GRPO_OK;
    while (i < row->n && strcmp(row->names[i], metric)) i++;
    if (i == row->n) return GRPO_OK; /* no evaluation this step (or not the rank that runs it) */
    double v = row->values[i];
    if (!isfinite(v)) {
        fprintf(stderr, "warning: step %ld: checkpoint.best_metric %s is %g: not compared\n",
                s->st.step, metric, v);
        return GRPO_OK;
    }
    if (b->metric[0] && !(min ? v < b->value : v > b->value)) return GRPO_OK;
    snprintf(b->metric, sizeof b->metric, "%s", metric);
    b->min = min, b->value = v, b->step = s->st.step;
    int rc = grpo_session_save_best(s, err);
    if (rc == GRPO_OK && grpo_comm_rank() == 0)
        fprintf(stderr, "saved %s/checkpoint-best (step %ld, %s = %g)\n", cfg->checkpoint_dir,
                s->st.step, metric, v);
    return rc;
}
