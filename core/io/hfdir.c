/* hfdir.c — find, read and write Hugging Face model directories (see hfdir.h). */
#include "io/hfdir.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const grpo_hf_tokenizer_files[] = {
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
    "vocab.json",     "merges.txt",            "tokenizer.model",         "chat_template.jinja",
    "generation_config.json", GRPO_HF_BASE_README, NULL,
};

/* Whether a README.md is a model card grpo wrote (model_card.h's front matter). */
static int is_grpo_card(const char *text) {
    const char *end = strncmp(text, "---\n", 4) == 0 ? strstr(text + 4, "\n---") : NULL;
    const char *mark = strstr(text, "\nlibrary_name: grpo\n");
    return end && mark && mark < end;
}

static int is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int check_dir(const char *dir, grpo_error *err) {
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot open model directory: %s", dir,
                              strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: not a directory (expected a Hugging Face model directory with "
                              "config.json and model.safetensors)", dir);
    return GRPO_OK;
}

int grpo_hf_weights_path(const char *dir, char *out, size_t cap, grpo_error *err) {
    int rc = check_dir(dir, err);
    if (rc == GRPO_OK) rc = grpo_path_join(out, cap, dir, GRPO_HF_WEIGHTS, err);
    if (rc != GRPO_OK || is_file(out)) return rc;
    rc = grpo_path_join(out, cap, dir, GRPO_HF_WEIGHTS_INDEX, err);
    if (rc != GRPO_OK || is_file(out)) return rc;
    return grpo_error_set(err, GRPO_ERR_IO,
                          "%s: no weights: expected " GRPO_HF_WEIGHTS " or " GRPO_HF_WEIGHTS_INDEX
                          " (only safetensors checkpoints are supported)", dir);
}

int grpo_hf_open_weights(const char *dir, grpo_safetensors **out, grpo_error *err) {
    char path[PATH_MAX];
    *out = NULL;
    int rc = grpo_hf_weights_path(dir, path, sizeof path, err);
    return rc ? rc : grpo_st_open(out, path, err);
}

int grpo_hf_read_config(const char *dir, char **json, grpo_error *err) {
    char path[PATH_MAX];
    *json = NULL;
    int rc = check_dir(dir, err);
    if (rc == GRPO_OK) rc = grpo_path_join(path, sizeof path, dir, GRPO_HF_CONFIG, err);
    if (rc == GRPO_OK) rc = grpo_read_file(path, json, NULL, err);
    if (rc != GRPO_OK) return rc;
    cJSON *j = cJSON_Parse(*json);
    int ok = cJSON_IsObject(j);
    cJSON_Delete(j);
    if (!ok) {
        free(*json);
        *json = NULL;
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s: expected a JSON object", path);
    }
    return GRPO_OK;
}

static int make_dirs(const char *dir, grpo_error *err) {
    if (grpo_mkdirs(dir) != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "%s: cannot create directory: %s", dir,
                              strerror(errno));
    return check_dir(dir, err);
}

int grpo_hf_files_read(grpo_hf_files *f, const char *dir, grpo_error *err) {
    memset(f, 0, sizeof *f);
    int rc = check_dir(dir, err);
    for (int i = 0; rc == GRPO_OK && grpo_hf_tokenizer_files[i] && f->n < 16; i++) {
        char from[PATH_MAX];
        rc = grpo_path_join(from, sizeof from, dir, grpo_hf_tokenizer_files[i], err);
        if (rc != GRPO_OK || !is_file(from)) continue;
        rc = grpo_read_file(from, &f->data[f->n], &f->len[f->n], err);
        if (rc == GRPO_OK) f->name[f->n++] = grpo_hf_tokenizer_files[i];
    }
    int have_base = 0;
    for (int i = 0; i < f->n; i++) have_base |= !strcmp(f->name[i], GRPO_HF_BASE_README);
    char readme[PATH_MAX];
    if (rc != GRPO_OK || have_base || f->n == 16 ||
        grpo_path_join(readme, sizeof readme, dir, "README.md", NULL) != GRPO_OK ||
        !is_file(readme))
        return rc;
    if ((rc = grpo_read_file(readme, &f->data[f->n], &f->len[f->n], err)) != GRPO_OK) return rc;
    if (is_grpo_card(f->data[f->n])) free(f->data[f->n]); /* ours: the next save writes anew */
    else f->name[f->n++] = GRPO_HF_BASE_README;
    return GRPO_OK;
}

/* Writes every file of f into dir (which must exist), each atomically and fsynced. */
static int grpo_hf_files_write(const grpo_hf_files *f, const char *dir, grpo_error *err) {
    int rc = GRPO_OK;
    for (int i = 0; rc == GRPO_OK && i < f->n; i++) {
        char to[PATH_MAX];
        rc = grpo_path_join(to, sizeof to, dir, f->name[i], err);
        if (rc == GRPO_OK) rc = grpo_write_file_atomic(to, f->data[i], f->len[i], err);
    }
    return rc;
}

void grpo_hf_files_free(grpo_hf_files *f) {
    for (int i = 0; i < f->n; i++) free(f->data[i]);
    memset(f, 0, sizeof *f);
}

int grpo_hf_save(const char *dir, const char *config_json, const grpo_st_out *tensors, size_t n,
                 grpo_st_dtype dtype, const grpo_hf_files *tokenizer, grpo_error *err) {
    cJSON *j = cJSON_Parse(config_json ? config_json : "");
    int ok = cJSON_IsObject(j);
    cJSON_Delete(j);
    if (!ok)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "%s: the config.json text to save is not a JSON object", dir);
    char path[PATH_MAX];
    int rc = make_dirs(dir, err);
    if (rc == GRPO_OK) rc = grpo_path_join(path, sizeof path, dir, GRPO_HF_WEIGHTS, err);
    if (rc == GRPO_OK) rc = grpo_st_write(path, tensors, n, dtype, err);
    if (rc == GRPO_OK && tokenizer) rc = grpo_hf_files_write(tokenizer, dir, err);
    if (rc == GRPO_OK) rc = grpo_path_join(path, sizeof path, dir, GRPO_HF_CONFIG, err);
    if (rc == GRPO_OK) rc = grpo_write_file_atomic(path, config_json, strlen(config_json), err);
    return rc;
}

int grpo_hf_config_set_dtype(const char *config_json, grpo_st_dtype dtype, char **out,
                             grpo_error *err) {
    const char *name = dtype == GRPO_ST_F32    ? "float32"
                       : dtype == GRPO_ST_BF16 ? "bfloat16"
                       : dtype == GRPO_ST_F16  ? "float16"
                                               : NULL;
    *out = NULL;
    if (!name)
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "config.json: no torch dtype for %s",
                              grpo_st_dtype_name(dtype));
    cJSON *j = cJSON_Parse(config_json ? config_json : "");
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return grpo_error_set(err, GRPO_ERR_INVALID, "config.json text: expected a JSON object");
    }
    int found = 0;
    const char *keys[] = {"dtype", "torch_dtype"};
    for (int k = 0; k < 2; k++)
        if (cJSON_GetObjectItemCaseSensitive(j, keys[k])) {
            cJSON_ReplaceItemInObjectCaseSensitive(j, keys[k], cJSON_CreateString(name));
            found = 1;
        }
    if (!found) cJSON_AddStringToObject(j, "torch_dtype", name);
    *out = cJSON_Print(j);
    cJSON_Delete(j);
    return *out ? GRPO_OK : grpo_error_set(err, GRPO_ERR_NOMEM, "config.json: out of memory");
}
