/* fuzz_run_ini.c — run files (INI syntax, every [section] key, value types and ranges, reward
 * sections checked against the built-in packs' manifests) from arbitrary text. Paths are not
 * checked, so nothing outside the text is read. */
#include <stdint.h>
#include <stdlib.h>

#include "config/run_config.h"
#include "fuzz_util.h"
#include "io/ini_reader.h"
#include "host/registry.h"
#include "config/testing.h"

static grpo_registry reg; /* the manifests of the source tree's packs, read once */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char *dirs[] = {GRPO_SOURCE_DIR "/plugins/rewards", GRPO_SOURCE_DIR "/plugins/models", NULL};
    grpo_error err = fuzz_error();
    if (grpo_registry_scan(&reg, dirs, &err) != GRPO_OK) {
        fprintf(stderr, "fuzz_run_ini: %s\n", err.message);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_text(data, size);
    for (unsigned flags = 0; flags <= GRPO_CONFIG_TRAIN; flags += GRPO_CONFIG_TRAIN) {
        grpo_run_config cfg;
        grpo_diag diag = {0};
        grpo_error err = fuzz_error();
        if (grpo_run_config_load_string(&cfg, "fuzz/run.ini", text, &reg, flags, &diag, &err) ==
            GRPO_OK) {
            FILE *null = fopen("/dev/null", "w");
            if (null) grpo_run_config_dump(&cfg, null), fclose(null);
            grpo_run_config_free(&cfg);
        }
        grpo_diag_free(&diag);
    }
    free(text);
    return 0;
}
