/*
 * files.h — the one place for whole-file reads, atomic replacement, mkdir -p, link-safe removal
 * of a directory tree and path joins.
 *
 * Errors: GRPO_OK or a negative GRPO_ERR_* status, with one line in err naming the path and
 * the system's reason (strerror). err may be NULL.
 */
#ifndef GRPO_FILES_H
#define GRPO_FILES_H

#include <stddef.h>
#include <stdio.h>

#include "grpo/plugin.h"

/* Opens path for reading ("rb", close-on-exec) when it is a regular file. Anything else (a FIFO,
 * a device, a directory, a socket) is refused without blocking: open() of a FIFO would wait for
 * a writer for ever. what names the file in the message ("dataset", ...); NULL on failure. */
FILE *grpo_open_regular(const char *path, const char *what, grpo_error *err);

/* GRPO_OK when an output directory out and an input directory in are apart; else an error
 * naming both (out equal to in, inside it, or holding it: writing out would overwrite the
 * input). Both are compared as real paths (links resolved); out need not exist yet. what_out and
 * what_in name them in the message ("OUT", "BASE"). */
int grpo_dirs_apart(const char *out, const char *what_out, const char *in, const char *what_in,
                    grpo_error *err);

/* Reads a whole regular file (grpo_open_regular) into a malloc'd, NUL-terminated buffer *out
 * (caller frees); *len (may be NULL) receives the byte count without the NUL, so a file with NUL
 * bytes keeps its length. */
int grpo_read_file(const char *path, char **out, size_t *len, grpo_error *err);

/* SHA-256 of a regular file (grpo_open_regular; what names it) as 64 lowercase hex digits into
 * hex[65]. */
int grpo_sha256_file(const char *path, const char *what, char hex[65], grpo_error *err);

/* A file being replaced atomically: the bytes go to path.tmp.XXXXXX in the same directory (so
 * rename() is atomic), which grpo_atomic_commit() fsyncs, renames over path and whose directory
 * it fsyncs. After a successful grpo_atomic_open() the caller MUST call grpo_atomic_commit() or
 * grpo_atomic_abort() (commit aborts by itself when it fails); until commit, path is untouched. */
typedef struct grpo_atomic_file {
    const char *path; /* borrowed */
    char *tmp;        /* malloc'd temp name, NULL once committed or aborted */
    int fd;
} grpo_atomic_file;

int grpo_atomic_open(grpo_atomic_file *af, const char *path, grpo_error *err);
/* Appends len bytes; an error says the previous file is kept. */
int grpo_atomic_write(grpo_atomic_file *af, const void *data, size_t len, grpo_error *err);
int grpo_atomic_commit(grpo_atomic_file *af, grpo_error *err);
/* Closes and removes the temp file. Safe to call twice. */
void grpo_atomic_abort(grpo_atomic_file *af);

/* Replaces path with the len bytes at data atomically (temp file in the same directory, fsync,
 * rename, fsync of the directory). On failure the previous file is intact and the temp removed. */
int grpo_write_file_atomic(const char *path, const void *data, size_t len, grpo_error *err);

/* Writes all len bytes to fd, retrying short writes and EINTR. Returns 0, or the errno of the
 * failure (ENOSPC when the system accepts no more bytes). */
int grpo_write_all(int fd, const void *data, size_t len);

/* Opens path with flags (O_RDONLY, or O_RDONLY | O_DIRECTORY) and fsyncs it. Returns 0, or -1
 * with errno set. */
int grpo_fsync_path(const char *path, int flags);

/* mkdir -p: creates path and its missing parents. Returns 0, or -1 with errno set (ENOTDIR or
 * EEXIST when a file is in the way, ENAMETOOLONG). */
int grpo_mkdirs(const char *path);

/* rm -rf that never follows a symbolic link: path and, when it is a directory, everything under
 * it. Each directory is opened O_NOFOLLOW and its entries are removed through that descriptor
 * (openat / unlinkat), so a link, path itself or any entry, is unlinked and never traversed:
 * nothing outside the tree is touched, even when a link is planted in it. Goes on past a failure
 * to remove what it can (one descriptor per level of depth is held). Returns 0 when path is gone
 * (or never was), -1 with errno set to the first failure's otherwise. */
int grpo_remove_tree(const char *path);

/* Writes "DIR/NAME" into out (cap bytes). A result that does not fit is an error naming dir
 * ("DIR: path too long"); out then holds a truncated string. */
int grpo_path_join(char *out, size_t cap, const char *dir, const char *name, grpo_error *err);

/* The path name means when written in the file at path file: name itself when absolute or when
 * file has no directory part, else file's directory joined with name. malloc'd (caller frees);
 * NULL when out of memory. */
char *grpo_path_beside(const char *file, const char *name);

#endif
