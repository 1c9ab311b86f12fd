/*
 * registry.c — finding packs on the plugin path (manifests only) and loading a pack's library
 * when a run needs one of its entries.
 *
 * Loading follows the handshake of grpo/plugin.h: dlopen(RTLD_NOW | RTLD_LOCAL), check the magic
 * data before any other call, run grpo_plugin_init once, then check that the library enumerates
 * exactly the ids (and kinds) its manifest lists. Any refusal closes the handle and names the
 * pack and the library file. A loaded library is never dlclose()d: descriptors and instances may
 * outlive the registry, and unloading saves nothing worth the risk.
 *
 * A pack.ini that fails to parse is kept aside as broken (with the ids its section headers name)
 * instead of failing the scan: one bad pack on the path must not block every command, and a run
 * that names one of its ids is still refused, with the pack's own error (broken_reason).
 */
#include "host/registry.h"
#include "host/pack_elf.h"
#include "host/testing.h"

#include "grpo/model.h"
#include "grpo/reward.h"
#include "grpo/env.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Bytes up to and including field: what a struct_size must cover for field to be readable. */
#define END_OF(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
/* A library enumerating more than this is treated as broken (a get_* that never returns NULL). */
#define MAX_EXPORTS 4096

/* ---- scanning ------------------------------------------------------------------------------ */

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static const grpo_pack *pack_with_dir(const grpo_registry *reg, const char *dir) {
    for (int i = 0; i < reg->n_packs; i++)
        if (strcmp(reg->packs[i]->dir, dir) == 0) return reg->packs[i];
    for (int i = 0; i < reg->n_shadowed; i++)
        if (strcmp(reg->shadowed[i]->dir, dir) == 0) return reg->shadowed[i];
    return NULL;
}

/* Prints "PREFIX: TEXT" to stderr once per process and text: a registry is scanned by several
 * parts of one command (the run, the host's model context), and one line per pack is enough. */
static void say_once(const char *prefix, const char *text) {
    static char **said;
    static int n_said;
    for (int i = 0; i < n_said; i++)
        if (strcmp(said[i], text) == 0) return;
    char **w = realloc(said, (size_t)(n_said + 1) * sizeof *w);
    if (w) {
        said = w;
        if ((said[n_said] = strdup(text))) n_said++;
    }
    fprintf(stderr, "%s: %s\n", prefix, text);
}

/* Remembers a manifest that cannot be used (its error in message) with the ids it declares, and
 * warns. */
static int add_broken(grpo_registry *reg, const char *manifest, const char *message) {
    grpo_broken_pack *b = realloc(reg->broken, (size_t)(reg->n_broken + 1) * sizeof *b);
    if (!b) return GRPO_ERR_NOMEM;
    reg->broken = b;
    b = &reg->broken[reg->n_broken];
    memset(b, 0, sizeof *b);
    b->manifest_path = strdup(manifest);
    b->message = strdup(message);
    if (!b->manifest_path || !b->message) {
        free(b->manifest_path), free(b->message);
        return GRPO_ERR_NOMEM;
    }
    grpo_manifest_ids(manifest, &b->ids, &b->n_ids);
    reg->n_broken++;
    say_once("warning: skipping broken pack", b->message);
    return GRPO_OK;
}

/* Numeric dotted-version order ("0.10.0" > "0.9.1"); missing parts count as 0. */
static int version_cmp(const char *a, const char *b) {
    while (*a || *b) {
        /* a part beyond ULONG_MAX reads as ULONG_MAX: the order of such versions is still sane */
        unsigned long x = strtoul(a, (char **)&a, 10), y = strtoul(b, (char **)&b, 10);
        if (x != y) return x < y ? -1 : 1;
        a += *a == '.', b += *b == '.';
        if ((*a && !isdigit((unsigned char)*a)) || (*b && !isdigit((unsigned char)*b))) break;
    }
    return 0;
}

/* Caught at scan so an unused incompatible pack is a warning, and a run naming it is told why. */
int grpo_pack_incompatible(const grpo_pack *p, char *buf, size_t size) {
    if (p->abi_major != GRPO_ABI_MAJOR || p->abi_minor > GRPO_ABI_MINOR)
        return snprintf(buf, size, "%s: pack '%s' %s relies on plugin ABI %u.%u; this grpo has "
                        "%d.%d (expected abi = %d.x with x <= %d): install a build of the pack "
                        "for this grpo, or upgrade grpo", p->manifest_path, p->name, p->version,
                        p->abi_major, p->abi_minor, GRPO_ABI_MAJOR, GRPO_ABI_MINOR,
                        GRPO_ABI_MAJOR, GRPO_ABI_MINOR), 1;
#ifdef GRPO_VERSION
    if (p->min_grpo && version_cmp(p->min_grpo, GRPO_VERSION) > 0)
        return snprintf(buf, size, "%s: pack '%s' %s needs grpo >= %s; this is grpo %s: upgrade "
                        "grpo", p->manifest_path, p->name, p->version, p->min_grpo,
                        GRPO_VERSION), 1;
#endif
    return 0;
}

/* The pack found earlier on the path under this name, or NULL. */
static const grpo_pack *pack_named(const grpo_registry *reg, const char *name) {
    for (int i = 0; i < reg->n_packs; i++)
        if (strcmp(reg->packs[i]->name, name) == 0) return reg->packs[i];
    return NULL;
}

static int push_pack(grpo_pack ***list, int *n, grpo_pack *pack) {
    grpo_pack **l = realloc(*list, (size_t)(*n + 1) * sizeof *l);
    if (!l) return GRPO_ERR_NOMEM;
    *list = l;
    l[(*n)++] = pack;
    return GRPO_OK;
}

int grpo_pack_is_shipped(const char *name) {
    static const char *const shipped[] = {GRPO_SHIPPED_PACKS NULL};
    for (int i = 0; shipped[i]; i++)
        if (strcmp(shipped[i], name) == 0) return 1;
    return 0;
}

/* Files a parsed pack: shadowed when its name came earlier on the path (first wins, like PATH),
 * else into reg->packs. A pack grpo ships that another shadows is a warning, at every run. */
static int file_pack(grpo_registry *reg, grpo_pack *pack) {
    for (int i = 0; i < pack->n_notes; i++) say_once("note", pack->notes[i]);
    const grpo_pack *first = pack_named(reg, pack->name);
    if (!first) return push_pack(&reg->packs, &reg->n_packs, pack);
    pack->shadowed_by = first;
    char line[3 * PATH_MAX];
    snprintf(line, sizeof line, "pack '%s' %s (%s) is shadowed by %s (%s), which comes first on "
             "the plugin path", pack->name, pack->version, pack->manifest_path, first->version,
             first->manifest_path);
    say_once(grpo_pack_is_shipped(pack->name) ? "warning" : "note", line);
    return push_pack(&reg->shadowed, &reg->n_shadowed, pack);
}

/* Parses dir/pack.ini unless that pack dir was read already. A manifest that fails to parse or
 * that this grpo cannot serve is recorded as broken and does not fail the scan. */
static int add_pack(grpo_registry *reg, const char *dir, grpo_error *err) {
    char manifest[PATH_MAX];
    if (snprintf(manifest, sizeof manifest, "%s/pack.ini", dir) >= (int)sizeof manifest) return 0;
    if (!is_file(manifest)) return 0;
    char *real = realpath(dir, NULL);
    int seen = real && pack_with_dir(reg, real);
    free(real);
    if (seen) return 0;
    grpo_pack *pack = calloc(1, sizeof *pack);
    if (!pack) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory reading %s", manifest);
    grpo_error perr;
    grpo_error_init(&perr);
    int rc = GRPO_OK;
    char why[sizeof perr.message + PATH_MAX];
    if (grpo_manifest_parse(manifest, pack, &perr) != GRPO_OK) {
        rc = add_broken(reg, manifest, perr.message);
    } else if (grpo_pack_incompatible(pack, why, sizeof why)) {
        rc = add_broken(reg, manifest, why);
        grpo_pack_free(pack);
    } else if ((rc = file_pack(reg, pack)) == GRPO_OK) {
        return GRPO_OK;
    } else {
        grpo_pack_free(pack);
    }
    free(pack);
    if (rc != GRPO_OK)
        return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory reading %s", manifest);
    return GRPO_OK;
}

static int not_hidden(const struct dirent *d) { return d->d_name[0] != '.'; }

/* A dir on the plugin path: a pack itself, or a folder of packs (read in name order). */
static int scan_dir(grpo_registry *reg, const char *dir, grpo_error *err) {
    char manifest[PATH_MAX];
    snprintf(manifest, sizeof manifest, "%s/pack.ini", dir);
    if (is_file(manifest)) return add_pack(reg, dir, err);
    struct dirent **names = NULL;
    int n = scandir(dir, &names, not_hidden, alphasort);
    if (n < 0) return GRPO_OK; /* missing or unreadable dirs are skipped */
    int rc = GRPO_OK;
    for (int i = 0; i < n; i++) {
        char sub[PATH_MAX];
        if (rc == GRPO_OK && snprintf(sub, sizeof sub, "%s/%s", dir, names[i]->d_name) <
                                 (int)sizeof sub)
            rc = add_pack(reg, sub, err);
        free(names[i]);
    }
    free(names);
    return rc;
}

int grpo_registry_scan(grpo_registry *reg, char *const *dirs, grpo_error *err) {
    for (int i = 0; dirs && dirs[i]; i++) {
        int rc = scan_dir(reg, dirs[i], err);
        if (rc != GRPO_OK) return rc;
    }
    return GRPO_OK;
}

void grpo_registry_free(grpo_registry *reg) {
    for (int i = 0; i < reg->n_packs; i++) {
        grpo_pack_free(reg->packs[i]);
        free(reg->packs[i]);
    }
    free(reg->packs);
    for (int i = 0; i < reg->n_shadowed; i++) {
        grpo_pack_free(reg->shadowed[i]);
        free(reg->shadowed[i]);
    }
    free(reg->shadowed);
    for (int i = 0; i < reg->n_broken; i++) {
        grpo_broken_pack *b = &reg->broken[i];
        for (int j = 0; j < b->n_ids; j++) free(b->ids[j]);
        free(b->ids), free(b->manifest_path), free(b->message);
    }
    free(reg->broken);
    memset(reg, 0, sizeof *reg);
}

/* ---- lookup -------------------------------------------------------------------------------- */

const grpo_entry *grpo_registry_find(const grpo_registry *reg, const char *id) {
    for (int i = 0; i < reg->n_packs; i++)
        for (int j = 0; j < reg->packs[i]->n_entries; j++)
            if (strcmp(reg->packs[i]->entries[j].id, id) == 0) return &reg->packs[i]->entries[j];
    return NULL;
}

const grpo_broken_pack *grpo_registry_broken_for(const grpo_registry *reg, const char *id) {
    for (int i = 0; i < reg->n_broken; i++)
        for (int j = 0; j < reg->broken[i].n_ids; j++)
            if (strcmp(reg->broken[i].ids[j], id) == 0) return &reg->broken[i];
    for (int i = 0; i < reg->n_broken; i++)
        if (reg->broken[i].n_ids == 0) return &reg->broken[i];
    return NULL;
}

int grpo_registry_broken_reason(const grpo_registry *reg, const char *id, char *buf, size_t size) {
    const grpo_broken_pack *b = grpo_registry_broken_for(reg, id);
    if (size) buf[0] = '\0';
    if (!b) return 0;
    snprintf(buf, size, "'%s' %s declared by a broken pack that was skipped: %s", id,
             b->n_ids ? "is" : "may be", b->message);
    return 1;
}

const grpo_entry *grpo_registry_find_architecture(const grpo_registry *reg, const char *arch) {
    for (int i = 0; i < reg->n_packs; i++)
        for (int j = 0; j < reg->packs[i]->n_entries; j++) {
            const grpo_entry *e = &reg->packs[i]->entries[j];
            for (int k = 0; e->kind == GRPO_KIND_MODEL && k < e->n_architectures; k++)
                if (strcmp(e->architectures[k], arch) == 0) return e;
        }
    return NULL;
}

const grpo_entry *grpo_registry_next_architecture(const grpo_registry *reg, const char *arch,
                                                  const grpo_entry *after) {
    int passed = after == NULL;
    for (int i = 0; i < reg->n_packs; i++)
        for (int j = 0; j < reg->packs[i]->n_entries; j++) {
            const grpo_entry *e = &reg->packs[i]->entries[j];
            if (!passed) {
                passed = e == after;
                continue;
            }
            for (int k = 0; e->kind == GRPO_KIND_MODEL && k < e->n_architectures; k++)
                if (strcmp(e->architectures[k], arch) == 0) return e;
        }
    return NULL;
}

const char *grpo_registry_suggest(const grpo_registry *reg, const char *id) {
    const char *best = NULL;
    int best_d = 3 + (int)strlen(id) / 4; /* a few typos, more for long ids */
    for (int i = 0; i < reg->n_packs; i++)
        for (int j = 0; j < reg->packs[i]->n_entries; j++) {
            int d = grpo_edit_distance(id, reg->packs[i]->entries[j].id);
            if (d < best_d) best_d = d, best = reg->packs[i]->entries[j].id;
        }
    return best;
}

const grpo_key_def *grpo_entry_key(const grpo_entry *e, const char *name) {
    for (int i = 0; i < e->n_keys; i++)
        if (strcmp(e->keys[i].name, name) == 0) return &e->keys[i];
    return NULL;
}

/* ---- loading ------------------------------------------------------------------------------- */

static const char *kind_name(grpo_entry_kind k) {
    return grpo_entry_kind_name(k);
}

/* Looks up a function symbol; NULL when absent. (dlsym returns data pointers; copying the bits
 * into a function pointer is what POSIX guarantees to work.) */
static void *sym(void *handle, const char *name) {
    dlerror();
    return dlsym(handle, name);
}

/* Checks the static magic data before anything else of the library runs. */
static int check_magic(const grpo_pack *pack, const grpo_magic *m, grpo_error *err) {
    const char *lib = pack->library_path;
    if (!m)
        return grpo_error_set(err, GRPO_ERR_ABI, "%s: grpo_plugin_magic() returned NULL; expected "
                              "GRPO_PLUGIN_MAGIC() data", lib);
    if (m->struct_size < END_OF(grpo_magic, tag))
        return grpo_error_set(err, GRPO_ERR_ABI, "%s: magic struct is %u bytes; expected at least "
                              "%zu (not a grpo plugin, or a broken one)", lib,
                              (unsigned)m->struct_size, END_OF(grpo_magic, tag));
    if (memcmp(m->tag, GRPO_MAGIC_TAG, sizeof m->tag) != 0) {
        char tag[sizeof m->tag + 1];
        for (size_t i = 0; i < sizeof m->tag; i++)
            tag[i] = isprint((unsigned char)m->tag[i]) ? m->tag[i] : '?';
        tag[sizeof m->tag] = '\0';
        return grpo_error_set(err, GRPO_ERR_ABI, "%s: magic tag is '%.7s'; expected '%s' (not a "
                              "grpo plugin)", lib, tag, GRPO_MAGIC_TAG);
    }
    if (m->abi_major != GRPO_ABI_MAJOR)
        return grpo_error_set(err, GRPO_ERR_ABI, "%s: built for plugin ABI %u.%u; this grpo has "
                              "ABI %d.%d and major versions must match: rebuild pack '%s' "
                              "against this grpo's SDK", lib, (unsigned)m->abi_major,
                              (unsigned)m->abi_minor, GRPO_ABI_MAJOR, GRPO_ABI_MINOR, pack->name);
    if (m->abi_minor > GRPO_ABI_MINOR)
        return grpo_error_set(err, GRPO_ERR_ABI, "%s: built for plugin ABI %u.%u, newer than this "
                              "grpo's %d.%d; expected minor <= %d: upgrade grpo or rebuild pack "
                              "'%s'", lib, (unsigned)m->abi_major, (unsigned)m->abi_minor,
                              GRPO_ABI_MAJOR, GRPO_ABI_MINOR, GRPO_ABI_MINOR, pack->name);
    /* the manifest's abi is what the pack relies on; a library compiled against an older SDK
     * (or another major) cannot provide it */
    if (m->abi_major != pack->abi_major || m->abi_minor < pack->abi_minor)
        return grpo_error_set(err, GRPO_ERR_ABI, "%s: built for plugin ABI %u.%u, but %s says "
                              "abi = %u.%u; expected the library built against SDK %u.%u or "
                              "newer (rebuild it, or lower abi in the manifest)", lib,
                              (unsigned)m->abi_major, (unsigned)m->abi_minor,
                              pack->manifest_path, pack->abi_major, pack->abi_minor,
                              pack->abi_major, pack->abi_minor);
    if (m->sizeof_pointer != sizeof(void *) || m->sizeof_float != sizeof(float))
        return grpo_error_set(err, GRPO_ERR_ABI, "%s: built with %u-byte pointers and %u-byte "
                              "floats; expected %zu and %zu (wrong architecture)", lib,
                              (unsigned)m->sizeof_pointer, (unsigned)m->sizeof_float,
                              sizeof(void *), sizeof(float));
    return GRPO_OK;
}

/* The manifest entry with this id, or NULL. */
static const grpo_entry *pack_entry(const grpo_pack *pack, const char *id) {
    for (int i = 0; i < pack->n_entries; i++)
        if (strcmp(pack->entries[i].id, id) == 0) return &pack->entries[i];
    return NULL;
}

/* One exported descriptor: big enough, functions present, listed in the manifest as this kind,
 * not exported twice. seen[] marks the manifest entries found so far. */
static int check_export(const grpo_pack *pack, grpo_entry_kind kind, uint32_t struct_size,
                        size_t min_size, const char *id, int has_functions, int *seen,
                        grpo_error *err) {
    const char *lib = pack->library_path, *k = kind_name(kind);
    if (struct_size < min_size)
        return grpo_error_set(err, GRPO_ERR_ABI, "%s: %s descriptor '%s' is %u bytes; expected at "
                              "least %zu", lib, k, id ? id : "?",
                              (unsigned)struct_size, min_size);
    if (!id)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: a %s descriptor has no id; expected "
                              "\"%s.NAME\"", lib, k, pack->name);
    const grpo_entry *e = pack_entry(pack, id);
    if (!e)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s exports %s '%s', which %s does not "
                              "list; expected every exported id in the manifest", lib, k, id,
                              pack->manifest_path);
    if (e->kind != kind)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s exports '%s' as a %s, but %s lists it "
                              "with kind = %s", lib, id, k, pack->manifest_path,
                              kind_name(e->kind));
    int *s = &seen[e - pack->entries];
    if (*s)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s exports %s '%s' twice; expected each "
                              "id once", lib, k, id);
    if (!has_functions)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: %s '%s' lacks a required function; "
                              "expected %s", lib, k, id, kind == GRPO_KIND_REWARD ?
                              "create, score and destroy" : kind == GRPO_KIND_ENV ?
                              "create, reset, step, final_reward, close and destroy" :
                              "create and destroy");
    *s = 1;
    return GRPO_OK;
}

/* Enumerates the library's rewards and models and compares them with the manifest. */
static int check_exports(const grpo_pack *pack, const grpo_library *lib, grpo_error *err) {
    int *seen = calloc((size_t)pack->n_entries + 1, sizeof *seen);
    if (!seen) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    int rc = GRPO_OK;
    for (uint32_t i = 0; rc == GRPO_OK && lib->get_reward; i++) {
        const grpo_reward_desc *d = lib->get_reward(i);
        if (!d) break;
        if (i >= MAX_EXPORTS) {
            rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: get_reward never returns NULL",
                                pack->library_path);
            break;
        }
        /* the 1.0 descriptor is the least a pack may export; later fields are optional */
        size_t min = END_OF(grpo_reward_desc, destroy);
        int fns = d->struct_size >= min && d->create && d->score && d->destroy;
        rc = check_export(pack, GRPO_KIND_REWARD, d->struct_size, min,
                          d->struct_size >= END_OF(grpo_reward_desc, id) ? d->id : NULL, fns,
                          seen, err);
    }
    for (uint32_t i = 0; rc == GRPO_OK && lib->get_model; i++) {
        const grpo_model_desc *d = lib->get_model(i);
        if (!d) break;
        if (i >= MAX_EXPORTS) {
            rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: get_model never returns NULL",
                                pack->library_path);
            break;
        }
        /* a 1.2 model descriptor ends at expert_load; vocab_size (1.3) is optional */
        size_t min = END_OF(grpo_model_desc, expert_load);
        int fns = d->struct_size >= min && d->create && d->destroy;
        rc = check_export(pack, GRPO_KIND_MODEL, d->struct_size, min,
                          d->struct_size >= END_OF(grpo_model_desc, id) ? d->id : NULL, fns,
                          seen, err);
    }
    for (uint32_t i = 0; rc == GRPO_OK && lib->get_env; i++) {
        const grpo_env_desc *d = lib->get_env(i);
        if (!d) break;
        if (i >= MAX_EXPORTS) {
            rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s: get_env never returns NULL",
                                pack->library_path);
            break;
        }
        size_t min = END_OF(grpo_env_desc, destroy);
        int fns = d->struct_size >= min && d->create && d->reset && d->step && d->final_reward &&
                  d->close && d->destroy;
        rc = check_export(pack, GRPO_KIND_ENV, d->struct_size, min,
                          d->struct_size >= END_OF(grpo_env_desc, id) ? d->id : NULL, fns, seen,
                          err);
    }
    for (int i = 0; rc == GRPO_OK && i < pack->n_entries; i++)
        if (!seen[i])
            rc = grpo_error_set(err, GRPO_ERR_INVALID, "%s lists %s '%s', but %s does not export "
                                "it; expected the library to enumerate every id of its manifest",
                                pack->manifest_path, kind_name(pack->entries[i].kind),
                                pack->entries[i].id, pack->library_path);
    free(seen);
    return rc;
}

/* One line when anyone on the machine may replace path (world-writable, no sticky bit): the code
 * grpo is about to run would then be whatever another user put there. */
static void warn_world_writable(const char *path, const char *what) {
    struct stat st;
    if (stat(path, &st) == 0 && (st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
        fprintf(stderr, "warning: %s %s is world-writable: any user of this machine can replace "
                "the plugin code grpo loads from it (chmod o-w)\n", what, path);
}

/* dlopen + magic + init + export check; on success pack->handle and pack->lib are set. */
static int pack_open(grpo_pack *pack, const grpo_host *host, grpo_error *err) {
    const char *path = pack->library_path;
    warn_world_writable(pack->dir, "pack directory");
    warn_world_writable(path, "pack library");
    char why[256];
    if (grpo_elf_check(path, why, sizeof why))
        return grpo_error_set(err, GRPO_ERR_ABI, "pack '%s' (%s): cannot load library: %s: %s",
                              pack->name, pack->manifest_path, path, why);
    grpo_plugin_call_begin(path, NULL, "dlopen (its constructors)");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    grpo_plugin_call_end();
    if (!h)
        return grpo_error_set(err, GRPO_ERR_IO, "pack '%s' (%s): cannot load library: %s",
                              pack->name, pack->manifest_path, dlerror());
    grpo_plugin_magic_fn magic_fn;
    grpo_plugin_init_fn init_fn;
    void *p_magic = sym(h, GRPO_MAGIC_SYMBOL), *p_init = sym(h, GRPO_INIT_SYMBOL);
    memcpy(&magic_fn, &p_magic, sizeof magic_fn);
    memcpy(&init_fn, &p_init, sizeof init_fn);
    int rc = GRPO_OK;
    if (!p_magic)
        rc = grpo_error_set(err, GRPO_ERR_ABI, "%s: no %s symbol; expected GRPO_PLUGIN_MAGIC() in "
                            "one source file of pack '%s' (built without the grpo SDK?)", path,
                            GRPO_MAGIC_SYMBOL, pack->name);
    if (rc == GRPO_OK) rc = check_magic(pack, magic_fn(), err);
    if (rc == GRPO_OK) pack->lib_abi_minor = magic_fn()->abi_minor;
    if (rc == GRPO_OK && !p_init)
        rc = grpo_error_set(err, GRPO_ERR_ABI, "%s: no %s symbol; expected pack '%s' to define "
                            "GRPO_EXPORT int32_t %s(...)", path, GRPO_INIT_SYMBOL, pack->name,
                            GRPO_INIT_SYMBOL);
    grpo_library lib;
    memset(&lib, 0, sizeof lib);
    lib.struct_size = (uint32_t)sizeof lib;
    if (rc == GRPO_OK) {
        grpo_error ierr;
        grpo_error_init(&ierr);
        grpo_plugin_call_begin(path, NULL, GRPO_INIT_SYMBOL);
        int32_t st = init_fn(host, &lib, &ierr);
        grpo_plugin_call_end();
        if (st != GRPO_OK)
            rc = grpo_error_set(err, st < 0 ? st : GRPO_ERR_INTERNAL, "pack '%s' (%s): %s "
                                "failed: %s", pack->name, path, GRPO_INIT_SYMBOL,
                                grpo_plugin_message(&ierr));
    }
    if (rc == GRPO_OK) rc = check_exports(pack, &lib, err);
    if (rc != GRPO_OK) {
        dlclose(h);
        return rc;
    }
    pack->handle = h;
    pack->lib = lib;
    return GRPO_OK;
}

int grpo_registry_load(grpo_registry *reg, const grpo_entry *e, const grpo_host *host,
                       const void **desc, grpo_error *err) {
    (void)reg; /* entries know their pack */
    *desc = NULL;
    grpo_pack *pack = e->pack;
    if (!host)
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: loading pack %s needs a host table",
                              e->id, pack->name);
    if (!pack->handle) {
        int rc = pack_open(pack, host, err);
        if (rc != GRPO_OK) return rc;
    }
    for (uint32_t i = 0; e->kind == GRPO_KIND_REWARD && pack->lib.get_reward; i++) {
        const grpo_reward_desc *d = pack->lib.get_reward(i);
        if (!d) break;
        if (strcmp(d->id, e->id) == 0) return *desc = d, GRPO_OK;
    }
    for (uint32_t i = 0; e->kind == GRPO_KIND_MODEL && pack->lib.get_model; i++) {
        const grpo_model_desc *d = pack->lib.get_model(i);
        if (!d) break;
        if (strcmp(d->id, e->id) == 0) return *desc = d, GRPO_OK;
    }
    for (uint32_t i = 0; e->kind == GRPO_KIND_ENV && pack->lib.get_env; i++) {
        const grpo_env_desc *d = pack->lib.get_env(i);
        if (!d) break;
        if (strcmp(d->id, e->id) == 0) return *desc = d, GRPO_OK;
    }
    return grpo_error_set(err, GRPO_ERR_INTERNAL, "%s: '%s' vanished after loading",
                          pack->library_path, e->id);
}
