/*
 * cpu_ctx.c — the CPU backend's context: its creation with the thread policy (one pool,
 * cpu_pool.h, OpenBLAS on one thread; cpu_backend.h), the parallel regions on that pool with
 * their per-family counts, the shared scratch buffer, the check that aborts an op called with
 * impossible arguments, the ISA rule of the per-ISA kernels, the compute dtype of the
 * products (bf16 where the CPU has avx512_bf16), and the grid of tiles the parallel products
 * share (cpu_tile_grid). Every kernel calls into this file; it calls only cpu_pool.c.
 */
#include "cpu/cpu_backend.h"

#include "cpu/blas.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cpu_check_failed(const char *file, int line, const char *op, const char *what) {
    fprintf(stderr, "grpo: %s:%d: cpu backend: %s: %s\n", file, line, op, what);
    abort();
}

cpu_ctx *cpu_ctx_new(int32_t threads) {
    cpu_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return NULL;
    ctx->threads = threads > 0 ? threads : cpu_pool_default_threads();
    if (ctx->threads < 1) ctx->threads = 1;
    if (ctx->threads > 1 && !(ctx->pool = cpu_pool_new(ctx->threads))) {
        free(ctx);
        return NULL;
    }
    /* one thread pool: the context's (see cpu_backend.h); this is process-wide */
    openblas_set_num_threads(1);
    return ctx;
}

static const char *const family_names[CPU_FAMILIES] = {
    "gemm_fwd", "gemm_blas", "attention", "head", "norm", "element", "embedding", "optimizer",
    "weights", "host"};

const char *cpu_family_name(cpu_family f) {
    return f >= 0 && f < CPU_FAMILIES ? family_names[f] : "?";
}

void cpu_ctx_stats_get(const cpu_ctx *ctx, cpu_ctx_stats *st, cpu_pool_counters *pool) {
    if (st) *st = ctx->stats;
    if (pool) cpu_pool_counters_get(ctx->pool, pool);
}

/* GRPO_CPU_POOL_STATS=1 (a debug switch): the counts on stderr when the context closes. */
static void stats_print(const cpu_ctx *ctx) {
    const char *env = getenv("GRPO_CPU_POOL_STATS");
    if (!env || strcmp(env, "1")) return;
    cpu_pool_counters pc;
    cpu_pool_counters_get(ctx->pool, &pc);
    fprintf(stderr, "grpo: cpu pool: %d threads: %llu fork/joins, %llu inline runs, %llu tasks "
            "(%llu by workers), %llu worker parks, %llu caller parks, %llu wake calls\n",
            ctx->threads, (unsigned long long)pc.jobs, (unsigned long long)pc.inline_jobs,
            (unsigned long long)pc.tasks, (unsigned long long)pc.worker_tasks,
            (unsigned long long)pc.worker_parks, (unsigned long long)pc.caller_parks,
            (unsigned long long)pc.wake_calls);
    for (int f = 0; f < CPU_FAMILIES; f++)
        fprintf(stderr, "grpo: cpu pool: %-10s %10llu fork/joins %10llu inline\n",
                family_names[f], (unsigned long long)ctx->stats.forks[f],
                (unsigned long long)ctx->stats.inline_runs[f]);
}

void cpu_ctx_free(cpu_ctx *ctx) {
    if (!ctx) return;
    stats_print(ctx);
    cpu_pool_free(ctx->pool);
    free(ctx->scratch);
    free(ctx->pack);
    free(ctx->panel);
    free(ctx);
}

void cpu_parallel(void *ctx_, cpu_family family, int nt, int64_t n_tasks, cpu_pool_fn *fn,
                  void *arg) {
    cpu_ctx *ctx = ctx_;
    if (n_tasks <= 0) return;
    if (nt <= 1 || n_tasks == 1 || !ctx->pool) {
        ctx->stats.inline_runs[family]++;
        for (int64_t t = 0; t < n_tasks; t++) fn(arg, t, 0);
        return;
    }
    ctx->stats.forks[family]++;
    cpu_pool_run(ctx->pool, n_tasks, nt, fn, arg);
}

typedef struct range_job {
    cpu_range_fn *fn;
    void *arg;
    int64_t n, chunk;
} range_job;

static void range_task(void *arg, int64_t task, int32_t tid) {
    const range_job *j = arg;
    int64_t i0 = task * j->chunk, i1 = i0 + j->chunk < j->n ? i0 + j->chunk : j->n;
    j->fn(j->arg, i0, i1, tid);
}

/* ranges a thread on average: enough that a descheduled thread's share is taken by others */
#define RANGES_PER_THREAD 4

void cpu_parallel_range(void *ctx, cpu_family family, int nt, int64_t n, int64_t grain,
                        cpu_range_fn *fn, void *arg) {
    if (n <= 0) return;
    int64_t chunk = nt > 1 ? (n + (int64_t)nt * RANGES_PER_THREAD - 1) / ((int64_t)nt *
                                                                           RANGES_PER_THREAD)
                           : n;
    if (chunk < grain) chunk = grain;
    if (chunk > n) chunk = n;
    range_job j = {fn, arg, n, chunk};
    cpu_parallel(ctx, family, nt, (n + chunk - 1) / chunk, range_task, &j);
}

/* ---- work stealing (cpu_steal) -------------------------------------------------------------- */

#define STEAL_MAX_PARTS 256 /* ranges of one region (more threads: they share the ranges) */

/* Takes the front item of r (own = 1) or its back item (own = 0); -1 when r is empty. *left:
 * the items left in r after the claim. */
static int64_t steal_take(cpu_steal_range *r, int own, int64_t *left) {
    uint64_t sp = atomic_load_explicit(&r->span, memory_order_relaxed);
    for (;;) {
        uint32_t front = (uint32_t)(sp >> 32), back = (uint32_t)sp;
        if (front >= back) return -1;
        uint64_t want = own ? (uint64_t)(front + 1) << 32 | back
                            : (uint64_t)front << 32 | (back - 1);
        if (atomic_compare_exchange_weak_explicit(&r->span, &sp, want, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *left = (int64_t)back - front - 1;
            return own ? front : back - 1;
        }
    }
}

/* steal_take of the front with one range, run inline: no other thread can claim, so a plain
 * load and store (a compare-exchange is a locked instruction: it waits for the loads before it,
 * a stall per item in the products that stream their weights) */
static int64_t take_alone(cpu_steal_range *r, int64_t *left) {
    uint64_t sp = atomic_load_explicit(&r->span, memory_order_relaxed);
    uint32_t front = (uint32_t)(sp >> 32), back = (uint32_t)sp;
    if (front >= back) return -1;
    atomic_store_explicit(&r->span, (uint64_t)(front + 1) << 32 | back, memory_order_relaxed);
    *left = (int64_t)back - front - 1;
    return front;
}

int64_t cpu_steal_claim(cpu_steal *s, int32_t part, int64_t *next) {
    int64_t left, i = s->parts == 1 ? take_alone(&s->range[0], &left)
                                    : steal_take(&s->range[part], 1, &left);
    *next = i >= 0 && left > 0 ? i + 1 : -1;
    if (i >= 0) return i;
    for (int32_t k = 1; k < s->parts; k++) { /* the others, from the next one on */
        int32_t q = (part + k) % s->parts;
        if ((i = steal_take(&s->range[q], 0, &left)) >= 0) return i;
    }
    return -1;
}

typedef struct steal_job {
    cpu_steal s;
    cpu_steal_fn *fn;
    void *arg;
} steal_job;

static void steal_task(void *arg, int64_t task, int32_t tid) {
    steal_job *j = arg;
    j->fn(j->arg, &j->s, (int32_t)task, tid);
}

void cpu_parallel_steal(void *ctx, cpu_family family, int nt, int64_t n, cpu_steal_fn *fn,
                        void *arg) {
    if (n <= 0) return;
    CPU_CHECK(n <= (int64_t)UINT32_MAX, "cpu_parallel_steal", "fewer than 2^32 items");
    int32_t parts = nt < 1 ? 1 : nt > STEAL_MAX_PARTS ? STEAL_MAX_PARTS : nt;
    if (parts > n) parts = (int32_t)n;
    cpu_steal_range range[STEAL_MAX_PARTS];
    for (int32_t p = 0; p < parts; p++) { /* range p: [n p / parts, n (p + 1) / parts) */
        uint64_t a = (uint64_t)(n * p / parts), b = (uint64_t)(n * (p + 1) / parts);
        atomic_init(&range[p].span, a << 32 | b);
    }
    steal_job j = {{range, parts}, fn, arg};
    cpu_parallel(ctx, family, parts, parts, steal_task, &j);
}

/* ---- the host's work (grpo_ops.parallel_for) ------------------------------------------------ */

typedef struct host_job {
    void (*fn)(void *arg, int64_t i, int32_t part);
    void *arg;
} host_job;

static void host_part(void *arg, cpu_steal *s, int32_t part, int32_t tid) {
    (void)tid;
    const host_job *j = arg;
    int64_t i, next;
    while ((i = cpu_steal_claim(s, part, &next)) >= 0) j->fn(j->arg, i, part);
}

int32_t cpu_parallel_for(void *ctx, int64_t n, double work,
                         void (*fn)(void *arg, int64_t i, int32_t part), void *arg) {
    if (n > 0) {
        host_job j = {fn, arg};
        cpu_parallel_steal(ctx, CPU_FAM_HOST, cpu_threads_for(ctx, (double)n * work), n,
                           host_part, &j);
    }
    return ((const cpu_ctx *)ctx)->threads;
}

void cpu_locals_init(cpu_locals *l, const cpu_ctx *ctx, size_t bytes, const char *op) {
    l->n = ctx->threads;
    l->bytes = bytes ? bytes : 1;
    l->op = op;
    l->slot = calloc((size_t)l->n, sizeof *l->slot);
    CPU_CHECK(l->slot != NULL, op, "out of memory for the per-thread buffers");
}

void *cpu_local(cpu_locals *l, int32_t tid) {
    CPU_CHECK(tid >= 0 && tid < l->n, l->op, "a thread index within the pool");
    if (!l->slot[tid]) { /* only thread tid touches slot tid */
        l->slot[tid] = malloc(l->bytes);
        CPU_CHECK(l->slot[tid] != NULL, l->op, "out of memory for a per-thread buffer");
    }
    return l->slot[tid];
}

void cpu_locals_free(cpu_locals *l) {
    for (int32_t t = 0; t < l->n; t++) free(l->slot[t]);
    free(l->slot);
    l->slot = NULL;
}

/* *buf grown to at least n floats (64-byte aligned, contents lost), or NULL */
static float *grow(float **buf, size_t *cap, size_t n) {
    if (n <= *cap) return *buf;
    free(*buf);
    *buf = NULL;
    *cap = 0;
    float *p = cpu_block(n * sizeof(float));
    if (!p) return NULL;
    *buf = p;
    *cap = n;
    return p;
}

float *cpu_scratch(cpu_ctx *ctx, size_t n) { return grow(&ctx->scratch, &ctx->scratch_floats, n); }

float *cpu_work(cpu_ctx *ctx, size_t n, int apart) {
    return apart ? grow(&ctx->pack, &ctx->pack_floats, n) : cpu_scratch(ctx, n);
}

int32_t cpu_simd_level(int32_t limit) {
#if defined(__GNUC__) && defined(__x86_64__)
    __builtin_cpu_init();
    if ((limit == CPU_SIMD_ANY || limit >= CPU_SIMD_AVX512) && __builtin_cpu_supports("avx512f"))
        return CPU_SIMD_AVX512;
    if ((limit == CPU_SIMD_ANY || limit >= CPU_SIMD_AVX2) && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma"))
        return CPU_SIMD_AVX2;
#else
    (void)limit;
#endif
    return CPU_SIMD_BASE;
}

int cpu_bf16_isa(int32_t limit) {
#if defined(__GNUC__) && defined(__x86_64__)
    return cpu_simd_level(limit) == CPU_SIMD_AVX512 && __builtin_cpu_supports("avx512bf16");
#else
    (void)limit;
    return 0;
#endif
}

int cpu_bf16_compute(int32_t limit) {
    const char *off = getenv("GRPO_TEST_NO_AVX512BF16");
    if (off && *off && strcmp(off, "0") != 0) return 0;
    return cpu_bf16_isa(limit);
}

int32_t cpu_set_compute_dtype(cpu_ctx *ctx, int32_t dtype, grpo_error *err) {
    if (dtype == GRPO_DTYPE_F32) {
        ctx->compute_dtype = dtype;
        return GRPO_OK;
    }
    if (dtype != GRPO_DTYPE_BF16)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "backend 'cpu': compute dtype %d: expected f32 (%d) or bf16 (%d)",
                              dtype, GRPO_DTYPE_F32, GRPO_DTYPE_BF16);
    if (!cpu_bf16_compute(ctx->simd_limit))
        return grpo_error_set(err, GRPO_ERR_UNSUPPORTED,
                              "backend 'cpu': bf16 compute needs the AVX-512 BF16 instructions "
                              "(avx512_bf16: VDPBF16PS), which this CPU does not have");
    ctx->compute_dtype = dtype;
    ctx->bf16_amx = cpu_bf16_amx();
    ctx->bf16_fma = !ctx->bf16_amx && cpu_bf16_fma();
    return GRPO_OK;
}

static int env_on(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

int cpu_bf16_fma(void) {
    const char *path = getenv("GRPO_TEST_BF16_PATH");
    if (path && !strcmp(path, "dot")) return 0;
    if (path && !strcmp(path, "fma")) return 1;
#if defined(__GNUC__) && defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_is("intel");
#else
    return 0;
#endif
}

int cpu_bf16_amx(void) {
    static atomic_int told;
    int off = env_on("GRPO_TEST_NO_AMX"), amx = !off && cpu_amx_bf16_ready();
    if (!atomic_exchange(&told, 1)) /* once a process: which instructions bf16 runs on */
        fprintf(stderr, "grpo: backend 'cpu': bf16 compute on %s%s\n",
                amx ? "AMX tiles (TDPBF16PS)"
                    : cpu_bf16_fma() ? "fp32 fmas of bf16 operands (VDPBF16PS runs at half "
                                       "their rate on Intel cores: without AMX, bf16 compute "
                                       "is not faster than fp32 here); AMX: "
                                     : "AVX512-BF16 (VDPBF16PS); AMX: ",
                amx ? "" : (off ? "off (GRPO_TEST_NO_AMX)" : cpu_amx_bf16_why()));
    return amx;
}

static int32_t round_up(int32_t x, int32_t a) { return (x + a - 1) / a * a; }

/* The grid of every tiled product (gemm.c, gemm_nt.c, gemm_amx.c): tiles as square as
 * possible, since every thread packs its own rows and columns. */
void cpu_tile_grid(int nt, int32_t M, int32_t N, int32_t am, int32_t an, int32_t *tm,
                   int32_t *tn, int32_t *pn) {
    int32_t best = -1;
    for (int32_t p = 1; p <= nt; p++) { /* p tiles down, nt / p across */
        if (nt % p) continue;
        int32_t m = round_up((M + p - 1) / p, am), n = round_up((N + nt / p - 1) / (nt / p), an);
        if (best < 0 || m + n < best) best = m + n, *tm = m, *tn = n, *pn = nt / p;
    }
}
