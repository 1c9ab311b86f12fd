/*
 * hfdir.h — Hugging Face model directories: config.json + model.safetensors (or a sharded
 * model.safetensors.index.json) + tokenizer files, as transformers' save_pretrained() writes
 * them and from_pretrained() reads them.
 *
 * Errors: GRPO_OK or a negative GRPO_ERR_* status, with one line in err naming the directory or
 * file and what was expected.
 */
#ifndef GRPO_HFDIR_H
#define GRPO_HFDIR_H

#include <stddef.h>

#include "base/files.h" /* callers of these functions create and read the directories with it */
#include "io/safetensors.h"

#define GRPO_HF_WEIGHTS "model.safetensors"
#define GRPO_HF_WEIGHTS_INDEX "model.safetensors.index.json"
#define GRPO_HF_CONFIG "config.json"

/* The files a saved model carries from the directory it was opened from, besides its weights
 * and config: the tokenizer-side files, and the input model's own model card as
 * base_model_README.md (grpo writes its own README.md, model_card.h); NULL-ended. */
extern const char *const grpo_hf_tokenizer_files[];
#define GRPO_HF_BASE_README "base_model_README.md"

/* The carried files of a model directory held in memory: taken once when a model is opened,
 * so saving it later does not depend on that directory still existing (a resumed run's
 * checkpoint may be pruned while it trains). */
typedef struct grpo_hf_files {
    int n;
    const char *name[16]; /* entries of grpo_hf_tokenizer_files */
    char *data[16];       /* [n] malloc'd contents */
    size_t len[16];
} grpo_hf_files;

/* Reads each of grpo_hf_tokenizer_files present in dir into f (an empty set when dir has none).
 * A README.md that grpo did not write (its front matter lacks "library_name: grpo") is taken as
 * base_model_README.md, unless dir has that file already: a saved model keeps the card of the
 * model it came from rather than losing it. The caller MUST grpo_hf_files_free(f), also on
 * failure. */
int grpo_hf_files_read(grpo_hf_files *f, const char *dir, grpo_error *err);
void grpo_hf_files_free(grpo_hf_files *f);

/* Writes into out (cap bytes) the path of the weights of dir: DIR/model.safetensors when it
 * exists, else DIR/model.safetensors.index.json (transformers looks in the same order). An error
 * names dir and both file names when neither exists. */
int grpo_hf_weights_path(const char *dir, char *out, size_t cap, grpo_error *err);

/* Opens the weights of dir (see grpo_hf_weights_path, grpo_st_open). The caller MUST
 * grpo_st_close(*out) on success. */
int grpo_hf_open_weights(const char *dir, grpo_safetensors **out, grpo_error *err);

/* Reads DIR/config.json into *json (malloc'd, NUL-terminated; the caller frees) after checking
 * that it is a JSON object. */
int grpo_hf_read_config(const char *dir, char **json, grpo_error *err);

/* Saves a model directory, creating dir (and its parents) when missing:
 *   DIR/model.safetensors  the n tensors as dtype (GRPO_ST_F32 or GRPO_ST_BF16), see grpo_st_write
 *   DIR/config.json        config_json verbatim (must be a JSON object; the caller keeps its
 *                          "torch_dtype" consistent with dtype)
 *   tokenizer files        the files of tokenizer (NULL: none; see grpo_hf_files_read)
 * Every file is replaced atomically, weights first, config.json last. A failure leaves each file
 * either old or new and is reported. */
int grpo_hf_save(const char *dir, const char *config_json, const grpo_st_out *tensors, size_t n,
                 grpo_st_dtype dtype, const grpo_hf_files *tokenizer, grpo_error *err);

/* Writes into *out (malloc'd; the caller frees) config_json with its dtype entries set to the
 * transformers name of dtype ("float32", "bfloat16", "float16"): "dtype" and "torch_dtype" where
 * present, else a new "torch_dtype" (read by transformers 4 and 5). So from_pretrained(...,
 * dtype="auto") builds the model in the dtype grpo_hf_save() wrote. The text is re-printed by
 * cJSON: keys keep their order, numbers may be spelled differently (10000.0 -> 10000). */
int grpo_hf_config_set_dtype(const char *config_json, grpo_st_dtype dtype, char **out,
                             grpo_error *err);

#endif
