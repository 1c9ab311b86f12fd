/* test_safetensors_hfdir.c — Hugging Face model directories: finding the weights, reading
 * config.json, saving a directory that loads back identically, and `grpo model info`. Copying a
 * real model's tokenizer files (MiniMind from ../shared) is the case tagged "shared":
 * `test_safetensors_hfdir --shared`, ctest test_safetensors_hfdir_shared (tests/test_skip.h). */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "io/hfdir.h"
#include "st_test_util.h"
#include "io/testing.h"
#include "test_skip.h"

#define TINY ST_FIXTURES "/tiny_llama"
#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

static char scratch[256];
static void scratch_setup(void) { make_scratch(scratch, sizeof scratch); }
static void scratch_teardown(void) { rm_tree(scratch); }

START_TEST(weights_path_prefers_single_file_then_index) {
    char path[1024];
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_hf_weights_path(TINY, path, sizeof path, &err), GRPO_OK);
    ck_assert_str_eq(path, TINY "/model.safetensors");
    ck_assert_int_eq(grpo_hf_weights_path(ST_FIXTURES "/sharded", path, sizeof path, &err),
                     GRPO_OK);
    ck_assert_str_eq(path, ST_FIXTURES "/sharded/model.safetensors.index.json");
    ck_assert_int_ne(grpo_hf_weights_path(scratch, path, sizeof path, &err), GRPO_OK);
    assert_mentions(err.message, NEEDLES(scratch, "model.safetensors", "index.json"));
    ck_assert_int_ne(grpo_hf_weights_path(TINY "/config.json", path, sizeof path, &err), GRPO_OK);
    assert_mentions(err.message, NEEDLES("config.json", "not a directory"));
    ck_assert_int_ne(grpo_hf_weights_path("/no/such/dir", path, sizeof path, &err), GRPO_OK);
    assert_mentions(err.message, NEEDLES("/no/such/dir"));
}
END_TEST

START_TEST(config_is_read_and_checked) {
    char *json = NULL, path[512];
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_hf_read_config(TINY, &json, &err), GRPO_OK);
    ck_assert_ptr_nonnull(strstr(json, "LlamaForCausalLM"));
    free(json);
    ck_assert_int_ne(grpo_hf_read_config(scratch, &json, &err), GRPO_OK);
    assert_mentions(err.message, NEEDLES(scratch, "config.json"));
    ck_assert_ptr_null(json);
    snprintf(path, sizeof path, "%s/config.json", scratch);
    write_bytes(path, "{\"a\":", 5);
    ck_assert_int_ne(grpo_hf_read_config(scratch, &json, &err), GRPO_OK);
    assert_mentions(err.message, NEEDLES(path, "JSON object"));
}
END_TEST

/* Loads every tensor of the tiny reference model as fp32: the host's path. */
static float *load_all(grpo_safetensors *st, grpo_st_out *outs) {
    uint64_t total = 0;
    for (size_t i = 0; i < grpo_st_count(st); i++) total += grpo_st_at(st, i)->numel;
    float *block = malloc(total * sizeof *block), *p = block;
    grpo_error err;
    grpo_error_init(&err);
    for (size_t i = 0; i < grpo_st_count(st); i++) {
        const grpo_st_tensor *t = grpo_st_at(st, i);
        ck_assert_msg(grpo_st_read_f32(st, t->name, p, t->ndim, t->shape, &err) == GRPO_OK, "%s",
                      err.message);
        outs[i] = (grpo_st_out){.name = t->name, .data = p, .ndim = t->ndim};
        memcpy(outs[i].shape, t->shape, sizeof t->shape);
        p += t->numel;
    }
    return block;
}

/* Saves the tiny reference model to dir as dtype and checks it reads back identically; with
 * set_dtype the saved config.json says dtype, else it is the source's text verbatim. */
static void save_and_compare_as(const char *dir, grpo_st_dtype dtype, int set_dtype) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_safetensors *ref, *back;
    ck_assert_int_eq(grpo_hf_open_weights(TINY, &ref, &err), GRPO_OK);
    grpo_st_out outs[64];
    ck_assert_uint_le(grpo_st_count(ref), 64);
    float *block = load_all(ref, outs);
    char *config = NULL;
    ck_assert_int_eq(grpo_hf_read_config(TINY, &config, &err), GRPO_OK);
    if (set_dtype) {
        char *c2 = NULL;
        ck_assert_int_eq(grpo_hf_config_set_dtype(config, dtype, &c2, &err), GRPO_OK);
        free(config);
        config = c2;
    }
    grpo_hf_files tok;
    ck_assert_msg(grpo_hf_files_read(&tok, TINY, &err) == GRPO_OK, "%s", err.message);
    ck_assert_msg(grpo_hf_save(dir, config, outs, grpo_st_count(ref), dtype, &tok, &err) ==
                      GRPO_OK, "%s", err.message);
    grpo_hf_files_free(&tok);
    ck_assert_msg(grpo_hf_open_weights(dir, &back, &err) == GRPO_OK, "%s", err.message);
    ck_assert_uint_eq(grpo_st_count(back), grpo_st_count(ref));
    for (size_t i = 0; i < grpo_st_count(ref); i++) {
        const grpo_st_tensor *t = grpo_st_find(back, outs[i].name);
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(t->dtype, dtype);
        float *x = malloc(t->numel * sizeof *x);
        ck_assert_int_eq(grpo_st_read_f32(back, t->name, x, outs[i].ndim, outs[i].shape, &err),
                         GRPO_OK);
        for (uint64_t k = 0; k < t->numel; k++) {
            float want = dtype == GRPO_ST_F32 ? outs[i].data[k]
                                              : grpo_bf16_to_f32(grpo_f32_to_bf16(outs[i].data[k]));
            ck_assert_uint_eq(f32_bits(x[k]), f32_bits(want));
        }
        free(x);
    }
    char *config2 = NULL, gen[1100];
    ck_assert_int_eq(grpo_hf_read_config(dir, &config2, &err), GRPO_OK);
    ck_assert_str_eq(config2, config); /* verbatim */
    snprintf(gen, sizeof gen, "%s/generation_config.json", dir);
    ck_assert_int_eq(access(gen, F_OK), 0); /* copied from the source directory */
    free(config2);
    free(config);
    free(block);
    grpo_st_close(back);
    grpo_st_close(ref);
}

static void save_and_compare(const char *dir, grpo_st_dtype dtype) {
    save_and_compare_as(dir, dtype, 0);
}

START_TEST(save_then_load_is_identical_f32) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/a/b/out", scratch); /* parents are created */
    save_and_compare(dir, GRPO_ST_F32);
    save_and_compare(dir, GRPO_ST_F32); /* overwriting an existing directory works */
}
END_TEST

START_TEST(save_then_load_is_identical_bf16) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/bf16", scratch);
    save_and_compare(dir, GRPO_ST_BF16);
}
END_TEST

START_TEST(config_dtype_is_set) {
    char *config = NULL, *out = NULL;
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_hf_read_config(TINY, &config, &err), GRPO_OK);
    ck_assert_int_eq(grpo_hf_config_set_dtype(config, GRPO_ST_BF16, &out, &err), GRPO_OK);
    cJSON *a = cJSON_Parse(config), *b = cJSON_Parse(out);
    ck_assert_str_eq(cJSON_GetObjectItem(b, "dtype")->valuestring, "bfloat16");
    cJSON_ReplaceItemInObject(b, "dtype", cJSON_CreateString("float32"));
    ck_assert(cJSON_Compare(a, b, 1)); /* nothing else changed */
    cJSON_Delete(a), cJSON_Delete(b), free(out), free(config);
    ck_assert_int_eq(grpo_hf_config_set_dtype("{\"x\":1}", GRPO_ST_F32, &out, &err), GRPO_OK);
    b = cJSON_Parse(out);
    ck_assert_str_eq(cJSON_GetObjectItem(b, "torch_dtype")->valuestring, "float32");
    cJSON_Delete(b), free(out);
    ck_assert_int_eq(grpo_hf_config_set_dtype("[", GRPO_ST_F32, &out, &err), GRPO_ERR_INVALID);
    ck_assert_int_eq(grpo_hf_config_set_dtype("{}", GRPO_ST_I64, &out, &err),
                     GRPO_ERR_UNSUPPORTED);
}
END_TEST

START_TEST(save_rejects_bad_config_text) {
    grpo_error err;
    grpo_error_init(&err);
    float v = 1;
    grpo_st_out t = {.name = "w", .data = &v, .ndim = 1, .shape = {1}};
    ck_assert_int_eq(grpo_hf_save(scratch, "not json", &t, 1, GRPO_ST_F32, NULL, &err),
                     GRPO_ERR_INVALID);
    assert_mentions(err.message, NEEDLES(scratch, "config.json", "JSON object"));
}
END_TEST

/* Directories for tools/check_safetensors_roundtrip.py --hf-dir (transformers must load them). */
START_TEST(saved_dirs_for_the_python_check) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/safetensors_out/tiny_llama_f32", GRPO_BINARY_DIR);
    save_and_compare(dir, GRPO_ST_F32);
    snprintf(dir, sizeof dir, "%s/safetensors_out/tiny_llama_bf16", GRPO_BINARY_DIR);
    save_and_compare_as(dir, GRPO_ST_BF16, 1);
}
END_TEST

/* Tokenizer files of a real model (shared data, tagged "shared") are copied byte for byte. */
START_TEST(save_copies_tokenizer_files) {
    char src[4096];
    snprintf(src, sizeof src, "%s/data/minimind3", test_shared_dir());
    ck_assert_msg(access(src, F_OK) == 0, "%s not found", src);
    grpo_error err;
    grpo_error_init(&err);
    float v = 1;
    grpo_st_out t = {.name = "w", .data = &v, .ndim = 1, .shape = {1}};
    grpo_hf_files tok;
    ck_assert_msg(grpo_hf_files_read(&tok, src, &err) == GRPO_OK, "%s", err.message);
    ck_assert_msg(grpo_hf_save(scratch, "{}", &t, 1, GRPO_ST_F32, &tok, &err) == GRPO_OK, "%s",
                  err.message);
    grpo_hf_files_free(&tok);
    int copied = 0;
    for (int i = 0; grpo_hf_tokenizer_files[i]; i++) {
        char a[4200], b[4200], *x = NULL, *y = NULL;
        size_t nx = 0, ny = 0;
        snprintf(a, sizeof a, "%s/%s", src, grpo_hf_tokenizer_files[i]);
        snprintf(b, sizeof b, "%s/%s", scratch, grpo_hf_tokenizer_files[i]);
        if (access(a, F_OK) != 0) {
            ck_assert_int_ne(access(b, F_OK), 0);
            continue;
        }
        ck_assert_int_eq(grpo_read_file(a, &x, &nx, &err), GRPO_OK);
        ck_assert_int_eq(grpo_read_file(b, &y, &ny, &err), GRPO_OK);
        ck_assert_uint_eq(nx, ny);
        ck_assert(memcmp(x, y, nx) == 0);
        free(x), free(y);
        copied++;
    }
    ck_assert_int_ge(copied, 2); /* tokenizer.json, tokenizer_config.json at least */
}
END_TEST

/* ---- grpo model info ------------------------------------------------------------------------ */

/* Runs `grpo model ARGS...` with stdout and stderr captured into out/errout (malloc'd). */
static int run_model_cmd(int argc, char **argv, char **out, char **errout) {
    char po[512], pe[512];
    snprintf(po, sizeof po, "%s/stdout", scratch);
    snprintf(pe, sizeof pe, "%s/stderr", scratch);
    fflush(stdout), fflush(stderr);
    int so = dup(1), se = dup(2);
    int fo = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int fe = open(pe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fo, 1), dup2(fe, 2);
    int rc = cmd_model(argc, argv);
    fflush(stdout), fflush(stderr);
    dup2(so, 1), dup2(se, 2);
    close(so), close(se), close(fo), close(fe);
    grpo_error err;
    ck_assert_int_eq(grpo_read_file(po, out, NULL, &err), GRPO_OK);
    ck_assert_int_eq(grpo_read_file(pe, errout, NULL, &err), GRPO_OK);
    return rc;
}

START_TEST(model_info_reports_what_transformers_sees) {
    char *exp_text = NULL, *out, *errout, line[256];
    grpo_error err;
    ck_assert_int_eq(grpo_read_file(ST_FIXTURES "/tiny_llama_expected.json", &exp_text, NULL, &err),
                     GRPO_OK);
    cJSON *exp = cJSON_Parse(exp_text);
    char *argv[] = {"model", "info", TINY, NULL};
    ck_assert_int_eq(run_model_cmd(3, argv, &out, &errout), 0);
    snprintf(line, sizeof line, "architecture  %s\n",
             cJSON_GetArrayItem(cJSON_GetObjectItem(exp, "architectures"), 0)->valuestring);
    ck_assert_ptr_nonnull(strstr(out, line));
    snprintf(line, sizeof line, "model_type    %s\n",
             cJSON_GetObjectItem(exp, "model_type")->valuestring);
    ck_assert_ptr_nonnull(strstr(out, line));
    snprintf(line, sizeof line, "parameters    %d", cJSON_GetObjectItem(exp, "n_params")->valueint);
    ck_assert_msg(strstr(out, line), "no '%s' in:\n%s", line, out);
    snprintf(line, sizeof line, "tensors       %d in 1 file\n",
             cJSON_GetObjectItem(exp, "n_tensors")->valueint);
    ck_assert_ptr_nonnull(strstr(out, line));
    /* hand-computable row: lm_head is vocab 32 x hidden 8 fp32 = 1024 bytes */
    ck_assert_ptr_nonnull(strstr(out, "lm_head.weight"));
    ck_assert_ptr_nonnull(strstr(out, "[32, 8]"));
    ck_assert_ptr_nonnull(strstr(out, "F32: 12 tensors"));
    free(out), free(errout), free(exp_text);
    cJSON_Delete(exp);
}
END_TEST

START_TEST(model_info_sharded) {
    char *out, *errout;
    char *argv[] = {"model", "info", ST_FIXTURES "/sharded", NULL};
    ck_assert_int_eq(run_model_cmd(3, argv, &out, &errout), 0);
    ck_assert_ptr_nonnull(strstr(out, "tensors       3 in 2 files\n"));
    /* 4*3 + 3 + 4*3 parameters, as the fixture script made them */
    ck_assert_ptr_nonnull(strstr(out, "parameters    27\n"));
    ck_assert_ptr_nonnull(strstr(out, "BF16: 1 tensors, 12 parameters;"));
    free(out), free(errout);
}
END_TEST

START_TEST(model_info_errors) {
    char *out, *errout;
    char *argv[] = {"model", "info", scratch, NULL};
    ck_assert_int_eq(run_model_cmd(3, argv, &out, &errout), 1);
    assert_mentions(errout, NEEDLES("grpo model info", scratch, "config.json"));
    free(out), free(errout);
    char *bad[] = {"model", "frobnicate", NULL};
    ck_assert_int_eq(run_model_cmd(2, bad, &out, &errout), 2);
    ck_assert_ptr_nonnull(strstr(errout, "usage: grpo model info DIR"));
    free(out), free(errout);
}
END_TEST

int main(int argc, char **argv) {
    test_tags tags = test_shared_tags(argc, argv, "data/minimind3");
    Suite *s = suite_create("hfdir");
    TCase *tc = tcase_create("hfdir");
    tcase_add_checked_fixture(tc, scratch_setup, scratch_teardown);
    tcase_add_test(tc, weights_path_prefers_single_file_then_index);
    tcase_add_test(tc, config_is_read_and_checked);
    tcase_add_test(tc, save_then_load_is_identical_f32);
    tcase_add_test(tc, save_then_load_is_identical_bf16);
    tcase_add_test(tc, config_dtype_is_set);
    tcase_add_test(tc, save_rejects_bad_config_text);
    tcase_add_test(tc, saved_dirs_for_the_python_check);
    tcase_add_test(tc, model_info_reports_what_transformers_sees);
    tcase_add_test(tc, model_info_sharded);
    tcase_add_test(tc, model_info_errors);
    suite_add_tcase(s, tc);
    TCase *ts = tcase_create("shared"); /* ../shared's MiniMind tokenizer files */
    tcase_set_tags(ts, "shared");
    tcase_add_checked_fixture(ts, scratch_setup, scratch_teardown);
    tcase_add_test(ts, save_copies_tokenizer_files);
    suite_add_tcase(s, ts);
    SRunner *sr = srunner_create(s);
    srunner_run_tagged(sr, NULL, NULL, tags.include, tags.exclude, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
