/*
 * trainer_internal.h — the state `grpo train` keeps between its files (trainer.h): the trainer
 * (a session plus what GRPO adds), its generation chunks and a step's loss sums. Only
 * trainer.c (the step), train_setup.c (setup, checks, evaluation) and step_log.c (metrics and
 * completions) include it; calls go trainer.c -> train_setup.c, step_log.c, reference.c.
 */
#ifndef GRPO_TRAINER_INTERNAL_H
#define GRPO_TRAINER_INTERNAL_H

#include "train/advantage.h"
#include "train/episode.h"
#include "train/is_correction.h"
#include "train/reference.h"
#include "train/rewards.h"
#include "train/rollout.h"
#include "train/seqbatch.h"
#include "train/session.h"

/* [env] sums of a chunk's episodes: count, turns, tool calls, tool errors, episodes with a tool
 * call, observation tokens, episodes the environment ended, tokens. */
enum { ENV_STATS = 8 };

/* One generation chunk: B prompts x G completions (N = B*G rows). */
typedef struct chunk {
    grpo_rollout_batch rb; /* prompts (B,P), completions (N, max_completion_length), R (N,K) */
    int32_t T;             /* longest completion of the chunk (>= 1) */
    float *r, *adv;        /* (N) summed reward, advantage */
    float *mask;           /* (N,T) loss mask (truncated rows zeroed when asked) */
    float *old_logp;       /* (N,T) when num_iterations > 1, else NULL */
    float *samp_logp;      /* (N,T) the rollout copy's log-probs of the tokens (bf16 rollout) */
    float *ref_logp;       /* (N,T) the KL reference's, decoded beside the rollout
                              (grpo.ref_from_rollout), else NULL: the reference forward runs */
    grpo_advantage_metrics am; /* of the whole chunk, every rank's rows */
    int dropped;           /* groups left out of the loss (grpo.drop_zero_std_groups) */
    /* Data parallel (comm.h): this rank holds rows [rank*N, (rank+1)*N) of the chunk's gN rows */
    int32_t gB, g0;        /* the chunk's prompts over all ranks; global index of the first here */
    int32_t gP;            /* prompts it started over all ranks: gB, more when over-sampling
                              (sampling.oversample); the next chunk's g0 counts these */
    grpo_rng *row_rng;     /* [N] sampling stream of each completion: (seed, step, global row) */
    int32_t gN, gdropped;  /* rows and dropped groups over all ranks */
    float *gR, *gr, *gadv; /* (gN,K), (gN), (gN): every rank's rewards, sums, advantages */
    float *glen, *gtrunc;  /* (gN) completion lengths, truncation flags */
    double env[ENV_STATS]; /* [env]: this rank's episode sums (env_stats) */
    float *env_rows;       /* (N,4) [env]: each episode's reward, turns, tool calls, tool errors */
    int kept;              /* its rollout kept the rows' training activations (train.reuse_rollout)
                              and no pass has used or dropped them yet */
} chunk;

/* The phases of a step timed into time/... metrics: generation with its rewards and advantages
 * (and the old policy's log-probs), the reference forward, the policy's forward + loss +
 * backward, the gradient reduction and optimizer step. */
enum { PH_ROLLOUT, PH_REFERENCE, PH_POLICY, PH_OPTIMIZER, PHASES };

/* A step's loss metrics summed over its micro-batches (token-weighted), then over the ranks. */
typedef struct loss_sums {
    double loss, tokens, kl, entropy, low, high, region, cispo;
    double low_min, high_max;
    double aux; /* mean MoE auxiliary loss over the micro-batches */
    double positions, padded; /* positions handed to the model in the policy micro-batches, and
                                 of them padding (mask 0): train/padding_frac */
    double passes, reused;    /* policy passes, and of them those that took the rollout's
                                 activations (train.reuse_rollout): perf/rollout_reused */
    double ref_decoded;       /* passes whose reference log-probs came from the rollout
                                 (grpo.ref_from_rollout): perf/reference_decoded */
} loss_sums;

typedef struct trainer {
    grpo_session s;             /* run, policy, data order, optimizer, state, metrics.jsonl */
    const grpo_run_config *cfg; /* &s.run.cfg */
    grpo_reference ref;         /* reference model (beta > 0) or the LoRA base; else empty */
    grpo_model *rollout;        /* sampling.weights_dtype = bf16: the policy's bf16 copy the
                                   rollout samples from, refreshed after each update; else NULL */
    grpo_is_sums is;            /* this step's importance-sampling metrics */
    int32_t sample_dtype;       /* GRPO_DTYPE_* the policy samples in: bf16 for a LoRA run with
                                   sampling.compute_dtype = bf16 (no rollout copy); else f32 */
    grpo_reward_set rewards;
    grpo_episodes episodes; /* [env] (episode.h) when env.plugin is set; desc NULL otherwise */
    float *w; /* (K) reward weights */
    grpo_sampler_opts so;
    grpo_advantage_opts ao;
    float scale;   /* 1 / temperature for the log-probs */
    int32_t micro; /* rows per micro-batch (the loss's unit; one forward/backward unpacked) */
    int passes;    /* forward/backward passes of this step over every rank (packs when packed) */
    chunk *chunks; /* [grad_accum + grpo.resample_rounds]: n_chunks in use this step */
    int n_chunks, cap_chunks;
    grpo_seqbatch sb;
    grpo_run_log completions; /* completions.f is NULL unless log.completions_every */
    grpo_dataset *eval_data;  /* data.eval_path when train.eval_every > 0, else NULL */
    grpo_rng eval_rng;        /* sampled evaluations draw here, never from the training stream */
    double *load; /* (load_L,load_E) MoE expert load summed over the step's policy forwards */
    int32_t load_L, load_E;
    double phase[2][PHASES]; /* this step's wall / CPU seconds per phase (time/... metrics) */
    int64_t budget_left; /* sampling.max_step_tokens: tokens this step's rollout may still draw
                            (so.budget points here when the key is set) */
    int32_t *end_at; /* (G) GRPO_BENCH_END_AT's forced completion lengths (so.end_at: the
                        long-tail benchmark's hook, train_setup.c), else NULL */
    grpo_sampler_stats decode; /* this step, this rank: the most rows decoded together
                                  (max over the step's sampler runs), rows that refilled */
    double rollout_sums[3]; /* this step, this rank: tokens generated, aborted (over-sampling),
                               rows cut by the token budget */
} trainer;

#endif
