/*
 * run_tokenizer.h — the tokenizer of a run file's model for commands that create the run's rewards
 * without opening a training run (config check, reward score): plugins get the tokenizer and host
 * services a training run gives them (train/run.c), and completion_ids can be filled as in
 * training.
 */
#ifndef GRPO_CLI_RUN_TOKENIZER_H
#define GRPO_CLI_RUN_TOKENIZER_H

#include "config/run_config.h"
#include "grpo/plugin.h"
#include "text/tokenizer/tokenizer.h"

/* Loads the tokenizer of cfg's model.path (relative to the run file) into *out and sets host's
 * tokenizer, tokenize and detokenize. *out is NULL and host unchanged when model.path is not set
 * (GRPO_OK) or its tokenizer cannot be loaded (err says why). Free *out after every plugin made
 * with host. */
int grpo_cli_run_tokenizer(const grpo_run_config *cfg, grpo_host *host, grpo_tokenizer **out,
                           grpo_error *err);

#endif
