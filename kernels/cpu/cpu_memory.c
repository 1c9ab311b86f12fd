/*
 * cpu_memory.c — the CPU backend's memory ops (alloc ... sync of grpo/ops_list.h). Memory is
 * host memory: alloc is a zeroed 64-byte aligned block (cpu_block), upload/download/copy are
 * memcpy, sync does nothing.
 *
 * Blocks of CPU_HUGE_PAGE bytes or more (the weights, the gradients and AdamW's moments, the
 * work memory of the activations, the KV pages, the scratch) start on a 2 MiB boundary, and
 * their whole 2 MiB pages are asked for as transparent huge pages (madvise MADV_HUGEPAGE: where
 * the kernel's setting is "madvise", Debian's, only memory so advised gets them). Decode reads
 * its ~100 MB of weights once a token: on 4 KiB pages that is a TLB miss every 4 KiB, a page
 * walk each (two levels of them in a virtual machine), and the products' loop ran at 7.9-10.2
 * GB/s from memory where on huge pages it reads 10.0-11.9 (BENCHMARKS.md, issue 30). The tail
 * under 2 MiB is not advised, so no block holds memory it does not use. The cost: where a
 * virtual machine hands free guest memory back to its host (free page reporting, which takes
 * only whole 2 MiB blocks), a huge page's first touch waits for the host: ~3 s of system time
 * a GB on the machine of BENCHMARKS.md, against ~0.45 on 4 KiB pages, paid once as the model
 * and its work memory are first written; memory kept and reused (the KV pool, kv_pages.c) does
 * not pay it again.
 */
#include "cpu/cpu_backend.h"

#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#define CPU_HUGE_PAGE ((size_t)2 << 20) /* x86-64's and arm64's transparent huge page */

void *cpu_block(size_t bytes) {
    size_t size = bytes ? (bytes + 63u) / 64u * 64u : 64u;
    if (size < bytes) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, size >= CPU_HUGE_PAGE ? CPU_HUGE_PAGE : 64, size)) return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* best effort: a kernel without transparent huge pages refuses, and 4 KiB pages remain */
    if (size >= CPU_HUGE_PAGE)
        (void)madvise(p, size / CPU_HUGE_PAGE * CPU_HUGE_PAGE, MADV_HUGEPAGE);
#endif
    return p;
}

void *cpu_alloc(void *ctx, uint64_t bytes) {
    (void)ctx;
    if (bytes > (uint64_t)SIZE_MAX - 63u) return NULL;
    void *p = cpu_block((size_t)bytes);
    if (p) memset(p, 0, bytes ? (size_t)bytes : 1);
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
