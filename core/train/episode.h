/*
 * episode.h — multi-turn rollouts: the run's environment plugin ([env], grpo/env.h) and the
 * episodes of one generation batch, one environment instance per completion row.
 *
 * Dimension letters: B prompts, G completions per prompt, N = B*G episodes (group-major, as the
 * rollout's rows).
 *
 * Flow (rollout.c): grpo_episodes_begin resets N instances (a row's first observation), the
 * sampler calls back at every end of a turn (grpo_episodes_turns: the turn's text goes to step(),
 * the observation comes back rendered and tokenized, to be forced into the row's KV cache), then
 * grpo_episodes_finish asks each instance for its final reward, closes it and leaves the
 * per-episode results in ep[N]: what rewards see as the row fields env_reward, env_turns,
 * env_tool_calls and env_tool_errors (builtin.env scores env_reward).
 *
 * Observation rendering: a prompt that went through the model's chat template (a messages
 * prompt without data.chat_template) gets each observation as that template renders a
 * {"role": "tool"} message after the turn, up to the next assistant generation prompt; any other
 * prompt (plain text, data.chat_template formats) gets the observation text as is. The first
 * observation (reset's) is always appended as is.
 *
 * Tool calls: a turn holding "<tool_call>" has each <tool_call>JSON</tool_call> parsed; the calls
 * (objects with a string "name") go to step() as a JSON array, a malformed one as tool_error, and
 * both are counted (env/tool_calls, env/tool_errors).
 */
#ifndef GRPO_EPISODE_H
#define GRPO_EPISODE_H

#include <stdint.h>

#include "grpo/env.h"
#include "host/sampler.h"
#include "train/run.h"

/* One episode's results. */
typedef struct grpo_episode {
    void *inst;                  /* the plugin's episode; NULL once closed */
    const grpo_example *ex;      /* its dataset row (borrowed) */
    const char *prompt;          /* the prompt text the policy saw (borrowed) */
    int32_t turns;               /* policy turns that ended with an EOS */
    int32_t tool_calls, tool_errors;
    int32_t obs_tokens;          /* observation tokens forced into the row */
    int32_t done;                /* 1 when the environment ended it (not the host's limits) */
    double step_reward;          /* sum of the non-NaN step rewards */
    int32_t n_step_rewards;      /* how many there were */
    float reward;                /* final_reward + step_reward; NaN when neither gave one */
    int32_t *obs;                /* [n_obs] the observation tokens being forced (owned) */
    int32_t n_obs;
    char *fields_json[4];        /* the row fields rewards see (owned) */
} grpo_episode;

typedef struct grpo_episodes {
    grpo_run *run;               /* borrowed */
    const grpo_env_desc *desc;   /* borrowed from the loaded pack */
    void *state;                 /* the plugin's run state */
    int32_t max_turns;
    int32_t N, G;
    grpo_episode *ep;            /* [N] of the current batch */
    grpo_sampler_turns turns;    /* the sampler's callbacks, user = this */
} grpo_episodes;

/* Loads env.plugin's pack and creates its state from the [env] section. Errors name [env] and
 * the plugin. */
int grpo_episodes_open(grpo_episodes *E, grpo_run *r, grpo_error *err);
/* Creates and destroys cfg's [env] plugin once, as a run would (`grpo config check`). */
int grpo_episodes_try(const grpo_run_config *cfg, grpo_registry *reg, const grpo_host *host,
                      grpo_error *err);
/* Destroys the state (after closing any episode still open). NULL-safe on a zeroed E. */
void grpo_episodes_close(grpo_episodes *E);

/* Resets one instance per row: row i is member i % G of the prompt prompt_text[i / G], ex[i / G]
 * (both borrowed until finish). */
int grpo_episodes_begin(grpo_episodes *E, char *const *prompt_text,
                        const grpo_example *const *ex, int32_t B, int32_t G, grpo_error *err);
/* The sampler's callbacks for the current batch (grpo_sampler_opts.turns). */
const grpo_sampler_turns *grpo_episodes_turns(grpo_episodes *E);
/* Final rewards; closes every episode of the batch (also after a failed rollout). */
int grpo_episodes_finish(grpo_episodes *E, grpo_error *err);
/* The sample fields of row i: its dataset fields, then env_reward, env_turns, env_tool_calls,
 * env_tool_errors. fields has room for ex->n_fields + 4; returns the count written. */
uint32_t grpo_episodes_fields(const grpo_episodes *E, int32_t i, grpo_field *fields);

/* The tool calls of a turn's text: *calls a malloc'd JSON array of the <tool_call> objects (NULL
 * when the text has none), *n_calls their count; a malformed one leaves *why (malloc'd) saying
 * which call and what was wrong, and is not in *calls. */
void grpo_parse_tool_calls(const char *text, char **calls, int32_t *n_calls, char **why);

#endif
