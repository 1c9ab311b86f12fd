/* cmd_train.c — `grpo train RUN.ini [--resume [--allow-change KEYS]] [--model DIR] ...` */
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "train/run.h"
#include "train/trainer.h"

static const char usage[] =
    "usage: grpo train RUN.ini [--resume [--allow-change KEY[,KEY...]]] [--model DIR]\n"
    "                          [--set SECTION.KEY=VALUE]... [--plugin-path DIR]...\n"
    "Runs GRPO as the run file says. --resume continues from the newest checkpoint under\n"
    "checkpoint.dir, with the run file and data it was written with: a key or data file that\n"
    "changed is refused unless --allow-change names it (log.* and checkpoint.* may change);\n"
    "--model replaces model.path (the policy to start from); --set changes a key after the\n"
    "file (reward.NAME.KEY for a reward's key; log.dir/config.ini records the result).\n";

int cmd_train(int argc, char **argv) {
    grpo_train_opts o;
    memset(&o, 0, sizeof o);
    o.run.training = 1;
    grpo_cli_run_cmd c = {"train", usage, &o.resume, NULL, NULL};
    int status = grpo_cli_run_args(&c, argc, argv, &o.run);
    if (status >= 0) return status;
    grpo_error err;
    grpo_error_init(&err);
    return grpo_cli_run_status("train", grpo_train(&o, &err), &err);
}
