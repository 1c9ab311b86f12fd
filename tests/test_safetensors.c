/* test_safetensors.c — the safetensors reader against files the reference library wrote, exact
 * F16/BF16 conversion, every corruption the validator must name, and the atomic writer. */
#include <cjson/cJSON.h>
#include <math.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <dirent.h>

#include "base/files.h"
#include "io/safetensors.h"
#include "st_test_util.h"
#include "io/testing.h"

/* ---- reference files (tools/make_safetensors_fixtures.py) ---------------------------------- */

static cJSON *load_expected(void) {
    char *text = NULL;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_msg(grpo_read_file(ST_FIXTURES "/expected.json", &text, NULL, &err) == GRPO_OK,
                  "%s", err.message);
    cJSON *j = cJSON_Parse(text);
    free(text);
    ck_assert_ptr_nonnull(j);
    return j;
}

/* Every tensor of one expected.json entry: dtype, shape and the fp32 bits torch produced. */
static void check_file_against_reference(const char *rel, const cJSON *tensors) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", ST_FIXTURES, rel);
    grpo_error err;
    grpo_error_init(&err);
    grpo_safetensors *st;
    ck_assert_msg(grpo_st_open(&st, path, &err) == GRPO_OK, "%s", err.message);
    ck_assert_int_eq((int)grpo_st_count(st), cJSON_GetArraySize(tensors));
    for (const cJSON *e = tensors->child; e; e = e->next) {
        const grpo_st_tensor *t = grpo_st_find(st, e->string);
        ck_assert_msg(t != NULL, "%s: %s missing", rel, e->string);
        ck_assert_str_eq(grpo_st_dtype_name(t->dtype),
                         cJSON_GetObjectItem(e, "dtype")->valuestring);
        const cJSON *shape = cJSON_GetObjectItem(e, "shape");
        int64_t want[GRPO_ST_MAX_DIMS];
        int nd = cJSON_GetArraySize(shape);
        ck_assert_int_eq(t->ndim, nd);
        for (int d = 0; d < nd; d++) {
            want[d] = (int64_t)cJSON_GetArrayItem(shape, d)->valuedouble;
            ck_assert_int_eq(t->shape[d], want[d]);
        }
        const cJSON *bits = cJSON_GetObjectItem(e, "f32_bits");
        if (!bits) continue; /* integer tensors: no fp32 view */
        ck_assert_uint_eq(t->numel, (uint64_t)cJSON_GetArraySize(bits));
        float *x = malloc((t->numel ? t->numel : 1) * sizeof *x);
        ck_assert_msg(grpo_st_read_f32(st, e->string, x, nd, want, &err) == GRPO_OK, "%s",
                      err.message);
        int i = 0;
        for (const cJSON *b = bits->child; b; b = b->next, i++) {
            uint32_t want = (uint32_t)b->valuedouble;
            if ((want & 0x7fffffffu) > 0x7f800000u) { /* torch's NaN bits vary by code path */
                ck_assert_msg(isnan(x[i]), "%s %s[%d] is not NaN", rel, e->string, i);
                continue;
            }
            ck_assert_msg(f32_bits(x[i]) == (uint32_t)b->valuedouble,
                          "%s %s[%d]: got 0x%08x, torch 0x%08x", rel, e->string, i,
                          f32_bits(x[i]), (uint32_t)b->valuedouble);
        }
        free(x);
    }
    grpo_st_close(st);
}

START_TEST(reads_reference_files_exactly) {
    cJSON *exp = load_expected();
    int files = 0;
    for (const cJSON *f = exp->child; f; f = f->next, files++)
        check_file_against_reference(f->string, f);
    ck_assert_int_ge(files, 5);
    cJSON_Delete(exp);
}
END_TEST

START_TEST(sharded_index_finds_tensors_across_shards) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_safetensors *st;
    ck_assert_msg(grpo_st_open(&st, ST_FIXTURES "/sharded/model.safetensors.index.json", &err) ==
                      GRPO_OK, "%s", err.message);
    ck_assert_uint_eq(grpo_st_n_files(st), 2);
    ck_assert_str_eq(grpo_st_find(st, "lm_head.weight")->file,
                     ST_FIXTURES "/sharded/model-00002-of-00002.safetensors");
    ck_assert_str_eq(grpo_st_find(st, "model.norm.weight")->file,
                     ST_FIXTURES "/sharded/model-00001-of-00002.safetensors");
    ck_assert_str_eq(grpo_st_metadata(st, "format"), "pt");
    ck_assert_ptr_null(grpo_st_metadata(st, "nope"));
    /* name order */
    for (size_t i = 1; i < grpo_st_count(st); i++)
        ck_assert_int_lt(strcmp(grpo_st_at(st, i - 1)->name, grpo_st_at(st, i)->name), 0);
    grpo_st_close(st);
}
END_TEST

START_TEST(metadata_absent_is_fine) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_safetensors *st;
    ck_assert_int_eq(grpo_st_open(&st, ST_FIXTURES "/bf16.safetensors", &err), GRPO_OK);
    ck_assert_ptr_null(grpo_st_metadata(st, "format"));
    grpo_st_close(st);
}
END_TEST

/* A file of only __metadata__ holds no tensor: it opens (nothing to sort or search; UBSan caught
 * qsort and bsearch being handed NULL), and asking for a tensor is a clear error. */
START_TEST(metadata_only_file_opens_empty) {
    char dir[64], path[128];
    make_scratch(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/meta.safetensors", dir);
    write_st(path, "{\"__metadata__\":{\"format\":\"pt\"}}", 0);
    grpo_error err;
    grpo_error_init(&err);
    grpo_safetensors *st;
    ck_assert_msg(grpo_st_open(&st, path, &err) == GRPO_OK, "%s", err.message);
    ck_assert_uint_eq(grpo_st_count(st), 0);
    ck_assert_str_eq(grpo_st_metadata(st, "format"), "pt");
    ck_assert_ptr_null(grpo_st_find(st, "w"));
    float x;
    int64_t shape[1] = {1};
    ck_assert_int_ne(grpo_st_read_f32(st, "w", &x, 1, shape, &err), GRPO_OK);
    ck_assert_ptr_nonnull(strstr(err.message, "'w'"));
    grpo_st_close(st);
    rm_tree(dir);
}
END_TEST

/* ---- exact conversions (hand-computable) ------------------------------------------------- */

START_TEST(f16_every_value_matches_the_ieee_formula) {
    for (uint32_t h = 0; h < 65536; h++) {
        int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
        float got = grpo_f16_to_f32((uint16_t)h);
        if (e == 31) {
            ck_assert(m ? isnan(got) : isinf(got));
            ck_assert_int_eq(!!signbit(got), sign);
            if (m) ck_assert_uint_eq(f32_bits(got) & 0x7fffff, (uint32_t)m << 13); /* payload */
            continue;
        }
        double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
        if (sign) v = -v;
        ck_assert_msg(got == (float)v && !!signbit(got) == sign, "h=0x%04x got %a want %a", h,
                      (double)got, v);
    }
    ck_assert(grpo_f16_to_f32(0x0001) == 0x1p-24f);  /* smallest subnormal */
    ck_assert(grpo_f16_to_f32(0x7bff) == 65504.0f);  /* largest finite */
}
END_TEST

START_TEST(bf16_is_the_top_half_and_rounds_to_nearest_even) {
    for (uint32_t b = 0; b < 65536; b++) {
        float f = grpo_bf16_to_f32((uint16_t)b);
        ck_assert_uint_eq(f32_bits(f), b << 16);
        if (!isnan(f)) ck_assert_uint_eq(grpo_f32_to_bf16(f), b);
        else ck_assert(isnan(grpo_bf16_to_f32(grpo_f32_to_bf16(f))));
    }
    ck_assert_uint_eq(grpo_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80); /* tie -> even (down) */
    ck_assert_uint_eq(grpo_f32_to_bf16(1.0f + 0x3p-8f), 0x3f82); /* tie -> even (up) */
    ck_assert_uint_eq(grpo_f32_to_bf16(3.4e38f), 0x7f80);        /* overflows to inf */
}
END_TEST

START_TEST(bf16_rounding_matches_torch) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_safetensors *st;
    ck_assert_msg(grpo_st_open(&st, ST_FIXTURES "/bf16_rounding.safetensors", &err) == GRPO_OK,
                  "%s", err.message);
    const grpo_st_tensor *in = grpo_st_find(st, "input"), *ref = grpo_st_find(st, "torch_bf16");
    ck_assert_uint_eq(in->numel, ref->numel);
    for (uint64_t i = 0; i < in->numel; i++) {
        float x;
        uint16_t want;
        memcpy(&x, (const char *)in->data + 4 * i, 4);
        memcpy(&want, (const char *)ref->data + 2 * i, 2);
        if (isnan(x)) { /* torch's NaN bits differ by code path; any NaN is right */
            ck_assert(isnan(grpo_bf16_to_f32(grpo_f32_to_bf16(x))));
            continue;
        }
        ck_assert_msg(grpo_f32_to_bf16(x) == want, "input %a: got 0x%04x torch 0x%04x",
                      (double)x, grpo_f32_to_bf16(x), want);
    }
    grpo_st_close(st);
}
END_TEST

/* ---- corrupt files: each error names the file, the tensor and what was expected ---------- */

static char scratch[256];

static void scratch_setup(void) { make_scratch(scratch, sizeof scratch); }
static void scratch_teardown(void) { rm_tree(scratch); }

/* Opens path, expects failure, and checks the message names path and the needles. */
static void expect_open_error(const char *path, const char *const *needles) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_safetensors *st = (grpo_safetensors *)1;
    ck_assert_msg(grpo_st_open(&st, path, &err) != GRPO_OK, "%s opened but is corrupt", path);
    ck_assert_ptr_null(st);
    ck_assert(strchr(err.message, '\n') == NULL);
    ck_assert_msg(strstr(err.message, path), "error '%s' does not name %s", err.message, path);
    assert_mentions(err.message, needles);
}

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define W_OK_ "\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}"

static void corrupt_case(const char *name, const char *header, size_t data_len,
                         const char *const *needles) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.safetensors", scratch, name);
    write_st(path, header, data_len);
    expect_open_error(path, needles);
}

START_TEST(valid_hand_made_file_opens) {
    char path[512];
    snprintf(path, sizeof path, "%s/ok.safetensors", scratch);
    write_st(path, "{" W_OK_ ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]},"
                   "\"e\":{\"dtype\":\"BF16\",\"shape\":[0,3],\"data_offsets\":[16,16]}}  ", 24);
    grpo_error err;
    grpo_error_init(&err);
    grpo_safetensors *st;
    ck_assert_msg(grpo_st_open(&st, path, &err) == GRPO_OK, "%s", err.message);
    ck_assert_uint_eq(grpo_st_count(st), 3);
    grpo_st_close(st);
}
END_TEST

START_TEST(truncated_data_names_the_tensor) {
    corrupt_case("trunc",
                 "{" W_OK_ ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}", 20,
                 NEEDLES("'b'", "[16, 24]", "20 bytes", "truncated"));
}
END_TEST

START_TEST(truncated_reference_file_is_refused) {
    char *text = NULL, path[512];
    size_t n = 0;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_read_file(ST_FIXTURES "/f32.safetensors", &text, &n, &err), GRPO_OK);
    snprintf(path, sizeof path, "%s/f32_cut.safetensors", scratch);
    for (size_t cut = 1; cut <= n; cut += 7) { /* every prefix length class must fail cleanly */
        write_bytes(path, text, n - cut);
        expect_open_error(path, NEEDLES(""));
    }
    write_bytes(path, text, n - 4); /* only the last tensor's end is cut off */
    expect_open_error(path, NEEDLES("tensor '", "truncated"));
    free(text);
}
END_TEST

START_TEST(bad_header_length) {
    char path[512];
    snprintf(path, sizeof path, "%s/hlen.safetensors", scratch);
    write_st_raw(path, 1ull << 40, "{" W_OK_ "}", 16);
    expect_open_error(path, NEEDLES("header length 1099511627776", "exceeds"));
    write_st_raw(path, 0, "{" W_OK_ "}", 16);
    expect_open_error(path, NEEDLES("header length 0"));
    write_bytes(path, "abc", 3);
    expect_open_error(path, NEEDLES("3 bytes", "8-byte header length"));
    write_bytes(path, "", 0);
    expect_open_error(path, NEEDLES("0 bytes"));
}
END_TEST

START_TEST(overlapping_offsets) {
    corrupt_case("overlap",
                 "{" W_OK_ ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 24,
                 NEEDLES("'w'", "'b'", "overlap"));
}
END_TEST

START_TEST(out_of_range_offsets) {
    corrupt_case("range",
                 "{" W_OK_ ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,1000]}}",
                 24, NEEDLES("'b'", "[16, 1000]", "beyond the data section of 24 bytes"));
    corrupt_case("reversed",
                 "{" W_OK_ ",\"b\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[16,8]}}", 24,
                 NEEDLES("'b'", "begin > end"));
    corrupt_case("negative",
                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", 16,
                 NEEDLES("'w'", "data_offsets"));
    corrupt_case("fraction",
                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0.5,8.5]}}", 16,
                 NEEDLES("'w'", "data_offsets"));
    corrupt_case("huge",
                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,1e300]}}", 16,
                 NEEDLES("'w'", "data_offsets"));
}
END_TEST

START_TEST(unknown_dtype) {
    corrupt_case("dtype", "{\"w\":{\"dtype\":\"F33\",\"shape\":[2,2],\"data_offsets\":[0,16]}}",
                 16, NEEDLES("'w'", "unknown dtype 'F33'", "expected F32"));
    corrupt_case("nodtype", "{\"w\":{\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16,
                 NEEDLES("'w'", "dtype"));
}
END_TEST

START_TEST(shape_size_mismatch) {
    corrupt_case("size", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,16]}}",
                 24, NEEDLES("'w'", "hold 16 bytes, expected 24 for F32 [2, 3]"));
    corrupt_case("negdim", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,-2],\"data_offsets\":[0,16]}}",
                 16, NEEDLES("'w'", "shape[1]"));
    corrupt_case("overflow",
                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
                 "\"data_offsets\":[0,16]}}", 16, NEEDLES("'w'", "overflows"));
    corrupt_case("bytes_overflow",
                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
                 "\"data_offsets\":[0,16]}}", 16, NEEDLES("'w'", "overflows"));
    corrupt_case("ndim",
                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                 "\"data_offsets\":[0,4]}}", 4, NEEDLES("'w'", "9 dimensions"));
    corrupt_case("noshape", "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,16]}}", 16,
                 NEEDLES("'w'", "shape"));
    corrupt_case("nooffsets", "{\"w\":{\"dtype\":\"F32\",\"shape\":[4]}}", 16,
                 NEEDLES("'w'", "data_offsets"));
    corrupt_case("threeoffsets",
                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,8,16]}}", 16,
                 NEEDLES("'w'", "[begin, end]"));
}
END_TEST

START_TEST(bad_json) {
    corrupt_case("json", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2]     ", 16,
                 NEEDLES("not valid JSON"));
    corrupt_case("notobject", "[1, 2, 3]", 0, NEEDLES("not an object"));
    corrupt_case("trailing", "{" W_OK_ "}xx", 16, NEEDLES("after its JSON object"));
    corrupt_case("entry", "{\"w\":[1,2]}", 0, NEEDLES("'w'", "expected an object"));
    corrupt_case("meta", "{\"__metadata__\":{\"format\":1}," W_OK_ "}", 16,
                 NEEDLES("__metadata__", "strings"));
    corrupt_case("twice", "{" W_OK_ "," W_OK_ "}", 16, NEEDLES("'w'", "twice"));
    corrupt_case("emptyname",
                 "{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                 NEEDLES("empty name"));
}
END_TEST

START_TEST(missing_tensor_and_wrong_shape_on_read) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_safetensors *st;
    const char *path = ST_FIXTURES "/f32.safetensors";
    ck_assert_int_eq(grpo_st_open(&st, path, &err), GRPO_OK);
    float buf[16];
    int64_t want[2] = {3, 2};
    ck_assert_int_eq(grpo_st_read_f32(st, "model.nope", buf, 2, want, &err), GRPO_ERR_INVALID);
    assert_mentions(err.message, NEEDLES(path, "'model.nope'", "not found", "[3, 2]"));
    ck_assert_int_eq(grpo_st_read_f32(st, "a", buf, 2, want, &err), GRPO_ERR_INVALID);
    assert_mentions(err.message, NEEDLES(path, "'a'", "has shape [2, 3], expected [3, 2]"));
    int64_t flat[1] = {6};
    ck_assert_int_eq(grpo_st_read_f32(st, "a", buf, 1, flat, &err), GRPO_ERR_INVALID);
    assert_mentions(err.message, NEEDLES("'a'", "[2, 3]", "expected [6]"));
    grpo_st_close(st);
}
END_TEST

START_TEST(unsupported_dtype_on_read) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_safetensors *st;
    const char *path = ST_FIXTURES "/mixed.safetensors";
    ck_assert_int_eq(grpo_st_open(&st, path, &err), GRPO_OK);
    float buf[8];
    int64_t shape[2] = {1, 6};
    ck_assert_int_eq(grpo_st_read_f32(st, "position_ids", buf, 2, shape, &err),
                     GRPO_ERR_UNSUPPORTED);
    assert_mentions(err.message, NEEDLES(path, "'position_ids'", "I64", "F32, F16 and BF16"));
    grpo_st_close(st);
}
END_TEST

/* ---- sharded index corruptions ------------------------------------------------------------- */

static void copy_fixture(const char *rel, const char *dst_name) {
    char *text = NULL, dst[512];
    size_t n = 0;
    char src[512];
    snprintf(src, sizeof src, "%s/%s", ST_FIXTURES, rel);
    grpo_error err;
    ck_assert_int_eq(grpo_read_file(src, &text, &n, &err), GRPO_OK);
    snprintf(dst, sizeof dst, "%s/%s", scratch, dst_name);
    write_bytes(dst, text, n);
    free(text);
}

static void index_case(const char *json, const char *const *needles) {
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", scratch);
    write_bytes(path, json, strlen(json));
    expect_open_error(path, needles);
}

START_TEST(sharded_index_errors) {
    copy_fixture("sharded/model-00001-of-00002.safetensors", "s1.safetensors");
    copy_fixture("sharded/model-00002-of-00002.safetensors", "s2.safetensors");
    index_case("{\"weight_map\":{\"lm_head.weight\":\"gone.safetensors\"}}",
               NEEDLES("gone.safetensors", "cannot open"));
    index_case("{\"weight_map\":{\"lm_head.weight\":\"s1.safetensors\"}}",
               NEEDLES("'lm_head.weight'", "missing from shard", "s1.safetensors"));
    index_case("{\"weight_map\":{\"lm_head.weight\":\"s2.safetensors\","
               "\"model.norm.weight\":\"s2.safetensors\", \"x\":\"s1.safetensors\"}}",
               NEEDLES("'model.norm.weight'", "is in", "s1.safetensors"));
    index_case("{\"weight_map\":{\"a\":\"../s1.safetensors\"}}",
               NEEDLES("'../s1.safetensors'", "relative"));
    index_case("{\"weight_map\":{}}", NEEDLES("empty"));
    index_case("{\"metadata\":{}}", NEEDLES("weight_map"));
    index_case("{\"weight_map\":{\"a\":", NEEDLES("weight_map"));
    index_case("{\"weight_map\":{\"a\":7}}", NEEDLES("weight_map['a']"));
    /* the same tensor in two shards */
    copy_fixture("sharded/model-00001-of-00002.safetensors", "s1b.safetensors");
    index_case("{\"weight_map\":{\"model.norm.weight\":\"s1.safetensors\","
               "\"model.embed_tokens.weight\":\"s1b.safetensors\"}}",
               NEEDLES("appears twice"));
}
END_TEST

/* ---- writer -------------------------------------------------------------------------------- */

/* A few tensors of hand-chosen values, one of them empty and one a scalar. */
static float wa[6] = {1.0f, -2.0f, 0.1f, 1e-40f, 3.0e38f, -0.0f};
static float wb[3] = {0.5f, 1.0f + 0x1p-8f, 65504.0f};
static float wscalar[1] = {7.0f};
static const grpo_st_out outs[] = {
    {.name = "model.embed.weight", .data = wa, .ndim = 2, .shape = {2, 3}},
    {.name = "model.norm.weight", .data = wb, .ndim = 1, .shape = {3}},
    {.name = "empty", .data = NULL, .ndim = 2, .shape = {0, 5}},
    {.name = "scalar", .data = wscalar, .ndim = 0, .shape = {0}},
};
#define N_OUTS (sizeof outs / sizeof outs[0])

static void round_trip(grpo_st_dtype dtype) {
    char path[512];
    snprintf(path, sizeof path, "%s/rt.safetensors", scratch);
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_msg(grpo_st_write(path, outs, N_OUTS, dtype, &err) == GRPO_OK, "%s", err.message);
    grpo_safetensors *st;
    ck_assert_msg(grpo_st_open(&st, path, &err) == GRPO_OK, "%s", err.message);
    ck_assert_uint_eq(grpo_st_count(st), N_OUTS);
    ck_assert_str_eq(grpo_st_metadata(st, "format"), "pt");
    for (size_t i = 0; i < N_OUTS; i++) {
        const grpo_st_tensor *t = grpo_st_find(st, outs[i].name);
        ck_assert_int_eq(t->dtype, dtype);
        float x[8];
        ck_assert_msg(grpo_st_read_f32(st, outs[i].name, x, outs[i].ndim, outs[i].shape, &err) ==
                          GRPO_OK, "%s", err.message);
        for (uint64_t k = 0; k < t->numel; k++) {
            float want = dtype == GRPO_ST_F32 ? outs[i].data[k]
                                              : grpo_bf16_to_f32(grpo_f32_to_bf16(outs[i].data[k]));
            ck_assert_uint_eq(f32_bits(x[k]), f32_bits(want));
        }
    }
    grpo_st_close(st);
}

START_TEST(write_read_round_trip_f32) { round_trip(GRPO_ST_F32); }
END_TEST

START_TEST(write_read_round_trip_bf16) { round_trip(GRPO_ST_BF16); }
END_TEST

/* grpo_st_out.fill of the test below: outs[key]'s data, each call counted in *ctx. */
static int fill_from_outs(void *ctx, uint64_t key, float *buf, grpo_error *err) {
    (void)err;
    ++*(int *)ctx;
    uint64_t n = 1;
    for (int d = 0; d < outs[key].ndim; d++) n *= (uint64_t)outs[key].shape[d];
    memcpy(buf, outs[key].data, n * sizeof(float));
    return GRPO_OK;
}

/* Tensors given through fill (data NULL) are written as the same tensors given as data: the
 * same bytes, fill called once per non-empty tensor. */
START_TEST(fill_writes_the_same_bytes_as_data) {
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/data.safetensors", scratch);
    snprintf(b, sizeof b, "%s/fill.safetensors", scratch);
    grpo_st_out filled[N_OUTS];
    int calls = 0;
    for (size_t i = 0; i < N_OUTS; i++) {
        filled[i] = outs[i];
        filled[i].data = NULL, filled[i].fill = fill_from_outs;
        filled[i].ctx = &calls, filled[i].key = i;
    }
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_msg(grpo_st_write(a, outs, N_OUTS, GRPO_ST_BF16, &err) == GRPO_OK, "%s", err.message);
    ck_assert_msg(grpo_st_write(b, filled, N_OUTS, GRPO_ST_BF16, &err) == GRPO_OK, "%s",
                  err.message);
    ck_assert_int_eq(calls, 3); /* "empty" has no elements */
    char *x, *y;
    size_t nx, ny;
    ck_assert_int_eq(grpo_read_file(a, &x, &nx, &err), GRPO_OK);
    ck_assert_int_eq(grpo_read_file(b, &y, &ny, &err), GRPO_OK);
    ck_assert_uint_eq(nx, ny);
    ck_assert(memcmp(x, y, nx) == 0);
    free(x), free(y);
}
END_TEST

/* KiB of the mapping that holds address p resident in this process (/proc/self/smaps "Rss:" of
 * the region whose range contains p), or -1 when not found. */
static long mapping_rss_kib(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    long rss = -1;
    int inside = 0;
    uintptr_t a = (uintptr_t)p;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            inside = a >= lo && a < hi;
        else if (inside && sscanf(line, "Rss: %ld kB", &rss) == 1)
            break;
    }
    fclose(f);
    return rss;
}

/* A read tensor's bytes leave the process's memory as they are converted (the file is mapped:
 * a model's load must not hold the file beside its weights); reading it again gives the same
 * values (the pages come back from the file). */
START_TEST(read_releases_the_mapped_pages) {
    enum { N = 3 << 20 }; /* 12 MiB of F32: several of the reader's slices */
    float *big = malloc((size_t)N * sizeof *big), *got = malloc((size_t)N * sizeof *got);
    for (uint32_t k = 0; k < N; k++) big[k] = (float)k * 0.5f;
    grpo_st_out o = {.name = "w", .data = big, .ndim = 1, .shape = {N}};
    char path[512];
    snprintf(path, sizeof path, "%s/big.safetensors", scratch);
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_msg(grpo_st_write(path, &o, 1, GRPO_ST_F32, &err) == GRPO_OK, "%s", err.message);
    grpo_safetensors *st;
    ck_assert_msg(grpo_st_open(&st, path, &err) == GRPO_OK, "%s", err.message);
    const grpo_st_tensor *t = grpo_st_find(st, "w");
    volatile float touch = 0;
    for (uint64_t k = 0; k < N; k += 1024) touch += ((const float *)t->data)[k]; /* fault in */
    long before = mapping_rss_kib(t->data);
    ck_assert_msg(before > 10 * 1024, "the mapping should be resident after touching: %ld KiB",
                  before);
    for (int pass = 0; pass < 2; pass++) {
        int64_t shape[1] = {N};
        ck_assert_msg(grpo_st_read_f32(st, "w", got, 1, shape, &err) == GRPO_OK, "%s",
                      err.message);
        long after = mapping_rss_kib(t->data);
        ck_assert_msg(after >= 0 && after < 64, "pass %d: %ld KiB of the mapping still resident "
                      "after the read (before: %ld)", pass, after, before);
        ck_assert_int_eq(memcmp(got, big, (size_t)N * sizeof *got), 0);
    }
    grpo_st_close(st);
    free(big), free(got);
}
END_TEST

/* The byte layout rules the reference library relies on, checked on our raw output. */
START_TEST(writer_byte_layout) {
    char path[512];
    snprintf(path, sizeof path, "%s/layout.safetensors", scratch);
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_st_write(path, outs, N_OUTS, GRPO_ST_F32, &err), GRPO_OK);
    char *raw = NULL;
    size_t n = 0;
    ck_assert_int_eq(grpo_read_file(path, &raw, &n, &err), GRPO_OK);
    uint64_t hlen;
    memcpy(&hlen, raw, 8);
    ck_assert_uint_eq(hlen % 8, 0); /* data section starts 8-byte aligned */
    ck_assert_uint_le(8 + hlen, n);
    const char *end = NULL;
    cJSON *h = cJSON_ParseWithLengthOpts(raw + 8, hlen, &end, 0);
    ck_assert_ptr_nonnull(h);
    for (const char *p = end; p < raw + 8 + hlen; p++) ck_assert_int_eq(*p, ' ');
    ck_assert_str_eq(h->child->string, "__metadata__"); /* first, as the reference writes it */
    ck_assert_str_eq(cJSON_GetObjectItem(h->child, "format")->valuestring, "pt");
    uint64_t expect = 0;
    size_t i = 0;
    for (const cJSON *e = h->child->next; e; e = e->next, i++) { /* contiguous, in order */
        ck_assert_str_eq(e->string, outs[i].name);
        const cJSON *off = cJSON_GetObjectItem(e, "data_offsets");
        ck_assert_uint_eq((uint64_t)cJSON_GetArrayItem(off, 0)->valuedouble, expect);
        expect = (uint64_t)cJSON_GetArrayItem(off, 1)->valuedouble;
    }
    ck_assert_uint_eq(i, N_OUTS);
    ck_assert_uint_eq(8 + hlen + expect, n); /* no trailing bytes */
    cJSON_Delete(h);
    free(raw);
}
END_TEST

START_TEST(writer_escapes_names) {
    char path[512];
    snprintf(path, sizeof path, "%s/esc.safetensors", scratch);
    float v = 1.0f;
    grpo_st_out t = {.name = "we\"ird\\name\n", .data = &v, .ndim = 1, .shape = {1}};
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_st_write(path, &t, 1, GRPO_ST_F32, &err), GRPO_OK);
    grpo_safetensors *st;
    ck_assert_msg(grpo_st_open(&st, path, &err) == GRPO_OK, "%s", err.message);
    ck_assert_ptr_nonnull(grpo_st_find(st, "we\"ird\\name\n"));
    grpo_st_close(st);
}
END_TEST

START_TEST(writer_rejects_bad_input) {
    char path[512];
    snprintf(path, sizeof path, "%s/bad.safetensors", scratch);
    grpo_error err;
    grpo_error_init(&err);
    grpo_st_out dup[2] = {outs[0], outs[0]};
    ck_assert_int_eq(grpo_st_write(path, dup, 2, GRPO_ST_F32, &err), GRPO_ERR_INVALID);
    assert_mentions(err.message, NEEDLES(path, "'model.embed.weight'", "twice"));
    ck_assert_int_eq(grpo_st_write(path, outs, 1, GRPO_ST_F16, &err), GRPO_ERR_UNSUPPORTED);
    ck_assert_int_eq(access(path, F_OK), -1); /* nothing written */
    ck_assert_int_eq(grpo_st_write("/nonexistent-dir/x.safetensors", outs, 1, GRPO_ST_F32, &err),
                     GRPO_ERR_IO);
    assert_mentions(err.message, NEEDLES("/nonexistent-dir/x.safetensors"));
}
END_TEST

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* A write that fails midway (file size limit, like a full disk) leaves the old file intact and
 * no temp file behind. Runs in a child so the limit does not leak into other tests. */
START_TEST(failed_write_keeps_previous_file) {
    char path[512];
    snprintf(path, sizeof path, "%s/keep.safetensors", scratch);
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_st_write(path, outs, 2, GRPO_ST_F32, &err), GRPO_OK);
    char *before = NULL, *after = NULL;
    size_t nb = 0, na = 0;
    ck_assert_int_eq(grpo_read_file(path, &before, &nb, &err), GRPO_OK);
    static float big[4096];
    grpo_st_out t = {.name = "big", .data = big, .ndim = 1, .shape = {4096}};
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {100, 100};
        setrlimit(RLIMIT_FSIZE, &rl);
        int rc = grpo_st_write(path, &t, 1, GRPO_ST_F32, &err);
        int named = strstr(err.message, path) && strstr(err.message, "previous file kept");
        _exit(rc == GRPO_ERR_IO && named ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "write did not fail cleanly");
    ck_assert_int_eq(grpo_read_file(path, &after, &na, &err), GRPO_OK);
    ck_assert_uint_eq(na, nb);
    ck_assert(memcmp(before, after, nb) == 0);
    ck_assert_int_eq(count_entries(scratch), 1); /* the temp file was removed */
    free(before);
    free(after);
}
END_TEST

START_TEST(atomic_text_file) {
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", scratch);
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_write_file_atomic(path, "{\"a\":1}", 7, &err), GRPO_OK);
    ck_assert_int_eq(grpo_write_file_atomic(path, "{}", 2, &err), GRPO_OK);
    char *text = NULL;
    ck_assert_int_eq(grpo_read_file(path, &text, NULL, &err), GRPO_OK);
    ck_assert_str_eq(text, "{}");
    free(text);
    ck_assert_int_eq(count_entries(scratch), 1);
}
END_TEST

/* Leaves files written by our writer in the build tree for tools/check_safetensors_roundtrip.py
 * (the reference library must read them; Python cannot run inside this suite). */
START_TEST(writer_output_for_the_python_check) {
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/safetensors_out", GRPO_BINARY_DIR);
    mkdir(dir, 0755);
    grpo_error err;
    grpo_error_init(&err);
    snprintf(path, sizeof path, "%s/ours_f32.safetensors", dir);
    ck_assert_msg(grpo_st_write(path, outs, N_OUTS, GRPO_ST_F32, &err) == GRPO_OK, "%s",
                  err.message);
    snprintf(path, sizeof path, "%s/ours_bf16.safetensors", dir);
    ck_assert_msg(grpo_st_write(path, outs, N_OUTS, GRPO_ST_BF16, &err) == GRPO_OK, "%s",
                  err.message);
}
END_TEST

int main(void) {
    Suite *s = suite_create("safetensors");
    TCase *ref = tcase_create("reference");
    tcase_add_test(ref, reads_reference_files_exactly);
    tcase_add_test(ref, sharded_index_finds_tensors_across_shards);
    tcase_add_test(ref, metadata_absent_is_fine);
    tcase_add_test(ref, metadata_only_file_opens_empty);
    tcase_add_test(ref, f16_every_value_matches_the_ieee_formula);
    tcase_add_test(ref, bf16_is_the_top_half_and_rounds_to_nearest_even);
    tcase_add_test(ref, bf16_rounding_matches_torch);
    tcase_add_test(ref, missing_tensor_and_wrong_shape_on_read);
    tcase_add_test(ref, unsupported_dtype_on_read);
    tcase_add_test(ref, writer_output_for_the_python_check);
    suite_add_tcase(s, ref);
    TCase *bad = tcase_create("corrupt");
    tcase_add_checked_fixture(bad, scratch_setup, scratch_teardown);
    tcase_add_test(bad, valid_hand_made_file_opens);
    tcase_add_test(bad, truncated_data_names_the_tensor);
    tcase_add_test(bad, truncated_reference_file_is_refused);
    tcase_add_test(bad, bad_header_length);
    tcase_add_test(bad, overlapping_offsets);
    tcase_add_test(bad, out_of_range_offsets);
    tcase_add_test(bad, unknown_dtype);
    tcase_add_test(bad, shape_size_mismatch);
    tcase_add_test(bad, bad_json);
    tcase_add_test(bad, sharded_index_errors);
    suite_add_tcase(s, bad);
    TCase *wr = tcase_create("writer");
    tcase_add_checked_fixture(wr, scratch_setup, scratch_teardown);
    tcase_add_test(wr, write_read_round_trip_f32);
    tcase_add_test(wr, write_read_round_trip_bf16);
    tcase_add_test(wr, fill_writes_the_same_bytes_as_data);
    tcase_add_test(wr, writer_byte_layout);
    tcase_add_test(wr, read_releases_the_mapped_pages);
    tcase_add_test(wr, writer_escapes_names);
    tcase_add_test(wr, writer_rejects_bad_input);
    tcase_add_test(wr, failed_write_keeps_previous_file);
    tcase_add_test(wr, atomic_text_file);
    suite_add_tcase(s, wr);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
