/* pack_new.c — the reward pack skeleton of `grpo pack new` (pack_new.h). The templates below
 * are the files, with @NAME@ (the pack name), @CNAME@ (the same as a C identifier) and @ABI@. */
#include "pack/pack_new.h"

#include "base/files.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char cmake_tmpl[] =
    "# The @NAME@ reward pack, built against an installed grpo SDK:\n"
    "#   cmake -S . -B build -DCMAKE_PREFIX_PATH=<grpo install prefix> && cmake --build build\n"
    "# The pack lands in build/packs/@NAME@ (pack.ini + library).\n"
    "cmake_minimum_required(VERSION 3.18)\n"
    "project(@CNAME@_pack VERSION 0.1.0 LANGUAGES C)\n"
    "\n"
    "find_package(grpo-sdk 0.1 REQUIRED)\n"
    "grpo_add_pack(NAME @NAME@ MANIFEST pack.ini SOURCES @NAME@.c)\n";

static const char manifest_tmpl[] =
    "; The @NAME@ reward pack (the format: share/doc/grpo-sdk/PACKS.md of the SDK install).\n"
    "[pack]\n"
    "name = @NAME@\n"
    "version = 0.1.0\n"
    "abi = @ABI@\n"
    "library = libgrpo-@NAME@.so\n"
    "\n"
    "[@NAME@.keyword]\n"
    "kind = reward\n"
    "description = 1 when the completion contains the keyword, else 0\n"
    "\n"
    "[@NAME@.keyword:keyword]\n"
    "type = string\n"
    "default = answer\n"
    "help = the text to look for (case-sensitive)\n"
    "\n"
    "; self-tests: grpo plugins check (and grpo pack install) score them and compare\n"
    "[@NAME@.keyword:test.1]\n"
    "prompt = What is 2+2?\n"
    "completion = the answer is 4\n"
    "expect = 1\n"
    "\n"
    "[@NAME@.keyword:test.2]\n"
    "completion = 4\n"
    "key.keyword = four\n"
    "expect = 0\n";

static const char source_tmpl[] =
    "/* @NAME@.c — the @NAME@ reward pack: @NAME@.keyword scores 1 when the completion contains\n"
    " * the keyword, else 0. Only <grpo/grpo.h> is included: a pack sees the SDK, never grpo's\n"
    " * core. The host has checked config values against pack.ini's types before create(), and\n"
    " * prefixes an error message with the run file's section: write just what is wrong. */\n"
    "#include <grpo/grpo.h>\n"
    "\n"
    "#include <stdlib.h>\n"
    "#include <string.h>\n"
    "\n"
    "GRPO_PLUGIN_MAGIC()\n"
    "\n"
    "typedef struct keyword_reward {\n"
    "    char *keyword; /* a copy: config strings are borrowed only during create() */\n"
    "} keyword_reward;\n"
    "\n"
    "static int32_t keyword_create(const grpo_host *host, const grpo_config *cfg, void **state,\n"
    "                              grpo_error *err) {\n"
    "    (void)host;\n"
    "    const char *word = grpo_config_get(cfg, \"keyword\");\n"
    "    if (!word || !*word)\n"
    "        return grpo_error_set(err, GRPO_ERR_INVALID, \"keyword is empty; expected some text\");\n"
    "    keyword_reward *s = malloc(sizeof *s);\n"
    "    if (s) s->keyword = malloc(strlen(word) + 1);\n"
    "    if (!s || !s->keyword) {\n"
    "        free(s);\n"
    "        return grpo_error_set(err, GRPO_ERR_NOMEM, \"out of memory\");\n"
    "    }\n"
    "    strcpy(s->keyword, word);\n"
    "    *state = s;\n"
    "    return GRPO_OK;\n"
    "}\n"
    "\n"
    "/* score() may run on several threads at once (GRPO_REWARD_THREADSAFE): state is read-only. */\n"
    "static int32_t keyword_score(void *state, const grpo_sample *samples, uint32_t n, float *out,\n"
    "                             grpo_error *err) {\n"
    "    (void)err;\n"
    "    const keyword_reward *s = state;\n"
    "    for (uint32_t i = 0; i < n; i++)\n"
    "        out[i] = strstr(samples[i].completion, s->keyword) ? 1.0f : 0.0f;\n"
    "    return GRPO_OK;\n"
    "}\n"
    "\n"
    "static void keyword_destroy(void *state) {\n"
    "    keyword_reward *s = state;\n"
    "    free(s->keyword);\n"
    "    free(s);\n"
    "}\n"
    "\n"
    "static const grpo_reward_desc keyword_desc = {\n"
    "    /* .struct_size = */ sizeof(grpo_reward_desc),\n"
    "    /* .id = */ \"@NAME@.keyword\",\n"
    "    /* .description = */ \"1 when the completion contains the keyword, else 0\",\n"
    "    /* .flags = */ GRPO_REWARD_THREADSAFE,\n"
    "    /* .create = */ keyword_create,\n"
    "    /* .score = */ keyword_score,\n"
    "    /* .destroy = */ keyword_destroy,\n"
    "};\n"
    "\n"
    "/* Every id of pack.ini, in any order, then NULL. */\n"
    "static const grpo_reward_desc *get_reward(uint32_t i) { return i == 0 ? &keyword_desc : NULL; }\n"
    "\n"
    "GRPO_EXPORT int32_t grpo_plugin_init(const grpo_host *host, grpo_library *lib,\n"
    "                                     grpo_error *err) {\n"
    "    (void)host, (void)err;\n"
    "    lib->get_reward = get_reward;\n"
    "    return GRPO_OK;\n"
    "}\n";

static const char readme_tmpl[] =
    "# @NAME@ — a grpo reward pack\n"
    "\n"
    "`@NAME@.keyword`: 1 when the completion contains `keyword` (default `answer`), else 0.\n"
    "\n"
    "Build against an installed grpo SDK, check, bundle and install:\n"
    "\n"
    "    cmake -S . -B build -DCMAKE_PREFIX_PATH=<grpo install prefix>\n"
    "    cmake --build build\n"
    "    grpo plugins check --plugin-path build/packs     # ABI, ids, self-tests\n"
    "    grpo pack bundle build/packs/@NAME@               # -> @NAME@-0.1.0.tar.gz\n"
    "    grpo pack install @NAME@-0.1.0.tar.gz\n"
    "\n"
    "Use it in a run file:\n"
    "\n"
    "    [reward.kw]\n"
    "    plugin = @NAME@.keyword\n"
    "    keyword = answer\n"
    "\n"
    "The pack author's guide is share/doc/grpo-sdk/PACKS.md in the SDK install.\n";

/* tmpl with its placeholders filled, malloc'd. */
static char *fill(const char *tmpl, const char *name, const char *cname, const char *abi) {
    const char *keys[3] = {"@NAME@", "@CNAME@", "@ABI@"}, *vals[3] = {name, cname, abi};
    size_t cap = strlen(tmpl) * 4 + 1, used = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    for (const char *s = tmpl; *s;) {
        int k = 0;
        while (k < 3 && strncmp(s, keys[k], strlen(keys[k])) != 0) k++;
        const char *piece = k < 3 ? vals[k] : s;
        size_t n = k < 3 ? strlen(vals[k]) : 1;
        if (used + n + 1 > cap) { /* names are short; a template grows at most 4x */
            free(out);
            return NULL;
        }
        memcpy(out + used, piece, n), used += n;
        s += k < 3 ? strlen(keys[k]) : 1;
    }
    out[used] = '\0';
    return out;
}

static int dir_is_empty_or_missing(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT;
    struct dirent *e;
    int empty = 1;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = 0;
    closedir(d);
    return empty;
}

int grpo_pack_new(const char *name, const char *dir, char *written, size_t size,
                  grpo_error *err) {
    size_t n = strlen(name);
    if (n == 0 || n > 40 || name[0] == '-' ||
        strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != n)
        return grpo_error_set(err, GRPO_ERR_INVALID, "'%s' is not a pack name; expected up to "
                              "40 letters, digits, '_' or '-'", name);
    snprintf(written, size, "%s", dir ? dir : name);
    if (!dir_is_empty_or_missing(written))
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s exists and is not empty; expected a new "
                              "folder for the pack", written);
    if (grpo_mkdirs(written) != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot create: %s", written,
                              strerror(errno));
    char cname[48], abi[24], file[4200];
    for (size_t i = 0; i <= n; i++) cname[i] = name[i] == '-' ? '_' : name[i];
    snprintf(abi, sizeof abi, "%d.%d", GRPO_ABI_MAJOR, GRPO_ABI_MINOR);
    const char *files[4][2] = {{"CMakeLists.txt", cmake_tmpl}, {"pack.ini", manifest_tmpl},
                               {NULL, source_tmpl}, {"README.md", readme_tmpl}};
    int rc = GRPO_OK;
    for (int i = 0; rc == GRPO_OK && i < 4; i++) {
        char base[64];
        snprintf(base, sizeof base, "%s.c", name);
        snprintf(file, sizeof file, "%s/%s", written, files[i][0] ? files[i][0] : base);
        char *text = fill(files[i][1], name, cname, abi);
        rc = text ? grpo_write_file_atomic(file, text, strlen(text), err)
                  : grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
        free(text);
    }
    return rc;
}
