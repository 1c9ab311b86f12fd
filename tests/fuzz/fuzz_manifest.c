/* fuzz_manifest.c — pack manifests (pack.ini: [pack], entries, key sections, continuation
 * lines) on arbitrary files: the strict parser and the lenient id reader. No plugin code runs. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "host/registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("pack.ini", data, size);
    grpo_error err = fuzz_error();
    grpo_pack pack;
    if (grpo_manifest_parse(path, &pack, &err) == GRPO_OK) grpo_pack_free(&pack);
    char **ids = NULL;
    int n = 0;
    grpo_manifest_ids(path, &ids, &n);
    for (int i = 0; i < n; i++) free(ids[i]);
    free(ids);
    return 0;
}
