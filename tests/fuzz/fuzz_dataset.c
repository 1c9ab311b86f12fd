/* fuzz_dataset.c — the JSONL dataset reader (one JSON object per line, prompt / messages /
 * conversations, other fields kept as JSON text) on arbitrary files, failing on the first bad
 * line and skipping bad lines. */
#include <stdint.h>

#include "io/dataset.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("data.jsonl", data, size);
    for (int skip = 0; skip < 2; skip++) {
        grpo_dataset_options opt = {.skip_bad_lines = skip};
        grpo_error err = fuzz_error();
        grpo_dataset *ds = NULL;
        if (grpo_dataset_load(path, &opt, &ds, &err) == GRPO_OK) grpo_dataset_free(ds);
    }
    return 0;
}
