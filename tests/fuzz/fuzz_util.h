/*
 * fuzz_util.h — shared by the libFuzzer targets in tests/fuzz: hands an input to an entry point
 * that only takes a path by writing it to a file in this process's own temporary directory
 * (several names may be written there; the whole directory goes at exit). Include once per
 * target.
 */
#ifndef GRPO_FUZZ_UTIL_H
#define GRPO_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/files.h"   /* grpo_remove_tree */
#include "grpo/plugin.h" /* grpo_error */

static char fuzz_dir_path[256], fuzz_file_path[512];

/* At a normal exit (libFuzzer's end of -max_total_time): leave nothing behind. */
static void fuzz_cleanup(void) {
    grpo_remove_tree(fuzz_dir_path);
}

/* A directory of our own, made on first use (in /dev/shm when there is one: memory, not disk). */
static inline const char *fuzz_dir(void) {
    if (!fuzz_dir_path[0]) {
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/grpo-fuzz-XXXXXX", base);
        if (!mkdtemp(fuzz_dir_path)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(fuzz_cleanup);
    }
    return fuzz_dir_path;
}

/* Writes data[0..size) to <fuzz dir>/name and returns that path (a static buffer, overwritten
 * by the next call). The file is rewritten for each input. */
static inline const char *fuzz_write(const char *name, const uint8_t *data, size_t size) {
    char *path = fuzz_file_path;
    snprintf(path, sizeof fuzz_file_path, "%s/%s", fuzz_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(path);
        abort();
    }
    return path;
}

/* A NUL-terminated copy of the input, for entry points that take text. */
static inline char *fuzz_text(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) abort();
    memcpy(s, data, size);
    s[size] = 0;
    return s;
}

static inline grpo_error fuzz_error(void) {
    grpo_error err;
    memset(&err, 0, sizeof err);
    err.struct_size = sizeof err;
    return err;
}

#endif
