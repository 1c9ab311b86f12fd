/*
 * config_keys.h — every key of a run file, defined once.
 *
 * GRPO_RUN_KEYS is an X-macro: run_config.h and run_config.c expand it to generate the fields of
 * grpo_run_config, the key table (defaults, parsing, validation), `grpo config keys` (the
 * documentation) and the resolved dump of `grpo config check`. Adding a key here is all it takes.
 *
 * One macro per value type, each called as (section, name, default, check, help):
 *   S  string   check: flags, GRPO_KEY_REQUIRED (needed to train), GRPO_KEY_DIR / GRPO_KEY_FILE
 *               (an input path that must exist; relative paths are relative to the run file)
 *   I  integer  check: a range ("[1, 4096]", "(0, 1]", ">= 0", "> 0", "" for none); long long
 *   F  float    check: a range as for I; double
 *   B  bool     check: unused (0); true/false/yes/no/on/off/1/0; int
 *   E  choice   check: NAME of the list GRPO_CHOICES_NAME below; the field is enum grpo_NAME
 * Defaults are written as text and parsed by the same code as the file, so they are checked the
 * same way. A default "@section.key" is "the value of that key" (reference.path follows
 * model.path); such a key may only point at a key whose own default is not "@...".
 * Anchors for the defaults: TRL's GRPOConfig and MiniMind's train_grpo.py (noted where they
 * differ). Keep help texts to one line of at most ~150 characters.
 */
#ifndef GRPO_CONFIG_KEYS_H
#define GRPO_CONFIG_KEYS_H

#define GRPO_KEY_REQUIRED 1u /* string: must be set (and non-empty) in a training run file */
#define GRPO_KEY_DIR 2u      /* string: an input directory that must exist (when non-empty) */
#define GRPO_KEY_FILE 4u     /* string: an input file that must exist (when non-empty) */

/* Choice lists: C(ENUM_CONSTANT, text). The first constant is 0. */
#define GRPO_CHOICES_dtype(C) C(GRPO_CFG_DTYPE_F32, f32) C(GRPO_CFG_DTYPE_BF16, bf16) C(GRPO_CFG_DTYPE_F16, f16)
#define GRPO_CHOICES_weights_dtype(C) C(GRPO_WEIGHTS_F32, f32) C(GRPO_WEIGHTS_BF16, bf16)
#define GRPO_CHOICES_base_dtype(C) C(GRPO_BASE_F32, f32) C(GRPO_BASE_BF16, bf16)
/* The compute-dtype keys (one list each: a list makes its key's enum): fp32 and f32 are one
 * value (the keys' own spelling, and the weights keys' f32). */
#define GRPO_COMPUTE_CHOICES_(C, P) C(P##_FP32, fp32) C(P##_BF16, bf16) C(P##_F32, f32)
#define GRPO_CHOICES_compute_dtype(C) GRPO_COMPUTE_CHOICES_(C, GRPO_COMPUTE)
#define GRPO_CHOICES_ref_compute_dtype(C) GRPO_COMPUTE_CHOICES_(C, GRPO_REF_COMPUTE)
#define GRPO_CHOICES_train_compute_dtype(C) GRPO_COMPUTE_CHOICES_(C, GRPO_TRAIN_COMPUTE)
#define GRPO_CHOICES_is_mode(C)                                                                 \
    C(GRPO_IS_TOKEN_TRUNCATE, token_truncate) C(GRPO_IS_TOKEN_MASK, token_mask)                 \
    C(GRPO_IS_SEQUENCE_TRUNCATE, sequence_truncate) C(GRPO_IS_SEQUENCE_MASK, sequence_mask)
#define GRPO_CHOICES_backend(C) C(GRPO_BACKEND_CPU, cpu) C(GRPO_BACKEND_CUDA, cuda) C(GRPO_BACKEND_AUTO, auto)
#define GRPO_CHOICES_truncation(C) C(GRPO_TRUNCATE_LEFT, left) C(GRPO_TRUNCATE_SKIP, skip)
#define GRPO_CHOICES_bad_lines(C) C(GRPO_BAD_LINES_FAIL, fail) C(GRPO_BAD_LINES_SKIP, skip)
#define GRPO_CHOICES_loss_type(C)                                                               \
    C(GRPO_LOSS_GRPO, grpo) C(GRPO_LOSS_BNPO, bnpo) C(GRPO_LOSS_DR_GRPO, dr_grpo)               \
    C(GRPO_LOSS_DAPO, dapo) C(GRPO_LOSS_CISPO, cispo) C(GRPO_LOSS_SAPO, sapo)
#define GRPO_CHOICES_importance_sampling_level(C) C(GRPO_IS_TOKEN, token) C(GRPO_IS_SEQUENCE, sequence)
#define GRPO_CHOICES_reward_aggregation(C)                                                      \
    C(GRPO_AGG_SUM_THEN_NORMALIZE, sum_then_normalize) C(GRPO_AGG_NORMALIZE_THEN_SUM, normalize_then_sum)
#define GRPO_CHOICES_scale_rewards(C)                                                           \
    C(GRPO_SCALE_GROUP, group) C(GRPO_SCALE_BATCH, batch) C(GRPO_SCALE_NONE, none)
#define GRPO_CHOICES_schedule(C)                                                                \
    C(GRPO_SCHEDULE_CONSTANT, constant) C(GRPO_SCHEDULE_COSINE, cosine)                         \
    C(GRPO_SCHEDULE_MINIMIND_COSINE, minimind_cosine)
#define GRPO_CHOICES_best_mode(C) C(GRPO_BEST_MAX, max) C(GRPO_BEST_MIN, min)

/* Choice values users bring from TRL that grpo knows but does not implement: refused by name
 * ("... is not implemented") rather than as a typo. X(section, key, text). */
#define GRPO_NOT_IMPLEMENTED(X) X(grpo, loss_type, vespo) X(grpo, loss_type, luspo)

/* clang-format off */
#define GRPO_RUN_KEYS(S, I, F, B, E)                                                            \
    /* [model] the policy being trained */                                                      \
    S(model, path, "", GRPO_KEY_REQUIRED | GRPO_KEY_DIR,                                       \
      "Hugging Face model directory (config.json, model.safetensors, tokenizer.json) to train")  \
    E(model, dtype, "f32", dtype,                                                               \
      "f32 (exact), or bf16 on cuda: bf16 matmuls, fp32 master weights and losses, a bf16 "     \
      "rollout copy (sampling.weights_dtype); checkpoints load from F32, F16 or BF16")           \
    E(model, backend, "cpu", backend,                                                           \
      "where the model runs: cpu, cuda (an NVIDIA GPU), or auto (cuda when one is found)")      \
    S(model, plugin, "", 0,                                                                     \
      "model plugin id (pack.id); empty = the one serving the architecture in config.json")    \
    /* [reference] the frozen model of the KL term */                                           \
    S(reference, path, "@model.path", GRPO_KEY_DIR,                                             \
      "reference model directory; not loaded when grpo.beta = 0")                               \
    /* [data] prompts */                                                                        \
    S(data, path, "", GRPO_KEY_REQUIRED | GRPO_KEY_FILE,                                        \
      "training prompts, JSONL: prompt (text or messages) or MiniMind conversations; "          \
      "other fields go to rewards")                                                             \
    S(data, eval_path, "", GRPO_KEY_FILE, "evaluation prompts, same format; empty = none")      \
    S(data, prompt_field, "prompt", 0,                                                          \
      "JSON field holding the prompt; lines without it are read as MiniMind conversations")     \
    I(data, max_prompt_length, "512", "[1, 1048576]",                                           \
      "longest prompt in tokens, chat template included")                                       \
    E(data, truncation, "left", truncation,                                                     \
      "a longer prompt: left = keep its last max_prompt_length tokens, skip = leave it out")    \
    B(data, shuffle, "true", 0, "shuffle the prompts every epoch")                              \
    I(data, seed, "@train.seed", ">= 0", "seed of the shuffle")                                 \
    E(data, bad_lines, "fail", bad_lines,                                                       \
      "a malformed JSONL line: fail = stop with an error naming it, skip = warn and go on")      \
    S(data, chat_template, "", 0,                                                               \
      "prompt format replacing the model's chat template: {prompt} = user text, \\n = newline; " \
      "empty = the model's own (ChatML if none)")                                               \
    /* [sampling] generation of the G completions per prompt */                                \
    I(sampling, num_generations, "8", "[2, 4096]",                                              \
      "completions sampled per prompt (G); advantages compare the G siblings")                  \
    I(sampling, max_completion_length, "256", "[1, 1048576]", "most tokens per completion")      \
    F(sampling, temperature, "1.0", "[0, 100]", "softmax temperature; 0 = greedy")              \
    I(sampling, top_k, "0", ">= 0", "keep only the k most likely tokens; 0 = off")              \
    F(sampling, top_p, "1.0", "(0, 1]", "nucleus: smallest set of tokens with this mass; 1 = off") \
    F(sampling, min_p, "0.0", "[0, 1)", "drop tokens below min_p x the top probability; 0 = off") \
    F(sampling, repetition_penalty, "1.0", "(0, 100]",                                          \
      "penalise tokens already in the row (as transformers); 1 = off")                          \
    I(sampling, seed, "@train.seed", ">= 0", "seed of the sampler")                             \
    E(sampling, weights_dtype, "f32", weights_dtype,                                            \
      "bf16 = sample from a bf16 copy of the policy refreshed every step (off-policy: is_mode)") \
    E(sampling, compute_dtype, "fp32", compute_dtype,                                           \
      "bf16 = the rollout's matmuls as bf16 products, fp32 sums (CPUs with avx512_bf16; needs "  \
      "weights_dtype = bf16, or a LoRA run); fp32 (or f32)")                                     \
    E(sampling, is_mode, "sequence_mask", is_mode,                                              \
      "bf16 rollout: IS correction per token/sequence, ratio past is_cap cut or masked")        \
    F(sampling, is_cap, "3.0", "> 0", "cap of the correction's ratio (TRL vllm_importance_sampling_cap)") \
    F(sampling, oversample, "1", "[1, 64]",                                                     \
      "drop_zero_std_groups: start ceil(F x batch_prompts) groups, keep the first batch_prompts with a reward spread, abort the rest; 1 = off") \
    I(sampling, max_step_tokens, "0", ">= 0",                                                   \
      "token budget of a step's rollout (this rank): rows still decoding when it is spent end truncated; 0 = off") \
    I(sampling, max_live_rows, "0", ">= 0",                                                     \
      "continuous decode: most rows decoded together; finished rows' cache rows are refilled from the step's next chunks; 0 = one chunk's rows (batch_prompts x num_generations)") \
    B(sampling, continuous, "true", 0,                                                          \
      "continuous decode (cpu): a step's chunks in one decode batch, finished rows refilled; false: each chunk decoded alone, its batch shrinking as rows end (needs max_live_rows = 0)") \
    /* [grpo] advantages and loss */                                                            \
    E(grpo, loss_type, "dapo", loss_type,                                                       \
      "normalisation: grpo per sequence, bnpo per token, dr_grpo B*max_len, dapo batch tokens, "  \
      "cispo, sapo (soft gate, per sequence) (TRL default: dapo)")                              \
    E(grpo, importance_sampling_level, "token", importance_sampling_level,                      \
      "ratio per token, or sequence = exp(mean log-ratio of the row) (GSPO; use loss_type = grpo)") \
    F(grpo, sapo_temperature_pos, "1.0", "> 0", "sapo: gate temperature where the advantage is > 0 (TRL 1.0)") \
    F(grpo, sapo_temperature_neg, "1.05", "> 0", "sapo: gate temperature where the advantage is <= 0 (TRL 1.05)") \
    F(grpo, beta, "0.0", ">= 0", "KL coefficient (k3 estimator); 0 = no reference model (TRL 0; MiniMind 0.02)") \
    E(grpo, ref_compute_dtype, "fp32", ref_compute_dtype,                                       \
      "bf16 = the reference pass's matmuls as bf16 products, fp32 sums (CPUs with avx512_bf16)") \
    B(grpo, ref_from_rollout, "true", 0,                                                        \
      "LoRA: decode the KL reference (the base) beside the rollout and take its log-probs "   \
      "there (the same bits) instead of a reference forward (README); false: always the forward") \
    F(grpo, epsilon_low, "0.2", "[0, 1)", "clip the ratio below at 1 - epsilon_low")            \
    F(grpo, epsilon_high, "@grpo.epsilon_low", ">= 0",                                          \
      "clip the ratio above at 1 + epsilon_high (DAPO: 0.28)")                                  \
    F(grpo, delta, "0", ">= 0", "two-sided GRPO: also cap the ratio at delta (> 1); 0 = off")   \
    I(grpo, num_iterations, "1", "[1, 1024]",                                                   \
      "optimizer passes over each generation batch (mu); > 1 keeps old-policy log-probs")       \
    E(grpo, scale_rewards, "group", scale_rewards,                                              \
      "divide advantages by the reward std of the group, the whole batch, or none")             \
    B(grpo, std_unbiased, "true", 0, "reward std divides by n-1 (torch.std, as TRL) instead of n") \
    F(grpo, advantage_clamp, "0", ">= 0",                                                       \
      "MiniMind: clamp advantages to +-c, then renormalise over the batch; 0 = off")            \
    B(grpo, mask_truncated_completions, "false", 0,                                            \
      "leave completions cut at max_completion_length out of the loss")                         \
    F(grpo, top_entropy_quantile, "1.0", "(0, 1]",                                              \
      "train only on tokens at or above this top quantile of entropy in the micro-batch (TRL rho); 1 = all") \
    F(grpo, entropy_coef, "0.0", ">= 0",                                                       \
      "entropy bonus: loss - coef * mean entropy over the loss's tokens (verl entropy_coeff); 0 = none") \
    B(grpo, drop_zero_std_groups, "false", 0,                                                  \
      "DAPO dynamic sampling: groups whose rewards are all equal leave the loss (and its token count)") \
    I(grpo, resample_rounds, "0", "[0, 64]",                                                    \
      "drop_zero_std_groups: up to this many extra batches of fresh prompts replace dropped groups; 0 = drop only") \
    I(grpo, sync_ref_every, "0", ">= 0",                                                        \
      "every this many steps ref = alpha * policy + (1 - alpha) * ref (TRL sync_ref_model); 0 = off") \
    F(grpo, sync_ref_alpha, "0.6", "[0, 1]", "weight of the policy in that refresh (TRL ref_model_mixup_alpha)") \
    E(grpo, reward_aggregation, "sum_then_normalize", reward_aggregation,                       \
      "normalize the weighted reward sum per group, or normalize_then_sum each reward first (GDPO)") \
    F(grpo, aux_loss_coef, "1.0", ">= 0",                                                       \
      "weight of the MoE router auxiliary loss the model reports; 0 = ignore it")               \
    /* [optim] AdamW and the learning-rate schedule */                                          \
    F(optim, lr, "1e-6", "> 0", "peak learning rate (TRL 1e-6)")                                \
    F(optim, weight_decay, "0.0", ">= 0", "AdamW decoupled weight decay")                        \
    F(optim, beta1, "0.9", "[0, 1)", "AdamW first-moment decay")                                \
    F(optim, beta2, "0.999", "[0, 1)", "AdamW second-moment decay")                             \
    F(optim, eps, "1e-8", "> 0", "AdamW epsilon")                                               \
    F(optim, max_grad_norm, "1.0", ">= 0", "clip the global gradient norm to this; 0 = off")    \
    E(optim, schedule, "constant", schedule,                                                    \
      "constant; cosine decay to 0; minimind_cosine: lr/10 + lr/2 (1 + cos(pi t/T))")           \
    I(optim, warmup_steps, "0", ">= 0", "linear warmup from 0 over this many optimizer steps")  \
    /* [train] the loop */                                                                      \
    I(train, steps, "1000", ">= 1", "optimizer steps to run")                                   \
    I(train, batch_prompts, "4", "[1, 65536]", "prompts per generation batch (B); B*G completions") \
    I(train, grad_accum, "1", "[1, 65536]",                                                     \
      "generation batches whose gradients are summed per optimizer step")                       \
    I(train, micro_batch, "0", ">= 0", "completions per forward/backward pass; 0 = all at once")  \
    I(train, max_tokens_per_microbatch, "0", ">= 0",                                            \
      "packed training: each micro-batch's rows are packed back to back into forward/backward " \
      "passes of at most this many tokens (no padding; the loss is unchanged); 0 = off (padded)") \
    I(train, seed, "42", ">= 0", "seed of every random choice not given its own seed")          \
    B(train, gradient_checkpointing, "false", 0,                                                \
      "recompute each layer's activations in backward, keeping only its input: much less memory, " \
      "about one more forward of time, same gradients (TRL's GRPO default is true)")            \
    B(train, shared_prefix, "true", 0,                                                          \
      "compute each prompt once for its G completions in training passes: fewer FLOPs, " \
      "the same results up to fp32 rounding; false: every row in full")                        \
    B(train, reuse_rollout, "true", 0,                                                          \
      "the policy's training forward takes its rollout's activations (the same bits) instead " \
      "of computing them again, where it can (README); false: always computed")                \
    E(train, compute_dtype, "fp32", train_compute_dtype,                                        \
      "bf16 = the policy's training forward and backward as bf16 products, fp32 sums (CPUs "     \
      "with avx512_bf16); weights, gradients and AdamW stay fp32; fp32 (or f32)")               \
    I(train, threads, "0", "[0, 1024]",                                                        \
      "CPU threads, at most 1024 (a thread each); 0 = all cores or OMP_NUM_THREADS")           \
    I(train, eval_every, "0", ">= 0",                                                          \
      "evaluate on data.eval_path every this many steps (greedy; metrics eval/*); 0 = never")  \
    I(train, eval_limit, "0", ">= 0", "evaluate on the first this many eval prompts; 0 = all")  \
    F(train, eval_temperature, "0", ">= 0",                                                    \
      "> 0: each evaluation also samples at this temperature (metrics eval_sampled/*)")        \
    /* [lora] (PEFT's LoraConfig) */                                                             \
    I(lora, r, "0", "[0, 4096]",                                                                \
      "LoRA rank: > 0 trains adapters on a frozen base (reference = adapters off); 0 = full fine-tuning") \
    F(lora, alpha, "8", "> 0", "lora_alpha: the adapters are scaled by alpha / r (alpha / sqrt(r) with use_rslora)") \
    F(lora, dropout, "0", "[0, 1)", "lora_dropout on the adapters' input in training passes (not sampling)") \
    S(lora, target_modules, "all-linear", 0,                                                   \
      "comma-separated module names (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, ...) or all-linear") \
    B(lora, use_rslora, "false", 0, "rank-stabilised LoRA: scale alpha / sqrt(r)")             \
    E(lora, base_dtype, "f32", base_dtype,                                                      \
      "the frozen base in bf16: half its memory, compute in fp32, samples exactly from it")    \
    /* [log] */                                                                                 \
    S(log, dir, "runs", 0, "directory for metrics.jsonl (relative to the working directory)")   \
    I(log, every, "1", ">= 1", "record and print metrics every this many steps")               \
    I(log, completions_every, "0", ">= 0", "print sample completions every this many steps; 0 = never") \
    B(log, tensorboard, "false",  0,                                                             \
      "also write TensorBoard event files in log.dir: every metric, and sampled completions")  \
    /* [checkpoint] */                                                                          \
    S(checkpoint, dir, "checkpoints", 0, "directory for checkpoints (relative to the working directory)") \
    I(checkpoint, every, "100", ">= 0", "save every this many steps; 0 = only at the end")      \
    I(checkpoint, keep, "3", ">= 0", "most recent checkpoints kept; 0 = all")                   \
    S(checkpoint, best_metric, "", 0,                                                           \
      "an eval metric as metrics.jsonl names it (eval/accuracy): the best evaluated step kept as " \
      "checkpoint-best, never pruned; empty = off")                                             \
    E(checkpoint, best_mode, "max", best_mode,                                                  \
      "whether a higher (max) or lower (min) checkpoint.best_metric is better")                 \
    /* [env] multi-turn rollouts (grpo/env.h); the plugin's own keys go in this section too */  \
    S(env, plugin, "", 0,                                                                       \
      "environment plugin id (pack.id): episodes of turns and observations; empty = single-turn") \
    I(env, max_turns, "4", "[1, 1024]", "most policy turns per episode")                       \
    I(env, max_episode_tokens, "@sampling.max_completion_length", "[1, 1048576]",               \
      "most tokens per episode, the policy's and the observations' together")                   \
    S(env, tools, "", GRPO_KEY_FILE,                                                            \
      "JSON file: a list of tool schemas the chat template shows the model (its tools variable); empty = none")
/* clang-format on */

/* The fixed sections, in the order the dump and the documentation use. */
#define GRPO_RUN_SECTIONS(X) \
    X(model) X(reference) X(data) X(sampling) X(grpo) X(optim) X(train) X(lora) X(log)        \
        X(checkpoint) X(env)

#endif
