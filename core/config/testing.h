/*
 * config/testing.h — entry points of the config layer that only tests and fuzzers call: white-box
 * checks of a module's inner steps (the module itself calls them). They are not part of the
 * layer's interface: no file of core/ outside config/ includes this header (scripts/check_layers.sh
 * checks it).
 */
#ifndef GRPO_CONFIG_TESTING_H
#define GRPO_CONFIG_TESTING_H

#include "config/run_config.h"

/* ---- config.c ---------------------------------------------------------------------------------- */
/* grpo_run_config_load (run_config.h) for text in memory; name stands for the file in messages, and relative input paths
 * are taken relative to the directory part of name. */
int grpo_run_config_load_string(grpo_run_config *cfg, const char *name, const char *text,
                                const grpo_registry *reg, unsigned flags, grpo_diag *diag,
                                grpo_error *err);

/* The reward section [reward.name], or NULL. */
const grpo_reward_spec *grpo_run_config_reward(const grpo_run_config *cfg, const char *name);

/* The key table: [GRPO_RUN_N_KEYS] in config_keys.h order, index GRPO_KEYIDX_section_name. */
const grpo_run_key *grpo_run_keys(void);

/* The candidate closest to typed (edit distance, or a name containing it), or NULL when none is
 * close enough to be a likely typo. For "did you mean ...?". */
const char *grpo_suggest(const char *typed, const char *const *candidates, int n);

#endif
