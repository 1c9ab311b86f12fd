/*
 * host.c — the host services table this process hands to plugins (grpo/plugin.h, grpo_host).
 * ops and the tokenizer stay NULL here; the trainer fills its own copy when it has them.
 */
#include "registry.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256** (Blackman & Vigna, 2018): state owned by the caller, must not be all zero. */
static uint64_t host_rng_next(uint64_t s[4]) {
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

static const grpo_host default_host = {
    /* .struct_size = */ sizeof(grpo_host),
    /* .abi_major   = */ GRPO_ABI_MAJOR,
    /* .abi_minor   = */ GRPO_ABI_MINOR,
    /* .log         = */ host_log,
    /* .alloc       = */ host_alloc,
    /* .free        = */ host_free,
    /* .rng_next    = */ host_rng_next,
    /* .ops         = */ NULL,
    /* .tokenizer   = */ NULL,
    /* .tokenize    = */ NULL,
    /* .detokenize  = */ NULL,
};

const grpo_host *grpo_default_host(void) { return &default_host; }
