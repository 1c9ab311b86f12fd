/*
 * plugin_path.c — where packs are looked for, in search order:
 *   1. --plugin-path DIR arguments (extra)
 *   2. GRPO_PLUGIN_PATH, colon-separated (empty fields ignored)
 *   3. ${XDG_DATA_HOME:-$HOME/.local/share}/grpo/packs  (per user: `grpo pack install` puts
 *                                                         packs there; a user's before the system's)
 *   4. <dir of the executable>/packs                     (the build tree: build/packs)
 *   5. <dir of the executable>/../<libdir>/grpo/packs    (an installed tree, wherever it was moved)
 *   6. GRPO_INSTALL_PACK_DIR, compiled in                 (the configured install prefix)
 * Dirs that do not exist are kept here and skipped by grpo_registry_scan; the same directory
 * reached twice is read once there (by realpath).
 */
#include "host/registry.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct dir_list {
    char **dirs; /* [n + 1] NULL-terminated */
    int n;
} dir_list;

static void push(dir_list *l, const char *dir, size_t len) {
    char **d = realloc(l->dirs, (size_t)(l->n + 2) * sizeof *d);
    char *s = malloc(len + 1);
    if (!d || !s) {
        fprintf(stderr, "grpo: out of memory building the plugin path\n");
        abort();
    }
    memcpy(s, dir, len);
    s[len] = '\0';
    l->dirs = d;
    l->dirs[l->n++] = s;
    l->dirs[l->n] = NULL;
}

static void push_joined(dir_list *l, const char *a, const char *b) {
    char buf[PATH_MAX + 64];
    int n = snprintf(buf, sizeof buf, "%s/%s", a, b);
    if (n > 0 && (size_t)n < sizeof buf) push(l, buf, (size_t)n);
}

char *grpo_pack_user_dir(void) {
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    char buf[PATH_MAX];
    int n;
    if (xdg && xdg[0] == '/') /* the XDG spec: a relative value is invalid and ignored */
        n = snprintf(buf, sizeof buf, "%s/grpo/packs", xdg);
    else if (home && home[0] == '/')
        n = snprintf(buf, sizeof buf, "%s/.local/share/grpo/packs", home);
    else
        return NULL;
    return n > 0 && (size_t)n < sizeof buf ? strdup(buf) : NULL;
}

char **grpo_plugin_path(const char *const *extra, int n_extra) {
    dir_list l = {calloc(1, sizeof(char *)), 0}; /* an empty list is {NULL} */
    if (!l.dirs) abort();
    for (int i = 0; extra && i < n_extra; i++)
        if (extra[i] && *extra[i]) push(&l, extra[i], strlen(extra[i]));
    const char *env = getenv("GRPO_PLUGIN_PATH");
    while (env && *env) {
        size_t n = strcspn(env, ":");
        if (n) push(&l, env, n);
        env += n + (env[n] == ':');
    }
    char *user = grpo_pack_user_dir();
    if (user) push(&l, user, strlen(user));
    free(user);
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            push_joined(&l, exe, "packs");
#ifdef GRPO_PACK_INSTALL_RELDIR
            push_joined(&l, exe, "../" GRPO_PACK_INSTALL_RELDIR);
            if (strcmp(GRPO_PACK_INSTALL_RELDIR, "lib/grpo/packs") != 0)
#endif
                push_joined(&l, exe, "../lib/grpo/packs");
        }
    }
#ifdef GRPO_INSTALL_PACK_DIR
    push(&l, GRPO_INSTALL_PACK_DIR, strlen(GRPO_INSTALL_PACK_DIR));
#endif
    return l.dirs;
}

void grpo_plugin_path_free(char **dirs) {
    for (char **d = dirs; d && *d; d++) free(*d);
    free(dirs);
}
