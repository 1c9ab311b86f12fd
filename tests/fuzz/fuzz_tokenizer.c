/* fuzz_tokenizer.c — tokenizer.json loading (model, pre-tokenizer, normalizer, post-processor,
 * decoder, added tokens) on arbitrary files; a tokenizer that loads must then encode and decode a
 * fixed text. */
#include <stdint.h>
#include <string.h>

#include "fuzz_util.h"
#include "text/tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("tokenizer.json", data, size);
    grpo_error err = fuzz_error();
    grpo_tokenizer *tok = NULL;
    if (grpo_tokenizer_load(path, &tok, &err) != GRPO_OK) return 0;
    static const char text[] = "Hello, world! 3+4=7 <think>\xc3\xa9\xe4\xbd\xa0\xe5\xa5\xbd</think>"
                               "  \n\t<|im_end|>";
    grpo_tok_ids ids = {0};
    grpo_tok_text back = {0};
    for (int special = 0; special < 2; special++)
        if (grpo_tokenizer_encode(tok, text, strlen(text), special, &ids, &err) == GRPO_OK)
            grpo_tokenizer_decode(tok, ids.data, ids.n, special, &back, &err);
    grpo_tok_ids_free(&ids);
    grpo_tok_text_free(&back);
    grpo_tokenizer_free(tok);
    return 0;
}
