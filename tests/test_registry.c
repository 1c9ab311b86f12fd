/* test_registry.c — the plugin path, scanning pack directories, lookups, loading a pack's
 * library (and each way the host refuses a broken one: test plugins from tests/plugins.cmake),
 * and the default host services table. */
#include <check.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "grpo/model.h"
#include "grpo/reward.h"
#include "registry.h"

#define TEST_PLUGIN_DIR GRPO_BINARY_DIR "/tests/plugins"

static char root[256]; /* a fresh temp dir per test, realpath'd */

static void setup(void) {
    snprintf(root, sizeof root, "/tmp/grpo_test_registry_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    char *real = realpath(root, NULL);
    ck_assert(real && strlen(real) < sizeof root);
    memcpy(root, real, strlen(real) + 1);
    free(real);
}

static void teardown(void) {
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    ck_assert_int_eq(system(cmd), 0);
}

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
    const char *extra[] = {"/cli/one", "/cli/two"};
    char **dirs = grpo_plugin_path(extra, 2);
    ck_assert_str_eq(dirs[0], "/cli/one");
    ck_assert_str_eq(dirs[1], "/cli/two");
    ck_assert_str_eq(dirs[2], "/env/one"); /* empty fields are skipped */
    ck_assert_str_eq(dirs[3], "/env/two");
    char exe[PATH_MAX], want[PATH_MAX + 8];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    ck_assert(n > 0);
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    snprintf(want, sizeof want, "%s/packs", exe);
    ck_assert_str_eq(dirs[4], want);
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

START_TEST(duplicate_id_names_both_manifests) {
    char m1[PATH_MAX], m2[PATH_MAX], a[PATH_MAX], b[PATH_MAX];
    write_pack("A/one", "one", "one.x", NULL, m1, sizeof m1);
    write_pack("B/one-copy", "one", "one.x", NULL, m2, sizeof m2);
    snprintf(a, sizeof a, "%s/A", root);
    snprintf(b, sizeof b, "%s/B", root);
    char *dirs[] = {a, b, NULL};
    grpo_registry reg;
    grpo_error err;
    ck_assert_int_eq(scan(&reg, dirs, &err), GRPO_ERR_INVALID);
    char want[3 * PATH_MAX];
    snprintf(want, sizeof want, "duplicate id 'one.x': declared by %s and by %s; expected each id "
             "in one pack (remove one pack from the plugin path)", m1, m2);
    ck_assert_str_eq(err.message, want);
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

START_TEST(bad_manifest_fails_the_scan_with_its_line) {
    char m[PATH_MAX], a[PATH_MAX];
    write_pack("A/one", "one", "one.x", NULL, m, sizeof m);
    FILE *f = fopen(m, "a");
    fputs("colour = red\n", f); /* line 10 of the manifest */
    fclose(f);
    snprintf(a, sizeof a, "%s/A", root);
    char *dirs[] = {a, NULL};
    grpo_registry reg;
    grpo_error err;
    ck_assert_int_eq(scan(&reg, dirs, &err), GRPO_ERR_INVALID);
    char want[PATH_MAX + 200];
    snprintf(want, sizeof want, "%s:10: unknown key 'colour' in [one.x]; expected one of kind, "
             "description, architectures", m);
    ck_assert_str_eq(err.message, want);
    ck_assert_int_eq(reg.n_packs, 0);
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
    grpo_config cfg = {sizeof cfg, 0, NULL, NULL, "reward.test"};
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
    ck_assert_int_eq(grpo_registry_load(&reg, grpo_registry_find(&reg, "tp.a"), NULL, &again,
                                        &err), GRPO_OK);
    ck_assert_ptr_eq(again, a);
    ck_assert_int_eq(grpo_registry_load(&reg, grpo_registry_find(&reg, "tp.b"), NULL, &b, &err),
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

START_TEST(model_entry_loads_by_architecture) {
    grpo_registry reg;
    const void *desc;
    grpo_error err;
    ck_assert_int_eq(load_variant("with_model", &reg, &desc, &err), GRPO_OK);
    const grpo_entry *m = grpo_registry_find_architecture(&reg, "TpForCausalLM");
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(m->kind, GRPO_KIND_MODEL);
    ck_assert_int_eq(grpo_registry_load(&reg, m, NULL, &desc, &err), GRPO_OK);
    const grpo_model_desc *d = desc;
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
    ck_assert_int_eq(grpo_registry_load(&reg, grpo_registry_find(&reg, "tp.a"), NULL, &desc, &err),
                     GRPO_ERR_IO);
    char want[2 * PATH_MAX];
    snprintf(want, sizeof want, "pack 'tp' (%s): cannot load library: %s/tp/libtp.so", m, root);
    ck_assert_msg(strncmp(err.message, want, strlen(want)) == 0, "got: %s", err.message);
    grpo_registry_free(&reg);
}
END_TEST

/* ---- the plugins command ------------------------------------------------------------------ */

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
    Suite *s = suite_create("registry");
    TCase *path = tcase_create("scan");
    tcase_add_checked_fixture(path, setup, teardown);
    tcase_add_test(path, plugin_path_order);
    tcase_add_test(path, scan_reads_packs_from_two_dirs);
    tcase_add_test(path, duplicate_id_names_both_manifests);
    tcase_add_test(path, same_pack_dir_twice_is_read_once);
    tcase_add_test(path, missing_dir_is_skipped);
    tcase_add_test(path, bad_manifest_fails_the_scan_with_its_line);
    suite_add_tcase(s, path);
    TCase *load = tcase_create("load");
    tcase_add_checked_fixture(load, setup, teardown);
    tcase_add_test(load, good_library_loads_once);
    tcase_add_test(load, cxx_pack_loads);
    tcase_add_test(load, refuses_bad_magic_tag);
    tcase_add_test(load, refuses_other_abi_major);
    tcase_add_test(load, refuses_newer_abi_minor);
    tcase_add_test(load, refuses_small_magic_struct);
    tcase_add_test(load, refuses_missing_symbols);
    tcase_add_test(load, refuses_ids_that_differ_from_the_manifest);
    tcase_add_test(load, refuses_small_descriptor);
    tcase_add_test(load, model_entry_loads_by_architecture);
    tcase_add_test(load, refuses_kind_mismatch);
    tcase_add_test(load, init_failure_is_wrapped);
    tcase_add_test(load, missing_library_names_the_pack);
    suite_add_tcase(s, load);
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
