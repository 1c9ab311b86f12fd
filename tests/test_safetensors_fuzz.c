/* test_safetensors_fuzz.c — random mutations of valid headers: the reader must never crash or
 * read out of bounds (run it under ASan+UBSan), and must either load the file, every tensor
 * readable, or refuse it with a one-line error naming the file.
 * GRPO_FUZZ_ITERS=N (environment) runs more iterations than the default. */
#include "base/files.h"
#include "io/safetensors.h"
#include "st_test_util.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void) { /* xorshift64* */
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return rng * 2685821657736338717ull;
}

static const char structural[] = "{}[]\",:-0123456789e.E+ \\nul";

/* One random edit of buf[0, n) inside its first `limit` bytes (the length field + header). */
static size_t mutate(unsigned char *buf, size_t n, size_t limit) {
    if (limit < 8) return n; /* already cut shorter than the length field */
    size_t at = next_rand() % limit;
    switch (next_rand() % 6) {
    case 0: buf[at] = (unsigned char)next_rand(); break;
    case 1: buf[at] = (unsigned char)structural[next_rand() % (sizeof structural - 1)]; break;
    case 2: buf[at] ^= (unsigned char)(1u << (next_rand() % 8)); break;
    case 3: return at; /* truncate */
    case 4: { /* a big or odd number over a digit */
        const char *nums[] = {"99999999999", "-1", "1e30", "0.5", "18446744073709551616", "4"};
        const char *s = nums[next_rand() % 6];
        for (size_t i = 0; s[i] && at + i < limit; i++) buf[at + i] = (unsigned char)s[i];
        break;
    }
    default: /* the header length field itself */
        buf[next_rand() % 8] = (unsigned char)next_rand();
    }
    return n;
}

static void fuzz_file(const char *src, int iters) {
    char *orig = NULL, path[512], dir[256];
    size_t n = 0;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_read_file(src, &orig, &n, &err), GRPO_OK);
    uint64_t hlen;
    memcpy(&hlen, orig, 8);
    make_scratch(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/fuzz.safetensors", dir);
    unsigned char *buf = malloc(n);
    int loaded = 0;
    for (int it = 0; it < iters; it++) {
        memcpy(buf, orig, n);
        size_t len = n;
        for (int k = 1 + (int)(next_rand() % 3); k > 0; k--)
            len = mutate(buf, len, len < 8 + hlen ? len : 8 + hlen);
        write_bytes(path, buf, len);
        grpo_safetensors *st;
        if (grpo_st_open(&st, path, &err) != GRPO_OK) {
            ck_assert_msg(strstr(err.message, path) && !strchr(err.message, '\n'),
                          "iteration %d: bad error '%s'", it, err.message);
            continue;
        }
        loaded++;
        for (size_t i = 0; i < grpo_st_count(st); i++) { /* every byte of every tensor */
            const grpo_st_tensor *t = grpo_st_at(st, i);
            float *x = malloc((t->numel ? t->numel : 1) * sizeof *x);
            int rc = grpo_st_read_f32(st, t->name, x, t->ndim, t->shape, &err);
            ck_assert(rc == GRPO_OK || rc == GRPO_ERR_UNSUPPORTED);
            free(x);
        }
        grpo_st_close(st);
    }
    ck_assert_int_gt(loaded, 0); /* some mutations (inside data-free spots) still load */
    free(buf);
    free(orig);
    rm_tree(dir);
}

/* The sharded index: mutate its JSON; shards are real copies. */
static void fuzz_index(int iters) {
    char dir[256], path[512], *idx = NULL, *shard = NULL;
    size_t n = 0, ns = 0;
    const char *names[] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
    grpo_error err;
    grpo_error_init(&err);
    make_scratch(dir, sizeof dir);
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/sharded/%s", ST_FIXTURES, names[i]);
        ck_assert_int_eq(grpo_read_file(path, &shard, &ns, &err), GRPO_OK);
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        write_bytes(path, shard, ns);
        free(shard);
    }
    ck_assert_int_eq(grpo_read_file(ST_FIXTURES "/sharded/model.safetensors.index.json", &idx, &n,
                                    &err), GRPO_OK);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    unsigned char *buf = malloc(n);
    for (int it = 0; it < iters; it++) {
        memcpy(buf, idx, n);
        size_t at = next_rand() % n;
        buf[at] = (unsigned char)structural[next_rand() % (sizeof structural - 1)];
        write_bytes(path, buf, next_rand() % 8 ? n : at);
        grpo_safetensors *st;
        if (grpo_st_open(&st, path, &err) == GRPO_OK) grpo_st_close(st);
        else ck_assert_msg(!strchr(err.message, '\n'), "two-line error '%s'", err.message);
    }
    free(buf);
    free(idx);
    rm_tree(dir);
}

static int iterations(void) {
    const char *e = getenv("GRPO_FUZZ_ITERS");
    return e ? atoi(e) : 2000;
}

START_TEST(mutated_f32_headers_never_crash) { fuzz_file(ST_FIXTURES "/f32.safetensors", iterations()); }
END_TEST

START_TEST(mutated_f16_headers_never_crash) { fuzz_file(ST_FIXTURES "/f16.safetensors", iterations()); }
END_TEST

START_TEST(mutated_mixed_headers_never_crash) { fuzz_file(ST_FIXTURES "/mixed.safetensors", iterations()); }
END_TEST

START_TEST(mutated_index_never_crashes) { fuzz_index(iterations() / 4); }
END_TEST

int main(void) {
    Suite *s = suite_create("safetensors_fuzz");
    TCase *tc = tcase_create("fuzz");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, mutated_f32_headers_never_crash);
    tcase_add_test(tc, mutated_f16_headers_never_crash);
    tcase_add_test(tc, mutated_mixed_headers_never_crash);
    tcase_add_test(tc, mutated_index_never_crashes);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
