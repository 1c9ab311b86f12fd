/* reference.c — the reference model's life: open, log-probs, refresh, save and prune
 * (see reference.h). */
#include "train/reference.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "base/comm.h"
#include "base/files.h"
#include "train/checkpoint.h"

/* Whether the reference has been refreshed by step (so it is no longer reference.path). */
static int ref_diverged(const grpo_run_config *cfg, long step) {
    return cfg->grpo_sync_ref_every > 0 && step >= cfg->grpo_sync_ref_every;
}

/* CHECKPOINT_DIR/reference-STEP: the refreshed reference that goes with checkpoint-STEP. */
static int ref_ckpt_dir(const grpo_run_config *cfg, long step, char *out, size_t size) {
    int n = snprintf(out, size, "%s/reference-%08ld", cfg->checkpoint_dir, step);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* A run resumed after a refresh: the reference saved with its checkpoint, not the path. */
static int open_saved(grpo_reference *r, grpo_session *s, grpo_error *err) {
    char saved[4096];
    struct stat sb;
    if (ref_ckpt_dir(s->cfg, s->st.step, saved, sizeof saved) != 0 || stat(saved, &sb) != 0)
        return grpo_error_set(err, GRPO_ERR_IO,
                              "--resume: %s is missing: the reference was refreshed "
                              "(grpo.sync_ref_every = %lld) and must be resumed with the "
                              "policy; expected the reference-STEP directory the trainer saves "
                              "beside checkpoint-STEP",
                              saved, s->cfg->grpo_sync_ref_every);
    return grpo_run_open_model(&s->run, saved, 0, &r->model, err);
}

/* The model the reference pass runs. */
static grpo_model *ref_model(const grpo_reference *r, const grpo_session *s) {
    return r->is_base ? s->policy : r->model;
}

/* grpo.ref_compute_dtype = bf16: checked on the backend, kept for each pass (the model itself
 * left in f32: for a LoRA run it is the policy). */
static int ref_compute(grpo_reference *r, grpo_session *s, grpo_error *err) {
    if (s->cfg->grpo_ref_compute_dtype != GRPO_REF_COMPUTE_BF16) return GRPO_OK;
    grpo_model *m = ref_model(r, s);
    int rc = grpo_run_compute_bf16(&s->run, m, "grpo.ref_compute_dtype", err);
    if (rc == GRPO_OK) rc = grpo_model_set_compute(m, GRPO_DTYPE_F32, err);
    if (rc == GRPO_OK) r->compute_dtype = GRPO_DTYPE_BF16;
    return rc;
}

static int open_model(grpo_reference *r, grpo_session *s, grpo_error *err) {
    const grpo_run_config *cfg = s->cfg;
    if (s->lora.n && !cfg->line[GRPO_KEYIDX_reference_path]) { /* no second copy */
        r->is_base = 1;
        return GRPO_OK;
    }
    if (s->resumed && ref_diverged(cfg, s->st.step)) return open_saved(r, s, err);
    char *ref = cfg->line[GRPO_KEYIDX_reference_path] ? grpo_run_path(&s->run, cfg->reference_path)
                                                      : NULL;
    int rc = grpo_run_open_model(&s->run, ref ? ref : s->run.model_dir, 0, &r->model, err);
    free(ref);
    return rc;
}

int grpo_reference_open(grpo_reference *r, grpo_session *s, grpo_error *err) {
    r->compute_dtype = GRPO_DTYPE_F32;
    if (!(s->cfg->grpo_beta > 0)) return GRPO_OK;
    int rc = open_model(r, s, err);
    return rc == GRPO_OK ? ref_compute(r, s, err) : rc;
}

int grpo_reference_on(const grpo_reference *r) { return r->model || r->is_base; }

int grpo_reference_logp(const grpo_reference *r, grpo_session *s, grpo_seqbatch *sb, float scale,
                        int32_t T, float *out, grpo_error *err) {
    int rc = r->is_base ? grpo_lora_enable(&s->lora, 0, err) : GRPO_OK;
    grpo_model *m = ref_model(r, s);
    int32_t keep = m->compute_dtype;
    m->compute_dtype = r->compute_dtype; /* checked by ref_compute */
    if (rc == GRPO_OK) rc = grpo_seqbatch_forward(sb, m, 0, scale, err);
    m->compute_dtype = keep;
    if (rc == GRPO_OK) grpo_seqbatch_completion(sb, sb->logp, T, out);
    if (r->is_base) { /* the adapters back on, also after a failed forward */
        int on = grpo_lora_enable(&s->lora, 1, err);
        if (rc == GRPO_OK) rc = on;
    }
    return rc;
}

int grpo_ref_sync(grpo_model *ref, const grpo_model *policy, double alpha, grpo_error *err) {
    if (!ref || ref->section != policy->section || ref->n_params != policy->n_params)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "sync_ref: the reference model (%s) does not have the policy's "
                              "parameters (%s); expected the same architecture and shapes",
                              ref ? ref->dir : "none", policy->dir);
    const grpo_ops *ops = ref->ops;
    uint64_t P = ref->section, bytes = P * sizeof(float);
    float *mix = ops->alloc(ops->ctx, bytes); /* (P) alpha * policy */
    if (!mix) return grpo_error_set(err, GRPO_ERR_NOMEM, "sync_ref: out of memory (%llu floats)",
                                    (unsigned long long)P);
    ops->copy(ops->ctx, mix, policy->block, bytes);
    ops->scale(ops->ctx, mix, (float)alpha, P);
    ops->scale(ops->ctx, ref->block, (float)(1.0 - alpha), P);
    ops->accumulate(ops->ctx, ref->block, mix, P);
    ops->free(ops->ctx, mix);
    return GRPO_OK;
}

int grpo_reference_checkpoint(const grpo_reference *r, const grpo_session *s, grpo_error *err) {
    const grpo_run_config *cfg = s->cfg;
    long step = s->st.step;
    if (!r->model || !ref_diverged(cfg, step) || grpo_comm_rank() != 0) return GRPO_OK;
    if (!(cfg->checkpoint_every > 0 && step % cfg->checkpoint_every == 0) &&
        step < cfg->train_steps)
        return GRPO_OK;
    char dir[4096];
    if (ref_ckpt_dir(cfg, step, dir, sizeof dir) != 0)
        return grpo_error_set(err, GRPO_ERR_INVALID, "checkpoint.dir %s: path too long",
                              cfg->checkpoint_dir);
    return grpo_model_save(r->model, dir, err);
}

void grpo_reference_prune(const grpo_reference *r, const grpo_session *s) {
    const grpo_run_config *cfg = s->cfg;
    if (!r->model || cfg->grpo_sync_ref_every <= 0) return;
    if (grpo_comm_rank() != 0) return; /* rank 0 writes the checkpoints */
    long *steps = NULL, step;
    int n = grpo_ckpt_list(cfg->checkpoint_dir, &steps, NULL);
    DIR *d = n >= 0 ? opendir(cfg->checkpoint_dir) : NULL;
    struct dirent *e;
    char dir[4096], tail;
    while (d && (e = readdir(d))) {
        if (sscanf(e->d_name, "reference-%ld%c", &step, &tail) != 1 || step >= s->st.step)
            continue;
        int kept = 0;
        for (int i = 0; i < n; i++) kept |= steps[i] == step;
        if (!kept && ref_ckpt_dir(cfg, step, dir, sizeof dir) == 0)
            grpo_remove_tree(dir); /* best effort, as the rest of the pruning */
    }
    if (d) closedir(d);
    free(steps);
}

void grpo_reference_close(grpo_reference *r) {
    grpo_model_close(r->model);
    r->model = NULL, r->is_base = 0;
}
