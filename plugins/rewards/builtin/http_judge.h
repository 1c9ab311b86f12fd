/*
 * http_judge.h — the judge mode of builtin.http: an OpenAI-compatible chat-completions request
 * per sample, its prompt filled from a template, and the score read out of the judge's reply.
 *
 * Template (the `template` lines joined with newlines): {prompt} is the prompt (the last user
 * message when the row is a conversation, else the prompt text as the policy saw it),
 * {completion} the completion, {NAME} the row's field NAME (a JSON string as its text, any other
 * value as its JSON); {{ and }} are literal braces. A placeholder naming a field the row lacks
 * makes that sample NaN (no request is sent).
 *
 * Request: {"model": model, "messages": [{"role": "user", "content": FILLED}],
 *           "temperature": temperature[, "max_tokens": max_tokens]}.
 * Reply: choices[0].message.content; the score is the first capture group of score_regex (the
 * whole match when it has none) or, when score_json is set, that field of the JSON object in the
 * content (a number or a numeric string). A score in [score_min, score_max] maps linearly to
 * [0, 1] (normalize = true) or is kept as is; one outside the range, or none, is NaN.
 */
#ifndef GRPO_BUILTIN_HTTP_JUDGE_H
#define GRPO_BUILTIN_HTTP_JUDGE_H

#include <stddef.h>

#include "builtin.h"
#include "pattern.h"

typedef struct http_judge {
    char *template;      /* the lines joined with '\n' */
    char *model;
    char *score_json;    /* NULL: score_regex */
    pcre2_code *regex;
    pcre2_match_data *match;
    pcre2_match_context *limits;
    double lo, hi, temperature;
    int32_t max_tokens;  /* 0: not sent */
    int32_t normalize;
} http_judge;

/* Reads the judge keys of cfg (template, model, score_regex, score_json, score_min, score_max,
 * normalize, temperature, max_tokens); a malformed template or pattern is an error naming it. */
int32_t http_judge_create(http_judge *j, const grpo_config *cfg, grpo_error *err);
void http_judge_free(http_judge *j);
/* The request body for sample x (malloc'd, *len bytes), or NULL with why set. */
char *http_judge_request(const http_judge *j, const grpo_sample *x, size_t *len, char *why,
                         size_t why_size);
/* Whether reply is a chat completion: 1 and *content set (borrowed from *doc, which the caller
 * frees with cJSON_Delete), or 0 with why set. */
int http_judge_content(const char *reply, void **doc, const char **content, char *why,
                       size_t why_size);
/* The reward in content: the score mapped as above, or NaN with why set. */
float http_judge_score(const http_judge *j, const char *content, char *why, size_t why_size);

#endif
