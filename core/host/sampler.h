/*
 * sampler.h — the rollout of one generation batch: G completions for each of B prompts. The
 * project's one decode loop: `grpo train`, `grpo eval`, `grpo generate` (G = 1, greedy =
 * temperature 0) and the benchmarks all generate through grpo_sampler_run(), which reaches the
 * KV cache only through the model host (host/model_instance.h: reserve_kv, prefill, decode, kv_copy_row).
 *
 * Dimension letters: B prompts, G completions per prompt, N = B*G completion rows (group-major:
 * row n belongs to prompt n / G), P prompt columns (left-padded), T = max_completion_length,
 * V vocabulary.
 *
 * Continuous decode over several batches (the trainer's chunks): grpo_sampler_run_queue below.
 *
 * How: the B prompts are prefilled ONCE into cache rows 0..B-1, each prompt's
 * cache is copied into its G rows (kv_copy_row), then all live rows decode together, one token
 * per row per step. A row stops after it emits any of the EOS ids, or after T tokens; a finished
 * row leaves the batch (the last live row moves into its cache row). Tokens are drawn with
 * sampling.h (transformers' processor order) from one RNG, live rows in cache order, so the same
 * RNG state and the same model give the same completions.
 *
 * Forced lengths (opts.end_at; only the long-tail benchmark's hook GRPO_BENCH_END_AT sets it):
 * row n's token end_at[n % G] is the first EOS id, drawn from a point mass, and before it the
 * EOS ids are out of every draw (logits -inf ahead of the processors), so each row has exactly
 * its length on any model, as a logits processor does it in transformers (bench/grpo_step.md).
 *
 * completion_mask: 1 for every generated token up to and including the first EOS, 0 after.
 * A row that reached T tokens without an EOS is truncated (TRL's mask_truncated_completions),
 * and so is a row still live when the opts' token budget runs out (sampling.max_step_tokens).
 *
 * Multi-turn (opts.turns, for environments: train/episode.h): a row's completion is an episode.
 * Tokens the host forces into a row (an observation) are fed through decode like drawn ones, so
 * they extend the row's KV cache and are never recomputed; they draw nothing from the RNG, get
 * mask 0 and logp 0, and an EOS id among them ends nothing. A row first forces what begin()
 * gives it; when it draws an EOS, turn_end() either ends it or gives the next observation to
 * force. A row that reaches T cells (tokens of both kinds) ends truncated, as does one whose
 * next observation does not fit in the cells left.
 */
#ifndef GRPO_SAMPLER_H
#define GRPO_SAMPLER_H

#include <stdint.h>

#include "host/model_instance.h"
#include "base/rng.h"
#include "host/sampling.h"

#define GRPO_SAMPLER_MAX_EOS 8

/* The host side of multi-turn rollouts. Token arrays handed back are borrowed until the next
 * call for that row. */
typedef struct grpo_sampler_turns {
    void *user;
    /* Output row n's first tokens to force (its first observation; *n_obs 0 = none). */
    int (*begin)(void *user, int32_t row, const int32_t **obs, int32_t *n_obs, grpo_error *err);
    /* Row n drew an EOS; ids[0..n_ids) is the turn it ended (EOS included). Sets *done = 1 to end
     * the row, else *obs, *n_obs: the tokens to force next. room = cells the row has left. */
    int (*turn_end)(void *user, int32_t row, const int32_t *ids, int32_t n_ids, int32_t room,
                    const int32_t **obs, int32_t *n_obs, int *done, grpo_error *err);
} grpo_sampler_turns;

typedef struct grpo_sampler_opts {
    grpo_sampling sampling;
    int32_t G;                         /* completions per prompt */
    int32_t max_new;                   /* T: most tokens per completion */
    int32_t eos[GRPO_SAMPLER_MAX_EOS]; /* ids that end a completion */
    int32_t n_eos;                     /* 0 = never stop early */
    int32_t pad_id;                    /* written after a completion's end */
    int32_t policy_logp;               /* 1: also record grpo_rollout.plogp (below) */
    const grpo_sampler_turns *turns;   /* NULL: one turn per row (the completion) */
    int64_t *budget;                   /* NULL: none. Else the tokens the rollout may still
                                          generate (sampling.max_step_tokens), shared by the
                                          rollouts of a step: each decode step takes one token
                                          per live row from it; once it is <= 0 every live row
                                          ends truncated (grpo_rollout.budget_cut) */
    const int32_t *end_at;             /* NULL: none. Else (G) forced lengths, a benchmark's
                                          hook (GRPO_BENCH_END_AT, train/train_setup.c): row n
                                          draws no EOS id before token end_at[n % G] (1-based),
                                          which is eos[0] from a point mass (logp 0; plogp the
                                          model's, as always). Needs an EOS id and the host
                                          path with ops->logits_logp (the cpu backend) */
    int32_t keep;                      /* 1: a batch of the static schedule keeps its rows'
                                          training activations for their forward
                                          (grpo_model_keep_for: B*G rows, the prompts' P
                                          columns, max_new; grpo_sampler_stats.kept), where the
                                          model can; 0: any keep of the model is dropped */
    int32_t ref_logp;                  /* 1: a LoRA run's KL reference decoded beside its
                                          rollout: the static schedule's host path, on a pack
                                          with set_lora_rows (1.11), runs a row of the base
                                          (adapters off) beside each completion, fed its tokens,
                                          in the same decode calls (each weight read once for
                                          both), and records grpo_rollout.rlogp
                                          (grpo_sampler_stats.ref_rows); elsewhere nothing */
} grpo_sampler_opts;

/* One generation batch's completions, host memory, owned by the struct (grpo_rollout_free). */
typedef struct grpo_rollout {
    int32_t N, T;
    int32_t *ids;       /* (N,T) completion tokens; pad_id after the end */
    float *mask;        /* (N,T) completion_mask: 1 up to and including the first EOS; with
                           turns, 1 on drawn tokens and 0 on forced (observation) ones */
    int32_t *len;       /* (N) tokens generated (EOS included), forced ones included */
    uint8_t *truncated; /* (N) 1 when the row reached T tokens without an EOS */
    float *logp;        /* (N,T) log-prob of each drawn token under the distribution it was drawn
                           from (softmax of the processed logits; greedy: of the penalised
                           logits); 0 past the end */
    int32_t budget_cut; /* rows ended (truncated) because the opts' budget ran out */
    float *plogp;       /* (N,T) with grpo_sampler_opts.policy_logp, else NULL: the drawn token's
                           log softmax(logits / temperature) (temperature 0: 1) of the model's
                           logits before penalties and filters, which is what a training forward
                           at that temperature computes (importance sampling, is_correction.h);
                           0 past the end */
    float *rlogp;       /* (N,T) where grpo_sampler_opts.ref_logp ran, else NULL: each token's
                           log softmax(logits / temperature) under the base alone (adapters off),
                           as plogp is the model's: the LoRA reference forward's log-probs;
                           0 past the end */
} grpo_rollout;

/* Samples G completions for each of the B prompt rows prompt (B,P) with pmask (B,P) (1 = real,
 * column P-1 real in every row), host memory. rng advances. out is (re)allocated to N = B*G rows
 * and T = o->max_new columns. Errors name the bad argument or come from the model. */
int grpo_sampler_run(grpo_model *m, const grpo_sampler_opts *o, const int32_t *prompt,
                     const int32_t *pmask, int32_t B, int32_t P, grpo_rng *rng, grpo_rollout *out,
                     grpo_error *err);

/* The same with one stream per completion row: row n draws from row_rng[n] (row_rng[B*G]
 * advance), so a row's tokens depend neither on the other rows of the batch nor on the order the
 * live rows are drawn in (the trainer: the same completions on any number of ranks). */
int grpo_sampler_run_rows(grpo_model *m, const grpo_sampler_opts *o, const int32_t *prompt,
                            const int32_t *pmask, int32_t B, int32_t P, grpo_rng *row_rng,
                            grpo_rollout *out, grpo_error *err);

/* Called on the sampler's thread once per row n as it ends, with its ids, mask, logp, len and
 * truncated final (the trainer's rewards score it while other rows decode: train/rollout.c). A
 * non-OK return ends the rollout with that error.
 * step_end (NULL: none) is called after each decode step, once the rows that ended in it were
 * handed to fn; *stop = 1 ends the rollout there: the rows still live are aborted (fn is never
 * called for them; their ids, len and logp hold what they generated so far). The trainer's
 * over-sampling (train/rollout.h) stops this way once enough groups are complete. */
typedef struct grpo_sampler_row_end {
    int (*fn)(void *user, int32_t n, grpo_error *err);
    void *user;
    int (*step_end)(void *user, int *stop, grpo_error *err);
    /* grpo_sampler_run_queue only (NULL: none): begin before the batch's first fn or step_end,
     * finish once every row of the batch has ended or was aborted (its rollout is final then) */
    int (*begin)(void *user, grpo_error *err);
    int (*finish)(void *user, grpo_error *err);
} grpo_sampler_row_end;

/* grpo_sampler_run_rows, calling row_end as each row ends. */
int grpo_sampler_run_rows_each(grpo_model *m, const grpo_sampler_opts *o, const int32_t *prompt,
                               const int32_t *pmask, int32_t B, int32_t P, grpo_rng *row_rng,
                               const grpo_sampler_row_end *row_end, grpo_rollout *out,
                               grpo_error *err);

/* ---- continuous decode: a queue of generation batches -------------------------------------
 *
 * One batch of the queue: B prompts (B,P) left-padded, its row streams row_rng[B*G] (advance),
 * its callbacks (row_end, NULL: none) and its output (out, (re)allocated to B*G rows). */
typedef struct grpo_sampler_batch {
    const int32_t *prompt, *pmask;
    int32_t B, P;
    grpo_rng *row_rng;
    const grpo_sampler_row_end *row_end;
    grpo_rollout *out;
} grpo_sampler_batch;

/* What a queue run did: the most rows decoded together (sampling/live_rows_max), the rows that
 * entered a cache row after decoding began (sampling/refills), and whether it ran continuous;
 * its KV cache's memory: the most pages in use at once (sampling/kv_pages_max; 0 when the cache
 * was not paged) and their bytes (sampling/kv_bytes_max; unpaged: the whole cache). */
typedef struct grpo_sampler_stats {
    int32_t live_rows_max, refills, continuous;
    int32_t kept; /* the last batch's activations are kept (grpo_sampler_opts.keep) */
    int32_t ref_rows; /* the last batch decoded its reference rows (grpo_sampler_opts.ref_logp) */
    int32_t kv_pages_max;
    double kv_bytes_max;
} grpo_sampler_stats;

/* Samples every batch of q[nq] as grpo_sampler_run_rows_each would one after the other, and
 * gives each the same completions (a row's tokens depend only on its prompt and its stream),
 * but decodes them as one continuous batch: at most max_live rows (0: the first batch's B*G)
 * are live; when rows end, their cache rows are refilled at once with the next rows waiting
 * (their group's prompt prefilled once when its first row enters, kept in a prompt row of the
 * cache until its last row entered), so the batch stays full while a batch's tail decodes.
 * The KV cache holds max_live + ceil(max_live / G) rows, not all the rows, paged where the pack
 * and the backend can (grpo_model_reserve_kv_paged: pages follow the live tokens, a group's rows
 * share its prompt's pages); so is the static schedule's (grpo_sampler_run and the others).
 * Callbacks keep batch order: batch b's begin, fn and step_end fire once every earlier batch
 * finished; rows of b that end before are handed to fn then, in the order they ended, followed
 * by one step_end. A step_end stop aborts the rest of that batch only. The budget is shared:
 * once spent, live rows and the rows still waiting end truncated (budget_cut).
 * Continuous needs host sampling (no grpo_ops.sample_rows), no turns and more rows than
 * max_live or several batches; otherwise the batches run one after the other (static). */
int grpo_sampler_run_queue(grpo_model *m, const grpo_sampler_opts *o, const grpo_sampler_batch *q,
                           int32_t nq, int32_t max_live, grpo_sampler_stats *stats,
                           grpo_error *err);

/* Row sn of src (ids, mask, logp, plogp, len, truncated) into row dn of dst (same T; dst may be
 * src). */
void grpo_rollout_copy_row(grpo_rollout *dst, int32_t dn, const grpo_rollout *src, int32_t sn);

void grpo_rollout_free(grpo_rollout *r);

#endif
