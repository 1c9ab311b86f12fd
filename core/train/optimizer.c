/* optimizer.c — clip by global norm, scheduled LR, AdamW over a tensor list. */
#include "train/optimizer.h"
#include "train/testing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/clip.h"

int grpo_optim_opts_from_config(grpo_optim_opts *o, const grpo_run_config *cfg, grpo_error *err) {
    memset(o, 0, sizeof *o);
    o->beta1 = cfg->optim_beta1, o->beta2 = cfg->optim_beta2, o->eps = cfg->optim_eps;
    o->weight_decay = cfg->optim_weight_decay, o->max_grad_norm = cfg->optim_max_grad_norm;
    grpo_lr_schedule *s = &o->sched;
    s->lr = cfg->optim_lr, s->warmup_steps = (long)cfg->optim_warmup_steps;
    s->total_steps = (long)cfg->train_steps, s->num_cycles = 0.5, s->min_lr_rate = 0.0;
    switch (cfg->optim_schedule) {
    case GRPO_SCHEDULE_CONSTANT:
        s->kind = s->warmup_steps > 0 ? GRPO_LR_CONSTANT_WITH_WARMUP : GRPO_LR_CONSTANT;
        break;
    case GRPO_SCHEDULE_COSINE: s->kind = GRPO_LR_COSINE; break;
    case GRPO_SCHEDULE_MINIMIND_COSINE: s->kind = GRPO_LR_MINIMIND_LEGACY; break;
    }
    grpo_error why;
    grpo_error_init(&why);
    int rc = grpo_lr_schedule_check(s, &why);
    if (rc != GRPO_OK) return grpo_error_set(err, rc, "%s: [optim]: %s", cfg->path, why.message);
    return GRPO_OK;
}

int grpo_optimizer_init(grpo_optimizer *opt, const grpo_ops *ops, const grpo_optim_opts *o,
                        const grpo_optim_tensor *tensors, int n, grpo_error *err) {
    memset(opt, 0, sizeof *opt);
    opt->ops = ops, opt->o = *o, opt->n_tensors = n;
    opt->t = malloc((size_t)(n > 0 ? n : 1) * sizeof *opt->t);
    if (!opt->t) return grpo_error_set(err, GRPO_ERR_NOMEM, "optimizer: out of memory");
    memcpy(opt->t, tensors, (size_t)n * sizeof *opt->t);
    return GRPO_OK;
}

int grpo_optimizer_init_model(grpo_optimizer *opt, grpo_model *m, const grpo_optim_opts *o,
                              grpo_error *err) {
    if (!m->trainable || !m->grads)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "optimizer: model %s was opened frozen (no gradients)", m->dir);
    grpo_optim_tensor *t = malloc((size_t)m->n_params * sizeof *t);
    if (!t) return grpo_error_set(err, GRPO_ERR_NOMEM, "optimizer: out of memory");
    int n = 0;
    for (uint32_t i = 0; i < m->n_params; i++) {
        if (m->params[i].flags & GRPO_PARAM_TIED) continue;
        uint64_t off = m->offset[i];
        t[n].param = m->param_ptr[i], t[n].grad = m->grad_ptr[i];
        t[n].m = m->adam_m + off, t[n].v = m->adam_v + off;
        t[n].n = m->numel[i];
        t[n].decay = !(m->params[i].flags & GRPO_PARAM_NO_DECAY);
        n++;
    }
    int rc = grpo_optimizer_init(opt, m->ops, o, t, n, err);
    free(t);
    return rc;
}

int grpo_optimizer_init_lora(grpo_optimizer *opt, const grpo_lora *l, const grpo_optim_opts *o,
                             grpo_error *err) {
    grpo_optim_tensor *t = malloc((2 * (size_t)l->n + 1) * sizeof *t);
    if (!t) return grpo_error_set(err, GRPO_ERR_NOMEM, "optimizer: out of memory");
    float *M = l->block + 2 * l->floats, *V = l->block + 3 * l->floats;
    for (uint32_t i = 0; i < l->n; i++) {
        const grpo_lora_adapter *a = &l->ad[i];
        const int64_t *shape = l->m->params[a->param].shape; /* (OC,IC) */
        uint64_t offA = (uint64_t)(a->A - l->block), offB = (uint64_t)(a->B - l->block);
        t[2 * i] = (grpo_optim_tensor){a->A, a->dA, M + offA, V + offA,
                                       (uint64_t)l->r * shape[1], 1};
        t[2 * i + 1] = (grpo_optim_tensor){a->B, a->dB, M + offB, V + offB,
                                           (uint64_t)shape[0] * l->r, 1};
    }
    int rc = grpo_optimizer_init(opt, l->m->ops, o, t, 2 * (int)l->n, err);
    free(t);
    return rc;
}

void grpo_optimizer_free(grpo_optimizer *opt) {
    free(opt->t);
    memset(opt, 0, sizeof *opt);
}

/* Zeroes every gradient (start of an accumulation). */
static void grpo_optimizer_zero_grad(grpo_optimizer *opt) {
    for (int i = 0; i < opt->n_tensors; i++)
        opt->ops->zero(opt->ops->ctx, opt->t[i].grad, opt->t[i].n * sizeof(float));
}

int grpo_optimizer_step(grpo_optimizer *opt, grpo_optim_stats *stats, grpo_error *err) {
    const grpo_ops *ops = opt->ops;
    double *sumsq = malloc((size_t)(opt->n_tensors > 0 ? opt->n_tensors : 1) * sizeof *sumsq);
    if (!sumsq) return grpo_error_set(err, GRPO_ERR_NOMEM, "optimizer: out of memory");
    for (int i = 0; i < opt->n_tensors; i++)
        sumsq[i] = ops->sumsq(ops->ctx, opt->t[i].grad, opt->t[i].n);
    double norm = grpo_grad_total_norm(sumsq, opt->n_tensors);
    free(sumsq);
    stats->grad_norm = norm;
    stats->lr = grpo_lr_at(&opt->o.sched, opt->step);
    stats->skipped = !isfinite(norm);
    if (stats->skipped) {
        grpo_optimizer_zero_grad(opt);
        return GRPO_OK;
    }
    double coef = grpo_grad_clip_coef(norm, opt->o.max_grad_norm);
    for (int i = 0; i < opt->n_tensors; i++) {
        grpo_optim_tensor *t = &opt->t[i];
        if (opt->o.max_grad_norm > 0 && (float)coef != 1.0f) /* x * 1 = x: no pass */
            ops->scale(ops->ctx, t->grad, (float)coef, t->n);
        ops->adamw(ops->ctx, t->param, t->grad, t->m, t->v, t->n, stats->lr, opt->o.beta1,
                   opt->o.beta2, opt->o.eps, t->decay ? opt->o.weight_decay : 0.0,
                   (int32_t)(opt->step + 1));
    }
    grpo_optimizer_zero_grad(opt);
    opt->step++;
    return GRPO_OK;
}
