/*
 * host.h — the host services table this process hands to plugins (grpo/plugin.h, grpo_host):
 * log, alloc/free, rng, and the 1.1 model services with no model context (host_model.h: a
 * command's environment, env.h, sets one). ops and the tokenizer stay NULL; a run fills its own copy when it has them.
 */
#ifndef GRPO_HOST_H
#define GRPO_HOST_H

#include "grpo/plugin.h"

/* The host services table of this process (log, alloc, rng, ...), ops/tokenizer left NULL. */
const grpo_host *grpo_default_host(void);

/* Hands plugins tok through host (tokenizer, tokenize, detokenize); borrowed, it MUST outlive
 * every plugin call made with host. */
struct grpo_tokenizer;
void grpo_host_set_tokenizer(grpo_host *host, struct grpo_tokenizer *tok);

#endif
