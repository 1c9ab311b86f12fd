/* test_pack_install.c — what `grpo pack install` refuses, and that a refusal leaves the prefix as
 * it was (pack/pack_install.c), on bundles of tests/packs/selftest made with grpo_pack_bundle and
 * then altered with tar: a changed file, a file SHA256SUMS does not list, no SHA256SUMS, a '..'
 * path, a failing self-test, a library for another machine; and bundle -> install -> remove. */
#include <check.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/host.h"
#include "pack/pack_install.h"
#include "tmpdir.h"

#define SELFTEST_PACK GRPO_BINARY_DIR "/tests/plugins/selftest"

static char root[256], prefix[PATH_MAX], bundle[PATH_MAX];

static void sh(const char *fmt, const char *a) {
    char cmd[4 * PATH_MAX];
    snprintf(cmd, sizeof cmd, fmt, a, a, a, a);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
}

static void setup(void) {
    tmpdir_make(root, sizeof root, "pack_install");
    snprintf(prefix, sizeof prefix, "%s/packs", root);
    snprintf(bundle, sizeof bundle, "%s/st-0.0.1.tar.gz", root);
    char written[PATH_MAX];
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_msg(grpo_pack_bundle(SELFTEST_PACK, bundle, written, sizeof written, &err) ==
                      GRPO_OK, "%s", err.message);
    /* an unpacked copy to alter: root/x/st/... */
    sh("mkdir -p '%s/x' && tar -xzf '%s/st-0.0.1.tar.gz' -C '%s/x'", root);
}

static void teardown(void) { tmpdir_remove(root); }

/* Re-packs root/x into the bundle. */
static void repack(void) { sh("tar -czf '%s/st-0.0.1.tar.gz' -C '%s/x' st", root); }

/* The prefix holds nothing but what was installed: no staging or removal folder left over. */
static int prefix_entries(void) {
    DIR *d = opendir(prefix);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static void expect_refusal(const char *src, const char *want) {
    grpo_pack_installed in;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_ne(grpo_pack_install(src, prefix, 0, grpo_default_host(), &in, &err), GRPO_OK);
    ck_assert_msg(strstr(err.message, want), "got: %s\nwant: %s", err.message, want);
    ck_assert_int_eq(prefix_entries(), 0);
}

START_TEST(bundle_installs_and_removes) {
    grpo_pack_installed in;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_msg(grpo_pack_install(bundle, prefix, 0, grpo_default_host(), &in, &err) ==
                      GRPO_OK, "%s", err.message);
    ck_assert_str_eq(in.name, "st");
    ck_assert_str_eq(in.version, "0.0.1");
    ck_assert_int_eq(in.n_ids, 4);
    ck_assert_int_eq(in.n_tests, 4);
    ck_assert_str_eq(in.replaced, "");
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/st/libtp-selftest.so", prefix);
    ck_assert_int_eq(access(path, R_OK), 0);
    ck_assert_int_eq(prefix_entries(), 1);
    /* the same version again replaces it */
    ck_assert_int_eq(grpo_pack_install(bundle, prefix, 0, grpo_default_host(), &in, &err),
                     GRPO_OK);
    ck_assert_str_eq(in.replaced, "0.0.1");
    ck_assert_int_eq(prefix_entries(), 1);
    char removed[PATH_MAX];
    ck_assert_int_eq(grpo_pack_remove("st", prefix, removed, sizeof removed, &err), GRPO_OK);
    ck_assert_int_eq(prefix_entries(), 0);
    ck_assert_int_ne(grpo_pack_remove("st", prefix, removed, sizeof removed, &err), GRPO_OK);
    ck_assert_int_ne(grpo_pack_remove("../x", prefix, removed, sizeof removed, &err), GRPO_OK);
    ck_assert_msg(strstr(err.message, "'../x' is not a pack name"), "%s", err.message);
}
END_TEST

/* sha256sum's binary mode ("HEX *FILE") reads the same; a malformed line is named */
START_TEST(sums_lines_in_both_modes) {
    sh("sed -i 's/  / */' '%s/x/st/SHA256SUMS'", root);
    repack();
    grpo_pack_installed in;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_msg(grpo_pack_install(bundle, prefix, 0, grpo_default_host(), &in, &err) ==
                      GRPO_OK, "%s", err.message);
    sh("rm -rf '%s/packs' && echo 'not a checksum' >> '%s/x/st/SHA256SUMS'", root);
    repack();
    expect_refusal(bundle, "SHA256SUMS:3 is not 'SHA256  FILE'; expected sha256sum's format");
}
END_TEST

START_TEST(altered_file_is_refused) {
    sh("echo '; changed' >> '%s/x/st/pack.ini'", root);
    repack();
    expect_refusal(bundle, "pack.ini has SHA-256 ");
    expect_refusal(bundle, "(a corrupt or altered bundle)");
}
END_TEST

START_TEST(unlisted_file_is_refused) {
    sh("echo extra > '%s/x/st/extra.txt'", root);
    repack();
    expect_refusal(bundle, "extra.txt is not in SHA256SUMS; expected every file listed");
}
END_TEST

START_TEST(bundle_without_sums_is_refused) {
    sh("rm '%s/x/st/SHA256SUMS'", root);
    repack();
    expect_refusal(bundle, "no SHA256SUMS; expected one (grpo pack bundle writes it)");
}
END_TEST

START_TEST(path_leaving_the_folder_is_refused) {
    sh("echo evil > '%s/evil' && tar -czf '%s/st-0.0.1.tar.gz' -C '%s/x' st "
       "--transform='s|^st/pack.ini$|st/../../evil|' -C '%s' evil", root);
    expect_refusal(bundle, "expected regular files under one folder");
}
END_TEST

START_TEST(failing_self_test_is_refused) {
    /* a folder source: no SHA256SUMS needed, the self-test still runs */
    sh("rm '%s/x/st/SHA256SUMS' && sed -i 's/^expect = 8$/expect = 9/' '%s/x/st/pack.ini'", root);
    char src[PATH_MAX];
    snprintf(src, sizeof src, "%s/x/st", root);
    expect_refusal(src, "[st.len:test.1] expected 9 (within 1e-05), got 8");
}
END_TEST

START_TEST(library_for_another_machine_is_refused) {
    sh("rm '%s/x/st/SHA256SUMS' && printf '\\177ELF\\002\\001\\001' > '%s/x/st/libtp-selftest.so' "
       "&& head -c 57 /dev/zero >> '%s/x/st/libtp-selftest.so' && "
       "printf '\\267' | dd of='%s/x/st/libtp-selftest.so' bs=1 seek=18 conv=notrunc 2>/dev/null",
       root);
    char src[PATH_MAX];
    snprintf(src, sizeof src, "%s/x/st", root);
#if defined(__aarch64__)
    expect_refusal(src, "library libtp-selftest.so: not an ELF"); /* 0xb7 is aarch64 itself */
#else
    expect_refusal(src, "pack 'st': library libtp-selftest.so: built for aarch64; this grpo is ");
#endif
}
END_TEST

START_TEST(other_version_needs_force) {
    grpo_pack_installed in;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_pack_install(bundle, prefix, 0, grpo_default_host(), &in, &err),
                     GRPO_OK);
    sh("rm '%s/x/st/SHA256SUMS' && sed -i 's/^version = 0.0.1$/version = 0.0.2/' "
       "'%s/x/st/pack.ini'", root);
    char src[PATH_MAX];
    snprintf(src, sizeof src, "%s/x/st", root);
    ck_assert_int_ne(grpo_pack_install(src, prefix, 0, grpo_default_host(), &in, &err), GRPO_OK);
    char want[2 * PATH_MAX];
    snprintf(want, sizeof want, "pack 'st' 0.0.1 is installed in %s/st; this is 0.0.2: pass "
             "--force to replace it (or grpo pack remove st first)", prefix);
    ck_assert_str_eq(err.message, want);
    ck_assert_int_eq(prefix_entries(), 1);
    ck_assert_int_eq(grpo_pack_install(src, prefix, 1, grpo_default_host(), &in, &err), GRPO_OK);
    ck_assert_str_eq(in.replaced, "0.0.1");
    ck_assert_str_eq(in.version, "0.0.2");
    ck_assert_int_eq(prefix_entries(), 1);
}
END_TEST

int main(void) {
    Suite *s = suite_create("pack_install");
    TCase *tc = tcase_create("install");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, bundle_installs_and_removes);
    tcase_add_test(tc, sums_lines_in_both_modes);
    tcase_add_test(tc, altered_file_is_refused);
    tcase_add_test(tc, unlisted_file_is_refused);
    tcase_add_test(tc, bundle_without_sums_is_refused);
    tcase_add_test(tc, path_leaving_the_folder_is_refused);
    tcase_add_test(tc, failing_self_test_is_refused);
    tcase_add_test(tc, library_for_another_machine_is_refused);
    tcase_add_test(tc, other_version_needs_force);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
