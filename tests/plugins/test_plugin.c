/*
 * test_plugin.c — one tiny reward pack, compiled once per refusal case (see tests/plugins.cmake):
 * each VARIANT_* define breaks exactly one rule of the plugin ABI. Every variant shares the same
 * manifest (pack "tp", rewards tp.a and tp.b), so test_registry.c can check that the host refuses
 * each broken library with a message that names the library and the cause. WITH_MODEL and
 * MODEL_AS_REWARD use pack_model.ini.in, which adds the model tp.m.
 *
 * The good variant's rewards score every sample with the number of grpo_plugin_init calls so far,
 * which lets the test see that init runs once per library however often it is loaded.
 */
#include "grpo/grpo.h"

#include <stddef.h>
#include <stdlib.h>

#ifndef MAGIC_MAJOR_DELTA
#define MAGIC_MAJOR_DELTA 0
#endif
#ifndef MAGIC_MINOR_DELTA
#define MAGIC_MINOR_DELTA 0
#endif
#ifdef VARIANT_BAD_TAG
#define MAGIC_TAG "NOTGRPO"
#else
#define MAGIC_TAG GRPO_MAGIC_TAG
#endif

static int init_calls;

/* Runs when the library is loaded: leaves a mark in $TP_LOAD_MARK, so a test can tell whether a
 * command loaded plugin code at all. */
__attribute__((constructor)) static void tp_loaded(void) {
    const char *mark = getenv("TP_LOAD_MARK");
    FILE *f = mark ? fopen(mark, "a") : NULL;
    if (f) {
        fputs("loaded\n", f);
        fclose(f);
    }
}

#ifndef VARIANT_NO_MAGIC
GRPO_EXPORT const grpo_magic *grpo_plugin_magic(void) {
    static const grpo_magic magic = {
#ifdef VARIANT_MAGIC_SMALL
        /* .struct_size = */ 8,
#else
        /* .struct_size = */ (uint32_t)sizeof(grpo_magic),
#endif
        /* .abi_major = */ (uint32_t)(GRPO_ABI_MAJOR + MAGIC_MAJOR_DELTA),
        /* .abi_minor = */ (uint32_t)(GRPO_ABI_MINOR + MAGIC_MINOR_DELTA),
        /* .sizeof_pointer = */ (uint32_t)sizeof(void *),
        /* .sizeof_float = */ (uint32_t)sizeof(float),
        /* .tag = */ MAGIC_TAG,
    };
    return &magic;
}
#endif

static int32_t tp_create(const grpo_host *host, const grpo_config *cfg, void **state,
                         grpo_error *err) {
    (void)host, (void)cfg, (void)err;
    *state = &init_calls;
    return GRPO_OK;
}

static int32_t tp_score(void *state, const grpo_sample *samples, uint32_t n, float *out,
                        grpo_error *err) {
    (void)samples, (void)err;
    for (uint32_t i = 0; i < n; i++) out[i] = (float)*(int *)state;
    return GRPO_OK;
}

static void tp_destroy(void *state) { (void)state; }

#define TP_REWARD(ID)                                                                        \
    {(uint32_t)sizeof(grpo_reward_desc), ID, "test reward " ID, 0, tp_create, tp_score,      \
     tp_destroy}

static const grpo_reward_desc rewards[] = {
    TP_REWARD("tp.a"),
#ifdef VARIANT_DUP_ID
    TP_REWARD("tp.a"),
#endif
#ifndef VARIANT_MISSING_ID
    TP_REWARD("tp.b"),
#endif
#ifdef VARIANT_EXTRA_ID
    TP_REWARD("tp.c"),
#endif
};

__attribute__((unused)) static const grpo_reward_desc *get_reward(uint32_t i) {
    if (i >= sizeof rewards / sizeof rewards[0]) return NULL;
#ifdef VARIANT_SMALL_DESC
    static grpo_reward_desc small;
    small = rewards[i];
    small.struct_size = 8;
    return &small;
#else
    return &rewards[i];
#endif
}

#if defined(VARIANT_WITH_MODEL) || defined(VARIANT_MODEL_AS_REWARD) || defined(VARIANT_MODEL_1_2)
/* A model entry: only what the registry looks at (id, kind, create/destroy) is real. */
static int32_t tp_model_create(const grpo_host *host, const char *config_json,
                               const grpo_config *cfg, void **model, grpo_error *err) {
    (void)host, (void)config_json, (void)cfg;
    *model = NULL;
    return grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "tp.m is a test stub");
}

static const char *const tp_archs[] = {"TpForCausalLM", NULL};
static const grpo_model_desc tp_model = {
#ifdef VARIANT_MODEL_1_2 /* built against 1.2: the descriptor ends before vocab_size (1.3) */
    .struct_size = offsetof(grpo_model_desc, vocab_size),
#else
    .struct_size = sizeof(grpo_model_desc),
#endif
    .id = "tp.m",
    .description = "test model",
    .architectures = tp_archs,
    .create = tp_model_create,
    .destroy = tp_destroy,
};

__attribute__((unused)) static const grpo_model_desc *get_model(uint32_t i) {
    return i == 0 ? &tp_model : NULL;
}
#endif

#ifdef VARIANT_MODEL_AS_REWARD
/* tp.m exported as a reward although the manifest says kind = model */
static const grpo_reward_desc tp_m_reward = TP_REWARD("tp.m");
static const grpo_reward_desc *get_reward_and_m(uint32_t i) {
    return i < 2 ? get_reward(i) : i == 2 ? &tp_m_reward : NULL;
}
#endif

#ifndef VARIANT_NO_INIT
GRPO_EXPORT int32_t grpo_plugin_init(const grpo_host *host, grpo_library *lib, grpo_error *err) {
    init_calls++;
#ifdef VARIANT_INIT_FAIL
    (void)host, (void)lib;
    return grpo_error_set(err, GRPO_ERR_UNSUPPORTED, "needs TP_TOKEN set in the environment");
#else
    if (!host || host->abi_major != GRPO_ABI_MAJOR || !GRPO_HAS_FIELD(lib, grpo_library, get_model))
        return grpo_error_set(err, GRPO_ERR_ABI, "host table or library struct too small");
#if defined(VARIANT_MODEL_AS_REWARD)
    lib->get_reward = get_reward_and_m;
#else
    lib->get_reward = get_reward;
#endif
#if defined(VARIANT_WITH_MODEL) || defined(VARIANT_MODEL_1_2)
    lib->get_model = get_model;
#endif
    return GRPO_OK;
#endif
}
#endif
