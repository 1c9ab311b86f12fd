/* sft.c — supervised fine-tuning on prompt/response pairs (see sft.h). */
#include "train/sft.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/comm.h"
#include "base/files.h"
#include "train/seqbatch.h"
#include "train/session.h"
#include "base/nomem.h"

typedef struct sft {
    grpo_session *ses;
    grpo_seqbatch sb;
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
                              s->ses->data->path, (unsigned long long)ex->line);
    int rc = grpo_run_prompt(&s->ses->run, s->ses->data, ex, &text, &pids, &np, keep, err);
    grpo_tok_ids r = {0};
    if (rc == GRPO_OK && *keep)
        rc = grpo_tokenizer_encode(s->ses->run.tok, resp, strlen(resp), 0, &r, err);
    free(text), free(resp);
    if (rc != GRPO_OK || !*keep) {
        free(pids), grpo_tok_ids_free(&r);
        return rc;
    }
    size_t max_len = (size_t)s->ses->cfg->sampling_max_completion_length;
    size_t nr = r.n < max_len ? r.n : max_len - 1;
    *ids = malloc((np + nr + 1) * sizeof(int32_t));
    if (!*ids)
        rc = grpo_nomem(err, "an example's token ids", (np + nr + 1) * sizeof(int32_t));
    else {
        memcpy(*ids, pids, np * sizeof(int32_t));
        memcpy(*ids + np, r.data, nr * sizeof(int32_t));
        const grpo_run *run = &s->ses->run;
        (*ids)[np + nr] = run->n_eos ? run->eos[0] : run->pad_id;
        *n = np + nr + 1, *n_prompt = np;
    }
    free(pids), grpo_tok_ids_free(&r);
    return rc;
}

/* Fills s->sb with the next B examples (right-padded); returns the response token count. */
static int next_batch(sft *s, double *tokens, grpo_error *err) {
    grpo_session *ses = s->ses;
    int32_t B = (int32_t)ses->cfg->train_batch_prompts;
    int32_t *ids[B > 0 ? B : 1];
    size_t n[B > 0 ? B : 1], np[B > 0 ? B : 1], L = 1;
    int rc = GRPO_OK;
    for (int32_t b = 0; b < B; b++) ids[b] = NULL;
    for (int32_t b = 0; rc == GRPO_OK && b < B;) {
        const grpo_example *ex = &ses->data->examples[grpo_data_order_next(&ses->order)];
        int keep = 0;
        rc = example_ids(s, ex, &ids[b], &n[b], &np[b], &keep, err);
        if (rc == GRPO_OK && keep) L = n[b] > L ? n[b] : L, b++;
    }
    if (rc == GRPO_OK) rc = grpo_seqbatch_reset(&s->sb, ses->run.proc.ops, B, (int32_t)L, err);
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
static int sft_passes(sft *s, long pass, double *loss, double *tokens, grpo_error *err) {
    const grpo_run_config *cfg = s->ses->cfg;
    grpo_model *policy = s->ses->policy;
    int rc = next_batch(s, tokens, err);
    if (rc == GRPO_OK) rc = grpo_session_dropout(s->ses, 1, (uint64_t)pass, err);
    if (rc == GRPO_OK) rc = grpo_seqbatch_forward(&s->sb, policy, 0, 1.0f, err);
    if (rc != GRPO_OK) return rc;
    double sum = 0, denom = (*tokens > 0 ? *tokens : 1) * (double)cfg->train_grad_accum;
    size_t cells = (size_t)s->sb.B * s->sb.T;
    for (size_t i = 0; i < cells; i++)
        if (s->sb.targets[i] >= 0) {
            sum -= s->sb.logp[i];
            s->sb.dlogp[i] = (float)(-1.0 / denom);
        }
    *loss += sum / denom;
    double aux;
    if (grpo_seqbatch_aux_loss(&s->sb, policy, cfg->grpo_aux_loss_coef, (int)cfg->train_grad_accum,
                               &aux))
        *loss += cfg->grpo_aux_loss_coef / (double)cfg->train_grad_accum * aux;
    rc = grpo_seqbatch_backward(&s->sb, policy, 0, 1.0f, err);
    return rc == GRPO_OK ? grpo_session_dropout(s->ses, 0, 0, err) : rc;
}

/* sft_passes in train.compute_dtype. */
static int sft_micro(sft *s, long pass, double *loss, double *tokens, grpo_error *err) {
    grpo_session_train_compute(s->ses, 1);
    int rc = sft_passes(s, pass, loss, tokens, err);
    grpo_session_train_compute(s->ses, 0);
    return rc;
}

/* One optimizer step over train.grad_accum batches (grpo_session_step_fn). */
static int sft_step(grpo_session *ses, void *ctx, grpo_error *err) {
    sft *s = ctx;
    double t0 = grpo_now(), loss = 0, tokens = 0;
    int rc = GRPO_OK;
    for (long a = 0; rc == GRPO_OK && a < ses->cfg->train_grad_accum; a++) {
        double n = 0;
        rc = sft_micro(s, a, &loss, &n, err);
        tokens += n;
    }
    grpo_optim_stats os;
    if (rc == GRPO_OK) rc = grpo_session_update(ses, tokens, &os, err);
    if (rc != GRPO_OK) return rc;
    grpo_metric_row row;
    grpo_metric_row_clear(&row);
    grpo_metric_set(&row, "loss", loss);
    rc = grpo_session_log(ses, &row, &os, t0, -1, NULL, err);
    return rc == GRPO_OK ? grpo_session_checkpoint(ses, err) : rc;
}

int grpo_sft(const grpo_sft_opts *o, grpo_error *err) {
    int ranks = grpo_comm_launched_size(); /* N copies would each write the same files */
    if (ranks > 1)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "grpo sft runs as one process only, not data parallel (started "
                              "with %d ranks by mpirun/srun); expected a plain `grpo sft` "
                              "(`grpo train` runs under mpirun)",
                              ranks);
    grpo_session ses;
    sft s = {&ses, {0}};
    int rc = grpo_session_open(&ses, &o->run, o->resume, err);
    ses.method = GRPO_CARD_SFT;
    if (rc == GRPO_OK && ses.cfg->checkpoint_best_metric[0]) /* best.h: GRPO's evaluations */
        rc = grpo_error_set(err, GRPO_ERR_INVALID,
                            "%s: checkpoint.best_metric = %s: grpo sft does not evaluate, so "
                            "there is no metric to keep the best of; expected it empty (it is "
                            "for grpo train with train.eval_every and data.eval_path)",
                            ses.cfg->path, ses.cfg->checkpoint_best_metric);
    if (rc == GRPO_OK && ses.cfg->train_max_tokens_per_microbatch > 0)
        rc = grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                            "%s: train.max_tokens_per_microbatch = %lld: grpo sft does not pack "
                            "its micro-batches yet; expected 0 (packing is for grpo train)",
                            ses.cfg->path, ses.cfg->train_max_tokens_per_microbatch);
    if (rc == GRPO_OK && o->out_dir) /* before any step: --out must not overwrite the model */
        rc = grpo_dirs_apart(o->out_dir, "--out", ses.run.model_dir, "the model directory", err);
    if (rc == GRPO_OK) rc = grpo_session_run(&ses, sft_step, &s, err);
    if (rc == GRPO_OK && o->out_dir) {
        char *card = grpo_session_card(&ses);
        rc = card ? grpo_model_export(ses.policy, ses.lora.n ? &ses.lora : NULL, o->out_dir,
                                      card, err)
                  : grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory writing the model card");
        free(card);
        if (rc == GRPO_OK) fprintf(stderr, "wrote %s\n", o->out_dir);
    }
    grpo_seqbatch_free(&s.sb);
    grpo_error close_err;
    grpo_error_init(&close_err);
    if (grpo_session_close(&ses, &close_err) != GRPO_OK && rc == GRPO_OK)
        *err = close_err, rc = close_err.status;
    return rc;
}
