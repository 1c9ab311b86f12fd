/*
 * exec_path.h — where builtin.exec finds its program (the rule sdk/EXEC_PROTOCOL.md documents).
 * Plain libc, no grpo headers, so tests/test_rewards_exec.c can check the rule directly.
 */
#ifndef GRPO_BUILTIN_EXEC_PATH_H
#define GRPO_BUILTIN_EXEC_PATH_H

#include <stddef.h>

/* Resolves the program named in the run file to the absolute path of an executable regular file:
 * - a name with a '/' is a path: absolute as written, else relative to base_dir (the run file's
 *   directory, like every other path of a run file; NULL = the current directory);
 * - a bare name ("python3") is looked up on PATH, as a shell does.
 * Returns a malloc'd path, or NULL with why set to the cause, e.g. "not found on PATH",
 * "No such file or directory", "is not executable". */
char *builtin_exec_resolve(const char *prog, const char *base_dir, char *why, size_t why_size);

#endif
