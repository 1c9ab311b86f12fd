/* rollout.c — prompts → sampler → completions → rewards, for train and eval (rollout.h). */
#include "train/rollout.h"

#include <stdlib.h>
#include <string.h>

#include "base/nomem.h"
#include "train/reward_batch.h"

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

/* completion[N]: the text of each completion row (special tokens skipped). */
static int decode_completions(grpo_rollout_batch *b, const grpo_run *r, grpo_error *err) {
    if (!(b->completion = calloc((size_t)b->N, sizeof *b->completion)))
        return grpo_nomem(err, "the completions' texts", (uint64_t)b->N * sizeof *b->completion);
    for (int32_t i = 0; i < b->N; i++)
        b->completion[i] = grpo_run_decode(r, b->roll.ids + (size_t)i * b->roll.T, b->roll.len[i]);
    return GRPO_OK;
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

static int score(grpo_rollout_batch *b, grpo_reward_set *rs, grpo_error *err) {
    grpo_reward_batch rb = {0};
    if (!(b->R = malloc(((size_t)b->N * rs->n + 1) * sizeof(float))))
        return grpo_nomem(err, "the reward scores (N,K)", ((uint64_t)b->N * rs->n + 1) * 4);
    int rc = grpo_reward_batch_from_rollout(&rb, b->prompt_text, b->ex, b->G, b->completion,
                                            &b->roll, err);
    if (rc == GRPO_OK && b->env) rc = episode_fields(b, &rb, err);
    if (rc == GRPO_OK) grpo_reward_batch_set_progress(&rb, b->step, b->total_steps);
    if (rc == GRPO_OK) rc = grpo_reward_set_score(rs, rb.samples, rb.n, b->R, err);
    grpo_reward_batch_free(&rb);
    return rc;
}

int grpo_rollout_batch_run(grpo_rollout_batch *b, const grpo_run *r, grpo_model *m,
                           const grpo_sampler_opts *so, grpo_rng *rng, grpo_reward_set *rs,
                           grpo_error *err) {
    if (b->n_prompts != b->B || so->G != b->G)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "rollout: %d of %d prompts added, %d completions each (sampler: %d)",
                              (int)b->n_prompts, (int)b->B, (int)b->G, (int)so->G);
    grpo_sampler_opts o = *so;
    int rc = pad_prompts(b, r->pad_id, err);
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
    if (rc == GRPO_OK) rc = decode_completions(b, r, err);
    if (rc == GRPO_OK) rc = score(b, rs, err);
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
