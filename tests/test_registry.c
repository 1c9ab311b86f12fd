/* test_registry.c — the plugin path, scanning pack directories (broken manifests skipped and
 * explained), lookups, loading a pack's library (and each way the host refuses a broken one:
 * test plugins from tests/plugins.cmake), what a misbehaving reward can do to a batch (the
 * misbehave pack), and the default host services table. */
#include <check.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "grpo/model.h"
#include "grpo/reward.h"
#include "host/host.h"
#include "host/registry.h"
#include "train/rewards.h"
#include "train/reward_worker.h"
#include "host/testing.h"
#include "tmpdir.h"

#include <math.h>

#define TEST_PLUGIN_DIR GRPO_BINARY_DIR "/tests/plugins"
#define MISBEHAVE_DIR TEST_PLUGIN_DIR "/misbehave"

static char root[256]; /* a fresh temp dir per test, realpath'd */

static void setup(void) {
    tmpdir_make(root, sizeof root, "registry");
}

static void teardown(void) { tmpdir_remove(root); }

/* Writes root/rel/pack.ini for pack `name` with one entry `id` (a model serving arch when arch is
 * non-NULL, else a reward). Returns the manifest path in out. */
static void write_pack(const char *rel, const char *name, const char *id, const char *arch,
                       char *out, size_t out_size) {
    char dir[PATH_MAX / 2];
    snprintf(dir, sizeof dir, "%s/%s", root, rel);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(out, out_size, "%s/pack.ini", dir);
    FILE *f = fopen(out, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "[pack]\nname = %s\nversion = 1.0.0\nabi = 1.0\nlibrary = lib%s.so\n\n", name,
            name);
    if (arch)
        fprintf(f, "[%s]\nkind = model\ndescription = m\narchitectures = %s\n", id, arch);
    else
        fprintf(f, "[%s]\nkind = reward\ndescription = r\n", id);
    fclose(f);
}

static int scan(grpo_registry *reg, char *const *dirs, grpo_error *err) {
    memset(reg, 0, sizeof *reg);
    grpo_error_init(err);
    return grpo_registry_scan(reg, dirs, err);
}

/* ---- plugin path ------------------------------------------------------------------------- */

START_TEST(plugin_path_order) {
    setenv("GRPO_PLUGIN_PATH", "/env/one::/env/two:", 1);
    setenv("XDG_DATA_HOME", "/xdg/data", 1);
    const char *extra[] = {"/cli/one", "/cli/two"};
    char **dirs = grpo_plugin_path(extra, 2);
    ck_assert_str_eq(dirs[0], "/cli/one");
    ck_assert_str_eq(dirs[1], "/cli/two");
    ck_assert_str_eq(dirs[2], "/env/one"); /* empty fields are skipped */
    ck_assert_str_eq(dirs[3], "/env/two");
    ck_assert_str_eq(dirs[4], "/xdg/data/grpo/packs"); /* the per-user packs */
    grpo_plugin_path_free(dirs);
    /* without XDG_DATA_HOME (or with a relative one, which the XDG spec says to ignore): HOME */
    setenv("XDG_DATA_HOME", "relative/data", 1);
    setenv("HOME", "/home/someone", 1);
    char *user = grpo_pack_user_dir();
    ck_assert_str_eq(user, "/home/someone/.local/share/grpo/packs");
    free(user);
    unsetenv("XDG_DATA_HOME");
    unsetenv("HOME");
    ck_assert_ptr_null(grpo_pack_user_dir());
    dirs = grpo_plugin_path(extra, 2);
    char exe[PATH_MAX], want[PATH_MAX + 8];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    ck_assert(n > 0);
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    snprintf(want, sizeof want, "%s/packs", exe);
    ck_assert_str_eq(dirs[4], want); /* no HOME: no per-user dir */
    int count = 0;
    while (dirs[count]) count++;
    ck_assert_int_ge(count, 6); /* + the install layout next to the exe and the install prefix */
    grpo_plugin_path_free(dirs);

    unsetenv("GRPO_PLUGIN_PATH");
    dirs = grpo_plugin_path(NULL, 0);
    ck_assert_str_eq(dirs[0], want);
    grpo_plugin_path_free(dirs);
}
END_TEST

/* ---- scanning ---------------------------------------------------------------------------- */

START_TEST(scan_reads_packs_from_two_dirs) {
    char m[PATH_MAX], a[PATH_MAX], b[PATH_MAX];
    write_pack("A/one", "one", "one.x", NULL, m, sizeof m);
    write_pack("B/two", "two", "two.m", "FooForCausalLM, BarForCausalLM", m, sizeof m);
    write_pack("B/not-a-pack/deeper", "three", "three.x", NULL, m, sizeof m); /* too deep */
    snprintf(a, sizeof a, "%s/A", root);
    snprintf(b, sizeof b, "%s/B", root);
    char *dirs[] = {a, b, NULL};
    grpo_registry reg;
    grpo_error err;
    ck_assert_int_eq(scan(&reg, dirs, &err), GRPO_OK);
    ck_assert_int_eq(reg.n_packs, 2);
    const grpo_entry *x = grpo_registry_find(&reg, "one.x");
    ck_assert_ptr_nonnull(x);
    ck_assert_int_eq(x->kind, GRPO_KIND_REWARD);
    ck_assert_str_eq(x->pack->name, "one");
    const grpo_entry *mdl = grpo_registry_find(&reg, "two.m");
    ck_assert_ptr_nonnull(mdl);
    ck_assert_ptr_eq(grpo_registry_find_architecture(&reg, "BarForCausalLM"), mdl);
    ck_assert_ptr_null(grpo_registry_find_architecture(&reg, "BazForCausalLM"));
    ck_assert_ptr_null(grpo_registry_find(&reg, "three.x"));
    ck_assert_ptr_null(grpo_registry_find(&reg, "one"));
    grpo_registry_free(&reg);
    ck_assert_int_eq(reg.n_packs, 0);
}
END_TEST

/* Replaces the first `from` in the file at path with `to`. */
static void edit_file(const char *path, const char *from, const char *to) {
    static char text[8192], out[8192 + 256];
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    char *at = strstr(text, from);
    ck_assert_ptr_nonnull(at);
    snprintf(out, sizeof out, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    f = fopen(path, "w");
    fputs(out, f);
    fclose(f);
}

static int begin_capture(FILE *stream, const char *path);
static void end_capture(FILE *stream, int saved);
static const char *read_text(const char *path);

/* Like PATH: the first pack of a name wins, the later one is kept aside, and one note names both
 * (however often the path is scanned). */
START_TEST(first_pack_on_the_path_shadows_a_later_one) {
    char m1[PATH_MAX], m2[PATH_MAX], a[PATH_MAX], b[PATH_MAX], log[PATH_MAX];
    write_pack("A/one", "one", "one.x", NULL, m1, sizeof m1);
    write_pack("B/one-copy", "one", "one.x", NULL, m2, sizeof m2);
    edit_file(m2, "version = 1.0.0", "version = 0.9.0");
    snprintf(a, sizeof a, "%s/A", root);
    snprintf(b, sizeof b, "%s/B", root);
    snprintf(log, sizeof log, "%s/stderr.txt", root);
    char *dirs[] = {a, b, NULL};
    grpo_registry reg, again;
    grpo_error err;
    int saved = begin_capture(stderr, log);
    int rc = scan(&reg, dirs, &err), rc2 = scan(&again, dirs, &err);
    end_capture(stderr, saved);
    ck_assert_int_eq(rc, GRPO_OK);
    ck_assert_int_eq(rc2, GRPO_OK);
    ck_assert_int_eq(reg.n_packs, 1);
    ck_assert_str_eq(grpo_registry_find(&reg, "one.x")->pack->manifest_path, m1);
    ck_assert_int_eq(reg.n_shadowed, 1);
    ck_assert_str_eq(reg.shadowed[0]->manifest_path, m2);
    ck_assert_ptr_eq(reg.shadowed[0]->shadowed_by, reg.packs[0]);
    char want[3 * PATH_MAX];
    snprintf(want, sizeof want, "note: pack 'one' 0.9.0 (%s) is shadowed by 1.0.0 (%s), which "
             "comes first on the plugin path\n", m2, m1);
    ck_assert_str_eq(read_text(log), want);
    grpo_registry_free(&reg);
    grpo_registry_free(&again);
    /* `grpo plugins list` shows the shadowed one */
    char out_path[PATH_MAX];
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", root);
    char *argv[] = {"plugins", "list", "--plugin-path", a, "--plugin-path", b, NULL};
    int saved_out = begin_capture(stdout, out_path);
    saved = begin_capture(stderr, log);
    ck_assert_int_eq(cmd_plugins(6, argv), 0);
    end_capture(stderr, saved);
    end_capture(stdout, saved_out);
    snprintf(want, sizeof want, "shadowed packs (a pack of the same name comes first on the "
             "plugin path):\n  one 0.9.0  %s  (shadowed by 1.0.0 %s)\n", m2, m1);
    ck_assert_msg(strstr(read_text(out_path), want), "got:\n%s", read_text(out_path));
    /* the other order: B's copy wins */
    char *rev[] = {b, a, NULL};
    ck_assert_int_eq(scan(&reg, rev, &err), GRPO_OK);
    ck_assert_str_eq(grpo_registry_find(&reg, "one.x")->pack->version, "0.9.0");
    ck_assert_int_eq(reg.n_shadowed, 1);
    grpo_registry_free(&reg);
}
END_TEST

/* A pack this grpo cannot serve (abi of another major or a newer minor, min_grpo newer than this
 * grpo) is skipped with a warning at scan, and a run naming its id is told why. */
START_TEST(incompatible_pack_is_skipped_and_explained) {
    char m1[PATH_MAX], m2[PATH_MAX], m3[PATH_MAX], a[PATH_MAX], abi[32];
    write_pack("A/newmajor", "newmajor", "newmajor.x", NULL, m1, sizeof m1);
    snprintf(abi, sizeof abi, "abi = %d.0", GRPO_ABI_MAJOR + 1);
    edit_file(m1, "abi = 1.0", abi);
    write_pack("A/newminor", "newminor", "newminor.x", NULL, m2, sizeof m2);
    snprintf(abi, sizeof abi, "abi = %d.%d", GRPO_ABI_MAJOR, GRPO_ABI_MINOR + 1);
    edit_file(m2, "abi = 1.0", abi);
    write_pack("A/future", "future", "future.x", NULL, m3, sizeof m3);
    edit_file(m3, "library", "min_grpo = 999.0\nlibrary");
    write_pack("A/ok", "ok", "ok.x", NULL, m3, sizeof m3);
    snprintf(a, sizeof a, "%s/A", root);
    char *dirs[] = {a, NULL};
    grpo_registry reg;
    grpo_error err;
    ck_assert_int_eq(scan(&reg, dirs, &err), GRPO_OK);
    ck_assert_int_eq(reg.n_packs, 1);
    ck_assert_int_eq(reg.n_broken, 3);
    char why[2048], want[PATH_MAX + 600];
    ck_assert_int_eq(grpo_registry_broken_reason(&reg, "newmajor.x", why, sizeof why), 1);
    snprintf(want, sizeof want, "'newmajor.x' is declared by a broken pack that was skipped: %s: "
             "pack 'newmajor' 1.0.0 relies on plugin ABI %d.0; this grpo has %d.%d (expected abi "
             "= %d.x with x <= %d): install a build of the pack for this grpo, or upgrade grpo",
             m1, GRPO_ABI_MAJOR + 1, GRPO_ABI_MAJOR, GRPO_ABI_MINOR, GRPO_ABI_MAJOR,
             GRPO_ABI_MINOR);
    ck_assert_str_eq(why, want);
    ck_assert_int_eq(grpo_registry_broken_reason(&reg, "newminor.x", why, sizeof why), 1);
    ck_assert_msg(strstr(why, "relies on plugin ABI"), "%s", why);
    ck_assert_int_eq(grpo_registry_broken_reason(&reg, "future.x", why, sizeof why), 1);
    ck_assert_msg(strstr(why, "pack 'future' 1.0.0 needs grpo >= 999.0; this is grpo "), "%s",
                  why);
    grpo_registry_free(&reg);
}
END_TEST

START_TEST(same_pack_dir_twice_is_read_once) {
    char m[PATH_MAX], a[PATH_MAX], link[PATH_MAX], pack_dir[PATH_MAX];
    write_pack("A/one", "one", "one.x", NULL, m, sizeof m);
    snprintf(a, sizeof a, "%s/A", root);
    snprintf(link, sizeof link, "%s/A-link", root);
    snprintf(pack_dir, sizeof pack_dir, "%s/A/one", root);
    ck_assert_int_eq(symlink(a, link), 0);
    /* the same dir, a symlink to it, and the pack dir itself as a path entry */
    char *dirs[] = {a, a, link, pack_dir, NULL};
    grpo_registry reg;
    grpo_error err;
    ck_assert_int_eq(scan(&reg, dirs, &err), GRPO_OK);
    ck_assert_int_eq(reg.n_packs, 1);
    ck_assert_str_eq(reg.packs[0]->dir, pack_dir);
    grpo_registry_free(&reg);
}
END_TEST

START_TEST(missing_dir_is_skipped) {
    char m[PATH_MAX], a[PATH_MAX];
    write_pack("A/one", "one", "one.x", NULL, m, sizeof m);
    snprintf(a, sizeof a, "%s/A", root);
    char *dirs[] = {"/nonexistent/grpo/packs", a, NULL};
    grpo_registry reg;
    grpo_error err;
    ck_assert_int_eq(scan(&reg, dirs, &err), GRPO_OK);
    ck_assert_int_eq(reg.n_packs, 1);
    grpo_registry_free(&reg);
}
END_TEST

/* Sends stream (stdout or stderr) to path until end_capture; returns the saved descriptor. Works
 * with CK_FORK=no too, where the stream must come back for the rest of the run. */
static int begin_capture(FILE *stream, const char *path) {
    fflush(stream);
    int saved = dup(fileno(stream));
    FILE *f = fopen(path, "w");
    ck_assert(saved >= 0 && f);
    ck_assert_int_ge(dup2(fileno(f), fileno(stream)), 0);
    fclose(f);
    return saved;
}

static void end_capture(FILE *stream, int saved) {
    fflush(stream);
    dup2(saved, fileno(stream));
    close(saved);
}

/* The whole of a small file (static buffer). */
static const char *read_text(const char *path) {
    static char buf[16384];
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int count_of(const char *text, const char *what) {
    int n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what)) n++;
    return n;
}

START_TEST(broken_manifest_is_skipped_and_explained) {
    char good[PATH_MAX], bad[PATH_MAX], a[PATH_MAX], log[PATH_MAX];
    write_pack("A/one", "one", "one.x", NULL, good, sizeof good);
    write_pack("A/two", "two", "two.x", NULL, bad, sizeof bad);
    FILE *f = fopen(bad, "a");
    fputs("colour = red\n", f); /* line 10 of the manifest */
    fclose(f);
    snprintf(a, sizeof a, "%s/A", root);
    snprintf(log, sizeof log, "%s/stderr.txt", root);
    char *dirs[] = {a, NULL};
    grpo_registry reg, again;
    grpo_error err;
    int saved = begin_capture(stderr, log);
    int rc = scan(&reg, dirs, &err), rc2 = scan(&again, dirs, &err);
    end_capture(stderr, saved);
    ck_assert_int_eq(rc, GRPO_OK); /* one bad pack blocks nothing */
    ck_assert_int_eq(rc2, GRPO_OK);
    ck_assert_int_eq(reg.n_packs, 1);
    ck_assert_ptr_nonnull(grpo_registry_find(&reg, "one.x"));
    ck_assert_ptr_null(grpo_registry_find(&reg, "two.x"));
    ck_assert_int_eq(reg.n_broken, 1);
    char want[PATH_MAX + 400];
    snprintf(want, sizeof want, "%s:10: unknown key 'colour' in [two.x]; expected one of kind, "
             "description, architectures, rows_independent, thread_safe", bad);
    ck_assert_str_eq(reg.broken[0].message, want);
    ck_assert_str_eq(reg.broken[0].manifest_path, bad);
    ck_assert_int_eq(reg.broken[0].n_ids, 1);
    ck_assert_str_eq(reg.broken[0].ids[0], "two.x");
    /* an id of the broken pack is explained; other missing ids are not its doing */
    ck_assert_ptr_eq(grpo_registry_broken_for(&reg, "two.x"), &reg.broken[0]);
    ck_assert_ptr_null(grpo_registry_broken_for(&reg, "three.x"));
    char why[2048], line[PATH_MAX + 600];
    ck_assert_int_eq(grpo_registry_broken_reason(&reg, "two.x", why, sizeof why), 1);
    snprintf(line, sizeof line, "'two.x' is declared by a broken pack that was skipped: %s", want);
    ck_assert_str_eq(why, line);
    ck_assert_int_eq(grpo_registry_broken_reason(&reg, "three.x", why, sizeof why), 0);
    /* one warning line per broken manifest, however often the path is scanned */
    snprintf(line, sizeof line, "warning: skipping broken pack: %s\n", want);
    ck_assert_str_eq(read_text(log), line);
    grpo_registry_free(&reg);
    grpo_registry_free(&again);
    ck_assert_int_eq(reg.n_broken, 0);
}
END_TEST

START_TEST(unreadable_manifest_explains_any_missing_id) {
    char good[PATH_MAX], bad[PATH_MAX], a[PATH_MAX];
    write_pack("A/one", "one", "one.x", NULL, good, sizeof good);
    write_pack("A/two", "two", "two.x", NULL, bad, sizeof bad);
    FILE *f = fopen(bad, "w"); /* no section header left to read ids from */
    fputs("%%% not ini %%%\n", f);
    fclose(f);
    snprintf(a, sizeof a, "%s/A", root);
    char *dirs[] = {a, NULL};
    grpo_registry reg;
    grpo_error err;
    ck_assert_int_eq(scan(&reg, dirs, &err), GRPO_OK);
    ck_assert_int_eq(reg.n_broken, 1);
    ck_assert_int_eq(reg.broken[0].n_ids, 0);
    ck_assert_ptr_eq(grpo_registry_broken_for(&reg, "any.id"), &reg.broken[0]);
    char why[2048];
    ck_assert_int_eq(grpo_registry_broken_reason(&reg, "any.id", why, sizeof why), 1);
    ck_assert_msg(strncmp(why, "'any.id' may be declared by a broken pack that was skipped: ",
                          60) == 0 && strstr(why, bad), "%s", why);
    grpo_registry_free(&reg);
}
END_TEST

/* ---- loading ----------------------------------------------------------------------------- */

/* Scans the test pack built for variant, loads entry tp.a. */
static int load_variant(const char *variant, grpo_registry *reg, const void **desc,
                        grpo_error *err) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", TEST_PLUGIN_DIR, variant);
    char *dirs[] = {dir, NULL};
    ck_assert_int_eq(scan(reg, dirs, err), GRPO_OK);
    ck_assert_int_eq(reg->n_packs, 1);
    const grpo_entry *e = grpo_registry_find(reg, "tp.a");
    ck_assert_ptr_nonnull(e);
    return grpo_registry_load(reg, e, grpo_default_host(), desc, err);
}

/* Loads variant, expects status and the message printf(fmt, library path, manifest path). */
static void expect_refusal(const char *variant, int status, const char *fmt) {
    grpo_registry reg;
    const void *desc = (const void *)1;
    grpo_error err;
    int rc = load_variant(variant, &reg, &desc, &err);
    char want[4 * PATH_MAX];
    const grpo_pack *p = reg.packs[0];
    snprintf(want, sizeof want, fmt, p->library_path, p->manifest_path);
    ck_assert_str_eq(err.message, want);
    ck_assert_int_eq(rc, status);
    ck_assert_ptr_null(desc);
    ck_assert_ptr_null(p->handle); /* a refused library is closed and not remembered */
    grpo_registry_free(&reg);
}

static float score_one(const grpo_reward_desc *d, const char *completion) {
    void *state = NULL;
    grpo_error err;
    grpo_error_init(&err);
    grpo_config cfg = {sizeof cfg, 0, NULL, NULL, "reward.test", NULL};
    ck_assert_int_eq(d->create(grpo_default_host(), &cfg, &state, &err), GRPO_OK);
    grpo_sample s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.completion = completion;
    float out = -1;
    ck_assert_int_eq(d->score(state, &s, 1, &out, &err), GRPO_OK);
    d->destroy(state);
    return out;
}

START_TEST(good_library_loads_once) {
    grpo_registry reg;
    const void *desc;
    grpo_error err;
    ck_assert_int_eq(load_variant("good", &reg, &desc, &err), GRPO_OK);
    const grpo_reward_desc *a = desc;
    ck_assert_str_eq(a->id, "tp.a");
    ck_assert_ptr_nonnull(reg.packs[0]->handle);
    const void *again, *b;
    ck_assert_int_eq(grpo_registry_load(&reg, grpo_registry_find(&reg, "tp.a"), grpo_default_host(), &again,
                                        &err), GRPO_OK);
    ck_assert_ptr_eq(again, a);
    ck_assert_int_eq(grpo_registry_load(&reg, grpo_registry_find(&reg, "tp.b"), grpo_default_host(), &b, &err),
                     GRPO_OK);
    ck_assert_str_eq(((const grpo_reward_desc *)b)->id, "tp.b");
    /* the test rewards score with the number of grpo_plugin_init calls: one per library */
    ck_assert(score_one(a, "x") == 1.0f);
    grpo_registry_free(&reg);
}
END_TEST

START_TEST(cxx_pack_loads) {
    grpo_registry reg;
    const void *desc;
    grpo_error err;
    ck_assert_int_eq(load_variant("cxx", &reg, &desc, &err), GRPO_OK);
    const grpo_reward_desc *d = desc;
    ck_assert_str_eq(d->description, "completion length (C++)");
    ck_assert(score_one(d, "hello") == 5.0f);
    ck_assert(score_one(d, "") == 0.0f);
    grpo_registry_free(&reg);
}
END_TEST

START_TEST(refuses_bad_magic_tag) {
    expect_refusal("bad_tag", GRPO_ERR_ABI,
                   "%s: magic tag is 'NOTGRPO'; expected 'GRPOPLG' (not a grpo plugin)");
}
END_TEST

START_TEST(refuses_other_abi_major) {
    char fmt[512];
    snprintf(fmt, sizeof fmt, "%%s: built for plugin ABI %d.%d; this grpo has ABI %d.%d and major "
             "versions must match: rebuild pack 'tp' against this grpo's SDK", GRPO_ABI_MAJOR - 1,
             GRPO_ABI_MINOR, GRPO_ABI_MAJOR, GRPO_ABI_MINOR);
    expect_refusal("abi_major_old", GRPO_ERR_ABI, fmt);
    snprintf(fmt, sizeof fmt, "%%s: built for plugin ABI %d.%d; this grpo has ABI %d.%d and major "
             "versions must match: rebuild pack 'tp' against this grpo's SDK", GRPO_ABI_MAJOR + 1,
             GRPO_ABI_MINOR, GRPO_ABI_MAJOR, GRPO_ABI_MINOR);
    expect_refusal("abi_major_new", GRPO_ERR_ABI, fmt);
}
END_TEST

START_TEST(refuses_newer_abi_minor) {
    char fmt[512];
    snprintf(fmt, sizeof fmt, "%%s: built for plugin ABI %d.%d, newer than this grpo's %d.%d; "
             "expected minor <= %d: upgrade grpo or rebuild pack 'tp'", GRPO_ABI_MAJOR,
             GRPO_ABI_MINOR + 1, GRPO_ABI_MAJOR, GRPO_ABI_MINOR, GRPO_ABI_MINOR);
    expect_refusal("abi_minor_new", GRPO_ERR_ABI, fmt);
}
END_TEST

/* The manifest's abi (what the pack relies on) must be served by the library's magic (what it
 * was compiled against): a library built for 1.(N-1) cannot provide what abi = 1.N promises. */
START_TEST(refuses_library_older_than_manifest_abi) {
    char dir[PATH_MAX], cmd[3 * PATH_MAX], manifest[PATH_MAX + 16], abi[32];
    snprintf(dir, sizeof dir, "%s/old", root);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s/abi_minor_old/'* '%s'", dir,
             TEST_PLUGIN_DIR, dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(manifest, sizeof manifest, "%s/pack.ini", dir);
    snprintf(abi, sizeof abi, "abi = %d.%d", GRPO_ABI_MAJOR, GRPO_ABI_MINOR);
    edit_file(manifest, "abi = 1.0", abi);
    char *dirs[] = {dir, NULL};
    grpo_registry reg;
    grpo_error err;
    ck_assert_int_eq(scan(&reg, dirs, &err), GRPO_OK);
    const void *desc;
    ck_assert_int_eq(grpo_registry_load(&reg, grpo_registry_find(&reg, "tp.a"),
                                        grpo_default_host(), &desc, &err), GRPO_ERR_ABI);
    char want[3 * PATH_MAX];
    snprintf(want, sizeof want, "%s: built for plugin ABI %d.%d, but %s says abi = %d.%d; "
             "expected the library built against SDK %d.%d or newer (rebuild it, or lower abi "
             "in the manifest)", reg.packs[0]->library_path, GRPO_ABI_MAJOR, GRPO_ABI_MINOR - 1,
             manifest, GRPO_ABI_MAJOR, GRPO_ABI_MINOR, GRPO_ABI_MAJOR, GRPO_ABI_MINOR);
    ck_assert_str_eq(err.message, want);
    grpo_registry_free(&reg);
    /* the same library under its own manifest (abi = 1.0) loads */
    ck_assert_int_eq(load_variant("abi_minor_old", &reg, &desc, &err), GRPO_OK);
    grpo_registry_free(&reg);
}
END_TEST

/* A library for another machine is named as such from its ELF header, before dlopen. */
START_TEST(library_for_another_machine_says_which) {
    char m[PATH_MAX], lib[PATH_MAX], a[PATH_MAX];
    write_pack("A/arm", "arm", "arm.x", NULL, m, sizeof m);
    snprintf(lib, sizeof lib, "%s/A/arm/libarm.so", root);
    unsigned char h[64] = {0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* LE */, 1};
    h[16] = 3; /* ET_DYN */
#if defined(__aarch64__)
    h[18] = 62; /* EM_X86_64 */
    const char *want_why = "built for x86-64; this grpo is aarch64";
#else
    h[18] = 183; /* EM_AARCH64 */
    const char *want_why = "built for aarch64; this grpo is ";
#endif
    FILE *f = fopen(lib, "wb");
    ck_assert_ptr_nonnull(f);
    fwrite(h, 1, sizeof h, f);
    fclose(f);
    snprintf(a, sizeof a, "%s/A", root);
    char *dirs[] = {a, NULL};
    grpo_registry reg;
    grpo_error err;
    ck_assert_int_eq(scan(&reg, dirs, &err), GRPO_OK);
    const void *desc;
    ck_assert_int_eq(grpo_registry_load(&reg, grpo_registry_find(&reg, "arm.x"),
                                        grpo_default_host(), &desc, &err), GRPO_ERR_ABI);
    char want[3 * PATH_MAX];
    snprintf(want, sizeof want, "pack 'arm' (%s): cannot load library: %s: %s", m, lib, want_why);
    ck_assert_msg(strncmp(err.message, want, strlen(want)) == 0, "%s", err.message);
    grpo_registry_free(&reg);
}
END_TEST

START_TEST(refuses_small_magic_struct) {
    /* grpo_magic 1.0: five uint32_t (20 bytes) + char tag[8] = 28 bytes */
    expect_refusal("magic_small", GRPO_ERR_ABI, "%s: magic struct is 8 bytes; expected at least "
                                                "28 (not a grpo plugin, or a broken one)");
}
END_TEST

START_TEST(refuses_missing_symbols) {
    expect_refusal("no_magic", GRPO_ERR_ABI, "%s: no grpo_plugin_magic symbol; expected "
                   "GRPO_PLUGIN_MAGIC() in one source file of pack 'tp' (built without the grpo "
                   "SDK?)");
    expect_refusal("no_init", GRPO_ERR_ABI, "%s: no grpo_plugin_init symbol; expected pack 'tp' "
                   "to define GRPO_EXPORT int32_t grpo_plugin_init(...)");
}
END_TEST

START_TEST(refuses_ids_that_differ_from_the_manifest) {
    /* printf order: library, manifest; "%2$s" picks the manifest */
    expect_refusal("missing_id", GRPO_ERR_INVALID, "%2$s lists reward 'tp.b', but %1$s does not "
                   "export it; expected the library to enumerate every id of its manifest");
    expect_refusal("extra_id", GRPO_ERR_INVALID, "%1$s exports reward 'tp.c', which %2$s does not "
                   "list; expected every exported id in the manifest");
    expect_refusal("dup_id", GRPO_ERR_INVALID,
                   "%1$s exports reward 'tp.a' twice; expected each id once");
}
END_TEST

/* with_model is built against this SDK; model_1_2 exports a 1.2-sized descriptor (no
 * vocab_size), which a 1.3 host must still take (headers change append-only). */
START_TEST(model_entry_loads_by_architecture) {
    static const char *const variants[] = {"with_model", "model_1_2"};
    grpo_registry reg;
    const void *desc;
    grpo_error err;
    ck_assert_msg(load_variant(variants[_i], &reg, &desc, &err) == GRPO_OK, "%s: %s",
                  variants[_i], err.message);
    const grpo_entry *m = grpo_registry_find_architecture(&reg, "TpForCausalLM");
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(m->kind, GRPO_KIND_MODEL);
    ck_assert_int_eq(grpo_registry_load(&reg, m, grpo_default_host(), &desc, &err), GRPO_OK);
    const grpo_model_desc *d = desc;
    ck_assert_int_eq(GRPO_HAS_FIELD(d, grpo_model_desc, vocab_size), _i == 0);
    ck_assert_str_eq(d->id, "tp.m");
    ck_assert_str_eq(d->architectures[0], "TpForCausalLM");
    grpo_registry_free(&reg);
}
END_TEST

START_TEST(refuses_kind_mismatch) {
    expect_refusal("model_as_reward", GRPO_ERR_INVALID,
                   "%1$s exports 'tp.m' as a reward, but %2$s lists it with kind = model");
}
END_TEST

START_TEST(refuses_small_descriptor) {
    char fmt[256];
    snprintf(fmt, sizeof fmt, "%%s: reward descriptor '?' is 8 bytes; expected at least %zu",
             sizeof(grpo_reward_desc));
    expect_refusal("small_desc", GRPO_ERR_ABI, fmt);
}
END_TEST

START_TEST(init_failure_is_wrapped) {
    expect_refusal("init_fail", GRPO_ERR_UNSUPPORTED, "pack 'tp' (%s): grpo_plugin_init failed: "
                   "needs TP_TOKEN set in the environment");
}
END_TEST

START_TEST(missing_library_names_the_pack) {
    char m[PATH_MAX];
    write_pack("tp", "tp", "tp.a", NULL, m, sizeof m);
    char *dirs[] = {root, NULL};
    grpo_registry reg;
    grpo_error err;
    ck_assert_int_eq(scan(&reg, dirs, &err), GRPO_OK);
    const void *desc;
    ck_assert_int_eq(grpo_registry_load(&reg, grpo_registry_find(&reg, "tp.a"), grpo_default_host(), &desc, &err),
                     GRPO_ERR_IO);
    char want[2 * PATH_MAX];
    snprintf(want, sizeof want, "pack 'tp' (%s): cannot load library: %s/tp/libtp.so", m, root);
    ck_assert_msg(strncmp(err.message, want, strlen(want)) == 0, "got: %s", err.message);
    grpo_registry_free(&reg);
}
END_TEST

/* A copy of the good test pack in root/rel, its dir and library chmod'ed as asked. */
static void copy_good_pack(const char *rel, mode_t dir_mode, mode_t lib_mode, char *dir,
                           size_t dir_size, char *lib, size_t lib_size) {
    snprintf(dir, dir_size, "%s/%s", root, rel);
    snprintf(lib, lib_size, "%s/libtp-good.so", dir);
    char cmd[3 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s/good/pack.ini' '%s/good/libtp-good.so' '%s'",
             dir, TEST_PLUGIN_DIR, TEST_PLUGIN_DIR, dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(chmod(dir, dir_mode), 0);
    ck_assert_int_eq(chmod(lib, lib_mode), 0);
}

/* Loads tp.a from the pack in dir; returns what the load wrote on stderr. */
static const char *load_and_capture(const char *dir) {
    char log[PATH_MAX], path[PATH_MAX];
    snprintf(log, sizeof log, "%s/load-stderr.txt", root);
    snprintf(path, sizeof path, "%s", dir);
    char *dirs[] = {path, NULL};
    grpo_registry reg;
    grpo_error err;
    ck_assert_int_eq(scan(&reg, dirs, &err), GRPO_OK);
    const void *desc;
    int saved = begin_capture(stderr, log);
    int rc = grpo_registry_load(&reg, grpo_registry_find(&reg, "tp.a"), grpo_default_host(), &desc, &err);
    end_capture(stderr, saved);
    ck_assert_msg(rc == GRPO_OK, "%s", err.message);
    grpo_registry_free(&reg);
    return read_text(log);
}

START_TEST(world_writable_pack_warns) {
    char dir[PATH_MAX], lib[PATH_MAX], want[2 * PATH_MAX];
    copy_good_pack("open", 0777, 0755, dir, sizeof dir, lib, sizeof lib);
    snprintf(want, sizeof want, "warning: pack directory %s is world-writable: any user of this "
             "machine can replace the plugin code grpo loads from it (chmod o-w)\n", dir);
    ck_assert_str_eq(load_and_capture(dir), want);
    copy_good_pack("sticky", 01777, 0666, dir, sizeof dir, lib, sizeof lib);
    snprintf(want, sizeof want, "warning: pack library %s is world-writable: any user of this "
             "machine can replace the plugin code grpo loads from it (chmod o-w)\n", lib);
    ck_assert_str_eq(load_and_capture(dir), want); /* a sticky dir is fine, the library is not */
    copy_good_pack("closed", 0755, 0755, dir, sizeof dir, lib, sizeof lib);
    ck_assert_str_eq(load_and_capture(dir), "");
}
END_TEST

/* The misbehave pack's grpo_plugin_init fills its message buffer without a NUL. The host must
 * read no further than the buffer (ASan sees an overread) and pass on what it holds. */
START_TEST(init_message_without_nul_is_cut_at_its_buffer) {
    setenv("MB_INIT_NONUL", "1", 1);
    char *dirs[] = {MISBEHAVE_DIR, NULL};
    grpo_registry reg;
    grpo_error err;
    ck_assert_int_eq(scan(&reg, dirs, &err), GRPO_OK);
    const void *desc;
    ck_assert_int_eq(grpo_registry_load(&reg, grpo_registry_find(&reg, "mb.ones"), grpo_default_host(), &desc,
                                        &err), GRPO_ERR_INVALID);
    char want[PATH_MAX + 100];
    snprintf(want, sizeof want, "pack 'mb' (%s): grpo_plugin_init failed: xxxx",
             reg.packs[0]->library_path);
    ck_assert_msg(strncmp(err.message, want, strlen(want)) == 0, "%s", err.message);
    ck_assert_uint_eq(strspn(err.message + strlen(want), "x") + strlen(want),
                      strlen(err.message)); /* x's to the end of the buffer, nothing after */
    unsetenv("MB_INIT_NONUL");
    grpo_registry_free(&reg);
}
END_TEST

/* ---- what a misbehaving reward can do to a batch ----------------------------------------- */

/* A run config of the given [reward.NAME] sections of the misbehave pack (names[k] = "NAME",
 * ids[k] = "mb.ID"); isolate[k] as set; keys: one "key=value" per reward or NULL. */
typedef struct mb_run {
    grpo_registry reg;
    grpo_run_config cfg;
    grpo_reward_spec specs[4];
    char sections[4][64];
    char *keys[4][1], *values[4][1];
    char kv[4][64];
} mb_run;

static void mb_run_open(mb_run *r, int K, const char *const *names, const char *const *ids,
                        const int *isolate, const char *const *kv) {
    memset(r, 0, sizeof *r);
    char *dirs[] = {MISBEHAVE_DIR, NULL};
    grpo_error err;
    ck_assert_int_eq(scan(&r->reg, dirs, &err), GRPO_OK);
    for (int k = 0; k < K; k++) {
        grpo_reward_spec *s = &r->specs[k];
        snprintf(r->sections[k], sizeof r->sections[k], "reward.%s", names[k]);
        s->name = (char *)names[k], s->section = r->sections[k], s->plugin = (char *)ids[k];
        s->weight = 1.0, s->isolate = isolate ? isolate[k] : 0;
        s->entry = grpo_registry_find(&r->reg, ids[k]);
        ck_assert_ptr_nonnull(s->entry);
        if (kv && kv[k]) {
            snprintf(r->kv[k], sizeof r->kv[k], "%s", kv[k]);
            char *eq = strchr(r->kv[k], '=');
            *eq = '\0';
            r->keys[k][0] = r->kv[k], r->values[k][0] = eq + 1;
            s->n = 1, s->keys = r->keys[k], s->values = r->values[k];
        }
    }
    r->cfg.rewards = r->specs, r->cfg.n_rewards = K;
}

/* Three samples of one group with writable texts and ids: the caller's training state. */
typedef struct batch {
    char prompt[32], completion[3][32], answer[16];
    int32_t ids[3][4];
    grpo_field field;
    grpo_sample s[3];
} batch;

static void batch_init(batch *b) {
    memset(b, 0, sizeof *b);
    strcpy(b->prompt, "1+1=");
    strcpy(b->answer, "\"2\"");
    b->field = (grpo_field){sizeof b->field, "answer", b->answer};
    for (int i = 0; i < 3; i++) {
        snprintf(b->completion[i], sizeof b->completion[i], "answer %d", i);
        for (int j = 0; j < 4; j++) b->ids[i][j] = 10 * i + j;
        b->s[i] = (grpo_sample){.struct_size = sizeof(grpo_sample), .prompt = b->prompt,
                                .completion = b->completion[i], .completion_ids = b->ids[i],
                                .n_completion_ids = (uint32_t)(i + 2), .group = 0,
                                .member = (uint32_t)i, .fields = &b->field, .n_fields = 1};
    }
}

START_TEST(plugins_score_a_copy_of_the_batch) {
    mb_run r;
    const char *names[] = {"first", "second"}, *ids[] = {"mb.scribble", "mb.scribble"};
    mb_run_open(&r, 2, names, ids, NULL, NULL);
    grpo_reward_set set;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_reward_set_create(&set, &r.cfg, &r.reg, grpo_default_host(), &err), GRPO_OK);
    batch b, before;
    batch_init(&b);
    batch_init(&before);
    float R[3 * 2];
    for (int round = 0; round < 2; round++) {
        ck_assert_int_eq(grpo_reward_set_score(&set, b.s, 3, R, &err), GRPO_OK);
        for (int i = 0; i < 3; i++) {
            float want = 0;
            for (int j = 0; j < i + 2; j++) want += (float)before.ids[i][j];
            ck_assert(R[i * 2 + 0] == want); /* the sum of the ids it was lent... */
            ck_assert(R[i * 2 + 1] == want); /* ...and the second reward saw them unharmed */
        }
        /* the caller's samples, texts and ids are as they were */
        ck_assert_mem_eq(b.ids, before.ids, sizeof b.ids);
        ck_assert_str_eq(b.prompt, before.prompt);
        ck_assert_str_eq(b.answer, before.answer);
        for (int i = 0; i < 3; i++) {
            ck_assert_str_eq(b.completion[i], before.completion[i]);
            ck_assert_uint_eq(b.s[i].n_completion_ids, (uint32_t)(i + 2));
            ck_assert_ptr_eq(b.s[i].completion_ids, b.ids[i]);
        }
    }
    grpo_reward_set_free(&set);
    grpo_registry_free(&r.reg);
}
END_TEST

START_TEST(unwritten_scores_are_nan_not_the_last_rewards) {
    mb_run r;
    const char *names[] = {"ones", "half"}, *ids[] = {"mb.ones", "mb.half"};
    mb_run_open(&r, 2, names, ids, NULL, NULL);
    grpo_reward_set set;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_reward_set_create(&set, &r.cfg, &r.reg, grpo_default_host(), &err), GRPO_OK);
    batch b;
    batch_init(&b);
    float R[3 * 2];
    char log[PATH_MAX];
    snprintf(log, sizeof log, "%s/stderr.txt", root);
    int saved = begin_capture(stderr, log);
    int rc1 = grpo_reward_set_score(&set, b.s, 3, R, &err);
    int rc2 = grpo_reward_set_score(&set, b.s, 3, R, &err);
    end_capture(stderr, saved);
    ck_assert_int_eq(rc1, GRPO_OK);
    ck_assert_int_eq(rc2, GRPO_OK);
    for (int i = 0; i < 3; i++) ck_assert(R[i * 2] == 1.0f);
    ck_assert(R[0 * 2 + 1] == 2.0f);             /* n/2 = 1 written */
    ck_assert(isnan(R[1 * 2 + 1]) && isnan(R[2 * 2 + 1])); /* not mb.ones's 1 */
    ck_assert_str_eq(read_text(log), "warning: [reward.half] (plugin mb.half) left 2 of 3 scores "
                     "unwritten; they count as NaN (no opinion) (said once per reward)\n");
    grpo_reward_set_free(&set);
    grpo_registry_free(&r.reg);
}
END_TEST

/* mb.nonul fills the error buffer without a NUL, in create or in score. */
START_TEST(unterminated_plugin_errors_are_cut_at_their_buffer) {
    const char *names[] = {"bad"}, *ids[] = {"mb.nonul"}, *in_create[] = {"fail_in=create"};
    const int isolated[] = {1};
    const char *want[] = {"[reward.bad] (plugin mb.nonul): xxx",
                          "[reward.bad] (plugin mb.nonul) failed to score: xxx",
                          "[reward.bad] (plugin mb.nonul) failed to score: xxx"};
    for (int c = 0; c < 3; c++) { /* create, score, score in an isolated child */
        mb_run r;
        mb_run_open(&r, 1, names, ids, c == 2 ? isolated : NULL, c == 0 ? in_create : NULL);
        grpo_reward_set set;
        grpo_error err;
        grpo_error_init(&err);
        int rc = grpo_reward_set_create(&set, &r.cfg, &r.reg, grpo_default_host(), &err);
        if (c > 0) {
            ck_assert_int_eq(rc, GRPO_OK);
            batch b;
            batch_init(&b);
            float R[3];
            rc = grpo_reward_set_score(&set, b.s, 3, R, &err);
        }
        ck_assert_int_eq(rc, GRPO_ERR_INVALID);
        ck_assert_msg(strncmp(err.message, want[c], strlen(want[c])) == 0, "%s", err.message);
        size_t head = strlen(want[c]) - 3;
        ck_assert_uint_eq(strspn(err.message + head, "x") + head, strlen(err.message));
        ck_assert_uint_eq(strlen(err.message), sizeof err.message - 1);
        grpo_reward_set_free(&set);
        grpo_registry_free(&r.reg);
    }
}
END_TEST

START_TEST(isolated_rewards_survive_crash_and_exit) {
    mb_run r;
    const char *names[] = {"ones", "crash", "bye", "half"};
    const char *ids[] = {"mb.ones", "mb.segv", "mb.exit", "mb.half"};
    const char *kv[] = {NULL, NULL, "status=3", NULL};
    const int isolate[] = {1, 1, 1, 1};
    mb_run_open(&r, 4, names, ids, isolate, kv);
    grpo_reward_set set;
    grpo_error err;
    grpo_error_init(&err);
    char log[PATH_MAX];
    snprintf(log, sizeof log, "%s/stderr.txt", root);
    int saved = begin_capture(stderr, log); /* the workers write to the stderr they started with */
    ck_assert_int_eq(grpo_reward_set_create(&set, &r.cfg, &r.reg, grpo_default_host(), &err), GRPO_OK);
    batch b;
    batch_init(&b);
    float R[3 * 4];
    int rc = grpo_reward_set_score(&set, b.s, 3, R, &err);
    end_capture(stderr, saved);
    ck_assert_msg(rc == GRPO_OK, "%s", err.message);
    for (int i = 0; i < 3; i++) {
        ck_assert(R[i * 4 + 0] == 1.0f); /* scores come back through the pipe */
        ck_assert(isnan(R[i * 4 + 1]) && isnan(R[i * 4 + 2]));
    }
    ck_assert(R[0 * 4 + 3] == 2.0f && isnan(R[1 * 4 + 3])); /* unwritten is still NaN */
    const char *text = read_text(log);
    ck_assert_msg(strstr(text, "warning: [reward.crash] (plugin mb.segv) was killed by SIGSEGV "
                               "(Segmentation fault) while scoring 3 samples in its isolated "
                               "child process; its scores for this batch are NaN (no opinion)\n"),
                  "%s", text);
    ck_assert_msg(strstr(text, "warning: [reward.bye] (plugin mb.exit) called exit(3) while "
                               "scoring 3 samples in its isolated child process; its scores for "
                               "this batch are NaN (no opinion)\n"), "%s", text);
    ck_assert_int_eq(count_of(text, "warning:"), 3); /* + mb.half's unwritten scores */
    grpo_reward_set_free(&set);
    grpo_registry_free(&r.reg);
}
END_TEST

static double seconds_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* An isolated reward that never returns (mb.sleep, on its second call) is killed at its deadline:
 * that batch is NaN with one warning, the next batch gets a new worker (whose first call returns
 * again), and a reward beside it is not disturbed. */
START_TEST(isolated_reward_that_hangs_is_killed_at_its_deadline) {
    mb_run r;
    const char *names[] = {"ones", "hang"}, *ids[] = {"mb.ones", "mb.sleep"};
    const char *kv[] = {NULL, "after=1"};
    const int isolate[] = {0, 1};
    mb_run_open(&r, 2, names, ids, isolate, kv);
    r.specs[1].timeout = 1.0;
    grpo_reward_set set;
    grpo_error err;
    grpo_error_init(&err);
    char log[PATH_MAX];
    snprintf(log, sizeof log, "%s/stderr.txt", root);
    int saved = begin_capture(stderr, log);
    int rc = grpo_reward_set_create(&set, &r.cfg, &r.reg, grpo_default_host(), &err);
    batch b;
    batch_init(&b);
    float R[3][3 * 2];
    double took[3] = {0};
    for (int t = 0; rc == GRPO_OK && t < 3; t++) {
        double t0 = seconds_now();
        rc = grpo_reward_set_score(&set, b.s, 3, R[t], &err);
        took[t] = seconds_now() - t0;
    }
    end_capture(stderr, saved);
    ck_assert_msg(rc == GRPO_OK, "%s", err.message);
    for (int i = 0; i < 3; i++) {
        ck_assert(R[0][i * 2] == 1.0f && R[1][i * 2] == 1.0f && R[2][i * 2] == 1.0f);
        ck_assert(R[0][i * 2 + 1] == 1.0f);  /* the first call returns */
        ck_assert(isnan(R[1][i * 2 + 1]));   /* the second never does: killed, NaN */
        ck_assert(R[2][i * 2 + 1] == 1.0f);  /* a new worker: its first call again */
    }
    ck_assert_msg(took[1] >= 1.0 && took[1] < 10.0, "the hung batch took %g s", took[1]);
    const char *text = read_text(log);
    ck_assert_msg(strstr(text, "warning: [reward.hang] (plugin mb.sleep) did not answer within "
                               "timeout = 1 s and was killed (SIGKILL) while scoring 3 samples in "
                               "its isolated child process; its scores for this batch are NaN "
                               "(no opinion)\n"), "%s", text);
    ck_assert_int_eq(count_of(text, "warning:"), 1);
    grpo_reward_set_free(&set);
    grpo_registry_free(&r.reg);
}
END_TEST

/* ---- the plugins command ------------------------------------------------------------------ */

/* Runs `grpo plugins SUB [ID] --plugin-path <test pack "listed">` in-process, stdout into out.
 * ("listed" is a copy of the good pack that no other test loads.) */
static int run_plugins(const char *sub, const char *id, char *out, size_t out_size) {
    char out_path[PATH_MAX];
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", root);
    char *argv[] = {"plugins", (char *)sub, "--plugin-path", TEST_PLUGIN_DIR "/listed",
                    (char *)id, NULL};
    int saved = begin_capture(stdout, out_path);
    int rc = cmd_plugins(id ? 5 : 4, argv);
    end_capture(stdout, saved);
    FILE *f = fopen(out_path, "r");
    size_t n = fread(out, 1, out_size - 1, f);
    out[n] = '\0';
    fclose(f);
    return rc;
}

START_TEST(plugins_list_and_show_load_no_code) {
    char mark[PATH_MAX], out[4096];
    snprintf(mark, sizeof mark, "%s/loaded", root);
    setenv("TP_LOAD_MARK", mark, 1); /* the test plugin's constructor writes it when loaded */
    ck_assert_int_eq(run_plugins("list", NULL, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "ID    KIND    PACK  VERSION  DESCRIPTION\n"
                              "tp.a  reward  tp    0.0.1    test reward a\n"
                              "tp.b  reward  tp    0.0.1    test reward b\n"), "got:\n%s", out);
    ck_assert_int_eq(run_plugins("show", "tp.a", out, sizeof out), 0);
    ck_assert_msg(strstr(out, "tp.a (reward)\n  test reward a\n"), "got:\n%s", out);
    ck_assert_msg(strstr(out, "  threshold            float  default 0.5\n      a float key\n"),
                  "got:\n%s", out);
    ck_assert_msg(strstr(out, "library:   /") && strstr(out, "/listed/libtp-listed.so\n"),
                  "got:\n%s", out);
    ck_assert_int_ne(access(mark, F_OK), 0); /* nothing was loaded */
    ck_assert_int_eq(run_plugins("show", "tp.z", out, sizeof out), 1);
    ck_assert_int_eq(run_plugins("check", NULL, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "ok    tp.a ("), "got:\n%s", out);
    ck_assert_int_eq(access(mark, F_OK), 0); /* check does load */
    unsetenv("TP_LOAD_MARK");
}
END_TEST

/* ---- default host ------------------------------------------------------------------------ */

START_TEST(default_host_table) {
    const grpo_host *h = grpo_default_host();
    ck_assert_uint_eq(h->struct_size, sizeof(grpo_host));
    ck_assert_uint_eq(h->abi_major, GRPO_ABI_MAJOR);
    ck_assert_uint_eq(h->abi_minor, GRPO_ABI_MINOR);
    ck_assert_ptr_null(h->ops);
    ck_assert_ptr_null(h->tokenizer);
    const uint64_t sizes[] = {0, 1, 63, 64, 65, 1000, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = h->alloc(sizes[i]);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq((uintptr_t)p % 64, 0);
        memset(p, 0xAB, sizes[i]);
        h->free(p);
    }
    ck_assert_ptr_null(h->alloc(UINT64_MAX));
}
END_TEST

START_TEST(default_host_rng_is_xoshiro256starstar) {
    /* By hand from the xoshiro256** definition, state {1,2,3,4}:
     *   out1 = rotl(2*5, 7) * 9 = 1280 * 9 = 11520; then s = {7, 0, 262146, rotl(6,45)}
     *   out2 = rotl(0*5, 7) * 9 = 0;                then s1 = 262146 ^ 7 = 262149
     *   out3 = rotl(262149*5, 7) * 9 = 167775360 * 9 = 1509978240 */
    uint64_t s[4] = {1, 2, 3, 4};
    const grpo_host *h = grpo_default_host();
    ck_assert_uint_eq(h->rng_next(s), 11520u);
    ck_assert_uint_eq(h->rng_next(s), 0u);
    ck_assert_uint_eq(h->rng_next(s), 1509978240u);
}
END_TEST

START_TEST(default_host_logs_level_and_who) {
    char log_path[PATH_MAX + 16];
    snprintf(log_path, sizeof log_path, "%s/stderr.txt", root);
    int saved = begin_capture(stderr, log_path);
    grpo_default_host()->log(GRPO_LOG_WARN, "tp.a", "threshold %d ignored", 7);
    end_capture(stderr, saved);
    FILE *f = fopen(log_path, "r");
    char line[256] = "";
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    fclose(f);
    ck_assert_str_eq(line, "grpo [warning] tp.a: threshold 7 ignored\n");
}
END_TEST

int main(void) {
    grpo_reward_worker_set_program(GRPO_BINARY_DIR "/grpo"); /* isolated rewards' workers */
    Suite *s = suite_create("registry");
    TCase *path = tcase_create("scan");
    tcase_add_checked_fixture(path, setup, teardown);
    tcase_add_test(path, plugin_path_order);
    tcase_add_test(path, scan_reads_packs_from_two_dirs);
    tcase_add_test(path, first_pack_on_the_path_shadows_a_later_one);
    tcase_add_test(path, incompatible_pack_is_skipped_and_explained);
    tcase_add_test(path, same_pack_dir_twice_is_read_once);
    tcase_add_test(path, missing_dir_is_skipped);
    tcase_add_test(path, broken_manifest_is_skipped_and_explained);
    tcase_add_test(path, unreadable_manifest_explains_any_missing_id);
    suite_add_tcase(s, path);
    TCase *load = tcase_create("load");
    tcase_add_checked_fixture(load, setup, teardown);
    tcase_add_test(load, good_library_loads_once);
    tcase_add_test(load, cxx_pack_loads);
    tcase_add_test(load, refuses_bad_magic_tag);
    tcase_add_test(load, refuses_other_abi_major);
    tcase_add_test(load, refuses_newer_abi_minor);
    tcase_add_test(load, refuses_library_older_than_manifest_abi);
    tcase_add_test(load, library_for_another_machine_says_which);
    tcase_add_test(load, refuses_small_magic_struct);
    tcase_add_test(load, refuses_missing_symbols);
    tcase_add_test(load, refuses_ids_that_differ_from_the_manifest);
    tcase_add_test(load, refuses_small_descriptor);
    tcase_add_loop_test(load, model_entry_loads_by_architecture, 0, 2);
    tcase_add_test(load, refuses_kind_mismatch);
    tcase_add_test(load, init_failure_is_wrapped);
    tcase_add_test(load, missing_library_names_the_pack);
    tcase_add_test(load, world_writable_pack_warns);
    tcase_add_test(load, init_message_without_nul_is_cut_at_its_buffer);
    suite_add_tcase(s, load);
    TCase *batch = tcase_create("misbehaving rewards");
    tcase_add_checked_fixture(batch, setup, teardown);
    tcase_add_test(batch, plugins_score_a_copy_of_the_batch);
    tcase_add_test(batch, unwritten_scores_are_nan_not_the_last_rewards);
    tcase_add_test(batch, unterminated_plugin_errors_are_cut_at_their_buffer);
    tcase_add_test(batch, isolated_rewards_survive_crash_and_exit);
    tcase_add_test(batch, isolated_reward_that_hangs_is_killed_at_its_deadline);
    suite_add_tcase(s, batch);
    TCase *cli = tcase_create("cli");
    tcase_add_checked_fixture(cli, setup, teardown);
    tcase_add_test(cli, plugins_list_and_show_load_no_code);
    suite_add_tcase(s, cli);
    TCase *host = tcase_create("host");
    tcase_add_checked_fixture(host, setup, teardown);
    tcase_add_test(host, default_host_table);
    tcase_add_test(host, default_host_rng_is_xoshiro256starstar);
    tcase_add_test(host, default_host_logs_level_and_who);
    suite_add_tcase(s, host);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
