/* checkpoint.c — build in a temporary directory, fsync, rename (checkpoint-best: swap), prune. */
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
#include "train/testing.h"

#define CKPT_PREFIX "checkpoint-"
#define BEST_LABEL "best" /* ROOT/checkpoint-best */

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

/* Opens ROOT/checkpoint-LABEL under ROOT/.checkpoint-LABEL.tmp (LABEL: the step, or "best"). */
static int begin_named(grpo_ckpt *c, const char *root, long step, int best, grpo_error *err) {
    char label[32];
    memset(c, 0, sizeof *c);
    c->step = step, c->best = best;
    snprintf(label, sizeof label, best ? BEST_LABEL : "%08ld", step);
    size_t n_root = (size_t)snprintf(c->root, sizeof c->root, "%s", root);
    size_t n_tmp = (size_t)snprintf(c->tmp, sizeof c->tmp, "%s/.%s%s.tmp", root, CKPT_PREFIX, label);
    size_t n_final = (size_t)snprintf(c->final, sizeof c->final, "%s/%s%s", root, CKPT_PREFIX, label);
    if (n_root >= sizeof c->root || n_tmp >= sizeof c->tmp || n_final >= sizeof c->final)
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

int grpo_ckpt_begin(grpo_ckpt *c, const char *root, long step, grpo_error *err) {
    return begin_named(c, root, step, 0, err);
}

int grpo_ckpt_begin_best(grpo_ckpt *c, const char *root, long step, grpo_error *err) {
    return begin_named(c, root, step, 1, err);
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
/* dir/trainer_state.json parsed (NULL when it cannot be read or parsed). */
static cJSON *state_json(const char *dir) {
    char path[8300], *text = NULL;
    grpo_error ignored;
    snprintf(path, sizeof path, "%s/trainer_state.json", dir);
    if (grpo_read_file(path, &text, NULL, &ignored) != GRPO_OK) return NULL;
    cJSON *j = cJSON_Parse(text);
    free(text);
    return j;
}

/* 1 when the parsed trainer_state.json j carries run_id as its "run_id" (this run wrote it). */
static int json_mark(const cJSON *j, const char *run_id) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "run_id");
    return run_id[0] && cJSON_IsString(id) && strcmp(id->valuestring, run_id) == 0;
}

/* 1 when dir/trainer_state.json carries run_id as its "run_id" (this run wrote it). */
static int carries_mark(const char *dir, const char *run_id) {
    cJSON *j = run_id[0] ? state_json(dir) : NULL;
    int mine = json_mark(j, run_id);
    cJSON_Delete(j);
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

/* ROOT/.checkpoint-best.old: where the two-rename swap parks the old best. */
static void best_old_path(const char *root, char *out, size_t size) {
    snprintf(out, size, "%s/.%s%s.old", root, CKPT_PREFIX, BEST_LABEL);
}

static int no_exchange; /* tests: the two-rename swap, as on a filesystem without the exchange */

void grpo_ckpt_no_exchange(int on) { no_exchange = on; }

/* checkpoint-best replaced by the new one in c->tmp, never leaving none (see checkpoint.h). */
static int swap_best(grpo_ckpt *c) {
    char old[4200];
    struct stat sb;
    if (lstat(c->final, &sb) != 0) /* the first best: nothing to keep meanwhile */
        return rename(c->tmp, c->final) == 0 ? GRPO_OK : errno;
    int e = no_exchange ? EINVAL
            : renameat2(AT_FDCWD, c->tmp, AT_FDCWD, c->final, RENAME_EXCHANGE) == 0 ? 0
                                                                                   : errno;
    if (e == 0) {
        grpo_fsync_path(c->root, O_RDONLY | O_DIRECTORY);
        grpo_remove_tree(c->tmp); /* the old best, now under the temporary name */
        return GRPO_OK;
    }
    if (e != EINVAL && e != ENOSYS) return e; /* (a filesystem without the exchange: EINVAL) */
    best_old_path(c->root, old, sizeof old);
    grpo_remove_tree(old);
    if (rename(c->final, old) != 0) return errno;
    if (rename(c->tmp, c->final) != 0) {
        int e = errno;
        rename(old, c->final); /* the old best back in place */
        return e;
    }
    grpo_fsync_path(c->root, O_RDONLY | O_DIRECTORY);
    grpo_remove_tree(old);
    return GRPO_OK;
}

/* A two-rename swap a crash interrupted (see checkpoint.h): the old best back in place when no
 * new one made it there, else the old one removed. */
static int restore_best(const char *root, grpo_error *err) {
    char best[4200], old[4200];
    struct stat sb;
    snprintf(best, sizeof best, "%s/%s%s", root, CKPT_PREFIX, BEST_LABEL);
    best_old_path(root, old, sizeof old);
    int rc = refuse_link(best, err);
    if (rc == GRPO_OK) rc = refuse_link(old, err);
    if (rc != GRPO_OK || lstat(old, &sb) != 0) return rc;
    if (lstat(best, &sb) == 0) { /* the swap finished but for the removal */
        grpo_remove_tree(old);
        return GRPO_OK;
    }
    if (rename(old, best) != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot put the previous best back at %s: %s",
                              old, best, strerror(errno));
    fprintf(stderr, "warning: %s: a swap of checkpoint-best was interrupted; the previous best "
                    "is back in place\n", best);
    return GRPO_OK;
}

int grpo_ckpt_commit(grpo_ckpt *c, int keep, grpo_error *err) {
    if (grpo_fsync_path(c->tmp, O_RDONLY | O_DIRECTORY) != 0) {
        grpo_error_set(err, GRPO_ERR_IO, "%s: fsync failed: %s", c->tmp, strerror(errno));
        grpo_ckpt_abort(c);
        return GRPO_ERR_IO;
    }
    if (c->best) {
        int e = swap_best(c);
        if (e) {
            grpo_error_set(err, GRPO_ERR_IO, "%s: cannot replace %s: %s", c->tmp, c->final,
                           strerror(e));
            grpo_ckpt_abort(c);
            return GRPO_ERR_IO;
        }
        grpo_fsync_path(c->root, O_RDONLY | O_DIRECTORY);
        return GRPO_OK;
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
    return n < 0 ? n : restore_best(root, err);
}

int grpo_ckpt_best_dir(const char *root, char *out, size_t size) {
    return (size_t)snprintf(out, size, "%s/%s%s", root, CKPT_PREFIX, BEST_LABEL) < size
               ? GRPO_OK
               : GRPO_ERR_INVALID;
}

int grpo_ckpt_best_read(const char *root, const char *run_id, long *step, int *mine) {
    char dir[4200];
    struct stat sb;
    *step = -1, *mine = 0;
    if (grpo_ckpt_best_dir(root, dir, sizeof dir) != GRPO_OK || lstat(dir, &sb) != 0) return 0;
    cJSON *j = state_json(dir);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "step");
    if (cJSON_IsNumber(s) && s->valuedouble >= 0 && s->valuedouble < 9e15)
        *step = (long)s->valuedouble;
    *mine = json_mark(j, run_id);
    cJSON_Delete(j);
    return 1;
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
