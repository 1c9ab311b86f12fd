/*
 * cmd_plugins.c — `grpo plugins list` and `grpo plugins show ID`: what the plugin path offers.
 * Both read manifests only; no plugin code is loaded. `grpo plugins check [ID]...` is the one
 * that loads: it runs the host's checks on pack libraries (for pack authors and for debugging).
 * A pack whose pack.ini cannot be read is skipped with a warning (registry.h); list shows it at
 * the end, show and check of one of its ids say what is wrong with it, and check fails.
 */
#include "cli/cli.h"
#include "host/process.h"
#include "pack/pack_selftest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char plugins_usage[] =
    "usage: grpo plugins list [--plugin-path DIR]...\n"
    "       grpo plugins show ID [--plugin-path DIR]...\n"
    "       grpo plugins check [ID]... [--plugin-path DIR]...\n"
    "\n"
    "list and show read manifests (pack.ini) only; no plugin code runs. check loads the\n"
    "libraries of the given ids (all when none given) and runs every check the host makes before\n"
    "a run uses them: ABI magic, grpo_plugin_init, exported ids = manifest ids; then a reward's\n"
    "self-tests ([ID:test.N] sections of pack.ini): each must give its expected reward, the\n"
    "reward must not be NaN on all of them nor write to stdout.\n"
    "A pack whose pack.ini cannot be read, or that this grpo cannot serve (abi, min_grpo), is\n"
    "skipped with a warning; list shows it at the end. Like PATH, the first pack of a name on\n"
    "the plugin path wins: a later one is shadowed (one note; list shows it at the end).\n"
    "The plugin path is, in order:\n"
    "--plugin-path dirs, GRPO_PLUGIN_PATH (colon-separated), the per-user pack dir\n"
    "${XDG_DATA_HOME:-$HOME/.local/share}/grpo/packs (grpo pack install), <dir of grpo>/packs,\n"
    "<dir of grpo>/../lib/grpo/packs and the install prefix's pack dir.\n";

typedef struct plugins_args {
    const char *sub; /* "list", "show" or "check" */
    const char *id;  /* show: the id */
    const char **ids; /* [n_ids] check: the ids */
    int n_ids;
    const char **extra; /* [n_extra] --plugin-path dirs */
    int n_extra;
} plugins_args;

/* Returns 0 on success, 2 on a usage error (already printed). */
static int parse_args(int argc, char **argv, plugins_args *a) {
    memset(a, 0, sizeof *a);
    a->extra = calloc((size_t)argc + 1, sizeof *a->extra);
    a->ids = calloc((size_t)argc + 1, sizeof *a->ids);
    if (!a->extra || !a->ids) return 2;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--plugin-path") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "grpo plugins: --plugin-path needs a directory\n");
                return 2;
            }
            a->extra[a->n_extra++] = argv[++i];
        } else if (strncmp(arg, "--plugin-path=", 14) == 0) {
            a->extra[a->n_extra++] = arg + 14;
        } else if (arg[0] == '-' && arg[1]) {
            fprintf(stderr, "grpo plugins: unknown option '%s'\n%s", arg, plugins_usage);
            return 2;
        } else if (!a->sub) {
            a->sub = arg;
        } else if (!a->id && strcmp(a->sub, "show") == 0) {
            a->id = arg;
        } else if (strcmp(a->sub, "check") == 0) {
            a->ids[a->n_ids++] = arg;
        } else {
            fprintf(stderr, "grpo plugins: unexpected argument '%s'\n%s", arg, plugins_usage);
            return 2;
        }
    }
    if (!a->sub || (strcmp(a->sub, "list") != 0 && strcmp(a->sub, "show") != 0 &&
                    strcmp(a->sub, "check") != 0)) {
        if (a->sub) fprintf(stderr, "grpo plugins: unknown subcommand '%s'\n", a->sub);
        fputs(plugins_usage, stderr);
        return 2;
    }
    if (strcmp(a->sub, "show") == 0 && !a->id) {
        fprintf(stderr, "grpo plugins show: which plugin? expected an id such as "
                        "builtin.format\n%s", plugins_usage);
        return 2;
    }
    return 0;
}

static const char *kind_word(grpo_entry_kind k) {
    return grpo_entry_kind_name(k);
}

static int by_id(const void *a, const void *b) {
    return strcmp((*(const grpo_entry *const *)a)->id, (*(const grpo_entry *const *)b)->id);
}

static void print_path(FILE *out, char **dirs) {
    for (int i = 0; dirs[i]; i++) fprintf(out, "%s%s", i ? ":" : "", dirs[i]);
}

/* The packs a pack of the same name earlier on the path hides, then the broken packs the scan
 * skipped, one line each. */
static void print_broken(const grpo_registry *reg) {
    if (reg->n_shadowed) printf("\nshadowed packs (a pack of the same name comes first on the "
                                "plugin path):\n");
    for (int i = 0; i < reg->n_shadowed; i++) {
        const grpo_pack *p = reg->shadowed[i];
        printf("  %s %s  %s  (shadowed by %s %s)\n", p->name, p->version, p->manifest_path,
               p->shadowed_by->version, p->shadowed_by->manifest_path);
    }
    if (reg->n_broken) printf("\nbroken packs (skipped until fixed):\n");
    for (int i = 0; i < reg->n_broken; i++) printf("  %s\n", reg->broken[i].message);
}

/* One row per entry, sorted by id: ID  KIND  PACK  VERSION  DESCRIPTION; then broken packs. */
static int plugins_list(const grpo_registry *reg, char **dirs) {
    int n = 0;
    for (int i = 0; i < reg->n_packs; i++) n += reg->packs[i]->n_entries;
    if (n == 0) {
        printf("no plugins found on the plugin path: ");
        print_path(stdout, dirs);
        printf("\n");
        print_broken(reg);
        return 0;
    }
    const grpo_entry **rows = malloc((size_t)n * sizeof *rows);
    if (!rows) return 1;
    int w_id = 2, w_pack = 4, w_ver = 7, k = 0;
    for (int i = 0; i < reg->n_packs; i++)
        for (int j = 0; j < reg->packs[i]->n_entries; j++) {
            const grpo_entry *e = &reg->packs[i]->entries[j];
            rows[k++] = e;
            if ((int)strlen(e->id) > w_id) w_id = (int)strlen(e->id);
            if ((int)strlen(e->pack->name) > w_pack) w_pack = (int)strlen(e->pack->name);
            if ((int)strlen(e->pack->version) > w_ver) w_ver = (int)strlen(e->pack->version);
        }
    qsort(rows, (size_t)n, sizeof *rows, by_id);
    printf("%-*s  %-6s  %-*s  %-*s  %s\n", w_id, "ID", "KIND", w_pack, "PACK", w_ver, "VERSION",
           "DESCRIPTION");
    for (int i = 0; i < n; i++)
        printf("%-*s  %-6s  %-*s  %-*s  %s\n", w_id, rows[i]->id, kind_word(rows[i]->kind), w_pack,
               rows[i]->pack->name, w_ver, rows[i]->pack->version, rows[i]->description);
    free(rows);
    print_broken(reg);
    return 0;
}

static void print_key(const grpo_key_def *d) {
    printf("  %-20s %-6s ", d->name, grpo_key_type_name(d->type));
    if (!d->has_default)
        printf("(required)");
    else if (d->type != GRPO_KEY_LIST)
        printf("default %s", d->defaults[0]);
    else {
        printf("default [");
        for (int i = 0; i < d->n_defaults; i++) printf("%s'%s'", i ? ", " : "", d->defaults[i]);
        printf("]");
    }
    printf("\n");
    if (d->help && *d->help) printf("      %s\n", d->help);
}

static int plugins_show(const grpo_registry *reg, const char *id, char **dirs) {
    const grpo_entry *e = grpo_registry_find(reg, id);
    char broken[1400];
    if (!e && grpo_registry_broken_reason(reg, id, broken, sizeof broken)) {
        fprintf(stderr, "grpo plugins show: %s\n", broken);
        return 1;
    }
    if (!e) {
        const char *near = grpo_registry_suggest(reg, id);
        fprintf(stderr, "grpo plugins show: no plugin '%s' on the plugin path", id);
        if (near) fprintf(stderr, " (did you mean '%s'?)", near);
        fprintf(stderr, "; searched ");
        print_path(stderr, dirs);
        fprintf(stderr, "\n");
        return 1;
    }
    const grpo_pack *p = e->pack;
    printf("%s (%s)\n  %s\n\n", e->id, kind_word(e->kind), e->description);
    int abi_ok = p->abi_major == GRPO_ABI_MAJOR && p->abi_minor <= GRPO_ABI_MINOR;
    printf("pack:      %s %s (plugin ABI %u.%u", p->name, p->version, p->abi_major, p->abi_minor);
    if (!abi_ok) printf("; this grpo has %d.%d: it will refuse the library", GRPO_ABI_MAJOR,
                        GRPO_ABI_MINOR);
    printf(")\n");
    printf("dir:       %s\nmanifest:  %s\nlibrary:   %s\n", p->dir, p->manifest_path,
           p->library_path);
    const char *meta[4][2] = {{"author", p->author}, {"license", p->license},
                              {"homepage", p->homepage}, {"min_grpo", p->min_grpo}};
    for (int i = 0; i < 4; i++)
        if (meta[i][1]) printf("%-10s %s\n", meta[i][0], meta[i][1]);
    if (e->kind == GRPO_KIND_MODEL) {
        printf("architectures:");
        for (int i = 0; i < e->n_architectures; i++)
            printf("%s %s", i ? "," : "", e->architectures[i]);
        printf("%s\n", e->n_architectures ? "" : " (none: choose it by id)");
    }
    if (e->n_keys == 0) {
        printf("keys:      none\n");
        return 0;
    }
    printf("keys:\n");
    for (int i = 0; i < e->n_keys; i++) print_key(&e->keys[i]);
    return 0;
}

/* Loads one entry's library through every host check and runs its self-tests; prints one line
 * either way (and one more per failed self-test). */
static int check_entry(grpo_process *proc, const grpo_entry *e) {
    const void *desc;
    grpo_error err;
    grpo_error_init(&err);
    grpo_selftest_report rep;
    if (grpo_registry_load(&proc->reg, e, &proc->host, &desc, &err) != GRPO_OK ||
        grpo_entry_selftest(&proc->reg, e, &proc->host, NULL, &rep, &err) != GRPO_OK) {
        printf("FAIL  %s: %s\n", e->id, err.message);
        return 1;
    }
    printf("ok    %s (%s", e->id, e->pack->library_path);
    if (rep.n_tests) printf("; %d self-test%s passed", rep.n_tests, rep.n_tests > 1 ? "s" : "");
    printf(")\n");
    return 0;
}

static int plugins_check(grpo_process *proc, const char **ids, int n_ids) {
    grpo_registry *reg = &proc->reg;
    int failed = 0;
    for (int i = 0; i < n_ids; i++) {
        const grpo_entry *e = grpo_registry_find(reg, ids[i]);
        char broken[1400];
        if (e) {
            failed |= check_entry(proc, e);
            continue;
        }
        if (grpo_registry_broken_reason(reg, ids[i], broken, sizeof broken)) {
            printf("FAIL  %s: %s\n", ids[i], broken);
            failed = 1;
            continue;
        }
        const char *near = grpo_registry_suggest(reg, ids[i]);
        printf("FAIL  %s: no such plugin on the plugin path%s%s%s; searched ", ids[i],
               near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
        print_path(stdout, proc->plugin_dirs);
        printf("\n");
        failed = 1;
    }
    for (int i = 0; n_ids == 0 && i < reg->n_packs; i++)
        for (int j = 0; j < reg->packs[i]->n_entries; j++)
            failed |= check_entry(proc, &reg->packs[i]->entries[j]);
    for (int i = 0; n_ids == 0 && i < reg->n_broken; i++) {
        printf("FAIL  broken pack: %s\n", reg->broken[i].message);
        failed = 1;
    }
    return failed;
}

int cmd_plugins(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(plugins_usage, stdout);
            return 0;
        }
    plugins_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != 0) {
        free(a.extra), free(a.ids);
        return rc;
    }
    grpo_process proc;
    grpo_error err;
    grpo_error_init(&err);
    if (grpo_process_open(&proc, (const char *const *)a.extra, a.n_extra, NULL, 0, &err) != GRPO_OK) {
        fprintf(stderr, "grpo plugins: %s\n", err.message);
        rc = 1;
    } else if (strcmp(a.sub, "list") == 0) {
        rc = plugins_list(&proc.reg, proc.plugin_dirs);
    } else if (strcmp(a.sub, "check") == 0) {
        rc = plugins_check(&proc, a.ids, a.n_ids);
    } else {
        rc = plugins_show(&proc.reg, a.id, proc.plugin_dirs);
    }
    grpo_process_close(&proc);
    free(a.extra), free(a.ids);
    return rc;
}
