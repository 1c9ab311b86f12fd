/* test_manifest.c — pack.ini parsing: a valid manifest read field by field, and each malformed
 * manifest refused with the one-line message a user must see (file, line, cause, expectation). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/registry.h"
#include "host/testing.h"

static char dir[256];
static char path[300];

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/grpo_test_manifest_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char *real = realpath(dir, NULL); /* the parser reports absolute paths for pack dirs */
    snprintf(dir, sizeof dir, "%s", real);
    free(real);
    snprintf(path, sizeof path, "%s/pack.ini", dir);
}

static void teardown(void) {
    unlink(path);
    rmdir(dir);
}

static int parse_text(const char *text, grpo_pack *pack, grpo_error *err) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    grpo_error_init(err);
    return grpo_manifest_parse(path, pack, err);
}

/* Parses text, expects failure with exactly "PATH:LINE: why". */
/* "MAJOR.MINOR" of this SDK, as the manifest reader suggests it. */
#define GRPO_STR2(x) #x
#define GRPO_STR(x) GRPO_STR2(x)
#define GRPO_ABI_TEXT GRPO_STR(GRPO_ABI_MAJOR) "." GRPO_STR(GRPO_ABI_MINOR)

static void expect_error(const char *text, int line, const char *why) {
    grpo_pack pack;
    grpo_error err;
    int rc = parse_text(text, &pack, &err);
    char want[1024];
    snprintf(want, sizeof want, "%s:%d: %s", path, line, why);
    ck_assert_int_eq(rc, GRPO_ERR_INVALID);
    ck_assert_str_eq(err.message, want);
    ck_assert_ptr_null(pack.entries); /* nothing half-built is left behind */
}

#define PACK_HEAD "[pack]\nname = demo\nversion = 0.1.0\nabi = 1.0\nlibrary = libdemo.so\n"

START_TEST(valid_manifest_is_read_completely) {
    const char *text =
        "; a demo pack\n"
        "[pack]\n"
        "name = demo\n"
        "version = 0.1.0\n"
        "abi = 1.0\n"
        "library = libdemo.so   ; next to pack.ini\n"
        "\n"
        "[demo.format]\n"
        "kind = reward\n"
        "description = checks the <think> format and the answer tags, the long\n"
        "  -winded way\n"
        "\n"
        "[demo.format:pattern]\n"
        "type = list\n"
        "default = ^<th\n"
        "    ink>\n"
        "default = </answer>$\n"
        "default = a;b\n"
        "help = regexes to match\n"
        "\n"
        "[demo.format:weight]\n"
        "help = how much\n"
        "type = float\n"
        "default = 0.5\n"
        "\n"
        "[demo.format:name]\n"
        "type = string\n"
        "\n"
        "[demo.dense]\n"
        "kind = model\n"
        "description = dense transformer\n"
        "architectures = LlamaForCausalLM, Qwen2ForCausalLM\n"
        "architectures = Qwen3ForCausalLM\n";
    grpo_pack pack;
    grpo_error err;
    ck_assert_int_eq(parse_text(text, &pack, &err), GRPO_OK);
    ck_assert_str_eq(pack.name, "demo");
    ck_assert_str_eq(pack.version, "0.1.0");
    ck_assert_uint_eq(pack.abi_major, 1);
    ck_assert_uint_eq(pack.abi_minor, 0);
    ck_assert_str_eq(pack.dir, dir);
    ck_assert_str_eq(pack.manifest_path, path);
    char lib[400];
    snprintf(lib, sizeof lib, "%s/libdemo.so", dir);
    ck_assert_str_eq(pack.library_path, lib);
    ck_assert_ptr_null(pack.handle);
    ck_assert_int_eq(pack.n_entries, 2);

    const grpo_entry *fmt = &pack.entries[0];
    ck_assert_str_eq(fmt->id, "demo.format");
    ck_assert_int_eq(fmt->kind, GRPO_KIND_REWARD);
    /* a continuation line joins with nothing between, as in run files (io/ini_reader.h) */
    ck_assert_str_eq(fmt->description,
                     "checks the <think> format and the answer tags, the long-winded way");
    ck_assert_ptr_eq(fmt->pack, &pack);
    ck_assert_int_eq(fmt->n_keys, 3);
    const grpo_key_def *k = grpo_entry_key(fmt, "pattern");
    ck_assert_ptr_eq(k, &fmt->keys[0]); /* manifest order */
    ck_assert_int_eq(k->type, GRPO_KEY_LIST);
    ck_assert_int_eq(k->n_defaults, 3);
    ck_assert_str_eq(k->defaults[0], "^<think>");
    ck_assert_str_eq(k->defaults[1], "</answer>$");
    ck_assert_str_eq(k->defaults[2], "a;b"); /* ';' not after a space stays in the value */
    ck_assert_str_eq(k->help, "regexes to match");
    k = grpo_entry_key(fmt, "weight");
    ck_assert_int_eq(k->type, GRPO_KEY_FLOAT);
    ck_assert(k->has_default && k->n_defaults == 1);
    ck_assert_str_eq(k->defaults[0], "0.5");
    k = grpo_entry_key(fmt, "name");
    ck_assert(!k->has_default && k->n_defaults == 0);
    ck_assert_str_eq(k->help, "");
    ck_assert_ptr_null(grpo_entry_key(fmt, "nope"));

    const grpo_entry *dense = &pack.entries[1];
    ck_assert_int_eq(dense->kind, GRPO_KIND_MODEL);
    ck_assert_int_eq(dense->n_architectures, 3);
    ck_assert_str_eq(dense->architectures[0], "LlamaForCausalLM");
    ck_assert_str_eq(dense->architectures[1], "Qwen2ForCausalLM");
    ck_assert_str_eq(dense->architectures[2], "Qwen3ForCausalLM");
    ck_assert_int_eq(dense->n_keys, 0);
    grpo_pack_free(&pack);
    ck_assert_ptr_null(pack.name);
}
END_TEST

START_TEST(unknown_key_names_line_and_suggests) {
    expect_error(PACK_HEAD "[demo.f]\nkind = reward\ndescripton = x\n", 8,
                 "unknown key 'descripton' in [demo.f]; expected one of kind, description, "
                 "architectures, rows_independent, thread_safe (did you mean 'description'?)");
    expect_error(PACK_HEAD "[demo.f]\nkind = reward\ndescription = x\n[demo.f:k]\ntype = int\n"
                 "colour = red\n",
                 11, "unknown key 'colour' in [demo.f:k]; expected one of type, default, help");
}
END_TEST

/* [pack] takes metadata; an unknown [pack] key is a note, so a newer grpo's manifest loads. */
START_TEST(pack_metadata_is_read_and_unknown_pack_keys_are_notes) {
    grpo_pack pack;
    grpo_error err;
    ck_assert_int_eq(parse_text(PACK_HEAD "author = Jane Doe\nlicense = MIT\nhomepage = "
                                "https://example.org/demo\nmin_grpo = 0.1\nlibrar = x.so\n"
                                "  continued\n[demo.f]\nkind = reward\ndescription = x\n",
                                &pack, &err),
                     GRPO_OK);
    ck_assert_str_eq(pack.author, "Jane Doe");
    ck_assert_str_eq(pack.license, "MIT");
    ck_assert_str_eq(pack.homepage, "https://example.org/demo");
    ck_assert_str_eq(pack.min_grpo, "0.1");
    ck_assert_int_eq(pack.n_notes, 1);
    char want[1024];
    snprintf(want, sizeof want, "%s:10: unknown key 'librar' in [pack]; expected one of name, "
             "version, abi, library, author, license, homepage, min_grpo (did you mean "
             "'library'?) (ignored)", path);
    ck_assert_str_eq(pack.notes[0], want);
    grpo_pack_free(&pack);
    ck_assert_int_eq(parse_text(PACK_HEAD "[demo.f]\nkind = reward\ndescription = x\n", &pack,
                                &err), GRPO_OK);
    ck_assert_ptr_null(pack.author);
    ck_assert_ptr_null(pack.min_grpo);
    ck_assert_int_eq(pack.n_notes, 0);
    grpo_pack_free(&pack);
    expect_error(PACK_HEAD "min_grpo = next\n[demo.f]\nkind = reward\ndescription = x\n", 6,
                 "min_grpo 'next' is not a version; expected e.g. min_grpo = 0.1.0 (digits and "
                 "dots)");
}
END_TEST

START_TEST(too_long_line_is_refused) {
    char text[1024];
    char value[251];
    memset(value, 'x', 250);
    value[250] = '\0';
    /* "description = " is 14 characters, so the line is 264 long */
    snprintf(text, sizeof text, PACK_HEAD "[demo.f]\nkind = reward\ndescription = %s\n", value);
    expect_error(text, 8, "line is 264 characters long; the limit is 199 (split a long value over "
                          "indented continuation lines)");
    /* the longest line that fits, 199 characters (as in run files), is fine */
    memset(value, 'y', 185);
    value[185] = '\0';
    snprintf(text, sizeof text, PACK_HEAD "[demo.f]\nkind = reward\ndescription = %s\n", value);
    grpo_pack pack;
    grpo_error err;
    ck_assert_int_eq(parse_text(text, &pack, &err), GRPO_OK);
    ck_assert_uint_eq(strlen(pack.entries[0].description), 185);
    grpo_pack_free(&pack);
}
END_TEST

/* Trailing CRs beyond the line end's one count toward the line limit and are never copied into
 * inih's 200-byte buffer (found by fuzz_manifest: 400 of them overflowed it; ASan names it). */
START_TEST(trailing_carriage_returns_stay_inside_the_line_buffer) {
    char text[1024];
    char crs[401];
    memset(crs, '\r', 400);
    crs[400] = '\0';
    snprintf(text, sizeof text, "[pack]\nname = demo%s\nversion = 0.1.0\nabi = 1.0\n"
             "library = libdemo.so\n[demo.f]\nkind = reward\ndescription = d\n", crs);
    expect_error(text, 2, "line is 410 characters long; the limit is 199 (split a long value "
                          "over indented continuation lines)");
    snprintf(text, sizeof text, "[pack]\r\nname = demo\r\nversion = 0.1.0\r\nabi = 1.0\r\n"
             "library = libdemo.so\r\n[demo.f]\r\nkind = reward\r\ndescription = d\r\n");
    grpo_pack pack;
    grpo_error err;
    ck_assert_msg(parse_text(text, &pack, &err) == GRPO_OK, "%s", err.message);
    ck_assert_str_eq(pack.name, "demo");
    grpo_pack_free(&pack);
}
END_TEST

START_TEST(pack_section_is_checked) {
    expect_error("[demo.f]\nkind = reward\ndescription = x\n", 1,
                 "no [pack] section; expected [pack] with name, version, abi and library");
    expect_error("[pack]\nname = demo\nversion = 1\nabi = 1.0\n[demo.f]\nkind = reward\n"
                 "description = x\n",
                 1, "[pack] has no library; expected library = <file>.so (relative to the pack "
                    "dir)");
    expect_error("[pack]\nname = demo\nversion = 1\nabi = 1\nlibrary = a.so\n[demo.f]\n"
                 "kind = reward\ndescription = x\n",
                 4, "abi '1' is not MAJOR.MINOR; expected e.g. abi = " GRPO_ABI_TEXT);
    expect_error("[pack]\nname = de.mo\nversion = 1\nabi = 1.0\nlibrary = a.so\n", 2,
                 "pack name 'de.mo' is not a plain name; expected letters, digits, '_' or '-' "
                 "(no '.' or ':')");
    expect_error("[pack]\nname = demo\nversion = 1\nabi = 1.0\nlibrary = /usr/lib/a.so\n"
                 "[demo.f]\nkind = reward\ndescription = x\n",
                 5, "library '/usr/lib/a.so' is an absolute path; expected a file name relative "
                    "to the pack directory");
    expect_error(PACK_HEAD, 1, "pack 'demo' declares no rewards or models; expected at least one "
                               "[demo.NAME] section with kind = reward, model or env");
    expect_error(PACK_HEAD "[pack]\n", 6, "[pack] appears twice (first at line 1); expected one "
                                          "[pack]");
}
END_TEST

/* library names a file inside the pack dir: no '..' component, no link out of the dir. */
START_TEST(library_must_stay_inside_the_pack_dir) {
    expect_error("[pack]\nname = demo\nversion = 1\nabi = 1.0\nlibrary = ../../x.so\n"
                 "[demo.f]\nkind = reward\ndescription = x\n",
                 5, "library '../../x.so' has a '..' component; expected a file inside the pack "
                    "directory");
    expect_error("[pack]\nname = demo\nversion = 1\nabi = 1.0\nlibrary = lib/../../x.so\n"
                 "[demo.f]\nkind = reward\ndescription = x\n",
                 5, "library 'lib/../../x.so' has a '..' component; expected a file inside the "
                    "pack directory");
    /* a link inside the dir that leads out of it */
    char outside[400], link[400], inside[400], alias[400], why[1200];
    snprintf(outside, sizeof outside, "%s-outside.so", dir);
    snprintf(link, sizeof link, "%s/link.so", dir);
    snprintf(inside, sizeof inside, "%s/real.so", dir);
    snprintf(alias, sizeof alias, "%s/alias.so", dir);
    FILE *f = fopen(outside, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    f = fopen(inside, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ck_assert_int_eq(symlink(outside, link), 0);
    ck_assert_int_eq(symlink("real.so", alias), 0);
    snprintf(why, sizeof why, "library 'link.so' resolves to %s, outside the pack directory %s; "
             "expected a file inside it", outside, dir);
    expect_error("[pack]\nname = demo\nversion = 1\nabi = 1.0\nlibrary = link.so\n"
                 "[demo.f]\nkind = reward\ndescription = x\n", 5, why);
    /* a link that stays inside, a name that merely starts with "..", a missing file: fine */
    const char *ok[] = {"alias.so", "..x.so", "sub/missing.so"};
    for (int i = 0; i < 3; i++) {
        char text[300];
        snprintf(text, sizeof text, "[pack]\nname = demo\nversion = 1\nabi = 1.0\nlibrary = %s\n"
                 "[demo.f]\nkind = reward\ndescription = x\n", ok[i]);
        grpo_pack pack;
        grpo_error err;
        ck_assert_msg(parse_text(text, &pack, &err) == GRPO_OK, "%s: %s", ok[i], err.message);
        grpo_pack_free(&pack);
    }
    unlink(outside), unlink(link), unlink(inside), unlink(alias);
}
END_TEST

START_TEST(ids_are_read_from_a_broken_manifest) {
    grpo_pack pack;
    grpo_error err;
    ck_assert_int_eq(parse_text(PACK_HEAD "[demo.a]\nkind = reward\ndescription = x\n"
                                "[demo.a:k]\ntype = int\n  [demo.b] ; indented\ncolour = red\n",
                                &pack, &err), GRPO_ERR_INVALID);
    char **ids;
    int n;
    grpo_manifest_ids(path, &ids, &n);
    ck_assert_int_eq(n, 2); /* [pack] and [ID:KEY] are no ids */
    ck_assert_str_eq(ids[0], "demo.a");
    ck_assert_str_eq(ids[1], "demo.b");
    for (int i = 0; i < n; i++) free(ids[i]);
    free(ids);
    grpo_manifest_ids("/nonexistent/pack.ini", &ids, &n);
    ck_assert_int_eq(n, 0);
    ck_assert_ptr_null(ids);
}
END_TEST

START_TEST(entries_are_checked) {
    expect_error(PACK_HEAD "[other.f]\nkind = reward\ndescription = x\n", 6,
                 "id 'other.f' does not start with the pack name; expected [demo.NAME]");
    expect_error(PACK_HEAD "[demo.f]\ndescription = x\n", 6,
                 "[demo.f] has no kind; expected kind = reward, model or env");
    expect_error(PACK_HEAD "[demo.f]\nkind = rewrd\ndescription = x\n", 7,
                 "kind 'rewrd' of [demo.f] is unknown; expected reward, model or env");
    expect_error(PACK_HEAD "[demo.f]\nkind = reward\n", 6,
                 "[demo.f] has no description; expected description = <one line>");
    expect_error(PACK_HEAD "[demo.f]\nkind = reward\ndescription = x\narchitectures = Llama\n", 9,
                 "[demo.f] is a reward but lists architectures; expected architectures only with "
                 "kind = model");
    expect_error(PACK_HEAD "[demo.f]\nkind = reward\nkind = model\n", 8,
                 "'kind' is set twice in [demo.f] (first at line 7); expected one value "
                 "(continue a long one on indented lines)");
    expect_error(PACK_HEAD "[demo.f]\nkind = reward\ndescription = x\n[demo.f]\n", 9,
                 "[demo.f] appears twice (first at line 6); expected one section per id");
}
END_TEST

/* rows_independent and thread_safe (how the host may spread a reward's calls, reward_pool.h):
 * read when given, their defaults when not, refused on a bad value or a non-reward entry. */
START_TEST(reward_concurrency_keys_are_read_and_checked) {
    grpo_pack pack;
    grpo_error err;
    const char *both = PACK_HEAD "[demo.a]\nkind = reward\ndescription = x\n"
                                 "rows_independent = true\nthread_safe = per_instance\n"
                                 "[demo.b]\nkind = reward\ndescription = y\nthread_safe = true\n"
                                 "[demo.c]\nkind = reward\ndescription = z\n";
    ck_assert_int_eq(parse_text(both, &pack, &err), GRPO_OK);
    ck_assert_int_eq(pack.n_entries, 3);
    ck_assert_int_eq(pack.entries[0].rows_independent, 1);
    ck_assert_int_eq(pack.entries[0].thread_safe, GRPO_THREAD_PER_INSTANCE);
    ck_assert_int_eq(pack.entries[0].thread_safe_set, 1);
    ck_assert_int_eq(pack.entries[1].rows_independent, 0);
    ck_assert_int_eq(pack.entries[1].thread_safe, GRPO_THREAD_SAFE);
    ck_assert_int_eq(pack.entries[2].thread_safe, GRPO_THREAD_UNSAFE);
    ck_assert_int_eq(pack.entries[2].thread_safe_set, 0); /* the library's flag decides */
    grpo_pack_free(&pack);
    expect_error(PACK_HEAD "[demo.f]\nkind = reward\ndescription = x\nrows_independent = yes"
                 "please\n", 9, "rows_independent of [demo.f] is 'yesplease'; expected true or "
                 "false");
    expect_error(PACK_HEAD "[demo.f]\nkind = reward\ndescription = x\nthread_safe = maybe\n", 9,
                 "thread_safe of [demo.f] is 'maybe'; expected false (one call at a time, on the "
                 "trainer's thread), per_instance (separate instances may score at once, on any "
                 "thread) or true (one instance may score on several threads at once)");
    expect_error(PACK_HEAD "[demo.f]\nkind = env\ndescription = x\nthread_safe = true\n", 9,
                 "[demo.f] is an env but sets thread_safe; expected it only with kind = reward");
}
END_TEST

START_TEST(key_sections_are_checked) {
    const char *head = PACK_HEAD "[demo.f]\nkind = reward\ndescription = x\n";
    char text[1024];
#define WITH(tail) (snprintf(text, sizeof text, "%s%s", head, tail), text)
    expect_error(WITH("[demo.g:k]\ntype = int\n"), 9,
                 "[demo.g:k] is a key of 'demo.g', which no [demo.g] section declares; expected "
                 "[ID:KEY] after an [ID] section");
    expect_error(WITH("[demo.f:k]\ndefault = 1\n"), 9,
                 "[demo.f:k] has no type; expected type = string, int, float, bool or list");
    expect_error(WITH("[demo.f:k]\ntype = double\n"), 10,
                 "type 'double' of [demo.f:k] is unknown; expected string, int, float, bool or "
                 "list");
    expect_error(WITH("[demo.f:k]\ntype = int\ndefault = abc\n"), 11,
                 "bad default for [demo.f:k] (type int): expected an integer, got 'abc'");
    expect_error(WITH("[demo.f:k]\ntype = bool\ndefault = maybe\n"), 11,
                 "bad default for [demo.f:k] (type bool): expected true or false, got 'maybe'");
    expect_error(WITH("[demo.f:k]\ntype = float\ndefault = 1\ndefault = 2\n"), 12,
                 "default is set twice in [demo.f:k] (first at line 11); expected one value "
                 "(only type = list takes one line per element)");
    expect_error(WITH("[demo.f:k-2]\ntype = int\n"), 9,
                 "key name 'k-2' in [demo.f:k-2] is not a plain name; expected letters, digits "
                 "and '_'");
#undef WITH
}
END_TEST

START_TEST(malformed_lines_are_refused) {
    expect_error("name = demo\n[pack]\n", 1,
                 "key 'name' comes before any section; expected it under [pack] or an entry's "
                 "section");
    expect_error(PACK_HEAD "[demo.f\n", 6, "expected ']' to close the section header");
    expect_error(PACK_HEAD "[demo.f]\njust words\n", 7,
                 "expected 'key = value', a [section] header or a ';' comment; got 'just "
                 "words'");
    char text[512];
    snprintf(text, sizeof text, PACK_HEAD "[demo.%s]\n",
             "a_very_long_entry_name_that_inih_would_cut_short");
    expect_error(text, 6, "section name 'demo.a_very_long_entry_name_that_inih_would_cut_short' "
                          "is 53 characters long; inih keeps at most 49");
}
END_TEST

START_TEST(missing_file_is_an_io_error) {
    grpo_pack pack;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_manifest_parse("/nonexistent/pack.ini", &pack, &err), GRPO_ERR_IO);
    ck_assert_str_eq(err.message, "/nonexistent/pack.ini: cannot open the pack manifest: No such "
                                  "file or directory");
}
END_TEST

/* Random byte edits of a valid manifest (fixed seed): every result parses or fails with a
 * "PATH:LINE: ..." or "PATH: ..." message; under ASan/UBSan this is a small fuzz of the parser. */
START_TEST(mutated_manifests_fail_cleanly) {
    const char *base = PACK_HEAD "[demo.f]\nkind = reward\ndescription = d\n  more\n"
                                 "[demo.f:k]\ntype = list\ndefault = a\n  b\nhelp = h\n"
                                 "[demo.m]\nkind = model\ndescription = m\n"
                                 "architectures = A, B\n";
    static const char alphabet[] = "[]=:;# \t\n\r.a1\0\xef\xbb\xbf";
    size_t n = strlen(base);
    uint32_t rng = 12345;
    for (int iter = 0; iter < 1000; iter++) {
        char text[1024];
        memcpy(text, base, n);
        size_t len = n;
        int edits = 1 + iter % 4;
        for (int e = 0; e < edits; e++) {
            rng = rng * 1664525u + 1013904223u;
            size_t at = (rng >> 8) % len;
            char c = alphabet[(rng >> 20) % (sizeof alphabet - 1)];
            if ((rng >> 28) % 3 == 0 && len + 1 < sizeof text) { /* insert */
                memmove(text + at + 1, text + at, len - at);
                text[at] = c, len++;
            } else if ((rng >> 28) % 3 == 1 && len > 1) { /* delete */
                memmove(text + at, text + at + 1, len - at - 1);
                len--;
            } else {
                text[at] = c;
            }
        }
        FILE *f = fopen(path, "wb");
        fwrite(text, 1, len, f);
        fclose(f);
        grpo_pack pack;
        grpo_error err;
        grpo_error_init(&err);
        int rc = grpo_manifest_parse(path, &pack, &err);
        if (rc == GRPO_OK) {
            ck_assert_int_ge(pack.n_entries, 1);
            grpo_pack_free(&pack);
        } else {
            ck_assert_msg(strncmp(err.message, path, strlen(path)) == 0 &&
                              err.message[strlen(path)] == ':' && !strchr(err.message, '\n'),
                          "iteration %d: %s", iter, err.message);
        }
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("manifest");
    TCase *tc = tcase_create("parse");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60); /* the mutation test writes 1000 small files */
    tcase_add_test(tc, valid_manifest_is_read_completely);
    tcase_add_test(tc, unknown_key_names_line_and_suggests);
    tcase_add_test(tc, pack_metadata_is_read_and_unknown_pack_keys_are_notes);
    tcase_add_test(tc, too_long_line_is_refused);
    tcase_add_test(tc, trailing_carriage_returns_stay_inside_the_line_buffer);
    tcase_add_test(tc, pack_section_is_checked);
    tcase_add_test(tc, library_must_stay_inside_the_pack_dir);
    tcase_add_test(tc, ids_are_read_from_a_broken_manifest);
    tcase_add_test(tc, entries_are_checked);
    tcase_add_test(tc, key_sections_are_checked);
    tcase_add_test(tc, reward_concurrency_keys_are_read_and_checked);
    tcase_add_test(tc, malformed_lines_are_refused);
    tcase_add_test(tc, missing_file_is_an_io_error);
    tcase_add_test(tc, mutated_manifests_fail_cleanly);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
