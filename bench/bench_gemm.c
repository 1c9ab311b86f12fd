/*
 * bench_gemm.c — the CPU backend's batch-invariant forward product (gemm_nt.c) against OpenBLAS
 * sgemm (through cpu_sgemm, the backend's tiled OpenBLAS, i.e. the forward as it was before)
 * at the MiniMind2-small shapes of bench/bench_grpo_step.py. Not a test: it prints GFLOP/s.
 *
 *   bench_gemm [N [threads...]]   (defaults: N = 3008 = B 2 x G 8 x (~60 prompt + 128 new)
 *                                  rows of one GRPO step; threads 1 2)
 *   BENCH_CLOCK=cpu                  time the calling thread's CPU time (see now())
 *   BENCH_GEMM_SIMD=avx2|base        limit gemm_nt's ISA (cpu_ctx.simd_limit) to time the
 *                                  other register tiles (OpenBLAS keeps its own)
 *   BENCH_GEMM_BF16=1                also time gemm_nt computing in bf16 (cpu_ctx.compute_dtype:
 *                                  VDPBF16PS, fp32 sums; fp32 inputs and weights rounded as
 *                                  packed) and print its GFLOP/s and its speed-up over fp32
 *                                  (on Intel cores the chain on fp32 fmas, as grpo runs it
 *                                  there: cpu_bf16_fma, with VDPBF16PS's rate beside it);
 *                                  where the CPU has AMX (cpu_amx_bf16_ready) the same on AMX
 *                                  tiles (gemm_amx.c), with its speed-up over fp32 and VDPBF16PS;
 *                                  first the core's peak rate of fp32 fmas and of VDPBF16PS
 *
 * Shapes (hidden C 512, intermediate I 1408, vocab V 6400, 2 kv heads of 64):
 *   q/o (N,512)x(512,512)^T, k/v (N,512)x(128,512)^T, gate/up (N,512)x(1408,512)^T,
 *   down (N,1408)x(512,1408)^T, and the vocabulary: "head" (N,512)x(6400,512)^T as one product
 *   (no path of grpo runs it so: its output of N x 6400 floats leaves the caches) and "headblk",
 *   the head's own block, 256 rows x a 512-entry vocab chunk on one thread (cpu_gemm_nt_serial,
 *   as head.c calls it once per chunk; the OpenBLAS side is the cblas_sgemm head.c ran before),
 *   and "dec16", 16 decode rows of gate/up through matmul_small.c.
 * Each figure is the best of >= 3 runs and >= 0.3 s; the two sides alternate shape by shape in
 * the same run, so the ratio holds under the same load (print the load average with it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu_backend.h"
#include "kernels.h"

/* wall time, or with BENCH_CLOCK=cpu the calling thread's CPU time (1 thread on a loaded
 * machine: about the time alone; with more threads it counts the caller's share only) */
static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now(void) {
    struct timespec ts;
    clock_gettime(bench_clock, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float *rnd(size_t n) {
    float *p = malloc(n * sizeof(float));
    if (!p) {
        fprintf(stderr, "bench_gemm: out of memory (%zu floats)\n", n);
        exit(1);
    }
    uint32_t s = 12345u + (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (float)(s >> 8) / 8388608.0f - 1.0f;
    }
    return p;
}

typedef struct job {
    cpu_ctx *ctx;
    int side; /* 0 gemm_nt, 1 OpenBLAS, 2 gemm_nt serial with a work buffer */
    int32_t cdtype; /* gemm_nt's compute dtype (GRPO_DTYPE_*) */
    int32_t amx;    /* bf16 on AMX tiles (cpu_ctx.bf16_amx) */
    int32_t fma;    /* bf16 on fp32 fmas (cpu_ctx.bf16_fma) */
    int32_t N, IC, OC;
    float *x, *w, *b, *y, *work;
} job;

static void run(job *j) {
    j->ctx->compute_dtype = j->cdtype;
    j->ctx->bf16_amx = j->amx;
    j->ctx->bf16_fma = j->fma;
    if (j->side == 0 && j->N <= CPU_SMALL_M) /* decode rows: matmul_small.c (AMX: gemm_amx.c) */
        cpu_matmul_small_forward_w(j->ctx, j->y, j->x, j->w, GRPO_DTYPE_F32, j->b, j->N, j->IC,
                                   j->OC);
    else if (j->side == 0)
        cpu_gemm_nt(j->ctx, j->y, j->OC, j->x, j->w, GRPO_DTYPE_F32, j->b, 1.0f, j->N, j->IC,
                    j->OC);
    else if (j->side == 1)
        cpu_sgemm(j->ctx, 0, 1, j->N, j->OC, j->IC, 1.0f, j->x, j->IC, j->w, j->IC, 0.0f, j->y,
                  j->OC);
    else
        cpu_gemm_nt_serial(j->ctx->simd_limit, cpu_gemm_cdtype(j->ctx), j->y, j->OC, j->x, j->w,
                           GRPO_DTYPE_F32, NULL, 1.0f, j->N, j->IC, j->OC, j->work);
    j->ctx->compute_dtype = GRPO_DTYPE_F32;
    j->ctx->bf16_amx = j->ctx->bf16_fma = 0;
}

/* BENCH_GEMM_BF16 set (and not 0): the bf16-compute side too (where the CPU has it) */
static int bench_bf16(const cpu_ctx *ctx) {
    const char *e = getenv("BENCH_GEMM_BF16");
    return e && *e && strcmp(e, "0") != 0 && cpu_bf16_compute(ctx->simd_limit);
}

/* best seconds of one run */
static double best_time(job *j) {
    run(j);
    double best = 1e30, start = now();
    for (int it = 0; it < 3 || now() - start < 0.3; it++) {
        double t0 = now();
        run(j);
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

/* prints one line: the shape, both sides' GFLOP/s and their ratio */
static void bench_shape(cpu_ctx *ctx, const char *name, int32_t N, int32_t IC, int32_t OC,
                        int serial) {
    job j = {ctx, 0, GRPO_DTYPE_F32, 0, 0, N, IC, OC, rnd((size_t)N * IC), rnd((size_t)OC * IC),
             NULL, rnd((size_t)N * OC), NULL};
    if (serial) {
        j.work = malloc(cpu_gemm_nt_work(N, IC, OC) * sizeof(float));
        if (!j.work) exit(1);
        j.side = 2;
    }
    double flops = 2.0 * N * IC * OC, t_nt = best_time(&j), t_bf = 0, t_dot = 0, t_amx = 0;
    if (bench_bf16(ctx)) {
        j.cdtype = GRPO_DTYPE_BF16;
        t_bf = t_dot = best_time(&j);
        if (cpu_bf16_fma()) { /* grpo's bf16 without AMX here: the chain on fp32 fmas */
            j.fma = 1;
            t_bf = best_time(&j);
            j.fma = 0;
        }
        if (cpu_amx_bf16_ready()) {
            j.amx = 1;
            t_amx = best_time(&j);
            j.amx = 0;
        }
        j.cdtype = GRPO_DTYPE_F32;
    }
    int side = j.side;
    j.side = 1;
    double t_blas = best_time(&j);
    j.side = side;
    printf("%-8s N %5d IC %5d OC %5d threads %d: gemm_nt %6.1f GFLOP/s, OpenBLAS %6.1f GFLOP/s, "
           "gemm_nt/OpenBLAS %.3f",
           name, N, IC, OC, ctx->threads, flops / t_nt * 1e-9, flops / t_blas * 1e-9,
           t_blas / t_nt);
    if (t_bf > 0)
        printf(", gemm_nt bf16 %6.1f GFLOP/s, bf16/fp32 %.3f", flops / t_bf * 1e-9, t_nt / t_bf);
    if (t_bf > 0 && t_dot != t_bf)
        printf(" (on fp32 fmas; on VDPBF16PS %6.1f GFLOP/s)", flops / t_dot * 1e-9);
    if (t_amx > 0)
        printf(", AMX %6.1f GFLOP/s, amx/fp32 %.2f, amx/vdpbf16 %.2f", flops / t_amx * 1e-9,
               t_nt / t_amx, t_bf / t_amx);
    printf("\n");
    fflush(stdout);
    free(j.x), free(j.w), free(j.y), free(j.work);
}

/* CPU_SIMD_* from BENCH_GEMM_SIMD */
static int32_t simd_limit(void) {
    const char *e = getenv("BENCH_GEMM_SIMD");
    if (!e || !*e) return CPU_SIMD_ANY;
    if (!strcmp(e, "avx2")) return CPU_SIMD_AVX2;
    if (!strcmp(e, "base")) return CPU_SIMD_BASE;
    fprintf(stderr, "bench_gemm: BENCH_GEMM_SIMD must be avx2 or base, not %s\n", e);
    exit(1);
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#include <immintrin.h>
#define PEAK_CHAINS 16 /* independent accumulators: past every latency, so the rate is the ports' */
#define PEAK_STEPS 20000000L

/* GFLOP/s of PEAK_CHAINS chains of VDPBF16PS (64 FLOPs each: 16 lanes x 2 products and sums) */
__attribute__((target("avx512f,avx512bf16"), noinline)) static double peak_dot(void) {
    __m512 a[PEAK_CHAINS];
    for (int i = 0; i < PEAK_CHAINS; i++) a[i] = _mm512_setzero_ps();
    __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), w = x;
    double t0 = now();
    for (long k = 0; k < PEAK_STEPS; k++) {
#pragma GCC unroll 16
        for (int i = 0; i < PEAK_CHAINS; i++) a[i] = _mm512_dpbf16_ps(a[i], x, w);
        __asm__ volatile("" : "+v"(x)); /* a new x each step: the loop is not folded */
    }
    double t = now() - t0;
    __m512 s = a[0];
    for (int i = 1; i < PEAK_CHAINS; i++) s = _mm512_add_ps(s, a[i]);
    volatile float sink = _mm512_reduce_add_ps(s);
    (void)sink;
    return PEAK_STEPS * PEAK_CHAINS * 64.0 / t * 1e-9;
}

/* the same with fp32 fmas (32 FLOPs each) */
__attribute__((target("avx512f"), noinline)) static double peak_fma(void) {
    __m512 a[PEAK_CHAINS];
    for (int i = 0; i < PEAK_CHAINS; i++) a[i] = _mm512_setzero_ps();
    __m512 x = _mm512_set1_ps(1e-9f), w = _mm512_set1_ps(1.0f);
    double t0 = now();
    for (long k = 0; k < PEAK_STEPS; k++) {
#pragma GCC unroll 16
        for (int i = 0; i < PEAK_CHAINS; i++) a[i] = _mm512_fmadd_ps(x, w, a[i]);
        __asm__ volatile("" : "+v"(x));
    }
    double t = now() - t0;
    __m512 s = a[0];
    for (int i = 1; i < PEAK_CHAINS; i++) s = _mm512_add_ps(s, a[i]);
    volatile float sink = _mm512_reduce_add_ps(s);
    (void)sink;
    return PEAK_STEPS * PEAK_CHAINS * 32.0 / t * 1e-9;
}

/* BENCH_GEMM_BF16 on a CPU with avx512_bf16: the core's peak rate of each instruction, which
 * decides where grpo runs the bf16 chain without AMX (cpu_bf16_fma) */
static void print_peaks(void) {
    printf("peak, 1 thread, %d chains: fp32 fma %.1f GFLOP/s, VDPBF16PS %.1f GFLOP/s\n",
           PEAK_CHAINS, peak_fma(), peak_dot());
}
#else
static void print_peaks(void) {}
#endif

int main(int argc, char **argv) {
    grpo_cpu_blas_core_pick(); /* OpenBLAS's kernels for this CPU (blas_core.c) */
    int32_t N = argc > 1 ? atoi(argv[1]) : 3008;
    const char *clk = getenv("BENCH_CLOCK");
    if (clk && !strcmp(clk, "cpu")) bench_clock = CLOCK_THREAD_CPUTIME_ID;
    int threads[8] = {1, 2}, nth = 2;
    if (argc > 2) {
        nth = 0;
        for (int a = 2; a < argc && nth < 8; a++) threads[nth++] = atoi(argv[a]);
    }
    enum { C = 512, I = 1408, V = 6400, KV = 128 };
    double la[3] = {0};
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = -1;
        fclose(f);
    }
    printf("load average %.2f %.2f %.2f, gemm_nt ISA %d (CPU_SIMD_*: 1 base, 2 avx2, 3 avx512)\n",
           la[0], la[1], la[2], cpu_simd_level(simd_limit()));
    cpu_ctx *probe = cpu_ctx_new(1);
    if (probe && bench_bf16(probe)) print_peaks();
    cpu_ctx_free(probe);
    for (int t = 0; t < nth; t++) {
        cpu_ctx *ctx = cpu_ctx_new(threads[t]);
        if (!ctx) return 1;
        ctx->simd_limit = simd_limit();
        bench_shape(ctx, "q/o", N, C, C, 0);
        bench_shape(ctx, "k/v", N, C, KV, 0);
        bench_shape(ctx, "gate/up", N, C, I, 0);
        bench_shape(ctx, "down", N, I, C, 0);
        bench_shape(ctx, "head", N, C, V, 0);
        bench_shape(ctx, "dec16", 16, C, I, 0); /* decode rows: matmul_small's shape */
        if (t == 0) { /* the head's block, serial, as head.c runs it per thread */
            cpu_ctx *one = cpu_ctx_new(1);
            one->simd_limit = ctx->simd_limit;
            bench_shape(one, "headblk", 256, C, 512, 1);
            cpu_ctx_free(one);
        }
        cpu_ctx_free(ctx);
    }
    return 0;
}
