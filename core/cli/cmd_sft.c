/* cmd_sft.c — `grpo sft RUN.ini [--resume [--allow-change KEYS]] [--model DIR] [--out DIR] ...` */
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "train/run.h"
#include "train/sft.h"

static const char usage[] =
    "usage: grpo sft RUN.ini [--resume [--allow-change KEY[,KEY...]]] [--model DIR]\n"
    "                        [--out DIR] [--set SECTION.KEY=VALUE]... [--plugin-path DIR]...\n"
    "Supervised fine-tuning on the prompt/response lines of data.path (loss on response\n"
    "tokens only). --out writes the final model there as a Hugging Face directory. --resume\n"
    "and --allow-change as for grpo train.\n";

/* sft's own option: --out DIR. */
static int take(void *opts, int argc, char **argv, int *i) {
    grpo_sft_opts *o = opts;
    if (strcmp(argv[*i], "--out") || *i + 1 >= argc) return 0;
    o->out_dir = argv[++*i];
    return 1;
}

int cmd_sft(int argc, char **argv) {
    grpo_sft_opts o;
    memset(&o, 0, sizeof o);
    grpo_cli_run_cmd c = {"sft", usage, &o.resume, take, &o};
    int status = grpo_cli_run_args(&c, argc, argv, &o.run);
    if (status >= 0) return status;
    grpo_error err;
    grpo_error_init(&err);
    return grpo_cli_run_status("sft", grpo_sft(&o, &err), &err);
}
