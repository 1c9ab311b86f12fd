/*
 * cmd_pack.c — `grpo pack new|bundle|install|remove|list`: a reward pack from its author to a
 * user (pack/pack_install.h verifies and installs; pack/pack_new.h writes the skeleton).
 */
#include "cli/cli.h"
#include "host/process.h"
#include "pack/pack_install.h"
#include "pack/pack_new.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char pack_usage[] =
    "usage: grpo pack new NAME [--dir DIR]\n"
    "       grpo pack bundle PACKDIR [-o NAME-VERSION.tar.gz]\n"
    "       grpo pack install FILE.tar.gz|PACKDIR [--prefix DIR] [--force]\n"
    "       grpo pack remove NAME [--prefix DIR]\n"
    "       grpo pack list [--prefix DIR]\n"
    "\n"
    "new writes a buildable reward pack skeleton into DIR (default ./NAME): CMakeLists.txt\n"
    "(find_package(grpo-sdk)), pack.ini with one reward and one self-test, the source, a README.\n"
    "bundle writes pack.ini, the library, README/LICENSE when present and SHA256SUMS into a\n"
    "tar.gz. install verifies a bundle or pack folder (checksums, manifest, the library's\n"
    "machine and ABI, exported ids = manifest ids, self-tests) and then moves it into\n"
    "DIR/NAME in one step; it replaces an installed copy of another version only with --force.\n"
    "DIR defaults to ${XDG_DATA_HOME:-$HOME/.local/share}/grpo/packs, which is on the plugin\n"
    "path (grpo plugins --help). The pack author's guide: share/doc/grpo-sdk/PACKS.md of the\n"
    "SDK install (sdk/PACKS.md in the source tree).\n";

typedef struct pack_args {
    const char *sub, *arg; /* subcommand and its one positional argument */
    const char *out, *prefix, *dir;
    int force;
} pack_args;

/* Returns 0, or 2 after printing a usage error. */
static int parse_args(int argc, char **argv, pack_args *a) {
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const char **opt = strcmp(s, "-o") == 0 || strcmp(s, "--output") == 0 ? &a->out
                           : strcmp(s, "--prefix") == 0                       ? &a->prefix
                           : strcmp(s, "--dir") == 0                          ? &a->dir
                                                                              : NULL;
        if (opt) {
            if (i + 1 >= argc) {
                fprintf(stderr, "grpo pack: %s needs a value\n", s);
                return 2;
            }
            *opt = argv[++i];
        } else if (strcmp(s, "--force") == 0) {
            a->force = 1;
        } else if (s[0] == '-' && s[1]) {
            fprintf(stderr, "grpo pack: unknown option '%s'\n%s", s, pack_usage);
            return 2;
        } else if (!a->sub) {
            a->sub = s;
        } else if (!a->arg) {
            a->arg = s;
        } else {
            fprintf(stderr, "grpo pack: unexpected argument '%s'\n%s", s, pack_usage);
            return 2;
        }
    }
    static const char *const subs[] = {"new", "bundle", "install", "remove", "list", NULL};
    int known = 0;
    for (int i = 0; a->sub && subs[i]; i++) known |= strcmp(a->sub, subs[i]) == 0;
    if (!known) {
        if (a->sub) fprintf(stderr, "grpo pack: unknown subcommand '%s'\n", a->sub);
        fputs(pack_usage, stderr);
        return 2;
    }
    if (!a->arg && strcmp(a->sub, "list") != 0) {
        fprintf(stderr, "grpo pack %s: which %s?\n%s", a->sub,
                strcmp(a->sub, "install") == 0 ? "bundle or pack folder"
                : strcmp(a->sub, "bundle") == 0 ? "pack folder"
                                                : "pack name",
                pack_usage);
        return 2;
    }
    return 0;
}

static int pack_install(const pack_args *a) {
    grpo_process proc;
    grpo_error err;
    grpo_error_init(&err);
    /* the checks run the pack's code with the services a run gives it (models on the cpu) */
    int rc = grpo_process_open(&proc, NULL, 0, "cpu", 0, &err);
    grpo_pack_installed in;
    if (rc == GRPO_OK) rc = grpo_pack_install(a->arg, a->prefix, a->force, &proc.host, &in, &err);
    grpo_process_close(&proc);
    if (rc != GRPO_OK) {
        fprintf(stderr, "grpo pack install: %s\n", err.message);
        return 1;
    }
    printf("installed %s %s into %s (%d id%s, %d self-test%s passed", in.name, in.version, in.dir,
           in.n_ids, in.n_ids == 1 ? "" : "s", in.n_tests, in.n_tests == 1 ? "" : "s");
    if (in.replaced[0]) printf("; replaced %s", in.replaced);
    printf(")\n");
    return 0;
}

/* NAME  VERSION  ABI  DIR  IDS, one row per pack in the prefix. */
static int pack_list(const pack_args *a) {
    char *user = a->prefix ? NULL : grpo_pack_user_dir();
    const char *root = a->prefix ? a->prefix : user;
    if (!root) {
        fprintf(stderr, "grpo pack list: neither XDG_DATA_HOME nor HOME is an absolute path; "
                        "expected --prefix DIR\n");
        return 1;
    }
    char *dirs[] = {(char *)root, NULL};
    grpo_registry reg = {0};
    grpo_error err;
    grpo_error_init(&err);
    int rc = grpo_registry_scan(&reg, dirs, &err);
    if (rc == GRPO_OK && reg.n_packs == 0) printf("no packs installed in %s\n", root);
    if (rc == GRPO_OK && reg.n_packs)
        printf("%-16s %-10s %-5s %-40s %s\n", "NAME", "VERSION", "ABI", "DIR", "IDS");
    for (int i = 0; rc == GRPO_OK && i < reg.n_packs; i++) {
        const grpo_pack *p = reg.packs[i];
        char abi[24];
        snprintf(abi, sizeof abi, "%u.%u", p->abi_major, p->abi_minor);
        printf("%-16s %-10s %-5s %-40s ", p->name, p->version, abi, p->dir);
        for (int j = 0; j < p->n_entries; j++) printf("%s%s", j ? "," : "", p->entries[j].id);
        printf("\n");
    }
    for (int i = 0; i < reg.n_broken; i++) printf("broken: %s\n", reg.broken[i].message);
    if (rc != GRPO_OK) fprintf(stderr, "grpo pack list: %s\n", err.message);
    grpo_registry_free(&reg);
    free(user);
    return rc == GRPO_OK ? 0 : 1;
}

int cmd_pack(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(pack_usage, stdout);
            return 0;
        }
    pack_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != 0) return rc;
    if (strcmp(a.sub, "install") == 0) return pack_install(&a);
    if (strcmp(a.sub, "list") == 0) return pack_list(&a);
    char done[4096];
    grpo_error err;
    grpo_error_init(&err);
    if (strcmp(a.sub, "bundle") == 0) {
        rc = grpo_pack_bundle(a.arg, a.out, done, sizeof done, &err);
        if (rc == GRPO_OK) printf("wrote %s\n", done);
    } else if (strcmp(a.sub, "remove") == 0) {
        rc = grpo_pack_remove(a.arg, a.prefix, done, sizeof done, &err);
        if (rc == GRPO_OK) printf("removed %s\n", done);
    } else {
        rc = grpo_pack_new(a.arg, a.dir, done, sizeof done, &err);
        if (rc == GRPO_OK)
            printf("wrote %s: build it with\n  cmake -S %s -B %s/build && cmake --build "
                   "%s/build\nthen check it with\n  grpo plugins check --plugin-path %s/build/"
                   "packs\n", done, done, done, done, done);
    }
    if (rc != GRPO_OK) fprintf(stderr, "grpo pack %s: %s\n", a.sub, err.message);
    return rc == GRPO_OK ? 0 : 1;
}
