/*
 * lora.h — LoRA adapters (PEFT's) on a model whose base weights stay frozen: the host selects the
 * target weights, owns the adapters' memory (parameters, gradients, AdamW moments), initialises
 * them as PEFT does and hands them to the model pack (grpo_model_desc.set_lora, ABI 1.4), which
 * adds s (x A^T) B^T to each targeted linear layer. The reference model of a LoRA run is the same
 * model with the adapters disabled: one copy of the weights.
 *
 *   target_modules: "all-linear" (every 2-D weight inside model.layers, i.e. PEFT's all-linear:
 *     every linear layer but the output head), or a comma-separated list of module names matched
 *     against the last component of a weight's module (q_proj, ..., down_proj; experts included).
 *   scale s = alpha / r, or alpha / sqrt(r) with use_rslora.
 *   init: A (r,IC) ~ U(-1/sqrt(IC), 1/sqrt(IC)) (PEFT: kaiming_uniform_ with a = sqrt(5)), B = 0.
 *   dropout: PEFT's lora_dropout, y = ... + s (drop(x) A^T) B^T, in training passes only (the
 *     masks come from a seed per pass: grpo/ops.h dropout, so they differ from torch's draws).
 *
 * Files (PEFT's own, so PeftModel.from_pretrained(base, dir) loads them):
 *   adapter_model.safetensors  base_model.model.<module>.lora_A.weight (r,IC), .lora_B.weight
 *                              (OC,r), fp32, <module> = the weight's name without ".weight"
 *   adapter_config.json        peft_type LORA, task_type CAUSAL_LM, r, lora_alpha, lora_dropout,
 *                              target_modules (the modules adapted), use_rslora, ...
 */
#ifndef GRPO_LORA_H
#define GRPO_LORA_H

#include <stdint.h>

#include "host/model_instance.h"

typedef struct grpo_lora_opts {
    int32_t r;
    double alpha;
    int use_rslora;
    const char *target_modules; /* see above */
    double dropout;             /* lora_dropout in [0, 1): on the adapters' input in training
                                   passes (grpo_lora_dropout), never in sampling or evaluation */
} grpo_lora_opts;

typedef struct grpo_lora {
    grpo_model *m;              /* borrowed: the model the adapters sit on */
    int32_t r;
    double alpha;
    int use_rslora, enabled;
    double dropout;             /* lora_dropout (opts) */
    uint32_t n;                 /* adapters */
    grpo_lora_adapter *ad;      /* [n]; A, B point into the params section, dA, dB the grads */
    uint64_t floats;            /* P: floats of all A and B */
    float *block;               /* 4 P backend floats: params | grads | adam m | adam v */
} grpo_lora;

/* Selects m's target weights, allocates and initialises the adapters (A from seed, B = 0) and
 * enables them on m. Errors: no weight matches target_modules, a pack without set_lora (built
 * before ABI 1.4), memory. */
int grpo_lora_attach(grpo_lora *l, grpo_model *m, const grpo_lora_opts *o, uint64_t seed,
                     grpo_error *err);
/* on = 0: the base model alone (the reference); on = 1: with the adapters. */
int grpo_lora_enable(grpo_lora *l, int on, grpo_error *err);
void grpo_lora_zero_grad(grpo_lora *l);
/* on = 1: lora_dropout in the passes until the next call, its masks drawn from seed (a
 * different seed for every training forward; its backward must see the same one); on = 0: no
 * dropout. Nothing to do when dropout is 0. */
int grpo_lora_dropout(grpo_lora *l, int on, uint64_t seed, grpo_error *err);
/* Adapter i's PEFT tensor names into a / b (size bytes each). */
void grpo_lora_names(const grpo_lora *l, uint32_t i, char *a, char *b, size_t size);
/* Writes dir/adapter_model.safetensors and dir/adapter_config.json (atomic files); base_model
 * goes into base_model_name_or_path. */
int grpo_lora_save(const grpo_lora *l, const char *dir, const char *base_model, grpo_error *err);
/* Reads the A and B of every adapter from dir/adapter_model.safetensors (PEFT's names); a
 * missing or misshapen tensor, or a LoRA tensor for a module that is not adapted here, is an
 * error naming the file and the tensor. */
int grpo_lora_load(grpo_lora *l, const char *dir, grpo_error *err);
/* Attaches the adapters of a PEFT directory (adapter_config.json: peft_type LORA, r,
 * lora_alpha, use_rslora, target_modules, bias none; adapter_model.safetensors) to m. Errors
 * name the file and what was expected. */
int grpo_lora_open_dir(grpo_lora *l, grpo_model *m, const char *dir, grpo_error *err);
/* The LoRA options the text of an adapter_config.json describes (what grpo_lora_open_dir reads);
 * o->target_modules points into targets (size bytes). Errors name path and what was expected. */
int grpo_lora_parse_config(const char *text, const char *path, grpo_lora_opts *o, char *targets,
                           size_t size, grpo_error *err);
/* Folds the adapters into m's weights (W += s B A, as peft's merge_and_unload) and detaches
 * them: m alone is then the adapted model (grpo_model_save writes it). */
int grpo_lora_merge(grpo_lora *l, grpo_error *err);
/* Detaches from the model (set_lora with none) and frees; NULL-safe on a zeroed l. */
void grpo_lora_free(grpo_lora *l);

#endif
