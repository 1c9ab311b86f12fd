/* files.c — whole-file reads, atomic replacement, mkdir -p, link-safe tree removal and path joins
 * (see files.h). */
#include "base/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

/* ---- reading ------------------------------------------------------------------------------ */

/* What st is, for a message about a file that is not regular. */
static const char *file_kind(const struct stat *st) {
    return S_ISFIFO(st->st_mode)   ? "a FIFO"
           : S_ISDIR(st->st_mode)  ? "a directory"
           : S_ISSOCK(st->st_mode) ? "a socket"
                                   : "a device or special file";
}

FILE *grpo_open_regular(const char *path, const char *what, grpo_error *err) {
    const char *sp = what ? " " : "", *w = what ? what : "";
    /* O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        grpo_error_set(err, GRPO_ERR_IO, "%s: cannot open%s%s: %s", path, sp, w, strerror(errno));
        return NULL;
    }
    struct stat st;
    FILE *fp = NULL;
    int flags;
    if (fstat(fd, &st) != 0)
        grpo_error_set(err, GRPO_ERR_IO, "%s: cannot stat%s%s: %s", path, sp, w, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        grpo_error_set(err, GRPO_ERR_INVALID, "%s: %s is %s; expected a regular file", path,
                       what ? what : "the file", file_kind(&st));
    else if ((flags = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0 ||
             !(fp = fdopen(fd, "rb")))
        grpo_error_set(err, GRPO_ERR_IO, "%s: cannot read%s%s: %s", path, sp, w, strerror(errno));
    if (!fp) close(fd);
    return fp;
}

/* The real path of p, or for a path that does not exist yet the real path of its nearest
 * existing ancestor followed by the rest; into buf (PATH_MAX). 0 on success. */
static int real_path_of(const char *p, char *buf) {
    char tmp[PATH_MAX], rest[PATH_MAX] = "";
    if (strlen(p) >= sizeof tmp) return -1;
    strcpy(tmp, p);
    for (;;) {
        if (realpath(tmp[0] ? tmp : ".", buf)) break;
        if (errno != ENOENT) return -1;
        char *slash = strrchr(tmp, '/');
        const char *last = slash ? slash + 1 : tmp;
        char joined[PATH_MAX];
        if (snprintf(joined, sizeof joined, "%s%s%s", last, rest[0] ? "/" : "", rest) >=
            (int)sizeof joined)
            return -1;
        strcpy(rest, joined);
        if (slash == tmp) tmp[1] = '\0';
        else if (slash) *slash = '\0';
        else tmp[0] = '\0';
    }
    size_t n = strlen(buf);
    if (rest[0] && snprintf(buf + n, PATH_MAX - n, "%s%s", buf[n - 1] == '/' ? "" : "/", rest) >=
                       (int)(PATH_MAX - n))
        return -1;
    return 0;
}

/* 1 when real path a is b or lies under it. */
static int path_within(const char *a, const char *b) {
    size_t n = strlen(b);
    return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/' || (n == 1 && b[0] == '/'));
}

int grpo_dirs_apart(const char *out, const char *what_out, const char *in, const char *what_in,
                    grpo_error *err) {
    char ro[PATH_MAX], ri[PATH_MAX];
    if (real_path_of(out, ro) != 0 || real_path_of(in, ri) != 0) return GRPO_OK; /* nothing to
        compare: the write or the read itself reports the path */
    const char *how = !strcmp(ro, ri)         ? "is"
                      : path_within(ro, ri)   ? "is inside"
                      : path_within(ri, ro)   ? "holds"
                                              : NULL;
    if (!how) return GRPO_OK;
    return grpo_error_set(err, GRPO_ERR_INVALID,
                          "%s %s %s %s %s: writing it would overwrite the input; expected an "
                          "output directory apart from it",
                          what_out, out, how, what_in, in);
}

int grpo_read_file(const char *path, char **out, size_t *len, grpo_error *err) {
    grpo_error local;
    FILE *fp = grpo_open_regular(path, NULL, err ? err : &local);
    if (!fp) return err ? err->status : local.status;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 65536) {
            char *b = realloc(buf, cap = cap ? 2 * cap : 65536);
            if (!b) {
                free(buf);
                fclose(fp);
                return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", path);
            }
            buf = b;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, fp);
        n += r;
        if (r == 0) break;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (bad) {
        free(buf);
        return grpo_error_set(err, GRPO_ERR_IO, "%s: read error", path);
    }
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return GRPO_OK;
}

int grpo_sha256_file(const char *path, const char *what, char hex[65], grpo_error *err) {
    FILE *f = grpo_open_regular(path, what, err);
    if (!f) return GRPO_ERR_IO;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    unsigned char buf[65536], md[EVP_MAX_MD_SIZE];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0) ok = EVP_DigestUpdate(ctx, buf, n);
    unsigned len = 0;
    ok = ok && !ferror(f) && EVP_DigestFinal_ex(ctx, md, &len) && len == 32;
    EVP_MD_CTX_free(ctx);
    fclose(f);
    if (!ok) return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot read it to checksum", path);
    for (unsigned i = 0; i < 32; i++) sprintf(hex + 2 * i, "%02x", md[i]);
    return GRPO_OK;
}

/* ---- writing ------------------------------------------------------------------------------ */

int grpo_write_all(int fd, const void *data, size_t len) {
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len > (1u << 30) ? (1u << 30) : len);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return errno;
        if (w == 0) return ENOSPC; /* no progress on a regular file: the disk is full */
        p += w, len -= (size_t)w;
    }
    return 0;
}

int grpo_fsync_path(const char *path, int flags) {
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

static int fsync_parent_dir(const char *path, grpo_error *err) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (grpo_fsync_path(dir, O_RDONLY | O_DIRECTORY) != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot fsync directory %s: %s", path, dir,
                              strerror(errno));
    return GRPO_OK;
}

int grpo_atomic_open(grpo_atomic_file *af, const char *path, grpo_error *err) {
    af->path = path;
    af->fd = -1;
    size_t n = strlen(path) + 16;
    af->tmp = malloc(n);
    if (!af->tmp) return grpo_error_set(err, GRPO_ERR_NOMEM, "%s: out of memory", path);
    snprintf(af->tmp, n, "%s.tmp.XXXXXX", path);
    af->fd = mkostemp(af->tmp, O_CLOEXEC);
    if (af->fd < 0) {
        int e = errno;
        free(af->tmp);
        af->tmp = NULL;
        return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot create a temporary file: %s", path,
                              strerror(e));
    }
    fchmod(af->fd, 0644); /* mkostemp makes 0600; a saved model is as readable as cp's copy */
    return GRPO_OK;
}

void grpo_atomic_abort(grpo_atomic_file *af) {
    if (af->fd >= 0) close(af->fd);
    if (af->tmp) unlink(af->tmp);
    free(af->tmp);
    af->tmp = NULL, af->fd = -1;
}

int grpo_atomic_write(grpo_atomic_file *af, const void *data, size_t len, grpo_error *err) {
    int e = grpo_write_all(af->fd, data, len);
    if (e)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: write failed: %s (previous file kept)",
                              af->path, strerror(e));
    return GRPO_OK;
}

int grpo_atomic_commit(grpo_atomic_file *af, grpo_error *err) {
    if (fsync(af->fd) != 0 || close(af->fd) != 0) {
        int e = errno;
        af->fd = -1;
        grpo_atomic_abort(af);
        return grpo_error_set(err, GRPO_ERR_IO, "%s: fsync/close failed: %s (previous file kept)",
                              af->path, strerror(e));
    }
    af->fd = -1;
    if (rename(af->tmp, af->path) != 0) {
        int e = errno;
        grpo_atomic_abort(af);
        return grpo_error_set(err, GRPO_ERR_IO, "%s: rename failed: %s (previous file kept)",
                              af->path, strerror(e));
    }
    free(af->tmp);
    af->tmp = NULL;
    return fsync_parent_dir(af->path, err);
}

int grpo_write_file_atomic(const char *path, const void *data, size_t len, grpo_error *err) {
    grpo_atomic_file af;
    int rc = grpo_atomic_open(&af, path, err);
    if (rc) return rc;
    rc = grpo_atomic_write(&af, data, len, err);
    if (rc) {
        grpo_atomic_abort(&af);
        return rc;
    }
    return grpo_atomic_commit(&af, err);
}

/* ---- directories and paths ---------------------------------------------------------------- */

/* mkdir that accepts an existing directory but not a file of that name. */
static int mkdir_one(const char *path) {
    if (mkdir(path, 0777) == 0) return 0;
    if (errno != EEXIST) return -1;
    struct stat sb;
    if (stat(path, &sb) != 0) return -1;
    return S_ISDIR(sb.st_mode) ? 0 : (errno = ENOTDIR, -1);
}

int grpo_mkdirs(const char *path) {
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return errno = ENAMETOOLONG, -1;
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir_one(buf) != 0) return -1;
            *p = '/';
        }
    return mkdir_one(buf);
}

int grpo_path_join(char *out, size_t cap, const char *dir, const char *name, grpo_error *err) {
    if ((size_t)snprintf(out, cap, "%s/%s", dir, name) >= cap)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: path too long", dir);
    return GRPO_OK;
}

char *grpo_path_beside(const char *file, const char *name) {
    const char *slash = file ? strrchr(file, '/') : NULL;
    if (name[0] == '/' || !slash) return strdup(name);
    size_t dir = (size_t)(slash - file) + 1, n = strlen(name);
    char *p = malloc(dir + n + 1);
    if (!p) return NULL;
    memcpy(p, file, dir);
    memcpy(p + dir, name, n + 1);
    return p;
}

/* ---- removal ------------------------------------------------------------------------------ */

/* Keeps the first failure's errno in *first (ENOENT, gone already, is no failure). */
static void note_failure(int *first) {
    if (errno != ENOENT && !*first) *first = errno;
}

/* Removes name, relative to the directory dirfd, and what is under it. Opening it O_DIRECTORY |
 * O_NOFOLLOW fails for anything but a real directory (ELOOP for a link, ENOTDIR for a file): that
 * is unlinked as it is. */
static void remove_at(int dirfd, const char *name, int *first) {
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if ((errno == ELOOP || errno == ENOTDIR) && unlinkat(dirfd, name, 0) == 0) return;
        note_failure(first);
        return;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        note_failure(first);
        close(fd);
        return;
    }
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) remove_at(fd, e->d_name, first);
    closedir(d);
    if (unlinkat(dirfd, name, AT_REMOVEDIR) != 0) note_failure(first);
}

int grpo_remove_tree(const char *path) {
    int first = 0;
    remove_at(AT_FDCWD, path, &first);
    errno = first;
    return first ? -1 : 0;
}
