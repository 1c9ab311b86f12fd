/* cuda_loader.c — the cuda backend as a module: found (kernels.h says where), loaded with
 * dlopen, opened and closed through its two entry points (cuda/cuda_module.h). */
#include "cuda_loader.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda/cuda_module.h"

/* Each open cuda table with the module handle it came from (dlclosed with the table). */
typedef struct cuda_table {
    grpo_ops *ops;
    void *dl;
    grpo_cuda_close_fn close;
    struct cuda_table *next;
} cuda_table;
static cuda_table *cuda_tables;
static pthread_mutex_t cuda_tables_lock = PTHREAD_MUTEX_INITIALIZER;

#ifdef GRPO_HAVE_CUDA_MODULE
#define CUDA_NOT_FOUND_HINT "the build made it: install it, or set GRPO_CUDA_BACKEND to its path"
#else
#define CUDA_NOT_FOUND_HINT "this build found no CUDA toolkit, so it has no CUDA backend"
#endif

typedef struct path_list {
    char path[4][PATH_MAX];
    int n;
} path_list;

static void add_path(path_list *l, const char *dir, const char *file) {
    if (l->n >= 4) return;
    int n = snprintf(l->path[l->n], PATH_MAX, "%s/%s", dir, file);
    if (n > 0 && n < PATH_MAX) l->n++;
}

/* Where the module `file` may be, in search order (kernels.h). */
static void module_candidates(path_list *l, const char *file) {
    l->n = 0;
    const char *env = getenv("GRPO_CUDA_BACKEND");
    if (env && *env) {
        struct stat st;
        if (stat(env, &st) == 0 && S_ISDIR(st.st_mode))
            add_path(l, env, file);
        else if (strlen(env) < PATH_MAX)
            strcpy(l->path[l->n++], env);
        return;
    }
#ifdef GRPO_BACKEND_BUILD_DIR
    add_path(l, GRPO_BACKEND_BUILD_DIR, file);
#endif
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *slash = n > 0 ? (exe[n] = '\0', strrchr(exe, '/')) : NULL;
    if (!slash) return;
    *slash = '\0';
    char dir[PATH_MAX];
#ifdef GRPO_BACKEND_INSTALL_RELDIR
    if (snprintf(dir, sizeof dir, "%s/../%s", exe, GRPO_BACKEND_INSTALL_RELDIR) < PATH_MAX)
        add_path(l, dir, file);
    if (strcmp(GRPO_BACKEND_INSTALL_RELDIR, "lib/grpo/backends") == 0) return;
#endif
    if (snprintf(dir, sizeof dir, "%s/../lib/grpo/backends", exe) < PATH_MAX)
        add_path(l, dir, file);
}

/* The module's file name: the emulated one under GRPO_CUDA_EMULATION=1 (kernels.h). */
static const char *module_file(void) {
    const char *emu = getenv("GRPO_CUDA_EMULATION");
    int emulated = emu && strcmp(emu, "1") == 0;
    return emulated ? GRPO_CUDA_EMU_MODULE_FILE : GRPO_CUDA_MODULE_FILE;
}

/* dlopens the first candidate that exists; NULL with err set when none loads. */
static void *load_module(const char *file, grpo_error *err) {
    path_list l;
    module_candidates(&l, file);
    char tried[4 * PATH_MAX + 16] = "";
    for (int i = 0; i < l.n; i++) {
        if (access(l.path[i], F_OK) != 0) {
            size_t len = strlen(tried);
            snprintf(tried + len, sizeof tried - len, "%s%s", len ? ", " : "", l.path[i]);
            continue;
        }
        /* never unmapped (dlclose only drops the reference): the CUDA runtime and cuBLAS
         * register exit handlers and keep allocations in their globals, so unloading them is
         * neither safe nor leak-free */
        void *dl = dlopen(l.path[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        if (!dl) {
            const char *why = dlerror();
            grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "backend 'cuda': cannot load %s: %s",
                           l.path[i], why ? why : "unknown dlopen error");
        }
        return dl;
    }
    grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "backend 'cuda': %s not found (tried: %s); %s",
                   file, l.n ? tried : "nowhere", CUDA_NOT_FOUND_HINT);
    return NULL;
}

int cuda_module_probe(const grpo_backend_options *opt) {
    (void)opt;
    path_list l;
    module_candidates(&l, module_file());
    for (int i = 0; i < l.n; i++)
        if (access(l.path[i], F_OK) == 0) return 1;
    return 0;
}

grpo_ops *cuda_module_open(const grpo_backend_options *opt, grpo_error *err) {
    const char *file = module_file();
    cuda_table *t = calloc(1, sizeof *t);
    if (!t) {
        grpo_error_set(err, GRPO_ERR_NOMEM, "backend 'cuda': out of memory");
        return NULL;
    }
    if (!(t->dl = load_module(file, err))) {
        free(t);
        return NULL;
    }
    grpo_cuda_open_fn open = (grpo_cuda_open_fn)dlsym(t->dl, GRPO_CUDA_OPEN_SYMBOL);
    t->close = (grpo_cuda_close_fn)dlsym(t->dl, GRPO_CUDA_CLOSE_SYMBOL);
    if (!open || !t->close) {
        grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "backend 'cuda': %s lacks %s or %s", file,
                       GRPO_CUDA_OPEN_SYMBOL, GRPO_CUDA_CLOSE_SYMBOL);
        dlclose(t->dl);
        free(t);
        return NULL;
    }
    grpo_cuda_options co = {(uint32_t)sizeof co, 0, opt->precision, opt->threads};
    if (!(t->ops = open(&co, err))) {
        dlclose(t->dl);
        free(t);
        return NULL;
    }
    pthread_mutex_lock(&cuda_tables_lock);
    t->next = cuda_tables;
    cuda_tables = t;
    pthread_mutex_unlock(&cuda_tables_lock);
    return t->ops;
}

int cuda_module_close(grpo_ops *ops) {
    pthread_mutex_lock(&cuda_tables_lock);
    cuda_table **p = &cuda_tables;
    while (*p && (*p)->ops != ops) p = &(*p)->next;
    cuda_table *t = *p;
    if (t) *p = t->next;
    pthread_mutex_unlock(&cuda_tables_lock);
    if (!t) return 0;
    t->close(ops);
    dlclose(t->dl);
    free(t);
    return 1;
}
