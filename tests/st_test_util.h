/* st_test_util.h — helpers shared by the safetensors test suites: scratch directories, files
 * built from text, and "this error names these things" checks. Header-only (static functions). */
#ifndef ST_TEST_UTIL_H
#define ST_TEST_UTIL_H

#include <check.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ST_FIXTURES GRPO_SOURCE_DIR "/tests/fixtures/safetensors"

/* A fresh scratch directory under /tmp; the caller removes it with rm_tree. */
static inline void make_scratch(char *dir, size_t cap) {
    snprintf(dir, cap, "/tmp/grpo_st_test_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static inline int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static inline void rm_tree(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static inline void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* Writes a safetensors file by hand: length field hlen (as given, may lie), the header text,
 * then data_len bytes of data (value i & 0xff). */
static inline void write_st_raw(const char *path, uint64_t hlen, const char *header,
                                size_t data_len) {
    size_t h = strlen(header);
    unsigned char *buf = malloc(8 + h + data_len + 1);
    memcpy(buf, &hlen, 8);
    memcpy(buf + 8, header, h);
    for (size_t i = 0; i < data_len; i++) buf[8 + h + i] = (unsigned char)i;
    write_bytes(path, buf, 8 + h + data_len);
    free(buf);
}

/* Same with the true header length. */
static inline void write_st(const char *path, const char *header, size_t data_len) {
    write_st_raw(path, strlen(header), header, data_len);
}

/* Asserts msg contains every one of the NULL-terminated needles. */
static inline void assert_mentions(const char *msg, const char *const *needles) {
    for (; *needles; needles++)
        ck_assert_msg(strstr(msg, *needles), "error '%s' does not mention '%s'", msg, *needles);
}

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

#endif
