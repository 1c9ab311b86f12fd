/* fuzz_model_config.c — a model's config.json on arbitrary files: the host's reader (a JSON
 * object, grpo_hf_read_config) and its dtype rewrite (grpo_hf_config_set_dtype), then the model
 * packs' own parsers, dense_config_parse and moe_config_parse (their sources are compiled into
 * this target: tests/fuzz/CMakeLists.txt). */
#include <stdint.h>
#include <stdlib.h>

#include "dense.h"
#include "fuzz_util.h"
#include "io/hfdir.h"
#include "moe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_write(GRPO_HF_CONFIG, data, size);
    grpo_error err = fuzz_error();
    char *json = NULL, *typed = NULL;
    if (grpo_hf_read_config(fuzz_dir(), &json, &err) != GRPO_OK) {
        free(json);
        return 0;
    }
    if (grpo_hf_config_set_dtype(json, GRPO_ST_BF16, &typed, &err) == GRPO_OK) free(typed);
    dense_config dc;
    err = fuzz_error();
    dense_config_parse(&dc, json, &err);
    moe_config mc;
    err = fuzz_error();
    moe_config_parse(&mc, json, &err);
    free(json);
    return 0;
}
