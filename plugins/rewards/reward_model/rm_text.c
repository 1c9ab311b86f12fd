/*
 * rm_text.c — what a reward model reads: sample -> messages -> its chat template -> its
 * tokenizer -> ids, and which token's hidden state is the score.
 *
 * Messages: the prompt's messages when the dataset gave a list; for a plain-text prompt, the
 * ChatML turns found in it (MiniMind re-parses its rendered prompts this way), or else the whole
 * prompt as one user message. The reply is appended as {"role": "assistant"} and the list is
 * rendered with add_generation_prompt = false, as transformers' apply_chat_template(tokenize=
 * False) does for MiniMind's reward_model.get_score and TRL's reward scoring.
 *
 * Pooling (which column is scored):
 *   *ForSequenceClassification  transformers' rule: the rightmost token that is not config.json's
 *                               pad_token_id (0 when every token is pad); with no pad_token_id
 *                               the last token. So when pad == eos and the text ends with eos,
 *                               the token before the trailing eos run is scored, as transformers
 *                               does.
 *   InternLM2ForRewardModel     the reward token, appended after the text's ids (get_score).
 * Texts longer than max_length keep their LAST tokens (the reply's end is what is scored).
 */
#include <ctype.h>
#include <string.h>

#include "reward_model.h"

char *rm_answer_content(const char *completion) {
    const char *b = strstr(completion, "<answer>");
    if (!b) return NULL;
    b += strlen("<answer>");
    const char *e = strstr(b, "</answer>");
    if (!e) return NULL;
    while (b < e && isspace((unsigned char)*b)) b++;
    while (e > b && isspace((unsigned char)e[-1])) e--;
    char *out = malloc((size_t)(e - b) + 1);
    if (!out) return NULL;
    memcpy(out, b, (size_t)(e - b));
    out[e - b] = '\0';
    return out;
}

/* Copy of [b,e) with ASCII whitespace stripped. */
static char *stripped(const char *b, const char *e) {
    while (b < e && isspace((unsigned char)*b)) b++;
    while (e > b && isspace((unsigned char)e[-1])) e--;
    char *s = malloc((size_t)(e - b) + 1);
    if (s) memcpy(s, b, (size_t)(e - b)), s[e - b] = '\0';
    return s;
}

uint32_t rm_chatml_turns(const char *text, grpo_message **msgs, char ***contents) {
    static const char *const roles[] = {"system", "user", "assistant"};
    const char *start = "<|im_start|>", *end = "<|im_end|>";
    uint32_t n = 0, cap = 0;
    *msgs = NULL, *contents = NULL;
    for (const char *p = strstr(text, start); p; p = strstr(p, start)) {
        const char *r = p + strlen(start), *role = NULL;
        p = r;
        for (size_t k = 0; k < 3 && !role; k++)
            if (!strncmp(r, roles[k], strlen(roles[k])) &&
                isspace((unsigned char)r[strlen(roles[k])]))
                role = roles[k];
        const char *c = role ? r + strlen(role) : NULL, *e = c ? strstr(c, end) : NULL;
        if (!e) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 4;
            grpo_message *m = realloc(*msgs, cap * sizeof *m);
            char **t = realloc(*contents, cap * sizeof *t);
            if (m) *msgs = m;
            if (t) *contents = t;
            if (!m || !t) break;
        }
        char *content = stripped(c, e);
        if (!content) break;
        (*contents)[n] = content;
        (*msgs)[n] = (grpo_message){sizeof(grpo_message), role, content};
        n++;
        p = e + strlen(end);
    }
    return n;
}

/* text (malloc'd) = the template rendering of the sample's messages + {assistant, reply}. */
static int32_t render(rm_state *s, const grpo_sample *sample, const char *reply, char **text,
                      grpo_error *err) {
    grpo_message *parsed = NULL;
    char **contents = NULL;
    uint32_t np = 0, n;
    const grpo_message *prompt = sample->messages;
    grpo_message user = {sizeof(grpo_message), "user", sample->prompt ? sample->prompt : ""};
    if (prompt) {
        n = sample->n_messages;
    } else {
        np = rm_chatml_turns(user.content, &parsed, &contents);
        prompt = np ? parsed : &user;
        n = np ? np : (*user.content ? 1 : 0);
    }
    grpo_message *all = malloc(((size_t)n + 1) * sizeof *all);
    int32_t rc = GRPO_OK, len = 0;
    *text = NULL;
    if (!all) rc = grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", s->name);
    if (rc == GRPO_OK) {
        if (n) memcpy(all, prompt, (size_t)n * sizeof *all);
        all[n] = (grpo_message){sizeof(grpo_message), "assistant", reply};
        len = s->host->model_render(s->model, all, n + 1, 0, NULL, 0, err);
        rc = len < 0 ? len : GRPO_OK;
    }
    if (rc == GRPO_OK && !(*text = malloc((size_t)len + 1)))
        rc = grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", s->name);
    if (rc == GRPO_OK) {
        int32_t again = s->host->model_render(s->model, all, n + 1, 0, *text, len + 1, err);
        rc = again < 0 ? again : GRPO_OK;
    }
    for (uint32_t i = 0; i < np; i++) free(contents[i]);
    free(contents), free(parsed), free(all);
    if (rc != GRPO_OK) free(*text), *text = NULL;
    return rc;
}

/* The scored column of ids (n) under the pooling rule. */
static int32_t pool_at(const rm_state *s, const int32_t *ids, int32_t n) {
    if (s->kind == RM_INTERNLM2 || s->pad_id < 0) return n - 1;
    for (int32_t t = n - 1; t > 0; t--)
        if (ids[t] != s->pad_id) return t;
    return 0;
}

int32_t rm_text_build(rm_state *s, const grpo_sample *sample, const char *reply, rm_text *out,
                      grpo_error *err) {
    *out = (rm_text){NULL, 0, 0};
    char *text = NULL;
    int32_t rc = render(s, sample, reply, &text, err);
    int32_t n = rc == GRPO_OK ? s->host->model_encode(s->model, text, s->add_special, NULL, 0, err)
                              : rc;
    if (n < 0) {
        free(text);
        return n;
    }
    int32_t extra = s->kind == RM_INTERNLM2, *ids = malloc(((size_t)n + 1) * sizeof *ids);
    if (!ids) {
        free(text);
        return grpo_error_set(err, GRPO_ERR_NOMEM, "[%s] out of memory", s->name);
    }
    rc = s->host->model_encode(s->model, text, s->add_special, ids, n, err);
    free(text);
    if (rc < 0) return free(ids), rc;
    int32_t keep = s->max_length > 0 && n + extra > s->max_length ? s->max_length - extra : n;
    if (keep < n) {
        if (!s->warned_truncation++)
            s->host->log(GRPO_LOG_WARN, s->name, "a text of %d tokens is cut to its last %d "
                         "(max_length %d); further cuts are not reported", n + extra,
                         keep + extra, s->max_length);
        memmove(ids, ids + (n - keep), (size_t)keep * sizeof *ids);
    }
    if (extra) ids[keep] = s->reward_token;
    out->ids = ids, out->n = keep + extra;
    if (out->n == 0) return free(ids), out->ids = NULL, GRPO_OK;
    out->at = pool_at(s, ids, out->n);
    return GRPO_OK;
}
