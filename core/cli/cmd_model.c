/* cmd_model.c — `grpo model info DIR`: what a Hugging Face model directory holds. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "io/hfdir.h"

static void model_usage(FILE *out) {
    fprintf(out, "usage: grpo model info DIR\n\n"
                 "  info DIR   architecture, model_type, every tensor (name, dtype, shape, bytes),\n"
                 "             the parameter count and a dtype summary of a Hugging Face model\n"
                 "             directory (config.json + model.safetensors or a sharded index)\n");
}

/* "architectures"[0] and "model_type" of config.json, or "?" */
static void print_config_summary(const char *config) {
    cJSON *j = cJSON_Parse(config);
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(j, "architectures");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "model_type");
    printf("architecture  ");
    int n = 0;
    for (const cJSON *a = cJSON_IsArray(arch) ? arch->child : NULL; a; a = a->next)
        if (cJSON_IsString(a)) printf("%s%s", n++ ? ", " : "", a->valuestring);
    printf("%s\n", n ? "" : "? (config.json has no \"architectures\")");
    printf("model_type    %s\n", cJSON_IsString(type) ? type->valuestring : "?");
    cJSON_Delete(j);
}

static void print_tensor_table(const grpo_safetensors *st) {
    int w = 6;
    for (size_t i = 0; i < grpo_st_count(st); i++) {
        int k = (int)strlen(grpo_st_at(st, i)->name);
        if (k > w) w = k;
    }
    printf("\n%-*s  %-7s  %-20s  %s\n", w, "tensor", "dtype", "shape", "bytes");
    for (size_t i = 0; i < grpo_st_count(st); i++) {
        const grpo_st_tensor *t = grpo_st_at(st, i);
        char shape[256];
        size_t k = (size_t)snprintf(shape, sizeof shape, "[");
        for (int d = 0; d < t->ndim && k < sizeof shape; d++)
            k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%" PRId64, d ? ", " : "",
                                  t->shape[d]);
        if (k < sizeof shape) snprintf(shape + k, sizeof shape - k, "]");
        printf("%-*s  %-7s  %-20s  %" PRIu64 "\n", w, t->name, grpo_st_dtype_name(t->dtype),
               shape, t->nbytes);
    }
}

static void print_totals(const grpo_safetensors *st) {
    uint64_t params = 0, bytes = 0;
    uint64_t n_of[GRPO_ST_DTYPE_COUNT] = {0}, p_of[GRPO_ST_DTYPE_COUNT] = {0};
    for (size_t i = 0; i < grpo_st_count(st); i++) {
        const grpo_st_tensor *t = grpo_st_at(st, i);
        params += t->numel, bytes += t->nbytes;
        n_of[t->dtype]++, p_of[t->dtype] += t->numel;
    }
    printf("\ntensors       %zu in %zu file%s\n", grpo_st_count(st), grpo_st_n_files(st),
           grpo_st_n_files(st) == 1 ? "" : "s");
    printf("parameters    %" PRIu64, params);
    if (params >= 1000000000) printf(" (%.2f B)", (double)params / 1e9);
    else if (params >= 1000000) printf(" (%.2f M)", (double)params / 1e6);
    else if (params >= 1000) printf(" (%.2f K)", (double)params / 1e3);
    printf("\n");
    printf("bytes         %" PRIu64 "\n", bytes);
    printf("dtypes       ");
    for (int d = 0; d < GRPO_ST_DTYPE_COUNT; d++)
        if (n_of[d])
            printf(" %s: %" PRIu64 " tensors, %" PRIu64 " parameters;",
                   grpo_st_dtype_name((grpo_st_dtype)d), n_of[d], p_of[d]);
    printf("\n");
}

static int model_info(const char *dir) {
    grpo_error err;
    grpo_error_init(&err);
    char *config = NULL, weights[PATH_MAX];
    grpo_safetensors *st = NULL;
    int rc = grpo_hf_read_config(dir, &config, &err);
    if (rc == GRPO_OK) rc = grpo_hf_weights_path(dir, weights, sizeof weights, &err);
    if (rc == GRPO_OK) rc = grpo_st_open(&st, weights, &err);
    if (rc != GRPO_OK) {
        fprintf(stderr, "grpo model info: %s\n", err.message);
        free(config);
        return 1;
    }
    printf("directory     %s\n", dir);
    printf("weights       %s\n", weights);
    print_config_summary(config);
    print_tensor_table(st);
    print_totals(st);
    grpo_st_close(st);
    free(config);
    return 0;
}

int cmd_model(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        model_usage(stdout);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "info") == 0) return model_info(argv[2]);
    if (argc > 3) fprintf(stderr, "grpo model: unexpected argument '%s'\n", argv[3]);
    model_usage(stderr);
    return 2;
}
