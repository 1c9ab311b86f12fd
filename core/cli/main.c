/* main.c — the grpo binary. Everything lives in libgrpo; see cli.c. */
#include "cli/cli.h"

int main(int argc, char **argv) { return grpo_cli_main(argc, argv); }
