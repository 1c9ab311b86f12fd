/* rollout.c — prompts → sampler → completions → rewards, for train and eval (rollout.h). */
#include "train/rollout.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/nomem.h"
#include "train/reward_batch.h"
#include "train/reward_pool.h"

int grpo_rollout_batch_begin(grpo_rollout_batch *b, int32_t B, int32_t G, grpo_error *err) {
    memset(b, 0, sizeof *b);
    b->B = B, b->G = G, b->N = B * G;
    b->ids = calloc((size_t)B, sizeof *b->ids);
    b->n_ids = calloc((size_t)B, sizeof *b->n_ids);
    b->prompt_text = calloc((size_t)B, sizeof *b->prompt_text);
    b->ex = calloc((size_t)B, sizeof *b->ex);
    if (!b->ids || !b->n_ids || !b->prompt_text || !b->ex)
        return grpo_nomem(err, "the batch's prompt table (train.batch_prompts rows)",
                          (uint64_t)B * (sizeof *b->ids + sizeof *b->n_ids +
                                         sizeof *b->prompt_text + sizeof *b->ex));
    return GRPO_OK;
}

int grpo_rollout_batch_add(grpo_rollout_batch *b, grpo_run *r, const grpo_dataset *ds,
                           const grpo_example *ex, int *keep, grpo_error *err) {
    int32_t k = b->n_prompts;
    *keep = 0;
    if (k >= b->B)
        return grpo_error_set(err, GRPO_ERR_INVALID, "rollout: batch already holds %d prompts",
                              (int)b->B);
    int rc = grpo_run_prompt(r, ds, ex, &b->prompt_text[k], &b->ids[k], &b->n_ids[k], keep, err);
    if (rc == GRPO_OK && *keep) {
        b->ex[k] = ex, b->n_prompts++;
        return GRPO_OK;
    }
    free(b->prompt_text[k]), free(b->ids[k]); /* a skipped prompt leaves the slot empty */
    b->prompt_text[k] = NULL, b->ids[k] = NULL, b->n_ids[k] = 0;
    return rc;
}

/* Left-pads the added prompts into prompt/pmask (B,P) and drops the ragged ids. */
static int pad_prompts(grpo_rollout_batch *b, int32_t pad_id, grpo_error *err) {
    b->P = grpo_left_pad(b->ids, b->n_ids, b->B, pad_id, &b->prompt, &b->pmask);
    for (int32_t k = 0; k < b->B; k++) free(b->ids[k]);
    free(b->ids), free(b->n_ids);
    b->ids = NULL, b->n_ids = NULL;
    return b->P < 0 ? grpo_error_set(err, GRPO_ERR_NOMEM,
                                                 "out of memory for the padded prompts of %d rows",
                                                 (int)b->B) : GRPO_OK;
}

static int alloc_completions(grpo_rollout_batch *b, grpo_error *err) {
    if (!b->completion && !(b->completion = calloc((size_t)b->N, sizeof *b->completion)))
        return grpo_nomem(err, "the completions' texts", (uint64_t)b->N * sizeof *b->completion);
    return GRPO_OK;
}

/* completion[N]: the text of each completion row (special tokens skipped); rows decoded when
 * they ended (streamed scoring) are kept. */
static int decode_completions(grpo_rollout_batch *b, const grpo_run *r, grpo_error *err) {
    int rc = alloc_completions(b, err);
    for (int32_t i = 0; rc == GRPO_OK && i < b->N; i++)
        if (!b->completion[i])
            b->completion[i] = grpo_run_decode(r, b->roll.ids + (size_t)i * b->roll.T,
                                               b->roll.len[i]);
    return rc;
}

/* With an environment: every sample's fields are its row's, then the episode's results. */
static int episode_fields(grpo_rollout_batch *b, grpo_reward_batch *rb, grpo_error *err) {
    uint32_t per = 4;
    for (int32_t k = 0; k < b->B; k++) per = b->ex[k]->n_fields + 4 > per ? b->ex[k]->n_fields + 4 : per;
    if (!(b->fields = malloc((size_t)b->N * per * sizeof *b->fields)))
        return grpo_nomem(err, "the episodes' reward fields (rows x fields)",
                          (uint64_t)b->N * per * sizeof *b->fields);
    for (int32_t i = 0; i < b->N; i++) {
        grpo_field *f = b->fields + (size_t)i * per;
        rb->samples[i].n_fields = grpo_episodes_fields(b->env, i, f);
        rb->samples[i].fields = f;
    }
    return GRPO_OK;
}

static int alloc_scores(grpo_rollout_batch *b, const grpo_reward_set *rs, grpo_error *err) {
    if (!(b->R = malloc(((size_t)b->N * rs->n + 1) * sizeof(float))))
        return grpo_nomem(err, "the reward scores (N,K)", ((uint64_t)b->N * rs->n + 1) * 4);
    return GRPO_OK;
}

/* Scores the whole batch after it decoded. */
static int score(grpo_rollout_batch *b, grpo_reward_set *rs, grpo_error *err) {
    grpo_reward_batch rb = {0};
    int rc = alloc_scores(b, rs, err);
    if (rc == GRPO_OK)
        rc = grpo_reward_batch_from_rollout(&rb, b->prompt_text, b->ex, b->G, b->completion,
                                            &b->roll, err);
    if (rc == GRPO_OK && b->env) rc = episode_fields(b, &rb, err);
    if (rc == GRPO_OK) grpo_reward_batch_set_progress(&rb, b->step, b->total_steps);
    if (rc == GRPO_OK) rc = grpo_reward_set_score(rs, rb.samples, rb.n, b->R, err);
    grpo_reward_batch_free(&rb);
    return rc;
}

/* ---- scoring while decoding: a row's sample is made as the row ends (rewards.h) ------------- */

typedef struct stream {
    grpo_rollout_batch *b;
    const grpo_run *r;
    grpo_reward_set *rs;
    grpo_reward_batch rb; /* [N] sample n set when row n ended */
} stream;

/* Row n just ended: its text and its sample (st->rb.samples[n]). */
static int row_sample(stream *st, int32_t n, grpo_error *err) {
    grpo_rollout_batch *b = st->b;
    const int32_t *ids = b->roll.ids + (size_t)n * b->roll.T;
    b->completion[n] = grpo_run_decode(st->r, ids, b->roll.len[n]);
    if (!b->completion[n]) return grpo_nomem(err, "a completion's text", b->roll.len[n]);
    int32_t k = n / b->G;
    grpo_reward_batch_set(&st->rb, (uint32_t)n, b->prompt_text[k], b->ex[k], b->completion[n],
                          ids, (uint32_t)b->roll.len[n], (uint32_t)k, (uint32_t)(n % b->G),
                          b->roll.truncated[n]);
    st->rb.samples[n].step = b->step, st->rb.samples[n].total_steps = b->total_steps;
    return GRPO_OK;
}

/* The sampler's row_end: row n's text and sample, then the pooled rewards may score it. */
static int stream_row_end(void *user, int32_t n, grpo_error *err) {
    stream *st = user;
    int rc = row_sample(st, n, err);
    if (rc == GRPO_OK) grpo_reward_set_row_done(st->rs, (uint32_t)n);
    return rc;
}

/* The texts, scores (N,K) and samples of a batch whose rows are scored as they end. */
static int stream_alloc(stream *st, grpo_error *err) {
    int rc = alloc_completions(st->b, err);
    if (rc == GRPO_OK) rc = alloc_scores(st->b, st->rs, err);
    if (rc == GRPO_OK) rc = grpo_reward_batch_init(&st->rb, (uint32_t)st->b->N, err);
    return rc;
}

/* ---- over-sampling: each group scored as it completes, the first `keep` with a spread kept --- */

typedef struct over {
    stream st;                /* the rows' samples, made as they end */
    int32_t *left;            /* [B] rows of group k still decoding */
    int32_t *done_at;         /* [B] the decode step group k completed in; -1: not complete */
    uint8_t *pass, *kept;     /* [B] its rewards have a spread; it is kept */
    int32_t *fresh, n_fresh;  /* [B] the groups completed in the current decode step */
    int32_t step, n_done, n_kept;
} over;

static void over_free(over *o) {
    free(o->left), free(o->done_at), free(o->pass), free(o->kept), free(o->fresh);
    o->left = o->done_at = o->fresh = NULL, o->pass = o->kept = NULL;
    grpo_reward_batch_free(&o->st.rb);
}

static int over_alloc(over *o, grpo_error *err) {
    int32_t B = o->st.b->B;
    int rc = stream_alloc(&o->st, err);
    o->left = malloc((size_t)B * sizeof *o->left), o->done_at = malloc((size_t)B * sizeof(int32_t));
    o->pass = calloc((size_t)B, 1), o->kept = calloc((size_t)B, 1);
    o->fresh = malloc((size_t)B * sizeof *o->fresh);
    if (rc == GRPO_OK && !(o->left && o->done_at && o->pass && o->kept && o->fresh))
        rc = grpo_nomem(err, "the over-sampled groups' state", (uint64_t)B * 14);
    for (int32_t k = 0; rc == GRPO_OK && k < B; k++) o->left[k] = o->st.b->G, o->done_at[k] = -1;
    /* NaN until scored: a pooled reward that failed or lost its worker leaves its rows so */
    for (size_t i = 0; rc == GRPO_OK && i < (size_t)o->st.b->N * o->st.rs->n; i++)
        o->st.b->R[i] = NAN;
    return rc;
}

/* The sampler's row_end: row n's sample, which the pooled rewards may score (as
 * stream_row_end); its group joins this step's completed ones when it was the group's last
 * row. */
static int over_row_end(void *user, int32_t n, grpo_error *err) {
    over *o = user;
    int rc = stream_row_end(&o->st, n, err);
    int32_t k = n / o->st.b->G;
    if (rc == GRPO_OK && --o->left[k] == 0) o->fresh[o->n_fresh++] = k;
    return rc;
}

/* Group k's scores (G,K) in R: the rewards scored on this thread score its G samples as one
 * batch now; the pooled ones (which took its rows or the group as they ended) are waited for. */
static int over_score(over *o, int32_t k, grpo_error *err) {
    grpo_rollout_batch *b = o->st.b;
    int32_t G = b->G;
    float *R = b->R + (size_t)k * G * o->st.rs->n;
    int rc = grpo_reward_set_score_group(o->st.rs, (uint32_t)(k * G), (uint32_t)G, err);
    int pass = 0;
    if (rc == GRPO_OK) rc = b->spread(b->spread_user, R, G, &pass, err);
    o->pass[k] = (uint8_t)pass;
    return rc;
}

/* The sampler's step_end: the groups completed in this step are scored in group order, those
 * with a spread kept until `keep` are; then the rollout stops (*stop). */
static int over_step_end(void *user, int *stop, grpo_error *err) {
    over *o = user;
    grpo_rollout_batch *b = o->st.b;
    for (int32_t i = 1; i < o->n_fresh; i++) /* group index order (insertion sort) */
        for (int32_t j = i; j > 0 && o->fresh[j - 1] > o->fresh[j]; j--) {
            int32_t x = o->fresh[j];
            o->fresh[j] = o->fresh[j - 1], o->fresh[j - 1] = x;
        }
    o->n_done += o->n_fresh;
    int rc = GRPO_OK;
    for (int32_t i = 0; rc == GRPO_OK && i < o->n_fresh; i++) {
        int32_t k = o->fresh[i];
        o->done_at[k] = o->step;
        rc = over_score(o, k, err);
        if (rc == GRPO_OK && o->pass[k] && o->n_kept < b->keep) o->kept[k] = 1, o->n_kept++;
    }
    o->n_fresh = 0, o->step++;
    *stop = o->n_kept == b->keep;
    return rc;
}

/* Every row ended with fewer than `keep` groups passing: complete groups that did not pass fill
 * the batch, by the step they completed in, then group index. */
static void over_fill(over *o) {
    grpo_rollout_batch *b = o->st.b;
    for (int32_t s = 0; s < o->step && o->n_kept < b->keep; s++)
        for (int32_t k = 0; k < b->B && o->n_kept < b->keep; k++)
            if (o->done_at[k] == s && !o->kept[k]) o->kept[k] = 1, o->n_kept++;
}

/* Moves sample row src of b to row dst (dst < src): tokens, mask, log-probs, text, scores. */
static void move_sample(grpo_rollout_batch *b, int32_t dst, int32_t src, int K) {
    grpo_rollout_copy_row(&b->roll, dst, &b->roll, src);
    b->completion[dst] = b->completion[src], b->completion[src] = NULL;
    memcpy(b->R + (size_t)dst * K, b->R + (size_t)src * K, (size_t)K * sizeof *b->R);
}

/* Leaves the kept groups only, in group order: b->B becomes their count; the others' tokens
 * are counted in aborted_tokens, their texts freed. */
static void over_compact(grpo_rollout_batch *b, const uint8_t *kept, int K) {
    int32_t G = b->G, P = b->P, j = 0;
    for (int32_t k = 0; k < b->B; k++) {
        if (!kept[k]) {
            for (int32_t g = 0; g < G; g++) {
                b->aborted_tokens += b->roll.len[k * G + g];
                free(b->completion[k * G + g]), b->completion[k * G + g] = NULL;
            }
            free(b->prompt_text[k]), b->prompt_text[k] = NULL;
            continue;
        }
        if (j != k) {
            b->prompt_text[j] = b->prompt_text[k], b->prompt_text[k] = NULL, b->ex[j] = b->ex[k];
            memcpy(b->prompt + (size_t)j * P, b->prompt + (size_t)k * P, P * sizeof *b->prompt);
            memcpy(b->pmask + (size_t)j * P, b->pmask + (size_t)k * P, P * sizeof *b->pmask);
            for (int32_t g = 0; g < G; g++) move_sample(b, j * G + g, k * G + g, K);
        }
        j++;
    }
    b->B = b->n_prompts = j, b->N = b->roll.N = j * G;
}

/* ---- a queue of batches through one sampler run (grpo_sampler_run_queue) ------------------ */

enum { PLAIN, STREAMED, OVER }; /* scored after; scored as rows end; over-sampled */

/* One batch of the queue: how it is scored, its callbacks' state and where it is. */
typedef struct runner {
    over o; /* o.st: the rows' samples (STREAMED, OVER); the groups' state (OVER) */
    int mode, begun, finished;
    grpo_sampler_row_end hook;
} runner;

/* The sampler's begin: the batch's samples, and the reward set takes it (one batch at a time:
 * the queue begins a batch once the one before finished). */
static int runner_begin(void *user, grpo_error *err) {
    runner *u = user;
    grpo_rollout_batch *b = u->o.st.b;
    int rc = u->mode == OVER ? over_alloc(&u->o, err) : stream_alloc(&u->o.st, err);
    if (rc == GRPO_OK)
        rc = grpo_reward_set_begin(u->o.st.rs, u->o.st.rb.samples, (uint32_t)b->N,
                                   (uint32_t)b->G, b->R, err);
    u->begun = rc == GRPO_OK;
    return rc;
}

/* The sampler's finish: the batch's rows are final; the rest of its scoring, its texts. */
static int runner_finish(void *user, grpo_error *err) {
    runner *u = user;
    grpo_rollout_batch *b = u->o.st.b;
    grpo_reward_set *rs = u->o.st.rs;
    int rc = GRPO_OK;
    u->finished = 1;
    if (u->mode == PLAIN) {
        rc = decode_completions(b, u->o.st.r, err);
        if (rc == GRPO_OK) rc = score(b, rs, err);
        if (rc == GRPO_OK) grpo_reward_pool_parts(rs->pool, &b->parts_early, &b->parts);
        return rc;
    }
    rc = u->mode == OVER ? grpo_reward_set_finish_groups(rs, err)
                         : grpo_reward_set_finish(rs, 1, err);
    grpo_reward_pool_parts(rs->pool, &b->parts_early, &b->parts);
    if (rc == GRPO_OK && u->mode == OVER) over_fill(&u->o), over_compact(b, u->o.kept, rs->n);
    if (rc == GRPO_OK && u->mode == STREAMED) rc = decode_completions(b, u->o.st.r, err);
    over_free(&u->o);
    return rc;
}

/* After a failed run: a batch the reward set took is drained; every runner's state freed. */
static void runner_free(runner *u) {
    if (u->begun && !u->finished && u->mode != PLAIN)
        grpo_reward_set_finish(u->o.st.rs, 0, NULL);
    over_free(&u->o);
}

/* Rows can be scored as they end: pooled rewards, one stream per row (the trainer's: a row's
 * tokens do not depend on when others end), and no environment (an episode's fields are final
 * only once every episode is). */
static int streams(const grpo_rollout_batch *b, const grpo_reward_set *rs) {
    return rs->pool && b->row_rng && !b->env;
}

/* Batch b's checks, its prompts left-padded, its runner set up. */
static int runner_init(runner *u, grpo_rollout_batch *b, const grpo_run *r,
                       const grpo_sampler_opts *so, grpo_reward_set *rs, grpo_error *err) {
    memset(u, 0, sizeof *u);
    u->o.st.b = b, u->o.st.r = r, u->o.st.rs = rs;
    if (b->n_prompts != b->B || so->G != b->G)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "rollout: %d of %d prompts added, %d completions each (sampler: %d)",
                              (int)b->n_prompts, (int)b->B, (int)b->G, (int)so->G);
    if (b->keep > 0 && (!b->row_rng || b->env || !b->spread || b->keep > b->B))
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "rollout: over-sampling keeps %d of %d groups; it needs one "
                              "sampling stream per row, no environment and a spread test",
                              (int)b->keep, (int)b->B);
    u->mode = b->keep > 0 ? OVER : streams(b, rs) ? STREAMED : PLAIN;
    /* one user for every callback: u is &u->o is &u->o.st (first members) */
    u->hook = (grpo_sampler_row_end){NULL, u, NULL, runner_begin, runner_finish};
    if (u->mode == STREAMED) u->hook.fn = stream_row_end;
    if (u->mode == OVER) u->hook.fn = over_row_end, u->hook.step_end = over_step_end;
    if (u->mode == PLAIN) u->hook.begin = NULL;
    return pad_prompts(b, r->pad_id, err);
}

int grpo_rollout_batches_run(grpo_rollout_batch **bs, int32_t n, const grpo_run *r,
                             grpo_model *m, const grpo_sampler_opts *so, grpo_reward_set *rs,
                             int32_t max_live, grpo_sampler_stats *stats, grpo_error *err) {
    runner *u = calloc((size_t)n, sizeof *u);
    grpo_sampler_batch *q = calloc((size_t)n, sizeof *q);
    int rc = u && q ? GRPO_OK
                    : grpo_nomem(err, "the rollout's batch table", (uint64_t)n * (sizeof *u +
                                                                                  sizeof *q));
    for (int32_t i = 0; rc == GRPO_OK && i < n; i++) {
        grpo_rollout_batch *b = bs[i];
        if (!b->row_rng || b->env)
            rc = grpo_error_set(err, GRPO_ERR_INVALID,
                                "rollout: batch %d of a queue needs one sampling stream per row "
                                "and no environment", (int)i);
        if (rc == GRPO_OK) rc = runner_init(&u[i], b, r, so, rs, err);
        q[i] = (grpo_sampler_batch){b->prompt, b->pmask, b->B, b->P, b->row_rng, &u[i].hook,
                                    &b->roll};
    }
    if (rc == GRPO_OK) rc = grpo_sampler_run_queue(m, so, q, n, max_live, stats, err);
    for (int32_t i = 0; u && i < n; i++) runner_free(&u[i]);
    free(u), free(q);
    return rc;
}

int grpo_rollout_batch_run(grpo_rollout_batch *b, const grpo_run *r, grpo_model *m,
                           const grpo_sampler_opts *so, grpo_rng *rng, grpo_reward_set *rs,
                           grpo_error *err) {
    if (b->row_rng && !b->env) return grpo_rollout_batches_run(&b, 1, r, m, so, rs, 0, NULL, err);
    runner u;
    int rc = runner_init(&u, b, r, so, rs, err); /* PLAIN: eval's rows, or an environment's */
    grpo_sampler_opts o = *so;
    if (rc == GRPO_OK && b->env) {
        rc = grpo_episodes_begin(b->env, b->prompt_text, b->ex, b->B, b->G, err);
        o.turns = grpo_episodes_turns(b->env);
    }
    if (rc == GRPO_OK)
        rc = b->row_rng ? grpo_sampler_run_rows(m, &o, b->prompt, b->pmask, b->B, b->P,
                                                b->row_rng, &b->roll, err)
                        : grpo_sampler_run(m, &o, b->prompt, b->pmask, b->B, b->P, rng, &b->roll,
                                           err);
    if (b->env) { /* every episode is closed, even after a failed rollout */
        int rc2 = grpo_episodes_finish(b->env, rc == GRPO_OK ? err : NULL);
        if (rc == GRPO_OK) rc = rc2;
    }
    if (rc == GRPO_OK) rc = runner_finish(&u, err);
    return rc;
}

void grpo_rollout_batch_free(grpo_rollout_batch *b) {
    for (int32_t k = 0; b->ids && k < b->B; k++) free(b->ids[k]);
    for (int32_t k = 0; b->prompt_text && k < b->B; k++) free(b->prompt_text[k]);
    for (int32_t i = 0; b->completion && i < b->N; i++) free(b->completion[i]);
    free(b->ids), free(b->n_ids), free(b->prompt), free(b->pmask), free(b->prompt_text);
    free(b->ex), free(b->completion), free(b->R), free(b->fields);
    grpo_rollout_free(&b->roll);
    memset(b, 0, sizeof *b);
}
