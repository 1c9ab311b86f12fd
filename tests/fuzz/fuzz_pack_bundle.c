/* fuzz_pack_bundle.c — a pack bundle (`grpo pack install FILE.tar.gz`, step 1: the archive and
 * its SHA256SUMS) on arbitrary input: grpo_pack_unpack into a fresh folder, after which nothing
 * may exist outside that folder, and nothing in it but regular files and folders (no link,
 * device or fifo). The folder sits DEPTH levels down in the fuzz directory, and every level is
 * checked, so an entry that climbs out with '..' is seen.
 *
 * Input: the bytes of the archive (tar, or tar.gz); or, when it starts with "#entries\n", a list
 * of entries this target writes as a pax tar with libarchive, so that paths, links and types the
 * fuzzer picks reach the reader without it having to forge tar checksums. One entry a line:
 *   TYPE SIZE PATH[>LINK]     TYPE: f file, d folder, l symlink, h hardlink, p fifo, c char dev
 * SIZE is the declared size (the data is SIZE bytes of 'x', at most 64 KiB written).
 * FUZZ_VERBOSE=1 prints what grpo_pack_unpack said of each input replayed. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <ftw.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_util.h"
#include "pack/pack_install.h"

#define DEPTH 6
#define MAGIC "#entries\n"

/* One "TYPE SIZE PATH[>LINK]" line into archive a. */
static void add_line(struct archive *a, char *line) {
    char type = line[0], *end;
    if (!type || line[1] != ' ') return;
    long long size = strtoll(line + 2, &end, 10);
    if (*end != ' ' || size < 0) return;
    char *path = end + 1, *link = strchr(path, '>');
    if (link) *link++ = 0;
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, path);
    archive_entry_set_perm(e, 0644);
    int ft = type == 'd' ? AE_IFDIR : type == 'l' ? AE_IFLNK : type == 'p' ? AE_IFIFO
           : type == 'c' ? AE_IFCHR : AE_IFREG;
    archive_entry_set_filetype(e, (unsigned)ft);
    if (type == 'l' && link) archive_entry_set_symlink(e, link);
    if (type == 'h' && link) archive_entry_set_hardlink(e, link);
    int data = ft == AE_IFREG && type != 'h';
    archive_entry_set_size(e, data ? (la_int64_t)(size < 65536 ? size : 65536) : 0);
    if (archive_write_header(a, e) == ARCHIVE_OK && data && size > 0) {
        static char xs[65536];
        if (!xs[0]) memset(xs, 'x', sizeof xs);
        archive_write_data(a, xs, (size_t)(size < 65536 ? size : 65536));
    }
    archive_entry_free(e);
}

/* The "#entries" form: the listed entries as a tar file at path. */
static void write_entries(const char *path, const uint8_t *data, size_t size) {
    char *text = fuzz_text(data + strlen(MAGIC), size - strlen(MAGIC));
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    if (archive_write_open_filename(a, path) != ARCHIVE_OK) abort();
    for (char *s = text, *next; *s; s = next) {
        next = s + strcspn(s, "\n");
        if (*next) *next++ = 0;
        add_line(a, s);
    }
    archive_write_close(a);
    archive_write_free(a);
    free(text);
}

/* dir must hold exactly the names in want (NULL-ended). */
static void expect_only(const char *dir, const char *const *want) {
    DIR *d = opendir(dir);
    if (!d) abort();
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        int known = 0;
        for (int i = 0; want[i]; i++) known |= !strcmp(e->d_name, want[i]);
        if (!known) {
            fprintf(stderr, "fuzz_pack_bundle: %s/%s was written outside the folder unpacked "
                    "into\n", dir, e->d_name);
            abort();
        }
    }
    closedir(d);
}

static int only_files_and_folders(const char *path, const struct stat *st, int flag,
                                  struct FTW *ftw) {
    (void)ftw;
    if ((flag == FTW_F && !S_ISREG(st->st_mode)) || flag == FTW_SL || flag == FTW_SLN) {
        fprintf(stderr, "fuzz_pack_bundle: %s is not a regular file or folder\n", path);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char levels[DEPTH][512], bundle[600], stage[600];
    snprintf(levels[0], sizeof levels[0], "%s", fuzz_dir());
    for (int i = 1; i < DEPTH; i++) snprintf(levels[i], sizeof levels[i], "%s/d", levels[i - 1]);
    snprintf(bundle, sizeof bundle, "%s/bundle.tar.gz", levels[DEPTH - 1]);
    snprintf(stage, sizeof stage, "%s/stage", levels[DEPTH - 1]);
    if (grpo_mkdirs(stage) != 0) abort();
    if (size >= strlen(MAGIC) && !memcmp(data, MAGIC, strlen(MAGIC)))
        write_entries(bundle, data, size);
    else
        fuzz_write("d/d/d/d/d/bundle.tar.gz", data, size);
    grpo_error err = fuzz_error();
    int rc = grpo_pack_unpack(bundle, stage, &err);
    if (getenv("FUZZ_VERBOSE")) /* replaying one input: what the reader said */
        fprintf(stderr, "grpo_pack_unpack: %s\n", rc == GRPO_OK ? "ok" : err.message);
    static const char *const in_level[] = {"d", NULL}, *const in_last[] = {"bundle.tar.gz",
                                                                             "stage", NULL};
    for (int i = 0; i < DEPTH; i++) expect_only(levels[i], i < DEPTH - 1 ? in_level : in_last);
    nftw(stage, only_files_and_folders, 16, FTW_PHYS);
    if (grpo_remove_tree(stage) != 0) abort();
    return 0;
}
