/* options.c — what the commands share about their options (options.h). Apart from cli.c, whose
 * command table calls every command, so that the commands can use it without a circle. */
#include "cli/options.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "grpo/config.h" /* grpo_text_int, grpo_text_double: the run files' number rules */

int grpo_cli_not_for(const char *cmd, const char *option, const char *mode, const char *where) {
    fprintf(stderr, "grpo %s: %s does not apply to %s (only to %s)\n", cmd, option, mode, where);
    return 2;
}

/* "grpo CMD: OPTION: expected KIND in [LO, HI], got 'TEXT'" (a NULL bound is none); returns 0. */
static int refuse(const char *cmd, const char *option, const char *text, const char *kind,
                  const char *lo, const char *hi) {
    char what[160];
    fprintf(stderr, "grpo %s: %s: expected %s, got '%s'\n", cmd, option,
            grpo_config_range_(what, sizeof what, kind, lo, hi), text);
    return 0;
}

/* An integer in [lo, hi]; a bound is in the message when show_lo / show_hi. */
static int integer(const char *cmd, const char *option, const char *text, int64_t lo, int64_t hi,
                   int show_lo, int show_hi, int64_t *out) {
    int64_t v;
    if (grpo_text_int(text, &v) && v >= lo && v <= hi) return *out = v, 1;
    char l[24], h[24];
    snprintf(l, sizeof l, "%lld", (long long)lo), snprintf(h, sizeof h, "%lld", (long long)hi);
    return refuse(cmd, option, text, "an integer", show_lo ? l : NULL, show_hi ? h : NULL);
}

int grpo_cli_int64(const char *cmd, const char *option, const char *text, int64_t lo, int64_t hi,
                   int64_t *out) {
    return integer(cmd, option, text, lo, hi, lo != INT64_MIN, hi != INT64_MAX, out);
}

int grpo_cli_int(const char *cmd, const char *option, const char *text, int lo, int hi, int *out) {
    int64_t v = 0;
    int number = grpo_text_int(text, &v); /* the int limits are no bound unless v is beyond */
    if (!integer(cmd, option, text, lo, hi, lo != INT_MIN || (number && v < lo),
                 hi != INT_MAX || (number && v > hi), &v))
        return 0;
    return *out = (int)v, 1;
}

int grpo_cli_double(const char *cmd, const char *option, const char *text, double lo, double hi,
                    double *out) {
    double v;
    if (grpo_text_double(text, &v) && v >= lo && v <= hi) return *out = v, 1;
    char l[32], h[32];
    snprintf(l, sizeof l, "%g", lo), snprintf(h, sizeof h, "%g", hi);
    int bounded = lo != -HUGE_VAL || hi != HUGE_VAL;
    return refuse(cmd, option, text, bounded ? "a number" : "a finite number",
                  lo != -HUGE_VAL ? l : NULL, hi != HUGE_VAL ? h : NULL);
}

/* The usage text on stdout (exit 0) or stderr (exit 2). */
static int usage(const grpo_cli_run_cmd *c, FILE *f) {
    fputs(c->usage, f);
    return f == stdout ? 0 : 2;
}

int grpo_cli_run_args(const grpo_cli_run_cmd *c, int argc, char **argv, grpo_run_args *run) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(c, stdout);
        int took = c->take ? c->take(c->opts, argc, argv, &i) : 0;
        if (took == 2) return 2;
        if (took) continue;
        if (c->resume && !strcmp(a, "--resume"))
            *c->resume = 1;
        else if (c->resume && !strcmp(a, "--allow-change") && i + 1 < argc) {
            if (run->allow_change) {
                fprintf(stderr, "grpo %s: --allow-change given twice; expected one, with the keys "
                                "comma-separated (--allow-change train.steps,optim.lr)\n",
                        c->name);
                return usage(c, stderr);
            }
            run->allow_change = argv[++i];
        }
        else if (!grpo_run_args_take(run, argc, argv, &i)) {
            fprintf(stderr, "grpo %s: unexpected argument '%s'\n", c->name, a);
            return usage(c, stderr);
        }
    }
    if (run->allow_change && !*c->resume) {
        fprintf(stderr, "grpo %s: --allow-change %s without --resume: a new run has no earlier "
                        "settings to differ from\n",
             c->name, run->allow_change);
        return usage(c, stderr);
    }
    return run->run_file ? -1 : usage(c, stderr);
}

int grpo_cli_run_status(const char *name, int rc, const grpo_error *err) {
    if (rc == GRPO_OK) return 0;
    fprintf(stderr, "grpo %s: %s\n", name, err->message);
    return 1;
}
