/* cmd_train.c — `grpo train RUN.ini [--resume] [--model DIR] [--plugin-path DIR]...` */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "train/run.h"
#include "train/trainer.h"

static int usage(FILE *f) {
    fputs("usage: grpo train RUN.ini [--resume] [--model DIR] [--set SECTION.KEY=VALUE]...\n"
          "                          [--plugin-path DIR]...\n"
          "Runs GRPO as the run file says. --resume continues from the newest checkpoint under\n"
          "checkpoint.dir; --model replaces model.path (the policy to start from); --set changes\n"
          "a key after the file (reward.NAME.KEY for a reward's key; log.dir/config.ini records\n"
          "the result).\n",
          f);
    return f == stdout ? 0 : 2;
}

int cmd_train(int argc, char **argv) {
    grpo_train_opts o;
    memset(&o, 0, sizeof o);
    o.run.training = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout);
        if (!strcmp(a, "--resume"))
            o.resume = 1;
        else if (!grpo_run_args_take(&o.run, argc, argv, &i)) {
            fprintf(stderr, "grpo train: unexpected argument '%s'\n", a);
            return usage(stderr);
        }
    }
    if (!o.run.run_file) return usage(stderr);
    grpo_error err;
    grpo_error_init(&err);
    if (grpo_train(&o, &err) != GRPO_OK) {
        fprintf(stderr, "grpo train: %s\n", err.message);
        return 1;
    }
    return 0;
}
