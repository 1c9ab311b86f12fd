/* trainer.c — the GRPO training loop (see trainer.h): one step, from the rollout of its chunks
 * through the loss and backward of each micro-batch to the optimizer step, and the run around it.
 * The reference model is reference.c's, the setup and checks train_setup.c's, the step's metrics
 * and completions step_log.c's. */
#include "train/trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/comm.h"
#include "base/nomem.h"
#include "train/best.h"
#include "train/loss.h"
#include "train/reward_sum.h"
#include "train/step_log.h"
#include "train/train_setup.h"
#include "train/trainer_internal.h"

/* ---- phase timings ----------------------------------------------------------------------- */

/* Adds the wall and CPU seconds since (w0, c0) to phase ph. */
static void phase_add(trainer *t, int ph, double w0, double c0) {
    t->phase[0][ph] += grpo_now() - w0;
    t->phase[1][ph] += grpo_cpu_now() - c0;
}

/* ---- chunks ------------------------------------------------------------------------------ */

/* Whether ex fits data.max_prompt_length (a prompt another rank takes). */
static int prompt_fits(trainer *t, const grpo_example *ex, int *keep, grpo_error *err) {
    char *text = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = grpo_run_prompt(&t->s.run, t->s.data, ex, &text, &ids, &n, keep, err);
    free(text), free(ids);
    return rc;
}

/* The prompts a rank starts for its share Bl of a chunk's groups: Bl, or ceil(F x Bl) when
 * over-sampling by F = sampling.oversample (a hair below the product: 1.1 x 10 is 11). */
static int32_t prompts_started(const trainer *t, int32_t Bl) {
    double F = t->cfg->sampling_oversample;
    return F > 1 ? (int32_t)ceil(F * Bl - 1e-9) : Bl;
}

/* Over-sampling's test of a complete group's scores R (G,K): its summed rewards have a spread,
 * as chunk_drop_groups judges (grpo_zero_std_groups). */
static int group_has_spread(void *user, const float *R, int32_t G, int *pass, grpo_error *err) {
    const trainer *t = user;
    float *r = malloc((size_t)G * sizeof *r);
    if (!r) return grpo_nomem(err, "a group's summed rewards", (uint64_t)G * sizeof *r);
    unsigned char keep = 0;
    grpo_reward_sum(r, R, t->w, G, t->rewards.n);
    grpo_zero_std_groups(&keep, r, 1, G);
    free(r);
    *pass = keep;
    return GRPO_OK;
}

/* The next usable prompts of the data order (one order on every rank) are the chunk's: W x Bs
 * (Bs = prompts_started of the rank's share B / W); this rank takes its contiguous share into
 * c->rb, each completion with its own sampling stream, and keeps B / W groups of them. */
static int chunk_prompts(trainer *t, chunk *c, int32_t B, grpo_error *err) {
    int W = grpo_comm_size();
    int32_t Bl = B / W, Bs = prompts_started(t, Bl), first = grpo_comm_rank() * Bs;
    c->gB = B, c->gP = Bs * W, c->g0 = first; /* B % W == 0: setup */
    for (chunk *p = t->chunks; p < c; p++) c->g0 += p->gP;
    int rc = grpo_rollout_batch_begin(&c->rb, Bs, t->so.G, err);
    if (Bs > Bl) c->rb.keep = Bl, c->rb.spread = group_has_spread, c->rb.spread_user = t;
    int32_t G = t->so.G; /* row g of global group k draws from stream k*G + g of the step */
    if (rc == GRPO_OK && !(c->row_rng = malloc((size_t)Bs * G * sizeof *c->row_rng)))
        rc = grpo_nomem(err, "the chunk's sampling streams", (uint64_t)Bs * G * sizeof *c->row_rng);
    for (int32_t i = 0; rc == GRPO_OK && i < Bs * G; i++)
        grpo_rng_seed_stream(&c->row_rng[i], (uint64_t)t->cfg->sampling_seed,
                             (uint64_t)t->s.st.step, (uint64_t)c->g0 * G + (uint64_t)i);
    c->rb.row_rng = c->row_rng;
    c->rb.env = t->episodes.desc ? &t->episodes : NULL;
    size_t tries = 0;
    for (int32_t k = 0; rc == GRPO_OK && k < c->gP;) {
        if (tries++ > t->s.data->n + (size_t)c->gP)
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "%s: every prompt is longer than data.max_prompt_length = %lld "
                                  "(data.truncation = skip)",
                                  t->s.data->path, t->cfg->data_max_prompt_length);
        const grpo_example *ex = &t->s.data->examples[grpo_data_order_next(&t->s.order)];
        int keep = 0;
        rc = k >= first && k < first + Bs
                 ? grpo_rollout_batch_add(&c->rb, &t->s.run, t->s.data, ex, &keep, err)
                 : prompt_fits(t, ex, &keep, err);
        k += keep;
    }
    return rc;
}

/* Every rank's rows of the chunk: rewards gR (gN,K) and their sums gr, lengths, truncation flags
 * (one allgather of (N, K+2) rows, in global row order), room for the advantages gadv. */
static int chunk_gather(trainer *t, chunk *c, grpo_error *err) {
    int K = t->rewards.n, W = grpo_comm_size();
    int32_t N = c->rb.N, gN = c->gN = N * W;
    size_t row = (size_t)K + 2;
    float *mine = malloc((size_t)N * row * sizeof(float)), *all = malloc(gN * row * sizeof(float));
    c->gR = malloc(((size_t)gN * K + 1) * sizeof(float));
    c->gr = malloc((size_t)gN * sizeof(float)), c->gadv = malloc((size_t)gN * sizeof(float));
    c->glen = malloc((size_t)gN * sizeof(float)), c->gtrunc = malloc((size_t)gN * sizeof(float));
    int rc = mine && all && c->gR && c->gr && c->gadv && c->glen && c->gtrunc
                 ? GRPO_OK
                 : grpo_nomem(err, "the batch's rewards and advantages (rows x rewards)",
                              (uint64_t)gN * (K + 5) * sizeof(float));
    for (int32_t i = 0; rc == GRPO_OK && i < N; i++) {
        memcpy(mine + i * row, c->rb.R + (size_t)i * K, (size_t)K * sizeof(float));
        mine[i * row + K] = (float)c->rb.roll.len[i];
        mine[i * row + K + 1] = (float)c->rb.roll.truncated[i];
    }
    if (rc == GRPO_OK) rc = grpo_comm_allgather_f32(all, mine, (size_t)N * row, err);
    for (int32_t i = 0; rc == GRPO_OK && i < gN; i++) {
        memcpy(c->gR + (size_t)i * K, all + i * row, (size_t)K * sizeof(float));
        c->glen[i] = all[i * row + K], c->gtrunc[i] = all[i * row + K + 1];
    }
    if (rc == GRPO_OK) grpo_reward_sum(c->gr, c->gR, t->w, gN, K);
    free(mine), free(all);
    return rc;
}

/* Sums the chunk's reward scores (N,K) and computes the advantages over the whole chunk (every
 * rank's rows, so batch statistics mean what they mean in one process); keeps this rank's. */
static int chunk_rewards(trainer *t, chunk *c, grpo_error *err) {
    c->r = malloc((size_t)c->rb.N * sizeof(float));
    c->adv = malloc((size_t)c->rb.N * sizeof(float));
    if (!c->r || !c->adv)
        return grpo_nomem(err, "the chunk's rewards and advantages", 2 * (uint64_t)c->rb.N * 4);
    grpo_reward_sum(c->r, c->rb.R, t->w, c->rb.N, t->rewards.n);
    for (int32_t b = 0; b < c->rb.B; b++) {
        int scored = 0;
        for (int32_t g = 0; g < c->rb.G; g++) scored += !isnan(c->r[b * c->rb.G + g]);
        if (!scored)
            fprintf(stderr,
                    "warning: step %ld: %s:%llu: every reward returned NaN (no opinion) for "
                    "all %d completions of this prompt; its advantages are 0\n",
                    t->s.st.step + 1, t->s.data->path, (unsigned long long)c->rb.ex[b]->line,
                    c->rb.G);
    }
    int rc = chunk_gather(t, c, err);
    if (rc != GRPO_OK) return rc;
    grpo_error why;
    grpo_error_init(&why);
    int32_t gB = c->gN / c->rb.G;
    rc = t->cfg->grpo_reward_aggregation == GRPO_AGG_NORMALIZE_THEN_SUM
             ? grpo_advantages_gdpo(c->gadv, &c->am, c->gR, t->w, gB, c->rb.G, t->rewards.n,
                                    &t->ao, &why)
             : grpo_advantages(c->gadv, &c->am, c->gr, gB, c->rb.G, &t->ao, &why);
    if (rc != GRPO_OK) return grpo_error_set(err, rc, "advantages: %s", why.message);
    memcpy(c->adv, c->gadv + (size_t)grpo_comm_rank() * c->rb.N, (size_t)c->rb.N * sizeof(float));
    return GRPO_OK;
}

/* DAPO's dynamic sampling filter: the rows of groups whose rewards are all equal leave the loss
 * mask, so they neither count in num_items_in_batch nor add KL (their advantages are 0). The rows
 * stay in the micro-batches: the token-normalised types (dapo, bnpo, cispo) are exactly as if
 * they were gone, while grpo, sapo and dr_grpo still count them in N (as empty rows). */
static int chunk_drop_groups(chunk *c, grpo_error *err) {
    unsigned char *keep = malloc((size_t)c->rb.B);
    if (!keep) return grpo_nomem(err, "the dynamic sampling mask (rows)", (uint64_t)c->rb.B);
    c->dropped = grpo_zero_std_groups(keep, c->r, c->rb.B, c->rb.G);
    for (int32_t i = 0; i < c->rb.N; i++)
        if (!keep[i / c->rb.G])
            memset(c->mask + (size_t)i * c->T, 0, (size_t)c->T * sizeof(float));
    free(keep);
    double all = c->dropped; /* the frac_groups_dropped metric counts every rank's */
    int rc = grpo_comm_allreduce_f64(&all, 1, GRPO_COMM_SUM, err);
    c->gdropped = (int32_t)all;
    return rc;
}

/* The loss mask (N,T) of the chunk: the completion mask, minus truncated rows when asked, minus
 * zero-std groups when asked. */
static int chunk_mask(trainer *t, chunk *c, grpo_error *err) {
    c->T = 1;
    for (int32_t i = 0; i < c->rb.N; i++)
        c->T = c->rb.roll.len[i] > c->T ? c->rb.roll.len[i] : c->T;
    c->mask = calloc((size_t)c->rb.N * c->T, sizeof(float));
    if (!c->mask) return grpo_nomem(err, "the chunk's loss mask (N,T)", (uint64_t)c->rb.N * c->T * 4);
    for (int32_t i = 0; i < c->rb.N; i++)
        for (int32_t j = 0; j < c->T; j++)
            c->mask[(size_t)i * c->T + j] = c->rb.roll.mask[(size_t)i * c->rb.roll.T + j];
    if (t->cfg->grpo_mask_truncated_completions)
        grpo_mask_truncated(c->mask, c->rb.roll.truncated, c->rb.N, c->T);
    if (t->cfg->grpo_drop_zero_std_groups) return chunk_drop_groups(c, err);
    return GRPO_OK;
}

/* Whether packs share their groups' prompts (seqbatch.h): train.shared_prefix, as the padded
 * layout shares them (the model's set_shared_prefix), which it does not for a model with per-row
 * statistics (a MoE router's aux loss counts every row's prompt) or with LoRA dropout. */
static int pack_share(const trainer *t) {
    return t->cfg->train_shared_prefix && !t->s.policy->desc->aux_loss &&
           !(t->cfg->lora_r > 0 && t->cfg->lora_dropout > 0);
}

/* Fills t->sb with rows [r0, r0+rows) of c: padded (prompt, then completion), or packed into one
 * row when train.max_tokens_per_microbatch > 0 (seqbatch.h). */
static int chunk_batch(trainer *t, chunk *c, int32_t r0, int32_t rows, grpo_error *err) {
    const grpo_ops *ops = t->s.run.proc.ops;
    if (t->cfg->train_max_tokens_per_microbatch > 0)
        return grpo_seqbatch_pack_rollout(&t->sb, ops, c->rb.prompt, c->rb.pmask, c->rb.P,
                                          c->rb.G, &c->rb.roll, r0, rows, pack_share(t), err);
    int rc = grpo_seqbatch_from_rollout(&t->sb, ops, c->rb.prompt, c->rb.pmask, c->rb.P, c->rb.G,
                                        &c->rb.roll, r0, rows, c->T, t->s.run.pad_id, err);
    if (!t->cfg->train_shared_prefix) t->sb.shared_prefix = 0; /* every row in full */
    return rc;
}

/* How many of the rows [r0, r0+rows) of c the next forward/backward pass takes: all of them
 * (padded), or as many as fit train.max_tokens_per_microbatch tokens (packed). */
static int32_t pass_rows(const trainer *t, const chunk *c, int32_t r0, int32_t rows) {
    int64_t K = t->cfg->train_max_tokens_per_microbatch;
    return K > 0 ? grpo_seqbatch_pack_fit(c->rb.pmask, c->rb.P, c->rb.G, &c->rb.roll, r0, rows, K,
                                          pack_share(t))
                 : rows;
}

/* The rows of the micro-batch at r0 of c: train.micro_batch, fewer at the chunk's end. */
static int32_t micro_rows(const trainer *t, const chunk *c, int32_t r0) {
    return c->rb.N - r0 < t->micro ? c->rb.N - r0 : t->micro;
}

/* The forward/backward passes of chunk c: one per micro-batch, or per pack. */
static int chunk_passes(const trainer *t, const chunk *c) {
    int n = 0;
    for (int32_t r0 = 0; r0 < c->rb.N; r0 += t->micro)
        for (int32_t p0 = r0, end = r0 + micro_rows(t, c, r0); p0 < end; n++)
            p0 += pass_rows(t, c, p0, end - p0);
    return n;
}

/* The completion columns (rows, T) of an array of the current batch. */
static void completion_cols(const trainer *t, const chunk *c, const float *src, float *out) {
    grpo_seqbatch_completion(&t->sb, src, c->T, out);
}

/* A (N, c->T) copy in *out of the rollout's (N,T) log-probs lp (NULL: *out stays NULL). */
static int chunk_cols(const chunk *c, const float *lp, float **out, const char *what,
                      grpo_error *err) {
    const grpo_rollout *ro = &c->rb.roll;
    if (!lp) return GRPO_OK;
    if (!(*out = malloc((size_t)ro->N * c->T * sizeof(float))))
        return grpo_nomem(err, what, (uint64_t)ro->N * c->T * sizeof(float));
    for (int32_t i = 0; i < ro->N; i++)
        memcpy(*out + (size_t)i * c->T, lp + (size_t)i * ro->T, (size_t)c->T * sizeof(float));
    return GRPO_OK;
}

/* The sampler's log-probs of the chunk's tokens (the rollout copy's, or the policy's at decode),
 * and the KL reference's where the rollout decoded it (grpo.ref_from_rollout). */
static int chunk_samp_logp(chunk *c, grpo_error *err) {
    int rc = chunk_cols(c, c->rb.roll.plogp, &c->samp_logp, "the sampler's log-probs (N,T)", err);
    return rc == GRPO_OK ? chunk_cols(c, c->rb.roll.rlogp, &c->ref_logp,
                                      "the reference log-probs (N,T)", err)
                         : rc;
}

/* Old-policy log-probs of the whole chunk (num_iterations > 1), before any update. */
static int chunk_old_logp(trainer *t, chunk *c, grpo_error *err) {
    c->old_logp = malloc((size_t)c->rb.N * c->T * sizeof(float));
    if (!c->old_logp)
        return grpo_nomem(err, "the old policy's log-probs (N,T)", (uint64_t)c->rb.N * c->T * 4);
    for (int32_t r0 = 0, rows; r0 < c->rb.N; r0 += rows) { /* forward only: any grouping */
        rows = pass_rows(t, c, r0, micro_rows(t, c, r0));
        int rc = chunk_batch(t, c, r0, rows, err);
        grpo_session_train_compute(&t->s, 1); /* the training forward's dtype: ratio 1 at mu 0 */
        if (rc == GRPO_OK) rc = grpo_seqbatch_forward(&t->sb, t->s.policy, 0, t->scale, err);
        grpo_session_train_compute(&t->s, 0);
        if (rc != GRPO_OK) return rc;
        completion_cols(t, c, t->sb.logp, c->old_logp + (size_t)r0 * c->T);
    }
    return GRPO_OK;
}

/* The chunk's episode sums (c->env) and rows (for the completions log), before the next
 * chunk's rollout reuses the episodes. */
static void chunk_env_stats(chunk *c) {
    const grpo_episodes *E = c->rb.env;
    c->env_rows = malloc((size_t)E->N * 4 * sizeof(float));
    for (int32_t i = 0; i < E->N; i++) {
        const grpo_episode *e = &E->ep[i];
        float row[4] = {e->reward, (float)e->turns, (float)e->tool_calls, (float)e->tool_errors};
        if (c->env_rows) memcpy(c->env_rows + (size_t)i * 4, row, sizeof row);
        double v[ENV_STATS] = {1, e->turns, e->tool_calls, e->tool_errors, e->tool_calls > 0,
                               e->obs_tokens, e->done, c->rb.roll.len[i]};
        for (int k = 0; k < ENV_STATS; k++) c->env[k] += v[k];
    }
}

/* Adds the chunk's rollout to the step's sums: tokens generated (kept and aborted), tokens
 * aborted, rows cut by the token budget. */
static void chunk_rollout_sums(trainer *t, const chunk *c) {
    double kept = 0;
    for (int32_t i = 0; i < c->rb.N; i++) kept += c->rb.roll.len[i];
    t->rollout_sums[0] += kept + (double)c->rb.aborted_tokens;
    t->rollout_sums[1] += (double)c->rb.aborted_tokens;
    t->rollout_sums[2] += c->rb.roll.budget_cut;
}

/* A step's rollout begins: its sums are zeroed and its token budget (sampling.max_step_tokens)
 * refilled; every chunk and resampling round of the step draws from that one budget. */
static void rollout_begin(trainer *t) {
    memset(t->rollout_sums, 0, sizeof t->rollout_sums);
    memset(&t->decode, 0, sizeof t->decode);
    t->budget_left = (int64_t)t->cfg->sampling_max_step_tokens;
    t->so.budget = t->cfg->sampling_max_step_tokens > 0 ? &t->budget_left : NULL;
}

/* sampling/kv_pages_max and sampling/kv_bytes_max: the most KV cache pages a rank held at once
 * in the step's rollouts and their bytes (an unpaged cache: 0 pages, its whole size). */
static int log_kv_memory(const trainer *t, grpo_metric_row *row, grpo_error *err) {
    double kv[2] = {t->decode.kv_pages_max, t->decode.kv_bytes_max};
    int rc = grpo_comm_allreduce_f64(kv, 2, GRPO_COMM_MAX, err);
    if (rc == GRPO_OK) grpo_metric_set(row, "sampling/kv_pages_max", kv[0]);
    if (rc == GRPO_OK) grpo_metric_set(row, "sampling/kv_bytes_max", kv[1]);
    return rc;
}

/* The step's rollout sums over the ranks (a collective: every rank calls it) as metrics:
 * sampling/aborted_tokens with over-sampling, sampling/step_tokens and
 * sampling/budget_cut_rows with a token budget; always sampling/live_rows_max (the most rows
 * a rank decoded together: sampling.max_live_rows keeps it) and sampling/refills (rows that
 * entered the decode batch after it began: continuous decode ran). */
static int log_rollout_sums(const trainer *t, grpo_metric_row *row, grpo_error *err) {
    double s[3], live = t->decode.live_rows_max, refills = t->decode.refills;
    memcpy(s, t->rollout_sums, sizeof s);
    int rc = grpo_comm_allreduce_f64(s, 3, GRPO_COMM_SUM, err);
    if (rc == GRPO_OK) rc = grpo_comm_allreduce_f64(&live, 1, GRPO_COMM_MAX, err);
    if (rc == GRPO_OK) rc = grpo_comm_allreduce_f64(&refills, 1, GRPO_COMM_SUM, err);
    if (rc == GRPO_OK) grpo_metric_set(row, "sampling/live_rows_max", live);
    if (rc == GRPO_OK) grpo_metric_set(row, "sampling/refills", refills);
    if (rc == GRPO_OK) rc = log_kv_memory(t, row, err);
    if (rc == GRPO_OK && t->cfg->sampling_oversample > 1)
        grpo_metric_set(row, "sampling/aborted_tokens", s[1]);
    if (rc == GRPO_OK && t->cfg->sampling_max_step_tokens > 0) {
        grpo_metric_set(row, "sampling/step_tokens", s[0]);
        grpo_metric_set(row, "sampling/budget_cut_rows", s[2]);
    }
    return rc;
}

/* The sampler's stats of one run join the step's: the most rows live, the refills summed. */
static void decode_stats_add(trainer *t, const grpo_sampler_stats *st) {
    if (st->live_rows_max > t->decode.live_rows_max)
        t->decode.live_rows_max = st->live_rows_max;
    t->decode.refills += st->refills, t->decode.continuous |= st->continuous;
    if (st->kv_pages_max > t->decode.kv_pages_max) t->decode.kv_pages_max = st->kv_pages_max;
    if (st->kv_bytes_max > t->decode.kv_bytes_max) t->decode.kv_bytes_max = st->kv_bytes_max;
}

/* Whether no two neighbouring prompts of b are the same: the training pass then shares each
 * prompt with exactly its own G rows, as the rollout prefilled them (the kept layout). */
static int distinct_prompts(const grpo_rollout_batch *b) {
    for (int32_t k = 1; k < b->B; k++)
        if (b->n_ids[k] == b->n_ids[k - 1] &&
            !memcmp(b->ids[k], b->ids[k - 1], (size_t)b->n_ids[k] * sizeof(int32_t)))
            return 0;
    return 1;
}

/* Whether the rollout of chunk c (n chunks in it) keeps its rows' activations for their training
 * forward (train.reuse_rollout): the step's only chunk (no accumulation, no resampling round
 * yet), on the cpu backend (the pack copies each decode row's tensors apart: one call each, too
 * many for a GPU), the policy samples itself and trains in fp32, the chunk is one pass (a
 * micro-batch of all its rows, not packed, prompts shared), one update per generation batch, no
 * LoRA dropout (the training forward's adapter input differs from decode's), no checkpointing,
 * no over-sampling (its kept rows leave in another order). A LoRA run's reference pass (the
 * base, adapters off) runs between the rollout and the policy's forward without dropping it. */
/* Whether the rollout decodes the KL reference beside its rows (grpo.ref_from_rollout): a LoRA
 * run whose reference is its base in fp32, the policy sampling itself in fp32 on the cpu backend
 * (where decode and the reference forward compute every token alike; both take the logits at
 * t->scale, the sampler's). The sampler does it where it can (its static schedule). */
static int ref_decode_wanted(const trainer *t) {
    return t->cfg->grpo_ref_from_rollout && t->ref.is_base &&
           t->ref.compute_dtype == GRPO_DTYPE_F32 && !t->rollout &&
           t->sample_dtype == GRPO_DTYPE_F32 && !strcmp(t->s.policy->ops->name, "cpu");
}

/* Whether the model that samples computes every token as the policy's training forward will:
 * the policy itself in fp32 both ways, or the bf16 rollout copy under bf16 compute and the
 * policy's bf16 training forward (the copy holds the bf16 values the policy's products round
 * its fp32 weights to: test_run_keys `bf16_sampling_and_bf16_training_compute_alike`). */
static int sampler_alike(const trainer *t) {
    const grpo_run_config *cfg = t->cfg;
    if (!t->rollout)
        return t->sample_dtype == GRPO_DTYPE_F32 &&
               cfg->train_compute_dtype != GRPO_TRAIN_COMPUTE_BF16;
    return cfg->sampling_compute_dtype == GRPO_COMPUTE_BF16 &&
           cfg->train_compute_dtype == GRPO_TRAIN_COMPUTE_BF16;
}

static int keep_wanted(const trainer *t, const chunk *c, int n) {
    const grpo_run_config *cfg = t->cfg;
    return cfg->train_reuse_rollout && n == 1 && t->n_chunks == 1 && distinct_prompts(&c->rb) &&
           !strcmp(t->s.policy->ops->name, "cpu") && sampler_alike(t) &&
           cfg->grpo_num_iterations == 1 &&
           !(cfg->lora_r > 0 && cfg->lora_dropout > 0) &&
           !cfg->train_gradient_checkpointing && cfg->train_max_tokens_per_microbatch == 0 &&
           pack_share(t) && t->micro >= c->rb.N && c->rb.keep == 0 && !c->rb.env;
}

/* The rollout copy wrote chunk c's activations into the policy's keep block (keep_into): the
 * policy takes them as written, each row's completion tokens but its last (never fed to a
 * decode step). */
static int keep_adopt(trainer *t, chunk *c, grpo_error *err) {
    const grpo_rollout *ro = &c->rb.roll;
    int32_t *pre = malloc((size_t)ro->N * 2 * sizeof *pre), *written = pre + ro->N;
    if (!pre) return grpo_nomem(err, "the kept rows' prompts", (uint64_t)ro->N * 8);
    for (int32_t n = 0; n < ro->N; n++)
        pre[n] = n / c->rb.G, written[n] = ro->len[n] > 0 ? ro->len[n] - 1 : 0;
    grpo_rollout_keep k;
    int rc = grpo_model_keep_for(t->s.policy, ro->N, c->rb.P, t->so.max_new, c->rb.B, pre, &k,
                                 err);
    k.written = written;
    if (rc == GRPO_OK) rc = grpo_model_keep_rollout(t->s.policy, &k, err);
    free(pre);
    return rc;
}

/* Chunks c[0..n) of the step: their prompts, then one continuous rollout of all of them
 * (rollout.h grpo_rollout_batches_run; with an environment, one static rollout each). A rollout
 * drops what an earlier one kept (the policy keeps one batch). */
static int chunks_sample(trainer *t, chunk *c, int n, int32_t B, grpo_error *err) {
    int rc = GRPO_OK;
    for (int a = 0; a < t->n_chunks; a++) t->chunks[a].kept = 0;
    for (int a = 0; rc == GRPO_OK && a < n; a++) {
        grpo_trainer_chunk_clear(&c[a]);
        grpo_plugin_call_progress(t->s.st.step + 1, (long)(c + a - t->chunks) + 1); /* crash */
        rc = chunk_prompts(t, &c[a], B, err);
        c[a].rb.step = (uint64_t)t->s.st.step, c[a].rb.total_steps = (uint64_t)t->cfg->train_steps;
    }
    grpo_model *sampler = t->rollout ? t->rollout : t->s.policy;
    if (rc != GRPO_OK || n == 0) return rc;
    if (c[0].rb.env) {
        for (int a = 0; rc == GRPO_OK && a < n; a++)
            rc = grpo_rollout_batch_run(&c[a].rb, &t->s.run, sampler, &t->so, &t->s.st.rng,
                                        &t->rewards, err);
        return rc;
    }
    grpo_rollout_batch *bs[64];
    grpo_sampler_stats st;
    int32_t per_run = t->cfg->sampling_continuous ? 64 : 1; /* chunks a sampler run decodes */
    for (int32_t a0 = 0; rc == GRPO_OK && a0 < n; a0 += per_run) {
        int32_t k = n - a0 < per_run ? n - a0 : per_run;
        for (int32_t a = 0; a < k; a++) bs[a] = &c[a0 + a].rb;
        t->so.keep = keep_wanted(t, &c[a0], n), t->so.ref_logp = ref_decode_wanted(t);
        rc = grpo_rollout_batches_run(bs, k, &t->s.run, sampler, &t->so, &t->rewards,
                                      (int32_t)t->cfg->sampling_max_live_rows, &st, err);
        if (rc == GRPO_OK) decode_stats_add(t, &st);
        c[a0].kept = rc == GRPO_OK && t->so.keep && st.kept && !st.continuous;
        if (c[a0].kept && t->rollout) rc = keep_adopt(t, &c[a0], err);
        t->so.keep = t->so.ref_logp = 0; /* evaluation's rollouts keep nothing */
    }
    return rc;
}

/* chunks_sample with the policy in t->sample_dtype when it samples itself (a LoRA run with
 * sampling.compute_dtype = bf16); its other passes stay f32. */
static int chunks_rollout(trainer *t, chunk *c, int n, int32_t B, grpo_error *err) {
    if (!t->rollout) t->s.policy->compute_dtype = t->sample_dtype;
    int rc = chunks_sample(t, c, n, B, err);
    if (!t->rollout) t->s.policy->compute_dtype = GRPO_DTYPE_F32;
    return rc;
}

/* What training needs of a chunk after its rollout: advantages, loss mask and, with
 * num_iterations > 1, the old policy's log-probs. */
static int chunk_prepare(trainer *t, chunk *c, grpo_error *err) {
    chunk_rollout_sums(t, c);
    if (c->rb.env) chunk_env_stats(c);
    int rc = chunk_rewards(t, c, err);
    if (rc == GRPO_OK) rc = chunk_mask(t, c, err);
    if (rc == GRPO_OK) rc = chunk_samp_logp(c, err);
    if (rc == GRPO_OK && t->cfg->grpo_num_iterations > 1) rc = chunk_old_logp(t, c, err);
    return rc;
}

/* The rollout of chunks c[0..n) (one sampler run), then each chunk prepared for training. */
static int chunks_generate(trainer *t, chunk *c, int n, int32_t B, grpo_error *err) {
    int rc = chunks_rollout(t, c, n, B, err);
    for (int a = 0; rc == GRPO_OK && a < n; a++) rc = chunk_prepare(t, &c[a], err);
    return rc;
}

/* DAPO's resampling (grpo.resample_rounds): while groups were dropped, one more chunk of as many
 * fresh prompts as were dropped in the last round, its own zero-std groups dropped in turn. The
 * extra chunks train with the others (they share num_items_in_batch and the accumulation). A
 * spent token budget (sampling.max_step_tokens) ends the rounds: their rows would be empty. */
static int resample(trainer *t, grpo_error *err) {
    int dropped = 0, rc = GRPO_OK;
    for (int a = 0; a < t->n_chunks; a++) dropped += t->chunks[a].dropped;
    while (rc == GRPO_OK && dropped > 0 && t->n_chunks < t->cap_chunks &&
           !(t->so.budget && t->budget_left <= 0)) {
        chunk *c = &t->chunks[t->n_chunks++];
        rc = chunks_generate(t, c, 1, dropped, err);
        dropped = c->dropped;
    }
    return rc;
}

/* time/rewards_scored_while_decoding: the share of the pooled rewards' calls of this step begun
 * while rows still decoded (reward_pool.h); absent without pooled rewards. A timing (it depends
 * on when calls ran), logged with them, first. */
static void log_overlap(const trainer *t, grpo_metric_row *row) {
    uint32_t early = 0, parts = 0;
    for (int a = 0; a < t->n_chunks; a++)
        early += t->chunks[a].rb.parts_early, parts += t->chunks[a].rb.parts;
    if (parts) grpo_metric_set(row, "time/rewards_scored_while_decoding", (double)early / parts);
}

/* ---- loss over the chunks ----------------------------------------------------------------- */

static void loss_add(loss_sums *s, const grpo_loss_metrics *m) {
    double w = m->n_tokens;
    s->loss += m->loss, s->tokens += w;
    s->kl += isnan(m->kl) ? 0 : m->kl * w, s->entropy += isnan(m->entropy) ? 0 : m->entropy * w;
    s->low += isnan(m->clip_low_mean) ? 0 : m->clip_low_mean * w;
    s->high += isnan(m->clip_high_mean) ? 0 : m->clip_high_mean * w;
    s->region += isnan(m->clip_region_mean) ? 0 : m->clip_region_mean * w;
    s->cispo += isnan(m->cispo_clip_ratio) ? 0 : m->cispo_clip_ratio * w;
    if (!isnan(m->clip_low_min) && m->clip_low_min < s->low_min) s->low_min = m->clip_low_min;
    if (!isnan(m->clip_high_max) && m->clip_high_max > s->high_max) s->high_max = m->clip_high_max;
}

/* Adds the policy's expert load of its last forward to t->load (MoE policies only). */
static int expert_load_add(trainer *t, grpo_error *err) {
    const grpo_model_desc *d = t->s.policy->desc;
    int32_t L = 0, E = 0;
    const float *f = GRPO_HAS_FIELD(d, grpo_model_desc, expert_load) && d->expert_load
                         ? d->expert_load(t->s.policy->inst, &L, &E)
                         : NULL;
    if (!f || L <= 0 || E <= 0) return GRPO_OK;
    if (!t->load || L != t->load_L || E != t->load_E) {
        free(t->load);
        if (!(t->load = calloc((size_t)L * E, sizeof *t->load)))
            return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory for the expert load");
        t->load_L = L, t->load_E = E;
    }
    for (size_t i = 0; i < (size_t)L * E; i++) t->load[i] += f[i];
    return GRPO_OK;
}

/* The policy's part of micro_step: forward, loss, backward (reference log-probs in buf + n),
 * the passes in train.compute_dtype (micro_policy). */
static int micro_passes(trainer *t, chunk *c, int32_t r0, int32_t rows, const grpo_loss_opts *lo,
                        float *buf, loss_sums *sums, grpo_error *err) {
    size_t n = (size_t)rows * c->T;
    float *logp = buf, *ref = buf + n, *ent = buf + 2 * n, *dl = buf + 3 * n, *de = buf + 4 * n;
    float *is_w = buf + 5 * n; /* importance weights of the rollout copy's samples */
    int bonus = lo->entropy_coef != 0.0; /* the loss depends on the entropy too */
    /* LoRA dropout's masks: a pass per chunk, rank (its first global row) and micro-batch */
    uint64_t pass = (uint64_t)(c - t->chunks) << 48 ^ (uint64_t)c->g0 << 24 ^ (uint64_t)r0;
    int rc = grpo_session_dropout(&t->s, 1, pass, err);
    /* the rollout's activations when it kept this whole chunk as laid out here */
    t->sb.kept = c->kept && r0 == 0 && rows == c->rb.N;
    c->kept = 0; /* used now, or dropped by the forward that computes */
    sums->passes++, sums->reused += t->sb.kept;
    if (rc == GRPO_OK) rc = grpo_seqbatch_forward(&t->sb, t->s.policy, 1, t->scale, err);
    t->sb.kept = 0;
    if (rc == GRPO_OK) rc = expert_load_add(t, err);
    if (rc != GRPO_OK) return rc;
    completion_cols(t, c, t->sb.logp, logp);
    completion_cols(t, c, t->sb.entropy, ent);
    grpo_loss_inputs in = {logp,
                           c->old_logp ? c->old_logp + (size_t)r0 * c->T : NULL,
                           grpo_reference_on(&t->ref) ? ref : NULL,
                           c->mask + (size_t)r0 * c->T,
                           c->adv + r0,
                           ent,
                           rows,
                           c->T,
                           t->rollout || t->sample_dtype != GRPO_DTYPE_F32 ? is_w : NULL};
    /* the loss's old log-probs against the sampler's, measured on every run (is_correction.h);
     * the weights enter the loss only for samples of a rollout copy or of bf16 compute */
    grpo_is_weights(is_w, in.old_logp ? in.old_logp : logp, c->samp_logp + (size_t)r0 * c->T,
                    in.mask, rows, c->T, t->cfg->sampling_is_mode, t->cfg->sampling_is_cap,
                    &t->is);
    grpo_loss_metrics m;
    grpo_error why;
    grpo_error_init(&why);
    rc = grpo_loss_forward(&m, &in, lo, &why);
    if (rc == GRPO_OK) rc = grpo_loss_backward(dl, &in, lo, &why);
    if (rc == GRPO_OK && bonus) rc = grpo_loss_entropy_backward(de, &in, lo, &why);
    if (rc != GRPO_OK) return grpo_error_set(err, rc, "loss: %s", why.message);
    loss_add(sums, &m);
    double aux; /* MoE: the router loss enters with its share per pass (model.h) */
    if (grpo_seqbatch_aux_loss(&t->sb, t->s.policy, t->cfg->grpo_aux_loss_coef, t->passes, &aux))
        sums->aux += aux / t->passes;
    grpo_seqbatch_scatter(&t->sb, dl, c->T, t->sb.dlogp);
    if (bonus) grpo_seqbatch_scatter(&t->sb, de, c->T, t->sb.dentropy);
    rc = grpo_seqbatch_backward(&t->sb, t->s.policy, bonus, t->scale, err);
    return rc == GRPO_OK ? grpo_session_dropout(&t->s, 0, 0, err) : rc;
}

static int micro_policy(trainer *t, chunk *c, int32_t r0, int32_t rows, const grpo_loss_opts *lo,
                        float *buf, loss_sums *sums, grpo_error *err) {
    grpo_session_train_compute(&t->s, 1);
    int rc = micro_passes(t, c, r0, rows, lo, buf, sums, err);
    grpo_session_train_compute(&t->s, 0);
    return rc;
}

/* Adds the (B,T) positions of batch sb and its padding ones (mask 0) to sums. */
static void count_padding(const grpo_seqbatch *sb, loss_sums *sums) {
    size_t n = (size_t)sb->B * sb->T, pad = 0;
    for (size_t i = 0; i < n; i++) pad += sb->mask[i] == 0;
    sums->positions += (double)n, sums->padded += (double)pad;
}

/* One forward/backward pass over rows [r0, r0+rows) of chunk c (a micro-batch, or one pack of
 * it); buf holds 6 (rows, c->T) arrays. */
static int pass_step(trainer *t, chunk *c, int32_t r0, int32_t rows, const grpo_loss_opts *lo,
                     float *buf, loss_sums *sums, grpo_error *err) {
    int rc = chunk_batch(t, c, r0, rows, err);
    float *ref = buf + (size_t)rows * c->T;
    if (rc == GRPO_OK) count_padding(&t->sb, sums);
    double w0 = grpo_now(), c0 = grpo_cpu_now();
    if (rc == GRPO_OK && c->ref_logp) { /* decoded beside the rollout: the same bits */
        memcpy(ref, c->ref_logp + (size_t)r0 * c->T, (size_t)rows * c->T * sizeof(float));
        sums->ref_decoded++;
    } else if (rc == GRPO_OK && grpo_reference_on(&t->ref))
        rc = grpo_reference_logp(&t->ref, &t->s, &t->sb, t->scale, c->T, ref, err);
    phase_add(t, PH_REFERENCE, w0, c0);
    w0 = grpo_now(), c0 = grpo_cpu_now();
    if (rc == GRPO_OK) rc = micro_policy(t, c, r0, rows, lo, buf, sums, err);
    phase_add(t, PH_POLICY, w0, c0);
    return rc;
}

/* Loss and backward of the micro-batch [r0, r0+rows) of chunk c: one pass, or (packed) one per
 * pack, each normalised as the whole micro-batch (loss.h norm_rows, norm_tokens). */
static int micro_step(trainer *t, chunk *c, int32_t r0, int32_t rows, const grpo_loss_opts *lo,
                      float *buf, loss_sums *sums, grpo_error *err) {
    grpo_loss_opts plo = *lo;
    int32_t first = pass_rows(t, c, r0, rows);
    if (t->cfg->train_max_tokens_per_microbatch > 0) {
        plo.norm_rows = rows, plo.norm_tokens = grpo_mask_sum(c->mask + (size_t)r0 * c->T, rows,
                                                               c->T);
        if (first < rows && lo->top_entropy_quantile < 1.0)
            return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                                  "%s: step %ld: grpo.top_entropy_quantile = %g needs the "
                                  "entropies of a whole micro-batch (%d rows) before its "
                                  "backward, but it does not fit one pack of "
                                  "train.max_tokens_per_microbatch = %lld tokens; raise that key "
                                  "or lower train.micro_batch",
                                  t->cfg->path, t->s.st.step + 1, lo->top_entropy_quantile, rows,
                                  t->cfg->train_max_tokens_per_microbatch);
    }
    int rc = GRPO_OK;
    for (int32_t p0 = r0, n = first; rc == GRPO_OK && p0 < r0 + rows; p0 += n) {
        if (p0 > r0) n = pass_rows(t, c, p0, r0 + rows - p0);
        rc = pass_step(t, c, p0, n, &plo, buf, sums, err);
    }
    return rc;
}

static int train_on_chunks(trainer *t, loss_sums *sums, grpo_error *err) {
    const grpo_run_config *cfg = t->cfg;
    grpo_loss_opts lo = grpo_loss_opts_default();
    lo.type = cfg->grpo_loss_type;
    lo.epsilon_low = cfg->grpo_epsilon_low, lo.epsilon_high = cfg->grpo_epsilon_high;
    lo.delta = cfg->grpo_delta, lo.beta = cfg->grpo_beta;
    lo.is_level = cfg->grpo_importance_sampling_level;
    lo.sapo_temperature_pos = cfg->grpo_sapo_temperature_pos;
    lo.sapo_temperature_neg = cfg->grpo_sapo_temperature_neg;
    lo.top_entropy_quantile = cfg->grpo_top_entropy_quantile;
    lo.entropy_coef = cfg->grpo_entropy_coef;
    lo.max_completion_length = (int)cfg->sampling_max_completion_length;
    int micro_batches = 0, passes = 0;
    int32_t Tmax = 1;
    lo.num_items_in_batch = 0;
    for (int a = 0; a < t->n_chunks; a++) {
        chunk *c = &t->chunks[a];
        lo.num_items_in_batch += grpo_mask_sum(c->mask, c->rb.N, c->T);
        micro_batches += (c->rb.N + t->micro - 1) / t->micro;
        passes += chunk_passes(t, c);
        Tmax = c->T > Tmax ? c->T : Tmax;
    }
    double global[3] = {lo.num_items_in_batch, micro_batches, passes}; /* every rank's rows */
    int rc = grpo_comm_allreduce_f64(global, 3, GRPO_COMM_SUM, err);
    if (rc != GRPO_OK) return rc;
    lo.num_items_in_batch = global[0], lo.grad_accum_steps = (int)global[1];
    t->passes = (int)global[2]; /* the MoE aux loss's share per forward (model.h) */
    if (t->load) memset(t->load, 0, (size_t)t->load_L * t->load_E * sizeof *t->load);
    float *buf = malloc((size_t)t->micro * Tmax * 6 * sizeof(float)); /* micro_step's six */
    if (!buf)
        return grpo_nomem(err, "a micro-batch's loss buffers (6,rows,T)",
                          (uint64_t)t->micro * Tmax * 6 * sizeof(float));
    for (int a = 0; rc == GRPO_OK && a < t->n_chunks; a++) {
        chunk *c = &t->chunks[a];
        for (int32_t r0 = 0; rc == GRPO_OK && r0 < c->rb.N; r0 += t->micro)
            rc = micro_step(t, c, r0, micro_rows(t, c, r0), &lo, buf, sums, err);
    }
    free(buf);
    return rc;
}

/* Data parallel: the gradients summed over the ranks in place (the policy's grads section, or a
 * LoRA run's adapter gradients, is one contiguous host buffer on the CPU backend), then the
 * step's sums, so every rank takes the same optimizer step and the metrics count every rank's
 * rows. Nothing to do on one rank. */
static int reduce_step(trainer *t, loss_sums *s, double *tokens, grpo_error *err) {
    if (grpo_comm_size() == 1) return GRPO_OK;
    const grpo_lora *l = &t->s.lora;
    float *grads = l->n ? l->block + l->floats : t->s.policy->grads;
    uint64_t n = l->n ? l->floats : t->s.policy->section;
    int rc = grpo_comm_allreduce_f32(grads, n, GRPO_COMM_SUM, err);
    double sum[] = {s->loss, s->tokens, s->kl, s->entropy, s->low, s->high, s->region, s->cispo,
                    s->aux, *tokens, s->positions, s->padded};
    if (rc == GRPO_OK)
        rc = grpo_comm_allreduce_f64(sum, sizeof sum / sizeof *sum, GRPO_COMM_SUM, err);
    if (rc == GRPO_OK) rc = grpo_comm_allreduce_f64(&s->low_min, 1, GRPO_COMM_MIN, err);
    if (rc == GRPO_OK) rc = grpo_comm_allreduce_f64(&s->high_max, 1, GRPO_COMM_MAX, err);
    if (rc == GRPO_OK) rc = grpo_is_sums_reduce(&t->is, err);
    if (rc == GRPO_OK && t->load)
        rc = grpo_comm_allreduce_f64(t->load, (size_t)t->load_L * t->load_E, GRPO_COMM_SUM, err);
    s->loss = sum[0], s->tokens = sum[1], s->kl = sum[2], s->entropy = sum[3], s->low = sum[4];
    s->high = sum[5], s->region = sum[6], s->cispo = sum[7], s->aux = sum[8], *tokens = sum[9];
    s->positions = sum[10], s->padded = sum[11];
    return rc;
}

static double chunk_tokens(const trainer *t) {
    double n = 0;
    for (int a = 0; a < t->n_chunks; a++) {
        const chunk *c = &t->chunks[a];
        for (int32_t i = 0; i < c->rb.N; i++) {
            n += c->rb.roll.len[i];
            for (int32_t p = 0; p < c->rb.P; p++)
                n += c->rb.pmask[(size_t)(i / c->rb.G) * c->rb.P + p];
        }
    }
    return n;
}

/* ---- the loop ----------------------------------------------------------------------------- */

/* One GRPO step (grpo_session_step_fn): a new generation batch every num_iterations steps, the
 * loss and gradients over its chunks, the optimizer step, metrics, completions, checkpoint. */
static int train_step(grpo_session *s, void *ctx, grpo_error *err) {
    trainer *t = ctx;
    const grpo_run_config *cfg = t->cfg;
    double t0 = grpo_now(), comm0 = grpo_comm_seconds();
    int rc = GRPO_OK;
    int fresh = s->st.step % cfg->grpo_num_iterations == 0 || !t->chunks[0].rb.N;
    if (s->st.step % cfg->grpo_num_iterations != 0 && !t->chunks[0].rb.N)
        fprintf(stderr,
                "warning: resumed inside a num_iterations cycle: the generation batch "
                "of step %ld is regenerated, so this run leaves the uninterrupted trajectory\n",
                s->st.step + 1);
    if (fresh) t->n_chunks = (int)cfg->train_grad_accum;
    memset(t->phase, 0, sizeof t->phase);
    rollout_begin(t);
    double w0 = grpo_now(), c0 = grpo_cpu_now();
    if (fresh)
        rc = chunks_generate(t, t->chunks, t->n_chunks, (int32_t)cfg->train_batch_prompts, err);
    if (fresh && rc == GRPO_OK) rc = resample(t, err);
    phase_add(t, PH_ROLLOUT, w0, c0);
    loss_sums sums = {0};
    sums.low_min = 2, sums.high_max = 0;
    t->is = grpo_is_sums_init();
    if (rc == GRPO_OK) rc = train_on_chunks(t, &sums, err);
    double tokens = rc == GRPO_OK ? chunk_tokens(t) : 0;
    w0 = grpo_now(), c0 = grpo_cpu_now();
    if (rc == GRPO_OK) rc = reduce_step(t, &sums, &tokens, err);
    grpo_optim_stats os;
    if (rc == GRPO_OK) rc = grpo_session_update(s, fresh ? tokens : 0, &os, err);
    if (rc == GRPO_OK && t->rollout) /* the rollout samples from the updated policy */
        rc = grpo_model_copy_weights(t->rollout, s->policy, err);
    if (rc == GRPO_OK && cfg->grpo_sync_ref_every > 0 && s->st.step % cfg->grpo_sync_ref_every == 0)
        rc = grpo_ref_sync(t->ref.model, s->policy, cfg->grpo_sync_ref_alpha, err);
    phase_add(t, PH_OPTIMIZER, w0, c0);
    if (rc != GRPO_OK) return rc;
    grpo_metric_row row;
    grpo_metric_row_clear(&row);
    grpo_trainer_log_metrics(t, &sums, &row);
    if ((rc = log_rollout_sums(t, &row, err)) != GRPO_OK) return rc;
    if (grpo_comm_size() > 1) /* this rank's seconds in collectives (waits included) */
        grpo_metric_set(&row, "time/comm", grpo_comm_seconds() - comm0);
    if ((rc = grpo_trainer_evaluate_due(t, &row, err)) != GRPO_OK) return rc;
    grpo_metric_row timings;
    grpo_metric_row_clear(&timings);
    log_overlap(t, &timings);
    grpo_trainer_log_timings(t, &timings);
    if ((rc = grpo_session_log(s, &row, &os, t0, tokens, &timings, err)) != GRPO_OK) return rc;
    if (cfg->log_completions_every > 0 && s->st.step % cfg->log_completions_every == 0 &&
        (rc = grpo_trainer_log_completions(t, err)) != GRPO_OK)
        return rc;
    if ((rc = grpo_reference_checkpoint(&t->ref, s, err)) != GRPO_OK) return rc;
    /* before the step's checkpoint, which then records the best that is on disk (best.h) */
    if ((rc = grpo_best_update(s, &row, err)) != GRPO_OK) return rc;
    rc = grpo_session_checkpoint(s, err);
    if (rc == GRPO_OK) grpo_reference_prune(&t->ref, s);
    return rc;
}

/* Data parallel: a rank that failed ends every rank (a peer waiting in a collective would wait
 * for ever), after saying which one and why. */
static void abort_ranks(const grpo_error *err) {
    fprintf(stderr, "grpo train: rank %d of %d failed: %s; ending all ranks\n", grpo_comm_rank(),
            grpo_comm_size(), err->message);
    grpo_comm_abort(1);
}

int grpo_train(const grpo_train_opts *o, grpo_error *err) {
    trainer t;
    memset(&t, 0, sizeof t);
    int rc = grpo_comm_init(err);
    if (rc != GRPO_OK) return rc;
    rc = grpo_session_open(&t.s, &o->run, o->resume, err);
    t.s.method = GRPO_CARD_GRPO;
    if (rc == GRPO_OK) rc = grpo_trainer_setup(&t, err);
    if (rc == GRPO_OK) rc = grpo_session_run(&t.s, train_step, &t, err);
    if (rc == GRPO_OK) grpo_reference_prune(&t.ref, &t.s);
    grpo_error close_err;
    grpo_error_init(&close_err);
    int closed = grpo_trainer_teardown(&t, &close_err);
    int closed2 = grpo_session_close(&t.s, &close_err);
    if (rc == GRPO_OK && (closed != GRPO_OK || closed2 != GRPO_OK))
        *err = close_err, rc = closed != GRPO_OK ? closed : closed2;
    if (rc != GRPO_OK && grpo_comm_size() > 1) abort_ranks(err);
    grpo_comm_finalize();
    return rc;
}
