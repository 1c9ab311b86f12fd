/* reward_batch.c — the samples the rewards score (see reward_batch.h). */
#include "train/reward_batch.h"

#include <stdlib.h>

int grpo_reward_batch_init(grpo_reward_batch *b, uint32_t n, grpo_error *err) {
    b->n = n;
    b->samples = calloc(n ? n : 1, sizeof *b->samples);
    if (!b->samples)
        return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory for %u reward samples", n);
    return GRPO_OK;
}

void grpo_reward_batch_free(grpo_reward_batch *b) {
    free(b->samples);
    b->samples = NULL, b->n = 0;
}

void grpo_reward_batch_set(grpo_reward_batch *b, uint32_t i, const char *prompt,
                           const grpo_example *ex, const char *completion, const int32_t *ids,
                           uint32_t n_ids, uint32_t group, uint32_t member, uint32_t truncated) {
    b->samples[i] = (grpo_sample){.struct_size = sizeof(grpo_sample),
                                  .prompt = prompt,
                                  .messages = ex->messages,
                                  .n_messages = ex->n_messages,
                                  .completion = completion,
                                  .completion_ids = ids,
                                  .n_completion_ids = n_ids,
                                  .group = group,
                                  .member = member,
                                  .fields = ex->fields,
                                  .n_fields = ex->n_fields,
                                  .truncated = truncated};
}

int grpo_reward_batch_from_rollout(grpo_reward_batch *b, char *const *prompt_text,
                                   const grpo_example *const *ex, int32_t G,
                                   char *const *completion, const grpo_rollout *roll,
                                   grpo_error *err) {
    int rc = grpo_reward_batch_init(b, (uint32_t)roll->N, err);
    for (int32_t i = 0; rc == GRPO_OK && i < roll->N; i++)
        grpo_reward_batch_set(b, (uint32_t)i, prompt_text[i / G], ex[i / G], completion[i],
                              roll->ids + (size_t)i * roll->T, (uint32_t)roll->len[i],
                              (uint32_t)(i / G), (uint32_t)(i % G), roll->truncated[i]);
    return rc;
}

void grpo_reward_batch_set_progress(grpo_reward_batch *b, uint64_t step, uint64_t total_steps) {
    for (uint32_t i = 0; i < b->n; i++)
        b->samples[i].step = step, b->samples[i].total_steps = total_steps;
}
