/* fuzz_adapter_config.c — a PEFT adapter_config.json (the text grpo_lora_open_dir reads) on
 * arbitrary input: grpo_lora_parse_config, whose options must come out in range when accepted. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "host/lora.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_text(data, size), targets[4096];
    grpo_error err = fuzz_error();
    grpo_lora_opts o;
    if (grpo_lora_parse_config(text, "adapter_config.json", &o, targets, sizeof targets, &err) ==
        GRPO_OK) {
        /* what grpo_lora_parse_config promises of an accepted config */
        if (o.r < 1 || o.r > 4096 || !(o.alpha > 0) || !(o.dropout >= 0 && o.dropout < 1) ||
            o.target_modules != targets || strlen(targets) >= sizeof targets)
            abort();
    }
    free(text);
    return 0;
}
