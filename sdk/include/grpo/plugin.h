/*
 * grpo/plugin.h — the plugin ABI: handshake, host services, library descriptor.
 *
 * A plugin library (".so" inside a pack directory, see pack.ini) includes only headers from
 * sdk/include/grpo/. It exports exactly two functions, declared with GRPO_EXPORT:
 *
 *   const grpo_magic *grpo_plugin_magic(void);          -- static data, no side effects
 *   int32_t grpo_plugin_init(const grpo_host *host, grpo_library *lib, grpo_error *err);
 *
 * Use GRPO_PLUGIN_MAGIC() once in one source file to define the first.
 *
 * Rules (the host relies on them; a plugin that breaks them is broken):
 * - The host MUST call grpo_plugin_magic() and check it before any other call. abi_major must
 *   equal the host's; the plugin's abi_minor must be <= the host's.
 * - The host calls grpo_plugin_init() once per library, on the main thread. The plugin MUST only
 *   write fields of *lib that lie inside lib->struct_size (use GRPO_HAS_FIELD).
 * - Every struct that crosses the boundary begins with uint32_t struct_size and only ever grows
 *   at its end. Only fixed-width types cross it: no enum, bool or long.
 * - Strings and arrays handed to a plugin are borrowed for the duration of the call; a plugin that
 *   keeps one MUST copy it. Whoever allocates frees.
 * - Errors are int32_t status codes (GRPO_OK = 0, negative = failure); the text goes into the
 *   caller-owned grpo_error passed to the call (use grpo_error_set). The host never reads past
 *   the message buffer: a message without its NUL is cut at the buffer's last byte.
 * - A plugin MUST NOT end the process (exit, abort): the run would lose its work. The host
 *   turns an exit() during grpo_plugin_init or a reward's create/score/destroy into an error
 *   naming the plugin, with a non-zero exit status (see grpo/reward.h for isolate = true).
 * - The host never dlclose()s a library while an instance created from it is alive.
 * - Plugins MUST NOT be compiled with -ffast-math (NaN means "no opinion" and must survive).
 *
 * ABI history — the one table of what each minor added, for every SDK header (the headers mark
 * each member with the minor that added it; append-only: a new group of host services or ops
 * bumps abi_minor):
 *
 *   minor | header     | added
 *   ------+------------+-----------------------------------------------------------------------
 *   1.0   | plugin.h   | log, alloc/free, rng, ops, tokenizer services, config access
 *         | ops.h      | the op table up to scale; gather_rows/scatter_add_rows(_backward)
 *         | model.h    | grpo_model_desc up to expert_load, grpo_param_desc
 *         | reward.h   | grpo_reward_desc, grpo_sample up to its 1.0 fields
 *   1.1   | plugin.h   | frozen models for rewards: model_ctx, model_load, model_free,
 *         |            | model_info, model_hidden, model_tensor, model_encode, model_render
 *         | model.h    | grpo_model_desc.hidden_size, hidden (for caller-applied heads)
 *   1.2   | plugin.h   | grpo_config.dir (the run file's directory, for a plugin's paths)
 *   1.3   | ops.h,     | frozen: no longer provisional, they grow like the rest
 *         |  model.h   | grpo_model_desc.vocab_size; GRPO_PARAM_INIT_* hints, grpo_param_init()
 *         | config.h   | typed readers grpo_config_double/_int/_bool/_choice, strict parsers
 *         |            | (header-only)
 *         | reward.h   | grpo_sample.step, total_steps (training progress: curricula)
 *   1.4   | ops.h      | head_backward_entropy (the entropy bonus's gradient)
 *         | model.h    | backward_entropy; grpo_lora_adapter, set_lora (LoRA on a frozen base)
 *   1.5   | ops.h      | GRPO_DTYPE_*, grpo_bf16_from_f32/_to_f32; convert, matmul_forward_w,
 *         |            | matmul_backward_w, embedding_forward_w, head_forward_w, head_backward_w;
 *         |            | dropout, grpo_dropout_keeps
 *         | model.h    | bind_typed (bf16 frozen base / rollout copy), set_gradient_checkpointing,
 *         |            | grpo_lora_adapter.dropout, .seed
 *         | env.h,     | environments (multi-turn rollouts): grpo_env_desc, grpo_env_turn,
 *         |  plugin.h  | grpo_env_step; grpo_library.get_env
 *   1.6   | ops.h      | prefix_attention_forward/_backward (shared prefixes); sample_rows
 *         |            | (sampling on the device; optional: the host draws without it)
 *         | model.h    | set_shared_prefix
 *         | ops.h      | grpo_ops_supports() and the op list (ops_list.h) are header-only
 *         |            | and change no layout: no minor of their own
 *   1.7   | ops.h      | logits_logp (a drawn token's log-prob summed as head_forward sums;
 *         |            | optional)
 *   1.8   | ops.h      | attention masks: child segments (id >= 1 << GRPO_ATTN_CHILD_SHIFT)
 *         |            | attend to their parent segment's keys (packed rows sharing a prompt)
 *   1.9   | ops.h      | attention_decode_paged (decode against a paged KV cache; optional)
 *         | model.h    | grpo_kv_cache.page, n_pages, table, table_host (a paged cache);
 *         |            | grpo_model_desc.kv_page_floats (the pack can use one; optional)
 *   1.10  | model.h    | grpo_rollout_keep, grpo_model_desc.keep_rollout (prefill/decode keep
 *         |            | the training forward's activations; optional), grpo_batch.kept
 *   1.11  | model.h    | grpo_model_desc.set_lora_rows (prefill/decode rows past n run the base:
 *         |            | a LoRA run's KL reference decoded beside its rollout; optional);
 *         |            | grpo_rollout_keep.written (a keep another instance wrote: a bf16 run's
 *         |            | rollout copy for the policy)
 *   1.12  | ops.h      | parallel_for (host work between ops, such as the sampler's draws, on
 *         |            | the backend's threads; optional)
 *
 * The tokenizer services (tokenizer, tokenize, detokenize) were marked provisional in 1.0; they
 * are sealed: their signatures have not changed since 1.0, the builtin packs and reward_model
 * rely on them, and they grow like the rest.
 *
 * Two versions: the library's magic carries the SDK it was COMPILED against (the host refuses a
 * newer minor than its own, so a pack rebuilt against 1.3 loads in 1.3+ hosts only); a
 * pack.ini's abi = MAJOR.MINOR names the ABI the pack RELIES on: the highest minor whose host
 * fields or services it uses without a GRPO_HAS_FIELD fallback (what `grpo plugins show`
 * reports). Header-only additions (grpo/config.h) and fields a plugin fills for the host (an
 * older host reads a smaller struct_size and never sees them) do not raise it.
 */
#ifndef GRPO_PLUGIN_H
#define GRPO_PLUGIN_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
#define GRPO_EXTERN_C extern "C"
extern "C" {
#else
#define GRPO_EXTERN_C
#endif

#define GRPO_ABI_MAJOR 1
#define GRPO_ABI_MINOR 12
#define GRPO_MAGIC_TAG "GRPOPLG" /* 7 chars + NUL */

#if defined(_WIN32)
#define GRPO_EXPORT GRPO_EXTERN_C __declspec(dllexport)
#else
#define GRPO_EXPORT GRPO_EXTERN_C __attribute__((visibility("default")))
#endif

/* True when the struct behind p (whose struct_size the other side set) contains field. */
#define GRPO_HAS_FIELD(p, type, field) \
    ((p)->struct_size >= offsetof(type, field) + sizeof(((type *)0)->field))

/* ---- status codes ---------------------------------------------------------------------- */
#define GRPO_OK 0
#define GRPO_ERR_INVALID (-1)     /* bad argument, bad config value, malformed input */
#define GRPO_ERR_NOMEM (-2)       /* allocation failed */
#define GRPO_ERR_IO (-3)          /* file or pipe error */
#define GRPO_ERR_UNSUPPORTED (-4) /* valid request this plugin/host cannot serve */
#define GRPO_ERR_ABI (-5)         /* version or struct size mismatch */
#define GRPO_ERR_INTERNAL (-6)    /* a bug */

/* ---- errors: caller-owned buffer ------------------------------------------------------- */
typedef struct grpo_error {
    uint32_t struct_size; /* sizeof(grpo_error) as the caller compiled it */
    int32_t status;       /* last status written with grpo_error_set */
    char message[1024];   /* NUL-terminated (the host cuts a message that is not at its last byte),
                           * one line, names the thing and what was expected */
} grpo_error;

static inline void grpo_error_init(grpo_error *err) {
    memset(err, 0, sizeof *err);
    err->struct_size = (uint32_t)sizeof *err;
}

/* Writes status and a printf-formatted message into err (if non-NULL); returns status. */
static inline int32_t grpo_error_set(grpo_error *err, int32_t status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static inline int32_t grpo_error_set(grpo_error *err, int32_t status, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

/* ---- the handshake --------------------------------------------------------------------- */
typedef struct grpo_magic {
    uint32_t struct_size;    /* sizeof(grpo_magic) */
    uint32_t abi_major;      /* GRPO_ABI_MAJOR the plugin was compiled against */
    uint32_t abi_minor;      /* GRPO_ABI_MINOR the plugin was compiled against */
    uint32_t sizeof_pointer; /* sizeof(void *) */
    uint32_t sizeof_float;   /* sizeof(float) */
    char tag[8];             /* GRPO_MAGIC_TAG */
} grpo_magic;

#define GRPO_PLUGIN_MAGIC()                                                                     \
    GRPO_EXPORT const grpo_magic *grpo_plugin_magic(void) {                                      \
        static const grpo_magic magic = {(uint32_t)sizeof(grpo_magic), GRPO_ABI_MAJOR,          \
                                         GRPO_ABI_MINOR, (uint32_t)sizeof(void *),              \
                                         (uint32_t)sizeof(float), GRPO_MAGIC_TAG};              \
        return &magic;                                                                           \
    }

/* ---- configuration handed to a plugin instance ----------------------------------------- */
/* The resolved keys of one run-file section ([reward.NAME] or [model]), already validated by the
 * host against the types the pack manifest declares, with defaults filled in. A key of type list
 * appears once per element, in order. Borrowed for the duration of create(). */
typedef struct grpo_config {
    uint32_t struct_size;
    uint32_t n;                /* number of entries */
    const char *const *keys;   /* [n] */
    const char *const *values; /* [n] value text as written (lists: one entry per element) */
    const char *section;       /* e.g. "reward.fmt", for error messages */
    /* 1.2: the directory relative paths in values are resolved against (the run file's); test
     * GRPO_HAS_FIELD(cfg, grpo_config, dir) and non-NULL: NULL or absent means the working dir */
    const char *dir;
} grpo_config;

/* First value for key, or NULL. */
static inline const char *grpo_config_get(const grpo_config *cfg, const char *key) {
    for (uint32_t i = 0; cfg && i < cfg->n; i++)
        if (strcmp(cfg->keys[i], key) == 0) return cfg->values[i];
    return NULL;
}

/* Number of values for key (list keys may have several). */
static inline uint32_t grpo_config_count(const grpo_config *cfg, const char *key) {
    uint32_t c = 0;
    for (uint32_t i = 0; cfg && i < cfg->n; i++) c += strcmp(cfg->keys[i], key) == 0;
    return c;
}

/* The k-th (0-based) value for key, or NULL. */
static inline const char *grpo_config_nth(const grpo_config *cfg, const char *key, uint32_t k) {
    for (uint32_t i = 0; cfg && i < cfg->n; i++)
        if (strcmp(cfg->keys[i], key) == 0 && k-- == 0) return cfg->values[i];
    return NULL;
}

/* ---- host services --------------------------------------------------------------------- */
#define GRPO_LOG_ERROR 0
#define GRPO_LOG_WARN 1
#define GRPO_LOG_INFO 2
#define GRPO_LOG_DEBUG 3

struct grpo_ops;       /* grpo/ops.h: the kernel op table (frozen in 1.3) */
struct grpo_tokenizer; /* opaque host tokenizer */
struct grpo_host_model; /* opaque frozen model loaded by the host (1.1) */
struct grpo_message;    /* grpo/reward.h */

/* What a plugin may know about a model the host loaded (1.1). Filled by host->model_info. */
typedef struct grpo_host_model_info {
    uint32_t struct_size;     /* set by the caller */
    int32_t hidden_size;      /* C: floats per hidden state written by model_hidden */
    int32_t vocab_size;       /* rows of the token embedding */
    int32_t has_tokenizer;    /* 1 when the directory has a tokenizer.json */
    int32_t bos_id, eos_id, pad_id; /* tokenizer_config.json's special tokens, -1 when absent */
    const char *architecture; /* config.json "architectures"[0]; borrowed until model_free */
    const char *config_json;  /* config.json text; borrowed until model_free */
    const char *dir;          /* the directory it was loaded from; borrowed until model_free */
} grpo_host_model_info;

/* The host fills this table; it only ever grows at its end. A service the host lacks is NULL, so
 * a plugin can feature-test (check GRPO_HAS_FIELD and non-NULL) instead of crashing. All services
 * may be called from any thread unless stated otherwise. */
typedef struct grpo_host {
    uint32_t struct_size;
    uint32_t abi_major;
    uint32_t abi_minor;
    /* -- 1.0 -- */
    void (*log)(int32_t level, const char *who, const char *fmt, ...);
    void *(*alloc)(uint64_t size); /* 64-byte aligned; NULL on failure */
    void (*free)(void *ptr);
    /* Deterministic RNG: xoshiro-style state owned by the caller, seeded by the host. */
    uint64_t (*rng_next)(uint64_t state[4]);
    /* The compute backend the run uses (grpo/ops.h). NULL when none. */
    const struct grpo_ops *ops;
    /* Tokenizer of the policy model (sealed, see the ABI history). tokenize writes up to cap ids and returns the
     * full count (>cap means truncated), or a negative status. decode writes a NUL-terminated
     * string of at most cap bytes and returns the full length. NULL when no tokenizer is loaded. */
    const struct grpo_tokenizer *tokenizer;
    int32_t (*tokenize)(const struct grpo_tokenizer *tok, const char *text, int32_t *ids,
                        int32_t cap, grpo_error *err);
    int32_t (*detokenize)(const struct grpo_tokenizer *tok, const int32_t *ids, int32_t n,
                          char *out, int32_t cap, grpo_error *err);

    /* -- 1.1: frozen models for reward plugins (e.g. a reward model). Each service is NULL when
     *    the host has none: test GRPO_HAS_FIELD(host, grpo_host, model_render) and non-NULL.
     * Rules (MUST sentences):
     * - A plugin passes the host table it received (host) back as the first argument of
     *   model_load; model_ctx is the host's private context and a plugin MUST NOT touch it.
     * - If model_load returns GRPO_OK, the plugin MUST call model_free on *out exactly once, on
     *   the thread that loaded it, before its own destroy() returns.
     * - The model is frozen (no gradients) and belongs to the plugin that loaded it: the other
     *   model_* services on one model MUST NOT be called concurrently.
     * - Every array crosses in HOST memory (plain malloc'd floats and ints), never backend
     *   memory; the host uploads and downloads.
     * - All strings are UTF-8; text in is borrowed for the call. -- */
    void *model_ctx;
    /* Loads the Hugging Face directory dir (config.json, model.safetensors, tokenizer files) with
     * the model plugin serving its "architectures", frozen, on the host's backend. */
    int32_t (*model_load)(const struct grpo_host *host, const char *dir,
                          struct grpo_host_model **out, grpo_error *err);
    void (*model_free)(struct grpo_host_model *model); /* NULL is fine */
    /* Fills *out (only the fields inside out->struct_size). */
    int32_t (*model_info)(const struct grpo_host_model *model, grpo_host_model_info *out);
    /* Final hidden states (after the model's final norm) of B rows of T tokens: ids, mask
     * (B,T), mask 1 = real token, 0 = padding (any side; RoPE positions are cumsum(mask) - 1,
     * so an unpadded row has positions 0..T-1). With at (B) non-NULL, out (B,C) gets row b's
     * state at column at[b] (which must be a real token); with at NULL, out (B,T,C) gets every
     * column (padding columns hold unspecified values). UNSUPPORTED when the model plugin has no
     * hidden-states slot. */
    int32_t (*model_hidden)(struct grpo_host_model *model, const int32_t *ids,
                            const int32_t *mask, int32_t B, int32_t T, const int32_t *at,
                            float *out, grpo_error *err);
    /* Copies the parameter tensor called name (its Hugging Face name, e.g. "score.weight") into
     * out, which holds n floats; n MUST equal the tensor's element count (an error says what it
     * is). Row-major, the shape of the file. */
    int32_t (*model_tensor)(struct grpo_host_model *model, const char *name, float *out,
                            uint64_t n, grpo_error *err);
    /* Tokenizes text with the model's OWN tokenizer.json; add_special 1 applies its
     * post-processor (transformers' add_special_tokens=True). Writes up to cap ids and returns
     * the full count (> cap means truncated), or a negative status; with cap 0, ids may be NULL
     * (to ask for the count). */
    int32_t (*model_encode)(struct grpo_host_model *model, const char *text, int32_t add_special,
                            int32_t *ids, int32_t cap, grpo_error *err);
    /* Renders messages[0..n) with the model's OWN chat template (ChatML when it ships none), as
     * transformers' apply_chat_template(tokenize=False) with its bos/eos tokens. Writes a
     * NUL-terminated string of at most cap bytes (truncated if needed) and returns the full
     * length without the NUL, or a negative status; with cap 0, out may be NULL. */
    int32_t (*model_render)(struct grpo_host_model *model, const struct grpo_message *messages,
                            uint32_t n, int32_t add_generation_prompt, char *out, int32_t cap,
                            grpo_error *err);
} grpo_host;

/* ---- the library descriptor ------------------------------------------------------------ */
struct grpo_reward_desc; /* grpo/reward.h */
struct grpo_model_desc;  /* grpo/model.h */
struct grpo_env_desc;    /* grpo/env.h (1.5) */

/* Filled by grpo_plugin_init. Enumeration is by index until NULL; identity is the namespaced id
 * ("pack.name"), never the index. The descriptors MUST stay valid until the library is unloaded. */
typedef struct grpo_library {
    uint32_t struct_size; /* set by the host */
    const struct grpo_reward_desc *(*get_reward)(uint32_t index); /* (optional) */
    const struct grpo_model_desc *(*get_model)(uint32_t index);   /* (optional) */
    /* -- 1.5 -- (a plugin writes it only when GRPO_HAS_FIELD(lib, grpo_library, get_env)) */
    const struct grpo_env_desc *(*get_env)(uint32_t index);       /* (optional) */
} grpo_library;

typedef const grpo_magic *(*grpo_plugin_magic_fn)(void);
typedef int32_t (*grpo_plugin_init_fn)(const grpo_host *host, grpo_library *lib, grpo_error *err);

#define GRPO_MAGIC_SYMBOL "grpo_plugin_magic"
#define GRPO_INIT_SYMBOL "grpo_plugin_init"

#ifdef __cplusplus
}
#endif

/* 1.3: typed readers of grpo_config (after grpo_config and grpo_error are defined). */
#include "grpo/config.h"

#endif /* GRPO_PLUGIN_H */
