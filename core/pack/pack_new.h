/*
 * pack_new.h — `grpo pack new NAME`: a reward pack skeleton that builds out of tree against an
 * installed SDK and passes `grpo plugins check` as written:
 *   DIR/CMakeLists.txt   find_package(grpo-sdk) + grpo_add_pack
 *   DIR/pack.ini         [pack], one reward NAME.keyword with one key and two self-tests
 *   DIR/NAME.c           the reward (1 when the completion contains the keyword, else 0)
 *   DIR/README.md        how to build, check, bundle and install it
 */
#ifndef GRPO_PACK_NEW_H
#define GRPO_PACK_NEW_H

#include "grpo/plugin.h"

#include <stddef.h>

/* Writes the skeleton of pack name into dir (NULL: ./NAME), which must not exist yet or be
 * empty; the dir written goes to written. name: letters, digits, '_' or '-'. */
int grpo_pack_new(const char *name, const char *dir, char *written, size_t size,
                  grpo_error *err);

#endif
