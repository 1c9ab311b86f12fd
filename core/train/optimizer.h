/*
 * optimizer.h — one optimizer step over a set of tensors: clip by global norm (clip.h's torch
 * arithmetic), the learning rate of this step (schedule.h), AdamW through the backend's op
 * (ops->adamw: torch.optim.AdamW's single-tensor path), then the gradients are zeroed.
 *
 * Gradient accumulation is the caller's: backward passes add (+=) into the gradients, the loss
 * carries the 1/accumulation factor (loss.h), and one grpo_optimizer_step ends the accumulation.
 * Weight decay applies to the tensors marked decay (a model's tensors without GRPO_PARAM_NO_DECAY,
 * i.e. torch's two parameter groups). Tied tensors are skipped: they share their target's storage.
 *
 * Ownership: the optimizer borrows every buffer (params, grads, moments live in the model's
 * block); it owns only its tensor list. Not thread-safe.
 */
#ifndef GRPO_OPTIMIZER_H
#define GRPO_OPTIMIZER_H

#include <stdint.h>

#include "config/run_config.h"
#include "grpo/ops.h"
#include "host/lora.h"
#include "host/model_instance.h"
#include "train/schedule.h"

typedef struct grpo_optim_tensor {
    float *param, *grad, *m, *v; /* (n) each, backend memory */
    uint64_t n;
    int decay; /* 1: weight decay applies */
} grpo_optim_tensor;

typedef struct grpo_optim_opts {
    double beta1, beta2, eps, weight_decay;
    double max_grad_norm;   /* <= 0: no clipping */
    grpo_lr_schedule sched; /* lr, warmup, total steps */
} grpo_optim_opts;

typedef struct grpo_optimizer {
    const grpo_ops *ops;
    grpo_optim_opts o;
    grpo_optim_tensor *t; /* [n_tensors] */
    int n_tensors;
    long step; /* optimizer steps taken (the next update is step + 1 for AdamW) */
} grpo_optimizer;

typedef struct grpo_optim_stats {
    double grad_norm; /* total norm before clipping (torch's clip_grad_norm_ return value) */
    double lr;        /* learning rate this step used */
    int skipped;      /* 1 when the norm was not finite: no update was made */
} grpo_optim_stats;

/* The options of a run file's [optim] section with total = cfg->train_steps. */
int grpo_optim_opts_from_config(grpo_optim_opts *o, const grpo_run_config *cfg, grpo_error *err);

/* Over every non-tied tensor of a trainable model. */
int grpo_optimizer_init_model(grpo_optimizer *opt, grpo_model *m, const grpo_optim_opts *o,
                              grpo_error *err);
/* Over the A and B of every LoRA adapter of l (weight decay applies to both, as in PEFT runs
 * under transformers' Trainer); moments in l's block. */
int grpo_optimizer_init_lora(grpo_optimizer *opt, const grpo_lora *l, const grpo_optim_opts *o,
                             grpo_error *err);
void grpo_optimizer_free(grpo_optimizer *opt);

/* Clips, steps AdamW with the scheduled lr, zeroes the gradients, step++. A non-finite gradient
 * norm skips the update (gradients still zeroed, step not counted) and sets stats->skipped. */
int grpo_optimizer_step(grpo_optimizer *opt, grpo_optim_stats *stats, grpo_error *err);

#endif
