/* fuzz_safetensors.c — the safetensors reader (header length, header JSON, dtypes, shapes,
 * data_offsets) on arbitrary files: open, then read every tensor grpo_st_read_f32 accepts. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "io/safetensors.h"
#include "io/testing.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("model.safetensors", data, size);
    grpo_error err = fuzz_error();
    grpo_safetensors *st = NULL;
    if (grpo_st_open(&st, path, &err) != GRPO_OK) return 0;
    for (size_t i = 0; i < grpo_st_count(st); i++) {
        const grpo_st_tensor *t = grpo_st_at(st, i);
        if (t->numel > (1u << 20)) continue; /* the reader checked it fits the file; keep it fast */
        float *out = malloc((t->numel ? t->numel : 1) * sizeof *out);
        if (!out) abort();
        grpo_st_read_f32(st, t->name, out, t->ndim, t->shape, &err);
        free(out);
    }
    grpo_st_metadata(st, "format");
    grpo_st_close(st);
    return 0;
}
