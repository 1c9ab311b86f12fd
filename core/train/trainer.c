/* trainer.c — the GRPO training loop (see trainer.h). */
#include "train/trainer.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/comm.h"
#include "train/advantage.h"
#include "train/checkpoint.h"
#include "train/eval.h"
#include "train/loss.h"
#include "train/metrics.h"
#include "train/optimizer.h"
#include "train/reward_sum.h"
#include "train/rewards.h"
#include "train/is_correction.h"
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
    grpo_advantage_metrics am; /* of the whole chunk, every rank's rows */
    int dropped;           /* groups left out of the loss (grpo.drop_zero_std_groups) */
    /* Data parallel (comm.h): this rank holds rows [rank*N, (rank+1)*N) of the chunk's gN rows */
    int32_t gB, g0;        /* the chunk's prompts over all ranks; global index of the first here */
    grpo_rng *row_rng;     /* [N] sampling stream of each completion: (seed, step, global row) */
    int32_t gN, gdropped;  /* rows and dropped groups over all ranks */
    float *gR, *gr, *gadv; /* (gN,K), (gN), (gN): every rank's rewards, sums, advantages */
    float *glen, *gtrunc;  /* (gN) completion lengths, truncation flags */
    double env[ENV_STATS]; /* [env]: this rank's episode sums (env_stats) */
    float *env_rows;       /* (N,4) [env]: each episode's reward, turns, tool calls, tool errors */
} chunk;

/* The phases of a step timed into time/... metrics: generation with its rewards and advantages
 * (and the old policy's log-probs), the reference forward, the policy's forward + loss +
 * backward, the gradient reduction and optimizer step. */
enum { PH_ROLLOUT, PH_REFERENCE, PH_POLICY, PH_OPTIMIZER, PHASES };

typedef struct trainer {
    grpo_session s;             /* run, policy, data order, optimizer, state, metrics.jsonl */
    const grpo_run_config *cfg; /* &s.run.cfg */
    grpo_model *ref;            /* reference model (beta > 0), else NULL */
    grpo_model *rollout;        /* sampling.weights_dtype = bf16: the policy's bf16 copy the
                                   rollout samples from, refreshed after each update; else NULL */
    grpo_is_sums is;            /* this step's importance-sampling metrics (rollout only) */
    int ref_is_base;            /* LoRA, beta > 0: the reference is the policy, adapters off */
    grpo_reward_set rewards;
    grpo_episodes episodes; /* [env] (episode.h) when env.plugin is set; desc NULL otherwise */
    float *w; /* (K) reward weights */
    grpo_sampler_opts so;
    grpo_advantage_opts ao;
    float scale;   /* 1 / temperature for the log-probs */
    int32_t micro; /* rows per forward/backward */
    chunk *chunks; /* [grad_accum + grpo.resample_rounds]: n_chunks in use this step */
    int n_chunks, cap_chunks;
    grpo_seqbatch sb;
    grpo_run_log completions; /* completions.f is NULL unless log.completions_every */
    grpo_dataset *eval_data;  /* data.eval_path when train.eval_every > 0, else NULL */
    grpo_rng eval_rng;        /* sampled evaluations draw here, never from the training stream */
    double *load; /* (load_L,load_E) MoE expert load summed over the step's policy forwards */
    int32_t load_L, load_E;
    double phase[2][PHASES]; /* this step's wall / CPU seconds per phase (time/... metrics) */
} trainer;

/* ---- phase timings ----------------------------------------------------------------------- */

/* Adds the wall and CPU seconds since (w0, c0) to phase ph. */
static void phase_add(trainer *t, int ph, double w0, double c0) {
    t->phase[0][ph] += grpo_now() - w0;
    t->phase[1][ph] += grpo_cpu_now() - c0;
}

/* time/PHASE (wall s) and time/cpu/PHASE (CPU s of all threads) of the step into row. */
static void phase_metrics(const trainer *t, grpo_metric_row *row) {
    static const char *const names[PHASES] = {"rollout", "reference", "policy", "optimizer"};
    char key[GRPO_METRIC_NAME_MAX];
    for (int k = 0; k < 2; k++)
        for (int ph = 0; ph < PHASES; ph++) {
            snprintf(key, sizeof key, "time/%s%s", k ? "cpu/" : "", names[ph]);
            grpo_metric_set(row, key, t->phase[k][ph]);
        }
}

/* ---- chunks ------------------------------------------------------------------------------ */

static void chunk_clear(chunk *c) {
    grpo_rollout_batch_free(&c->rb);
    free(c->r), free(c->adv), free(c->mask), free(c->old_logp), free(c->samp_logp);
    free(c->row_rng);
    free(c->gR), free(c->gr), free(c->gadv), free(c->glen), free(c->gtrunc), free(c->env_rows);
    memset(c, 0, sizeof *c);
}

/* Whether ex fits data.max_prompt_length (a prompt another rank takes). */
static int prompt_fits(trainer *t, const grpo_example *ex, int *keep, grpo_error *err) {
    char *text = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = grpo_run_prompt(&t->s.run, t->s.data, ex, &text, &ids, &n, keep, err);
    free(text), free(ids);
    return rc;
}

/* The next B usable prompts of the data order (one order on every rank) are the chunk's; this
 * rank takes its contiguous share into c->rb, each completion with its own sampling stream. */
static int chunk_prompts(trainer *t, chunk *c, int32_t B, grpo_error *err) {
    int W = grpo_comm_size();
    int32_t Bl = B / W, first = grpo_comm_rank() * Bl; /* B % W == 0: setup */
    c->gB = B, c->g0 = first;
    for (chunk *p = t->chunks; p < c; p++) c->g0 += p->gB;
    int rc = grpo_rollout_batch_begin(&c->rb, Bl, t->so.G, err);
    int32_t G = t->so.G; /* row g of global group k draws from stream k*G + g of the step */
    if (rc == GRPO_OK && !(c->row_rng = malloc((size_t)Bl * G * sizeof *c->row_rng)))
        rc = grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; rc == GRPO_OK && i < Bl * G; i++)
        grpo_rng_seed_stream(&c->row_rng[i], (uint64_t)t->cfg->sampling_seed,
                             (uint64_t)t->s.st.step, (uint64_t)c->g0 * G + (uint64_t)i);
    c->rb.row_rng = c->row_rng;
    c->rb.env = t->episodes.desc ? &t->episodes : NULL;
    size_t tries = 0;
    for (int32_t k = 0; rc == GRPO_OK && k < B;) {
        if (tries++ > t->s.data->n + (size_t)B)
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "%s: every prompt is longer than data.max_prompt_length = %lld "
                                  "(data.truncation = skip)",
                                  t->s.data->path, t->cfg->data_max_prompt_length);
        const grpo_example *ex = &t->s.data->examples[grpo_data_order_next(&t->s.order)];
        int keep = 0;
        rc = k >= first && k < first + Bl
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
                 : grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
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
    if (!c->r || !c->adv) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
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
    if (!keep) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
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
    if (!c->mask) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < c->rb.N; i++)
        for (int32_t j = 0; j < c->T; j++)
            c->mask[(size_t)i * c->T + j] = c->rb.roll.mask[(size_t)i * c->rb.roll.T + j];
    if (t->cfg->grpo_mask_truncated_completions)
        grpo_mask_truncated(c->mask, c->rb.roll.truncated, c->rb.N, c->T);
    if (t->cfg->grpo_drop_zero_std_groups) return chunk_drop_groups(c, err);
    return GRPO_OK;
}

/* Fills t->sb with rows [r0, r0+rows) of c (prompt, then completion; see seqbatch.h). */
static int chunk_batch(trainer *t, chunk *c, int32_t r0, int32_t rows, grpo_error *err) {
    int rc = grpo_seqbatch_from_rollout(&t->sb, t->s.run.proc.ops, c->rb.prompt, c->rb.pmask,
                                        c->rb.P, c->rb.G, &c->rb.roll, r0, rows, c->T,
                                        t->s.run.pad_id, err);
    if (!t->cfg->train_shared_prefix) t->sb.shared_prefix = 0; /* every row in full */
    return rc;
}

/* The completion columns (rows, T) of a (rows, P+T) array of the current batch. */
static void completion_cols(const trainer *t, const chunk *c, const float *src, float *out) {
    grpo_seqbatch_completion(&t->sb, src, c->rb.P, c->T, out);
}

/* The rollout copy's log-probs of the chunk's tokens, (N, c->T) out of the sampler's (N,T). */
static int chunk_samp_logp(chunk *c, grpo_error *err) {
    const grpo_rollout *ro = &c->rb.roll;
    c->samp_logp = malloc((size_t)ro->N * c->T * sizeof(float));
    if (!c->samp_logp) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < ro->N; i++)
        memcpy(c->samp_logp + (size_t)i * c->T, ro->plogp + (size_t)i * ro->T,
               (size_t)c->T * sizeof(float));
    return GRPO_OK;
}

/* Old-policy log-probs of the whole chunk (num_iterations > 1), before any update. */
static int chunk_old_logp(trainer *t, chunk *c, grpo_error *err) {
    c->old_logp = malloc((size_t)c->rb.N * c->T * sizeof(float));
    if (!c->old_logp) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    for (int32_t r0 = 0; r0 < c->rb.N; r0 += t->micro) {
        int32_t rows = c->rb.N - r0 < t->micro ? c->rb.N - r0 : t->micro;
        int rc = chunk_batch(t, c, r0, rows, err);
        if (rc == GRPO_OK) rc = grpo_seqbatch_forward(&t->sb, t->s.policy, 0, t->scale, err);
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

/* One chunk's rollout (rollout.h), then what training needs of it: advantages, loss mask and,
 * with num_iterations > 1, the old policy's log-probs. */
static int chunk_generate(trainer *t, chunk *c, int32_t B, grpo_error *err) {
    chunk_clear(c);
    grpo_plugin_call_progress(t->s.st.step + 1, (long)(c - t->chunks) + 1); /* for a crash report */
    int rc = chunk_prompts(t, c, B, err);
    c->rb.step = (uint64_t)t->s.st.step, c->rb.total_steps = (uint64_t)t->cfg->train_steps;
    grpo_model *sampler = t->rollout ? t->rollout : t->s.policy;
    if (rc == GRPO_OK)
        rc = grpo_rollout_batch_run(&c->rb, &t->s.run, sampler, &t->so, &t->s.st.rng,
                                    &t->rewards, err);
    if (rc == GRPO_OK && c->rb.env) chunk_env_stats(c);
    if (rc == GRPO_OK) rc = chunk_rewards(t, c, err);
    if (rc == GRPO_OK) rc = chunk_mask(t, c, err);
    if (rc == GRPO_OK && t->rollout) rc = chunk_samp_logp(c, err);
    if (rc == GRPO_OK && t->cfg->grpo_num_iterations > 1) rc = chunk_old_logp(t, c, err);
    return rc;
}

/* DAPO's resampling (grpo.resample_rounds): while groups were dropped, one more chunk of as many
 * fresh prompts as were dropped in the last round, its own zero-std groups dropped in turn. The
 * extra chunks train with the others (they share num_items_in_batch and the accumulation). */
static int resample(trainer *t, grpo_error *err) {
    int dropped = 0, rc = GRPO_OK;
    for (int a = 0; a < t->n_chunks; a++) dropped += t->chunks[a].dropped;
    while (rc == GRPO_OK && dropped > 0 && t->n_chunks < t->cap_chunks) {
        chunk *c = &t->chunks[t->n_chunks++];
        rc = chunk_generate(t, c, dropped, err);
        dropped = c->dropped;
    }
    return rc;
}

/* ---- loss over the chunks ----------------------------------------------------------------- */

typedef struct loss_sums {
    double loss, tokens, kl, entropy, low, high, region, cispo;
    double low_min, high_max;
    double aux; /* mean MoE auxiliary loss over the micro-batches */
} loss_sums;

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

/* The reference log-probs of the batch in t->sb into ref (rows, c->T): the reference model, or
 * for a LoRA run the policy with its adapters switched off for this one forward. */
static int reference_logp(trainer *t, chunk *c, float *ref, grpo_error *err) {
    int rc = t->ref_is_base ? grpo_lora_enable(&t->s.lora, 0, err) : GRPO_OK;
    if (rc == GRPO_OK)
        rc = grpo_seqbatch_forward(&t->sb, t->ref_is_base ? t->s.policy : t->ref, 0, t->scale,
                                   err);
    if (rc == GRPO_OK) completion_cols(t, c, t->sb.logp, ref);
    if (t->ref_is_base) { /* the adapters back on, also after a failed forward */
        int on = grpo_lora_enable(&t->s.lora, 1, err);
        if (rc == GRPO_OK) rc = on;
    }
    return rc;
}

/* The policy's part of micro_step: forward, loss, backward (reference log-probs in buf + n). */
static int micro_policy(trainer *t, chunk *c, int32_t r0, int32_t rows, const grpo_loss_opts *lo,
                        float *buf, loss_sums *sums, grpo_error *err) {
    size_t n = (size_t)rows * c->T;
    float *logp = buf, *ref = buf + n, *ent = buf + 2 * n, *dl = buf + 3 * n, *de = buf + 4 * n;
    float *is_w = buf + 5 * n; /* importance weights of the rollout copy's samples */
    int bonus = lo->entropy_coef != 0.0; /* the loss depends on the entropy too */
    /* LoRA dropout's masks: a pass per chunk, rank (its first global row) and micro-batch */
    uint64_t pass = (uint64_t)(c - t->chunks) << 48 ^ (uint64_t)c->g0 << 24 ^ (uint64_t)r0;
    int rc = grpo_session_dropout(&t->s, 1, pass, err);
    if (rc == GRPO_OK) rc = grpo_seqbatch_forward(&t->sb, t->s.policy, 1, t->scale, err);
    if (rc == GRPO_OK) rc = expert_load_add(t, err);
    if (rc != GRPO_OK) return rc;
    completion_cols(t, c, t->sb.logp, logp);
    completion_cols(t, c, t->sb.entropy, ent);
    grpo_loss_inputs in = {logp,
                           c->old_logp ? c->old_logp + (size_t)r0 * c->T : NULL,
                           t->ref || t->ref_is_base ? ref : NULL,
                           c->mask + (size_t)r0 * c->T,
                           c->adv + r0,
                           ent,
                           rows,
                           c->T,
                           c->samp_logp ? is_w : NULL};
    if (c->samp_logp) /* the loss's old log-probs against the sampler's (is_correction.h) */
        grpo_is_weights(is_w, in.old_logp ? in.old_logp : logp,
                        c->samp_logp + (size_t)r0 * c->T, in.mask, rows, c->T,
                        t->cfg->sampling_is_mode, t->cfg->sampling_is_cap, &t->is);
    grpo_loss_metrics m;
    grpo_error why;
    grpo_error_init(&why);
    rc = grpo_loss_forward(&m, &in, lo, &why);
    if (rc == GRPO_OK) rc = grpo_loss_backward(dl, &in, lo, &why);
    if (rc == GRPO_OK && bonus) rc = grpo_loss_entropy_backward(de, &in, lo, &why);
    if (rc != GRPO_OK) return grpo_error_set(err, rc, "loss: %s", why.message);
    loss_add(sums, &m);
    double aux; /* MoE: the router loss enters with its share (model.h) */
    if (grpo_seqbatch_aux_loss(&t->sb, t->s.policy, t->cfg->grpo_aux_loss_coef,
                               lo->grad_accum_steps, &aux))
        sums->aux += aux / lo->grad_accum_steps;
    int32_t L = c->rb.P + c->T;
    for (int32_t k = 0; k < rows; k++) {
        size_t at = (size_t)k * L + c->rb.P - 1, from = (size_t)k * c->T;
        memcpy(t->sb.dlogp + at, dl + from, (size_t)c->T * sizeof(float));
        if (bonus) memcpy(t->sb.dentropy + at, de + from, (size_t)c->T * sizeof(float));
    }
    rc = grpo_seqbatch_backward(&t->sb, t->s.policy, bonus, t->scale, err);
    return rc == GRPO_OK ? grpo_session_dropout(&t->s, 0, 0, err) : rc;
}

/* Loss and backward of rows [r0, r0+rows) of chunk c; buf holds 6 (rows, c->T) arrays. */
static int micro_step(trainer *t, chunk *c, int32_t r0, int32_t rows, const grpo_loss_opts *lo,
                      float *buf, loss_sums *sums, grpo_error *err) {
    int rc = chunk_batch(t, c, r0, rows, err);
    float *ref = buf + (size_t)rows * c->T;
    double w0 = grpo_now(), c0 = grpo_cpu_now();
    if (rc == GRPO_OK && (t->ref || t->ref_is_base)) rc = reference_logp(t, c, ref, err);
    phase_add(t, PH_REFERENCE, w0, c0);
    w0 = grpo_now(), c0 = grpo_cpu_now();
    if (rc == GRPO_OK) rc = micro_policy(t, c, r0, rows, lo, buf, sums, err);
    phase_add(t, PH_POLICY, w0, c0);
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
    int micro_batches = 0;
    int32_t Tmax = 1;
    lo.num_items_in_batch = 0;
    for (int a = 0; a < t->n_chunks; a++) {
        chunk *c = &t->chunks[a];
        lo.num_items_in_batch += grpo_mask_sum(c->mask, c->rb.N, c->T);
        micro_batches += (c->rb.N + t->micro - 1) / t->micro;
        Tmax = c->T > Tmax ? c->T : Tmax;
    }
    double global[2] = {lo.num_items_in_batch, micro_batches}; /* over every rank's rows */
    int rc = grpo_comm_allreduce_f64(global, 2, GRPO_COMM_SUM, err);
    if (rc != GRPO_OK) return rc;
    lo.num_items_in_batch = global[0], lo.grad_accum_steps = (int)global[1];
    if (t->load) memset(t->load, 0, (size_t)t->load_L * t->load_E * sizeof *t->load);
    float *buf = malloc((size_t)t->micro * Tmax * 6 * sizeof(float)); /* micro_step's six */
    if (!buf) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    for (int a = 0; rc == GRPO_OK && a < t->n_chunks; a++) {
        chunk *c = &t->chunks[a];
        for (int32_t r0 = 0; rc == GRPO_OK && r0 < c->rb.N; r0 += t->micro)
            rc = micro_step(t, c, r0, c->rb.N - r0 < t->micro ? c->rb.N - r0 : t->micro, &lo, buf,
                            sums, err);
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
                    s->aux, *tokens};
    if (rc == GRPO_OK)
        rc = grpo_comm_allreduce_f64(sum, sizeof sum / sizeof *sum, GRPO_COMM_SUM, err);
    if (rc == GRPO_OK) rc = grpo_comm_allreduce_f64(&s->low_min, 1, GRPO_COMM_MIN, err);
    if (rc == GRPO_OK) rc = grpo_comm_allreduce_f64(&s->high_max, 1, GRPO_COMM_MAX, err);
    if (rc == GRPO_OK && t->rollout) rc = grpo_is_sums_reduce(&t->is, err);
    if (rc == GRPO_OK && t->load)
        rc = grpo_comm_allreduce_f64(t->load, (size_t)t->load_L * t->load_E, GRPO_COMM_SUM, err);
    s->loss = sum[0], s->tokens = sum[1], s->kl = sum[2], s->entropy = sum[3], s->low = sum[4];
    s->high = sum[5], s->region = sum[6], s->cispo = sum[7], s->aux = sum[8], *tokens = sum[9];
    return rc;
}

/* ---- metrics ------------------------------------------------------------------------------ */

/* Over every rank's rows (the chunks' g* arrays), so the same numbers as in one process. */
static void reward_metrics(trainer *t, grpo_metric_row *row) {
    int K = t->rewards.n, N = 0;
    for (int a = 0; a < t->n_chunks; a++) N += t->chunks[a].gN;
    float *R = malloc((size_t)N * K * sizeof(float)), *r = malloc((size_t)N * sizeof(float));
    if (!R || !r) {
        free(R), free(r);
        return;
    }
    double zero_std = 0, len = 0, clipped = 0, term_len = 0, n_term = 0, minl = 1e30, maxl = 0;
    double adv_abs = 0;
    int off = 0;
    for (int a = 0; a < t->n_chunks; a++) {
        const chunk *c = &t->chunks[a];
        memcpy(R + (size_t)off * K, c->gR, (size_t)c->gN * K * sizeof(float));
        memcpy(r + off, c->gr, (size_t)c->gN * sizeof(float));
        off += c->gN;
        zero_std += c->am.frac_reward_zero_std * c->gN;
        for (int32_t i = 0; i < c->gN; i++) {
            double l = c->glen[i];
            adv_abs += fabs(c->gadv[i]);
            len += l, clipped += c->gtrunc[i];
            minl = l < minl ? l : minl, maxl = l > maxl ? l : maxl;
            if (!c->gtrunc[i]) term_len += l, n_term++;
        }
    }
    grpo_metric_set(row, "reward", grpo_nanmean(r, N, 1));
    grpo_metric_set(row, "reward_std", grpo_nanstd(r, N, 1, 1));
    double *nan_frac = malloc((size_t)(K ? K : 1) * sizeof *nan_frac);
    if (nan_frac) grpo_reward_set_nan_check(&t->rewards, R, N, t->s.st.step, nan_frac);
    for (int k = 0; k < K; k++) {
        double mean, std;
        char name[GRPO_METRIC_NAME_MAX];
        grpo_reward_func_stats(&mean, &std, R, N, K, k);
        snprintf(name, sizeof name, "rewards/%s/mean", t->rewards.specs[k]->name);
        grpo_metric_set(row, name, mean);
        snprintf(name, sizeof name, "rewards/%s/std", t->rewards.specs[k]->name);
        grpo_metric_set(row, name, std);
        snprintf(name, sizeof name, "rewards/%s/nan_frac", t->rewards.specs[k]->name);
        if (nan_frac) grpo_metric_set(row, name, nan_frac[k]);
    }
    free(nan_frac);
    grpo_metric_set(row, "frac_reward_zero_std", zero_std / N);
    /* the size of the learning signal: the loss itself sits near 0 (advantages are zero-mean in
     * each group and the ratio starts at 1), while this says how hard the step pushes */
    grpo_metric_set(row, "advantage/abs_mean", adv_abs / N);
    if (t->cfg->grpo_drop_zero_std_groups) {
        double groups = 0, dropped = 0;
        for (int a = 0; a < t->n_chunks; a++)
            groups += t->chunks[a].gB, dropped += t->chunks[a].gdropped;
        grpo_metric_set(row, "frac_groups_dropped", dropped / groups);
    }
    grpo_metric_set(row, "completions/mean_length", len / N);
    grpo_metric_set(row, "completions/min_length", minl);
    grpo_metric_set(row, "completions/max_length", maxl);
    grpo_metric_set(row, "completions/clipped_ratio", clipped / N);
    grpo_metric_set(row, "completions/mean_terminated_length", n_term ? term_len / n_term : 0.0);
    free(R), free(r);
}

/* The importance-sampling correction's metrics (TRL's names), with a bf16 rollout copy. */
static void is_metrics(const trainer *t, grpo_metric_row *row) {
    const grpo_is_sums *s = &t->is;
    if (!t->rollout || s->ratio_n <= 0) return;
    grpo_metric_set(row, "sampling/sampling_logp_difference/mean",
                    s->diff_n > 0 ? s->diff_sum / s->diff_n : 0.0);
    grpo_metric_set(row, "sampling/sampling_logp_difference/max", s->diff_max);
    grpo_metric_set(row, "sampling/importance_sampling_ratio/min", s->ratio_min);
    grpo_metric_set(row, "sampling/importance_sampling_ratio/mean", s->ratio_sum / s->ratio_n);
    grpo_metric_set(row, "sampling/importance_sampling_ratio/max", s->ratio_max);
    grpo_metric_set(row, "sampling/importance_sampling_ratio/clipped_frac",
                    s->clipped / s->ratio_n);
}

/* [env]: per-episode means over every rank's episodes of the step. */
static void env_metrics(trainer *t, grpo_metric_row *row) {
    double s[ENV_STATS] = {0};
    for (int a = 0; a < t->n_chunks; a++)
        for (int k = 0; k < ENV_STATS; k++) s[k] += t->chunks[a].env[k];
    grpo_error err;
    grpo_error_init(&err);
    if (grpo_comm_size() > 1 && grpo_comm_allreduce_f64(s, ENV_STATS, GRPO_COMM_SUM, &err))
        return;
    double n = s[0] > 0 ? s[0] : 1;
    grpo_metric_set(row, "env/turns", s[1] / n);
    grpo_metric_set(row, "env/tool_calls", s[2] / n);
    grpo_metric_set(row, "env/tool_errors", s[3] / n);
    grpo_metric_set(row, "env/tool_use_rate", s[4] / n);
    grpo_metric_set(row, "env/observation_tokens", s[5] / n);
    grpo_metric_set(row, "env/done_frac", s[6] / n);
    grpo_metric_set(row, "env/episode_length", s[7] / n);
}

static void loss_metrics(trainer *t, const loss_sums *s, grpo_metric_row *row) {
    double w = s->tokens > 0 ? s->tokens : 1;
    is_metrics(t, row);
    grpo_metric_set(row, "loss", s->loss);
    if (t->s.policy->desc->aux_loss) grpo_metric_set(row, "aux_loss", s->aux);
    if (t->load) grpo_metrics_expert_load(row, t->load, t->load_L, t->load_E);
    if (t->cfg->grpo_beta > 0) grpo_metric_set(row, "kl", s->kl / w);
    grpo_metric_set(row, "entropy", s->entropy / w);
    if (t->cfg->grpo_loss_type == GRPO_LOSS_CISPO) {
        grpo_metric_set(row, "cispo_clip_ratio", s->cispo / w);
        return;
    }
    if (t->cfg->grpo_loss_type == GRPO_LOSS_SAPO) return; /* TRL logs no clip ratio for sapo */
    grpo_metric_set(row, "clip_ratio/low_mean", s->low / w);
    grpo_metric_set(row, "clip_ratio/low_min", s->low_min > 1 ? 0.0 : s->low_min);
    grpo_metric_set(row, "clip_ratio/high_mean", s->high / w);
    grpo_metric_set(row, "clip_ratio/high_max", s->high_max);
    grpo_metric_set(row, "clip_ratio/region_mean", s->region / w);
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

/* The first chunk's samples as markdown for TensorBoard's text plugin: per sample its rewards and
 * advantage, then prompt + completion in a code block (they hold newlines and '|'). malloc'd. */
static char *completions_markdown(const trainer *t, const chunk *c) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    for (int32_t i = 0; i < c->rb.N; i++) {
        fprintf(f, "**sample %d** reward %g, advantage %g (", i, c->r[i], c->adv[i]);
        for (int k = 0; k < t->rewards.n; k++)
            fprintf(f, "%s%s %g", k ? ", " : "", t->rewards.specs[k]->name,
                    c->rb.R[(size_t)i * t->rewards.n + k]);
        fprintf(f, ")\n\n```\n%s%s\n```\n\n", c->rb.prompt_text[i / c->rb.G], c->rb.completion[i]);
    }
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* Every sample of the first chunk as JSON lines, each with the rank that drew it (gathered to
 * rank 0, which writes them; TensorBoard gets rank 0's); rank 0's first one also on stderr. */
static int log_completions(trainer *t, grpo_error *err) {
    const chunk *c = &t->chunks[0];
    char *mine = NULL, *all = NULL;
    size_t n_mine = 0, n_all = 0;
    FILE *f = open_memstream(&mine, &n_mine);
    if (!f) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory logging completions");
    int rc = GRPO_OK;
    for (int32_t i = 0; rc == GRPO_OK && i < c->rb.N; i++) {
        cJSON *j = cJSON_CreateObject(), *rw = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "step", (double)t->s.st.step);
        cJSON_AddNumberToObject(j, "rank", grpo_comm_rank());
        cJSON_AddStringToObject(j, "prompt", c->rb.prompt_text[i / c->rb.G]);
        cJSON_AddStringToObject(j, "completion", c->rb.completion[i]);
        for (int k = 0; k < t->rewards.n; k++) {
            float v = c->rb.R[(size_t)i * t->rewards.n + k];
            if (isnan(v))
                cJSON_AddNullToObject(rw, t->rewards.specs[k]->name);
            else
                cJSON_AddNumberToObject(rw, t->rewards.specs[k]->name, v);
        }
        cJSON_AddItemToObject(j, "rewards", rw);
        if (c->env_rows) { /* [env]: the episode as the environment saw it */
            const float *e = c->env_rows + (size_t)i * 4;
            cJSON *ej = cJSON_AddObjectToObject(j, "env");
            if (isnan(e[0])) cJSON_AddNullToObject(ej, "reward");
            else cJSON_AddNumberToObject(ej, "reward", e[0]);
            cJSON_AddNumberToObject(ej, "turns", e[1]);
            cJSON_AddNumberToObject(ej, "tool_calls", e[2]);
            cJSON_AddNumberToObject(ej, "tool_errors", e[3]);
        }
        if (isnan(c->r[i]))
            cJSON_AddNullToObject(j, "reward");
        else
            cJSON_AddNumberToObject(j, "reward", c->r[i]);
        cJSON_AddNumberToObject(j, "advantage", c->adv[i]);
        char *s = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        if (!s) rc = grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory logging completions");
        else fprintf(f, "%s\n", s);
        if (s && i == 0 && grpo_comm_rank() == 0)
            fprintf(stderr, "\n[step %ld sample] %s\n", t->s.st.step, s);
        free(s);
    }
    if (fclose(f) != 0 && rc == GRPO_OK)
        rc = grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory logging completions");
    /* every rank gathers, even one that failed above, so none waits for it */
    int rc2 = grpo_comm_gather_bytes(&all, &n_all, mine ? mine : "", rc == GRPO_OK ? n_mine : 0,
                                     err);
    if (rc == GRPO_OK) rc = rc2;
    for (char *line = all, *nl; rc == GRPO_OK && line && *line; line = nl + 1) {
        if ((nl = strchr(line, '\n'))) *nl = 0;
        rc = grpo_run_log_line(&t->completions, line, err);
        if (!nl) break;
    }
    free(mine), free(all);
    if (rc != GRPO_OK || !t->s.tb.f) return rc;
    char *md = completions_markdown(t, c);
    rc = md ? grpo_session_log_text(&t->s, "completions", md, err)
            : grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory logging completions");
    free(md);
    return rc;
}

/* ---- reference refresh (grpo.sync_ref_every) -------------------------------------------- */

int grpo_ref_sync(grpo_model *ref, const grpo_model *policy, double alpha, grpo_error *err) {
    if (!ref || ref->section != policy->section || ref->n_params != policy->n_params)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "sync_ref: the reference model (%s) does not have the policy's "
                              "parameters (%s); expected the same architecture and shapes",
                              ref ? ref->dir : "none", policy->dir);
    const grpo_ops *ops = ref->ops;
    uint64_t P = ref->section, bytes = P * sizeof(float);
    float *mix = ops->alloc(ops->ctx, bytes); /* (P) alpha * policy */
    if (!mix) return grpo_error_set(err, GRPO_ERR_NOMEM, "sync_ref: out of memory (%llu floats)",
                                    (unsigned long long)P);
    ops->copy(ops->ctx, mix, policy->block, bytes);
    ops->scale(ops->ctx, mix, (float)alpha, P);
    ops->scale(ops->ctx, ref->block, (float)(1.0 - alpha), P);
    ops->accumulate(ops->ctx, ref->block, mix, P);
    ops->free(ops->ctx, mix);
    return GRPO_OK;
}

/* Whether the reference has been refreshed by step (so it is no longer reference.path). */
static int ref_diverged(const grpo_run_config *cfg, long step) {
    return cfg->grpo_sync_ref_every > 0 && step >= cfg->grpo_sync_ref_every;
}

/* CHECKPOINT_DIR/reference-STEP: the refreshed reference that goes with checkpoint-STEP. It is
 * saved before the session commits that checkpoint, so every checkpoint that exists has its
 * reference (a kill in between leaves a reference without a checkpoint, pruned later). */
static int ref_ckpt_dir(const trainer *t, long step, char *out, size_t size) {
    int n = snprintf(out, size, "%s/reference-%08ld", t->cfg->checkpoint_dir, step);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

static int ref_save(trainer *t, long step, grpo_error *err) {
    char dir[4096];
    if (!t->ref || !ref_diverged(t->cfg, step) || grpo_comm_rank() != 0) return GRPO_OK;
    if (ref_ckpt_dir(t, step, dir, sizeof dir) != 0)
        return grpo_error_set(err, GRPO_ERR_INVALID, "checkpoint.dir %s: path too long",
                              t->cfg->checkpoint_dir);
    return grpo_model_save(t->ref, dir, err);
}

/* Removes the flat directory dir (a saved model: plain files only). */
static void remove_flat_dir(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4200];
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path)
            unlink(path);
    if (d) closedir(d);
    rmdir(dir);
}

/* Removes the reference-STEP directories of steps before the current one whose checkpoint-STEP
 * is gone (checkpoint.keep); the current step's checkpoint may still be on its way. */
static void ref_prune(const trainer *t) {
    if (grpo_comm_rank() != 0) return; /* rank 0 writes the checkpoints */
    long *steps = NULL, step;
    int n = grpo_ckpt_list(t->cfg->checkpoint_dir, &steps, NULL);
    DIR *d = n >= 0 ? opendir(t->cfg->checkpoint_dir) : NULL;
    struct dirent *e;
    char dir[4096], tail;
    while (d && (e = readdir(d))) {
        if (sscanf(e->d_name, "reference-%ld%c", &step, &tail) != 1 || step >= t->s.st.step)
            continue;
        int kept = 0;
        for (int i = 0; i < n; i++) kept |= steps[i] == step;
        if (!kept && ref_ckpt_dir(t, step, dir, sizeof dir) == 0) remove_flat_dir(dir);
    }
    if (d) closedir(d);
    free(steps);
}

/* The reference for the checkpoint this step writes (every checkpoint.every and the last). */
static int ref_checkpoint(trainer *t, grpo_error *err) {
    const grpo_run_config *cfg = t->cfg;
    long step = t->s.st.step;
    if (!t->ref || !ref_diverged(cfg, step)) return GRPO_OK;
    if ((cfg->checkpoint_every > 0 && step % cfg->checkpoint_every == 0) ||
        step >= cfg->train_steps)
        return ref_save(t, step, err);
    return GRPO_OK;
}

/* ---- setup ------------------------------------------------------------------------------ */

/* The reference model (beta > 0): reference.path, which follows model.path (or the --model
 * override) unless the run file sets it. */
static int open_reference(trainer *t, grpo_error *err) {
    const grpo_run_config *cfg = t->cfg;
    if (!(cfg->grpo_beta > 0)) return GRPO_OK;
    if (t->s.lora.n && !cfg->line[GRPO_KEYIDX_reference_path]) { /* no second copy */
        t->ref_is_base = 1;
        return GRPO_OK;
    }
    char saved[4096];
    if (t->s.resumed && ref_diverged(cfg, t->s.st.step)) { /* the refreshed one, not the path */
        struct stat sb;
        if (ref_ckpt_dir(t, t->s.st.step, saved, sizeof saved) != 0 || stat(saved, &sb) != 0)
            return grpo_error_set(err, GRPO_ERR_IO,
                                  "--resume: %s is missing: the reference was refreshed "
                                  "(grpo.sync_ref_every = %lld) and must be resumed with the "
                                  "policy; expected the reference-STEP directory the trainer saves "
                                  "beside checkpoint-STEP",
                                  saved, cfg->grpo_sync_ref_every);
        return grpo_run_open_model(&t->s.run, saved, 0, &t->ref, err);
    }
    char *ref = cfg->line[GRPO_KEYIDX_reference_path]
                    ? grpo_run_path(&t->s.run, cfg->reference_path)
                    : NULL;
    int rc = grpo_run_open_model(&t->s.run, ref ? ref : t->s.run.model_dir, 0, &t->ref, err);
    free(ref);
    return rc;
}

/* sampling.weights_dtype = bf16 (full fine-tuning), or model.dtype = bf16 (a GPU run, whose
 * matmuls are bf16 anyway): a bf16 copy of the policy for the rollout, half the bytes a decode
 * step reads and no per-step rounding of fp32 weights. A LoRA run with lora.base_dtype = bf16
 * samples from its policy as it is (the base is bf16 already, the adapters fp32: exact). */
static int open_rollout(trainer *t, grpo_error *err) {
    int bf16 = t->cfg->sampling_weights_dtype == GRPO_WEIGHTS_BF16 ||
               t->cfg->model_dtype == GRPO_CFG_DTYPE_BF16;
    if (!bf16 || t->cfg->lora_r > 0) return GRPO_OK;
    t->is = grpo_is_sums_init();
    int rc = grpo_run_open_model_as(&t->s.run, t->s.policy->dir, 0, GRPO_DTYPE_BF16, &t->rollout,
                                    err);
    return rc == GRPO_OK ? grpo_model_copy_weights(t->rollout, t->s.policy, err) : rc;
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
static int evaluate_due(trainer *t, grpo_metric_row *row, grpo_error *err) {
    const grpo_run_config *cfg = t->cfg;
    if (!t->eval_data || t->s.st.step % cfg->train_eval_every != 0) return GRPO_OK;
    if (grpo_comm_rank() != 0) return GRPO_OK; /* the one that logs */
    size_t n = t->eval_data->n;
    if (cfg->train_eval_limit > 0 && (size_t)cfg->train_eval_limit < n)
        n = (size_t)cfg->train_eval_limit;
    grpo_episodes *env = t->episodes.desc ? &t->episodes : NULL;
    int rc = grpo_evaluate(&t->s.run, t->s.policy, &t->rewards, env, t->eval_data, n, 0.0f,
                           &t->eval_rng, "eval/", row, err);
    if (rc == GRPO_OK && cfg->train_eval_temperature > 0)
        rc = grpo_evaluate(&t->s.run, t->s.policy, &t->rewards, env, t->eval_data, n,
                           (float)cfg->train_eval_temperature, &t->eval_rng, "eval_sampled/", row,
                           err);
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

/* [env]: the environment plugin (evaluations run episodes too); a run whose rewards never read
 * the episodes' reward is warned of. */
static int open_env(trainer *t, grpo_error *err) {
    const grpo_run_config *cfg = t->cfg;
    int reads = 0;
    for (int k = 0; k < cfg->n_rewards; k++) reads |= !strcmp(cfg->rewards[k].plugin, "builtin.env");
    if (!reads)
        fprintf(stderr, "warning: %s: env.plugin = %s, but no [reward.NAME] has plugin = "
                "builtin.env: the environment's rewards are not trained on\n", cfg->path,
                cfg->env_plugin);
    return grpo_episodes_open(&t->episodes, &t->s.run, err);
}

/* What GRPO adds to the session: reference, rewards, sampler and advantage options, chunks. */
static int setup(trainer *t, grpo_error *err) {
    const grpo_run_config *cfg = t->cfg = t->s.cfg;
    int rc = refuse_options(cfg, t->s.policy, err);
    if (rc == GRPO_OK) rc = check_ranks(cfg, t->s.run.proc.ops, err);
    if (rc == GRPO_OK) rc = open_reference(t, err);
    if (rc == GRPO_OK) rc = open_rollout(t, err);
    if (rc == GRPO_OK) rc = open_eval(t, err);
    if (rc == GRPO_OK && cfg->env.entry) rc = open_env(t, err);
    if (rc == GRPO_OK)
        rc = grpo_reward_set_create(&t->rewards, cfg, &t->s.run.proc.reg, &t->s.run.proc.host, err);
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
                            t->rollout != NULL,
                            NULL}; /* rollout.c sets turns for a chunk with episodes */
    memcpy(so.eos, t->s.run.eos, sizeof so.eos);
    t->so = so;
    t->scale = cfg->sampling_temperature > 0 ? (float)(1.0 / cfg->sampling_temperature) : 1.0f;
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
        return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    if (cfg->log_completions_every > 0)
        rc = grpo_session_log_open(&t->s, "completions.jsonl", &t->completions, err);
    return rc;
}

/* Frees what setup made; closing completions.jsonl is a write, so its error is returned. */
static int teardown(trainer *t, grpo_error *err) {
    int rc = grpo_run_log_close(&t->completions, err);
    for (int a = 0; t->chunks && a < t->cap_chunks; a++) chunk_clear(&t->chunks[a]);
    free(t->chunks), free(t->w), free(t->load);
    grpo_seqbatch_free(&t->sb);
    grpo_episodes_close(&t->episodes);
    grpo_reward_set_free(&t->rewards);
    grpo_model_close(t->ref);
    grpo_model_close(t->rollout);
    grpo_dataset_free(t->eval_data);
    return rc;
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
    double w0 = grpo_now(), c0 = grpo_cpu_now();
    for (int a = 0; fresh && rc == GRPO_OK && a < t->n_chunks; a++)
        rc = chunk_generate(t, &t->chunks[a], (int32_t)cfg->train_batch_prompts, err);
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
        rc = grpo_ref_sync(t->ref, s->policy, cfg->grpo_sync_ref_alpha, err);
    phase_add(t, PH_OPTIMIZER, w0, c0);
    if (rc != GRPO_OK) return rc;
    grpo_metric_row row;
    grpo_metric_row_clear(&row);
    reward_metrics(t, &row);
    if (t->episodes.desc) env_metrics(t, &row);
    loss_metrics(t, &sums, &row);
    if (grpo_comm_size() > 1) /* this rank's seconds in collectives (waits included) */
        grpo_metric_set(&row, "time/comm", grpo_comm_seconds() - comm0);
    if ((rc = evaluate_due(t, &row, err)) != GRPO_OK) return rc;
    grpo_metric_row timings;
    grpo_metric_row_clear(&timings);
    phase_metrics(t, &timings);
    if ((rc = grpo_session_log(s, &row, &os, t0, tokens, &timings, err)) != GRPO_OK) return rc;
    if (cfg->log_completions_every > 0 && s->st.step % cfg->log_completions_every == 0 &&
        (rc = log_completions(t, err)) != GRPO_OK)
        return rc;
    if ((rc = ref_checkpoint(t, err)) != GRPO_OK) return rc;
    rc = grpo_session_checkpoint(s, err);
    if (rc == GRPO_OK && t->ref && cfg->grpo_sync_ref_every > 0) ref_prune(t);
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
    if (rc == GRPO_OK) rc = setup(&t, err);
    if (rc == GRPO_OK) rc = grpo_session_run(&t.s, train_step, &t, err);
    if (rc == GRPO_OK && t.ref && t.cfg->grpo_sync_ref_every > 0) ref_prune(&t);
    grpo_error close_err;
    grpo_error_init(&close_err);
    int closed = teardown(&t, &close_err);
    int closed2 = grpo_session_close(&t.s, &close_err);
    if (rc == GRPO_OK && (closed != GRPO_OK || closed2 != GRPO_OK))
        *err = close_err, rc = closed != GRPO_OK ? closed : closed2;
    if (rc != GRPO_OK && grpo_comm_size() > 1) abort_ranks(err);
    grpo_comm_finalize();
    return rc;
}
