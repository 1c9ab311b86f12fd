/* fuzz_tokenizer_config.c — tokenizer_config.json on arbitrary files: next to a fixed small
 * valid tokenizer.json (the seed corpus/tokenizer/byte_level.json: it has an <|im_end|>),
 * loaded with grpo_tokenizer_load (bos / eos / pad and the chat template), then as a template
 * source of its own (grpo_chat_template_load: "chat_template" a string or a list of named
 * templates, compiled). */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "text/chat_template.h"
#include "text/tokenizer/tokenizer.h"

/* The tokenizer.json, written once into the fuzz directory (a small one: loading it is most of
 * the time of an input). */
static void write_tokenizer_json(void) {
    static int done;
    if (done) return;
    char *text = NULL;
    size_t len = 0;
    grpo_error err = fuzz_error();
    if (grpo_read_file(GRPO_SOURCE_DIR "/tests/fuzz/corpus/tokenizer/byte_level.json", &text,
                       &len, &err) != GRPO_OK) {
        fprintf(stderr, "fuzz: %s\n", err.message);
        abort();
    }
    fuzz_write("tokenizer.json", (const uint8_t *)text, len);
    free(text);
    done = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    write_tokenizer_json();
    const char *path = fuzz_write("tokenizer_config.json", data, size);
    grpo_error err = fuzz_error();
    grpo_tokenizer *tok = NULL;
    if (grpo_tokenizer_load(fuzz_dir(), &tok, &err) == GRPO_OK) grpo_tokenizer_free(tok);
    grpo_chat_template *tpl = NULL;
    err = fuzz_error();
    if (grpo_chat_template_load(path, &tpl, &err) == GRPO_OK) grpo_chat_template_free(tpl);
    return 0;
}
