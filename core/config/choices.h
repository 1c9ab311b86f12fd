/*
 * choices.h — the enums of the run file's choice keys (grpo_loss_type, grpo_scale_rewards,
 * grpo_schedule, ...) and their names, generated once from the choice lists of config_keys.h, so
 * that run_config.h and the modules that use a choice (loss.h, advantage.h) share one definition.
 */
#ifndef GRPO_CHOICES_H
#define GRPO_CHOICES_H

#include "config/config_keys.h"

/* enum grpo_dtype, grpo_backend, grpo_loss_type, ...: one per choice list of config_keys.h. */
#define GRPO_CHOICE_CONST_(constant, text) constant,
#define GRPO_IGNORE_(s, n, d, c, h)
#define GRPO_CHOICE_ENUM_(s, n, d, list, h) \
    typedef enum grpo_##list { GRPO_CHOICES_##list(GRPO_CHOICE_CONST_) } grpo_##list;
GRPO_RUN_KEYS(GRPO_IGNORE_, GRPO_IGNORE_, GRPO_IGNORE_, GRPO_IGNORE_, GRPO_CHOICE_ENUM_)

#define GRPO_LOSS_TYPE_COUNT (GRPO_LOSS_SAPO + 1)

/* grpo_choices_dtype[], grpo_choices_loss_type[], ...: the texts of each list, index = enum value,
 * NULL-terminated (defined in config.c). */
#define GRPO_CHOICE_NAMES_(s, n, d, list, h) extern const char *const grpo_choices_##list[];
GRPO_RUN_KEYS(GRPO_IGNORE_, GRPO_IGNORE_, GRPO_IGNORE_, GRPO_IGNORE_, GRPO_CHOICE_NAMES_)

/* The index of text in a NULL-terminated choice list (= its enum value), or -1. */
int grpo_choice_index(const char *const *choices, const char *text);

#endif
