/*
 * run_config.h — run files: everything one training run uses, read from INI and validated.
 *
 * A run file has the sections [model] [reference] [data] [sampling] [grpo] [optim] [train] [log]
 * [checkpoint], whose keys are all defined in config_keys.h, and one [reward.NAME] section per
 * reward:
 *     [reward.fmt]
 *     plugin = builtin.format     ; pack.id of a reward on the plugin path (required)
 *     weight = 1.0                ; r = sum_k weight_k * r_k (default 1.0)
 *     isolate = false             ; true: score in a worker process (see rewards.h)
 *     timeout = 60                ; seconds one score call may take (see rewards.h)
 *     workers = 1                 ; score calls that may run at once (see reward_pool.h)
 *     rows_independent = false    ; default: the manifest's (see reward_pool.h)
 *     pattern = ^<answer>         ; then the plugin's own keys, as its pack.ini declares them
 * A list key is written once per element; when the file sets it, its elements replace the
 * manifest's default list. A key whose manifest gives no default must be set.
 * The INI dialect (comments, ';' in values, continuation lines) is described in ini_reader.h.
 *
 * Every problem is reported, not just the first, each as one line
 *     FILE:LINE: what is wrong; what was expected (did you mean ...?)
 * ("FILE: ..." when no line applies, e.g. a missing section). Nothing is half-loaded: on failure
 * the config is left empty.
 */
#ifndef GRPO_CONFIG_H
#define GRPO_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "config/choices.h"
#include "config/config_keys.h"
#include "grpo/plugin.h"
#include "io/ini_reader.h"
#include "io/keytype.h"
#include "host/registry.h"

/* GRPO_KEYIDX_section_name: index of each key in grpo_run_keys() and the per-key arrays. */
#define GRPO_KEYIDX_(s, n, d, c, h) GRPO_KEYIDX_##s##_##n,
enum {
    GRPO_RUN_KEYS(GRPO_KEYIDX_, GRPO_KEYIDX_, GRPO_KEYIDX_, GRPO_KEYIDX_, GRPO_KEYIDX_)
        GRPO_RUN_N_KEYS
};

/* The default of a reward section's `timeout` (seconds) when its plugin declares none. */
#define GRPO_REWARD_TIMEOUT_DEFAULT 60.0
/* The most workers one reward section may have. */
#define GRPO_REWARD_WORKERS_MAX 64

/* One [reward.NAME] section, resolved against the plugin's manifest. */
typedef struct grpo_reward_spec {
    char *name;               /* NAME */
    char *section;            /* "reward.NAME" */
    int line;                 /* line of the section header */
    char *plugin;             /* "pack.id" */
    int plugin_line;
    double weight;            /* default 1.0 */
    int weight_line;          /* 0 = default */
    int32_t isolate;          /* isolate = true: score in a child process (rewards.h) */
    int isolate_line;         /* 0 = default (false) */
    double timeout;           /* seconds one score call may take (rewards.h); the default is the
                               * manifest's `timeout` default when the plugin declares one, else
                               * GRPO_REWARD_TIMEOUT_DEFAULT; 0 = none (an isolated worker's own) */
    int timeout_line;         /* 0 = default */
    int32_t workers;          /* score calls that may run at once (reward_pool.h); default 1 */
    int workers_line;         /* 0 = default */
    int32_t rows_independent; /* 1: a row's score needs no other row (scored row by row while
                               * decoding), else a group's rows are scored together; default
                               * the manifest's rows_independent */
    int rows_independent_line; /* 0 = default */
    char *dir;                /* the run file's directory: plugins resolve relative paths here */
    const grpo_entry *entry;  /* the manifest entry, borrowed from the registry passed to load */
    /* The plugin's keys in manifest order, list keys once per element, defaults filled in (a
     * manifest key without a default must be set in the file; a list default may be empty). */
    uint32_t n;
    char **keys;              /* [n] */
    char **values;            /* [n] */
    int *lines;               /* [n] line in the run file; 0 = manifest default */
} grpo_reward_spec;

/* A resolved run file. Field names are section_key, e.g. cfg->sampling_num_generations. */
#define GRPO_FIELD_S_(s, n, d, c, h) const char *s##_##n; /* points into text[] */
#define GRPO_FIELD_I_(s, n, d, c, h) long long s##_##n;
#define GRPO_FIELD_F_(s, n, d, c, h) double s##_##n;
#define GRPO_FIELD_B_(s, n, d, c, h) int s##_##n;
#define GRPO_FIELD_E_(s, n, d, list, h) grpo_##list s##_##n;
typedef struct grpo_run_config {
    char *path; /* the run file as named to load */
    GRPO_RUN_KEYS(GRPO_FIELD_S_, GRPO_FIELD_I_, GRPO_FIELD_F_, GRPO_FIELD_B_, GRPO_FIELD_E_)
    char *text[GRPO_RUN_N_KEYS]; /* [GRPO_RUN_N_KEYS] each key's value as text (owned) */
    int line[GRPO_RUN_N_KEYS];   /* [GRPO_RUN_N_KEYS] line it was set on; 0 = default */
    const grpo_entry *model_entry; /* model.plugin's entry (borrowed from the registry), or NULL
                                    * when model.plugin is empty (chosen by architecture later) */
    grpo_reward_spec *rewards;   /* [n_rewards] in file order */
    int n_rewards;
    /* [env] when env.plugin is set: its plugin's keys resolved as a reward's are (section "env",
     * entry of kind env, weight and isolate unused); all zero (entry NULL) otherwise */
    grpo_reward_spec env;
} grpo_run_config;

/* The description of one key, generated from config_keys.h. */
typedef struct grpo_run_key {
    const char *section, *name;
    grpo_key_type type;         /* choice keys are GRPO_KEY_STRING with choices set */
    const char *def;            /* default as text; "@section.key" = that key's value */
    const char *range;          /* int/float keys: "[lo, hi]", ">= lo", ... or "" */
    const char *const *choices; /* choice keys: NULL-terminated list, index = enum value */
    unsigned flags;             /* GRPO_KEY_REQUIRED | GRPO_KEY_DIR | GRPO_KEY_FILE */
    const char *help;
} grpo_run_key;


/* Flags for load. */
#define GRPO_CONFIG_TRAIN 1u       /* a training run: GRPO_KEY_REQUIRED keys and >= 1 reward */
#define GRPO_CONFIG_CHECK_PATHS 2u /* GRPO_KEY_DIR/FILE keys must name existing paths */

/* Reads, validates and resolves the run file at path. reg supplies the reward plugins' manifests
 * (only read; NULL = none known). Returns GRPO_OK, or GRPO_ERR_INVALID / GRPO_ERR_IO with every
 * problem appended to diag (may be NULL) and the first one, plus a count of the others, in err
 * (may be NULL). On failure *cfg is left zeroed; on success free it with grpo_run_config_free. */
int grpo_run_config_load(grpo_run_config *cfg, const char *path, const grpo_registry *reg,
                         unsigned flags, grpo_diag *diag, grpo_error *err);
/* The same with command-line overrides applied after the file: sets[n_sets], each
 * "SECTION.KEY=VALUE" or "reward.NAME.KEY=VALUE" (`--set`), validated exactly as a line of the file
 * (a problem is reported as "--set TEXT: ..."). The first override of a key replaces the file's
 * value; repeating it adds values to a list key. */
int grpo_run_config_load_set(grpo_run_config *cfg, const char *path, const char *const *sets,
                             int n_sets, const grpo_registry *reg, unsigned flags, grpo_diag *diag,
                             grpo_error *err);
void grpo_run_config_free(grpo_run_config *cfg);

/* The plugin keys of spec as the grpo_config handed to the reward's create(). The result points
 * into spec (keys, values, section): valid while spec lives, nothing to free. */
grpo_config grpo_reward_spec_config(const grpo_reward_spec *spec);

/* Writes one "warning: FILE[:LINE]: ..." line to out for each setting under which a training run
 * cannot learn (it still runs): temperature 0 with num_generations > 1 (every completion of a
 * group is the same, so every advantage is 0), every reward weight 0. Returns the count. */
int grpo_run_config_warn_cannot_learn(const grpo_run_config *cfg, FILE *out);

/* An input path of the run file made usable: absolute paths as they are, relative ones joined to
 * the run file's directory. Returns a malloc'd string (caller frees) or NULL on no memory. */
char *grpo_run_config_input_path(const grpo_run_config *cfg, const char *value);

/* Every resolved value, in the dump's order: fn(ctx, section, key, value, mark) for each key of
 * each section ([env]'s plugin keys after its own), then each reward's plugin, weight, isolate,
 * timeout, workers, rows_independent and plugin keys (a plugin key named timeout is the host's,
 * visited once). mark is NULL for a value the file set, else "default", "from --set", ...;
 * flags are the key's GRPO_KEY_* flags (0 for a plugin's keys). Returns the OR of fn's results
 * (every value is visited). */
typedef int (*grpo_run_config_fn)(void *ctx, const char *section, const char *key,
                                  const char *value, const char *mark, unsigned flags);
int grpo_run_config_visit(const grpo_run_config *cfg, grpo_run_config_fn fn, void *ctx);

/* Writes the whole resolved configuration as INI: every key with its value, a "; default" mark
 * on keys the file did not set, every reward with all its plugin's keys. Reading the output back
 * gives the same configuration. Returns 0, or -1 if a value cannot be written as INI (whitespace
 * before ';', leading/trailing whitespace, a newline) or on a write error. */
int grpo_run_config_dump(const grpo_run_config *cfg, FILE *out);

/* Writes the documentation of every key as a commented run file (type, range or choices, help,
 * default), which itself parses as INI. */
void grpo_run_config_document(FILE *out);

#endif
