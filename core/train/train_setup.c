/* train_setup.c — what `grpo train` sets up around its session and checks before any work, the
 * evaluation it opens, and the teardown (see train_setup.h). */
#include "train/train_setup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/comm.h"
#include "train/best.h"
#include "train/eval.h"
#include "base/nomem.h"

void grpo_trainer_chunk_clear(chunk *c) {
    grpo_rollout_batch_free(&c->rb);
    free(c->r), free(c->adv), free(c->mask), free(c->old_logp), free(c->samp_logp);
    free(c->ref_logp);
    free(c->row_rng);
    free(c->gR), free(c->gr), free(c->gadv), free(c->glen), free(c->gtrunc), free(c->env_rows);
    memset(c, 0, sizeof *c);
}

/* A LoRA run with sampling.compute_dtype = bf16: the policy itself (its base, bf16 or fp32,
 * and the adapters) samples with bf16 products; checked here (refused naming the key and what
 * the CPU lacks), switched on around each rollout (trainer.c), the loss's importance weights on. */
static int lora_sample_bf16(trainer *t, grpo_error *err) {
    int rc = grpo_run_check_bf16(&t->s.run, t->s.policy, "sampling.compute_dtype", err);
    if (rc == GRPO_OK) t->sample_dtype = GRPO_DTYPE_BF16, t->is = grpo_is_sums_init();
    return rc;
}

/* sampling.weights_dtype = bf16 (full fine-tuning), or model.dtype = bf16 (a GPU run, whose
 * matmuls are bf16 anyway): a bf16 copy of the policy for the rollout, half the bytes a decode
 * step reads and no per-step rounding of fp32 weights. A LoRA run with lora.base_dtype = bf16
 * samples from its policy as it is (the base is bf16 already, the adapters fp32: exact). */
static int open_rollout(trainer *t, grpo_error *err) {
    int bf16 = t->cfg->sampling_weights_dtype == GRPO_WEIGHTS_BF16 ||
               t->cfg->model_dtype == GRPO_CFG_DTYPE_BF16;
    t->sample_dtype = GRPO_DTYPE_F32;
    if (t->cfg->lora_r > 0 && t->cfg->sampling_compute_dtype == GRPO_COMPUTE_BF16)
        return lora_sample_bf16(t, err);
    if (!bf16 || t->cfg->lora_r > 0) return GRPO_OK;
    t->is = grpo_is_sums_init();
    int rc = grpo_run_open_model_as(&t->s.run, t->s.policy->dir, 0, GRPO_DTYPE_BF16, &t->rollout,
                                    err);
    if (rc == GRPO_OK && t->cfg->sampling_compute_dtype == GRPO_COMPUTE_BF16)
        rc = grpo_run_compute_bf16(&t->s.run, t->rollout, "sampling.compute_dtype", err);
    if (rc == GRPO_OK) t->rollout->keep_into = t->s.policy; /* its kept rollout: the policy's */
    return rc == GRPO_OK ? grpo_model_copy_weights(t->rollout, t->s.policy, err) : rc;
}

/* The reference and the rollout copy run their passes between the policy's (a step: rollout,
 * then per micro-batch the reference, the policy's forward and its backward), never inside one:
 * they work in the policy's work memory, one block the size of the largest pass's. */
static int share_work(trainer *t, grpo_error *err) {
    int rc = t->ref.model ? grpo_model_share_work(t->ref.model, t->s.policy, err) : GRPO_OK;
    return rc == GRPO_OK && t->rollout ? grpo_model_share_work(t->rollout, t->s.policy, err) : rc;
}

/* train.eval_every > 0: the eval prompts (data.eval_path), scored during training. */
static int open_eval(trainer *t, grpo_error *err) {
    const grpo_run_config *cfg = t->cfg;
    if (cfg->train_eval_every <= 0) return GRPO_OK;
    if (!cfg->data_eval_path[0])
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: train.eval_every = %lld needs data.eval_path (the prompts to "
                              "evaluate on)",
                              cfg->path, cfg->train_eval_every);
    grpo_rng_seed(&t->eval_rng, (uint64_t)cfg->sampling_seed);
    char *path = grpo_run_path(&t->s.run, cfg->data_eval_path);
    int rc = path ? grpo_run_dataset(&t->s.run, path, &t->eval_data, err)
                  : grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    free(path);
    return rc;
}

/* Every train.eval_every steps: the policy on the eval prompts, greedy (eval/...) and, with
 * train.eval_temperature > 0, sampled too (eval_sampled/...), into row. */
int grpo_trainer_evaluate_due(trainer *t, grpo_metric_row *row, grpo_error *err) {
    const grpo_run_config *cfg = t->cfg;
    if (!t->eval_data || t->s.st.step % cfg->train_eval_every != 0) return GRPO_OK;
    if (grpo_comm_rank() != 0) return GRPO_OK; /* the one that logs */
    size_t n = t->eval_data->n;
    if (cfg->train_eval_limit > 0 && (size_t)cfg->train_eval_limit < n)
        n = (size_t)cfg->train_eval_limit;
    grpo_episodes *env = t->episodes.desc ? &t->episodes : NULL;
    int rc = grpo_evaluate(&t->s.run, t->s.policy, &t->rewards, env, t->eval_data, n, 0.0f,
                           &t->eval_rng, GRPO_EVAL_PREFIX, row, err);
    if (rc == GRPO_OK && cfg->train_eval_temperature > 0)
        rc = grpo_evaluate(&t->s.run, t->s.policy, &t->rewards, env, t->eval_data, n,
                           (float)cfg->train_eval_temperature, &t->eval_rng,
                           GRPO_EVAL_SAMPLED_PREFIX, row, err);
    return rc;
}

/* Options the run file accepts but this run cannot honour, refused before any work. */
static int refuse_options(const grpo_run_config *cfg, const grpo_model *policy, grpo_error *err) {
    if (cfg->grpo_entropy_coef != 0.0 && !grpo_model_has_entropy_backward(policy))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "grpo.entropy_coef = %g: model pack %s has no backward_entropy "
                              "(grpo/model.h, ABI 1.4), so the entropy bonus cannot be trained; "
                              "rebuild the pack against SDK 1.4 or set entropy_coef = 0",
                              cfg->grpo_entropy_coef, policy->desc->id);
    if (cfg->grpo_sync_ref_every > 0 && cfg->lora_r > 0)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "grpo.sync_ref_every = %lld with [lora] r = %lld: the reference of a "
                              "LoRA run is the frozen base (adapters off), which does not move; "
                              "expected sync_ref_every = 0", cfg->grpo_sync_ref_every,
                              cfg->lora_r);
    if (cfg->sampling_weights_dtype == GRPO_WEIGHTS_BF16 && cfg->lora_r > 0 &&
        cfg->lora_base_dtype != GRPO_BASE_BF16)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "sampling.weights_dtype = bf16 with [lora] r = %lld: a LoRA run "
                              "samples from its frozen base; hold that base in bf16 instead "
                              "(lora.base_dtype = bf16: exact, no correction needed)",
                              cfg->lora_r);
    if (cfg->sampling_compute_dtype == GRPO_COMPUTE_BF16 && cfg->lora_r == 0 &&
        cfg->sampling_weights_dtype != GRPO_WEIGHTS_BF16)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: sampling.compute_dtype = bf16 needs sampling.weights_dtype = "
                              "bf16: the rollout computes in bf16 on the bf16 copy of the policy "
                              "that weights_dtype = bf16 keeps; set both, or compute_dtype = fp32",
                              cfg->path);
    if (cfg->grpo_ref_compute_dtype == GRPO_REF_COMPUTE_BF16 && !(cfg->grpo_beta > 0))
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: grpo.ref_compute_dtype = bf16 needs grpo.beta > 0: with beta = "
                              "0 no reference model is loaded, so there is no reference pass",
                              cfg->path);
    if (cfg->grpo_sync_ref_every > 0 && !(cfg->grpo_beta > 0))
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "grpo.sync_ref_every = %lld needs grpo.beta > 0: with beta = 0 no "
                              "reference model is loaded, so there is nothing to refresh",
                              cfg->grpo_sync_ref_every);
    return GRPO_OK;
}

/* Data parallel: each rank takes an equal share of every chunk's prompts. The gradients are
 * summed by MPI in host memory: a GPU backend's would need NCCL (not built). */
static int check_ranks(const grpo_run_config *cfg, const grpo_ops *ops, grpo_error *err) {
    int W = grpo_comm_size();
    if (W == 1) return GRPO_OK;
    if (strcmp(ops->name, "cpu") != 0)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "%s: %d ranks on the %s backend: data parallel over MPI sums "
                              "gradients in host memory; GPU ranks need NCCL, which is not built "
                              "yet (run one process, or model.backend = cpu)",
                              cfg->path, W, ops->name);
    if (cfg->train_batch_prompts % W != 0)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: train.batch_prompts = %lld is the global batch and does not "
                              "divide over the %d ranks; expected a multiple of %d (or another "
                              "rank count)",
                              cfg->path, cfg->train_batch_prompts, W, W);
    if (cfg->grpo_drop_zero_std_groups && cfg->grpo_resample_rounds > 0)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: grpo.resample_rounds = %lld is not implemented over several "
                              "ranks yet (%d ranks); expected 0 or one process",
                              cfg->path, cfg->grpo_resample_rounds, W);
    return GRPO_OK;
}

/* The backends whose attention takes a mask value > 1 as a segment id (ABI 1.7: packed rows)
 * and one >= 1 << GRPO_ATTN_CHILD_SHIFT as a child of a parent segment (1.8: packs that share
 * their prompts, train.shared_prefix). */
static int backend_has_segments(const grpo_ops *ops) {
    return strcmp(ops->name, "cpu") == 0 || strcmp(ops->name, "cuda") == 0;
}

/* train.max_tokens_per_microbatch: every row (its prompt and its completion) must fit a pack,
 * and packed rows need a backend with segment ids, and parent and child segments when they share
 * their prompts (cpu, cuda). A micro-batch that must see its entropies whole
 * (top_entropy_quantile < 1) and may not fit one pack is checked at the step, where its rows'
 * lengths are known. */
static int check_packing(const grpo_run_config *cfg, const grpo_ops *ops, grpo_error *err) {
    long long K = cfg->train_max_tokens_per_microbatch;
    if (K == 0) return GRPO_OK;
    long long C = cfg->env.entry ? cfg->env_max_episode_tokens
                                 : cfg->sampling_max_completion_length; /* the sampler's max_new */
    long long row = cfg->data_max_prompt_length + C;
    if (K < row)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: train.max_tokens_per_microbatch = %lld is smaller than the "
                              "longest row, %lld tokens (data.max_prompt_length = %lld + %s = "
                              "%lld); expected at least %lld",
                              cfg->path, K, row, cfg->data_max_prompt_length,
                              cfg->env.entry ? "env.max_episode_tokens"
                                             : "sampling.max_completion_length",
                              C, row);
    if (!backend_has_segments(ops))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "%s: train.max_tokens_per_microbatch = %lld on the %s backend: "
                              "packed rows need attention by segment id (ABI 1.7, 1.8), which "
                              "only the cpu and cuda backends implement; set it to 0 (padded "
                              "micro-batches) or model.backend = cpu",
                              cfg->path, K, ops->name);
    return GRPO_OK;
}

/* [env]: the environment plugin (evaluations run episodes too); a run whose rewards never read
 * the episodes' reward is warned of. */
static int open_env(trainer *t, grpo_error *err) {
    const grpo_run_config *cfg = t->cfg;
    int reads = 0;
    for (int k = 0; k < cfg->n_rewards; k++)
        reads |= !strcmp(cfg->rewards[k].plugin, "builtin.env");
    if (!reads)
        fprintf(stderr, "warning: %s: env.plugin = %s, but no [reward.NAME] has plugin = "
                "builtin.env: the environment's rewards are not trained on\n", cfg->path,
                cfg->env_plugin);
    return grpo_episodes_open(&t->episodes, &t->s.run, err);
}

/* sampling.oversample keeps the groups with a reward spread: dynamic sampling's rule, so it
 * needs drop_zero_std_groups; its groups are scored as they complete, which an environment's
 * episodes (final only once every episode is) do not allow. */
static int check_oversample(const grpo_run_config *cfg, grpo_error *err) {
    if (!(cfg->sampling_oversample > 1)) return GRPO_OK;
    if (!cfg->grpo_drop_zero_std_groups)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: sampling.oversample = %g needs grpo.drop_zero_std_groups = "
                              "true (it keeps the groups whose rewards differ); expected "
                              "oversample = 1 or dynamic sampling on",
                              cfg->path, cfg->sampling_oversample);
    if (cfg->env.entry)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "%s: sampling.oversample = %g with env.plugin = %s: a group is "
                              "scored as it completes, and an episode's fields are final only "
                              "once every episode is; expected oversample = 1",
                              cfg->path, cfg->sampling_oversample, cfg->env_plugin);
    return GRPO_OK;
}

/* sampling.continuous = false decodes each chunk alone, all its rows at once: a cap on the rows
 * decoded together (sampling.max_live_rows) needs the continuous schedule. */
static int check_continuous(const grpo_run_config *cfg, grpo_error *err) {
    if (cfg->sampling_continuous || cfg->sampling_max_live_rows == 0) return GRPO_OK;
    return grpo_error_set(err, GRPO_ERR_INVALID,
                          "%s: sampling.max_live_rows = %lld needs sampling.continuous = true "
                          "(a cap on the rows decoded together refills their cache rows); "
                          "expected max_live_rows = 0 or continuous = true",
                          cfg->path, cfg->sampling_max_live_rows);
}

/* The long-tail benchmark's hook (bench/grpo_step.md), read here and nowhere else: the
 * environment variable GRPO_BENCH_END_AT = "L_0,...,L_{G-1}" forces row j of every group to end
 * with the first EOS id at length L_j (grpo_sampler_opts.end_at), so that grpo and TRL generate
 * the same tokens on a random model. Unset: t->end_at stays NULL. Said on stderr at the start. */
static int bench_end_at(trainer *t, grpo_error *err) {
    const char *v = getenv("GRPO_BENCH_END_AT");
    const grpo_run_config *cfg = t->cfg;
    if (!v) return GRPO_OK;
    int32_t G = (int32_t)cfg->sampling_num_generations, n = 0;
    long long T = cfg->sampling_max_completion_length;
    if (!(t->end_at = malloc((size_t)G * sizeof *t->end_at)))
        return grpo_nomem(err, "GRPO_BENCH_END_AT's lengths", (uint64_t)G * sizeof *t->end_at);
    int ok = 1;
    for (const char *p = v; ok;) {
        char *end;
        long long L = strtoll(p, &end, 10);
        ok = end != p && L >= 1 && L <= T && n < G && (*end == ',' || *end == 0);
        if (ok) t->end_at[n++] = (int32_t)L;
        if (!ok || *end == 0) break;
        p = end + 1;
    }
    const grpo_ops *ops = t->s.run.proc.ops; /* the sampler's host draw path, logits_logp */
    int host = !grpo_ops_supports(ops, sample_rows) && grpo_ops_supports(ops, logits_logp);
    if (!ok || n != G || cfg->env.entry || t->s.run.n_eos < 1 || !host)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "GRPO_BENCH_END_AT = \"%s\" (the long-tail benchmark's forced "
                              "completion lengths): expected %d comma-separated lengths in [1, "
                              "sampling.max_completion_length = %lld], a tokenizer with an EOS id "
                              "(it has %d), no [env] and the cpu backend",
                              v, G, T, t->s.run.n_eos);
    if (grpo_comm_rank() == 0)
        fprintf(stderr, "grpo: GRPO_BENCH_END_AT = %s: completion lengths are forced by the "
                "benchmark hook (row j of each group ends with EOS id %d at length L_j); not a "
                "training run\n", v, t->s.run.eos[0]);
    return GRPO_OK;
}

/* What GRPO adds to the session: reference, rewards, sampler and advantage options, chunks. */
int grpo_trainer_setup(trainer *t, grpo_error *err) {
    const grpo_run_config *cfg = t->cfg = t->s.cfg;
    int rc = refuse_options(cfg, t->s.policy, err);
    if (rc == GRPO_OK) rc = check_oversample(cfg, err);
    if (rc == GRPO_OK) rc = check_continuous(cfg, err);
    if (rc == GRPO_OK && grpo_comm_rank() == 0) grpo_run_config_warn_cannot_learn(cfg, stderr);
    if (rc == GRPO_OK) rc = check_ranks(cfg, t->s.run.proc.ops, err);
    if (rc == GRPO_OK) rc = check_packing(cfg, t->s.run.proc.ops, err);
    if (rc == GRPO_OK) rc = grpo_reference_open(&t->ref, &t->s, err);
    if (rc == GRPO_OK) rc = open_rollout(t, err);
    if (rc == GRPO_OK) rc = share_work(t, err);
    if (rc == GRPO_OK) rc = open_eval(t, err);
    if (rc == GRPO_OK && cfg->env.entry) rc = open_env(t, err);
    if (rc == GRPO_OK)
        rc = grpo_reward_set_create(&t->rewards, cfg, &t->s.run.proc.reg, &t->s.run.proc.host, err);
    if (rc == GRPO_OK) rc = grpo_best_open(&t->s, &t->rewards, cfg->env.entry != NULL, err);
    if (rc == GRPO_OK) rc = bench_end_at(t, err);
    if (rc != GRPO_OK) return rc;
    if (!(t->w = malloc((size_t)t->rewards.n * sizeof(float))))
        return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    grpo_reward_set_weights(&t->rewards, t->w);
    grpo_sampler_opts so = {{(float)cfg->sampling_temperature, (int32_t)cfg->sampling_top_k,
                             (float)cfg->sampling_top_p, (float)cfg->sampling_min_p,
                             (float)cfg->sampling_repetition_penalty},
                            (int32_t)cfg->sampling_num_generations,
                            (int32_t)(cfg->env.entry ? cfg->env_max_episode_tokens
                                                     : cfg->sampling_max_completion_length),
                            {0},
                            t->s.run.n_eos,
                            t->s.run.pad_id,
                            1, /* the sampler's log-probs, compared with training's */
                            NULL,   /* rollout.c sets turns for a chunk with episodes */
                            NULL,   /* train_step points it at the step's token budget */
                            NULL,   /* bench_end_at's lengths, set below */
                            0, 0}; /* keep, ref_logp: chunks_sample decides per rollout */
    memcpy(so.eos, t->s.run.eos, sizeof so.eos);
    so.end_at = t->end_at;
    t->so = so;
    t->scale = grpo_sampling_logit_scale(&so.sampling); /* the sampler's: the same log-probs */
    t->ao = grpo_advantage_opts_default();
    t->ao.scale = cfg->grpo_scale_rewards, t->ao.std_unbiased = cfg->grpo_std_unbiased;
    t->ao.clip = (float)cfg->grpo_advantage_clamp,
    t->ao.batch_renorm = cfg->grpo_advantage_clamp > 0;
    int32_t N = (int32_t)(cfg->train_batch_prompts / grpo_comm_size() *
                          cfg->sampling_num_generations); /* this rank's rows of a chunk */
    t->micro = cfg->train_micro_batch > 0 && cfg->train_micro_batch < N
                   ? (int32_t)cfg->train_micro_batch
                   : N;
    t->n_chunks = (int)cfg->train_grad_accum;
    t->cap_chunks =
        t->n_chunks + (cfg->grpo_drop_zero_std_groups ? (int)cfg->grpo_resample_rounds : 0);
    if (!(t->chunks = calloc((size_t)t->cap_chunks, sizeof *t->chunks)))
        return grpo_nomem(err, "the step's chunks (train.grad_accum + grpo.resample_rounds)",
                          (uint64_t)t->cap_chunks * sizeof *t->chunks);
    if (cfg->log_completions_every > 0)
        rc = grpo_session_log_open(&t->s, "completions.jsonl", &t->completions, err);
    return rc;
}

/* Frees what setup made; closing completions.jsonl is a write, so its error is returned. */
int grpo_trainer_teardown(trainer *t, grpo_error *err) {
    int rc = grpo_run_log_close(&t->completions, err);
    for (int a = 0; t->chunks && a < t->cap_chunks; a++) grpo_trainer_chunk_clear(&t->chunks[a]);
    free(t->chunks), free(t->w), free(t->load), free(t->end_at);
    grpo_seqbatch_free(&t->sb);
    grpo_episodes_close(&t->episodes);
    grpo_reward_set_free(&t->rewards);
    grpo_reference_close(&t->ref);
    grpo_model_close(t->rollout);
    grpo_dataset_free(t->eval_data);
    return rc;
}
