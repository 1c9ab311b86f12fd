/* schedule.c — learning-rate schedules (formulas in schedule.h). */
#include "train/schedule.h"

#include <math.h>
#include <string.h>

static const char *kind_names[GRPO_LR_KIND_COUNT] = {
    "constant", "constant_with_warmup", "linear", "cosine", "cosine_with_min_lr",
    "minimind", "minimind_legacy"};

/* HF's lr_scheduler_type spellings for the HF kinds (for messages). */
static const char *kind_name(grpo_lr_kind k) {
    return (unsigned)k < GRPO_LR_KIND_COUNT ? kind_names[k] : "?";
}

int32_t grpo_lr_schedule_check(const grpo_lr_schedule *s, grpo_error *err) {
    const char *bad = NULL;
    int needs_total = s->kind >= GRPO_LR_LINEAR;
    if ((unsigned)s->kind >= GRPO_LR_KIND_COUNT) bad = "kind: a grpo_lr_kind";
    else if (!(s->lr >= 0.0) || isinf(s->lr)) bad = "lr: a finite number >= 0";
    else if (s->warmup_steps < 0) bad = "warmup_steps >= 0";
    else if (needs_total && s->total_steps < 1) bad = "total_steps >= 1";
    else if (s->kind == GRPO_LR_COSINE_WITH_MIN_LR &&
             !(s->min_lr_rate >= 0.0 && s->min_lr_rate <= 1.0))
        bad = "min_lr_rate in [0, 1]";
    else if ((s->kind == GRPO_LR_COSINE || s->kind == GRPO_LR_COSINE_WITH_MIN_LR) &&
             !isfinite(s->num_cycles))
        bad = "num_cycles: a finite number";
    if (!bad) return GRPO_OK;
    return grpo_error_set(err, GRPO_ERR_INVALID, "schedule.c: the %s schedule needs %s",
                          kind_name(s->kind), bad);
}

static double cosine_factor(const grpo_lr_schedule *s, long step, double min_rate) {
    double span = fmax(1.0, (double)(s->total_steps - s->warmup_steps));
    double p = (double)(step - s->warmup_steps) / span;
    double f = 0.5 * (1.0 + cos(M_PI * s->num_cycles * 2.0 * p));
    return fmax(0.0, f * (1.0 - min_rate) + min_rate);
}

double grpo_lr_at(const grpo_lr_schedule *s, long step) {
    const double S = (double)s->total_steps, w = (double)s->warmup_steps;
    int warming = step < s->warmup_steps;
    double warm = (double)step / fmax(1.0, w);
    switch (s->kind) {
    case GRPO_LR_CONSTANT: return s->lr;
    case GRPO_LR_CONSTANT_WITH_WARMUP: return s->lr * (warming ? warm : 1.0);
    case GRPO_LR_LINEAR:
        return s->lr * (warming ? warm : fmax(0.0, (S - (double)step) / fmax(1.0, S - w)));
    case GRPO_LR_COSINE: return s->lr * (warming ? warm : cosine_factor(s, step, 0.0));
    case GRPO_LR_COSINE_WITH_MIN_LR:
        return s->lr * (warming ? warm : cosine_factor(s, step, s->min_lr_rate));
    case GRPO_LR_MINIMIND: return s->lr * (0.1 + 0.45 * (1.0 + cos(M_PI * (double)step / S)));
    case GRPO_LR_MINIMIND_LEGACY:
        return s->lr / 10.0 + 0.5 * s->lr * (1.0 + cos(M_PI * (double)step / S));
    default: return NAN;
    }
}
