/*
 * registry.h — packs, their manifests (pack.ini) and the registry that finds them.
 *
 * A pack is a directory holding pack.ini and the library it names. The registry scans a plugin
 * path reading manifests only (no plugin code runs), so listing is safe and fast. A plugin's
 * library is dlopen()ed only when a run uses one of its entries; the host then checks the magic,
 * runs grpo_plugin_init and checks that the library exports exactly what the manifest promised.
 *
 * pack.ini:
 *   [pack]
 *   name = builtin                   ; namespace of the ids below
 *   version = 0.1.0
 *   abi = 1.0                        ; GRPO_ABI_MAJOR.GRPO_ABI_MINOR compiled against
 *   library = libgrpo-rewards.so     ; relative to the pack directory, and inside it
 *   author = Jane Doe                ; (optional) metadata: author, license, homepage
 *   min_grpo = 0.1.0                 ; (optional) the oldest grpo the pack works with
 *
 *   [builtin.format]                 ; one section per entry, named by its full id
 *   kind = reward                    ; reward | model | env (an environment, grpo/env.h)
 *   description = one line
 *
 *   [builtin.dense]                  ; a model entry also lists the HF architectures it serves
 *   kind = model
 *   architectures = LlamaForCausalLM, Qwen2ForCausalLM
 *
 *   [builtin.format:pattern]         ; one section per config key of that entry
 *   type = list                      ; string | int | float | bool | list
 *   default = ^<think>...            ; list defaults: one line per element
 *   help = one line
 *
 *   [builtin.format:test.1]          ; a reward's self-test (any name after "test.")
 *   prompt = What is 1+1?            ; (optional) \n, \t and \\ are escapes in prompt,
 *   completion = <think>\nx\n</think>  ;   completion and answer
 *   answer = 2                       ; (optional) the row's "answer" field
 *   field.difficulty = 3             ; (optional) any other row field, as JSON
 *   key.value = 1.0                  ; (optional) a config key for this test (repeat: list)
 *   expect = 0.5                     ; the reward; nan for "no opinion"
 *   tolerance = 1e-6                 ; (optional) |got - expect| allowed; default 1e-5
 *   `grpo plugins check` (and `grpo pack install`) create the reward with the manifest's
 *   defaults and the test's key.* values, score the tests as one batch and compare.
 *
 * Reading rules (manifest.c; the INI dialect is the run files', io/ini_reader.h):
 * - [pack] needs name, version, abi, library; every entry needs kind and description; a key
 *   section needs type. Sections may come in any order. An unknown key in [pack] is a note (a
 *   manifest written for a newer grpo still loads); in an entry or key section it is an error
 *   (a misspelt default or type would silently change what the run gets).
 * - abi is the ABI the pack relies on (grpo/plugin.h, "Two versions"): the scan skips, with a
 *   warning, a pack whose abi this grpo cannot serve (other major, newer minor) or whose
 *   min_grpo is newer than this grpo; loading refuses a library whose magic is older than abi.
 * - Lines are at most 199 characters. A long value continues on indented lines, joined with
 *   nothing between (split it between two non-blank characters). A list default takes one
 *   "default = ..." line per element; architectures lines may repeat and split on commas. A key
 *   without default is required in the run file.
 * - ';' starts an inline comment only after whitespace: "a;b" keeps its ';', "a ;b" is "a".
 * - library must stay inside the pack directory: an absolute path, a '..' component or a path
 *   that resolves (through links) outside the directory is refused. Loading warns (one line per
 *   path) when the pack directory or the library is world-writable without the sticky bit:
 *   anyone on the machine could replace the code grpo runs.
 * - Every error is one line: "FILE:LINE: what was wrong; expected ...".
 */
#ifndef GRPO_REGISTRY_H
#define GRPO_REGISTRY_H

#include "grpo/plugin.h"
#include "io/keytype.h"
#include "host/plugin_call.h"

typedef enum grpo_entry_kind {
    GRPO_KIND_REWARD = 0,
    GRPO_KIND_MODEL = 1,
    GRPO_KIND_ENV = 2 /* grpo/env.h (1.5) */
} grpo_entry_kind;

/* "reward", "model" or "env": the word of pack.ini's kind key. */
const char *grpo_entry_kind_name(grpo_entry_kind k);

typedef struct grpo_key_def {
    char *name;
    grpo_key_type type;
    char **defaults; /* [n_defaults]; list keys may have several, other keys at most one */
    int n_defaults;
    int has_default; /* 1 when the manifest gives a default (a list's may have no elements);
                      * 0 means the run file must set the key */
    char *help;
} grpo_key_def;

struct grpo_pack;

/* One [ID:test.NAME] self-test vector of a reward entry. */
typedef struct grpo_selftest {
    char *name; /* "test.NAME" */
    int line;   /* its section header */
    char *prompt, *completion; /* escapes decoded */
    char **field_keys, **field_json; /* [n_fields] row fields: "answer" (a JSON string), field.* */
    int n_fields;
    char **cfg_keys, **cfg_values; /* [n_cfg] key.* lines in order (a list key repeats) */
    int n_cfg;
    double expect; /* NaN: the reward must have no opinion */
    double tolerance;
} grpo_selftest;

/* How a reward's score calls may run at once (pack.ini thread_safe; without it the library's
 * GRPO_REWARD_THREADSAFE flag, grpo/reward.h, means per_instance). */
typedef enum grpo_thread_safety {
    GRPO_THREAD_UNSAFE = 0,       /* false (default): one call at a time, on the trainer's thread */
    GRPO_THREAD_PER_INSTANCE = 1, /* per_instance: separate instances may score at once, each
                                   * one call at a time, from any thread */
    GRPO_THREAD_SAFE = 2          /* true: one instance may score on several threads at once */
} grpo_thread_safety;

typedef struct grpo_entry {
    char *id; /* "pack.name" */
    grpo_entry_kind kind;
    char *description;
    int32_t rows_independent;       /* reward: a row's score depends on that row alone, so rows
                                     * may be scored one by one (else whole groups: a group's rows
                                     * are scored together) */
    grpo_thread_safety thread_safe; /* reward: see grpo_thread_safety */
    int thread_safe_set;            /* 1: the manifest says; 0: the library's descriptor flag
                                     * GRPO_REWARD_THREADSAFE decides (per_instance, else false) */
    char **architectures; /* [n_architectures] model entries: HF architecture names served */
    int n_architectures;
    grpo_key_def *keys; /* [n_keys] in manifest order */
    int n_keys;
    grpo_selftest *tests; /* [n_tests] reward entries: self-tests in manifest order */
    int n_tests;
    struct grpo_pack *pack; /* owner */
} grpo_entry;

typedef struct grpo_pack {
    char *name, *version;
    unsigned abi_major, abi_minor;
    char *dir;           /* absolute pack directory */
    char *manifest_path; /* dir/pack.ini */
    char *library_path;  /* dir/<library> */
    grpo_entry *entries; /* [n_entries] */
    int n_entries;
    void *handle;        /* dlopen handle once loaded, else NULL */
    unsigned lib_abi_minor; /* once loaded: the minor its magic names (the SDK it was built
                             * against), which fixes the layout of arrays it indexes */
    grpo_library lib;    /* filled by grpo_plugin_init once loaded */
    char *author, *license, *homepage, *min_grpo; /* [pack] metadata; NULL when not given */
    char **notes;        /* [n_notes] "FILE:LINE: ..." warnings from parsing (unknown keys) */
    int n_notes;
    const struct grpo_pack *shadowed_by; /* set on a pack in reg->shadowed: the one that won */
} grpo_pack;

/* A pack.ini on the plugin path that could not be read: skipped by the scan, kept so that a run
 * naming one of its ids is told why the id is missing. */
typedef struct grpo_broken_pack {
    char *manifest_path; /* the pack.ini */
    char *message;       /* its error, "FILE:LINE: what; expected ..." */
    char **ids;          /* [n_ids] the ids its [ID] section headers declare (0 if unreadable) */
    int n_ids;
} grpo_broken_pack;

typedef struct grpo_registry {
    grpo_pack **packs; /* [n_packs] */
    int n_packs;
    grpo_broken_pack *broken; /* [n_broken] manifests that failed to parse, in scan order */
    int n_broken;
    grpo_pack **shadowed; /* [n_shadowed] packs named like one found earlier on the path */
    int n_shadowed;
} grpo_registry;

/* Parses one manifest into *pack (fields owned by pack; free with grpo_pack_free, which does not
 * free pack itself). pack->dir is the manifest's directory made absolute (realpath), and
 * manifest_path / library_path are built from it. On error *pack is left empty (zeroed) and
 * err->message is "FILE:LINE: what; expected ..." (GRPO_ERR_INVALID), or "FILE: cannot open
 * ..." (GRPO_ERR_IO). No plugin code runs. */
int grpo_manifest_parse(const char *manifest_path, grpo_pack *pack, grpo_error *err);
void grpo_pack_free(grpo_pack *pack);
/* The ids a manifest declares, read leniently from its [ID] section headers alone (no [pack],
 * no [ID:KEY]), so that even a manifest grpo_manifest_parse refuses names its ids. *ids is a
 * malloc'd array of malloc'd strings (NULL and 0 when the file cannot be read). */
void grpo_manifest_ids(const char *manifest_path, char ***ids, int *n_ids);

/* The default plugin path, in search order: --plugin-path dirs (extra, may be NULL), then
 * GRPO_PLUGIN_PATH (colon-separated), the built-in dir next to the executable, the install
 * prefix. Returns a malloc'd NULL-terminated array of malloc'd strings. */
char **grpo_plugin_path(const char *const *extra, int n_extra);
void grpo_plugin_path_free(char **dirs);
/* The per-user pack dir, ${XDG_DATA_HOME:-$HOME/.local/share}/grpo/packs (XDG_DATA_HOME only
 * when absolute), malloc'd; NULL when neither variable gives an absolute dir. On the default
 * plugin path after GRPO_PLUGIN_PATH; `grpo pack install` installs there. */
char *grpo_pack_user_dir(void);
/* 1 when name is the name of a pack grpo ships (plugins/ of its source tree: builtin, dense,
 * ...): a user pack of that name would replace it for every run, which `grpo pack install` refuses
 * without --force and every scan warns about. */
int grpo_pack_is_shipped(const char *name);
/* Why this grpo cannot serve a parsed pack (abi of another major or a newer minor, min_grpo newer
 * than this grpo), as one line "MANIFEST: ..." in buf; 0 (buf untouched) when it can. */
int grpo_pack_incompatible(const grpo_pack *p, char *buf, size_t size);

/* Scans each dir in dirs (NULL-terminated): every subdirectory holding a pack.ini (and a dir that
 * is itself a pack) is parsed. The same pack directory reached twice is read once. Precedence is
 * like PATH: a pack whose name (hence ids: ids start with the pack name) was found earlier on the
 * path is shadowed: kept in reg->shadowed with shadowed_by set, invisible to lookups, and one
 * line "note: pack 'N' VERSION (MANIFEST) is shadowed by VERSION (MANIFEST), which comes first
 * on the plugin path" goes to stderr. Missing dirs are skipped. reg starts zeroed ({0}); a
 * second scan adds to it. A manifest that fails to parse, or that this grpo cannot serve (abi,
 * min_grpo), does not stop the scan: it goes to reg->broken and one line "warning: skipping
 * broken pack: <its error>" goes to stderr, so one bad pack anywhere on the path blocks no
 * command. A parsed pack's notes go to stderr as "note: ...". Every line is printed once per
 * manifest and process (a command may scan twice). */
int grpo_registry_scan(grpo_registry *reg, char *const *dirs, grpo_error *err);
void grpo_registry_free(grpo_registry *reg);

/* The entry with this id, or NULL. */
const grpo_entry *grpo_registry_find(const grpo_registry *reg, const char *id);
/* The same as one line for an error message: "'ID' is declared by a broken pack that was skipped:
 * <its error>" ("may be declared" when its ids could not be read). Returns 0 (buf "") when no
 * broken pack explains id. */
int grpo_registry_broken_reason(const grpo_registry *reg, const char *id, char *buf, size_t size);
/* The next model entry after `after` (NULL: the first) that serves arch, in scan order; NULL
 * when none. Several packs may serve one architecture name (MiniMindForCausalLM: dense and moe). */
const grpo_entry *grpo_registry_next_architecture(const grpo_registry *reg, const char *arch,
                                                  const grpo_entry *after);
/* The id closest to a misspelt one (for "did you mean 'x'?"), or NULL when none is close. */
const char *grpo_registry_suggest(const grpo_registry *reg, const char *id);
/* Case-insensitive edit distance of two short names (INT_MAX when either is over 127 bytes). */
int grpo_edit_distance(const char *a, const char *b);

/* Loads the entry's pack library (once) and returns its descriptor: a const grpo_reward_desc* or
 * const grpo_model_desc* or const grpo_env_desc* according to e->kind. Refuses, with a message naming the library path:
 * an ELF file for another machine (read before dlopen: "built for aarch64; this grpo is
 * x86-64"), dlopen failure, missing magic or init symbol, wrong tag, abi_major mismatch, newer
 * abi_minor, a magic older than the manifest's abi (or of another major),
 * a too-small magic struct, pointer/float size mismatch, init failure, and any difference between
 * the ids the library enumerates and those the manifest lists. */
/* host is the services table the pack's grpo_plugin_init receives (MUST be non-NULL; the
 * caller owns which host that is). Main thread only. Loading is once per pack: later calls
 * return descriptors from the same library. A loaded library is never dlclose()d (not even by
 * grpo_registry_free), so descriptors stay valid for the life of the process. */
int grpo_registry_load(grpo_registry *reg, const grpo_entry *e, const grpo_host *host,
                       const void **desc, grpo_error *err);

#endif
