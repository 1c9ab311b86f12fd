/*
 * pack_install.c — bundling, verifying, installing and removing packs (pack_install.h).
 *
 * libarchive writes and reads the tar.gz; OpenSSL's libcrypto computes SHA-256. Everything is
 * checked in a staging folder inside the destination prefix, so the final move is one rename on
 * one filesystem.
 */
#include "pack/pack_install.h"

#include "base/files.h"
#include "host/pack_elf.h"
#include "host/registry.h"
#include "pack/pack_selftest.h"

#include <archive.h>
#include <archive_entry.h>

#include <errno.h>
#include <fcntl.h> /* AT_FDCWD; renameat2 and RENAME_EXCHANGE are GNU (stdio.h) */
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Optional files a bundle carries along with pack.ini and the library. */
static const char *const extra_files[] = {"README",  "README.md",   "README.txt", "LICENSE",
                                          "LICENSE.md", "LICENSE.txt", "COPYING",    NULL};
#define SUMS "SHA256SUMS"
#define MAX_FILES 256                    /* a bundle holds a handful; more is not a pack */
#define MAX_BYTES ((int64_t)2 << 30)     /* 2 GiB unpacked, in all */
#define PBUF (2 * PATH_MAX)              /* a path under a staging dir (itself near PATH_MAX) */

/* ---- small file helpers -------------------------------------------------------------------- */

static int is_regular(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int copy_file(const char *src, const char *dst, grpo_error *err) {
    char *data;
    size_t len;
    int rc = grpo_read_file(src, &data, &len, err);
    if (rc != GRPO_OK) return rc;
    FILE *f = fopen(dst, "wbe");
    int ok = f && fwrite(data, 1, len, f) == len;
    if (f && fclose(f) != 0) ok = 0;
    free(data);
    if (!ok) return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot write: %s", dst, strerror(errno));
    return GRPO_OK;
}

/* The library's path relative to the pack dir (the manifest's library value, normalised). */
static const char *library_rel(const grpo_pack *p) {
    size_t n = strlen(p->dir);
    return p->library_path + n + (p->library_path[n] == '/');
}

/* The files of a pack folder that travel: pack.ini, the library, extra files present. */
static int pack_files(const grpo_pack *p, const char **files, int *n) {
    *n = 0;
    files[(*n)++] = "pack.ini";
    files[(*n)++] = library_rel(p);
    for (int i = 0; extra_files[i]; i++) {
        char path[PBUF];
        snprintf(path, sizeof path, "%s/%s", p->dir, extra_files[i]);
        if (is_regular(path)) files[(*n)++] = extra_files[i];
    }
    return *n;
}

/* ---- bundle -------------------------------------------------------------------------------- */

static int add_entry(struct archive *a, const char *name, const void *data, size_t len,
                     int mode, time_t mtime) {
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, name);
    archive_entry_set_size(e, (la_int64_t)len);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, mode);
    archive_entry_set_mtime(e, mtime, 0);
    int ok = archive_write_header(a, e) == ARCHIVE_OK &&
             (len == 0 || archive_write_data(a, data, len) == (la_ssize_t)len);
    archive_entry_free(e);
    return ok;
}

/* The files and their checksums into archive a under NAME/. */
static int write_bundle(struct archive *a, const grpo_pack *p, grpo_error *err) {
    const char *files[16];
    int n;
    pack_files(p, files, &n);
    char sums[16 * 400] = "";
    for (int i = 0; i < n; i++) {
        char path[PBUF], name[PBUF], hex[65], *data;
        size_t len;
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", p->dir, files[i]);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            return grpo_error_set(err, GRPO_ERR_IO, "%s: no such file; expected %s (build the "
                                  "pack first)", path, i == 1 ? "the library pack.ini names" :
                                  "a regular file");
        int rc = grpo_sha256_file(path, "pack file", hex, err);
        if (rc == GRPO_OK) rc = grpo_read_file(path, &data, &len, err);
        if (rc != GRPO_OK) return rc;
        snprintf(sums + strlen(sums), sizeof sums - strlen(sums), "%s  %s\n", hex, files[i]);
        snprintf(name, sizeof name, "%s/%s", p->name, files[i]);
        int ok = add_entry(a, name, data, len, i == 1 ? 0755 : 0644, st.st_mtime);
        free(data);
        if (!ok) return grpo_error_set(err, GRPO_ERR_IO, "%s", archive_error_string(a));
    }
    char name[PBUF];
    snprintf(name, sizeof name, "%s/" SUMS, p->name);
    if (!add_entry(a, name, sums, strlen(sums), 0644, time(NULL)))
        return grpo_error_set(err, GRPO_ERR_IO, "%s", archive_error_string(a));
    return GRPO_OK;
}

int grpo_pack_bundle(const char *pack_dir, const char *out, char *written, size_t size,
                     grpo_error *err) {
    char manifest[PBUF], tmp[PATH_MAX + 16];
    snprintf(manifest, sizeof manifest, "%s/pack.ini", pack_dir);
    grpo_pack p;
    int rc = grpo_manifest_parse(manifest, &p, err);
    if (rc != GRPO_OK) return rc;
    if (out)
        snprintf(written, size, "%s", out);
    else
        snprintf(written, size, "%s-%s.tar.gz", p.name, p.version);
    snprintf(tmp, sizeof tmp, "%s.tmp", written);
    struct archive *a = archive_write_new();
    archive_write_add_filter_gzip(a);
    archive_write_set_format_pax_restricted(a);
    if (archive_write_open_filename(a, tmp) != ARCHIVE_OK)
        rc = grpo_error_set(err, GRPO_ERR_IO, "%s: cannot write: %s", tmp, archive_error_string(a));
    else
        rc = write_bundle(a, &p, err);
    if (archive_write_close(a) != ARCHIVE_OK && rc == GRPO_OK)
        rc = grpo_error_set(err, GRPO_ERR_IO, "%s: %s", tmp, archive_error_string(a));
    archive_write_free(a);
    if (rc == GRPO_OK && rename(tmp, written) != 0)
        rc = grpo_error_set(err, GRPO_ERR_IO, "%s: cannot rename to %s: %s", tmp, written,
                            strerror(errno));
    if (rc != GRPO_OK) unlink(tmp);
    grpo_pack_free(&p);
    return rc;
}

/* ---- unpacking ----------------------------------------------------------------------------- */

/* Whether name (an archive path under its top folder) is a plain relative path. */
static int safe_rel(const char *rel) {
    if (!*rel || rel[0] == '/') return 0;
    for (const char *c = rel; *c;) {
        size_t n = strcspn(c, "/");
        if ((n == 2 && c[0] == '.' && c[1] == '.') || (n == 1 && c[0] == '.') || n == 0) return 0;
        c += n + (c[n] == '/');
    }
    return 1;
}

/* One archive entry into dir (its top folder stripped; top remembered from the first). */
static int unpack_entry(struct archive *a, struct archive_entry *e, const char *file,
                        const char *dir, char *top, int64_t *total, grpo_error *err) {
    const char *name = archive_entry_pathname(e);
    if (!name) name = ""; /* no path, or one libarchive cannot convert */
    size_t t = strcspn(name, "/");
    if (t == 0) /* an empty top folder would let the next entry choose another one */
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: entry '%s' is an absolute or empty "
                              "path; expected regular files under one folder, no absolute or "
                              "'..' paths", file, name);
    if (!top[0]) snprintf(top, 256, "%.*s", (int)t, name);
    const char *rel = name[t] == '/' ? name + t + 1 : "";
    int type = archive_entry_filetype(e);
    if (strncmp(name, top, t) != 0 || strlen(top) != t)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: '%s' is outside the folder '%s/'; "
                              "expected one top folder (as grpo pack bundle writes)", file, name,
                              top);
    if (type == AE_IFDIR && (!*rel || safe_rel(rel))) return GRPO_OK;
    if (type != AE_IFREG || !safe_rel(rel))
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: entry '%s' is %s; expected regular "
                              "files under one folder, no absolute or '..' paths", file, name,
                              type != AE_IFREG ? "not a regular file" : "not a plain path");
    int64_t size = archive_entry_size(e);
    if (size < 0 || size > MAX_BYTES - *total)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: entry '%s' (%lld bytes) takes the "
                              "bundle past %lld bytes (2 GiB) unpacked, the limit; expected a "
                              "pack", file, name, (long long)size, (long long)MAX_BYTES);
    *total += size;
    char path[PBUF];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    int mk = grpo_mkdirs(path);
    *slash = '/';
    int fd = mk == 0 ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                            (archive_entry_perm(e) & 0111) ? 0755 : 0644) : -1;
    if (fd < 0)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    int rc = archive_read_data_into_fd(a, fd) == ARCHIVE_OK ? GRPO_OK :
             grpo_error_set(err, GRPO_ERR_IO, "%s: %s", file, archive_error_string(a));
    if (close(fd) != 0 && rc == GRPO_OK)
        rc = grpo_error_set(err, GRPO_ERR_IO, "%s: %s", path, strerror(errno));
    return rc;
}

static int unpack(const char *file, const char *dir, grpo_error *err) {
    struct archive *a = archive_read_new();
    archive_read_support_filter_gzip(a); /* a bundle is a .tar.gz (a plain tar reads too); */
    archive_read_support_format_tar(a);  /* no other filter: some run an outside program */
    int rc = GRPO_OK, n = 0;
    char top[256] = "";
    int64_t total = 0;
    if (archive_read_open_filename(a, file, 65536) != ARCHIVE_OK)
        rc = grpo_error_set(err, GRPO_ERR_IO, "%s: cannot read the bundle: %s", file,
                            archive_error_string(a));
    struct archive_entry *e;
    int r;
    while (rc == GRPO_OK && (r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
        if (++n > MAX_FILES)
            rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: more than %d entries; expected a "
                                "pack", file, MAX_FILES);
        else
            rc = unpack_entry(a, e, file, dir, top, &total, err);
    }
    if (rc == GRPO_OK && r != ARCHIVE_EOF)
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: not a readable tar archive: %s", file,
                            archive_error_string(a));
    archive_read_free(a);
    return rc;
}

/* A pack folder's travelling files (and its SHA256SUMS) into dir. */
static int copy_pack_dir(const char *src, const char *dir, grpo_error *err) {
    char manifest[PBUF];
    snprintf(manifest, sizeof manifest, "%s/pack.ini", src);
    grpo_pack p;
    int rc = grpo_manifest_parse(manifest, &p, err);
    if (rc != GRPO_OK) return rc;
    const char *files[17];
    int n;
    pack_files(&p, files, &n);
    char sums[PBUF];
    snprintf(sums, sizeof sums, "%s/" SUMS, p.dir);
    if (is_regular(sums)) files[n++] = SUMS;
    for (int i = 0; rc == GRPO_OK && i < n; i++) {
        char from[PBUF], to[PBUF];
        snprintf(from, sizeof from, "%s/%s", p.dir, files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        char *slash = strrchr(to, '/');
        *slash = '\0';
        grpo_mkdirs(to);
        *slash = '/';
        rc = copy_file(from, to, err);
        if (rc == GRPO_OK && i == 1) chmod(to, 0755);
    }
    grpo_pack_free(&p);
    return rc;
}

/* ---- verifying ----------------------------------------------------------------------------- */

/* The files SHA256SUMS lists, for the walk that looks for unlisted ones (nftw takes no user
 * pointer; installing is main-thread only). */
static int n_listed;
static char listed[MAX_FILES][1024];
static const char *walk_root;
static char walk_unlisted[PATH_MAX];

static int find_unlisted(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)ftw;
    if (flag != FTW_F) return 0;
    const char *rel = path + strlen(walk_root) + 1;
    if (strcmp(rel, SUMS) == 0) return 0;
    for (int i = 0; i < n_listed; i++)
        if (strcmp(listed[i], rel) == 0) return 0;
    snprintf(walk_unlisted, sizeof walk_unlisted, "%s", rel);
    return 1;
}

/* Every line of dir/SHA256SUMS matches its file, and every file is listed. required: a missing
 * SHA256SUMS is an error (a bundle) rather than nothing to check (a pack folder). */
static int verify_sums(const char *dir, const char *src, int required, grpo_error *err) {
    char path[PBUF], *text;
    snprintf(path, sizeof path, "%s/" SUMS, dir);
    if (!is_regular(path))
        return required ? grpo_error_set(err, GRPO_ERR_INVALID, "%s: no " SUMS "; expected one "
                                         "(grpo pack bundle writes it)", src) : GRPO_OK;
    int rc = grpo_read_file(path, &text, NULL, err);
    if (rc != GRPO_OK) return rc;
    n_listed = 0;
    int line = 0;
    for (char *s = text, *next; rc == GRPO_OK && *s; s = next) {
        next = s + strcspn(s, "\n");
        if (*next) *next++ = '\0';
        line++;
        char hex[65], want[65];
        /* "HEX  NAME" or, sha256sum's binary mode, "HEX *NAME" */
        int ok = strlen(s) > 66 && strspn(s, "0123456789abcdef") == 64 && s[64] == ' ' &&
                 (s[65] == ' ' || s[65] == '*') && safe_rel(s + 66) &&
                 strlen(s + 66) < sizeof listed[0] && n_listed < MAX_FILES;
        const char *name = ok ? s + 66 : "";
        if (!ok) {
            rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: " SUMS ":%d is not 'SHA256  FILE'; "
                                "expected sha256sum's format", src, line);
            break;
        }
        snprintf(want, sizeof want, "%.64s", s);
        snprintf(listed[n_listed++], sizeof listed[0], "%s", name);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        if (!is_regular(path))
            rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: " SUMS " lists %s, which is "
                                "missing", src, name);
        else if ((rc = grpo_sha256_file(path, "pack file", hex, err)) == GRPO_OK &&
                 strcmp(hex, want) != 0)
            rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: %s has SHA-256 %s; " SUMS " says %s "
                                "(a corrupt or altered bundle)", src, name, hex, want);
    }
    free(text);
    walk_root = dir;
    if (rc == GRPO_OK && nftw(dir, find_unlisted, 16, FTW_PHYS) == 1)
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: %s is not in " SUMS "; expected every "
                            "file listed", src, walk_unlisted);
    return rc;
}

int grpo_pack_unpack(const char *bundle, const char *dir, grpo_error *err) {
    int rc = unpack(bundle, dir, err);
    return rc == GRPO_OK ? verify_sums(dir, bundle, 1, err) : rc;
}

/* Steps 2-5 of pack_install.h on the staged folder; the parsed pack goes to out. */
static int verify_pack(const char *dir, const grpo_host *host, grpo_pack_installed *out,
                       grpo_error *err) {
    char *dirs[] = {(char *)dir, NULL}, why[PATH_MAX + 512];
    grpo_registry reg = {0};
    int rc = grpo_registry_scan(&reg, dirs, err);
    if (rc == GRPO_OK && reg.n_broken) /* the scan warned already; this is the refusal */
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s", reg.broken[0].message);
    if (rc == GRPO_OK && reg.n_packs != 1)
        rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: no pack.ini; expected a pack", dir);
    grpo_pack *p = rc == GRPO_OK ? reg.packs[0] : NULL;
    if (p && grpo_elf_check(p->library_path, why, sizeof why))
        rc = grpo_error_set(err, GRPO_ERR_ABI, "pack '%s': library %s: %s", p->name,
                            library_rel(p), why);
    for (int i = 0; rc == GRPO_OK && i < p->n_entries; i++) {
        const void *desc;
        grpo_selftest_report rep = {0};
        rc = grpo_registry_load(&reg, &p->entries[i], host, &desc, err);
        if (rc == GRPO_OK)
            rc = grpo_entry_selftest(&reg, &p->entries[i], host, NULL, &rep, err);
        out->n_tests += rep.n_tests;
    }
    if (rc == GRPO_OK) {
        snprintf(out->name, sizeof out->name, "%s", p->name);
        snprintf(out->version, sizeof out->version, "%s", p->version);
        out->n_ids = p->n_entries;
    }
    grpo_registry_free(&reg);
    return rc;
}

/* ---- installing ---------------------------------------------------------------------------- */

/* The version installed at dest ("" when none); refuses a different one without force. */
static int check_replace(const char *dest, const grpo_pack_installed *in, int force, char *old,
                         size_t size, grpo_error *err) {
    char manifest[PBUF];
    struct stat st;
    old[0] = '\0';
    if (lstat(dest, &st) != 0) return GRPO_OK;
    snprintf(manifest, sizeof manifest, "%s/pack.ini", dest);
    grpo_pack p;
    grpo_error perr;
    grpo_error_init(&perr);
    if (grpo_manifest_parse(manifest, &p, &perr) != GRPO_OK) {
        if (force) return snprintf(old, size, "?"), GRPO_OK;
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s is in the way and is not a readable "
                              "pack (%s); pass --force to replace it", dest, perr.message);
    }
    snprintf(old, size, "%s", p.version);
    int differs = strcmp(p.version, in->version) != 0;
    grpo_pack_free(&p);
    if (differs && !force)
        return grpo_error_set(err, GRPO_ERR_INVALID, "pack '%s' %s is installed in %s; this is "
                              "%s: pass --force to replace it (or grpo pack remove %s first)",
                              in->name, old, dest, in->version, in->name);
    return GRPO_OK;
}

/* staging becomes dest in one rename; an installed dest is swapped out and deleted. */
static int move_into_place(const char *staging, const char *dest, int exists, grpo_error *err) {
    int r = exists ? renameat2(AT_FDCWD, staging, AT_FDCWD, dest, RENAME_EXCHANGE)
                   : rename(staging, dest);
    if (r != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "cannot move %s to %s: %s", staging, dest,
                              strerror(errno));
    grpo_fsync_path(dest, O_RDONLY | O_DIRECTORY);
    return GRPO_OK;
}

static int user_prefix(const char *prefix, char *out, size_t size, grpo_error *err) {
    char *user = prefix ? NULL : grpo_pack_user_dir();
    if (!prefix && !user)
        return grpo_error_set(err, GRPO_ERR_INVALID, "no per-user pack dir: neither "
                              "XDG_DATA_HOME nor HOME is an absolute path; expected --prefix DIR");
    snprintf(out, size, "%s", prefix ? prefix : user);
    free(user);
    if (grpo_mkdirs(out) != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot create: %s", out, strerror(errno));
    return GRPO_OK;
}

int grpo_pack_install(const char *src, const char *prefix, int force, const grpo_host *host,
                      grpo_pack_installed *out, grpo_error *err) {
    memset(out, 0, sizeof *out);
    char root[PATH_MAX], staging[PATH_MAX + 32];
    int rc = user_prefix(prefix, root, sizeof root, err);
    if (rc != GRPO_OK) return rc;
    struct stat st;
    if (stat(src, &st) != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: %s; expected a bundle (.tar.gz) or a pack "
                              "folder", src, strerror(errno));
    snprintf(staging, sizeof staging, "%s/.staging-XXXXXX", root);
    if (!mkdtemp(staging))
        return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot create a staging folder: %s", root,
                              strerror(errno));
    int is_dir = S_ISDIR(st.st_mode);
    rc = is_dir ? copy_pack_dir(src, staging, err) : grpo_pack_unpack(src, staging, err);
    if (rc == GRPO_OK && is_dir) rc = verify_sums(staging, src, 0, err);
    if (rc == GRPO_OK) rc = verify_pack(staging, host, out, err);
    if (rc == GRPO_OK && !force && grpo_pack_is_shipped(out->name))
        rc = grpo_error_set(err, GRPO_ERR_INVALID,
                            "%s: pack '%s' has the name of a pack grpo ships: installed, it would "
                            "replace the shipped one for every later run; pass --force to do so",
                            src, out->name);
    snprintf(out->dir, sizeof out->dir, "%s/%s", root, out->name);
    if (rc == GRPO_OK)
        rc = check_replace(out->dir, out, force, out->replaced, sizeof out->replaced, err);
    if (rc == GRPO_OK && chmod(staging, 0755) != 0) /* mkdtemp made it 0700 */
        rc = grpo_error_set(err, GRPO_ERR_IO, "%s: %s", staging, strerror(errno));
    if (rc == GRPO_OK) rc = move_into_place(staging, out->dir, out->replaced[0] != '\0', err);
    grpo_remove_tree(staging); /* what failed, or the copy that was replaced */
    return rc;
}

int grpo_pack_remove(const char *name, const char *prefix, char *removed, size_t size,
                     grpo_error *err) {
    char root[PATH_MAX], dir[PATH_MAX + 128], aside[PATH_MAX + 32], manifest[PATH_MAX + 160];
    if (!*name || name[0] == '.' || strspn(name, "abcdefghijklmnopqrstuvwxyz"
                                                 "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
                                        strlen(name))
        return grpo_error_set(err, GRPO_ERR_INVALID, "'%s' is not a pack name; expected "
                              "letters, digits, '_' or '-'", name);
    int rc = user_prefix(prefix, root, sizeof root, err);
    if (rc != GRPO_OK) return rc;
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    snprintf(manifest, sizeof manifest, "%s/pack.ini", dir);
    if (!is_regular(manifest))
        return grpo_error_set(err, GRPO_ERR_INVALID, "no pack '%s' installed in %s (see grpo "
                              "pack list)", name, root);
    snprintf(aside, sizeof aside, "%s/.removing-XXXXXX", root);
    if (!mkdtemp(aside) || rename(dir, aside) != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "cannot remove %s: %s", dir, strerror(errno));
    grpo_remove_tree(aside);
    snprintf(removed, size, "%s", dir);
    return GRPO_OK;
}
