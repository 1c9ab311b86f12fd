/* exec_path.c — resolving builtin.exec's program before it is started (exec_path.h). */
#include "exec_path.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* dir + "/" + name, malloc'd (dir "" = the current directory). */
static char *join(const char *dir, size_t dir_len, const char *name) {
    size_t n = strlen(name);
    char *p = malloc(dir_len + n + 2);
    if (!p) return NULL;
    if (dir_len == 0) return memcpy(p, name, n + 1);
    memcpy(p, dir, dir_len);
    p[dir_len] = '/';
    memcpy(p + dir_len + 1, name, n + 1);
    return p;
}

/* 0 when path is an executable regular file, else -1 with why set. */
static int runnable(const char *path, char *why, size_t why_size) {
    struct stat st;
    if (stat(path, &st) != 0) return snprintf(why, why_size, "%s", strerror(errno)), -1;
    if (!S_ISREG(st.st_mode)) return snprintf(why, why_size, "is not a regular file"), -1;
    if (access(path, X_OK) != 0) return snprintf(why, why_size, "is not executable"), -1;
    return 0;
}

/* The first PATH entry holding an executable `name`, malloc'd; NULL when none. */
static char *search_path(const char *name) {
    const char *path = getenv("PATH");
    if (!path) path = "/bin:/usr/bin"; /* execvp's default */
    for (const char *p = path;; p++) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char *cand = join(len ? p : ".", len ? len : 1, name);
        char ignored[128];
        if (cand && runnable(cand, ignored, sizeof ignored) == 0) return cand;
        free(cand);
        if (!end) return NULL;
        p = end;
    }
}

char *builtin_exec_resolve(const char *prog, const char *base_dir, char *why, size_t why_size) {
    if (!prog || !*prog) return snprintf(why, why_size, "empty program name"), NULL;
    char *found;
    if (!strchr(prog, '/')) {
        if (!(found = search_path(prog))) {
            char *local = base_dir ? join(base_dir, strlen(base_dir), prog) : NULL;
            char ignored[128];
            int there = local && runnable(local, ignored, sizeof ignored) == 0;
            free(local);
            snprintf(why, why_size, "not found on PATH%s",
                     there ? " (a bare name is looked up on PATH; write ./NAME for the file next "
                             "to the run file)" : "");
            return NULL;
        }
    } else {
        found = prog[0] == '/' || !base_dir ? strdup(prog) : join(base_dir, strlen(base_dir), prog);
        if (!found) return snprintf(why, why_size, "out of memory"), NULL;
        if (runnable(found, why, why_size) != 0) return free(found), NULL;
    }
    if (found[0] == '/') return found;
    /* Absolute, so it names the same file whatever directory the program starts in; links are
     * kept (a virtualenv's bin/python finds its environment through the path it runs as). */
    char cwd[PATH_MAX];
    char *abs = getcwd(cwd, sizeof cwd) ? join(cwd, strlen(cwd), found) : NULL;
    if (!abs) snprintf(why, why_size, "cannot make the path absolute: %s", strerror(errno));
    free(found);
    return abs;
}
