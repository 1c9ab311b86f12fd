/*
 * cmd_tokenize.c — `grpo tokenize`: text lines on stdin -> one JSON array of ids per line, or with
 * --decode, JSON arrays of ids per line -> text. With --json each text is a JSON string (encode:
 * input; decode: output), so texts with newlines, tabs and \r\n go through whole. For checking
 * the tokenizer against others (Hugging Face tokenizers) by hand.
 */
#include "cli/cli.h"
#include "cli/options.h"
#include "text/tokenizer/tokenizer.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void tokenize_usage(FILE *out) {
    fprintf(
        out,
        "usage: grpo tokenize --tokenizer PATH [--json] [--no-special]\n"
        "       grpo tokenize --tokenizer PATH --decode [--json] [--skip-special]\n"
        "\n"
        "  Reads stdin line by line (the trailing newline is not part of the text).\n"
        "  encode (default): prints one JSON array of ids per line.\n"
        "  --decode        : each line is a JSON array of ids; prints its text, one per line.\n"
        "\n"
        "  --tokenizer PATH  tokenizer.json, or a directory holding it (and "
        "tokenizer_config.json)\n"
        "  --json            encode: each line is a JSON string, escapes decoded (a text may hold\n"
        "                    newlines); decode: print each text as a JSON string\n"
        "  --no-special      encode only: no post-processor template (add_special_tokens=False)\n"
        "  --skip-special    --decode only: drop special tokens (skip_special_tokens=True)\n");
}

/* The text of an input line given as a JSON string (malloc'd in *text, *n bytes; it may hold
 * NULs and newlines), or 1 with a message naming the line. */
static int json_text(const char *line, long lineno, char **text, size_t *n) {
    cJSON *j = cJSON_Parse(line);
    if (!cJSON_IsString(j)) {
        cJSON_Delete(j);
        fprintf(stderr, "grpo tokenize: stdin:%ld: expected a JSON string (--json), e.g. "
                        "\"a\\nb\"\n", lineno);
        return 1;
    }
    *n = strlen(j->valuestring);
    *text = strdup(j->valuestring);
    cJSON_Delete(j);
    return *text ? 0 : (fprintf(stderr, "grpo tokenize: out of memory\n"), 1);
}

static int encode_line(const grpo_tokenizer *tok, const char *line, size_t n, long lineno,
                       int add_special, int json) {
    char *text = NULL;
    if (json) {
        if (json_text(line, lineno, &text, &n)) return 1;
        line = text;
    }
    grpo_tok_ids ids = {0};
    grpo_error err;
    grpo_error_init(&err);
    int rc = grpo_tokenizer_encode(tok, line, n, add_special, &ids, &err);
    free(text);
    if (rc != GRPO_OK) {
        fprintf(stderr, "grpo tokenize: %s\n", err.message);
        return 1;
    }
    putchar('[');
    for (size_t i = 0; i < ids.n; i++) printf(i ? ",%d" : "%d", ids.data[i]);
    printf("]\n");
    grpo_tok_ids_free(&ids);
    return 0;
}

static int decode_line(const grpo_tokenizer *tok, const char *line, long lineno, int skip,
                       int json) {
    cJSON *arr = cJSON_Parse(line);
    int n = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : -1;
    int32_t *ids = n >= 0 ? malloc(sizeof *ids * (size_t)(n ? n : 1)) : NULL;
    for (int i = 0; ids && i < n; i++) {
        const cJSON *v = cJSON_GetArrayItem(arr, i);
        if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int32_t)v->valuedouble) {
            free(ids), ids = NULL;
            break;
        }
        ids[i] = (int32_t)v->valuedouble;
    }
    cJSON_Delete(arr);
    if (!ids) {
        fprintf(stderr, "grpo tokenize: stdin:%ld: expected a JSON array of integer ids\n", lineno);
        return 1;
    }
    grpo_tok_text text = {0};
    grpo_error err;
    grpo_error_init(&err);
    int rc = grpo_tokenizer_decode(tok, ids, (size_t)n, skip, &text, &err) != GRPO_OK;
    if (rc) {
        fprintf(stderr, "grpo tokenize: %s\n", err.message);
    } else if (json) {
        cJSON *s = cJSON_CreateString(text.data);
        char *out = cJSON_PrintUnformatted(s);
        puts(out);
        free(out);
        cJSON_Delete(s);
    } else {
        fwrite(text.data, 1, text.n, stdout);
        putchar('\n');
    }
    grpo_tok_text_free(&text);
    free(ids);
    return rc;
}

int cmd_tokenize(int argc, char **argv) {
    const char *path = NULL;
    int decode = 0, add_special = 1, skip = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tokenizer") == 0 && i + 1 < argc)
            path = argv[++i];
        else if (strcmp(argv[i], "--decode") == 0)
            decode = 1;
        else if (strcmp(argv[i], "--no-special") == 0)
            add_special = 0;
        else if (strcmp(argv[i], "--skip-special") == 0)
            skip = 1;
        else if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            tokenize_usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "grpo tokenize: unknown or incomplete argument '%s'\n", argv[i]);
            tokenize_usage(stderr);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "grpo tokenize: --tokenizer PATH is required\n");
        tokenize_usage(stderr);
        return 2;
    }
    if (decode && !add_special)
        return grpo_cli_not_for("tokenize", "--no-special", "--decode", "encoding");
    if (!decode && skip)
        return grpo_cli_not_for("tokenize", "--skip-special", "encoding", "--decode");
    grpo_tokenizer *tok;
    grpo_error err;
    grpo_error_init(&err);
    if (grpo_tokenizer_load(path, &tok, &err) != GRPO_OK) {
        fprintf(stderr, "grpo tokenize: %s\n", err.message);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    long lineno = 0;
    int rc = 0;
    while (rc == 0 && (n = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        if (n > 0 && line[n - 1] == '\n') line[--n] = 0;
        rc = decode ? decode_line(tok, line, lineno, skip, json)
                    : encode_line(tok, line, (size_t)n, lineno, add_special, json);
    }
    free(line);
    grpo_tokenizer_free(tok);
    return rc;
}
