/* fuzz_trainer_state.c — a checkpoint's trainer_state.json on arbitrary input:
 * grpo_train_state_parse (what --resume reads), whose values must be in range when accepted. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "train/train_state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_text(data, size);
    grpo_error err = fuzz_error();
    grpo_train_state st;
    memset(&st, 0, sizeof st);
    if (grpo_train_state_parse(text, "trainer_state.json", &st, &err) == GRPO_OK) {
        if (st.step < 0 || st.optimizer_step < 0 || st.optimizer_step > st.step ||
            !(st.num_tokens >= 0) || strlen(st.run_id) > 32)
            abort();
    }
    free(text);
    return 0;
}
