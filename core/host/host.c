/*
 * host.c — the host services table this process hands to plugins (grpo/plugin.h, grpo_host).
 * ops and the tokenizer stay NULL here; the trainer fills its own copy when it has them.
 * The 1.1 model services are set with model_ctx NULL: none until a command's process context (process.h)
 * sets its own (host_model.h).
 */
#include "host/host_model.h"
#include "host/host.h"
#include "text/tokenizer/tokenizer.h"
#include "base/rng.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char *const level_names[] = {"error", "warning", "info", "debug"};

/* One line on stderr: "grpo [LEVEL] WHO: message". */
static void host_log(int32_t level, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void host_log(int32_t level, const char *who, const char *fmt, ...) {
    const char *name = level >= 0 && level <= GRPO_LOG_DEBUG ? level_names[level] : "log";
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "grpo [%s] %s: %s\n", name, who ? who : "?", msg);
}

/* 64-byte aligned (a cache line, and enough for any SIMD load); size 0 gives a valid pointer. */
static void *host_alloc(uint64_t size) {
    if (size > SIZE_MAX - 64) return NULL;
    size_t n = ((size_t)size + 63) & ~(size_t)63;
    return aligned_alloc(64, n ? n : 64);
}

static void host_free(void *ptr) { free(ptr); }

static const grpo_host default_host = {
    /* .struct_size = */ sizeof(grpo_host),
    /* .abi_major   = */ GRPO_ABI_MAJOR,
    /* .abi_minor   = */ GRPO_ABI_MINOR,
    /* .log         = */ host_log,
    /* .alloc       = */ host_alloc,
    /* .free        = */ host_free,
    /* .rng_next    = */ grpo_rng_next,
    /* .ops         = */ NULL,
    /* .tokenizer   = */ NULL,
    /* .tokenize    = */ NULL,
    /* .detokenize  = */ NULL,
    /* .model_ctx   = */ NULL,
    /* .model_load  = */ grpo_hm_load,
    /* .model_free  = */ grpo_hm_free,
    /* .model_info  = */ grpo_hm_info,
    /* .model_hidden = */ grpo_hm_hidden,
    /* .model_tensor = */ grpo_hm_tensor,
    /* .model_encode = */ grpo_hm_encode,
    /* .model_render = */ grpo_hm_render,
};

const grpo_host *grpo_default_host(void) { return &default_host; }

void grpo_host_set_tokenizer(grpo_host *host, struct grpo_tokenizer *tok) {
    host->tokenizer = tok;
    host->tokenize = grpo_host_tokenize;
    host->detokenize = grpo_host_detokenize;
}
