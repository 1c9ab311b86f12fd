/*
 * grpo/env.h — the environment interface (ABI 1.5; history: grpo/plugin.h): multi-turn rollouts. The policy writes a
 * turn, the environment answers with an observation (a tool's result, a game's next state), the
 * policy writes the next turn, until the environment says done or the host's limits
 * ([env] max_turns, max_episode_tokens) end the episode. The whole episode is rewarded; only
 * the policy's own tokens are trained (observation tokens are masked out of the loss).
 *
 * Lifecycle (MUST sentences):
 * - The host calls create() once per run, on the main thread, with the [env] section's resolved
 *   config. If create() returns GRPO_OK, the host MUST call destroy() on the state exactly once,
 *   after every episode made from it was closed.
 * - Every episode (each of a group's G completions is one) gets its own instance: reset() makes
 *   it from the state and the dataset row (sample: prompt, messages, fields, group, member;
 *   its completion fields are empty). If reset() returns GRPO_OK, the host MUST call close() on
 *   the episode exactly once.
 * - step() is called after each turn of the policy that the environment did not end; it says
 *   done, or gives the observation the policy sees before its next turn. final_reward() is
 *   called once, after the last turn (done, max_turns or max_episode_tokens reached), before
 *   close(). The episode's reward is final_reward + the sum of the step rewards that are not NaN.
 * - All calls run on the main thread, one at a time (an environment needs no locks).
 * - Strings handed in are borrowed for the call. The observation a plugin returns in
 *   grpo_env_step stays owned by the plugin and MUST stay valid until the next call on that
 *   episode (or its close()).
 * - Errors: return a negative GRPO_ERR_* with grpo_error_set (no section prefix: the host writes
 *   "[env] (plugin ID): " in front). An error fails the run, as a reward's does.
 * - A plugin MUST NOT end the process and MUST NOT write to stdout (plugin.h).
 *
 * How the host renders an observation: when the prompt went through a chat template, as the
 * template renders a {"role": "tool"} message after the policy's turn, ending in the generation
 * prompt of the next assistant turn; a plain-text prompt gets the observation text as is (the
 * environment chooses its framing, e.g. "\nresult: 42\n").
 *
 * Tool calls: a turn holding <tool_call>JSON</tool_call> (Qwen's and Hermes' convention) is parsed
 * by the host: turn->tool_calls is a JSON array of the calls' objects, or turn->tool_error says
 * what was malformed (the host counts it in metrics env/tool_errors). An environment with a
 * syntax of its own reads turn->text and reports its counts in grpo_env_step.
 *
 *   const grpo_env_desc calc_env = {
 *       .struct_size = sizeof(grpo_env_desc),
 *       .id = "calc.calculator",
 *       .description = "a calculator the policy calls with 'calc: EXPR'",
 *       .create = calc_create, .reset = calc_reset, .step = calc_step,
 *       .final_reward = calc_final, .close = calc_close, .destroy = calc_destroy,
 *   };
 */
#ifndef GRPO_GRPO_ENV_H
#define GRPO_GRPO_ENV_H

#include "grpo/plugin.h"
#include "grpo/reward.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One finished turn of the policy, as step() sees it. */
typedef struct grpo_env_turn {
    uint32_t struct_size;
    uint32_t turn;              /* 0 for the first turn of the episode */
    const char *text;           /* the turn's text, special tokens skipped (its EOS left out) */
    const int32_t *ids;         /* [n_ids] the turn's token ids, its EOS included */
    uint32_t n_ids;
    const char *tool_calls;     /* JSON array of the turn's <tool_call> objects; NULL: none */
    const char *tool_error;     /* a malformed <tool_call>: what was wrong; NULL when none */
} grpo_env_turn;

/* What reset() and step() answer. The host zeroes it and sets reward to NaN first. */
typedef struct grpo_env_step {
    uint32_t struct_size;     /* set by the host */
    const char *observation;  /* shown to the policy before its next turn; NULL or "" = none.
                               * Owned by the plugin, valid until its next call on the episode */
    int32_t done;             /* 1: the episode is over (observation ignored); reset's is ignored */
    float reward;             /* a step reward; NaN (the host's fill) = none. reset's is ignored */
    uint32_t tool_calls;      /* tool calls the environment served this step in a syntax of its
                               * own (metrics; the host counts the <tool_call>s it parsed) */
    uint32_t tool_errors;     /* calls it refused as malformed (metrics) */
} grpo_env_step;

typedef struct grpo_env_desc {
    uint32_t struct_size;
    /* -- 1.5 -- */
    const char *id;          /* namespaced: "pack.name"; must match the manifest (kind = env) */
    const char *description; /* one line */
    uint32_t flags;          /* none yet: 0 */
    /* Builds the run's state from the [env] section's resolved config. */
    int32_t (*create)(const grpo_host *host, const grpo_config *cfg, void **state,
                      grpo_error *err);
    /* Starts an episode for the row in sample; out->observation (may be empty) precedes the
     * policy's first turn. */
    int32_t (*reset)(void *state, const grpo_sample *sample, void **episode, grpo_env_step *out,
                     grpo_error *err);
    /* The policy's turn ended: done, or the next observation (and an optional step reward). */
    int32_t (*step)(void *episode, const grpo_env_turn *turn, grpo_env_step *out,
                    grpo_error *err);
    /* The episode's final reward (NaN = no opinion). */
    int32_t (*final_reward)(void *episode, float *reward, grpo_error *err);
    void (*close)(void *episode);
    void (*destroy)(void *state);
} grpo_env_desc;

#ifdef __cplusplus
}
#endif
#endif /* GRPO_GRPO_ENV_H (core/host/process.h owns GRPO_ENV_H) */
