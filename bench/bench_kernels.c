/*
 * bench_kernels.c — micro-benchmark of the CPU backend on the MiniMind2-small shapes
 * (hidden C 512, intermediate I 1408, vocab V 6400, 8 query heads, 2 kv heads, head dim 64).
 * Not a test: it prints measured numbers for this machine.
 *
 *   bench_kernels [B T threads [filter]]   (defaults 4 256 0; threads 0 = OpenMP's default;
 *                                          filter: run only the ops whose name contains it)
 *   BENCH_CLOCK=cpu                        time CPU time instead of wall time (see now())
 *
 * 1. Raw cblas_sgemm GFLOP/s for every GEMM of one transformer layer and of the head, in the
 *    three forms the backend uses (forward NT, dinp NN, dw TN) with N = B*T tokens.
 * 2. Every op through the backend table, fwd and bwd (and, not part of section 3,
 *    attention_decode of 64 rows against a cache of T positions (also paged:
 *    attention_decode_paged; and with odd rows padded so that key tiles span two pages) and the
 *    head with half of the rows prompt tokens, which it skips), as time and as GFLOP/s of its
 *    useful arithmetic (causal attention counts half of the T*T scores; the head counts 2NVC forward
 *    and 4NVC backward, not the recomputation), next to the sgemm rate of section 1.
 * 3. The whole model's fwd+bwd (L = 8 layers, one head) in total, as a fraction of the sgemm
 *    rate: the figure of merit of the backend (the target is >= 50%).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.h"
#include "cpu/blas.h"

enum { C = 512, I = 1408, V = 6400, NH = 8, NKV = 2, HD = 64, L = 8 };
enum { DR = 64 }; /* decode rows (a GRPO generation batch) for attention_decode */
enum { PAGE = 16 }; /* attention_decode_paged's page (the sampler's GRPO_KV_PAGE) */

/* Wall time, or with BENCH_CLOCK=cpu the calling thread's CPU time: on a shared, loaded machine
 * and with threads 1, that is about the time the kernels would take alone. */
static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now(void) {
    struct timespec ts;
    clock_gettime(bench_clock, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float *rnd(size_t n, float amp) {
    float *p = malloc(n * sizeof(float));
    if (!p) {
        fprintf(stderr, "bench_kernels: out of memory (%zu floats)\n", n);
        exit(1);
    }
    uint32_t s = 12345u + (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = amp * ((float)(s >> 8) / 8388608.0f - 1.0f);
    }
    return p;
}

/* Runs fn until at least 0.3 s have passed (at least 3 times after a warm-up) and returns the
 * best time of one run in seconds. */
typedef void (*bench_fn)(void *arg);
static double best_time(bench_fn fn, void *arg) {
    fn(arg);
    double best = 1e30, start = now();
    for (int it = 0; it < 3 || now() - start < 0.3; it++) {
        double t0 = now();
        fn(arg);
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

/* ---- 1. raw sgemm ------------------------------------------------------------------------- */

typedef struct gemm_arg {
    int form; /* 0 forward NT, 1 dinp NN, 2 dw TN */
    int N, IC, OC;
    float *x, *w, *y;
} gemm_arg;

static void run_gemm(void *p) {
    gemm_arg *a = p;
    if (a->form == 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, a->N, a->OC, a->IC, 1.0f, a->x, a->IC,
                    a->w, a->IC, 0.0f, a->y, a->OC);
    else if (a->form == 1)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, a->N, a->IC, a->OC, 1.0f, a->y,
                    a->OC, a->w, a->IC, 0.0f, a->x, a->IC);
    else
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, a->OC, a->IC, a->N, 1.0f, a->y, a->OC,
                    a->x, a->IC, 1.0f, a->w, a->IC);
}

/* ---- 2. ops ------------------------------------------------------------------------------- */

typedef struct op_arg {
    grpo_ops *ops;
    int B, T, N;
    float *x, *y, *w, *dx, *dw, *q, *k, *v, *o, *lse, *dq, *dk, *dv, *dout, *rstd, *g, *u;
    float *logp, *hlse, *dlogp;
    int32_t *mask, *pos, *targets, *half_targets, *cmask, *len;
    float *kc, *vc;
    int IC, OC;
    float *pool;     /* the cache above in pages of PAGE slots (k | v per page), shuffled ids */
    int32_t *table;  /* (DR, T / PAGE) */
    int32_t *cmask5; /* the cache mask with odd rows' padding T/8 + 5: tiles across pages */
} op_arg;

static void run_mm_fwd(void *p) {
    op_arg *a = p;
    a->ops->matmul_forward(a->ops->ctx, a->y, a->x, a->w, NULL, a->N, a->IC, a->OC);
}
static void run_mm_bwd(void *p) {
    op_arg *a = p;
    a->ops->matmul_backward(a->ops->ctx, a->dx, a->dw, NULL, a->y, a->x, a->w, a->N, a->IC, a->OC);
}
static void run_att_fwd(void *p) {
    op_arg *a = p;
    a->ops->attention_forward(a->ops->ctx, a->o, a->lse, a->q, a->k, a->v, a->mask, a->B, a->T,
                              NH, NKV, HD);
}
static void run_att_bwd(void *p) {
    op_arg *a = p;
    a->ops->attention_backward(a->ops->ctx, a->dq, a->dk, a->dv, a->dout, a->o, a->lse, a->q, a->k,
                               a->v, a->mask, a->B, a->T, NH, NKV, HD);
}
static void run_decode(void *p) {
    op_arg *a = p;
    a->ops->attention_decode(a->ops->ctx, a->y, a->q, a->kc, a->vc, a->cmask, a->len, DR, a->T,
                             NH, NKV, HD);
}
static void run_decode5(void *p) {
    op_arg *a = p;
    a->ops->attention_decode(a->ops->ctx, a->y, a->q, a->kc, a->vc, a->cmask5, a->len, DR, a->T,
                             NH, NKV, HD);
}
static void run_decode_paged(void *p) {
    op_arg *a = p;
    a->ops->attention_decode_paged(a->ops->ctx, a->y, a->q, a->pool, a->pool + PAGE * NKV * HD,
                                   2 * PAGE * NKV * HD, a->table, (a->T + PAGE - 1) / PAGE, PAGE, a->cmask,
                                   a->len, DR, a->T, NH, NKV, HD);
}
static void run_decode_paged5(void *p) {
    op_arg *a = p;
    a->ops->attention_decode_paged(a->ops->ctx, a->y, a->q, a->pool, a->pool + PAGE * NKV * HD,
                                   2 * PAGE * NKV * HD, a->table, (a->T + PAGE - 1) / PAGE, PAGE, a->cmask5,
                                   a->len, DR, a->T, NH, NKV, HD);
}

/* The cache kc/vc (DR,T,NKV,HD) as pages of PAGE slots, keys then values in each, the page ids
 * a fixed shuffle (pages scattered as a long run leaves them). */
static void make_pages(op_arg *a) {
    const int nblk = (a->T + PAGE - 1) / PAGE, np = DR * nblk, ks = NKV * HD;
    a->pool = malloc((size_t)np * 2 * PAGE * ks * sizeof(float));
    a->table = malloc((size_t)np * sizeof(int32_t));
    a->cmask5 = malloc((size_t)DR * a->T * sizeof(int32_t));
    if (!a->pool || !a->table || !a->cmask5) {
        fprintf(stderr, "bench_kernels: out of memory for the paged cache\n");
        exit(1);
    }
    for (int i = 0; i < np; i++) a->table[i] = (int32_t)(((int64_t)i * 7919) % np);
    for (int r = 0; r < DR; r++)
        for (int t = 0; t < a->T; t++) {
            float *pg = a->pool + (size_t)a->table[r * nblk + t / PAGE] * 2 * PAGE * ks;
            memcpy(pg + (size_t)(t % PAGE) * ks, a->kc + ((size_t)r * a->T + t) * ks,
                   ks * sizeof(float));
            memcpy(pg + (size_t)(PAGE + t % PAGE) * ks, a->vc + ((size_t)r * a->T + t) * ks,
                   ks * sizeof(float));
            a->cmask5[r * a->T + t] = t >= (r % 2 ? a->T / 8 + 5 : 0);
        }
}

static void run_head_fwd(void *p) {
    op_arg *a = p;
    a->ops->head_forward(a->ops->ctx, a->logp, a->hlse, NULL, a->x, a->w, a->targets, a->N, C, V,
                         1.0f);
}
static void run_head_bwd(void *p) {
    op_arg *a = p;
    a->ops->head_backward(a->ops->ctx, a->dx, a->dw, a->dlogp, a->x, a->w, a->targets, a->hlse,
                          a->N, C, V, 1.0f);
}
/* the same with the first half of every row a prompt (target -1): those rows are skipped */
static void run_head_fwd_half(void *p) {
    op_arg *a = p;
    a->ops->head_forward(a->ops->ctx, a->logp, a->hlse, NULL, a->x, a->w, a->half_targets, a->N,
                         C, V, 1.0f);
}
static void run_head_bwd_half(void *p) {
    op_arg *a = p;
    a->ops->head_backward(a->ops->ctx, a->dx, a->dw, a->dlogp, a->x, a->w, a->half_targets,
                          a->hlse, a->N, C, V, 1.0f);
}
static void run_rms_fwd(void *p) {
    op_arg *a = p;
    a->ops->rmsnorm_forward(a->ops->ctx, a->y, a->rstd, a->x, a->w, a->N, C, 1e-5f);
}
static void run_rms_bwd(void *p) {
    op_arg *a = p;
    a->ops->rmsnorm_backward(a->ops->ctx, a->dx, a->dw, a->y, a->x, a->w, a->rstd, a->N, C);
}
static void run_rope_fwd(void *p) {
    op_arg *a = p;
    a->ops->rope_forward(a->ops->ctx, a->q, a->q, a->pos, a->N, NH, HD, 1e6f);
}
static void run_swiglu_fwd(void *p) {
    op_arg *a = p;
    a->ops->swiglu_forward(a->ops->ctx, a->y, a->g, a->u, a->N, I);
}
static void run_swiglu_bwd(void *p) {
    op_arg *a = p;
    a->ops->swiglu_backward(a->ops->ctx, a->dx, a->dw, a->y, a->g, a->u, a->N, I);
}

int main(int argc, char **argv) {
    grpo_cpu_blas_core_pick(); /* OpenBLAS's kernels for this CPU (blas_core.c) */
    int B = argc > 1 ? atoi(argv[1]) : 4, T = argc > 2 ? atoi(argv[2]) : 256;
    int threads = argc > 3 ? atoi(argv[3]) : 0;
    const char *filter = argc > 4 ? argv[4] : NULL;
    if (B <= 0 || T <= 0) {
        fprintf(stderr, "usage: bench_kernels [B T threads]\n");
        return 2;
    }
    int N = B * T;
    const char *clk = getenv("BENCH_CLOCK");
    if (clk && strcmp(clk, "cpu") == 0) bench_clock = CLOCK_THREAD_CPUTIME_ID;
    /* section 1 runs OpenBLAS with its own threads; the backend, opened after it, runs it
     * single-threaded inside its OpenMP threads */
    if (threads > 0) openblas_set_num_threads(threads);
    printf("MiniMind2-small shapes: C %d, I %d, V %d, NH %d, NKV %d, HD %d; B %d, T %d, N %d; "
           "threads %d\n", C, I, V, NH, NKV, HD, B, T, N, openblas_get_num_threads());

    /* ---- 1. sgemm ---- */
    static const struct { const char *name; int IC, OC; } shapes[] = {
        {"q/o proj 512->512", C, C},     {"k/v proj 512->128", C, NKV * HD},
        {"gate/up 512->1408", C, I},     {"down 1408->512", I, C},
        {"head 512->6400", C, V},
    };
    static const char *forms[] = {"fwd  NT", "dinp NN", "dw   TN"};
    size_t maxw = (size_t)V * C, maxx = (size_t)N * I, maxy = (size_t)N * V;
    float *x = rnd(maxx, 1.0f), *w = rnd(maxw, 0.05f), *y = rnd(maxy, 1.0f);
    double gemm_flops = 0.0, gemm_time = 0.0;
    printf("\n1. cblas_sgemm (N = %d)\n", N);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0] && !filter; s++)
        for (int f = 0; f < 3; f++) {
            gemm_arg a = {f, N, shapes[s].IC, shapes[s].OC, x, w, y};
            double t = best_time(run_gemm, &a), fl = 2.0 * N * shapes[s].IC * shapes[s].OC;
            gemm_flops += fl;
            gemm_time += t;
            printf("  %-20s %s  %8.3f ms  %7.1f GFLOP/s\n", shapes[s].name, forms[f], t * 1e3,
                   fl / t * 1e-9);
        }
    double sgemm_rate = filter ? 1.0 : gemm_flops / gemm_time;
    if (!filter)
        printf("  all of the above: %.1f GFLOP/s (the reference rate below)\n", sgemm_rate * 1e-9);

    /* ---- 2. ops ---- */
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *ops = grpo_backend_open("cpu", threads, &err);
    if (!ops) {
        fprintf(stderr, "bench_kernels: %s\n", err.message);
        return 1;
    }
    op_arg a = {0};
    a.ops = ops, a.B = B, a.T = T, a.N = N;
    size_t nq = (size_t)N * NH * HD, nkv = (size_t)N * NKV * HD;
    a.x = rnd((size_t)N * I, 1.0f), a.y = rnd((size_t)N * I, 1.0f), a.w = rnd(maxw, 0.05f);
    a.dx = rnd((size_t)N * I, 1.0f), a.dw = rnd(maxw > (size_t)N * I ? maxw : (size_t)N * I, 1.0f);
    size_t nqd = (size_t)DR * NH * HD; /* attention_decode's q */
    a.q = rnd(nq > nqd ? nq : nqd, 1.0f), a.k = rnd(nkv, 1.0f), a.v = rnd(nkv, 1.0f);
    a.o = rnd(nq, 1.0f);
    a.dq = rnd(nq, 1.0f), a.dk = rnd(nkv, 1.0f), a.dv = rnd(nkv, 1.0f), a.dout = rnd(nq, 1.0f);
    a.lse = rnd((size_t)B * NH * T, 1.0f), a.rstd = rnd(N, 1.0f);
    a.g = rnd((size_t)N * I, 3.0f), a.u = rnd((size_t)N * I, 1.0f);
    a.logp = rnd(N, 1.0f), a.hlse = rnd(N, 1.0f), a.dlogp = rnd(N, 1.0f);
    a.mask = malloc((size_t)N * sizeof(int32_t)), a.pos = malloc((size_t)N * sizeof(int32_t));
    a.targets = malloc((size_t)N * sizeof(int32_t));
    a.half_targets = malloc((size_t)N * sizeof(int32_t));
    a.kc = rnd((size_t)DR * T * NKV * HD, 1.0f), a.vc = rnd((size_t)DR * T * NKV * HD, 1.0f);
    a.cmask = malloc((size_t)DR * T * sizeof(int32_t)), a.len = malloc(DR * sizeof(int32_t));
    for (int r = 0; r < DR; r++) {
        a.len[r] = T;
        for (int t = 0; t < T; t++) a.cmask[r * T + t] = t >= (r % 2 ? T / 8 : 0);
    }
    make_pages(&a);
    for (int n = 0; n < N; n++) {
        int t = n % T, npad = (n / T) % 2 ? T / 8 : 0; /* every other row left-padded by T/8 */
        a.mask[n] = t >= npad;
        a.pos[n] = t >= npad ? t - npad : 0;
        a.targets[n] = (n * 7919) % V;
        a.half_targets[n] = t < T / 2 ? -1 : a.targets[n];
    }
    printf("\n2. ops through the backend table (GFLOP/s of useful arithmetic; %% of sgemm rate)\n");
    double model_t = 0.0, model_fl = 0.0;
    /* count: how many times the op runs in one fwd+bwd of the model */
    struct { const char *name; bench_fn fn; double flops; int ic, oc, count; } rows[] = {
        {"matmul fwd q, o", run_mm_fwd, 2.0 * N * C * C, C, C, 2 * L},
        {"matmul bwd q, o", run_mm_bwd, 4.0 * N * C * C, C, C, 2 * L},
        {"matmul fwd k, v", run_mm_fwd, 2.0 * N * C * NKV * HD, C, NKV * HD, 2 * L},
        {"matmul bwd k, v", run_mm_bwd, 4.0 * N * C * NKV * HD, C, NKV * HD, 2 * L},
        {"matmul fwd gate, up", run_mm_fwd, 2.0 * N * C * I, C, I, 2 * L},
        {"matmul bwd gate, up", run_mm_bwd, 4.0 * N * C * I, C, I, 2 * L},
        {"matmul fwd down", run_mm_fwd, 2.0 * N * I * C, I, C, L},
        {"matmul bwd down", run_mm_bwd, 4.0 * N * I * C, I, C, L},
        {"attention fwd", run_att_fwd, 2.0 * B * NH * (double)T * T * HD, 0, 0, L},
        {"attention bwd", run_att_bwd, 4.0 * B * NH * (double)T * T * HD, 0, 0, L},
        {"attention decode (64 rows)", run_decode, 4.0 * DR * NH * (double)T * HD, 0, 0, 0},
        {"attention decode paged", run_decode_paged, 4.0 * DR * NH * (double)T * HD, 0, 0, 0},
        {"attention decode, pad +5", run_decode5, 4.0 * DR * NH * (double)T * HD, 0, 0, 0},
        {"attention decode paged, pad +5", run_decode_paged5, 4.0 * DR * NH * (double)T * HD, 0,
         0, 0},
        {"rmsnorm fwd", run_rms_fwd, 0, 0, 0, 2 * L + 1},
        {"rmsnorm bwd", run_rms_bwd, 0, 0, 0, 2 * L + 1},
        {"rope (q and k, fwd and bwd)", run_rope_fwd, 0, 0, 0, 4 * L},
        {"swiglu fwd", run_swiglu_fwd, 0, 0, 0, L},
        {"swiglu bwd", run_swiglu_bwd, 0, 0, 0, L},
        {"head fwd", run_head_fwd, 2.0 * N * V * C, 0, 0, 1},
        {"head bwd", run_head_bwd, 4.0 * N * V * C, 0, 0, 1},
        {"head fwd, half rows prompt", run_head_fwd_half, 1.0 * N * V * C, 0, 0, 0},
        {"head bwd, half rows prompt", run_head_bwd_half, 2.0 * N * V * C, 0, 0, 0},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        if (filter && !strstr(rows[r].name, filter)) continue;
        a.IC = rows[r].ic, a.OC = rows[r].oc;
        double t = best_time(rows[r].fn, &a);
        model_t += t * rows[r].count;
        model_fl += rows[r].flops * rows[r].count;
        if (rows[r].flops > 0 && filter)
            printf("  %-28s %8.3f ms  %7.1f GFLOP/s\n", rows[r].name, t * 1e3,
                   rows[r].flops / t * 1e-9);
        else if (rows[r].flops > 0)
            printf("  %-28s x%-3d %8.3f ms  %7.1f GFLOP/s  %5.1f%%\n", rows[r].name,
                   rows[r].count, t * 1e3, rows[r].flops / t * 1e-9,
                   100.0 * rows[r].flops / t / sgemm_rate);
        else
            printf("  %-28s x%-3d %8.3f ms\n", rows[r].name, rows[r].count, t * 1e3);
    }
    if (!filter)
        printf("\n3. model fwd+bwd (%d layers + head, ops above times their count; no embedding, "
               "residual or optimizer): %.1f ms, %.1f GFLOP/s = %.1f%% of the sgemm rate\n",
               L, model_t * 1e3, model_fl / model_t * 1e-9,
               100.0 * model_fl / model_t / sgemm_rate);

    free(x), free(w), free(y);
    free(a.x), free(a.y), free(a.w), free(a.dx), free(a.dw), free(a.q), free(a.k), free(a.v);
    free(a.o), free(a.dq), free(a.dk), free(a.dv), free(a.dout), free(a.lse), free(a.rstd);
    free(a.g), free(a.u), free(a.logp), free(a.hlse), free(a.dlogp), free(a.mask), free(a.pos);
    free(a.targets), free(a.half_targets), free(a.kc), free(a.vc), free(a.cmask), free(a.len);
    free(a.pool), free(a.table), free(a.cmask5);
    grpo_backend_close(ops);
    return 0;
}
