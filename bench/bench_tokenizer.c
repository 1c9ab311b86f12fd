/*
 * bench_tokenizer.c — encode throughput of the C tokenizer on the corpus bench_tokenizer.py writes
 * (one encode call per line, as the Python side does). Prints pass 1 (cold word cache, fresh
 * tokenizer) and pass 2 (warm), MB/s, and the id count + checksum to compare with the Python output.
 *
 * usage: bench_tokenizer TOKENIZER CORPUS.txt
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/tokenizer/tokenizer.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s TOKENIZER CORPUS.txt\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    size_t size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc(size + 1);
    if (!text || fread(text, 1, size, f) != size) return 1;
    fclose(f);
    text[size] = 0;

    grpo_tokenizer *tok;
    grpo_error err;
    grpo_error_init(&err);
    double t0 = now();
    if (grpo_tokenizer_load(argv[1], &tok, &err) != GRPO_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    printf("grpo load: %.3f s\n", now() - t0);
    grpo_tok_ids ids = {0};
    size_t text_bytes = 0;
    uint64_t h = 0, n_ids = 0;
    for (int pass = 1; pass <= 2; pass++) {
        t0 = now();
        text_bytes = 0, h = 0, n_ids = 0;
        for (char *line = text; line < text + size;) {
            char *nl = memchr(line, '\n', (size_t)(text + size - line));
            size_t len = nl ? (size_t)(nl - line) : (size_t)(text + size - line);
            ids.n = 0;
            if (grpo_tokenizer_encode(tok, line, len, 1, &ids, &err) != GRPO_OK) {
                fprintf(stderr, "%s\n", err.message);
                return 1;
            }
            for (size_t k = 0; k < ids.n; k++) h = h * 1000003u + (uint64_t)ids.data[k] + 1;
            n_ids += ids.n;
            text_bytes += len;
            line += len + 1;
        }
        double dt = now() - t0;
        printf("grpo encode pass %d: %.2f MB in %.3f s = %.2f MB/s\n", pass, text_bytes / 1e6, dt,
               text_bytes / 1e6 / dt);
    }
    printf("ids: %llu checksum %016llx\n", (unsigned long long)n_ids, (unsigned long long)h);
    grpo_tok_ids_free(&ids);
    grpo_tokenizer_free(tok);
    free(text);
    return 0;
}
