/* run_tokenizer.c — the tokenizer of a run file's model (see run_tokenizer.h). */
#include "cli/run_tokenizer.h"

#include <stdlib.h>

#include "host/host.h"

int grpo_cli_run_tokenizer(const grpo_run_config *cfg, grpo_host *host, grpo_tokenizer **out,
                           grpo_error *err) {
    *out = NULL;
    if (!cfg->model_path || !cfg->model_path[0]) return GRPO_OK;
    char *dir = grpo_run_config_input_path(cfg, cfg->model_path);
    if (!dir) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory");
    int rc = grpo_tokenizer_load(dir, out, err);
    free(dir);
    if (rc != GRPO_OK) {
        *out = NULL;
        return rc;
    }
    grpo_host_set_tokenizer(host, *out);
    return GRPO_OK;
}
