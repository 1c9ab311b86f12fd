/*
 * cmd_init_model.c — `grpo init-model DIR`: a small random-init model and tokenizer the repo
 * makes itself, so the embedded default (examples/arith.ini) needs no download.
 *
 * DIR receives a Hugging Face directory that loads in transformers:
 *   tokenizer.json         byte-level BPE with no merges: ids 0..255 are the 256 bytes (GPT-2's
 *                          byte-to-unicode spelling), then the added tokens <|endoftext|> (pad),
 *                          <|im_start|>, <|im_end|> (eos) — special — and <think>, </think>,
 *                          <answer>, </answer> — not special, so decoded completions keep them.
 *   tokenizer_config.json  eos/pad/bos tokens and the ChatML chat template
 *   config.json            LlamaForCausalLM, tied embeddings, vocab rounded up to 8; with --moe a
 *                          MiniMind2 MoE instead (MiniMindForCausalLM, model_type "minimind",
 *                          use_moe: --experts routed SwiGLU experts of --intermediate, top --top-k,
 *                          --shared shared experts, softmax router, aux_loss_alpha --aux-alpha,
 *                          seq_aux) that moe.causal_lm serves
 *   model.safetensors      weights ~ N(0, 0.02) (projections into the residual stream scaled by
 *                          1/sqrt(2L), as GPT-2 does), RMSNorm weights 1, from --seed
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/files.h"
#include "base/rng.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "host/process.h"
#include "host/model_instance.h"
#include "io/safetensors.h"
#include "text/chat_template.h"
#include "train/run.h"

static const char *const added[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>",
                                    "</think>",      "<answer>",     "</answer>"};
#define N_ADDED 7
#define N_SPECIAL 3 /* the first three are special */

typedef struct init_opts {
    int hidden, layers, heads, kv_heads, intermediate;
    unsigned long long seed;
    int moe, experts, top_k, shared; /* --moe: a MiniMind2 MoE (E, K, shared experts) */
    double aux_alpha;                /* its aux_loss_alpha */
} init_opts;

/* GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to U+0100 onwards. */
static void byte_token(int b, char out[5]) {
    int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    int cp = b;
    if (!printable) {
        int k = 0;
        for (int x = 0; x < b; x++)
            k += !((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255));
        cp = 256 + k;
    }
    if (cp < 0x80)
        out[0] = (char)cp, out[1] = 0;
    else
        out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
}

/* {"type": "ByteLevel", "add_prefix_space": ..., "trim_offsets": true, "use_regex": true} as
 * root[name]: the pre-tokenizer and the decoder of a byte-level BPE tokenizer. */
static void add_byte_level(cJSON *root, const char *name, int add_prefix_space) {
    cJSON *o = cJSON_AddObjectToObject(root, name);
    cJSON_AddStringToObject(o, "type", "ByteLevel");
    cJSON_AddBoolToObject(o, "add_prefix_space", add_prefix_space);
    cJSON_AddBoolToObject(o, "trim_offsets", 1);
    cJSON_AddBoolToObject(o, "use_regex", 1);
}

static cJSON *tokenizer_json(void) {
    cJSON *root = cJSON_CreateObject(), *add = cJSON_AddArrayToObject(root, "added_tokens");
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON_AddNullToObject(root, "truncation");
    cJSON_AddNullToObject(root, "padding");
    for (int i = 0; i < N_ADDED; i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddNumberToObject(t, "id", 256 + i);
        cJSON_AddStringToObject(t, "content", added[i]);
        cJSON_AddBoolToObject(t, "single_word", 0);
        cJSON_AddBoolToObject(t, "lstrip", 0);
        cJSON_AddBoolToObject(t, "rstrip", 0);
        cJSON_AddBoolToObject(t, "normalized", 0);
        cJSON_AddBoolToObject(t, "special", i < N_SPECIAL);
        cJSON_AddItemToArray(add, t);
    }
    cJSON_AddNullToObject(root, "normalizer");
    add_byte_level(root, "pre_tokenizer", 0);
    cJSON_AddNullToObject(root, "post_processor");
    add_byte_level(root, "decoder", 1);
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "dropout");
    cJSON_AddNullToObject(model, "unk_token");
    cJSON_AddNullToObject(model, "continuing_subword_prefix");
    cJSON_AddNullToObject(model, "end_of_word_suffix");
    cJSON_AddBoolToObject(model, "fuse_unk", 0);
    cJSON_AddBoolToObject(model, "byte_fallback", 0);
    cJSON_AddBoolToObject(model, "ignore_merges", 0);
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    for (int b = 0; b < 256; b++) {
        char s[5];
        byte_token(b, s);
        cJSON_AddNumberToObject(vocab, s, b);
    }
    cJSON_AddArrayToObject(model, "merges");
    return root;
}

static cJSON *tokenizer_config_json(void) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "tokenizer_class", "PreTrainedTokenizerFast");
    cJSON_AddStringToObject(root, "bos_token", "<|im_start|>");
    cJSON_AddStringToObject(root, "eos_token", "<|im_end|>");
    cJSON_AddStringToObject(root, "pad_token", "<|endoftext|>");
    cJSON_AddNumberToObject(root, "model_max_length", 1024);
    cJSON_AddStringToObject(root, "chat_template", grpo_chat_template_chatml());
    return root;
}

static int vocab_size(void) { return (256 + N_ADDED + 7) / 8 * 8; }

static const char *model_architecture(const init_opts *o) {
    return o->moe ? "MiniMindForCausalLM" : "LlamaForCausalLM";
}

/* MiniMind2's MoE keys (its MiniMindConfig; read by plugins/models/moe/moe_config.c). */
static void moe_config_keys(cJSON *root, const init_opts *o) {
    cJSON_AddBoolToObject(root, "use_moe", 1);
    cJSON_AddNumberToObject(root, "n_routed_experts", o->experts);
    cJSON_AddNumberToObject(root, "num_experts_per_tok", o->top_k);
    cJSON_AddNumberToObject(root, "n_shared_experts", o->shared);
    cJSON_AddStringToObject(root, "scoring_func", "softmax");
    cJSON_AddBoolToObject(root, "norm_topk_prob", 1);
    cJSON_AddNumberToObject(root, "aux_loss_alpha", o->aux_alpha);
    cJSON_AddBoolToObject(root, "seq_aux", 1);
    cJSON_AddBoolToObject(root, "flash_attn", 0);
    cJSON_AddNumberToObject(root, "dropout", 0.0);
}

static cJSON *model_config_json(const init_opts *o) {
    cJSON *root = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(root, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString(model_architecture(o)));
    cJSON_AddStringToObject(root, "model_type", o->moe ? "minimind" : "llama");
    cJSON_AddNumberToObject(root, "hidden_size", o->hidden);
    cJSON_AddNumberToObject(root, "intermediate_size", o->intermediate);
    cJSON_AddNumberToObject(root, "num_hidden_layers", o->layers);
    cJSON_AddNumberToObject(root, "num_attention_heads", o->heads);
    cJSON_AddNumberToObject(root, "num_key_value_heads", o->kv_heads);
    cJSON_AddNumberToObject(root, "head_dim", o->hidden / o->heads);
    cJSON_AddNumberToObject(root, "vocab_size", vocab_size());
    cJSON_AddNumberToObject(root, "max_position_embeddings", 1024);
    cJSON_AddNumberToObject(root, "rms_norm_eps", 1e-6);
    cJSON_AddNumberToObject(root, "rope_theta", 10000.0);
    cJSON_AddStringToObject(root, "hidden_act", "silu");
    cJSON_AddBoolToObject(root, "tie_word_embeddings", 1);
    cJSON_AddBoolToObject(root, "attention_bias", 0);
    cJSON_AddBoolToObject(root, "mlp_bias", 0);
    cJSON_AddNumberToObject(root, "bos_token_id", 257);
    cJSON_AddNumberToObject(root, "eos_token_id", 258);
    cJSON_AddNumberToObject(root, "pad_token_id", 256);
    cJSON_AddStringToObject(root, "torch_dtype", "float32");
    if (o->moe) moe_config_keys(root, o);
    return root;
}

static int write_json(const char *dir, const char *name, cJSON *j, grpo_error *err) {
    char path[4200];
    int rc = grpo_path_join(path, sizeof path, dir, name, err);
    char *text = rc == GRPO_OK ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    if (rc != GRPO_OK) return rc;
    if (!text) return grpo_error_set(err, GRPO_ERR_NOMEM, "init-model: out of memory");
    rc = grpo_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return rc;
}

/* N(0, 1) by Box-Muller from the project RNG. */
static float normal(grpo_rng *r) {
    double u1 = (grpo_rng_next(r->s) >> 11) * 0x1.0p-53,
           u2 = (grpo_rng_next(r->s) >> 11) * 0x1.0p-53;
    return (float)(sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2));
}

/* Fills every parameter of the plugin's table and writes model.safetensors. */
static int write_weights(const char *dir, const grpo_model_desc *desc, void *inst,
                         const init_opts *o, grpo_error *err) {
    uint32_t n = desc->n_params(inst);
    grpo_st_out *outs = calloc(n, sizeof *outs);
    float **bufs = calloc(n, sizeof *bufs);
    grpo_rng rng;
    grpo_rng_seed(&rng, o->seed);
    int rc =
        outs && bufs ? GRPO_OK : grpo_error_set(err, GRPO_ERR_NOMEM, "init-model: out of memory");
    size_t k = 0;
    for (uint32_t i = 0; rc == GRPO_OK && i < n; i++) {
        grpo_param_desc d = {sizeof d, 0, 0, {0}, 0, -1};
        if ((rc = desc->param(inst, i, &d)) != GRPO_OK) break;
        if (d.flags & GRPO_PARAM_TIED) continue;
        size_t numel = 1;
        for (int j = 0; j < d.ndim; j++) numel *= (size_t)d.shape[j];
        float *b = bufs[k] = malloc(numel * sizeof(float));
        if (!b) {
            rc = grpo_error_set(err, GRPO_ERR_NOMEM, "init-model: out of memory");
            break;
        }
        /* the pack's init hint (model.h), or for a pre-1.3 pack the rule by name */
        uint32_t init = grpo_param_init(&d);
        float depth = init == GRPO_PARAM_INIT_RESIDUAL ? 1.0f / sqrtf(2.0f * o->layers) : 1.0f;
        float std = 0.02f * depth;
        for (size_t j = 0; j < numel; j++)
            b[j] = init == GRPO_PARAM_INIT_ONES    ? 1.0f
                   : init == GRPO_PARAM_INIT_ZEROS ? 0.0f
                                                   : std * normal(&rng);
        outs[k].name = d.name, outs[k].data = b, outs[k].ndim = d.ndim;
        for (int j = 0; j < d.ndim; j++) outs[k].shape[j] = d.shape[j];
        k++;
    }
    char path[4200];
    if (rc == GRPO_OK) rc = grpo_path_join(path, sizeof path, dir, "model.safetensors", err);
    if (rc == GRPO_OK) rc = grpo_st_write(path, outs, k, GRPO_ST_F32, err);
    for (size_t i = 0; bufs && i < k; i++) free(bufs[i]);
    free(bufs), free(outs);
    return rc;
}

/* The first plugin serving arch that accepts cfg_text (several serve MiniMindForCausalLM: dense
 * refuses use_moe, moe refuses its absence): its desc in *md and a new instance in *inst. */
static int create_serving(grpo_registry *reg, const grpo_host *host, const char *arch,
                          const char *cfg_text, const grpo_model_desc **md, void **inst,
                          grpo_error *err) {
    grpo_config none = {0};
    int rc = GRPO_ERR_UNSUPPORTED;
    for (const grpo_entry *e = grpo_registry_next_architecture(reg, arch, NULL);
         e && rc == GRPO_ERR_UNSUPPORTED; e = grpo_registry_next_architecture(reg, arch, e)) {
        const void *desc = NULL;
        rc = grpo_registry_load(reg, e, host, &desc, err);
        const grpo_model_desc *d = desc;
        if (rc == GRPO_OK) {
            grpo_plugin_call_begin(d->id, NULL, "create");
            rc = d->create(host, cfg_text, &none, inst, err);
            grpo_plugin_call_end();
        }
        if (rc == GRPO_OK) *md = desc;
    }
    if (rc != GRPO_ERR_UNSUPPORTED) return rc;
    char why[sizeof err->message];
    snprintf(why, sizeof why, "%s", grpo_plugin_message(err));
    return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                          "init-model: no model plugin on the plugin path accepts this %s (the "
                          "%s pack; see grpo plugins list)%s%s",
                          arch, strcmp(arch, "LlamaForCausalLM") ? "moe" : "dense",
                          why[0] ? ": " : "", why);
}

static int init_model(const char *dir, const init_opts *o, grpo_process *proc, grpo_error *err) {
    if (grpo_mkdirs(dir) != 0)
        return grpo_error_set(err, GRPO_ERR_IO, "init-model: cannot create %s: %s", dir,
                              strerror(errno));
    int rc = write_json(dir, "tokenizer.json", tokenizer_json(), err);
    if (rc == GRPO_OK) rc = write_json(dir, "tokenizer_config.json", tokenizer_config_json(), err);
    cJSON *cfg = model_config_json(o);
    char *cfg_text = cJSON_Print(cfg);
    if (rc == GRPO_OK)
        rc = write_json(dir, "config.json", cfg, err);
    else
        cJSON_Delete(cfg);
    const grpo_model_desc *md = NULL;
    void *inst = NULL;
    if (rc == GRPO_OK)
        rc = create_serving(&proc->reg, &proc->host, model_architecture(o), cfg_text, &md, &inst,
                            err);
    if (rc == GRPO_OK) {
        rc = write_weights(dir, md, inst, o, err);
        grpo_plugin_call_begin(md->id, NULL, "destroy");
        md->destroy(inst);
        grpo_plugin_call_end();
    }
    free(cfg_text);
    return rc;
}

#define CMD "init-model" /* the command's name in its messages */

static int usage(FILE *f) {
    fputs("usage: grpo init-model DIR [--hidden C] [--layers L] [--heads H] [--kv-heads K]\n"
          "                          [--intermediate I] [--seed S] [--plugin-path DIR]...\n"
          "                          [--moe [--experts E] [--top-k K] [--shared S]\n"
          "                                 [--aux-alpha A]]\n"
          "Writes a random-init LlamaForCausalLM and a byte-level tokenizer (with <think>,\n"
          "</think>, <answer>, </answer>, <|im_end|>) to DIR as a Hugging Face directory.\n"
          "With --moe, a MiniMind2 MoE (MiniMindForCausalLM, use_moe) instead: E routed SwiGLU\n"
          "experts of size I, K per token, S shared experts (served by moe.causal_lm).\n"
          "Defaults: --hidden 128 --layers 4 --heads 4 --kv-heads 2 --intermediate 384 --seed 0\n"
          "          --experts 4 --top-k 2 --shared 1 --aux-alpha 0.1\n",
          f);
    return f == stdout ? 0 : 2;
}

int cmd_init_model(int argc, char **argv) {
    init_opts o = {128, 4, 4, 2, 384, 0, 0, 4, 2, 1, 0.1};
    const char *dir = NULL, *extra[16], *moe_only = NULL;
    int n_extra = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout);
        int *field = !strcmp(a, "--hidden")         ? &o.hidden
                     : !strcmp(a, "--layers")       ? &o.layers
                     : !strcmp(a, "--heads")        ? &o.heads
                     : !strcmp(a, "--kv-heads")     ? &o.kv_heads
                     : !strcmp(a, "--intermediate") ? &o.intermediate
                     : !strcmp(a, "--experts")      ? &o.experts
                     : !strcmp(a, "--top-k")        ? &o.top_k
                     : !strcmp(a, "--shared")       ? &o.shared
                                                    : NULL;
        int64_t seed;
        if (field && v) {
            if (field == &o.experts || field == &o.top_k || field == &o.shared) moe_only = a;
            if (!grpo_cli_int(CMD, a, v, field == &o.shared ? 0 : 1, INT32_MAX, field)) return 2;
            i++;
        } else if (!strcmp(a, "--moe"))
            o.moe = 1;
        else if (!strcmp(a, "--aux-alpha") && v) {
            if (!grpo_cli_double(CMD, a, v, 0, HUGE_VAL, &o.aux_alpha)) return 2;
            i++, moe_only = a;
        } else if (!strcmp(a, "--seed") && v) {
            if (!grpo_cli_int64(CMD, a, v, 0, INT64_MAX, &seed)) return 2;
            o.seed = (unsigned long long)seed, i++;
        }
        else if (!strcmp(a, "--plugin-path") && v && n_extra < 16)
            extra[n_extra++] = v, i++;
        else if (a[0] != '-' && !dir)
            dir = a;
        else {
            fprintf(stderr, "grpo init-model: unexpected argument '%s'\n", a);
            return usage(stderr);
        }
    }
    if (!dir) return usage(stderr);
    if (moe_only && !o.moe)
        return grpo_cli_not_for("init-model", moe_only, "a dense model", "--moe");
    if (o.hidden <= 0 || o.layers <= 0 || o.heads <= 0 || o.kv_heads <= 0 || o.hidden % o.heads ||
        o.heads % o.kv_heads || o.intermediate <= 0) {
        fprintf(stderr, "grpo init-model: need positive sizes with hidden %% heads == 0 and "
                        "heads %% kv-heads == 0\n");
        return 2;
    }
    if (o.moe && (o.experts <= 0 || o.top_k <= 0 || o.top_k > o.experts || o.shared < 0 ||
                  !(o.aux_alpha >= 0))) {
        fprintf(stderr, "grpo init-model: --moe needs --experts E > 0, 0 < --top-k <= E, "
                        "--shared >= 0 and --aux-alpha >= 0\n");
        return 2;
    }
    grpo_error err;
    grpo_error_init(&err);
    grpo_process proc;
    int rc = grpo_process_open(&proc, extra, n_extra, "cpu", 1, &err);
    if (rc == GRPO_OK) rc = init_model(dir, &o, &proc, &err);
    grpo_process_close(&proc);
    if (rc != GRPO_OK) {
        fprintf(stderr, "grpo init-model: %s\n", err.message);
        return 1;
    }
    printf("wrote %s (vocab %d, hidden %d, layers %d", dir, vocab_size(), o.hidden, o.layers);
    if (o.moe) printf(", MoE: %d experts, top-%d, %d shared", o.experts, o.top_k, o.shared);
    printf(")\n");
    return 0;
}
