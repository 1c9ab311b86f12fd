/* options.c — what the commands share about their options (cli.h). Apart from cli.c, whose
 * command table calls every command, so that the commands can use it without a circle. */
#include "cli/cli.h"

#include <stdio.h>

int grpo_cli_not_for(const char *cmd, const char *option, const char *mode, const char *where) {
    fprintf(stderr, "grpo %s: %s does not apply to %s (only to %s)\n", cmd, option, mode, where);
    return 2;
}

