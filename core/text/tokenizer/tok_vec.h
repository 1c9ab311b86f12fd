/*
 * tok_vec.h — the growable id and text vectors of the tokenizer (grpo_tok_ids, grpo_tok_text from
 * tokenizer.h). Layer 0: calls no other tokenizer file.
 */
#ifndef GRPO_TOK_VEC_H
#define GRPO_TOK_VEC_H

#include <stdint.h>

#include "text/tokenizer/tokenizer.h"

/* Appends id, doubling the storage when full. Returns 0 or -1 (nomem). */
int tok_ids_push(grpo_tok_ids *ids, int32_t id);

#endif
