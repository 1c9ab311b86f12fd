/* checkpoint.c — build in a temporary directory, fsync, rename, prune. */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CKPT_PREFIX "checkpoint-"

static int fsync_path(const char *path, int flags) {
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Removes a directory and the plain files in it (checkpoints have no subdirectories). */
static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[8192];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(dir);
}

int grpo_ckpt_begin(grpo_ckpt *c, const char *root, long step, grpo_error *err) {
    memset(c, 0, sizeof *c);
    c->step = step;
    if ((size_t)snprintf(c->root, sizeof c->root, "%s", root) >= sizeof c->root ||
        (size_t)snprintf(c->tmp, sizeof c->tmp, "%s/.%s%08ld.tmp", root, CKPT_PREFIX, step) >= sizeof c->tmp ||
        (size_t)snprintf(c->final, sizeof c->final, "%s/%s%08ld", root, CKPT_PREFIX, step) >= sizeof c->final)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: checkpoint path too long", root);
    if (mkdir(root, 0777) != 0 && errno != EEXIST)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot create checkpoint directory: %s", root, strerror(errno));
    remove_dir(c->tmp); /* left over from a run killed while saving */
    if (mkdir(c->tmp, 0777) != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot create: %s", c->tmp, strerror(errno));
    return GRPO_OK;
}

int grpo_ckpt_path(const grpo_ckpt *c, const char *name, char *out, size_t size) {
    return (size_t)snprintf(out, size, "%s/%s", c->tmp, name) < size ? GRPO_OK : GRPO_ERR_INVALID;
}

int grpo_ckpt_write(grpo_ckpt *c, const char *name, const void *data, size_t len, grpo_error *err) {
    char path[8192];
    grpo_ckpt_path(c, name, path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = w < 0 ? errno : ENOSPC;
            close(fd);
            return grpo_error_set(err, GRPO_ERR_IO, "%s: write failed: %s", path, strerror(e));
        }
        p += w, len -= (size_t)w;
    }
    int rc = fsync(fd);
    int e = errno;
    if (close(fd) != 0 || rc != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: fsync failed: %s", path, strerror(e));
    return GRPO_OK;
}

int grpo_ckpt_sync_file(grpo_ckpt *c, const char *name, grpo_error *err) {
    char path[8192];
    grpo_ckpt_path(c, name, path, sizeof path);
    if (fsync_path(path, O_RDONLY) != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: fsync failed: %s", path, strerror(errno));
    return GRPO_OK;
}

static int step_of(const char *name, long *step) {
    size_t n = strlen(CKPT_PREFIX);
    char *end;
    if (strncmp(name, CKPT_PREFIX, n) || !name[n]) return 0;
    *step = strtol(name + n, &end, 10);
    return *end == 0;
}

static int cmp_long_desc(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x < y) - (x > y);
}

/* Steps of the complete checkpoints under root, newest first; returns the count (-1: no dir). */
static int list_steps(const char *root, long **steps) {
    DIR *d = opendir(root);
    if (!d) return -1;
    int n = 0, cap = 16;
    *steps = malloc(cap * sizeof **steps);
    struct dirent *e;
    long s;
    while ((e = readdir(d)) && *steps)
        if (step_of(e->d_name, &s)) {
            if (n == cap) *steps = realloc(*steps, (cap *= 2) * sizeof **steps);
            if (*steps) (*steps)[n++] = s;
        }
    closedir(d);
    if (!*steps) return -1;
    qsort(*steps, (size_t)n, sizeof **steps, cmp_long_desc);
    return n;
}

static void prune(const char *root, int keep) {
    long *steps = NULL;
    int n = list_steps(root, &steps);
    char dir[8192];
    for (int i = keep; keep > 0 && i < n; i++) {
        snprintf(dir, sizeof dir, "%s/%s%08ld", root, CKPT_PREFIX, steps[i]);
        remove_dir(dir);
    }
    free(steps);
}

int grpo_ckpt_commit(grpo_ckpt *c, int keep, grpo_error *err) {
    if (fsync_path(c->tmp, O_RDONLY | O_DIRECTORY) != 0) {
        grpo_error_set(err, GRPO_ERR_IO, "%s: fsync failed: %s", c->tmp, strerror(errno));
        grpo_ckpt_abort(c);
        return GRPO_ERR_IO;
    }
    remove_dir(c->final); /* a checkpoint of the same step from an earlier attempt */
    if (rename(c->tmp, c->final) != 0) {
        grpo_error_set(err, GRPO_ERR_IO, "%s: cannot rename to %s: %s", c->tmp, c->final, strerror(errno));
        grpo_ckpt_abort(c);
        return GRPO_ERR_IO;
    }
    fsync_path(c->root, O_RDONLY | O_DIRECTORY);
    prune(c->root, keep);
    return GRPO_OK;
}

void grpo_ckpt_abort(grpo_ckpt *c) { remove_dir(c->tmp); }

int grpo_ckpt_latest(const char *root, char *out, size_t size, long *step, grpo_error *err) {
    long *steps = NULL;
    int n = list_steps(root, &steps);
    if (n <= 0) {
        free(steps);
        return grpo_error_set(err, GRPO_ERR_IO, "%s: no checkpoint to resume from (expected a %sNNNNNNNN directory)",
                              root, CKPT_PREFIX);
    }
    *step = steps[0];
    snprintf(out, size, "%s/%s%08ld", root, CKPT_PREFIX, steps[0]);
    free(steps);
    return GRPO_OK;
}
