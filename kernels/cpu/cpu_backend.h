/*
 * cpu_backend.h — the CPU backend's private interface: its context, the helpers its kernels
 * share, and one function per op of grpo_ops, cpu_NAME, declared from the op list
 * (grpo/ops_list.h, through backend_ops.h) and defined in the file named for its family.
 *
 * Files, bottom up: cpu_ctx.c (context, scratch, checks, thread policy), cpu_memory.c (memory
 * ops), gemm.c, widen.c (weights of another dtype read as fp32), the kernels (one file per
 * family), and cpu_backend.c (open, close, the table: it only names kernels).
 *
 * Every op takes the context (cpu_ctx *) as a void * first argument, as the table demands.
 * Threading: one pool (cpu_pool.h) of ctx->threads threads, the caller included. Every parallel
 * region is a cpu_parallel call (cpu_ctx.c): tasks claimed dynamically, work too small for a
 * fork/join run inline. OpenBLAS is set to one thread when the backend opens; GEMMs are
 * parallelised by cpu_sgemm (gemm.c), which gives each task a tile, or are called inside an
 * op's own tasks (attention, head). Two pools taking turns on the same cores (OpenBLAS's
 * pthreads spin after each call) would oversubscribe.
 *
 * Shapes use the letters of ops.h: N tokens, B rows, T time, C channels, I intermediate, V vocab,
 * NH query heads, NKV key/value heads, HD head dim, R decode rows, S cache length.
 */
#ifndef GRPO_CPU_BACKEND_H
#define GRPO_CPU_BACKEND_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include "backend_ops.h"
#include "cpu/cpu_pool.h"
#include "grpo/ops.h"
#include "grpo/plugin.h"

/* The widest vector ISA a kernel with per-ISA code (matmul_small.c, gemm_nt.c) may use; the
 * CPU's best when CPU_SIMD_ANY. Tests lower it to run every code path on one machine. */
enum { CPU_SIMD_ANY = 0, CPU_SIMD_BASE = 1, CPU_SIMD_AVX2 = 2, CPU_SIMD_AVX512 = 3 };

/* The op families whose parallel regions are counted apart (cpu_parallel, cpu_ctx_stats). */
typedef enum cpu_family {
    CPU_FAM_GEMM_FWD,   /* the batch-invariant products: gemm_nt.c, matmul_small.c (and
                         * cpu_sgemm's in bf16 compute) */
    CPU_FAM_GEMM_BLAS,  /* OpenBLAS tiles (cpu_sgemm in fp32: backward and LoRA products) */
    CPU_FAM_ATTENTION,  /* attention forward, backward, decode and their reductions */
    CPU_FAM_HEAD,       /* the fused LM head and logits_logp */
    CPU_FAM_NORM,       /* rmsnorm, rope */
    CPU_FAM_ELEMENT,    /* residual, swiglu, dropout, rows, scale, sumsq, bias gradients */
    CPU_FAM_EMBEDDING,  /* embedding forward and backward */
    CPU_FAM_OPTIMIZER,  /* adamw */
    CPU_FAM_WEIGHTS,    /* weights of another dtype: widening, bf16 copies */
    CPU_FAM_HOST,       /* the host's work by parallel_for (draws, a pack's kept-row copies) */
    CPU_FAMILIES
} cpu_family;

/* Per family: the parallel runs (fork/joins of the pool) and the runs kept on the caller
 * (work below the threshold, one task, or one thread). */
typedef struct cpu_ctx_stats {
    uint64_t forks[CPU_FAMILIES];
    uint64_t inline_runs[CPU_FAMILIES];
} cpu_ctx_stats;

typedef struct cpu_ctx {
    int32_t threads;       /* threads used by every op, the caller included (>= 1) */
    cpu_pool *pool;        /* its threads - 1 workers (NULL when threads == 1) */
    cpu_ctx_stats stats;   /* counted by cpu_parallel (the caller's thread only) */
    float *scratch;        /* grow-only work buffer shared by ops (one caller thread at a time) */
    size_t scratch_floats; /* its capacity */
    float *pack;           /* grow-only packing buffers of cpu_sgemm's bf16 form, apart from
                            * scratch (which its callers may hold: head_backward's G) */
    size_t pack_floats;    /* its capacity */
    int32_t simd_limit;    /* CPU_SIMD_*: 0 (any) when the backend opens */
    float *panel;          /* grow-only buffer of widen.c: a weight panel widened to fp32 */
    uint64_t panel_floats; /* its capacity */
    int32_t compute_dtype; /* GRPO_DTYPE_*: what the products compute in (gemm_nt.c,
                            * matmul_small.c, cpu_sgemm); F32 when the backend opens, BF16
                            * only where cpu_bf16_compute (cpu_set_compute_dtype) */
    int32_t bf16_amx;      /* 1: bf16 compute runs on AMX tiles (gemm_amx.c), decided by
                            * cpu_set_compute_dtype; 0: on VDPBF16PS or fp32 fmas */
    int32_t bf16_fma;      /* 1 (without AMX): the bf16 chain on fp32 fmas (gemm_nt.c's
                            * pack_fma_pairs), where VDPBF16PS runs at half the fma rate;
                            * decided by cpu_set_compute_dtype (cpu_bf16_fma) */
} cpu_ctx;

/* 32 bits read from memory written as other types (packed bf16 pairs, bf16 weight rows) */
#if defined(__GNUC__)
typedef uint32_t cpu_u32a __attribute__((may_alias));
#else
typedef uint32_t cpu_u32a;
#endif

/* Threads for a parallel region over `work` scalar operations: 1 for small work, where waking
 * the workers costs more than it saves. */
#define CPU_MIN_PARALLEL_WORK 32768
static inline int cpu_threads_for(const void *ctx, double work) {
    return work < CPU_MIN_PARALLEL_WORK ? 1 : ((const cpu_ctx *)ctx)->threads;
}

/* The ISA the per-ISA kernels use under limit (CPU_SIMD_*): CPU_SIMD_AVX512 (avx512f),
 * CPU_SIMD_AVX2 (avx2 and fma) or CPU_SIMD_BASE (SSE2 or any other target: no fma, a product
 * then a sum), the best this CPU has within the limit. One rule for every such kernel, so that
 * they compute the same chains of fma or mul+add (cpu_ctx.c). */
int32_t cpu_simd_level(int32_t limit);
/* 1 when the bf16-compute kernels can run under limit: the AVX-512 level and avx512_bf16
 * (VDPBF16PS) on this CPU; 0 otherwise, and also when the environment sets
 * GRPO_TEST_NO_AVX512BF16 (tests only: the refusal of a CPU without it, on any CPU). */
int cpu_bf16_compute(int32_t limit);
/* The same without the test switch: what the bf16 kernels check on every call (cheap). */
int cpu_bf16_isa(int32_t limit);
/* The OpenBLAS kernels to ask for (OPENBLAS_CORETYPE) where it runs `current` on a CPU of ISA
 * level simd (CPU_SIMD_*; AVX-512 with the subsets OpenBLAS's SkylakeX kernels use): NULL where
 * current is built on AVX2 or AVX-512 or the CPU lacks AVX2, else "SkylakeX" (AVX-512) or
 * "Haswell" (blas_core.c). */
const char *cpu_blas_core_for(const char *current, int32_t simd);
/* ctx's forward products compute in dtype from now on: GRPO_DTYPE_F32, or GRPO_DTYPE_BF16 (bf16
 * products, fp32 sums) when cpu_bf16_compute(ctx->simd_limit); else GRPO_ERR_UNSUPPORTED in
 * err naming the missing instruction set, ctx unchanged. */
int32_t cpu_set_compute_dtype(cpu_ctx *ctx, int32_t dtype, grpo_error *err);
/* 1 when bf16 compute runs on AMX tiles (cpu_amx_bf16_ready, unless the environment sets
 * GRPO_TEST_NO_AMX: tests of the VDPBF16PS path on an AMX CPU); says on stderr, once a
 * process, which instructions bf16 compute runs on and why not AMX. */
int cpu_bf16_amx(void);

/* Runs fn(arg, task, tid) for every task in [0, n_tasks) on the context's pool (tid < threads,
 * 0 the caller; cpu_pool.h), or inline on the caller when nt <= 1 (cpu_threads_for said the work
 * is too small) or n_tasks == 1; counted under family. Each task must compute fixed outputs in
 * a fixed order, whichever thread runs it. Call it outside parallel regions. */
void cpu_parallel(void *ctx, cpu_family family, int nt, int64_t n_tasks, cpu_pool_fn *fn,
                  void *arg);
/* A range [i0, i1) of an index space, the task form of cpu_parallel_range. */
typedef void cpu_range_fn(void *arg, int64_t i0, int64_t i1, int32_t tid);
/* cpu_parallel over [0, n) cut into ranges of at least grain indices (a few per thread, so
 * that a thread whose core is busy elsewhere leaves its share to the others): for loops whose
 * every index is computed on its own, whatever range it falls in. */
void cpu_parallel_range(void *ctx, cpu_family family, int nt, int64_t n, int64_t grain,
                        cpu_range_fn *fn, void *arg);
/* Work stealing over [0, n): the items cut into `parts` contiguous ranges, one pool task
 * each (cpu_parallel_steal). A task takes the items of its own range from the front, in
 * order (so it streams contiguous memory and knows which item it takes next, for a
 * prefetch), then takes items one at a time from the back of the other ranges: a thread
 * whose core is busy elsewhere holds up at most the one item it is computing, and nobody
 * waits for a fixed share. Which thread computes an item must never change what it
 * computes. */
typedef struct cpu_steal_range {
    _Alignas(64) _Atomic uint64_t span; /* front << 32 | back: the items [front, back) left */
} cpu_steal_range;
typedef struct cpu_steal {
    cpu_steal_range *range;
    int32_t parts;
} cpu_steal;
/* The next item for the task of range part, or -1 when none is left anywhere. *next: the item
 * this task takes after it (its own range's next, when any is left there now), else -1. */
int64_t cpu_steal_claim(cpu_steal *s, int32_t part, int64_t *next);
/* One task: claims items of s with cpu_steal_claim(s, part, ...) until it returns -1. */
typedef void cpu_steal_fn(void *arg, cpu_steal *s, int32_t part, int32_t tid);
/* cpu_parallel over the items [0, n) (n < 2^32) in ranges of work stealing, one range a
 * thread (nt of them; one range, inline, when nt <= 1). */
void cpu_parallel_steal(void *ctx, cpu_family family, int nt, int64_t n, cpu_steal_fn *fn,
                        void *arg);
/* Per-thread buffers of one parallel region: slot tid is allocated by thread tid on first use
 * (cpu_local; aborts naming op when out of memory), all freed by cpu_locals_free. */
typedef struct cpu_locals {
    void **slot;
    int32_t n;
    size_t bytes;
    const char *op;
} cpu_locals;
void cpu_locals_init(cpu_locals *l, const cpu_ctx *ctx, size_t bytes, const char *op);
void *cpu_local(cpu_locals *l, int32_t tid);
void cpu_locals_free(cpu_locals *l);
/* The context's per-family counts so far (for the bench and tests; GRPO_CPU_POOL_STATS=1 also
 * prints them when the context is freed) and its pool's counters (pool may be NULL). */
void cpu_ctx_stats_get(const cpu_ctx *ctx, cpu_ctx_stats *st, cpu_pool_counters *pool);
/* The family's name, as the stats print it. */
const char *cpu_family_name(cpu_family f);

/* ---- cpu_backend.c: the table -------------------------------------------------------- */

/* Opens the CPU backend with `threads` threads (<= 0: cpu_pool_default_threads). Returns a
 * table the caller frees with cpu_backend_close, or NULL with err set. */
grpo_ops *cpu_backend_open(int32_t threads, grpo_error *err);
void cpu_backend_close(grpo_ops *ops);

/* ---- cpu_ctx.c: context, scratch, checks, thread policy ------------------------------- */

/* A new context running ops on `threads` threads (<= 0: cpu_pool_default_threads), its pool
 * started; NULL when out of memory or threads. Sets OpenBLAS to one thread for the process (the
 * one pool is the context's, above). */
cpu_ctx *cpu_ctx_new(int32_t threads);
void cpu_ctx_free(cpu_ctx *ctx);
/* A work buffer of at least n floats owned by ctx, valid until the next call; NULL if out of
 * memory. Not thread-safe: call it outside parallel regions. */
float *cpu_scratch(cpu_ctx *ctx, size_t n);
/* The same, or (apart = 1) ctx's second buffer (pack) for a product whose caller holds the
 * scratch. */
float *cpu_work(cpu_ctx *ctx, size_t n, int apart);
/* The tile of a grid of nt tiles over C (M,N) with the smallest tm + tn (the packing every
 * tile repeats), tm a multiple of am and tn of an: *tm rows, *tn columns, *pn tiles a row. */
void cpu_tile_grid(int nt, int32_t M, int32_t N, int32_t am, int32_t an, int32_t *tm,
                   int32_t *tn, int32_t *pn);
/* Aborts with file:line and what was expected when an op is called with impossible arguments
 * (the op table has no error return; a shape bug in a model must not become silent garbage). */
void cpu_check_failed(const char *file, int line, const char *op, const char *what);
#define CPU_CHECK(cond, op, what) \
    do { if (!(cond)) cpu_check_failed(__FILE__, __LINE__, (op), (what)); } while (0)

/* ---- gemm.c ------------------------------------------------------------------------------ */
/* C (M,N) = alpha * op(A) (M,K) @ op(B) (K,N) + beta * C, row-major, op = transpose when
 * trans_* is nonzero; lda/ldb/ldc are the row strides of A, B, C as stored. Runs on the
 * context's threads; call it outside parallel regions. */
void cpu_sgemm(cpu_ctx *ctx, int trans_a, int trans_b, int32_t M, int32_t N, int32_t K,
               float alpha, const float *A, int32_t lda, const float *B, int32_t ldb, float beta,
               float *C, int32_t ldc);
/* The same on the calling thread (e.g. inside a parallel region), computing in cdtype
 * (cpu_gemm_cdtype: F32 is OpenBLAS's sgemm; bf16 is gemm_nt.c's or gemm_amx.c's product, see
 * cpu_sgemm's bf16 form below) with work of cpu_gemm_nt_work(M, K, N) floats (NULL for F32). */
void cpu_sgemm_serial(int32_t simd_limit, int32_t cdtype, int trans_a, int trans_b, int32_t M,
                      int32_t N, int32_t K, float alpha, const float *A, int32_t lda,
                      const float *B, int32_t ldb, float beta, float *C, int32_t ldc,
                      float *work);
/* cpu_sgemm computes in ctx->compute_dtype: F32 on OpenBLAS (the backward and LoRA products as
 * they always were); BF16 (train.compute_dtype = bf16: the policy's backward) as the NT product
 * of gemm_nt.c / gemm_amx.c with x = op(A) and w = op(B)^T read in place (cpu_nt's transposed
 * operands), rounded to bf16 as they are packed: each output one chain over k in order from 0
 * (beta = 0; the output times alpha after it) or from C's value (beta = 1, alpha = 1: C is
 * accumulated into); other betas are refused. */

/* ---- gemm_amx.c: bf16 compute on AMX tiles --------------------------------------------------- */
/* cdtype of cpu_gemm_nt_serial for bf16 on AMX tiles (not a GRPO_DTYPE_*) */
#define CPU_CDTYPE_AMX_BF16 0x7f10
/* 1 when this CPU has amx_bf16 and amx_tile and the OS granted the tile data (asked once a
 * process); else 0, and cpu_amx_bf16_why() says why. */
int cpu_amx_bf16_ready(void);
const char *cpu_amx_bf16_why(void);
/* cdtype of cpu_gemm_nt_serial for bf16 on fp32 fmas: gemm_nt.c's bf16 chain, bit for bit
 * (the pairs' products are exact in fp32, denormals flushed as VDPBF16PS flushes them), on the
 * fp32 tile (pack_fma_pairs) */
#define CPU_CDTYPE_FMA_BF16 0x7f11
/* 1 when bf16 compute without AMX should run on fp32 fmas: on Intel cores, whose VDPBF16PS runs
 * at half the rate of their fmas (86 against 175 GFLOP/s on a Xeon of family 6, model 207).
 * GRPO_TEST_BF16_PATH = dot or fma in the environment (tests) picks either on any CPU. */
int cpu_bf16_fma(void);
/* The bf16 chain on fp32 fmas flushes denormals as VDPBF16PS does: MXCSR's FTZ (bit 15) and DAZ
 * (bit 6) set while its products run (on: whether they are that chain). cpu_flush_begin returns
 * the MXCSR that cpu_flush_end puts back; both do nothing when off. */
static inline unsigned cpu_flush_begin(int on) {
#if defined(__GNUC__) && defined(__x86_64__)
    if (!on) return 0;
    const unsigned mxcsr = __builtin_ia32_stmxcsr();
    __builtin_ia32_ldmxcsr(mxcsr | 0x8040u);
    return mxcsr;
#else
    (void)on;
    return 0;
#endif
}
static inline void cpu_flush_end(unsigned mxcsr, int on) {
#if defined(__GNUC__) && defined(__x86_64__)
    if (on) __builtin_ia32_ldmxcsr(mxcsr);
#else
    (void)mxcsr, (void)on;
#endif
}
/* What ctx's forward products compute in, for cpu_gemm_nt_serial: its compute dtype, or
 * CPU_CDTYPE_AMX_BF16 when bf16 runs on AMX tiles, or CPU_CDTYPE_FMA_BF16 on fp32 fmas. */
static inline int32_t cpu_gemm_cdtype(const cpu_ctx *ctx) {
    if (ctx->compute_dtype != GRPO_DTYPE_BF16) return ctx->compute_dtype;
    return ctx->bf16_amx ? CPU_CDTYPE_AMX_BF16
                         : ctx->bf16_fma ? CPU_CDTYPE_FMA_BF16 : GRPO_DTYPE_BF16;
}
/* One product of gemm_nt.c or gemm_amx.c:
 *   out (M,N) = scale * (x (M,K) @ w (N,K)^T + bias (N, or NULL: 0))        (acc = 0)
 *   out (M,N) = out + x (M,K) @ w (N,K)^T               (acc = 1: scale 1 and no bias)
 * out's rows ldo floats apart. x is fp32; w of wtype (GRPO_DTYPE_*). Each operand is stored by
 * rows (row r's K terms contiguous, rows ld apart) or transposed (xt, wt: (K, rows), element
 * (r,k) at [k * ld + r]; fp32, bf16 compute only: the backward's dX = dY W and dW = dY^T X). */
typedef struct cpu_nt {
    float *out;
    int32_t ldo;
    const float *x;
    int32_t ldx, xt;
    const void *w;
    int32_t wtype, ldw, wt;
    const float *bias;
    float scale;
    int32_t M, N, K;
    int acc;
} cpu_nt;
/* cpu_gemm_nt's product on AMX tiles (bf16 products, fp32 sums in k-tiles of 32 terms in
 * order: one chain per output whatever M, the row's place or the threads; gemm_amx.c); only
 * after cpu_amx_bf16_ready(). The serial form takes cpu_amx_work floats of work. */
void cpu_amx_gemm(cpu_ctx *ctx, const cpu_nt *p, int apart);
size_t cpu_amx_work(int32_t N, int32_t IC, int32_t OC);
void cpu_amx_gemm_serial(const cpu_nt *p, float *work);

/* ---- gemm_nt.c: the batch-invariant forward product ---------------------------------------- */
/* out (N,OC) = scale * (inp (N,IC) @ w (OC,IC)^T + bias (OC, or NULL: 0)), w of wtype
 * (GRPO_DTYPE_*), out's rows ldo floats apart. Every output is the chain acc = x[i] * w[i] + acc
 * over i = 0..IC-1 from 0 (one fma a term, or a product then a sum on CPU_SIMD_BASE), then
 * scale * (acc + bias): the sum cpu_matmul_small_forward makes, bit for bit, whatever N, the
 * thread count or the output's place in the batch (ctx->compute_dtype = BF16: the chain over
 * pairs of bf16 terms, gemm_nt.c). On ctx's threads, its scratch as packing buffers; call it
 * outside parallel regions. */
void cpu_gemm_nt(cpu_ctx *ctx, float *out, int32_t ldo, const float *inp, const void *w,
                 int32_t wtype, const float *bias, float scale, int32_t N, int32_t IC,
                 int32_t OC);
/* Floats of the work buffer cpu_gemm_nt_serial needs for these sizes. */
size_t cpu_gemm_nt_work(int32_t N, int32_t IC, int32_t OC);
/* The same on the calling thread (e.g. inside a parallel region) with the ISA rule of
 * simd_limit, computing in cdtype (ctx->compute_dtype's values), and work of cpu_gemm_nt_work
 * floats. */
void cpu_gemm_nt_serial(int32_t simd_limit, int32_t cdtype, float *out, int32_t ldo,
                        const float *inp, const void *w, int32_t wtype, const float *bias,
                        float scale, int32_t N, int32_t IC, int32_t OC, float *work);
/* The product p (cpu_nt) on ctx's threads (in ctx's compute dtype; its packing buffers from
 * cpu_work(ctx, ., apart)), and on the calling thread (in cdtype, work of
 * cpu_gemm_nt_work(p->M, p->K, p->N) floats): what the two above and cpu_sgemm's bf16 form
 * run. Transposed operands and acc only with bf16 compute. */
void cpu_gemm_nt_run(cpu_ctx *ctx, const cpu_nt *p, int apart);
void cpu_gemm_nt_run_serial(int32_t simd_limit, int32_t cdtype, const cpu_nt *p, float *work);

/* ---- attend.c: the batch-invariant attention core (attention.c's forward and decode) ---- */
/* One key sequence: np prefix keys/values (row stride ks, pk/pv; NULL when np = 0), then the
 * row's own from k/v; n keys in all; km (n) their mask, 1 = real.
 * Paged (pt != NULL, np = 0: decode against a paged cache): own key j is slot off + j of the
 * row, at k + pt[(off + j) / pg] * pstride + ((off + j) % pg) * ks (values the same from v). */
typedef struct cpu_att_keys {
    const float *pk, *pv, *k, *v;
    int32_t np, ks;
    const int32_t *km;
    int32_t n;
    const int32_t *pt; /* the row's page ids by block, or NULL: k/v are contiguous rows */
    int32_t pg, off;   /* positions per page; the slot of key 0 */
    int64_t pstride;   /* floats from one page to the next */
    int32_t pgs;       /* log2(pg) when pg is a power of two, else -1 */
    void (*tick)(void *arg); /* or NULL: called after each tile of keys of the dots pass */
    void *tick_arg;          /* (decode: the next group's cache read in, a slice a tile) */
} cpu_att_keys;
#define CPU_ATT_REP_MAX 64 /* the most query heads one decode call puts on a key/value head */
/* The work floats cpu_attend needs for nq queries against nkeys keys of HD. */
uint64_t cpu_attend_scratch(int32_t nq, int32_t nkeys, int32_t HD);
/* out row i (HD, row stride os) and lse[i] (lse may be NULL) of query i of q (nq rows of HD,
 * stride qs) against keys 0 .. nvalid[i]-1 of K (nvalid[i] <= K->n; 0: out = 0, lse = 0), in
 * the order attend.c fixes; work: cpu_attend_scratch(nq, K->n, HD) floats. */
void cpu_attend(float *out, int32_t os, float *lse, const float *q, int32_t qs,
                const cpu_att_keys *K, const int32_t *nvalid, int32_t nq, int32_t HD,
                float *work);

/* ---- cpu_memory.c -------------------------------------------------------------------------- */

/* A block of at least `bytes` for free(): 64-byte aligned, and from 2 MiB up on a 2 MiB
 * boundary with its whole 2 MiB pages advised as transparent huge pages; NULL when out of
 * memory. Not zeroed. */
void *cpu_block(size_t bytes);

/* ---- the ops: cpu_alloc ... cpu_sample_rows, one per entry of grpo/ops_list.h ------------ */
GRPO_BACKEND_DECLARE_OPS(cpu)

/* ---- matmul_small.c ---------------------------------------------------------------------- */
/* Rows up to which matmul_forward takes the small-M path instead of a GEMM (measured at the
 * MiniMind2-small shapes, 1 thread, weights from memory: 1.5-2x faster than OpenBLAS at 16-32
 * rows, ~25 % at 48, even at 64, slower at 96). */
#define CPU_SMALL_M 48
/* out (M,OC) = inp (M,IC) @ w (OC,IC)^T + bias (OC, or NULL), 1 <= M <= CPU_SMALL_M, reading
 * each weight once for all M rows (decode). Uses ctx's scratch; call it outside parallel
 * regions. The result does not depend on the thread count. */
void cpu_matmul_small_forward(cpu_ctx *ctx, float *out, const float *inp, const float *w,
                              const float *bias, int32_t M, int32_t IC, int32_t OC);
/* The same for a weight held as wtype (GRPO_DTYPE_*, weights.c): each thread widens its block
 * of weight rows into a cache-sized buffer before the block kernel (same sums, same order). */
void cpu_matmul_small_forward_w(cpu_ctx *ctx, float *out, const float *inp, const void *w,
                                int32_t wtype, const float *bias, int32_t M, int32_t IC,
                                int32_t OC);

/* ---- widen.c: weights of another dtype (GRPO_DTYPE_*, ops_list.h 1.5) read as fp32 ------ */
/* dst (n) = src (n of dtype) widened to fp32 (on the context's threads; ctx NULL: on the
 * calling thread, e.g. inside a parallel region). */
void cpu_widen_rows(void *ctx, float *dst, const void *src, int32_t dtype, uint64_t n);
/* rows [row0, row0+rows) of a (?, cols) weight of dtype as fp32: w's own memory when fp32, else
 * widened into buf (rows * cols floats) on ctx's threads (ctx NULL: the calling thread). */
const float *cpu_weight_rows(void *ctx, const void *w, int32_t dtype, uint64_t row0,
                             uint64_t rows, uint64_t cols, float *buf);
/* the context's grow-only buffer of at least floats floats (a widened weight panel), apart from
 * cpu_scratch; outside parallel regions. */
float *cpu_weight_panel(cpu_ctx *ctx, uint64_t floats);

#endif
