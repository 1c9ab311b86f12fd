/*
 * schedule.h — learning-rate schedules: the learning rate of each optimizer step.
 *
 * step counts optimizer steps already taken: the update made by the (step+1)-th optimizer step
 * uses grpo_lr_at(s, step). This is the convention of Hugging Face's Trainer (optimizer.step()
 * then scheduler.step(), so the first update uses the factor at 0, which is 0 under warmup) and of
 * torch's CosineAnnealingLR as MiniMind steps it.
 *
 * With w = warmup_steps, S = total_steps (num_training_steps), p = (step - w) / max(1, S - w):
 *   constant              lr                                    (HF get_constant_schedule)
 *   constant_with_warmup  lr * step / max(1, w) while step < w, then lr
 *   linear                warmup, then lr * max(0, (S - step) / max(1, S - w))   (HF default)
 *   cosine                warmup, then lr * max(0, 0.5 (1 + cos(pi * 2 num_cycles * p)))
 *                         (HF get_cosine_schedule_with_warmup; num_cycles 0.5 = one half-wave)
 *   cosine_with_min_lr    warmup, then lr * max(0, f (1 - min_lr_rate) + min_lr_rate) with f the
 *                         cosine factor above (HF get_cosine_with_min_lr_schedule_with_warmup)
 *   minimind              lr * (0.1 + 0.45 (1 + cos(pi * step / S)))   from lr down to lr/10;
 *                         MiniMind's trainer_utils.get_lr since 2025-12-09 (5129f0e) and the
 *                         CosineAnnealingLR(T_max = S, eta_min = lr/10) train_grpo.py uses now.
 *                         Equal to cosine_with_min_lr with w = 0, min_lr_rate = 0.1.
 *   minimind_legacy       lr / 10 + 0.5 lr (1 + cos(pi * step / S))   from 1.1 lr down to lr/10;
 *                         MiniMind's get_lr before 2025-12-06 (e.g. 0323815).
 * Past S the formulas are followed as written (HF's clamp at 0 included); nothing extra is done.
 */
#ifndef GRPO_SCHEDULE_H
#define GRPO_SCHEDULE_H

#include <stddef.h>

#include "grpo/plugin.h" /* grpo_error, GRPO_OK, GRPO_ERR_* */

typedef enum grpo_lr_kind {
    GRPO_LR_CONSTANT = 0,
    GRPO_LR_CONSTANT_WITH_WARMUP,
    GRPO_LR_LINEAR,
    GRPO_LR_COSINE,
    GRPO_LR_COSINE_WITH_MIN_LR,
    GRPO_LR_MINIMIND,
    GRPO_LR_MINIMIND_LEGACY,
    GRPO_LR_KIND_COUNT
} grpo_lr_kind;

typedef struct grpo_lr_schedule {
    grpo_lr_kind kind;
    double lr;          /* the peak (base) learning rate */
    long warmup_steps;  /* w */
    long total_steps;   /* S: optimizer steps of the whole run */
    double num_cycles;  /* cosine kinds; HF default 0.5 */
    double min_lr_rate; /* cosine_with_min_lr: the floor as a fraction of lr */
} grpo_lr_schedule;

/* Checks the fields (lr >= 0, steps >= 0, S >= 1 for the kinds that use it, ...). Returns GRPO_OK,
 * or GRPO_ERR_INVALID with a message naming the field in err (may be NULL). */
int32_t grpo_lr_schedule_check(const grpo_lr_schedule *s, grpo_error *err);

/* The learning rate after `step` optimizer steps (step >= 0). */
double grpo_lr_at(const grpo_lr_schedule *s, long step);

#endif
