/* session.c — the training session `grpo train` and `grpo sft` share (see session.h). */
#include "train/session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/comm.h"
#include "base/files.h"
#include "base/rng.h"
#include "train/checkpoint.h"
#include "train/run_record.h"

/* A LoRA run's policy: model.path frozen (in bf16 with lora.base_dtype = bf16), with fresh
 * adapters (PEFT's init from train.seed). */
static int open_lora(grpo_session *s, grpo_error *err) {
    const grpo_run_config *cfg = s->cfg;
    grpo_lora_opts lo = {(int32_t)cfg->lora_r, cfg->lora_alpha, cfg->lora_use_rslora,
                         cfg->lora_target_modules, cfg->lora_dropout};
    int32_t dtype = cfg->lora_base_dtype == GRPO_BASE_BF16 ? GRPO_DTYPE_BF16 : GRPO_DTYPE_F32;
    int rc = grpo_run_open_model_as(&s->run, s->run.model_dir, 0, dtype, &s->policy, err);
    if (rc == GRPO_OK) rc = grpo_lora_attach(&s->lora, s->policy, &lo, (uint64_t)cfg->train_seed,
                                             err);
    return rc;
}

/* The trainable policy: from model.path, or on --resume from the newest whole checkpoint (a
 * LoRA run: model.path and the newest checkpoint's adapters). */
static int open_policy(grpo_session *s, grpo_error *err) {
    const grpo_run_config *cfg = s->cfg;
    int lora = cfg->lora_r > 0, rc = lora ? open_lora(s, err) : GRPO_OK;
    if (rc != GRPO_OK) return rc;
    if (!s->resumed)
        return lora ? GRPO_OK
                    : grpo_run_open_model(&s->run, s->run.model_dir, 1, &s->policy, err);
    rc = grpo_checkpoint_resume(&s->run, cfg->checkpoint_dir, &s->policy,
                                lora ? &s->lora : NULL, &s->st, err);
    if (rc == GRPO_OK) { /* the run file and data it was written with, or changes allowed */
        char dir[4200];
        grpo_ckpt_dir(cfg->checkpoint_dir, s->st.step, dir, sizeof dir);
        return grpo_run_record_check_resume(dir, s->record, s->run_allow_change, err);
    }
    char msg[sizeof err->message];
    snprintf(msg, sizeof msg, "%s", err->message);
    return grpo_error_set(err, rc,
                          "--resume: %s (checkpoint.dir = %s; run without --resume to start from "
                          "model.path)",
                          msg, cfg->checkpoint_dir);
}

/* data.path and its order: fresh from data.seed, or where the checkpoint's cursor left it. */
static int open_data(grpo_session *s, grpo_error *err) {
    const grpo_run_config *cfg = s->cfg;
    if (!cfg->data_path[0])
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: [data] path is not set", cfg->path);
    char *data = grpo_run_path(&s->run, cfg->data_path);
    int rc = data ? grpo_run_dataset(&s->run, data, &s->data, err)
                  : grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    free(data);
    if (rc != GRPO_OK) return rc;
    return grpo_train_data_order(&s->order, &s->run, s->data, &s->st, s->resumed, err);
}

/* The files a run writes into log.dir (truncated or replaced when a run starts). */
static const char *const log_files[] = {"config.ini", "metrics.jsonl", "completions.jsonl"};
#define RUN_ID_LINE "; run_id = " /* config.ini's mark of the run that wrote log.dir */

/* The run_id config.ini in log.dir carries into id (33 bytes; "" when it has none). 0 when the
 * file does not exist. */
static int log_dir_mark(const char *log_dir, char id[33]) {
    char path[4200], *text = NULL;
    grpo_error ignored;
    id[0] = '\0';
    snprintf(path, sizeof path, "%s/config.ini", log_dir);
    if (access(path, F_OK) != 0) return 0;
    if (grpo_read_file(path, &text, NULL, &ignored) == GRPO_OK) {
        const char *at = strstr(text, RUN_ID_LINE), *hex = at ? at + strlen(RUN_ID_LINE) : NULL;
        if (hex && strspn(hex, "0123456789abcdef") == 32) snprintf(id, 33, "%.32s", hex);
    }
    free(text);
    return 1;
}

/* A run never truncates or replaces a log file it did not write: a new run wants log.dir free of
 * them (an empty one holds nothing to lose), a resumed one the mark of the run it resumes (config.ini's run_id, when it has one: a
 * log.dir written before the mark existed is taken as the run's own). */
static int check_log_dir(const grpo_session *s, grpo_error *err) {
    const char *dir = s->cfg->log_dir;
    char path[4200], id[33];
    if (s->resumed) {
        if (!log_dir_mark(dir, id) || !id[0] || !strcmp(id, s->st.run_id)) return GRPO_OK;
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s/config.ini: log.dir holds the logs of another run (run_id %s; "
                              "the checkpoint resumed is run %s): grpo does not mix or cut them; "
                              "expected the log.dir of the run that wrote checkpoint.dir",
                              dir, id, s->st.run_id);
    }
    for (size_t i = 0; i < sizeof log_files / sizeof *log_files; i++) {
        struct stat st; /* an empty file or a device (/dev/null) holds nothing to lose */
        snprintf(path, sizeof path, "%s/%s", dir, log_files[i]);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "%s: log.dir already holds a run's %s and grpo does not "
                                  "overwrite it; expected an empty log.dir (or --resume to go on "
                                  "with the run that wrote it)",
                                  path, log_files[i]);
    }
    return GRPO_OK;
}

/* train.compute_dtype = bf16: checked on the backend (refused naming the key and what the CPU
 * or the backend lacks), kept for the training passes; the policy itself left in f32. */
static int train_compute(grpo_session *s, grpo_error *err) {
    s->compute_dtype = GRPO_DTYPE_F32;
    if (s->cfg->train_compute_dtype != GRPO_TRAIN_COMPUTE_BF16) return GRPO_OK;
    int rc = grpo_run_check_bf16(&s->run, s->policy, "train.compute_dtype", err);
    if (rc == GRPO_OK) s->compute_dtype = GRPO_DTYPE_BF16;
    return rc;
}

int grpo_session_open(grpo_session *s, const grpo_run_args *a, int resume, grpo_error *err) {
    memset(s, 0, sizeof *s);
    s->resumed = resume;
    int rc = grpo_run_open(&s->run, a, err);
    if (rc != GRPO_OK) return rc;
    const grpo_run_config *cfg = s->cfg = &s->run.cfg;
    grpo_rng_seed(&s->st.rng, (uint64_t)cfg->sampling_seed); /* a resume restores it */
    grpo_run_id_new(s->st.run_id); /* a resume restores the run's own (when it has one) */
    s->run_allow_change = a->allow_change;
    if (!(s->record = grpo_run_record_make(&s->run, err))) return err->status;
    s->st.record = s->record;
    if ((rc = grpo_run_record_check_ranks(s->record, err)) != GRPO_OK) return rc;
    if (grpo_comm_rank() == 0 && (rc = grpo_ckpt_prepare(cfg->checkpoint_dir, err)) != GRPO_OK)
        return rc;
    if ((rc = open_policy(s, err)) != GRPO_OK) return rc;
    if ((rc = train_compute(s, err)) != GRPO_OK) return rc;
    if (cfg->train_gradient_checkpointing &&
        (rc = grpo_model_set_gradient_checkpointing(s->policy, 1, err)) != GRPO_OK)
        return rc;
    grpo_optim_opts oo;
    if ((rc = grpo_optim_opts_from_config(&oo, cfg, err)) != GRPO_OK) return rc;
    rc = s->lora.n ? grpo_optimizer_init_lora(&s->opt, &s->lora, &oo, err)
                   : grpo_optimizer_init_model(&s->opt, s->policy, &oo, err);
    if (rc != GRPO_OK) return rc;
    s->opt.step = s->st.optimizer_step;
    if (grpo_comm_rank() == 0 && (rc = check_log_dir(s, err)) != GRPO_OK) return rc;
    return open_data(s, err);
}

void grpo_session_train_compute(grpo_session *s, int on) {
    s->policy->compute_dtype = on ? s->compute_dtype : GRPO_DTYPE_F32; /* checked at open */
}

int grpo_session_dropout(grpo_session *s, int on, uint64_t pass, grpo_error *err) {
    if (!s->lora.n || s->lora.dropout <= 0.0) return GRPO_OK;
    grpo_rng r; /* a seed per (train.seed, step, pass): independent of anything else drawn */
    grpo_rng_seed_stream(&r, (uint64_t)s->cfg->train_seed ^ 0x6c6f726164726f70ull /* loradrop */,
                         (uint64_t)s->st.step, pass);
    return grpo_lora_dropout(&s->lora, on, grpo_rng_next(r.s), err);
}

int grpo_session_log_open(const grpo_session *s, const char *name, grpo_run_log *l,
                          grpo_error *err) {
    if (grpo_comm_rank() != 0) { /* rank 0 writes the logs (data parallel, comm.h) */
        l->f = NULL;
        return GRPO_OK;
    }
    if (grpo_mkdirs(s->cfg->log_dir) != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "cannot create log.dir %s: %s", s->cfg->log_dir,
                              strerror(errno));
    return grpo_run_log_open(l, s->cfg->log_dir, name, s->resumed ? s->st.step : -1, err);
}

int grpo_session_close(grpo_session *s, grpo_error *err) {
    int rc = grpo_run_log_close(&s->metrics, err);
    int rc_tb = grpo_tfevents_close(&s->tb, err);
    if (rc == GRPO_OK) rc = rc_tb;
    grpo_optimizer_free(&s->opt);
    grpo_data_order_free(&s->order);
    grpo_dataset_free(s->data);
    grpo_lora_free(&s->lora); /* before the model it sits on */
    grpo_model_close(s->policy);
    grpo_run_close(&s->run);
    free(s->record);
    return rc;
}

/* checkpoint.dir/checkpoint-STEP, or with best checkpoint.dir/checkpoint-best. */
static int save_as(grpo_session *s, int best, grpo_error *err) {
    s->st.cursor = s->order.cur;
    s->st.optimizer_step = s->opt.step;
    if (grpo_comm_rank() != 0) return GRPO_OK; /* every rank holds the same state; one writes */
    const char *root = s->cfg->checkpoint_dir;
    const grpo_lora *lora = s->lora.n ? &s->lora : NULL;
    char *card = grpo_session_card(s);
    int rc = !card ? grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory writing the model card")
             : best ? grpo_checkpoint_save_best(root, s->policy, lora, &s->st, card, err)
                    : grpo_checkpoint_save(root, (int)s->cfg->checkpoint_keep, s->policy, lora,
                                           &s->st, card, err);
    free(card);
    return rc;
}

static int save(grpo_session *s, grpo_error *err) { return save_as(s, 0, err); }

int grpo_session_save_best(grpo_session *s, grpo_error *err) { return save_as(s, 1, err); }

int grpo_session_log_text(grpo_session *s, const char *tag, const char *text, grpo_error *err) {
    return s->tb.f ? grpo_tfevents_text(&s->tb, grpo_wall_time(), s->st.step, tag, text, err)
                   : GRPO_OK;
}

char *grpo_session_card(const grpo_session *s) {
    return grpo_model_card(s->cfg, s->run.model_dir, s->method, s->st.step, &s->last);
}

/* log.dir/config.ini: the run file as this run resolved it (--set overrides included). */
static int save_resolved_config(const grpo_session *s, grpo_error *err) {
    char path[4200], *text = NULL;
    size_t len = 0;
    int rc = grpo_path_join(path, sizeof path, s->cfg->log_dir, "config.ini", err);
    FILE *f = rc == GRPO_OK ? open_memstream(&text, &len) : NULL;
    if (rc == GRPO_OK && !f) rc = grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    if (f) fprintf(f, RUN_ID_LINE "%s\n", s->st.run_id); /* the mark check_log_dir reads */
    if (f && (grpo_run_config_dump(s->cfg, f) != 0) + (fclose(f) != 0))
        rc = grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", path);
    if (rc == GRPO_OK) rc = grpo_write_file_atomic(path, text, len, err);
    free(text);
    return rc;
}

int grpo_session_run(grpo_session *s, grpo_session_step_fn step, void *ctx, grpo_error *err) {
    const grpo_run_config *cfg = s->cfg;
    int rc = grpo_session_log_open(s, "metrics.jsonl", &s->metrics, err), rank0 = !grpo_comm_rank();
    if (rc == GRPO_OK && rank0) rc = save_resolved_config(s, err);
    if (rc == GRPO_OK && rank0 && cfg->log_tensorboard)
        rc = grpo_tfevents_open(&s->tb, cfg->log_dir, grpo_wall_time(),
                                s->resumed ? s->st.step : -1, err);
    if (rc != GRPO_OK) return rc;
    if (s->st.step >= cfg->train_steps && rank0)
        fprintf(stderr, "nothing to do: step %ld of train.steps = %lld already reached\n",
                s->st.step, cfg->train_steps);
    s->start = grpo_now();
    for (s->steps_done = 0; rc == GRPO_OK && s->st.step < cfg->train_steps; s->steps_done++)
        rc = step(s, ctx, err);
    if (rc != GRPO_OK || s->steps_done == 0) return rc;
    if ((rc = save(s, err)) == GRPO_OK && rank0)
        fprintf(stderr, "saved %s/checkpoint-%08ld\n", cfg->checkpoint_dir, s->st.step);
    return rc;
}

int grpo_session_update(grpo_session *s, double new_tokens, grpo_optim_stats *os,
                        grpo_error *err) {
    int rc = grpo_optimizer_step(&s->opt, os, err);
    if (rc != GRPO_OK) return rc;
    if (os->skipped)
        fprintf(stderr, "warning: step %ld: gradient norm is not finite; update skipped\n",
                s->st.step + 1);
    s->st.step++;
    s->st.num_tokens += new_tokens;
    return GRPO_OK;
}

int grpo_session_log(grpo_session *s, grpo_metric_row *row, const grpo_optim_stats *os, double t0,
                     double tokens, const grpo_metric_row *timings, grpo_error *err) {
    const grpo_run_config *cfg = s->cfg;
    double dt = grpo_now() - t0;
    grpo_metric_set(row, "grad_norm", os->grad_norm);
    grpo_metric_set(row, "learning_rate", os->lr);
    grpo_metric_set(row, "num_tokens", s->st.num_tokens);
    grpo_metric_set(row, "step_time", dt);
    grpo_metric_set(row, "world_size", grpo_comm_size());
    /* what train.gradient_checkpointing saves (perf/: not a result of training) */
    grpo_metric_set(row, "perf/activation_bytes_per_token",
                    grpo_model_activation_bytes_per_token(s->policy));
    if (tokens >= 0) grpo_metric_set(row, "throughput/tokens_per_s", tokens / dt);
    for (int i = 0; timings && i < timings->n; i++)
        grpo_metric_set(row, timings->names[i], timings->values[i]);
    s->last = *row;
    if (s->st.step % cfg->log_every != 0 && s->st.step != cfg->train_steps) return GRPO_OK;
    if (grpo_comm_rank() != 0) return GRPO_OK; /* rank 0 logs and prints */
    int rc = grpo_run_log_metrics(&s->metrics, s->st.step, row, err);
    if (rc == GRPO_OK && s->tb.f) {
        const char *tags[GRPO_METRICS_MAX];
        for (int i = 0; i < row->n; i++) tags[i] = row->names[i];
        rc = grpo_tfevents_scalars(&s->tb, grpo_wall_time(), s->st.step, tags, row->values, row->n,
                                   err);
    }
    if (rc == GRPO_OK)
        grpo_progress_print(stderr, s->st.step, (long)cfg->train_steps, grpo_now() - s->start,
                            s->steps_done + 1, row);
    return rc;
}

int grpo_session_checkpoint(grpo_session *s, grpo_error *err) {
    const grpo_run_config *cfg = s->cfg;
    if (cfg->checkpoint_every > 0 && s->st.step % cfg->checkpoint_every == 0 &&
        s->st.step < cfg->train_steps)
        return save(s, err);
    return GRPO_OK;
}
