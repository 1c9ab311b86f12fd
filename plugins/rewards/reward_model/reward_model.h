/*
 * reward_model.h — the reward_model pack (reward_model.score): shared state and the pieces of
 * the scorer. Private to the pack; it reaches the model only through the host's 1.1 model
 * services (grpo/plugin.h: model_load, model_hidden, model_tensor, model_encode, model_render).
 *
 * Dimension letters: B texts per forward pass, T their longest length in tokens, C hidden size,
 * K labels (rows of the head).
 */
#ifndef REWARD_MODEL_H
#define REWARD_MODEL_H

#include <stdlib.h>

#include "grpo/reward.h"

#define RM_SEQCLS 0   /* *ForSequenceClassification: score.weight at the last non-pad token */
#define RM_INTERNLM2 1 /* InternLM2ForRewardModel: v_head.weight at the appended reward token */

typedef struct rm_state {
    const grpo_host *host;
    struct grpo_host_model *model;
    char *name;          /* the section, "reward.NAME", for messages */
    /* options (pack.ini) */
    int32_t minimind;      /* text = minimind (the index of the choice full | minimind) */
    double answer_weight;  /* weight of the <answer> score in the blend */
    double scale, shift, clip;
    int32_t label, batch_size, max_length, add_special;
    /* the model */
    int32_t kind;          /* RM_* */
    int32_t C, K;
    float *head;           /* (K,C) score.weight or v_head.weight */
    int32_t pad_id;        /* config.json pad_token_id, -1 when none (score the last token) */
    int32_t reward_token;  /* RM_INTERNLM2 */
    int32_t warned_truncation;
} rm_state;

/* One text to score: ids (n) owned, and the column whose hidden state is scored. */
typedef struct rm_text {
    int32_t *ids;
    int32_t n;
    int32_t at;
} rm_text;

/* rm_text.c: the ids the reward model scores for a sample with `assistant` as the reply: the
 * prompt's messages (or, for a plain-text prompt, its ChatML turns as MiniMind parses them, else
 * one user message) + {assistant, reply}, rendered with the model's own chat template, tokenized
 * with its own tokenizer, cut to max_length (keeping the last tokens), plus the reward token for
 * InternLM2; at is set by the pooling rule. n = 0 (ids NULL) when nothing is left to score. */
int32_t rm_text_build(rm_state *s, const grpo_sample *sample, const char *reply, rm_text *out,
                      grpo_error *err);
/* The content of the first <answer>...</answer> of completion with surrounding ASCII whitespace
 * stripped (Python re.search(r"<answer>(.*?)</answer>", re.S).group(1).strip()), malloc'd, or
 * NULL when there is none. */
char *rm_answer_content(const char *completion);
/* ChatML turns of text (MiniMind's <|im_start|>(system|user|assistant)\s+(.*?)<|im_end|>),
 * contents stripped; *msgs / *contents malloc'd (free both, contents[i] too). Returns the count. */
uint32_t rm_chatml_turns(const char *text, grpo_message **msgs, char ***contents);

/* rm_score.c: raw (n) = head[label] . hidden at texts[i].at, in batches of batch_size; NaN for
 * an empty text. */
int32_t rm_score_texts(rm_state *s, const rm_text *texts, uint32_t n, double *raw,
                       grpo_error *err);

#endif
