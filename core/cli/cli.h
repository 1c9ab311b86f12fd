/*
 * cli.h — the grpo command line: one table of subcommands, each implemented in its own
 * core/cmd_*.c file as `int cmd_NAME(int argc, char **argv)` (argv[0] is the subcommand name).
 * A command returns the process exit status: 0 success, 1 failure, 2 usage error.
 */
#ifndef GRPO_CLI_H
#define GRPO_CLI_H

typedef struct grpo_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} grpo_command;

/* Runs the grpo command line; main() is just this. */
int grpo_cli_main(int argc, char **argv);

/* What the commands share about their options (usage errors, strict numbers, the run commands'
 * arguments) is options.h's. */

/* One line per subcommand (keep in the order of the table in cli.c). */
int cmd_train(int argc, char **argv);
int cmd_sft(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_init_model(int argc, char **argv);
int cmd_reward(int argc, char **argv);
/* hidden (not in the command table): an isolated reward's worker process, reward_worker.h */
int cmd_reward_worker(void);
int cmd_plugins(int argc, char **argv);
int cmd_pack(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_model(int argc, char **argv);
int cmd_logprobs(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_merge_lora(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_report(int argc, char **argv);

#endif
