/*
 * grpo/reward.h — the reward interface. A reward scores a whole batch of completions at once.
 * What each minor added: the ABI history table in grpo/plugin.h.
 *
 * Lifecycle (MUST sentences):
 * - The host calls create() on the main thread, once per [reward.NAME] section that names this
 *   reward. If create() returns GRPO_OK, the host MUST call destroy() on the state exactly once.
 * - score() is called on the main thread unless flags has GRPO_REWARD_THREADSAFE, in which case
 *   the host MAY call score() concurrently on *different* states (never on the same state).
 * - score() writes exactly n floats to out. NaN means "no opinion": the host excludes it from that
 *   sample's weighted sum (as TRL does with None). Returning a non-OK status fails the batch.
 *   The host fills out with NaN before the call, so a score left unwritten is "no opinion" (and
 *   the host warns once), never a value from an earlier call or another reward.
 * - Everything in samples is borrowed for the duration of the call, and read-only. The host
 *   hands each call its own copy of the batch (strings, ids, messages, fields), so a plugin that
 *   writes through these pointers anyway changes neither the run's state nor what the next reward
 *   sees; it only wastes its own copy.
 * - An error message MUST be NUL-terminated; the host reads at most sizeof(message) bytes and
 *   supplies the NUL itself when it is missing.
 * - A plugin MUST NOT end the process. If it calls exit() during create, score or destroy, the
 *   host reports "plugin ID (section [reward.NAME]) called exit() during score" and exits with a
 *   non-zero status (the run ends without its final checkpoint). A section with isolate = true
 *   runs in a worker process instead (a fresh grpo started in its worker mode, which creates
 *   the reward there): a crash, signal, exit() or a score() past the section's `timeout` costs
 *   that batch (NaN scores, one warning) and the worker, not the run; the next batch gets a new
 *   worker and a new create(). State a score() call changes lives as long as its worker.
 *
 * A descriptor names its fields (C99 designated initializers), so a field appended in a later
 * minor version is zero (NULL) in a pack that predates it, and create() reads its keys with the
 * typed readers of grpo/config.h:
 *
 *   static int32_t len_create(const grpo_host *host, const grpo_config *cfg, void **state,
 *                             grpo_error *err) {
 *       int32_t target; // pack.ini: [example.len:target] type = int, default = 200
 *       int32_t rc = grpo_config_int(cfg, "target", 200, 1, INT32_MAX, &target, err);
 *       ...                // rc != GRPO_OK: err says "[reward.NAME] target: expected ..."
 *   }
 *   const grpo_reward_desc len_reward = {
 *       .struct_size = sizeof(grpo_reward_desc),
 *       .id = "example.len",
 *       .description = "1 at the target length, less around it",
 *       .flags = GRPO_REWARD_THREADSAFE,
 *       .create = len_create,
 *       .score = len_score,
 *       .destroy = free,
 *   };
 */
#ifndef GRPO_REWARD_H
#define GRPO_REWARD_H

#include "grpo/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One chat message of the prompt. */
typedef struct grpo_message {
    uint32_t struct_size;
    const char *role;    /* "system", "user", "assistant", ... */
    const char *content; /* UTF-8 */
} grpo_message;

/* One extra field of the dataset row (every field that is not the prompt), e.g. "answer". */
typedef struct grpo_field {
    uint32_t struct_size;
    const char *key;
    const char *json; /* the value as JSON text: "\"42\"", "42", "[1,2]", ... */
} grpo_field;

/* One sample to score. Samples of one group (same prompt) share group and differ in member. */
typedef struct grpo_sample {
    uint32_t struct_size;
    /* The prompt text exactly as the policy saw it: after the chat template and after
     * truncation to data.max_prompt_length tokens, not the dataset's raw prompt (the dataset's
     * messages, untruncated, are in messages). */
    const char *prompt;
    const grpo_message *messages;     /* [n_messages] the prompt's messages; NULL if plain text */
    uint32_t n_messages;
    const char *completion;           /* decoded completion text, UTF-8, special tokens skipped */
    const int32_t *completion_ids;    /* [n_completion_ids] token ids of the completion */
    uint32_t n_completion_ids;
    uint32_t group;                   /* index of the prompt within the batch */
    uint32_t member;                  /* index within the group, 0..G-1 */
    const grpo_field *fields;         /* [n_fields] extra dataset fields */
    uint32_t n_fields;
    uint32_t truncated;               /* 1 when the completion hit max_completion_length */
    /* -- 1.3 -- (test GRPO_HAS_FIELD(sample, grpo_sample, total_steps) before reading: a 1.2
     *    host's samples end above) For curricula: */
    uint64_t step;        /* optimizer steps taken before this batch (0 for the first) */
    uint64_t total_steps; /* train.steps; 0 when not training (grpo eval, grpo reward score) */
} grpo_sample;

/* JSON text of a field, or NULL. */
static inline const char *grpo_sample_field(const grpo_sample *s, const char *key) {
    for (uint32_t i = 0; i < s->n_fields; i++)
        if (strcmp(s->fields[i].key, key) == 0) return s->fields[i].json;
    return NULL;
}

#define GRPO_REWARD_THREADSAFE 1u /* score() may run concurrently on different states */

typedef struct grpo_reward_desc {
    uint32_t struct_size;
    /* -- 1.0 -- */
    const char *id;          /* namespaced: "pack.name"; must match the manifest */
    const char *description; /* one line */
    uint32_t flags;          /* GRPO_REWARD_* */
    /* Builds a state from the section's resolved config. */
    int32_t (*create)(const grpo_host *host, const grpo_config *cfg, void **state, grpo_error *err);
    /* Scores n samples: out[i] for samples[i]. */
    int32_t (*score)(void *state, const grpo_sample *samples, uint32_t n, float *out,
                     grpo_error *err);
    void (*destroy)(void *state);
} grpo_reward_desc;

#ifdef __cplusplus
}
#endif
#endif /* GRPO_REWARD_H */
