/*
 * emu.cpp — the scheduler and runtime of the host emulation (emu.h says what it promises).
 *
 * One scheduler per CPU thread. A launch walks its blocks in order; within a block the
 * scheduler (on the caller's stack) resumes fibers until every thread has returned:
 *   1. a fiber released from a barrier (the ready queue), else
 *   2. a fiber (idle from the pool, or new) to start the next unstarted thread, else
 *   3. if every thread still alive waits at __syncthreads, all of them are made ready, else
 *   4. the block is done (or, if some thread still waits, the kernel deadlocked: abort).
 * A fiber starts threads one after another while unstarted threads remain, so a thread that
 * never waits costs no switch. The last thread to arrive at a barrier releases the others and
 * carries on without a switch. Warp barriers (shuffles) release when every lane of the warp that
 * has not returned has arrived and every lane of the warp has started.
 * Shuffle slots are double-buffered per warp (by the parity of the lane's shuffle count), so one
 * barrier per shuffle is enough: a slot set is rewritten only two shuffles later, after every
 * lane has passed the barrier between.
 * Fibers are ucontext fibers made once and kept for the thread's lifetime; switches go through
 * swapcontext, annotated for AddressSanitizer when it is on.
 */
#include "emu.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <memory>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define GRPO_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GRPO_EMU_ASAN 1
#endif
#endif

#ifdef GRPO_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
/* AddressSanitizer's instrumented frames are several times larger */
static const size_t STACK_BYTES = 512u << 10;
#else
static const size_t STACK_BYTES = 128u << 10;
#endif

namespace {

[[noreturn]] void emu_fail(const char *what) {
    fprintf(stderr, "grpo: cuda emulation: %s\n", what);
    abort();
}

struct Fiber {
    ucontext_t ctx;
    unsigned char *map = nullptr; /* guard page + stack */
    size_t map_bytes = 0;
    void *fake = nullptr; /* ASan's fake stack of this fiber while it is switched out */
    unsigned t = 0;       /* linear id of the CUDA thread it runs */
    uint3 tid = {0, 0, 0};
    unsigned shuffles = 0; /* shuffles done by the thread: the slot set's parity */
};

struct Sched {
    grpo_emu_view view = {};
    ucontext_t main_ctx;
    void *main_fake = nullptr;
    const void *main_bottom = nullptr;
    size_t main_size = 0;
    std::vector<std::unique_ptr<Fiber>> fibers;
    std::vector<Fiber *> idle;
    Fiber *cur = nullptr; /* the fiber running, NULL on the scheduler */

    /* the launch */
    void (*body)(void *) = nullptr;
    void *closure = nullptr;
    unsigned char *dyn = nullptr;
    size_t dyn_bytes = 0;
    /* the block */
    unsigned n = 0;          /* threads per block */
    unsigned next_start = 0; /* threads [0, next_start) have started */
    unsigned finished = 0;
    std::vector<Fiber *> ready; /* released, in order; ready_head is the next to resume */
    size_t ready_head = 0;
    std::vector<Fiber *> block_wait;
    std::vector<std::vector<Fiber *>> warp_wait;
    std::vector<unsigned> warp_finished;
    std::vector<uint32_t> slots; /* (warps, 2, 32) */

    ~Sched() {
        for (auto &f : fibers)
            if (f->map) munmap(f->map, f->map_bytes);
    }
};

thread_local std::unique_ptr<Sched> tls_sched;
thread_local cudaError_t tls_last_error = cudaSuccess;

Sched *sched() {
    if (!tls_sched) tls_sched.reset(new Sched());
    return tls_sched.get();
}

/* ---- switching ------------------------------------------------------------------------------ */

void fiber_entry();

void switch_to_fiber(Sched *s, Fiber *f) {
    s->cur = f;
#ifdef GRPO_EMU_ASAN
    __sanitizer_start_switch_fiber(&s->main_fake, f->map, f->map_bytes);
#endif
    if (swapcontext(&s->main_ctx, &f->ctx) != 0) emu_fail("swapcontext failed");
#ifdef GRPO_EMU_ASAN
    __sanitizer_finish_switch_fiber(s->main_fake, nullptr, nullptr);
#endif
    s->cur = nullptr;
}

/* Called by a fiber to give the CPU back to the scheduler; returns when resumed. */
void park(Sched *s, Fiber *self) {
#ifdef GRPO_EMU_ASAN
    __sanitizer_start_switch_fiber(&self->fake, s->main_bottom, s->main_size);
#endif
    if (swapcontext(&self->ctx, &s->main_ctx) != 0) emu_fail("swapcontext failed");
#ifdef GRPO_EMU_ASAN
    __sanitizer_finish_switch_fiber(self->fake, &s->main_bottom, &s->main_size);
#endif
    s->view.thread_idx = self->tid;
}

Fiber *new_fiber(Sched *s) {
    std::unique_ptr<Fiber> f(new Fiber());
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    f->map_bytes = STACK_BYTES + page;
    void *m = mmap(nullptr, f->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (m == MAP_FAILED) emu_fail("out of memory for a fiber stack");
    f->map = (unsigned char *)m;
    mprotect(f->map, page, PROT_NONE); /* an overflowing kernel faults instead of corrupting */
    if (getcontext(&f->ctx) != 0) emu_fail("getcontext failed");
    f->ctx.uc_stack.ss_sp = f->map + page;
    f->ctx.uc_stack.ss_size = STACK_BYTES;
    f->ctx.uc_link = nullptr; /* fiber_entry never returns */
    makecontext(&f->ctx, fiber_entry, 0);
    s->fibers.push_back(std::move(f));
    return s->fibers.back().get();
}

/* ---- barriers ------------------------------------------------------------------------------- */

void make_ready(Sched *s, std::vector<Fiber *> &waiting, const Fiber *except) {
    for (Fiber *f : waiting)
        if (f != except) s->ready.push_back(f);
    waiting.clear();
}

unsigned warp_lanes(const Sched *s, unsigned w) {
    unsigned end = (w + 1) * 32u < s->n ? (w + 1) * 32u : s->n;
    return end - w * 32u;
}

/* Whether every lane of warp w has started and is either waiting or returned. */
bool warp_complete(const Sched *s, unsigned w) {
    unsigned lanes = warp_lanes(s, w);
    return s->next_start >= w * 32u + lanes &&
           s->warp_wait[w].size() + s->warp_finished[w] == lanes;
}

void thread_finished(Sched *s, const Fiber *self) {
    unsigned w = self->t / 32u;
    s->finished++;
    s->warp_finished[w]++;
    if (!s->warp_wait[w].empty() && warp_complete(s, w)) make_ready(s, s->warp_wait[w], nullptr);
}

void fiber_entry() {
    Sched *s = sched();
    Fiber *self = s->cur;
#ifdef GRPO_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &s->main_bottom, &s->main_size);
#endif
    for (;;) {
        while (s->next_start < s->n) {
            unsigned t = s->next_start++;
            const dim3 &b = s->view.block_dim;
            self->t = t;
            self->tid = {t % b.x, t / b.x % b.y, t / (b.x * b.y)};
            self->shuffles = 0;
            s->view.thread_idx = self->tid;
            s->body(s->closure);
            thread_finished(s, self);
        }
        s->idle.push_back(self);
        park(s, self);
    }
}

void run_block(Sched *s) {
    s->next_start = s->finished = 0;
    s->ready.clear();
    s->ready_head = 0;
    for (unsigned w = 0; w < s->warp_finished.size(); w++) s->warp_finished[w] = 0;
    if (s->dyn_bytes) memset(s->dyn, 0xff, s->dyn_bytes); /* NaN: nothing is there yet */
    for (;;) {
        if (s->ready_head < s->ready.size()) {
            Fiber *f = s->ready[s->ready_head++];
            if (s->ready_head == s->ready.size()) s->ready.clear(), s->ready_head = 0;
            switch_to_fiber(s, f);
        } else if (s->next_start < s->n) {
            Fiber *f;
            if (!s->idle.empty()) {
                f = s->idle.back();
                s->idle.pop_back();
            } else {
                f = new_fiber(s);
            }
            switch_to_fiber(s, f);
        } else if (!s->block_wait.empty()) {
            if (s->block_wait.size() + s->finished != s->n)
                emu_fail("kernel deadlock: threads wait at __syncthreads while others wait at "
                         "a warp shuffle");
            make_ready(s, s->block_wait, nullptr);
        } else {
            for (auto &w : s->warp_wait)
                if (!w.empty()) emu_fail("kernel deadlock: a warp shuffle never completed");
            return;
        }
    }
}

bool config_ok(dim3 grid, dim3 block, size_t shmem) {
    uint64_t threads = (uint64_t)block.x * block.y * block.z;
    if (!grid.x || !grid.y || !grid.z || !threads || threads > 1024 || block.x > 1024 ||
        block.y > 1024 || block.z > 64 || grid.x > 0x7fffffffu || grid.y > 65535 ||
        grid.z > 65535) {
        tls_last_error = cudaErrorInvalidConfiguration;
        return false;
    }
    if (shmem > 48u * 1024u) {
        tls_last_error = cudaErrorInvalidValue;
        return false;
    }
    return true;
}

Fiber *current_fiber(const char *what) {
    Sched *s = sched();
    if (!s->cur) {
        fprintf(stderr, "grpo: cuda emulation: %s called outside a kernel\n", what);
        abort();
    }
    return s->cur;
}

} // namespace

/* ---- what kernels call ------------------------------------------------------------------------ */

extern "C" grpo_emu_view *grpo_emu_view_now(void) { return &sched()->view; }

extern "C" void *grpo_emu_dyn_shared(void) { return sched()->dyn; }

extern "C" void grpo_emu_syncthreads(void) {
    Sched *s = sched();
    Fiber *self = current_fiber("__syncthreads");
    s->block_wait.push_back(self);
    if (s->next_start >= s->n && s->block_wait.size() + s->finished == s->n) {
        make_ready(s, s->block_wait, self); /* the last to arrive goes on */
        return;
    }
    park(s, self);
}

extern "C" uint32_t grpo_emu_shfl(uint32_t v, int mode, int arg, int width) {
    Sched *s = sched();
    Fiber *self = current_fiber("a warp shuffle");
    if (width <= 0 || width > 32 || (width & (width - 1)))
        emu_fail("shuffle width must be a power of two <= 32");
    unsigned w = self->t / 32u, lane = self->t % 32u;
    uint32_t *slot = &s->slots[(w * 2u + (self->shuffles++ & 1u)) * 32u];
    slot[lane] = v;
    s->warp_wait[w].push_back(self);
    if (warp_complete(s, w))
        make_ready(s, s->warp_wait[w], self);
    else
        park(s, self);
    unsigned base = lane & ~(unsigned)(width - 1), src;
    if (mode == GRPO_EMU_SHFL_IDX)
        src = base + ((unsigned)arg & (unsigned)(width - 1));
    else if (mode == GRPO_EMU_SHFL_XOR)
        src = lane ^ (unsigned)arg;
    else
        src = lane + (unsigned)arg;
    if (src < base || src >= base + (unsigned)width || src >= warp_lanes(s, w)) src = lane;
    return slot[src];
}

extern "C" void grpo_emu_launch(dim3 grid, dim3 block, size_t shmem, void (*body)(void *),
                                void *closure) {
    if (!config_ok(grid, block, shmem)) return;
    Sched *s = sched();
    if (s->cur) emu_fail("a kernel launched another kernel (not supported)");
    s->body = body;
    s->closure = closure;
    s->n = block.x * block.y * block.z;
    unsigned warps = (s->n + 31u) / 32u;
    s->warp_wait.assign(warps, std::vector<Fiber *>());
    s->warp_finished.assign(warps, 0);
    s->slots.assign((size_t)warps * 64u, 0);
    s->block_wait.clear();
    s->dyn_bytes = shmem;
    s->dyn = shmem ? (unsigned char *)malloc(shmem) : nullptr;
    if (shmem && !s->dyn) emu_fail("out of memory for dynamic shared memory");
    s->view.block_dim = block;
    s->view.grid_dim = grid;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                s->view.block_idx = {x, y, z};
                run_block(s);
            }
    free(s->dyn);
    s->dyn = nullptr;
    s->dyn_bytes = 0;
    s->body = nullptr;
    s->closure = nullptr;
}

/* ---- runtime ---------------------------------------------------------------------------------- */

namespace {
cudaError_t fail(cudaError_t e) {
    tls_last_error = e;
    return e;
}
} // namespace
struct grpo_emu_stream {
    int flags;
};

extern "C" cudaError_t cudaMalloc(void **ptr, size_t bytes) {
    if (!ptr) return fail(cudaErrorInvalidValue);
    size_t size = bytes ? (bytes + 255u) / 256u * 256u : 256u; /* cudaMalloc aligns to 256 */
    if (size < bytes) return fail(cudaErrorMemoryAllocation);
    void *p = aligned_alloc(256, size);
    if (!p) {
        *ptr = nullptr;
        return fail(cudaErrorMemoryAllocation);
    }
    memset(p, 0, size);
    *ptr = p;
    return cudaSuccess;
}

extern "C" cudaError_t cudaFree(void *ptr) {
    free(ptr);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    if ((unsigned)kind > (unsigned)cudaMemcpyDefault) return fail(cudaErrorInvalidValue);
    if (bytes && (!dst || !src)) return fail(cudaErrorInvalidValue);
    if (bytes && dst != src) memmove(dst, src, bytes);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                                       cudaMemcpyKind kind, cudaStream_t) {
    return cudaMemcpy(dst, src, bytes, kind);
}

extern "C" cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t) {
    if (bytes && !ptr) return fail(cudaErrorInvalidValue);
    if (bytes) memset(ptr, value, bytes);
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags) {
    if (!stream) return fail(cudaErrorInvalidValue);
    *stream = new grpo_emu_stream{(int)flags};
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    delete stream;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

extern "C" cudaError_t cudaGetLastError(void) {
    cudaError_t e = tls_last_error;
    tls_last_error = cudaSuccess;
    return e;
}

extern "C" const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    }
    return "unrecognized error code";
}

extern "C" cudaError_t cudaGetDeviceCount(int *count) {
    if (!count) return fail(cudaErrorInvalidValue);
    *count = 1;
    return cudaSuccess;
}

extern "C" cudaError_t cudaSetDevice(int device) {
    return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice);
}

extern "C" cudaError_t cudaGetDevice(int *device) {
    if (!device) return fail(cudaErrorInvalidValue);
    *device = 0;
    return cudaSuccess;
}

extern "C" cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) {
    if (!value) return fail(cudaErrorInvalidValue);
    if (device != 0) return fail(cudaErrorInvalidDevice);
    switch (attr) { /* a small GPU of compute capability 8.0 */
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = 48 * 1024; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrMultiProcessorCount: *value = 4; break;
    case cudaDevAttrComputeCapabilityMajor: *value = 8; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = 48 * 1024; break;
    default: return fail(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    if (!free_bytes || !total_bytes) return fail(cudaErrorInvalidValue);
    long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES);
    long page = sysconf(_SC_PAGESIZE);
    *total_bytes = pages > 0 ? (size_t)pages * (size_t)page : 0;
    *free_bytes = avail > 0 ? (size_t)avail * (size_t)page : 0;
    return cudaSuccess;
}
