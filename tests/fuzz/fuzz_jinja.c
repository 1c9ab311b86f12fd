/* fuzz_jinja.c — the chat-template (Jinja subset) parser on arbitrary text: compile, free.
 * Rendering is left out: a valid template may legitimately loop for long. */
#include <stdint.h>
#include <stdlib.h>

#include "text/chat_template.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_text(data, size);
    grpo_error err = fuzz_error();
    grpo_chat_template *tpl = NULL;
    if (grpo_chat_template_compile(text, "fuzz.jinja", &tpl, &err) == GRPO_OK)
        grpo_chat_template_free(tpl);
    free(text);
    return 0;
}
