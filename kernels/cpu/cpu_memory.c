/*
 * cpu_memory.c — the CPU backend's memory ops (alloc ... sync of grpo/ops_list.h). Memory is
 * host memory: alloc is a zeroed 64-byte aligned block, upload/download/copy are memcpy, sync
 * does nothing.
 */
#include "cpu/cpu_backend.h"

#include <stdlib.h>
#include <string.h>

void *cpu_alloc(void *ctx, uint64_t bytes) {
    (void)ctx;
    /* aligned_alloc wants a size that is a multiple of the alignment, and > 0 */
    uint64_t size = bytes ? (bytes + 63u) / 64u * 64u : 64u;
    if (size < bytes || size > (uint64_t)SIZE_MAX) return NULL;
    void *p = aligned_alloc(64, (size_t)size);
    if (p) memset(p, 0, (size_t)size);
    return p;
}

void cpu_free(void *ctx, void *ptr) {
    (void)ctx;
    free(ptr);
}

void cpu_upload(void *ctx, void *dst, const void *src, uint64_t bytes) {
    (void)ctx;
    if (bytes) memcpy(dst, src, (size_t)bytes);
}

void cpu_download(void *ctx, void *dst, const void *src, uint64_t bytes) {
    (void)ctx;
    if (bytes) memcpy(dst, src, (size_t)bytes);
}

void cpu_copy(void *ctx, void *dst, const void *src, uint64_t bytes) {
    (void)ctx;
    if (bytes && dst != src) memmove(dst, src, (size_t)bytes);
}

void cpu_zero(void *ctx, void *dst, uint64_t bytes) {
    (void)ctx;
    if (bytes) memset(dst, 0, (size_t)bytes);
}

void cpu_sync(void *ctx) { (void)ctx; }
