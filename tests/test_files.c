/* test_files.c — the file utilities: whole-file read, atomic replace, mkdir -p, link-safe tree
 * removal, path join. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "base/files.h"
#include "st_test_util.h"

/* Number of entries in dir besides . and .. */
static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static void read_text(const char *path, const char *expect) {
    grpo_error err;
    grpo_error_init(&err);
    char *text = NULL;
    size_t n = 0;
    ck_assert_int_eq(grpo_read_file(path, &text, &n, &err), GRPO_OK);
    ck_assert_uint_eq(n, strlen(expect));
    ck_assert_str_eq(text, expect);
    free(text);
}

START_TEST(read_missing_file_names_path_and_reason) {
    grpo_error err;
    grpo_error_init(&err);
    char *text = NULL;
    ck_assert_int_eq(grpo_read_file("/no/such/file.json", &text, NULL, &err), GRPO_ERR_IO);
    ck_assert_ptr_null(text);
    ck_assert_str_eq(err.message, "/no/such/file.json: cannot open: No such file or directory");
}
END_TEST

START_TEST(read_empty_file_is_empty_string) {
    char dir[64], path[128];
    make_scratch(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/empty", dir);
    write_bytes(path, "", 0);
    read_text(path, "");
    rm_tree(dir);
}
END_TEST

START_TEST(read_keeps_nul_bytes_and_true_length) {
    char dir[64], path[128];
    make_scratch(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/bin", dir);
    static const char bytes[] = {'a', 0, 'b', 0, 0, 'c'};
    write_bytes(path, bytes, sizeof bytes);
    grpo_error err;
    grpo_error_init(&err);
    char *text = NULL;
    size_t n = 0;
    ck_assert_int_eq(grpo_read_file(path, &text, &n, &err), GRPO_OK);
    ck_assert_uint_eq(n, sizeof bytes);
    ck_assert_mem_eq(text, bytes, sizeof bytes);
    ck_assert_int_eq(text[n], 0); /* NUL-terminated past the data */
    free(text);
    rm_tree(dir);
}
END_TEST

START_TEST(read_large_file_whole) {
    char dir[64], path[128];
    make_scratch(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/big", dir);
    size_t len = 300000; /* several growth steps of the read buffer */
    char *data = malloc(len + 1);
    for (size_t i = 0; i < len; i++) data[i] = (char)('a' + i % 26);
    data[len] = 0;
    write_bytes(path, data, len);
    read_text(path, data);
    free(data);
    rm_tree(dir);
}
END_TEST

START_TEST(atomic_write_replaces_content_without_temp) {
    char dir[64], path[128];
    make_scratch(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/f.json", dir);
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_write_file_atomic(path, "first version", 13, &err), GRPO_OK);
    read_text(path, "first version");
    ck_assert_int_eq(grpo_write_file_atomic(path, "2nd", 3, &err), GRPO_OK);
    read_text(path, "2nd");
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_eq(sb.st_mode & 0777, 0644);
    ck_assert_int_eq(count_entries(dir), 1);
    rm_tree(dir);
}
END_TEST

START_TEST(atomic_write_failure_keeps_old_file) {
    char dir[64], path[128];
    make_scratch(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/f.json", dir);
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_write_file_atomic(path, "old", 3, &err), GRPO_OK);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) { /* a file size limit makes write() fail (EFBIG) part way */
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {16, 16};
        setrlimit(RLIMIT_FSIZE, &rl);
        char big[64];
        memset(big, 'x', sizeof big);
        int rc = grpo_write_file_atomic(path, big, sizeof big, &err);
        int named = strstr(err.message, path) && strstr(err.message, "write failed") &&
                    strstr(err.message, "previous file kept");
        _exit(rc == GRPO_ERR_IO && named ? 0 : 1);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    read_text(path, "old");
    ck_assert_int_eq(count_entries(dir), 1); /* the temp file is gone */
    rm_tree(dir);
}
END_TEST

START_TEST(atomic_write_failed_rename_keeps_old_and_no_temp) {
    char dir[64], path[128], inner[160];
    make_scratch(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/d", dir); /* a non-empty directory cannot be renamed over */
    snprintf(inner, sizeof inner, "%s/d/keep", dir);
    ck_assert_int_eq(mkdir(path, 0777), 0);
    write_bytes(inner, "kept", 4);
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_write_file_atomic(path, "new", 3, &err), GRPO_ERR_IO);
    assert_mentions(err.message, (const char *const[]){path, "rename failed", NULL});
    read_text(inner, "kept");
    ck_assert_int_eq(count_entries(dir), 1);
    rm_tree(dir);
}
END_TEST

START_TEST(atomic_write_into_missing_dir_names_path) {
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_write_file_atomic("/no/such/dir/f", "x", 1, &err), GRPO_ERR_IO);
    assert_mentions(err.message,
                    (const char *const[]){"/no/such/dir/f", "cannot create a temporary file",
                                          "No such file", NULL});
}
END_TEST

START_TEST(mkdirs_nested_existing_and_file_in_the_way) {
    char dir[64], path[160];
    make_scratch(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/a/b/c", dir);
    ck_assert_int_eq(grpo_mkdirs(path), 0);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert(S_ISDIR(sb.st_mode));
    ck_assert_int_eq(grpo_mkdirs(path), 0); /* existing: fine */
    snprintf(path, sizeof path, "%s/a/b/c/", dir);
    ck_assert_int_eq(grpo_mkdirs(path), 0); /* trailing slash */

    snprintf(path, sizeof path, "%s/file", dir);
    write_bytes(path, "x", 1);
    errno = 0;
    ck_assert_int_eq(grpo_mkdirs(path), -1); /* the file itself is in the way */
    ck_assert_int_eq(errno, ENOTDIR);
    snprintf(path, sizeof path, "%s/file/sub", dir);
    errno = 0;
    ck_assert_int_eq(grpo_mkdirs(path), -1); /* a file as a parent */
    ck_assert_int_eq(errno, ENOTDIR);
    rm_tree(dir);
}
END_TEST

/* A tree with links to a directory outside it (at the top and deeper) and to a file outside:
 * the tree goes, the links with it, and what they point at stays. */
START_TEST(remove_tree_never_follows_links) {
    char dir[64], tree[128], out[128], path[256];
    make_scratch(dir, sizeof dir);
    snprintf(tree, sizeof tree, "%s/tree", dir);
    snprintf(out, sizeof out, "%s/outside", dir);
    snprintf(path, sizeof path, "%s/sub/deep", tree);
    ck_assert_int_eq(grpo_mkdirs(path), 0);
    ck_assert_int_eq(grpo_mkdirs(out), 0);
    snprintf(path, sizeof path, "%s/keep", out);
    write_bytes(path, "x", 1);
    const char *files[] = {"a", "sub/b", "sub/deep/c"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(path, sizeof path, "%s/%s", tree, files[i]);
        write_bytes(path, "y", 1);
    }
    const char *links[][2] = {{"link", "../outside"},
                              {"sub/deep/dlink", "../../../outside"},
                              {"sub/flink", "../../outside/keep"}};
    for (size_t i = 0; i < sizeof links / sizeof *links; i++) {
        snprintf(path, sizeof path, "%s/%s", tree, links[i][0]);
        ck_assert_int_eq(symlink(links[i][1], path), 0);
    }
    snprintf(path, sizeof path, "%s/sub/deep/dlink/keep", tree);
    read_text(path, "x"); /* the links do reach outside */
    ck_assert_int_eq(grpo_remove_tree(tree), 0);
    struct stat sb;
    ck_assert_int_eq(lstat(tree, &sb), -1);
    ck_assert_int_eq(count_entries(out), 1);
    snprintf(path, sizeof path, "%s/keep", out);
    read_text(path, "x");
    /* path itself a link to a directory: the link goes, the directory stays */
    snprintf(path, sizeof path, "%s/top", dir);
    ck_assert_int_eq(symlink("outside", path), 0);
    ck_assert_int_eq(grpo_remove_tree(path), 0);
    ck_assert_int_eq(lstat(path, &sb), -1);
    ck_assert_int_eq(count_entries(out), 1);
    ck_assert_int_eq(count_entries(dir), 1);
    rm_tree(dir);
}
END_TEST

START_TEST(remove_tree_missing_is_done_and_failure_sets_errno) {
    char dir[64], path[128];
    make_scratch(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/never", dir);
    ck_assert_int_eq(grpo_remove_tree(path), 0);
    snprintf(path, sizeof path, "%s/file", dir);
    write_bytes(path, "z", 1);
    ck_assert_int_eq(grpo_remove_tree(path), 0); /* a plain file is removed too */
    write_bytes(path, "z", 1);
    snprintf(path, sizeof path, "%s/file/x", dir); /* a file as a parent */
    errno = 0;
    ck_assert_int_eq(grpo_remove_tree(path), -1);
    ck_assert_int_eq(errno, ENOTDIR);
    ck_assert_int_eq(count_entries(dir), 1);
    rm_tree(dir);
}
END_TEST

START_TEST(path_join_and_too_long) {
    grpo_error err;
    grpo_error_init(&err);
    char out[16];
    ck_assert_int_eq(grpo_path_join(out, sizeof out, "dir", "name.json", &err), GRPO_OK);
    ck_assert_str_eq(out, "dir/name.json");
    ck_assert_int_eq(grpo_path_join(out, sizeof out, "dir", "name.jsonll", &err), GRPO_OK);
    ck_assert_str_eq(out, "dir/name.jsonll"); /* 15 characters + NUL: just fits */
    ck_assert_int_eq(grpo_path_join(out, sizeof out, "dir", "name.jsonlll", &err),
                     GRPO_ERR_INVALID);
    ck_assert_str_eq(err.message, "dir: path too long");
    ck_assert_int_eq(grpo_path_join(out, sizeof out, "d", "x", NULL), GRPO_OK); /* err optional */
}
END_TEST

START_TEST(path_beside_a_file) {
    const char *cases[][3] = {
        {"runs/a.ini", "data.jsonl", "runs/data.jsonl"},
        {"/r/a.ini", "m/x", "/r/m/x"},
        {"a.ini", "data.jsonl", "data.jsonl"}, /* no directory part */
        {"runs/a.ini", "/abs/x", "/abs/x"},    /* absolute stays */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *p = grpo_path_beside(cases[i][0], cases[i][1]);
        ck_assert_str_eq(p, cases[i][2]);
        free(p);
    }
    char *p = grpo_path_beside(NULL, "x");
    ck_assert_str_eq(p, "x");
    free(p);
}
END_TEST

/* grpo_dirs_apart: an output equal to, inside or holding an input (through a link too, or
 * not existing yet) is refused naming both; a sibling is not. */
START_TEST(output_dirs_must_be_apart_from_inputs) {
    char dir[64], in[128], alias[128], path[256];
    make_scratch(dir, sizeof dir);
    snprintf(in, sizeof in, "%s/model", dir);
    snprintf(alias, sizeof alias, "%s/alias", dir);
    ck_assert_int_eq(grpo_mkdirs(in), 0);
    ck_assert_int_eq(symlink(in, alias), 0);
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_dirs_apart(alias, "OUT", in, "BASE", &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, " is BASE ") != NULL, "%s", err.message);
    snprintf(path, sizeof path, "%s/new/deeper", in); /* inside, not there yet */
    ck_assert_int_eq(grpo_dirs_apart(path, "OUT", in, "BASE", &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "is inside BASE") != NULL, "%s", err.message);
    ck_assert_int_eq(grpo_dirs_apart(dir, "OUT", alias, "BASE", &err), GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "holds BASE") != NULL, "%s", err.message);
    snprintf(path, sizeof path, "%s/model-merged", dir); /* a sibling sharing a prefix */
    ck_assert_int_eq(grpo_dirs_apart(path, "OUT", in, "BASE", &err), GRPO_OK);
    unlink(alias);
    rmdir(in);
    rmdir(dir);
}
END_TEST

int main(void) {
    Suite *s = suite_create("files");
    TCase *tc = tcase_create("files");
    tcase_add_test(tc, read_missing_file_names_path_and_reason);
    tcase_add_test(tc, read_empty_file_is_empty_string);
    tcase_add_test(tc, read_keeps_nul_bytes_and_true_length);
    tcase_add_test(tc, read_large_file_whole);
    tcase_add_test(tc, atomic_write_replaces_content_without_temp);
    tcase_add_test(tc, atomic_write_failure_keeps_old_file);
    tcase_add_test(tc, atomic_write_failed_rename_keeps_old_and_no_temp);
    tcase_add_test(tc, atomic_write_into_missing_dir_names_path);
    tcase_add_test(tc, mkdirs_nested_existing_and_file_in_the_way);
    tcase_add_test(tc, remove_tree_never_follows_links);
    tcase_add_test(tc, remove_tree_missing_is_done_and_failure_sets_errno);
    tcase_add_test(tc, path_join_and_too_long);
    tcase_add_test(tc, path_beside_a_file);
    tcase_add_test(tc, output_dirs_must_be_apart_from_inputs);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
