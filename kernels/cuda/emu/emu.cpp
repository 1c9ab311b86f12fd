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
 * carries on without a switch. Warp barriers (shuffles) release when every lane of the warp has
 * started and arrived; a lane that returns while others of its warp shuffle, or a shuffle that
 * reads a lane the block does not have, stops the process (both undefined on a GPU).
 * Shuffle slots are double-buffered per warp (by the parity of the lane's shuffle count), so one
 * barrier per shuffle is enough: a slot set is rewritten only two shuffles later, after every
 * lane has passed the barrier between.
 * Fibers are made once and kept for the thread's lifetime. On x86-64 a switch is a few
 * instructions (callee-saved registers pushed on the old stack, the stack pointer swapped, popped
 * from the new one): swapcontext's signal-mask system calls made a barrier-heavy kernel ~20x
 * slower. Elsewhere switches go through ucontext. Both are annotated for AddressSanitizer.
 */
#include "emu.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <map>
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

#if defined(__x86_64__) && !defined(GRPO_EMU_UCONTEXT) /* GRPO_EMU_UCONTEXT: the portable path */
#define GRPO_EMU_ASM_SWITCH 1
/* Saves the callee-saved registers (System V: rbx, rbp, r12-r15) on the current stack, stores
 * its stack pointer in *from_sp, switches to to_sp and pops the same registers from there. */
extern "C" void grpo_emu_ctx_switch(void **from_sp, void *to_sp);
asm(".text\n"
    ".globl grpo_emu_ctx_switch\n"
    ".hidden grpo_emu_ctx_switch\n"
    ".type grpo_emu_ctx_switch, @function\n"
    "grpo_emu_ctx_switch:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size grpo_emu_ctx_switch, .-grpo_emu_ctx_switch\n");
#endif

namespace {

[[noreturn]] void emu_fail(const char *what) {
    fprintf(stderr, "grpo: cuda emulation: %s\n", what);
    abort();
}

struct Fiber {
#ifdef GRPO_EMU_ASM_SWITCH
    void *sp = nullptr; /* saved stack pointer while switched out */
#else
    ucontext_t ctx;
#endif
    unsigned char *map = nullptr; /* guard page + stack */
    size_t map_bytes = 0;
    unsigned char *stack = nullptr; /* the usable stack: STACK_BYTES above the guard page */
    void *fake = nullptr; /* ASan's fake stack of this fiber while it is switched out */
    unsigned t = 0;       /* linear id of the CUDA thread it runs */
    uint3 tid = {0, 0, 0};
    unsigned shuffles = 0; /* shuffles done by the thread: the slot set's parity */
};

struct Sched {
    grpo_emu_view view = {};
#ifdef GRPO_EMU_ASM_SWITCH
    void *main_sp = nullptr;
#else
    ucontext_t main_ctx;
#endif
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
    __sanitizer_start_switch_fiber(&s->main_fake, f->stack, STACK_BYTES);
#endif
#ifdef GRPO_EMU_ASM_SWITCH
    grpo_emu_ctx_switch(&s->main_sp, f->sp);
#else
    if (swapcontext(&s->main_ctx, &f->ctx) != 0) emu_fail("swapcontext failed");
#endif
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
#ifdef GRPO_EMU_ASM_SWITCH
    grpo_emu_ctx_switch(&self->sp, s->main_sp);
#else
    if (swapcontext(&self->ctx, &s->main_ctx) != 0) emu_fail("swapcontext failed");
#endif
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
    f->stack = f->map + page;
#ifdef GRPO_EMU_ASM_SWITCH
    /* what grpo_emu_ctx_switch pops: six registers, then fiber_entry as the return address,
     * above it a dummy return address of fiber_entry (which never returns) so that it starts
     * with the stack alignment of a called function */
    void **sp = (void **)(((uintptr_t)(f->stack + STACK_BYTES)) & ~(uintptr_t)15);
    *--sp = nullptr;
    *--sp = (void *)&fiber_entry;
    for (int r = 0; r < 6; r++) *--sp = nullptr;
    f->sp = sp;
#else
    if (getcontext(&f->ctx) != 0) emu_fail("getcontext failed");
    f->ctx.uc_stack.ss_sp = f->stack;
    f->ctx.uc_stack.ss_size = STACK_BYTES;
    f->ctx.uc_link = nullptr; /* fiber_entry never returns */
    makecontext(&f->ctx, fiber_entry, 0);
#endif
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

/* A full-mask shuffle names every lane of the warp: one that has returned leaves its partners
 * reading an undefined value on a GPU, so the emulation stops there. */
const char *const SHFL_EXITED =
    "a warp shuffle while a lane of the same warp has returned (undefined on a GPU: keep every "
    "lane of a warp alive until its shuffles are done, with a neutral value if it has no work)";

void thread_finished(Sched *s, const Fiber *self) {
    unsigned w = self->t / 32u;
    s->finished++;
    s->warp_finished[w]++;
    if (!s->warp_wait[w].empty()) emu_fail(SHFL_EXITED);
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
    if (s->warp_finished[w]) emu_fail(SHFL_EXITED);
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
    /* CUDA: a source in a later group of `width` lanes gives the caller its own value */
    if (src >= base + (unsigned)width) src = lane;
    if (src >= warp_lanes(s, w)) {
        char what[160];
        snprintf(what, sizeof what,
                 "a warp shuffle reads lane %u, which this block of %u threads does not have "
                 "(undefined on a GPU: make blocks whole warps)", src, s->n);
        emu_fail(what);
    }
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
    grpo_emu_device_begin();
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                s->view.block_idx = {x, y, z};
                run_block(s);
            }
    grpo_emu_device_end();
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

/* ---- strict mode: device memory closed to the host between device operations ------------- */

namespace {
struct Region {
    size_t size;  /* what cudaMalloc gave (256-byte multiple): the device bytes */
    size_t bytes; /* whole pages mapped */
};
struct Strict {
    int on = -1;   /* -1: not read from the environment yet */
    int depth = 0; /* nested grpo_emu_device_begin */
    /* every live device allocation (mmap'd), by start address: the pointer checks find the one
     * holding an address with one ordered lookup */
    std::map<uintptr_t, Region> regions;
};
Strict &strict() {
    static Strict st;
    if (st.on < 0) {
        const char *e = getenv("GRPO_CUDA_EMU_STRICT");
        st.on = e && strcmp(e, "1") == 0;
    }
    return st;
}
void protect_all(Strict &st, int prot) {
    for (const auto &r : st.regions)
        if (mprotect((void *)r.first, r.second.bytes, prot) != 0)
            emu_fail("strict mode: mprotect failed");
}
size_t page_round(size_t n) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (n + page - 1) / page * page;
}

/* The live allocation whose bytes [start, start + size) hold p, or NULL; with_end: its end too
 * (a pointer one past an allocation is a valid empty range of it). */
const std::pair<const uintptr_t, Region> *region_of(const Strict &st, const void *p,
                                                    bool with_end = true) {
    uintptr_t a = (uintptr_t)p;
    auto it = st.regions.upper_bound(a); /* the first allocation starting after p */
    if (it == st.regions.begin()) return nullptr;
    --it;
    size_t off = a - it->first;
    return off < it->second.size || (with_end && off == it->second.size) ? &*it : nullptr;
}

/* Whether [p, p + bytes) lies inside one live device allocation. */
bool device_range(const Strict &st, const void *p, size_t bytes) {
    const auto *r = region_of(st, p);
    return r && bytes <= r->second.size - ((uintptr_t)p - r->first);
}

[[noreturn]] void not_device(const Strict &st, const char *what, const void *p, size_t bytes,
                             const char *why) {
    char msg[400];
    const auto *r = region_of(st, p);
    if (r)
        snprintf(msg, sizeof msg,
                 "strict mode: %s: %zu bytes at %p run past the end of the device allocation "
                 "of %zu bytes at %p", what, bytes, p, r->second.size, (void *)r->first);
    else
        snprintf(msg, sizeof msg,
                 "strict mode: %s: %p is not device memory (no live cudaMalloc allocation "
                 "holds it): %s", what, p, why);
    emu_fail(msg);
}
} // namespace

extern "C" void grpo_emu_device_begin(void) {
    Strict &st = strict();
    if (st.on && st.depth++ == 0) protect_all(st, PROT_READ | PROT_WRITE);
}

extern "C" void grpo_emu_device_end(void) {
    Strict &st = strict();
    if (st.on && --st.depth == 0) protect_all(st, PROT_NONE);
}

extern "C" void grpo_emu_check_device(const char *what, int index, const void *p) {
    Strict &st = strict();
    if (!st.on || !p || region_of(st, p)) return;
    char where[300];
    snprintf(where, sizeof where, "%s: argument %d (counting from 0)", what, index);
    not_device(st, where, p, 0, "a host pointer passed to a device kernel (a GPU faults on it)");
}

/* A copy's or memset's sides, as cudaMemcpy's kind names them: device sides must lie inside
 * one allocation, host sides outside every allocation (a device pointer where the kind says
 * host is undefined behaviour in CUDA). */
static void check_side(const Strict &st, const char *call, const char *side, const void *p,
                       size_t bytes, int device) {
    char what[200];
    snprintf(what, sizeof what, "%s: the %s side (%s)", call, side, device ? "device" : "host");
    if (device && !device_range(st, p, bytes))
        not_device(st, what, p, bytes, "a host pointer where the copy's kind says device (CUDA "
                                       "refuses it: invalid argument, or faults)");
    if (!device && region_of(st, p, false)) {
        char msg[400];
        snprintf(msg, sizeof msg,
                 "strict mode: %s: %p is device memory where the copy's kind says host", what,
                 p);
        emu_fail(msg);
    }
}

static void check_copy(const void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    Strict &st = strict();
    if (!st.on || !bytes || kind == cudaMemcpyDefault) return;
    int dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    int src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    static const char *const names[] = {"HostToHost", "HostToDevice", "DeviceToHost",
                                        "DeviceToDevice"};
    char call[80];
    snprintf(call, sizeof call, "cudaMemcpy (%s) of %zu bytes", names[kind], bytes);
    check_side(st, call, "destination", dst, bytes, dst_dev);
    check_side(st, call, "source", src, bytes, src_dev);
}

/* Device memory of strict mode: whole pages of their own, closed unless device work runs. */
static void *strict_alloc(Strict &st, size_t size) {
    size_t bytes = page_round(size);
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    st.regions[(uintptr_t)p] = Region{size, bytes};
    if (st.depth == 0 && mprotect(p, bytes, PROT_NONE) != 0) emu_fail("strict mode: mprotect");
    return p;
}

static void strict_free(Strict &st, void *ptr) {
    auto it = st.regions.find((uintptr_t)ptr);
    if (it == st.regions.end()) emu_fail("cudaFree of a pointer cudaMalloc did not return");
    munmap(ptr, it->second.bytes);
    st.regions.erase(it);
}

extern "C" cudaError_t cudaMalloc(void **ptr, size_t bytes) {
    if (!ptr) return fail(cudaErrorInvalidValue);
    size_t size = bytes ? (bytes + 255u) / 256u * 256u : 256u; /* cudaMalloc aligns to 256 */
    if (size < bytes) return fail(cudaErrorMemoryAllocation);
    Strict &st = strict();
    void *p = st.on ? strict_alloc(st, size) : aligned_alloc(256, size); /* mmap: zeroed */
    if (!p) {
        *ptr = nullptr;
        return fail(cudaErrorMemoryAllocation);
    }
    if (!st.on) memset(p, 0, size);
    *ptr = p;
    return cudaSuccess;
}

extern "C" cudaError_t cudaFree(void *ptr) {
    Strict &st = strict();
    if (st.on && ptr) strict_free(st, ptr);
    else free(ptr);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    if ((unsigned)kind > (unsigned)cudaMemcpyDefault) return fail(cudaErrorInvalidValue);
    if (bytes && (!dst || !src)) return fail(cudaErrorInvalidValue);
    check_copy(dst, src, bytes, kind);
    grpo_emu_device_begin();
    if (bytes && dst != src) memmove(dst, src, bytes);
    grpo_emu_device_end();
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                                       cudaMemcpyKind kind, cudaStream_t) {
    return cudaMemcpy(dst, src, bytes, kind);
}

extern "C" cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t) {
    if (bytes && !ptr) return fail(cudaErrorInvalidValue);
    Strict &st = strict();
    if (st.on && bytes && !device_range(st, ptr, bytes))
        not_device(st, "cudaMemsetAsync", ptr, bytes, "a host pointer given to a device memset");
    grpo_emu_device_begin();
    if (bytes) memset(ptr, value, bytes);
    grpo_emu_device_end();
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
