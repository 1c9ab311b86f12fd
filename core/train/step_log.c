/* step_log.c — what a GRPO step logs: its metrics (rewards, [env], loss), phase timings and
 * completions (see step_log.h). */
#include "train/step_log.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/comm.h"
#include "train/loss.h"
#include "train/metrics.h"
#include "train/reward_sum.h"

/* Over every rank's rows (the chunks' g* arrays), so the same numbers as in one process. */
static void reward_metrics(trainer *t, grpo_metric_row *row) {
    int K = t->rewards.n, N = 0;
    for (int a = 0; a < t->n_chunks; a++) N += t->chunks[a].gN;
    float *R = malloc((size_t)N * K * sizeof(float)), *r = malloc((size_t)N * sizeof(float));
    if (!R || !r) {
        free(R), free(r);
        return;
    }
    double zero_std = 0, len = 0, clipped = 0, term_len = 0, n_term = 0, minl = 1e30, maxl = 0;
    double adv_abs = 0;
    int off = 0;
    for (int a = 0; a < t->n_chunks; a++) {
        const chunk *c = &t->chunks[a];
        memcpy(R + (size_t)off * K, c->gR, (size_t)c->gN * K * sizeof(float));
        memcpy(r + off, c->gr, (size_t)c->gN * sizeof(float));
        off += c->gN;
        zero_std += c->am.frac_reward_zero_std * c->gN;
        for (int32_t i = 0; i < c->gN; i++) {
            double l = c->glen[i];
            adv_abs += fabs(c->gadv[i]);
            len += l, clipped += c->gtrunc[i];
            minl = l < minl ? l : minl, maxl = l > maxl ? l : maxl;
            if (!c->gtrunc[i]) term_len += l, n_term++;
        }
    }
    grpo_metric_set(row, "reward", grpo_nanmean(r, N, 1));
    grpo_metric_set(row, "reward_std", grpo_nanstd(r, N, 1, 1));
    double *nan_frac = malloc((size_t)(K ? K : 1) * sizeof *nan_frac);
    if (nan_frac) grpo_reward_set_nan_check(&t->rewards, R, N, t->s.st.step, nan_frac);
    for (int k = 0; k < K; k++) {
        double mean, std;
        char name[GRPO_METRIC_NAME_MAX];
        grpo_reward_func_stats(&mean, &std, R, N, K, k);
        snprintf(name, sizeof name, "rewards/%s/mean", t->rewards.specs[k]->name);
        grpo_metric_set(row, name, mean);
        snprintf(name, sizeof name, "rewards/%s/std", t->rewards.specs[k]->name);
        grpo_metric_set(row, name, std);
        snprintf(name, sizeof name, "rewards/%s/nan_frac", t->rewards.specs[k]->name);
        if (nan_frac) grpo_metric_set(row, name, nan_frac[k]);
    }
    free(nan_frac);
    grpo_metric_set(row, "frac_reward_zero_std", zero_std / N);
    /* the size of the learning signal: the loss itself sits near 0 (advantages are zero-mean in
     * each group and the ratio starts at 1), while this says how hard the step pushes */
    grpo_metric_set(row, "advantage/abs_mean", adv_abs / N);
    if (t->cfg->grpo_drop_zero_std_groups) {
        double groups = 0, dropped = 0;
        for (int a = 0; a < t->n_chunks; a++)
            groups += t->chunks[a].gB, dropped += t->chunks[a].gdropped;
        grpo_metric_set(row, "frac_groups_dropped", dropped / groups);
    }
    grpo_metric_set(row, "completions/mean_length", len / N);
    grpo_metric_set(row, "completions/min_length", minl);
    grpo_metric_set(row, "completions/max_length", maxl);
    grpo_metric_set(row, "completions/clipped_ratio", clipped / N);
    grpo_metric_set(row, "completions/mean_terminated_length", n_term ? term_len / n_term : 0.0);
    free(R), free(r);
}

/* The sampler's log-probs against the training forward's (TRL's names), on every run; the
 * importance-sampling ratio applies to the loss only with a rollout copy or a LoRA run's bf16
 * rollout (is_correction.h). */
static void is_metrics(const trainer *t, grpo_metric_row *row) {
    const grpo_is_sums *s = &t->is;
    if (s->ratio_n <= 0) return;
    grpo_metric_set(row, "sampling/sampling_logp_difference/mean",
                    s->diff_n > 0 ? s->diff_sum / s->diff_n : 0.0);
    grpo_metric_set(row, "sampling/sampling_logp_difference/max", s->diff_max);
    grpo_metric_set(row, "sampling/importance_sampling_ratio/min", s->ratio_min);
    grpo_metric_set(row, "sampling/importance_sampling_ratio/mean", s->ratio_sum / s->ratio_n);
    grpo_metric_set(row, "sampling/importance_sampling_ratio/max", s->ratio_max);
    grpo_metric_set(row, "sampling/importance_sampling_ratio/clipped_frac",
                    s->clipped / s->ratio_n);
}

/* [env]: per-episode means over every rank's episodes of the step. */
static void env_metrics(trainer *t, grpo_metric_row *row) {
    double s[ENV_STATS] = {0};
    for (int a = 0; a < t->n_chunks; a++)
        for (int k = 0; k < ENV_STATS; k++) s[k] += t->chunks[a].env[k];
    grpo_error err;
    grpo_error_init(&err);
    if (grpo_comm_size() > 1 && grpo_comm_allreduce_f64(s, ENV_STATS, GRPO_COMM_SUM, &err))
        return;
    double n = s[0] > 0 ? s[0] : 1;
    grpo_metric_set(row, "env/turns", s[1] / n);
    grpo_metric_set(row, "env/tool_calls", s[2] / n);
    grpo_metric_set(row, "env/tool_errors", s[3] / n);
    grpo_metric_set(row, "env/tool_use_rate", s[4] / n);
    grpo_metric_set(row, "env/observation_tokens", s[5] / n);
    grpo_metric_set(row, "env/done_frac", s[6] / n);
    grpo_metric_set(row, "env/episode_length", s[7] / n);
}

/* The loss's metrics (TRL names; the clip ratios of the loss types that clip, loss.h). */
static void loss_metrics(trainer *t, const loss_sums *s, grpo_metric_row *row) {
    double w = s->tokens > 0 ? s->tokens : 1;
    is_metrics(t, row);
    grpo_metric_set(row, "loss", s->loss);
    if (t->s.policy->desc->aux_loss) grpo_metric_set(row, "aux_loss", s->aux);
    if (t->load) grpo_metrics_expert_load(row, t->load, t->load_L, t->load_E);
    if (t->cfg->grpo_beta > 0) grpo_metric_set(row, "kl", s->kl / w);
    grpo_metric_set(row, "entropy", s->entropy / w);
    grpo_metric_set(row, "train/padding_frac", s->positions > 0 ? s->padded / s->positions : 0);
    grpo_metric_set(row, "perf/rollout_reused", s->passes > 0 ? s->reused / s->passes : 0);
    if (t->cfg->grpo_beta > 0)
        grpo_metric_set(row, "perf/reference_decoded",
                        s->passes > 0 ? s->ref_decoded / s->passes : 0);
    if (t->cfg->train_max_tokens_per_microbatch > 0) /* packed: the cells computed */
        grpo_metric_set(row, "train/positions", s->positions);
    grpo_loss_clip clip = grpo_loss_type_clip(t->cfg->grpo_loss_type);
    if (clip == GRPO_CLIP_CAP) grpo_metric_set(row, "cispo_clip_ratio", s->cispo / w);
    if (clip != GRPO_CLIP_PPO) return; /* TRL logs no clip ratio for cispo and sapo */
    grpo_metric_set(row, "clip_ratio/low_mean", s->low / w);
    grpo_metric_set(row, "clip_ratio/low_min", s->low_min > 1 ? 0.0 : s->low_min);
    grpo_metric_set(row, "clip_ratio/high_mean", s->high / w);
    grpo_metric_set(row, "clip_ratio/high_max", s->high_max);
    grpo_metric_set(row, "clip_ratio/region_mean", s->region / w);
}

void grpo_trainer_log_metrics(trainer *t, const loss_sums *sums, grpo_metric_row *row) {
    reward_metrics(t, row);
    if (t->episodes.desc) env_metrics(t, row);
    loss_metrics(t, sums, row);
}

/* time/PHASE (wall s) and time/cpu/PHASE (CPU s of all threads) of the step into row. */
void grpo_trainer_log_timings(const trainer *t, grpo_metric_row *row) {
    static const char *const names[PHASES] = {"rollout", "reference", "policy", "optimizer"};
    char key[GRPO_METRIC_NAME_MAX];
    for (int k = 0; k < 2; k++)
        for (int ph = 0; ph < PHASES; ph++) {
            snprintf(key, sizeof key, "time/%s%s", k ? "cpu/" : "", names[ph]);
            grpo_metric_set(row, key, t->phase[k][ph]);
        }
}

/* The first chunk's samples as markdown for TensorBoard's text plugin: per sample its rewards and
 * advantage, then prompt + completion in a code block (they hold newlines and '|'). malloc'd. */
static char *completions_markdown(const trainer *t, const chunk *c) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    for (int32_t i = 0; i < c->rb.N; i++) {
        fprintf(f, "**sample %d** reward %g, advantage %g (", i, c->r[i], c->adv[i]);
        for (int k = 0; k < t->rewards.n; k++)
            fprintf(f, "%s%s %g", k ? ", " : "", t->rewards.specs[k]->name,
                    c->rb.R[(size_t)i * t->rewards.n + k]);
        fprintf(f, ")\n\n```\n%s%s\n```\n\n", c->rb.prompt_text[i / c->rb.G], c->rb.completion[i]);
    }
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* Every sample of the first chunk as JSON lines, each with the rank that drew it (gathered to
 * rank 0, which writes them; TensorBoard gets rank 0's); rank 0's first one also on stderr. */
int grpo_trainer_log_completions(trainer *t, grpo_error *err) {
    const chunk *c = &t->chunks[0];
    char *mine = NULL, *all = NULL;
    size_t n_mine = 0, n_all = 0;
    FILE *f = open_memstream(&mine, &n_mine);
    if (!f) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory logging completions");
    int rc = GRPO_OK;
    for (int32_t i = 0; rc == GRPO_OK && i < c->rb.N; i++) {
        cJSON *j = cJSON_CreateObject(), *rw = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "step", (double)t->s.st.step);
        cJSON_AddNumberToObject(j, "rank", grpo_comm_rank());
        cJSON_AddStringToObject(j, "prompt", c->rb.prompt_text[i / c->rb.G]);
        cJSON_AddStringToObject(j, "completion", c->rb.completion[i]);
        for (int k = 0; k < t->rewards.n; k++) {
            float v = c->rb.R[(size_t)i * t->rewards.n + k];
            if (isnan(v))
                cJSON_AddNullToObject(rw, t->rewards.specs[k]->name);
            else
                cJSON_AddNumberToObject(rw, t->rewards.specs[k]->name, v);
        }
        cJSON_AddItemToObject(j, "rewards", rw);
        if (c->env_rows) { /* [env]: the episode as the environment saw it */
            const float *e = c->env_rows + (size_t)i * 4;
            cJSON *ej = cJSON_AddObjectToObject(j, "env");
            if (isnan(e[0])) cJSON_AddNullToObject(ej, "reward");
            else cJSON_AddNumberToObject(ej, "reward", e[0]);
            cJSON_AddNumberToObject(ej, "turns", e[1]);
            cJSON_AddNumberToObject(ej, "tool_calls", e[2]);
            cJSON_AddNumberToObject(ej, "tool_errors", e[3]);
        }
        if (isnan(c->r[i]))
            cJSON_AddNullToObject(j, "reward");
        else
            cJSON_AddNumberToObject(j, "reward", c->r[i]);
        cJSON_AddNumberToObject(j, "advantage", c->adv[i]);
        char *s = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        if (!s) rc = grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory logging completions");
        else fprintf(f, "%s\n", s);
        if (s && i == 0 && grpo_comm_rank() == 0)
            fprintf(stderr, "\n[step %ld sample] %s\n", t->s.st.step, s);
        free(s);
    }
    if (fclose(f) != 0 && rc == GRPO_OK)
        rc = grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory logging completions");
    /* every rank gathers, even one that failed above, so none waits for it */
    int rc2 = grpo_comm_gather_bytes(&all, &n_all, mine ? mine : "", rc == GRPO_OK ? n_mine : 0,
                                     err);
    if (rc == GRPO_OK) rc = rc2;
    for (char *line = all, *nl; rc == GRPO_OK && line && *line; line = nl + 1) {
        if ((nl = strchr(line, '\n'))) *nl = 0;
        rc = grpo_run_log_line(&t->completions, line, err);
        if (!nl) break;
    }
    free(mine), free(all);
    if (rc != GRPO_OK || !t->s.tb.f) return rc;
    char *md = completions_markdown(t, c);
    rc = md ? grpo_session_log_text(&t->s, "completions", md, err)
            : grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory logging completions");
    free(md);
    return rc;
}
