/*
 * cpu_backend.h — the CPU backend's private interface: its context and one function per op of
 * grpo_ops (sdk/include/grpo/ops.h), each defined in the file named for its family.
 *
 * Every op takes the context (cpu_ctx *) as a void * first argument, as the table demands.
 * Threading: one pool, OpenMP's, of ctx->threads threads. OpenBLAS is set to one thread when the
 * backend opens; GEMMs are parallelised by cpu_sgemm (gemm.c), which gives each OpenMP thread a
 * tile, or are called per thread inside an op's own parallel region (attention, head). Two pools
 * taking turns on the same cores (OpenBLAS's pthreads spin after each call) would oversubscribe.
 *
 * Shapes use the letters of ops.h: N tokens, B rows, T time, C channels, I intermediate, V vocab,
 * NH query heads, NKV key/value heads, HD head dim, R decode rows, S cache length.
 */
#ifndef GRPO_CPU_BACKEND_H
#define GRPO_CPU_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "grpo/ops.h"
#include "grpo/plugin.h"

/* The widest vector ISA a kernel with per-ISA code (matmul_small.c) may use; the CPU's best
 * when CPU_SIMD_ANY. Tests lower it to run every code path on one machine. */
enum { CPU_SIMD_ANY = 0, CPU_SIMD_BASE = 1, CPU_SIMD_AVX2 = 2 };

typedef struct cpu_ctx {
    int32_t threads;       /* OpenMP and OpenBLAS threads used by every op (>= 1) */
    float *scratch;        /* grow-only work buffer shared by ops (one caller thread at a time) */
    size_t scratch_floats; /* its capacity */
    int32_t simd_limit;    /* CPU_SIMD_*: 0 (any) when the backend opens */
    float *panel;          /* grow-only buffer of weights.c: a weight panel widened to fp32 */
    uint64_t panel_floats; /* its capacity */
} cpu_ctx;

/* OpenMP threads for a parallel region over `work` scalar operations: 1 for small work, where
 * waking the team costs more than it saves. */
#define CPU_MIN_PARALLEL_WORK 32768
static inline int cpu_threads_for(const void *ctx, double work) {
    return work < CPU_MIN_PARALLEL_WORK ? 1 : ((const cpu_ctx *)ctx)->threads;
}

/* ---- cpu_backend.c: context, memory, threads --------------------------------------------- */

/* Opens the CPU backend with `threads` threads (<= 0: OpenMP's default). Returns a table the
 * caller frees with cpu_backend_close, or NULL with err set. */
grpo_ops *cpu_backend_open(int32_t threads, grpo_error *err);
void cpu_backend_close(grpo_ops *ops);

/* A work buffer of at least n floats owned by ctx, valid until the next call; NULL if out of
 * memory. Not thread-safe: call it outside parallel regions. */
float *cpu_scratch(cpu_ctx *ctx, size_t n);
/* C (M,N) = alpha * op(A) (M,K) @ op(B) (K,N) + beta * C, row-major, op = transpose when
 * trans_* is nonzero; lda/ldb/ldc are the row strides of A, B, C as stored. Runs on the
 * context's threads; call it outside parallel regions. */
void cpu_sgemm(cpu_ctx *ctx, int trans_a, int trans_b, int32_t M, int32_t N, int32_t K,
               float alpha, const float *A, int32_t lda, const float *B, int32_t ldb, float beta,
               float *C, int32_t ldc);
/* Aborts with file:line and what was expected when an op is called with impossible arguments
 * (the op table has no error return; a shape bug in a model must not become silent garbage). */
void cpu_check_failed(const char *file, int line, const char *op, const char *what);
#define CPU_CHECK(cond, op, what) \
    do { if (!(cond)) cpu_check_failed(__FILE__, __LINE__, (op), (what)); } while (0)

void *cpu_alloc(void *ctx, uint64_t bytes);
void cpu_free(void *ctx, void *ptr);
void cpu_upload(void *ctx, void *dst, const void *src, uint64_t bytes);
void cpu_download(void *ctx, void *dst, const void *src, uint64_t bytes);
void cpu_copy(void *ctx, void *dst, const void *src, uint64_t bytes);
void cpu_zero(void *ctx, void *dst, uint64_t bytes);
void cpu_sync(void *ctx);

/* ---- embedding.c ------------------------------------------------------------------------- */
void cpu_embedding_forward(void *ctx, float *out, const int32_t *ids, const float *wte, int32_t N,
                           int32_t C);
void cpu_embedding_backward(void *ctx, float *dwte, const float *dout, const int32_t *ids,
                            int32_t N, int32_t C);

/* ---- matmul.c ---------------------------------------------------------------------------- */
void cpu_matmul_forward(void *ctx, float *out, const float *inp, const float *w,
                        const float *bias, int32_t N, int32_t IC, int32_t OC);
void cpu_matmul_backward(void *ctx, float *dinp, float *dw, float *dbias, const float *dout,
                         const float *inp, const float *w, int32_t N, int32_t IC, int32_t OC);

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

/* ---- rmsnorm.c --------------------------------------------------------------------------- */
void cpu_rmsnorm_forward(void *ctx, float *out, float *rstd, const float *inp, const float *w,
                         int32_t N, int32_t C, float eps);
void cpu_rmsnorm_backward(void *ctx, float *dinp, float *dw, const float *dout, const float *inp,
                          const float *w, const float *rstd, int32_t N, int32_t C);

/* ---- rope.c ------------------------------------------------------------------------------ */
void cpu_rope_forward(void *ctx, float *out, const float *inp, const int32_t *pos, int32_t N,
                      int32_t NH, int32_t HD, float theta);
void cpu_rope_backward(void *ctx, float *dinp, const float *dout, const int32_t *pos, int32_t N,
                       int32_t NH, int32_t HD, float theta);

/* ---- attention.c ------------------------------------------------------------------------- */
void cpu_attention_forward(void *ctx, float *out, float *lse, const float *q, const float *k,
                           const float *v, const int32_t *mask, int32_t B, int32_t T, int32_t NH,
                           int32_t NKV, int32_t HD);
void cpu_attention_backward(void *ctx, float *dq, float *dk, float *dv, const float *dout,
                            const float *out, const float *lse, const float *q, const float *k,
                            const float *v, const int32_t *mask, int32_t B, int32_t T,
                            int32_t NH, int32_t NKV, int32_t HD);
void cpu_prefix_attention_forward(void *ctx, float *out, float *lse, const float *q,
                                  const float *k, const float *v, const int32_t *mask,
                                  const float *kp, const float *vp, const int32_t *pmask,
                                  const int32_t *prefix_of, int32_t B, int32_t T, int32_t BP,
                                  int32_t P, int32_t NH, int32_t NKV, int32_t HD);
void cpu_prefix_attention_backward(void *ctx, float *dq, float *dk, float *dv, float *dkp,
                                   float *dvp, const float *dout, const float *out,
                                   const float *lse, const float *q, const float *k,
                                   const float *v, const int32_t *mask, const float *kp,
                                   const float *vp, const int32_t *pmask,
                                   const int32_t *prefix_of, int32_t B, int32_t T, int32_t BP,
                                   int32_t P, int32_t NH, int32_t NKV, int32_t HD);
void cpu_attention_decode(void *ctx, float *out, const float *q, const float *kcache,
                          const float *vcache, const int32_t *cache_mask, const int32_t *len,
                          int32_t R, int32_t S, int32_t NH, int32_t NKV, int32_t HD);

/* ---- swiglu.c ---------------------------------------------------------------------------- */
void cpu_swiglu_forward(void *ctx, float *out, const float *gate, const float *up, int32_t N,
                        int32_t I);
void cpu_swiglu_backward(void *ctx, float *dgate, float *dup, const float *dout,
                         const float *gate, const float *up, int32_t N, int32_t I);

/* ---- residual.c -------------------------------------------------------------------------- */
void cpu_residual_forward(void *ctx, float *out, const float *a, const float *b, uint64_t n);
void cpu_accumulate(void *ctx, float *y, const float *x, uint64_t n);
void cpu_scale(void *ctx, float *x, float s, uint64_t n);
double cpu_sumsq(void *ctx, const float *x, uint64_t n);

/* ---- head.c ------------------------------------------------------------------------------ */
void cpu_head_forward(void *ctx, float *logp, float *lse, float *entropy, const float *hidden,
                      const float *w, const int32_t *targets, int32_t N, int32_t C, int32_t V,
                      float scale);
void cpu_head_backward(void *ctx, float *dhidden, float *dw, const float *dlogp,
                       const float *hidden, const float *w, const int32_t *targets,
                       const float *lse, int32_t N, int32_t C, int32_t V, float scale);
void cpu_head_backward_entropy(void *ctx, float *dhidden, float *dw, const float *dlogp,
                               const float *dentropy, const float *entropy, const float *hidden,
                               const float *w, const int32_t *targets, const float *lse,
                               int32_t N, int32_t C, int32_t V, float scale);

/* ---- weights.c: weights of another dtype (GRPO_DTYPE_*), ops.h 1.5 ------------------------ */
/* dst (n) = src (n of dtype) widened to fp32 (on the context's threads; ctx NULL: on the
 * calling thread, e.g. inside a parallel region). */
void cpu_widen_rows(void *ctx, float *dst, const void *src, int32_t dtype, uint64_t n);
/* rows [row0, row0+rows) of a (?, cols) weight of dtype as fp32: w's own memory when fp32, else
 * widened into buf (rows * cols floats) on ctx's threads (ctx NULL: the calling thread). */
const float *cpu_weight_rows(void *ctx, const void *w, int32_t dtype, uint64_t row0,
                             uint64_t rows, uint64_t cols, float *buf);
/* weights.c's grow-only buffer of at least floats floats (a widened weight panel), apart from
 * cpu_scratch; outside parallel regions. */
float *cpu_weight_panel(cpu_ctx *ctx, uint64_t floats);
void cpu_convert(void *ctx, void *dst, int32_t dst_type, const void *src, int32_t src_type,
                 uint64_t n);
void cpu_matmul_forward_w(void *ctx, float *out, const float *inp, const void *w, int32_t wtype,
                          const float *bias, int32_t N, int32_t IC, int32_t OC);
void cpu_matmul_backward_w(void *ctx, float *dinp, const float *dout, const void *w,
                           int32_t wtype, int32_t N, int32_t IC, int32_t OC);
void cpu_embedding_forward_w(void *ctx, float *out, const int32_t *ids, const void *wte,
                             int32_t wtype, int32_t N, int32_t C);
/* head.c's ops for a head of wtype */
void cpu_head_forward_w(void *ctx, float *logp, float *lse, float *entropy, const float *hidden,
                        const void *w, int32_t wtype, const int32_t *targets, int32_t N, int32_t C,
                        int32_t V, float scale);
void cpu_head_backward_w(void *ctx, float *dhidden, const float *dlogp, const float *dentropy,
                         const float *entropy, const float *hidden, const void *w, int32_t wtype,
                         const int32_t *targets, const float *lse, int32_t N, int32_t C, int32_t V,
                         float scale);

/* ---- dropout.c --------------------------------------------------------------------------- */
void cpu_dropout(void *ctx, float *out, const float *inp, uint64_t n, float p, uint64_t seed);

/* ---- adamw.c ----------------------------------------------------------------------------- */
void cpu_adamw(void *ctx, float *param, const float *grad, float *m, float *v, uint64_t n,
               double lr, double beta1, double beta2, double eps, double weight_decay, int32_t t);

/* ---- rows.c: gather / weighted scatter-add of rows (MoE routing) ------------------------- */
void cpu_gather_rows(void *ctx, float *out, const float *inp, const int32_t *idx, int32_t M,
                     int32_t C);
void cpu_scatter_add_rows(void *ctx, float *out, const float *inp, const int32_t *idx,
                          const float *w, int32_t M, int32_t C);
void cpu_scatter_add_rows_backward(void *ctx, float *dinp, float *dw, const float *dout,
                                   const float *inp, const int32_t *idx, const float *w,
                                   int32_t M, int32_t C);

#endif
