/*
 * dataset.h — prompt datasets (JSONL), prompt-length policy, and a resumable shuffled order.
 *
 * One JSON object per line. Three shapes are accepted (TRL's two and MiniMind's); "prompt" is the
 * default prompt key, options.prompt_field (data.prompt_field) names another:
 *   {"prompt": "text", ...}                                  the text is the prompt, used as is
 *   {"prompt": [{"role": "user", "content": "..."}, ...], ...} messages, rendered by a template
 *   {"conversations": [{"role": ..., "content": ...}, ...], ...}  MiniMind's RLAIF lines: every
 *        turn but the last is the prompt; the last turn must be the assistant's and is the
 *        reference response (grpo_example.response). As in MiniMind's RLAIFDataset, a turn
 *        without "role" is "user" at even and "assistant" at odd positions.
 * Every other top-level key is kept as an extra field, key → the value's JSON text exactly as
 * written in the file (e.g. "answer": "\"42\""), and handed to rewards as grpo_field. One parse:
 * cJSON reads each key and each value of the object; a field's text is the bytes it read.
 * Blank lines are ignored. A UTF-8 byte-order mark at the start of a line is skipped (RFC 8259
 * lets a parser ignore one at the start of a JSON text, and each line is one; it is how a file
 * saved with a BOM starts). A bad line is an error "path:line: what was expected"; with
 * skip_bad_lines it is counted in n_skipped instead (and the first such message is kept). Bad:
 * invalid UTF-8; a control byte other than tab and CR anywhere (JSON has no other whitespace,
 * and strings must escape them); bad JSON; not an object; no prompt; a value of the wrong type;
 * a duplicate key; \u0000 (NUL) anywhere in a key or value, since prompts, messages and fields
 * become C text that would silently end there.
 *
 * Order: grpo_data_order yields example indices epoch after epoch. With shuffle on, epoch e uses
 * the permutation made by Fisher–Yates (i = n-1 down to 1, j uniform in [0, i], swap) over
 * 0..n-1, drawing from splitmix64 seeded with seed + e * 0x9E3779B97F4A7C15, j taken by
 * rejection sampling (draw x; limit = 2^64 - (2^64 mod (i+1)); redraw while x >= limit; j = x mod
 * (i+1)). Without shuffle the order is 0..n-1. The cursor (seed, epoch, position, n) is all the
 * state: restoring it continues the exact same sequence.
 */
#ifndef GRPO_DATASET_H
#define GRPO_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "grpo/reward.h" /* grpo_message, grpo_field, grpo_error */

typedef struct grpo_example {
    const char *prompt;           /* the prompt text when "prompt" was a string, else NULL */
    const grpo_message *messages; /* [n_messages] when the prompt is messages, else NULL */
    uint32_t n_messages;
    const char *response;     /* reference response ("conversations" last assistant turn) or NULL */
    const grpo_field *fields; /* [n_fields] the other keys, value as JSON text */
    uint32_t n_fields;
    uint64_t line; /* 1-based line in the file */
} grpo_example;

typedef struct grpo_dataset {
    char *path;
    grpo_example *examples; /* [n] */
    size_t n;
    size_t n_skipped;                 /* bad lines skipped (skip_bad_lines) */
    char first_skip[600];             /* the message of the first skipped line, "" when none */
    struct grpo_dataset_store *store; /* owns every string and array above */
} grpo_dataset;

typedef struct grpo_dataset_options {
    int skip_bad_lines; /* 0 (default): the first bad line fails the load; 1: skip and count */
    const char *prompt_field; /* the key holding the prompt; NULL = "prompt" */
} grpo_dataset_options;

/* Loads a JSONL file. opt may be NULL (defaults). On success *out is owned by the caller
 * (grpo_dataset_free). Errors: GRPO_ERR_IO (cannot read), GRPO_ERR_INVALID (a bad line in fail
 * mode, or no example at all), with err naming path:line and what was expected. */
int grpo_dataset_load(const char *path, const grpo_dataset_options *opt, grpo_dataset **out,
                      grpo_error *err);
void grpo_dataset_free(grpo_dataset *ds);

/* Renders messages to prompt text (e.g. through a chat template with add_generation_prompt).
 * *out is malloc'ed by the callback and freed by the caller. */
typedef int (*grpo_render_fn)(void *user, const grpo_message *messages, size_t n, char **out,
                              grpo_error *err);
/* Tokenizes text; *ids is malloc'ed by the callback ([*n] token ids), freed by the caller. */
typedef int (*grpo_tokenize_fn)(void *user, const char *text, int32_t **ids, size_t *n,
                                grpo_error *err);

/* The prompt text of an example: the string as is, or render(messages). *out is malloc'ed. */
int grpo_example_prompt_text(const grpo_example *ex, grpo_render_fn render, void *render_user,
                             char **out, grpo_error *err);

/* What to do with a prompt longer than the limit. */
typedef enum grpo_prompt_policy {
    GRPO_PROMPT_TRUNCATE_LEFT = 0, /* keep the last max_len ids (MiniMind's choice) */
    GRPO_PROMPT_SKIP = 1,          /* drop the example */
} grpo_prompt_policy;

/* Text, then ids, then the policy, for one example. On GRPO_OK *keep says whether to use it; when
 * kept, *text and *ids (both malloc'ed) are the caller's; when skipped they are NULL. */
int grpo_example_prepare(const grpo_example *ex, grpo_render_fn render, void *render_user,
                         grpo_tokenize_fn tokenize, void *tok_user, size_t max_len,
                         grpo_prompt_policy policy, char **text, int32_t **ids, size_t *n_ids,
                         int *keep, grpo_error *err);

/* ---- deterministic order ------------------------------------------------------------------- */

typedef struct grpo_data_cursor {
    uint64_t seed;
    uint64_t epoch;    /* 0-based */
    uint64_t position; /* examples already taken in this epoch */
    uint64_t n;        /* dataset size the cursor belongs to */
} grpo_data_cursor;

typedef struct grpo_data_order {
    grpo_data_cursor cur;
    int shuffle;
    size_t *perm; /* [n] this epoch's order */
} grpo_data_order;

/* Starts at epoch 0, position 0. n must be > 0. */
int grpo_data_order_init(grpo_data_order *o, size_t n, uint64_t seed, int shuffle, grpo_error *err);
/* Continues from a saved cursor; fails when cur.n != n (the dataset changed) or position > n. */
int grpo_data_order_restore(grpo_data_order *o, size_t n, grpo_data_cursor cur, int shuffle,
                            grpo_error *err);
/* The next example index; moves to the next epoch (new permutation) after the last one. */
size_t grpo_data_order_next(grpo_data_order *o);
void grpo_data_order_free(grpo_data_order *o);

/* "seed=S epoch=E position=P n=N" and back (for checkpoints). */
void grpo_data_cursor_format(const grpo_data_cursor *c, char *buf, size_t size);
int grpo_data_cursor_parse(const char *text, grpo_data_cursor *c, grpo_error *err);

#endif
