/*
 * tok_vec.c — the growable vectors the tokenizer returns: freeing them (public, tokenizer.h) and
 * appending ids.
 */
#include "text/tokenizer/tok_vec.h"

#include <stdlib.h>
#include <string.h>

void grpo_tok_ids_free(grpo_tok_ids *ids) {
    free(ids->data);
    memset(ids, 0, sizeof *ids);
}

void grpo_tok_text_free(grpo_tok_text *text) {
    free(text->data);
    memset(text, 0, sizeof *text);
}

int tok_ids_push(grpo_tok_ids *ids, int32_t id) {
    if (ids->n == ids->cap) {
        size_t cap = ids->cap ? ids->cap * 2 : 64;
        int32_t *d = realloc(ids->data, cap * sizeof *d);
        if (!d) return -1;
        ids->data = d, ids->cap = cap;
    }
    ids->data[ids->n++] = id;
    return 0;
}
