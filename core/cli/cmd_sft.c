/* cmd_sft.c — `grpo sft RUN.ini [--resume] [--model DIR] [--out DIR] [--plugin-path DIR]...` */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "train/run.h"
#include "train/sft.h"

static int usage(FILE *f) {
    fputs("usage: grpo sft RUN.ini [--resume] [--model DIR] [--out DIR]\n"
          "                        [--set SECTION.KEY=VALUE]... [--plugin-path DIR]...\n"
          "Supervised fine-tuning on the prompt/response lines of data.path (loss on response\n"
          "tokens only). --out writes the final model there as a Hugging Face directory.\n",
          f);
    return f == stdout ? 0 : 2;
}

int cmd_sft(int argc, char **argv) {
    grpo_sft_opts o;
    memset(&o, 0, sizeof o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout);
        if (!strcmp(a, "--resume"))
            o.resume = 1;
        else if (!strcmp(a, "--out") && v)
            o.out_dir = v, i++;
        else if (!grpo_run_args_take(&o.run, argc, argv, &i)) {
            fprintf(stderr, "grpo sft: unexpected argument '%s'\n", a);
            return usage(stderr);
        }
    }
    if (!o.run.run_file) return usage(stderr);
    grpo_error err;
    grpo_error_init(&err);
    if (grpo_sft(&o, &err) != GRPO_OK) {
        fprintf(stderr, "grpo sft: %s\n", err.message);
        return 1;
    }
    return 0;
}
