/* checkpoint.c — build in a temporary directory, fsync, rename, prune. */
#include "train/checkpoint.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"

#define CKPT_PREFIX "checkpoint-"

/* Refuses an entry of the checkpoint directory that is a symbolic link. */
static int refuse_link(const char *path, grpo_error *err) {
    struct stat sb;
    if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode))
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s is a symbolic link: grpo never follows links inside "
                              "checkpoint.dir (remove it, or move the real checkpoint there)",
                              path);
    return GRPO_OK;
}

int grpo_ckpt_begin(grpo_ckpt *c, const char *root, long step, grpo_error *err) {
    memset(c, 0, sizeof *c);
    c->step = step;
    if ((size_t)snprintf(c->root, sizeof c->root, "%s", root) >= sizeof c->root ||
        (size_t)snprintf(c->tmp, sizeof c->tmp, "%s/.%s%08ld.tmp", root, CKPT_PREFIX, step) >= sizeof c->tmp ||
        (size_t)snprintf(c->final, sizeof c->final, "%s/%s%08ld", root, CKPT_PREFIX, step) >= sizeof c->final)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: checkpoint path too long", root);
    int rc = grpo_ckpt_prepare(root, err);
    if (rc == GRPO_OK) rc = refuse_link(c->tmp, err);
    if (rc == GRPO_OK) rc = refuse_link(c->final, err);
    if (rc != GRPO_OK) return rc;
    grpo_remove_tree(c->tmp); /* left over from a run killed while saving */
    if (mkdir(c->tmp, 0777) != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot create: %s", c->tmp, strerror(errno));
    return GRPO_OK;
}

int grpo_ckpt_path(const grpo_ckpt *c, const char *name, char *out, size_t size) {
    return grpo_path_join(out, size, c->tmp, name, NULL);
}

int grpo_ckpt_write(grpo_ckpt *c, const char *name, const void *data, size_t len, grpo_error *err) {
    char path[8192];
    grpo_ckpt_path(c, name, path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    int e = grpo_write_all(fd, data, len);
    if (e) {
        close(fd);
        return grpo_error_set(err, GRPO_ERR_IO, "%s: write failed: %s", path, strerror(e));
    }
    int rc = fsync(fd);
    e = errno;
    if (close(fd) != 0 || rc != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: fsync failed: %s", path, strerror(e));
    return GRPO_OK;
}

int grpo_ckpt_sync_file(grpo_ckpt *c, const char *name, grpo_error *err) {
    char path[8192];
    grpo_ckpt_path(c, name, path, sizeof path);
    if (grpo_fsync_path(path, O_RDONLY) != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: fsync failed: %s", path, strerror(errno));
    return GRPO_OK;
}

static int step_of(const char *name, long *step) {
    size_t n = strlen(CKPT_PREFIX);
    char *end;
    if (strncmp(name, CKPT_PREFIX, n) || name[n] < '0' || name[n] > '9') return 0;
    errno = 0;
    *step = strtol(name + n, &end, 10);
    return *end == 0 && errno != ERANGE;
}

/* ".checkpoint-STEP.tmp": a save in progress, or left by a run killed while saving. */
static int is_temp(const char *name) {
    size_t n = strlen(name), k = strlen("." CKPT_PREFIX);
    return n > k + 4 && !strncmp(name, "." CKPT_PREFIX, k) && !strcmp(name + n - 4, ".tmp");
}

static int cmp_long_desc(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x < y) - (x > y);
}

int grpo_ckpt_list(const char *root, long **steps, grpo_error *err) {
    *steps = NULL;
    DIR *d = opendir(root);
    if (!d) {
        if (errno == ENOENT) return 0;
        return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot read checkpoint directory: %s", root,
                              strerror(errno));
    }
    int n = 0, cap = 0, rc = GRPO_OK;
    struct dirent *e;
    long s;
    char path[8192];
    while (rc == GRPO_OK && (e = readdir(d))) {
        int done = step_of(e->d_name, &s), temp = !done && is_temp(e->d_name);
        if (!done && !temp) continue;
        grpo_path_join(path, sizeof path, root, e->d_name, NULL); /* too long: lstat finds no link */
        if ((rc = refuse_link(path, err)) != GRPO_OK || temp) continue;
        if (n == cap) {
            long *p = realloc(*steps, (size_t)(cap = cap ? 2 * cap : 16) * sizeof **steps);
            if (!p) {
                rc = grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", root);
                break;
            }
            *steps = p;
        }
        (*steps)[n++] = s;
    }
    closedir(d);
    if (rc != GRPO_OK) {
        free(*steps), *steps = NULL;
        return rc;
    }
    if (n) qsort(*steps, (size_t)n, sizeof **steps, cmp_long_desc);
    return n;
}

/* Keeps the newest keep checkpoints of steps <= step (the one just committed). Newer ones can
 * only be left from a trajectory resumed at an earlier point (a corrupt checkpoint skipped by
 * --resume): they are never counted or removed here, and a save of the same step replaces them. */
/* 1 when dir/trainer_state.json carries run_id as its "run_id" (this run wrote it). */
static int carries_mark(const char *dir, const char *run_id) {
    char path[8300], *text = NULL;
    grpo_error ignored;
    snprintf(path, sizeof path, "%s/trainer_state.json", dir);
    if (!run_id[0] || grpo_read_file(path, &text, NULL, &ignored) != GRPO_OK) return 0;
    cJSON *j = cJSON_Parse(text);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "run_id");
    int mine = cJSON_IsString(id) && strcmp(id->valuestring, run_id) == 0;
    cJSON_Delete(j);
    free(text);
    return mine;
}

/* Only checkpoints carrying run_id count and are removed: a directory of that name another run
 * (or a person) left is never deleted, and a warning names it once per process. */
static void prune(const char *root, long step, int keep, const char *run_id) {
    static int warned;
    long *steps = NULL;
    grpo_error ignored;
    int n = grpo_ckpt_list(root, &steps, &ignored);
    char dir[8192];
    for (int i = 0, kept = 0; keep > 0 && i < n; i++) {
        if (steps[i] > step) continue;
        snprintf(dir, sizeof dir, "%s/%s%08ld", root, CKPT_PREFIX, steps[i]);
        if (!carries_mark(dir, run_id)) {
            if (!warned++)
                fprintf(stderr, "warning: checkpoint.keep: %s was not written by this run (its "
                                "trainer_state.json lacks this run's run_id): never pruned\n",
                        dir);
            continue;
        }
        if (kept++ < keep) continue;
        if (grpo_remove_tree(dir) != 0)
            fprintf(stderr, "warning: checkpoint.keep: could not remove %s: %s\n", dir,
                    strerror(errno));
    }
    free(steps);
}

int grpo_ckpt_commit(grpo_ckpt *c, int keep, grpo_error *err) {
    if (grpo_fsync_path(c->tmp, O_RDONLY | O_DIRECTORY) != 0) {
        grpo_error_set(err, GRPO_ERR_IO, "%s: fsync failed: %s", c->tmp, strerror(errno));
        grpo_ckpt_abort(c);
        return GRPO_ERR_IO;
    }
    /* a checkpoint of the same step from an earlier attempt (checked not to be a link) */
    if (grpo_remove_tree(c->final) != 0) {
        grpo_error_set(err, GRPO_ERR_IO, "%s: cannot replace: %s", c->final, strerror(errno));
        grpo_ckpt_abort(c);
        return GRPO_ERR_IO;
    }
    if (rename(c->tmp, c->final) != 0) {
        grpo_error_set(err, GRPO_ERR_IO, "%s: cannot rename to %s: %s", c->tmp, c->final, strerror(errno));
        grpo_ckpt_abort(c);
        return GRPO_ERR_IO;
    }
    grpo_fsync_path(c->root, O_RDONLY | O_DIRECTORY);
    prune(c->root, c->step, keep, c->run_id);
    return GRPO_OK;
}

void grpo_ckpt_abort(grpo_ckpt *c) { grpo_remove_tree(c->tmp); }

int grpo_ckpt_prepare(const char *root, grpo_error *err) {
    if (!root || !root[0])
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "checkpoint.dir is empty: expected the directory checkpoints are "
                              "written to");
    if (grpo_mkdirs(root) != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot create checkpoint.dir: %s", root,
                              strerror(errno));
    if (access(root, W_OK | X_OK) != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: checkpoint.dir is not writable: %s", root,
                              strerror(errno));
    long *steps = NULL;
    int n = grpo_ckpt_list(root, &steps, err);
    free(steps);
    return n < 0 ? n : GRPO_OK;
}

int grpo_ckpt_dir(const char *root, long step, char *out, size_t size) {
    return (size_t)snprintf(out, size, "%s/%s%08ld", root, CKPT_PREFIX, step) < size
               ? GRPO_OK
               : GRPO_ERR_INVALID;
}

int grpo_ckpt_latest(const char *root, char *out, size_t size, long *step, grpo_error *err) {
    long *steps = NULL;
    int n = grpo_ckpt_list(root, &steps, err);
    if (n < 0) return n;
    if (n == 0) {
        free(steps);
        return grpo_error_set(err, GRPO_ERR_IO, "%s: no checkpoint to resume from (expected a %sNNNNNNNN directory)",
                              root, CKPT_PREFIX);
    }
    *step = steps[0];
    grpo_ckpt_dir(root, steps[0], out, size);
    free(steps);
    return GRPO_OK;
}
