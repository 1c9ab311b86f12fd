/* cli.c — dispatch of `grpo SUBCOMMAND ...` through the command table. */
#include "cli/cli.h"

#include "grpo/plugin.h"
#include "kernels.h"
#include "train/reward_worker.h"

#include <stdio.h>
#include <string.h>

#ifndef GRPO_VERSION
#define GRPO_VERSION "dev"
#endif

static int cmd_version(int argc, char **argv);

static const grpo_command commands[] = {
    {"train", cmd_train, "train a policy with GRPO as a run file says (--resume continues)"},
    {"sft", cmd_sft, "supervised fine-tuning on prompt/response pairs (warm start)"},
    {"eval", cmd_eval, "mean reward and accuracy on held-out prompts with the current checkpoint"},
    {"init-model", cmd_init_model, "write a small random-init model + byte-level tokenizer (the embedded default)"},
    {"reward", cmd_reward, "score prompt/completion lines with a run file's rewards (reward score)"},
    {"plugins", cmd_plugins, "list the rewards and models on the plugin path, or show one"},
    {"pack", cmd_pack, "new, bundle, install, remove or list reward packs"},
    {"config", cmd_config, "check a run file and print it resolved, or list every run-file key"},
    {"tokenize", cmd_tokenize, "text lines -> JSON ids (or ids -> text with --decode)"},
    {"template", cmd_template, "render a chat template on messages or a dataset line"},
    {"model", cmd_model, "inspect a Hugging Face model directory (grpo model info DIR)"},
    {"logprobs", cmd_logprobs, "per-token log-probs of token-id sequences (JSONL in, JSONL out)"},
    {"generate", cmd_generate, "continue a prompt of token ids (greedy or sampled)"},
    {"merge-lora", cmd_merge_lora, "fold a PEFT LoRA adapter into its base model (a Hugging Face directory)"},
    {"plot", cmd_plot, "draw metrics.jsonl as an SVG chart"},
    {"report", cmd_report, "one HTML page of a run: curves, run file, sampled completions"},
    {"version", cmd_version, "print the version, the plugin ABI version and the BLAS kernels"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static int cmd_version(int argc, char **argv) {
    if (argc > 1) {
        fprintf(stderr, "grpo version: unexpected argument '%s'\n", argv[1]);
        return 2;
    }
    printf("grpo %s (plugin ABI %d.%d)\n", GRPO_VERSION, GRPO_ABI_MAJOR, GRPO_ABI_MINOR);
    const char *was = grpo_cpu_blas_core_was();
    printf("cpu backend: OpenBLAS %s kernels", grpo_cpu_blas_core());
    if (was) printf(" (chosen by grpo: OpenBLAS took this CPU for %s)", was);
    printf("\n");
    return 0;
}

static void usage(FILE *out) {
    fprintf(out, "usage: grpo COMMAND [ARGS]   (grpo COMMAND --help for more)\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].summary);
}

int grpo_cli_main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) return cmd_version(argc - 1, argv + 1);
    /* hidden: an isolated reward's worker process, its socket on stdin (reward_worker.h) */
    if (strcmp(argv[1], GRPO_REWARD_WORKER_ARG) == 0) return cmd_reward_worker();
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "grpo: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
