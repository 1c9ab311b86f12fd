/*
 * model_card.h — the README.md grpo writes into every model directory it saves (each checkpoint,
 * `grpo sft --out`): a Hugging Face model card, as TRL writes one.
 *
 *   ---                                   YAML front matter the Hub reads
 *   library_name: grpo
 *   base_model: "<the model the run started from: model.path or --model>"
 *   tags: [grpo, reinforcement-learning]  (sft: [grpo, sft])
 *   pipeline_tag: text-generation
 *   ---
 *   # title, then: base model, method (GRPO: loss type, beta, G, ...), rewards (weight, plugin,
 *   pack and version), data paths, steps, grpo version, the metrics of the last logged step, and
 *   the resolved run file in an ini code block.
 * A LoRA run ([lora] r > 0) writes a PEFT adapter directory: library_name: peft, a lora tag, and
 * a line with r, alpha, target_modules and how to load or merge the adapters.
 *
 * A README.md the input model directory had is kept as base_model_README.md (io/hfdir.h), never
 * overwritten.
 */
#ifndef GRPO_MODEL_CARD_H
#define GRPO_MODEL_CARD_H

#include "config/run_config.h"
#include "train/metrics.h"

typedef enum grpo_card_method { GRPO_CARD_GRPO, GRPO_CARD_SFT } grpo_card_method;

/* The card of a model trained from base_model by cfg's run up to step (last: its last logged
 * metrics, NULL or empty when none). malloc'd, or NULL when out of memory. */
char *grpo_model_card(const grpo_run_config *cfg, const char *base_model, grpo_card_method method,
                      long step, const grpo_metric_row *last);

#endif
