/*
 * cmd_config.c — `grpo config check FILE` (validate a run file, print it fully resolved) and
 * `grpo config keys` (every run-file key with its type, default and meaning).
 */
#include "cli/cli.h"
#include "cli/options.h"
#include "cli/run_tokenizer.h"
#include "config/run_config.h"
#include "host/process.h"
#include "train/episode.h"
#include "train/rewards.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char config_usage[] =
    "usage: grpo config check FILE [--set SECTION.KEY=VALUE]... [--plugin-path DIR]...\n"
    "                         [--no-check-paths] [--no-train]\n"
    "       grpo config keys\n"
    "\n"
    "check  reads the run file FILE, reports every problem as FILE:LINE: ... on stderr (exit 1),\n"
    "       or prints the fully resolved configuration as INI on stdout: every key with its\n"
    "       value, \"; default\" on keys the file does not set, every reward with all of its\n"
    "       plugin's keys. The output is itself a valid run file with the same meaning\n"
    "       (relative input paths stay relative to FILE's directory).\n"
    "       Reward plugins are looked up on the plugin path (see `grpo plugins --help`), and\n"
    "       every reward is created (then destroyed) with the file's keys, so a plugin that\n"
    "       refuses its keys fails here, at its section's line, not at the first step.\n"
    "       --set SECTION.KEY=VALUE  change a key after reading FILE (reward.NAME.KEY for a\n"
    "                         reward's key), checked as a line of FILE; marked \"; from --set\"\n"
    "       --no-check-paths  do not require model.path, data.path, ... to exist (and do not\n"
    "                         create the rewards: they may read files)\n"
    "       --no-train        do not require model.path, data.path and a reward\n"
    "keys   prints every key of a run file, documented, as a commented run file of defaults.\n";

typedef struct config_args {
    const char *sub, *file;
    const char **extra; /* [n_extra] --plugin-path dirs */
    int n_extra;
    const char **sets; /* [n_sets] --set SECTION.KEY=VALUE */
    int n_sets;
    unsigned flags;
} config_args;

/* Returns 0 on success, 2 on a usage error (already printed). */
static int parse_args(int argc, char **argv, config_args *a) {
    const unsigned default_flags = GRPO_CONFIG_TRAIN | GRPO_CONFIG_CHECK_PATHS;
    memset(a, 0, sizeof *a);
    a->flags = default_flags;
    a->extra = calloc((size_t)argc + 1, sizeof *a->extra);
    a->sets = calloc((size_t)argc + 1, sizeof *a->sets);
    if (!a->extra || !a->sets) return 2;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--plugin-path") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "grpo config: --plugin-path needs a directory\n");
                return 2;
            }
            a->extra[a->n_extra++] = argv[++i];
        } else if (strncmp(arg, "--plugin-path=", 14) == 0) {
            a->extra[a->n_extra++] = arg + 14;
        } else if (strcmp(arg, "--set") == 0 && i + 1 < argc) {
            a->sets[a->n_sets++] = argv[++i];
        } else if (strcmp(arg, "--no-check-paths") == 0) {
            a->flags &= ~GRPO_CONFIG_CHECK_PATHS;
        } else if (strcmp(arg, "--no-train") == 0) {
            a->flags &= ~GRPO_CONFIG_TRAIN;
        } else if (arg[0] == '-' && arg[1]) {
            fprintf(stderr, "grpo config: unknown option '%s'\n%s", arg, config_usage);
            return 2;
        } else if (!a->sub) {
            a->sub = arg;
        } else if (!a->file && strcmp(a->sub, "check") == 0) {
            a->file = arg;
        } else {
            fprintf(stderr, "grpo config: unexpected argument '%s'\n%s", arg, config_usage);
            return 2;
        }
    }
    if (a->sub && strcmp(a->sub, "keys") == 0 &&
        (a->n_extra || a->n_sets || a->flags != default_flags)) {
        const char *opt = a->n_extra                               ? "--plugin-path"
                          : a->n_sets                              ? "--set"
                          : !(a->flags & GRPO_CONFIG_CHECK_PATHS) ? "--no-check-paths"
                                                                  : "--no-train";
        return grpo_cli_not_for("config", opt, "keys", "check");
    }
    if (!a->sub || (strcmp(a->sub, "check") != 0 && strcmp(a->sub, "keys") != 0)) {
        if (a->sub) fprintf(stderr, "grpo config: unknown subcommand '%s'\n", a->sub);
        fputs(config_usage, stderr);
        return 2;
    }
    if (strcmp(a->sub, "check") == 0 && !a->file) {
        fprintf(stderr, "grpo config check: which run file? expected a path\n%s", config_usage);
        return 2;
    }
    return 0;
}

/* Creates and destroys reward k of cfg alone (what training does first): 0, or 1 after printing
 * FILE:LINE (its section's header) and the plugin's refusal. */
static int reward_try(const grpo_run_config *cfg, int k, const char *file, grpo_process *proc) {
    grpo_run_config one = *cfg; /* a view with only reward k; owns nothing */
    one.rewards = &cfg->rewards[k], one.n_rewards = 1;
    grpo_reward_set set;
    grpo_error err;
    grpo_error_init(&err);
    int rc = grpo_reward_set_create(&set, &one, &proc->reg, &proc->host, &err);
    if (rc == GRPO_OK) grpo_reward_set_free(&set);
    else fprintf(stderr, "%s:%d: %s\n", file, cfg->rewards[k].line, err.message);
    return rc != GRPO_OK;
}

/* Every reward of cfg and its [env] plugin created once, with what a run gives them (reward
 * models on the cpu backend, the model's tokenizer when it loads: a run that cannot load it fails
 * when it opens, not here); the count that failed, each printed, or 1 when no backend could be
 * opened. */
static int rewards_check(const grpo_run_config *cfg, const char *file, grpo_process *proc) {
    grpo_error err;
    grpo_error_init(&err);
    if (cfg->n_rewards == 0 && !cfg->env.entry) return 0;
    if (grpo_process_backend(proc, "cpu", (int32_t)cfg->train_threads, GRPO_DTYPE_F32, &err) != GRPO_OK) {
        fprintf(stderr, "grpo config check: %s\n", err.message);
        return 1;
    }
    grpo_tokenizer *tok = NULL;
    grpo_cli_run_tokenizer(cfg, &proc->host, &tok, &err);
    int bad = 0;
    for (int k = 0; k < cfg->n_rewards; k++) bad += reward_try(cfg, k, file, proc);
    if (cfg->env.entry && grpo_episodes_try(cfg, &proc->reg, &proc->host, &err) != GRPO_OK) {
        fprintf(stderr, "%s:%d: %s\n", file, cfg->env.line, err.message); /* [env]'s header */
        bad++;
    }
    grpo_tokenizer_free(tok);
    return bad;
}

static int config_check(const config_args *a) {
    grpo_process proc;
    grpo_error err;
    grpo_error_init(&err);
    if (grpo_process_open(&proc, a->extra, a->n_extra, NULL, 0, &err) != GRPO_OK) {
        fprintf(stderr, "grpo config check: %s\n", err.message);
        grpo_process_close(&proc);
        return 1;
    }
    grpo_run_config cfg;
    grpo_diag diag = {0};
    int rc = grpo_run_config_load_set(&cfg, a->file, a->sets, a->n_sets, &proc.reg, a->flags,
                                      &diag, &err);
    for (int i = 0; i < diag.n; i++) fprintf(stderr, "%s\n", diag.msg[i]);
    if (rc == GRPO_OK && (a->flags & GRPO_CONFIG_CHECK_PATHS) &&
        rewards_check(&cfg, a->file, &proc)) {
        grpo_run_config_free(&cfg);
        rc = GRPO_ERR_INVALID;
    } else if (rc == GRPO_OK) {
        if (grpo_run_config_dump(&cfg, stdout) != 0) {
            fprintf(stderr, "grpo config check: could not write the resolved configuration\n");
            rc = GRPO_ERR_IO;
        }
        grpo_run_config_free(&cfg);
    } else if (diag.n == 0) {
        fprintf(stderr, "%s\n", err.message);
    }
    grpo_diag_free(&diag);
    grpo_process_close(&proc);
    return rc == GRPO_OK ? 0 : 1;
}

int cmd_config(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(config_usage, stdout);
            return 0;
        }
    config_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc == 0 && strcmp(a.sub, "keys") == 0) grpo_run_config_document(stdout);
    else if (rc == 0) rc = config_check(&a);
    free(a.extra), free(a.sets);
    return rc;
}
