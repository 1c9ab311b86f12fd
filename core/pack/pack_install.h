/*
 * pack_install.h — a pack from its author to a user: `grpo pack bundle`, `install`, `remove`.
 *
 * A bundle is NAME-VERSION.tar.gz holding one folder NAME/ with pack.ini, the library it names,
 * the pack's README/LICENSE when present, and SHA256SUMS (sha256sum's format: "HEX  FILE", one
 * line per other file). Installing verifies before anything is copied into place:
 *   1. the archive: regular files and folders only, all under one folder, no absolute or '..'
 *      paths; every file listed in SHA256SUMS with that checksum, and every listed file present
 *      (a pack folder may come without SHA256SUMS; a bundle may not);
 *   2. pack.ini parses and this grpo can serve its abi and min_grpo (registry.h);
 *   3. the library is an ELF for this machine (pack_elf.h);
 *   4. the library loads through every registry check: its magic serves the manifest's abi,
 *      grpo_plugin_init succeeds, its exported ids are the manifest's ids;
 *   5. every reward's self-tests pass (pack_selftest.h).
 * It then moves the checked folder into PREFIX/NAME with one rename (the folder was unpacked
 * in PREFIX, so the rename is atomic; an installed copy is swapped out the same way and then
 * deleted), so a run never sees half a pack. A different installed version is replaced only
 * with force.
 *
 * PREFIX defaults to the per-user pack dir, ${XDG_DATA_HOME:-$HOME/.local/share}/grpo/packs
 * (grpo_pack_user_dir), which is on the default plugin path.
 */
#ifndef GRPO_PACK_INSTALL_H
#define GRPO_PACK_INSTALL_H

#include "host/registry.h"

#include <stddef.h>

/* Writes the bundle of the pack in pack_dir to out (NULL: "NAME-VERSION.tar.gz" in the working
 * directory); the path written goes to written (size bytes). The archive is written to a temp
 * file and renamed over out. */
int grpo_pack_bundle(const char *pack_dir, const char *out, char *written, size_t size,
                     grpo_error *err);

typedef struct grpo_pack_installed {
    char name[128], version[64];
    char dir[4096 + 256]; /* PREFIX/NAME */
    char replaced[64];  /* version of the copy it replaced, "" when none */
    int n_ids, n_tests; /* entries; self-tests run */
} grpo_pack_installed;

/* Verifies src (a bundle .tar.gz or a pack folder) and installs it into prefix (NULL: the
 * per-user dir). host is what the checks load the library and run the self-tests with. */
int grpo_pack_install(const char *src, const char *prefix, int force, const grpo_host *host,
                      grpo_pack_installed *out, grpo_error *err);

/* Step 1 of the above for a bundle: unpacks the archive bundle into dir (an existing, empty
 * folder; the top folder NAME/ stripped) and checks it against its SHA256SUMS. Only regular files
 * and folders are created, never links or devices, and never outside dir. Limits: at most 256
 * entries and 2 GiB unpacked in all (an error names the entry that passes it). On an error dir
 * may hold part of the bundle: the caller removes it. */
int grpo_pack_unpack(const char *bundle, const char *dir, grpo_error *err);

/* Removes PREFIX/NAME (NULL prefix: the per-user dir): renamed aside in one step, then deleted.
 * Refuses a NAME that is not a plain name or a folder without pack.ini. */
int grpo_pack_remove(const char *name, const char *prefix, char *removed, size_t size,
                     grpo_error *err);

#endif
