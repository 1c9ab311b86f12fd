/*
 * text/testing.h — entry points of the text layer that only tests and fuzzers call: white-box
 * checks of a module's inner steps (the module itself calls them). They are not part of the
 * layer's interface: no file of core/ outside text/ includes this header (scripts/check_layers.sh
 * checks it).
 */
#ifndef GRPO_TEXT_TESTING_H
#define GRPO_TEXT_TESTING_H

#include "text/tokenizer/tokenizer.h"

/* ---- tokenizer.c ------------------------------------------------------------------------------- */
/* 1 if id is a special added token, else 0. */
int grpo_tokenizer_is_special(const grpo_tokenizer *tok, int32_t id);

#endif
