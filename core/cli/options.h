/*
 * options.h — what the commands share about their options (options.c): the usage errors of an
 * option (one that does not apply to a mode, a value that is not a number of the right range) and
 * the argument scaffold of the run commands (train, sft, eval). Each usage error is one line on
 * stderr, "grpo CMD: ...", and the command exits 2 (cli.h).
 */
#ifndef GRPO_CLI_OPTIONS_H
#define GRPO_CLI_OPTIONS_H

#include <stdint.h>

#include "train/run.h"

/* An option given in a mode it does not apply to: "grpo CMD: OPTION does not apply to MODE (only
 * to WHERE)" on stderr. Returns 2, the usage-error exit status. */
int grpo_cli_not_for(const char *cmd, const char *option, const char *mode, const char *where);

/* The number an option's value text is, parsed whole and strictly, as run-file values are
 * (grpo/config.h: decimal only; "2x", " 2", "", "0x10", "inf", "nan", "1e400" are refused; an
 * integer takes no '.' or exponent), in the closed range [lo, hi]. Returns 1 and sets *out; else
 * prints "grpo CMD: OPTION: expected an integer in [lo, hi], got 'TEXT'" and returns 0, *out
 * untouched: the command then exits 2. The message says ">= lo" when hi is no bound (INT64_MAX,
 * HUGE_VAL, or INT_MAX for grpo_cli_int unless TEXT is beyond it), "<= hi" likewise, and "a
 * number" for a double. */
int grpo_cli_int64(const char *cmd, const char *option, const char *text, int64_t lo, int64_t hi,
                   int64_t *out);
int grpo_cli_int(const char *cmd, const char *option, const char *text, int lo, int hi, int *out);
int grpo_cli_double(const char *cmd, const char *option, const char *text, double lo, double hi,
                    double *out);

/* A run command: `grpo NAME RUN.ini [its own options] [--resume] [--model DIR]
 * [--set SECTION.KEY=VALUE]... [--plugin-path DIR]...`. */
typedef struct grpo_cli_run_cmd {
    const char *name;  /* "train": the messages say "grpo train: ..." */
    const char *usage; /* the --help text (stdout, exit 0); after a usage error on stderr */
    int *resume;       /* --resume sets *resume to 1; NULL: the command has no --resume */
    /* Takes argv[*i] when it is one of the command's own options, advancing *i past its value:
     * returns 1 when taken, 0 when it is not one of them, 2 after a usage error it printed (a bad
     * number). NULL: the command has none. */
    int (*take)(void *opts, int argc, char **argv, int *i);
    void *opts; /* passed to take */
} grpo_cli_run_cmd;

/* Parses argv (argv[0] is the command's name) into run and the command's own options. Returns -1
 * when the command goes on, else its exit status: 0 after --help, 2 after a usage error
 * ("grpo NAME: unexpected argument 'ARG'" and the usage, or no RUN.ini: the usage alone). */
int grpo_cli_run_args(const grpo_cli_run_cmd *c, int argc, char **argv, grpo_run_args *run);

/* The exit status of a run command that did its work with result rc: 0 when GRPO_OK, else
 * "grpo NAME: MESSAGE" on stderr and 1. */
int grpo_cli_run_status(const char *name, int rc, const grpo_error *err);

#endif
