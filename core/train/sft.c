/* sft.c — supervised fine-tuning on prompt/response pairs (see sft.h). */
#include "train/sft.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/optimizer.h"
#include "train/seqbatch.h"
#include "train/train_state.h"

typedef struct sft {
    grpo_run run;
    const grpo_run_config *cfg;
    grpo_model *policy;
    grpo_dataset *data;
    grpo_data_order order;
    grpo_optimizer opt;
    grpo_train_state st;
    grpo_seqbatch sb;
    grpo_run_log metrics;
} sft;

/* The response text of an example (malloc'd), or NULL when it has none. */
static char *response_text(const grpo_example *ex) {
    if (ex->response) return strdup(ex->response);
    for (uint32_t i = 0; i < ex->n_fields; i++)
        if (!strcmp(ex->fields[i].key, "response")) {
            cJSON *j = cJSON_Parse(ex->fields[i].json);
            char *s = cJSON_IsString(j) ? strdup(j->valuestring) : NULL;
            cJSON_Delete(j);
            return s;
        }
    return NULL;
}

/* One example as prompt + response + EOS ids; *n_prompt tells where the response starts. */
static int example_ids(sft *s, const grpo_example *ex, int32_t **ids, size_t *n, size_t *n_prompt,
                       int *keep, grpo_error *err) {
    char *text = NULL, *resp = response_text(ex);
    int32_t *pids = NULL;
    size_t np = 0;
    if (!resp)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s:%llu: no response (expected a \"response\" string or a "
                              "conversation ending in an assistant turn)",
                              s->data->path, (unsigned long long)ex->line);
    int rc = grpo_run_prompt(&s->run, s->data, ex, &text, &pids, &np, keep, err);
    grpo_tok_ids r = {0};
    if (rc == GRPO_OK && *keep)
        rc = grpo_tokenizer_encode(s->run.tok, resp, strlen(resp), 0, &r, err);
    free(text), free(resp);
    if (rc != GRPO_OK || !*keep) {
        free(pids), grpo_tok_ids_free(&r);
        return rc;
    }
    size_t nr = r.n < (size_t)s->cfg->sampling_max_completion_length
                    ? r.n
                    : (size_t)s->cfg->sampling_max_completion_length - 1;
    *ids = malloc((np + nr + 1) * sizeof(int32_t));
    if (!*ids)
        rc = grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    else {
        memcpy(*ids, pids, np * sizeof(int32_t));
        memcpy(*ids + np, r.data, nr * sizeof(int32_t));
        (*ids)[np + nr] = s->run.n_eos ? s->run.eos[0] : s->run.pad_id;
        *n = np + nr + 1, *n_prompt = np;
    }
    free(pids), grpo_tok_ids_free(&r);
    return rc;
}

/* Fills s->sb with the next B examples (right-padded); returns the response token count. */
static int next_batch(sft *s, double *tokens, grpo_error *err) {
    int32_t B = (int32_t)s->cfg->train_batch_prompts;
    int32_t *ids[B > 0 ? B : 1];
    size_t n[B > 0 ? B : 1], np[B > 0 ? B : 1], L = 1;
    int rc = GRPO_OK;
    for (int32_t b = 0; b < B; b++) ids[b] = NULL;
    for (int32_t b = 0; rc == GRPO_OK && b < B;) {
        const grpo_example *ex = &s->data->examples[grpo_data_order_next(&s->order)];
        int keep = 0;
        rc = example_ids(s, ex, &ids[b], &n[b], &np[b], &keep, err);
        if (rc == GRPO_OK && keep) L = n[b] > L ? n[b] : L, b++;
    }
    if (rc == GRPO_OK) rc = grpo_seqbatch_reset(&s->sb, s->run.ops, B, (int32_t)L, err);
    *tokens = 0;
    for (int32_t b = 0; rc == GRPO_OK && b < B; b++) {
        for (size_t t = 0; t < n[b]; t++) {
            s->sb.ids[(size_t)b * L + t] = ids[b][t];
            s->sb.mask[(size_t)b * L + t] = 1;
            if (t + 1 < n[b] && t + 1 >= np[b]) s->sb.targets[(size_t)b * L + t] = ids[b][t + 1];
        }
        *tokens += (double)(n[b] - np[b]);
    }
    for (int32_t b = 0; b < B; b++) free(ids[b]);
    if (rc == GRPO_OK) grpo_seqbatch_positions(&s->sb);
    return rc;
}

/* Forward, mean NLL over the response tokens (+ a MoE policy's router aux loss times
 * grpo.aux_loss_coef, as in GRPO), backward (gradient / accum). Adds the loss. */
static int sft_micro(sft *s, double *loss, double *tokens, grpo_error *err) {
    int rc = next_batch(s, tokens, err);
    if (rc == GRPO_OK) rc = grpo_seqbatch_forward(&s->sb, s->policy, 0, 1.0f, err);
    if (rc != GRPO_OK) return rc;
    double sum = 0, denom = (*tokens > 0 ? *tokens : 1) * (double)s->cfg->train_grad_accum;
    size_t cells = (size_t)s->sb.B * s->sb.T;
    for (size_t i = 0; i < cells; i++)
        if (s->sb.targets[i] >= 0) {
            sum -= s->sb.logp[i];
            s->sb.dlogp[i] = (float)(-1.0 / denom);
        }
    *loss += sum / denom;
    if (s->policy->desc->aux_loss) { /* MoE: d loss / d aux_loss() through grpo_batch.aux_weight */
        double coef = s->cfg->grpo_aux_loss_coef / (double)s->cfg->train_grad_accum;
        *loss += coef * s->policy->desc->aux_loss(s->policy->inst);
        s->sb.aux_weight = (float)coef;
    }
    return grpo_seqbatch_backward(&s->sb, s->policy, 1.0f, err);
}

static int sft_setup(sft *s, const grpo_sft_opts *o, grpo_error *err) {
    int rc = grpo_run_open(&s->run, &o->run, err);
    if (rc != GRPO_OK) return rc;
    const grpo_run_config *cfg = s->cfg = &s->run.cfg;
    if ((rc = grpo_ckpt_prepare(cfg->checkpoint_dir, err)) != GRPO_OK) return rc;
    rc = o->resume ? grpo_checkpoint_resume(&s->run, cfg->checkpoint_dir, &s->policy, &s->st, err)
                   : grpo_run_open_model(&s->run, s->run.model_dir, 1, &s->policy, err);
    grpo_optim_opts oo;
    if (rc == GRPO_OK) rc = grpo_optim_opts_from_config(&oo, cfg, err);
    if (rc == GRPO_OK) rc = grpo_optimizer_init_model(&s->opt, s->policy, &oo, err);
    s->opt.step = s->st.optimizer_step;
    char *data = rc == GRPO_OK ? grpo_run_path(&s->run, cfg->data_path) : NULL;
    if (rc == GRPO_OK && (!data || !data[0]))
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: [data] path is not set", cfg->path);
    if (rc == GRPO_OK) rc = grpo_run_dataset(&s->run, data, &s->data, err);
    free(data);
    if (rc != GRPO_OK) return rc;
    rc = grpo_train_data_order(&s->order, &s->run, s->data, &s->st, o->resume, err);
    if (rc != GRPO_OK) return rc;
    if (grpo_mkdirs(cfg->log_dir) != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "cannot create log.dir %s: %s", cfg->log_dir,
                              strerror(errno));
    return grpo_run_log_open(&s->metrics, cfg->log_dir, "metrics.jsonl",
                             o->resume ? s->st.step : -1, err);
}

static int sft_save(sft *s, grpo_error *err) {
    s->st.cursor = s->order.cur, s->st.optimizer_step = s->opt.step;
    return grpo_checkpoint_save(s->cfg->checkpoint_dir, (int)s->cfg->checkpoint_keep, s->policy,
                                &s->st, err);
}

static int sft_step(sft *s, double start, long done, grpo_error *err) {
    const grpo_run_config *cfg = s->cfg;
    double t0 = grpo_now(), loss = 0, tokens = 0;
    int rc = GRPO_OK;
    for (long a = 0; rc == GRPO_OK && a < cfg->train_grad_accum; a++) {
        double n = 0;
        rc = sft_micro(s, &loss, &n, err);
        tokens += n;
    }
    grpo_optim_stats os;
    if (rc == GRPO_OK) rc = grpo_optimizer_step(&s->opt, &os, err);
    if (rc != GRPO_OK) return rc;
    s->st.step++;
    s->st.num_tokens += tokens;
    grpo_metric_row row;
    grpo_metric_row_clear(&row);
    grpo_metric_set(&row, "loss", loss);
    grpo_metric_set(&row, "grad_norm", os.grad_norm);
    grpo_metric_set(&row, "learning_rate", os.lr);
    grpo_metric_set(&row, "num_tokens", s->st.num_tokens);
    grpo_metric_set(&row, "step_time", grpo_now() - t0);
    if (s->st.step % cfg->log_every == 0 || s->st.step == cfg->train_steps) {
        if ((rc = grpo_run_log_metrics(&s->metrics, s->st.step, &row, err)) != GRPO_OK) return rc;
        fprintf(stderr, "loss %.4f | ", loss);
        grpo_progress_print(stderr, s->st.step, (long)cfg->train_steps, grpo_now() - start,
                            done + 1, &row);
    }
    if (cfg->checkpoint_every > 0 && s->st.step % cfg->checkpoint_every == 0 &&
        s->st.step < cfg->train_steps)
        rc = sft_save(s, err);
    return rc;
}

int grpo_sft(const grpo_sft_opts *o, grpo_error *err) {
    sft s;
    memset(&s, 0, sizeof s);
    int rc = sft_setup(&s, o, err);
    double start = grpo_now();
    long done = 0;
    while (rc == GRPO_OK && s.st.step < s.cfg->train_steps) rc = sft_step(&s, start, done++, err);
    if (rc == GRPO_OK && done > 0) rc = sft_save(&s, err);
    if (rc == GRPO_OK && o->out_dir) {
        rc = grpo_model_export(s.policy, o->out_dir, err);
        if (rc == GRPO_OK) fprintf(stderr, "wrote %s\n", o->out_dir);
    }
    grpo_error close_err;
    grpo_error_init(&close_err);
    if (grpo_run_log_close(&s.metrics, &close_err) != GRPO_OK && rc == GRPO_OK)
        *err = close_err, rc = close_err.status;
    grpo_seqbatch_free(&s.sb);
    grpo_optimizer_free(&s.opt);
    grpo_data_order_free(&s.order);
    grpo_dataset_free(s.data);
    grpo_model_close(s.policy);
    grpo_run_close(&s.run);
    return rc;
}
