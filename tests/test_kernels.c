/*
 * test_kernels.c — the CPU backend against plain references.
 *
 * Every op is compared with a naive reference written here in double precision loops, and every
 * backward pass with central finite differences of that double reference: for a random linear
 * functional L = sum_i r_i y_i of the output y, the backend's backward called with dout = r must
 * give dL/dx. Inputs are drawn as floats and widened, so both sides see identical numbers.
 *
 * Tolerances (|got - want| <= atol + rtol * |want|):
 * - forward, fp32 backend vs double reference: sums of O(10..1000) fp32 products of O(1) values
 *   carry relative rounding errors of a few 1e-7 times the sum of magnitudes; atol 1e-5 and
 *   rtol 1e-4 are ~10x above that and far below any indexing or formula mistake (O(1e-1)).
 * - finite differences: h = 1e-4 in double gives truncation error ~h^2 * f''' ~ 1e-8 and
 *   cancellation error ~1e-16 / h ~ 1e-12, so the FD value is good to ~1e-7; the fp32 analytic
 *   gradient accumulates more terms than the forward, so atol 1e-4, rtol 1e-3.
 * - RoPE: the backend rounds the angle pos * inv_freq to fp32 like Hugging Face does, the
 *   reference does not: at positions < 300 the angle differs by < 300 * 6e-8 ~ 2e-5 rad, so
 *   atol 1e-4 for inputs of magnitude <= 1.
 * Parameter gradients are pre-filled with random values and must come back with the gradient
 * added (accumulation rule); activation gradients are pre-filled with NaN and must be
 * overwritten.
 *
 * A second test case ("pytorch") replays small cases computed by PyTorch and Hugging Face's Llama
 * code (fixtures written by tools/gen_kernel_fixtures.py into tests/fixtures/kernels/): values
 * and autograd gradients of fp32 computations, so the two sides differ by fp32 rounding only
 * (atol 1e-5, rtol 1e-4 for values; 1e-4, 1e-3 for gradients, which sum more terms). RoPE at
 * positions ~1000 allows 1e-4: both round the angle to fp32 (measured agreement: 1e-7 here),
 * but another libm's powf may differ from torch's pow in the last bit of inv_freq, which moves
 * an angle of ~1000 rad by up to ~6e-5. AdamW does torch's fp32 operations in torch's order
 * (measured: the same bits), so it gets 1e-7.
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "cpu/fastmath.h"
#include "kernels.h"

static grpo_ops *ops;

static void setup(void) {
    grpo_error err;
    grpo_error_init(&err);
    ops = grpo_backend_open("cpu", 2, &err);
    ck_assert_msg(ops != NULL, "cpu backend: %s", err.message);
}

static void teardown(void) {
    grpo_backend_close(ops);
    ops = NULL;
}

/* ---- helpers: random numbers, buffers, comparisons, finite differences ------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static void rng_seed(uint64_t s) { rng_state = s * 0x9E3779B97F4A7C15ull + 1; }

/* uniform in [-1, 1), a float */
static float frand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static int32_t irand(int32_t n) { return (int32_t)((frand() + 1.0f) * 0.5f * (float)n) % n; }

static float *fvec(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(p);
    return p;
}

static double *dvec(size_t n) {
    double *p = calloc(n ? n : 1, sizeof(double));
    ck_assert_ptr_nonnull(p);
    return p;
}

/* n random floats in [-amp, amp) */
static float *frandv(size_t n, float amp) {
    float *p = fvec(n);
    for (size_t i = 0; i < n; i++) p[i] = amp * frand();
    return p;
}

static double *widen(const float *x, size_t n) {
    double *d = dvec(n);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

static float *nanv(size_t n) {
    float *p = fvec(n);
    for (size_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

static float *copyv(const float *x, size_t n) {
    float *p = fvec(n);
    memcpy(p, x, n * sizeof(float));
    return p;
}

/* Asserts got ~ want elementwise; names the tensor and the worst index on failure. */
static void expect_close(const char *what, const float *got, const double *want, size_t n,
                         double atol, double rtol) {
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]);
        ck_assert_msg(err <= atol + rtol * fabs(want[i]) && !isnan(got[i]),
                      "%s[%zu]: got %.9g, want %.9g (|err| %.3g > %.3g + %.3g*|want|)", what, i,
                      (double)got[i], want[i], err, atol, rtol);
    }
}

/* The gradient a parameter buffer received: after - before. */
static float *delta(const float *after, const float *before, size_t n) {
    float *d = fvec(n);
    for (size_t i = 0; i < n; i++) d[i] = after[i] - before[i];
    return d;
}

typedef double (*loss_fn)(void *st);

/* Central differences of f with respect to x[i] for up to max_checks indices (all when n is
 * smaller, else a random sample), compared with the analytic gradient grad. */
static void fd_check(const char *what, loss_fn f, void *st, double *x, size_t n,
                     const float *grad, size_t max_checks) {
    const double h = 1e-4, atol = 1e-4, rtol = 1e-3;
    size_t checks = n < max_checks ? n : max_checks;
    for (size_t c = 0; c < checks; c++) {
        size_t i = n <= max_checks ? c : (size_t)irand((int32_t)n);
        double x0 = x[i];
        x[i] = x0 + h;
        double lp = f(st);
        x[i] = x0 - h;
        double lm = f(st);
        x[i] = x0;
        double fd = (lp - lm) / (2 * h);
        double err = fabs((double)grad[i] - fd);
        ck_assert_msg(err <= atol + rtol * fabs(fd), "%s[%zu]: analytic %.9g, finite diff %.9g",
                      what, i, (double)grad[i], fd);
    }
}

static double dot_r(const double *y, const double *r, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += y[i] * r[i];
    return s;
}

/* ---- the backend table --------------------------------------------------------------------- */

START_TEST(cpu_backend_fills_every_op) {
    ck_assert_str_eq(ops->name, "cpu");
    ck_assert_uint_eq(ops->struct_size, sizeof(grpo_ops));
    /* every slot after ctx is a function pointer; none may be NULL but the optional
     * sample_rows, which cpu leaves NULL: the host draws (core/host/sampler.c, the reference) */
    const char *base = (const char *)ops;
    for (size_t off = offsetof(grpo_ops, alloc); off < sizeof(grpo_ops); off += sizeof(void *)) {
        void *fn;
        memcpy(&fn, base + off, sizeof fn);
        if (off == offsetof(grpo_ops, sample_rows))
            ck_assert_msg(fn == NULL, "cpu must leave sample_rows to the host");
        else
            ck_assert_msg(fn != NULL, "op slot at offset %zu is NULL", off);
    }
}
END_TEST

/* Where the cuda backend cannot run (no module, no device) it says so as UNSUPPORTED naming the
 * backend; where it can, it opens. "auto" always opens something; cpu refuses bf16. */
START_TEST(cuda_backend_opens_or_says_why) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *cuda = grpo_backend_open("cuda", 1, &err);
    if (cuda) {
        ck_assert_str_eq(cuda->name, "cuda");
        grpo_backend_close(cuda);
    } else {
        ck_assert_int_eq(err.status, GRPO_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(err.message, "backend 'cuda'"), "message: %s", err.message);
    }
    grpo_error_init(&err);
    grpo_ops *any = grpo_backend_open("auto", 1, &err);
    ck_assert_msg(any != NULL, "auto: %s", err.message);
    ck_assert_str_eq(any->name, cuda ? "cuda" : "cpu");
    grpo_backend_close(any);
    grpo_error_init(&err);
    grpo_backend_options bf16 = {1, GRPO_DTYPE_BF16};
    ck_assert_ptr_null(grpo_backend_open_with("cpu", &bf16, &err));
    ck_assert_int_eq(err.status, GRPO_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "bf16"), "message: %s", err.message);
    grpo_error_init(&err);
    ck_assert_ptr_null(grpo_backend_open("tpu", 1, &err));
    ck_assert_int_eq(err.status, GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "'tpu'"), "message: %s", err.message);
}
END_TEST

/* A module path that does not exist is named in the error. */
START_TEST(missing_cuda_module_names_the_paths) {
    setenv("GRPO_CUDA_BACKEND", "/nonexistent/libgrpo_kernels_cuda.so", 1);
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *cuda = grpo_backend_open("cuda", 1, &err);
    unsetenv("GRPO_CUDA_BACKEND");
    ck_assert_ptr_null(cuda);
    ck_assert_int_eq(err.status, GRPO_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "tried: /nonexistent/libgrpo_kernels_cuda.so"),
                  "message: %s", err.message);
}
END_TEST

/* 100000 threads crashed inside libgomp; every command opens its backend through this check. */
START_TEST(too_many_threads_is_refused) {
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_ptr_null(grpo_backend_open("cpu", 100000, &err));
    ck_assert_int_eq(err.status, GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "expected at most 1024"), "message: %s", err.message);
}
END_TEST

START_TEST(memory_ops_round_trip) {
    void *ctx = ops->ctx;
    float host[100], back[100];
    for (int i = 0; i < 100; i++) host[i] = (float)i - 7.5f;
    float *a = ops->alloc(ctx, sizeof host), *b = ops->alloc(ctx, sizeof host);
    ck_assert_ptr_nonnull(a);
    ck_assert_uint_eq((uintptr_t)a % 64, 0);
    for (int i = 0; i < 100; i++) ck_assert(a[i] == 0.0f); /* zeroed */
    ops->upload(ctx, a, host, sizeof host);
    ops->copy(ctx, b, a, sizeof host);
    ops->sync(ctx);
    ops->download(ctx, back, b, sizeof host);
    ck_assert_mem_eq(back, host, sizeof host);
    ops->zero(ctx, b, 10 * sizeof(float));
    ck_assert(b[9] == 0.0f && b[10] == host[10]);
    ops->free(ctx, a);
    ops->free(ctx, b);
    ops->free(ctx, NULL);
}
END_TEST

/* The VmFlags line of the mapping of /proc/self/smaps that holds address a, into flags (""
 * when none does). */
static void vm_flags_at(const void *a, char *flags, size_t n) {
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0;
    flags[0] = 0;
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = (uintptr_t)a >= lo && (uintptr_t)a < hi;
        else if (in && !strncmp(line, "VmFlags:", 8)) {
            snprintf(flags, n, "%s", line + 8);
            break;
        }
    }
    fclose(f);
}

/* A block of 2 MiB or more starts on a 2 MiB boundary, zeroed, its whole 2 MiB pages advised as
 * transparent huge pages (VmFlags "hg") and the tail under 2 MiB not; a small one is neither. */
START_TEST(large_blocks_are_huge_page_advised) {
    const size_t mib = (size_t)1 << 20, bytes = 5 * mib + 100;
    unsigned char *big = ops->alloc(ops->ctx, bytes), *small = ops->alloc(ops->ctx, 4096);
    ck_assert_ptr_nonnull(big);
    ck_assert_ptr_nonnull(small);
    ck_assert_uint_eq((uintptr_t)big % (2 * mib), 0);
    ck_assert(big[0] == 0 && big[bytes / 2] == 0 && big[bytes - 1] == 0);
    FILE *thp = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!thp) {
        printf("large_blocks_are_huge_page_advised: no transparent huge pages in this kernel; "
               "the advice is not checked\n");
    } else {
        fclose(thp);
        char flags[512];
        vm_flags_at(big, flags, sizeof flags);
        ck_assert_msg(strstr(flags, " hg"), "first 2 MiB page not advised: VmFlags%s", flags);
        vm_flags_at(big + 4 * mib - 1, flags, sizeof flags);
        ck_assert_msg(strstr(flags, " hg"), "second 2 MiB page not advised: VmFlags%s", flags);
        vm_flags_at(big + 4 * mib, flags, sizeof flags);
        ck_assert_msg(!strstr(flags, " hg"), "the tail under 2 MiB is advised: VmFlags%s", flags);
        vm_flags_at(small, flags, sizeof flags);
        ck_assert_msg(!strstr(flags, " hg"), "a 4 KiB block is advised: VmFlags%s", flags);
    }
    ops->free(ops->ctx, big);
    ops->free(ops->ctx, small);
}
END_TEST

/* ---- embedding ------------------------------------------------------------------------------ */

typedef struct emb_st {
    const int32_t *ids;
    double *wte, *r;
    int32_t N, C;
} emb_st;

static void ref_embedding(double *out, const int32_t *ids, const double *wte, int32_t N,
                          int32_t C) {
    for (int32_t n = 0; n < N; n++)
        for (int32_t c = 0; c < C; c++) out[(size_t)n * C + c] = wte[(size_t)ids[n] * C + c];
}

static double emb_loss(void *p) {
    emb_st *s = p;
    double *y = dvec((size_t)s->N * s->C);
    ref_embedding(y, s->ids, s->wte, s->N, s->C);
    double l = dot_r(y, s->r, (size_t)s->N * s->C);
    free(y);
    return l;
}

START_TEST(embedding_matches_reference_and_gradient) {
    rng_seed(1);
    const int32_t V = 11, C = 70, N = 600; /* N*C above the parallel threshold */
    int32_t ids[600];
    for (int32_t n = 0; n < N; n++) ids[n] = irand(V); /* many repeats */
    float *wte = frandv((size_t)V * C, 1.0f), *out = nanv((size_t)N * C);
    ops->embedding_forward(ops->ctx, out, ids, wte, N, C);
    double *wd = widen(wte, (size_t)V * C), *want = dvec((size_t)N * C);
    ref_embedding(want, ids, wd, N, C);
    expect_close("embedding out", out, want, (size_t)N * C, 0.0, 0.0);

    float *r = frandv((size_t)N * C, 1.0f), *dwte0 = frandv((size_t)V * C, 1.0f);
    float *dwte = copyv(dwte0, (size_t)V * C);
    ops->embedding_backward(ops->ctx, dwte, r, ids, N, C);
    float *g = delta(dwte, dwte0, (size_t)V * C);
    emb_st st = {ids, wd, widen(r, (size_t)N * C), N, C};
    fd_check("dwte", emb_loss, &st, wd, (size_t)V * C, g, 300);
    ops->embedding_backward(ops->ctx, NULL, r, ids, N, C); /* NULL: skipped */
    free(wte), free(out), free(wd), free(want), free(r), free(dwte0), free(dwte), free(g);
    free(st.r);
}
END_TEST

/* ---- matmul --------------------------------------------------------------------------------- */

typedef struct mm_st {
    double *inp, *w, *bias, *r;
    int32_t N, IC, OC;
} mm_st;

static void ref_matmul(double *out, const double *inp, const double *w, const double *bias,
                       int32_t N, int32_t IC, int32_t OC) {
    for (int32_t n = 0; n < N; n++)
        for (int32_t o = 0; o < OC; o++) {
            double s = bias ? bias[o] : 0.0;
            for (int32_t i = 0; i < IC; i++) s += inp[(size_t)n * IC + i] * w[(size_t)o * IC + i];
            out[(size_t)n * OC + o] = s;
        }
}

static double mm_loss(void *p) {
    mm_st *s = p;
    double *y = dvec((size_t)s->N * s->OC);
    ref_matmul(y, s->inp, s->w, s->bias, s->N, s->IC, s->OC);
    double l = dot_r(y, s->r, (size_t)s->N * s->OC);
    free(y);
    return l;
}

START_TEST(matmul_matches_reference_and_gradient) {
    rng_seed(2);
    const int32_t N = 37, IC = 45, OC = 70;
    size_t ni = (size_t)N * IC, nw = (size_t)OC * IC, no = (size_t)N * OC;
    float *inp = frandv(ni, 1.0f), *w = frandv(nw, 1.0f), *bias = frandv(OC, 1.0f);
    double *ind = widen(inp, ni), *wd = widen(w, nw), *bd = widen(bias, OC), *want = dvec(no);
    float *out = nanv(no);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        ops->matmul_forward(ops->ctx, out, inp, w, with_bias ? bias : NULL, N, IC, OC);
        ref_matmul(want, ind, wd, with_bias ? bd : NULL, N, IC, OC);
        expect_close("matmul out", out, want, no, 1e-5, 1e-4);
    }
    float *r = frandv(no, 1.0f), *dinp = nanv(ni);
    float *dw0 = frandv(nw, 1.0f), *db0 = frandv(OC, 1.0f);
    float *dw = copyv(dw0, nw), *db = copyv(db0, OC);
    ops->matmul_backward(ops->ctx, dinp, dw, db, r, inp, w, N, IC, OC);
    float *gw = delta(dw, dw0, nw), *gb = delta(db, db0, OC);
    mm_st st = {ind, wd, bd, widen(r, no), N, IC, OC};
    fd_check("matmul dinp", mm_loss, &st, ind, ni, dinp, 400);
    fd_check("matmul dw", mm_loss, &st, wd, nw, gw, 400);
    fd_check("matmul dbias", mm_loss, &st, bd, OC, gb, 400);

    /* NULL gradients are skipped; the others are unchanged by the skip */
    float *dw2 = copyv(dw0, nw);
    ops->matmul_backward(ops->ctx, NULL, dw2, NULL, r, inp, w, N, IC, OC);
    for (size_t i = 0; i < nw; i++) ck_assert(dw2[i] == dw[i]);
    float *dinp2 = nanv(ni);
    ops->matmul_backward(ops->ctx, dinp2, NULL, NULL, r, inp, w, N, IC, OC);
    ck_assert_mem_eq(dinp2, dinp, ni * sizeof(float));
    free(inp), free(w), free(bias), free(ind), free(wd), free(bd), free(want), free(out);
    free(r), free(dinp), free(dw0), free(db0), free(dw), free(db), free(gw), free(gb);
    free(st.r), free(dw2), free(dinp2);
}
END_TEST

/* The forward of 1..48 rows takes the small-M path (matmul_small.c), 49 rows the GEMM: every
 * row count across that edge (1..49: one, two and three 16-row lane tiles, full and partial),
 * with IC/OC below, at and around its blocks of 8 (AVX-512), 4 (AVX2) or 2 weight rows (OC = 5
 * pads w; OC = 37 and 130 end in a block that overlaps the previous one), with and without
 * bias. Output buffers start as NaN: every element must be written. */
static void matmul_small_sweep(grpo_ops *o) {
    rng_seed(15);
    const int32_t shapes[][2] = {{1, 1}, {7, 5}, {45, 16}, {33, 37}, {64, 130}};
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        const int32_t IC = shapes[sh][0], OC = shapes[sh][1];
        float *w = frandv((size_t)OC * IC, 1.0f), *bias = frandv(OC, 1.0f);
        double *wd = widen(w, (size_t)OC * IC), *bd = widen(bias, OC);
        for (int32_t M = 1; M <= 49; M++) {
            size_t ni = (size_t)M * IC, no = (size_t)M * OC;
            float *inp = frandv(ni, 1.0f);
            double *ind = widen(inp, ni), *want = dvec(no);
            for (int with_bias = 0; with_bias < 2; with_bias++) {
                float *out = nanv(no);
                o->matmul_forward(o->ctx, out, inp, w, with_bias ? bias : NULL, M, IC, OC);
                ref_matmul(want, ind, wd, with_bias ? bd : NULL, M, IC, OC);
                expect_close("matmul small-M out", out, want, no, 1e-5, 1e-4);
                free(out);
            }
            free(inp), free(ind), free(want);
        }
        free(w), free(bias), free(wd), free(bd);
    }
}

START_TEST(matmul_small_rows_match_reference) {
    matmul_small_sweep(ops);
}
END_TEST

/* The same with the block kernel limited to AVX2 (4 weight rows per block) and to the baseline
 * (2 rows, 4-float vectors), so that every code path runs on an AVX-512 machine too (a CPU
 * without AVX2 runs the baseline twice). */
START_TEST(matmul_small_rows_every_isa_path) {
    const int32_t limits[2] = {CPU_SIMD_AVX2, CPU_SIMD_BASE};
    for (int k = 0; k < 2; k++) {
        ((cpu_ctx *)ops->ctx)->simd_limit = limits[k];
        matmul_small_sweep(ops);
    }
    ((cpu_ctx *)ops->ctx)->simd_limit = CPU_SIMD_ANY;
}
END_TEST

/* ---- rmsnorm -------------------------------------------------------------------------------- */

typedef struct rms_st {
    double *inp, *w, *r;
    int32_t N, C;
    double eps;
} rms_st;

static void ref_rmsnorm(double *out, double *rstd, const double *inp, const double *w, int32_t N,
                        int32_t C, double eps) {
    for (int32_t n = 0; n < N; n++) {
        const double *x = inp + (size_t)n * C;
        double ss = 0.0;
        for (int32_t c = 0; c < C; c++) ss += x[c] * x[c];
        double rs = 1.0 / sqrt(ss / C + eps);
        for (int32_t c = 0; c < C; c++) out[(size_t)n * C + c] = x[c] * rs * w[c];
        if (rstd) rstd[n] = rs;
    }
}

static double rms_loss(void *p) {
    rms_st *s = p;
    double *y = dvec((size_t)s->N * s->C);
    ref_rmsnorm(y, NULL, s->inp, s->w, s->N, s->C, s->eps);
    double l = dot_r(y, s->r, (size_t)s->N * s->C);
    free(y);
    return l;
}

START_TEST(rmsnorm_matches_reference_and_gradient) {
    rng_seed(3);
    const int32_t N = 300, C = 150; /* C above one 64-channel slice, not a multiple of it */
    const float eps = 1e-5f;
    size_t n = (size_t)N * C;
    float *inp = frandv(n, 2.0f), *w = frandv(C, 1.0f), *out = nanv(n), *rstd = nanv(N);
    ops->rmsnorm_forward(ops->ctx, out, rstd, inp, w, N, C, eps);
    double *ind = widen(inp, n), *wd = widen(w, C), *want = dvec(n), *want_rstd = dvec(N);
    ref_rmsnorm(want, want_rstd, ind, wd, N, C, eps);
    expect_close("rmsnorm out", out, want, n, 1e-5, 1e-4);
    expect_close("rmsnorm rstd", rstd, want_rstd, N, 1e-5, 1e-4);

    float *r = frandv(n, 1.0f), *dinp = nanv(n), *dw0 = frandv(C, 1.0f), *dw = copyv(dw0, C);
    ops->rmsnorm_backward(ops->ctx, dinp, dw, r, inp, w, rstd, N, C);
    float *gw = delta(dw, dw0, C);
    rms_st st = {ind, wd, widen(r, n), N, C, eps};
    fd_check("rmsnorm dinp", rms_loss, &st, ind, n, dinp, 300);
    fd_check("rmsnorm dw", rms_loss, &st, wd, C, gw, 300);

    /* dinp may alias dout; NULL dw is skipped */
    float *inplace = copyv(r, n);
    ops->rmsnorm_backward(ops->ctx, inplace, NULL, inplace, inp, w, rstd, N, C);
    ck_assert_mem_eq(inplace, dinp, n * sizeof(float));
    free(inp), free(w), free(out), free(rstd), free(ind), free(wd), free(want), free(want_rstd);
    free(r), free(dinp), free(dw0), free(dw), free(gw), free(st.r), free(inplace);
}
END_TEST

/* ---- rope ----------------------------------------------------------------------------------- */

typedef struct rope_st {
    double *inp, *r;
    const int32_t *pos;
    int32_t N, NH, HD;
    double theta;
} rope_st;

/* Hugging Face Llama: q*cos + rotate_half(q)*sin, rotate_half(x) = cat(-x2, x1),
 * cos/sin = cos/sin(cat(freqs, freqs)), freqs[i] = pos * theta^(-2i/HD). */
static void ref_rope(double *out, const double *inp, const int32_t *pos, int32_t N, int32_t NH,
                     int32_t HD, double theta) {
    int32_t h = HD / 2;
    for (int32_t n = 0; n < N; n++)
        for (int32_t hh = 0; hh < NH; hh++) {
            const double *x = inp + ((size_t)n * NH + hh) * HD;
            double *o = out + ((size_t)n * NH + hh) * HD;
            for (int32_t d = 0; d < HD; d++) {
                int32_t i = d % h;
                double ang = pos[n] * pow(theta, -2.0 * i / HD);
                double rot = d < h ? -x[d + h] : x[d - h];
                o[d] = x[d] * cos(ang) + rot * sin(ang);
            }
        }
}

static double rope_loss(void *p) {
    rope_st *s = p;
    size_t n = (size_t)s->N * s->NH * s->HD;
    double *y = dvec(n);
    ref_rope(y, s->inp, s->pos, s->N, s->NH, s->HD, s->theta);
    double l = dot_r(y, s->r, n);
    free(y);
    return l;
}

START_TEST(rope_matches_reference_at_nonzero_positions) {
    rng_seed(4);
    /* two rows of T = 40: one starting at position 17 (a continuation), one left-padded by 3
     * (positions 0,0,0 then 0..36), flattened to N = 80 tokens */
    const int32_t T = 40, N = 2 * T, NH = 3, HD = 16;
    const float theta = 1e6f;
    int32_t pos[80];
    for (int32_t t = 0; t < T; t++) {
        pos[t] = 17 + t;
        pos[T + t] = t < 3 ? 0 : t - 3;
    }
    pos[T - 1] = 250; /* one large position */
    size_t n = (size_t)N * NH * HD;
    float *inp = frandv(n, 1.0f), *out = nanv(n);
    ops->rope_forward(ops->ctx, out, inp, pos, N, NH, HD, theta);
    double *ind = widen(inp, n), *want = dvec(n);
    ref_rope(want, ind, pos, N, NH, HD, theta);
    expect_close("rope out", out, want, n, 1e-4, 1e-4);
    float *inplace = copyv(inp, n); /* out may equal inp */
    ops->rope_forward(ops->ctx, inplace, inplace, pos, N, NH, HD, theta);
    ck_assert_mem_eq(inplace, out, n * sizeof(float));

    float *r = frandv(n, 1.0f), *dinp = nanv(n);
    ops->rope_backward(ops->ctx, dinp, r, pos, N, NH, HD, theta);
    rope_st st = {ind, widen(r, n), pos, N, NH, HD, theta};
    fd_check("rope dinp", rope_loss, &st, ind, n, dinp, 400);
    /* the backward is the inverse: rotating out back gives inp */
    float *back = nanv(n);
    ops->rope_backward(ops->ctx, back, out, pos, N, NH, HD, theta);
    expect_close("rope inverse", back, ind, n, 1e-5, 1e-5);
    free(inp), free(out), free(ind), free(want), free(inplace), free(r), free(dinp), free(st.r);
    free(back);
}
END_TEST

/* ---- swiglu --------------------------------------------------------------------------------- */

typedef struct swi_st {
    double *gate, *up, *r;
    size_t n;
} swi_st;

static void ref_swiglu(double *out, const double *gate, const double *up, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = gate[i] / (1.0 + exp(-gate[i])) * up[i];
}

static double swi_loss(void *p) {
    swi_st *s = p;
    double *y = dvec(s->n);
    ref_swiglu(y, s->gate, s->up, s->n);
    double l = dot_r(y, s->r, s->n);
    free(y);
    return l;
}

START_TEST(swiglu_matches_reference_and_gradient) {
    rng_seed(5);
    const int32_t N = 30, I = 1500;
    size_t n = (size_t)N * I;
    float *gate = frandv(n, 6.0f), *up = frandv(n, 2.0f), *out = nanv(n);
    ops->swiglu_forward(ops->ctx, out, gate, up, N, I);
    double *gd = widen(gate, n), *ud = widen(up, n), *want = dvec(n);
    ref_swiglu(want, gd, ud, n);
    expect_close("swiglu out", out, want, n, 1e-5, 1e-4);
    float *r = frandv(n, 1.0f), *dgate = nanv(n), *dup = nanv(n);
    ops->swiglu_backward(ops->ctx, dgate, dup, r, gate, up, N, I);
    swi_st st = {gd, ud, widen(r, n), n};
    fd_check("swiglu dgate", swi_loss, &st, gd, n, dgate, 300);
    fd_check("swiglu dup", swi_loss, &st, ud, n, dup, 300);
    float *dup2 = nanv(n);
    ops->swiglu_backward(ops->ctx, NULL, dup2, r, gate, up, N, I); /* NULL dgate skipped */
    ck_assert_mem_eq(dup2, dup, n * sizeof(float));
    float *dgate2 = nanv(n);
    ops->swiglu_backward(ops->ctx, dgate2, NULL, r, gate, up, N, I); /* NULL dup skipped */
    ck_assert_mem_eq(dgate2, dgate, n * sizeof(float));
    free(gate), free(up), free(out), free(gd), free(ud), free(want), free(r), free(dgate);
    free(dup), free(st.r), free(dup2), free(dgate2);
}
END_TEST

/* ---- residual, accumulate, scale, sumsq ----------------------------------------------------- */

START_TEST(elementwise_ops_match_reference) {
    rng_seed(6);
    const uint64_t n = 200003; /* several sumsq blocks, parallel, odd length */
    float *a = frandv(n, 1.0f), *b = frandv(n, 1.0f), *out = nanv(n);
    double *want = dvec(n);
    ops->residual_forward(ops->ctx, out, a, b, n);
    for (uint64_t i = 0; i < n; i++) want[i] = (double)a[i] + (double)b[i];
    expect_close("residual out", out, want, n, 0.0, 6e-8); /* one fp32 rounding */
    ops->accumulate(ops->ctx, out, a, n);
    for (uint64_t i = 0; i < n; i++) want[i] += a[i];
    expect_close("accumulate y", out, want, n, 1e-7, 2e-7);
    float *x = copyv(a, n);
    ops->scale(ops->ctx, x, -0.375f, n); /* exact in binary */
    for (uint64_t i = 0; i < n; i++) ck_assert(x[i] == a[i] * -0.375f);
    double ss = 0.0;
    for (uint64_t i = 0; i < n; i++) ss += (double)a[i] * a[i];
    double got = ops->sumsq(ops->ctx, a, n);
    ck_assert_msg(fabs(got - ss) <= 1e-12 * ss, "sumsq %.17g want %.17g", got, ss);
    ck_assert(ops->sumsq(ops->ctx, a, 0) == 0.0);
    free(a), free(b), free(out), free(want), free(x);
}
END_TEST

/* ---- attention ------------------------------------------------------------------------------ */

/* Naive causal GQA with key padding, double: query head h reads kv head h / (NH/NKV). */
static void ref_attention(double *out, double *lse, const double *q, const double *k,
                          const double *v, const int32_t *mask, int32_t B, int32_t T, int32_t NH,
                          int32_t NKV, int32_t HD) {
    int32_t rep = NH / NKV;
    double scale = 1.0 / sqrt((double)HD), *sc = dvec(T);
    for (int32_t b = 0; b < B; b++)
        for (int32_t h = 0; h < NH; h++)
            for (int32_t t = 0; t < T; t++) {
                double *o = out + (((size_t)b * T + t) * NH + h) * HD;
                double *l = lse ? lse + ((size_t)b * NH + h) * T + t : NULL;
                for (int32_t d = 0; d < HD; d++) o[d] = 0.0;
                if (l) *l = 0.0;
                if (!mask[b * T + t]) continue;
                const double *qt = q + (((size_t)b * T + t) * NH + h) * HD;
                double mx = -INFINITY, sum = 0.0;
                for (int32_t s = 0; s <= t; s++) {
                    if (!mask[b * T + s]) continue;
                    const double *ks = k + (((size_t)b * T + s) * NKV + h / rep) * HD;
                    double dot = 0.0;
                    for (int32_t d = 0; d < HD; d++) dot += qt[d] * ks[d];
                    sc[s] = dot * scale;
                    if (sc[s] > mx) mx = sc[s];
                }
                for (int32_t s = 0; s <= t; s++) {
                    if (!mask[b * T + s]) continue;
                    double p = exp(sc[s] - mx);
                    sum += p;
                    const double *vs = v + (((size_t)b * T + s) * NKV + h / rep) * HD;
                    for (int32_t d = 0; d < HD; d++) o[d] += p * vs[d];
                }
                for (int32_t d = 0; d < HD; d++) o[d] /= sum;
                if (l) *l = mx + log(sum);
            }
    free(sc);
}

typedef struct att_case {
    int32_t B, T, NH, NKV, HD;
    int32_t *mask;
    float *q, *k, *v;
} att_case;

/* Random q/k/v; row 1 (if any) left-padded by npad, row 2 (if any) right-padded by 2 and with a
 * hole; keys and values at padding set to 50, which would dominate any softmax that saw them. */
static att_case att_make(int32_t B, int32_t T, int32_t NH, int32_t NKV, int32_t HD, int32_t npad) {
    att_case c = {B, T, NH, NKV, HD, NULL, NULL, NULL, NULL};
    c.mask = malloc((size_t)B * T * sizeof(int32_t));
    for (int32_t b = 0; b < B; b++)
        for (int32_t t = 0; t < T; t++)
            c.mask[b * T + t] = !(b == 1 && t < npad) && !(b == 2 && (t >= T - 2 || t == 3));
    c.q = frandv((size_t)B * T * NH * HD, 1.5f);
    c.k = frandv((size_t)B * T * NKV * HD, 1.5f);
    c.v = frandv((size_t)B * T * NKV * HD, 1.0f);
    for (int32_t b = 0; b < B; b++)
        for (int32_t t = 0; t < T; t++)
            if (!c.mask[b * T + t])
                for (int32_t i = 0; i < NKV * HD; i++) {
                    c.k[((size_t)b * T + t) * NKV * HD + i] = 50.0f;
                    c.v[((size_t)b * T + t) * NKV * HD + i] = 50.0f;
                }
    return c;
}

static void att_free(att_case *c) { free(c->mask), free(c->q), free(c->k), free(c->v); }

/* attention_forward of case c against the double reference (out and lse), then c is freed. */
static void expect_forward_matches_reference(att_case *c) {
    size_t nq = (size_t)c->B * c->T * c->NH * c->HD, nkv = (size_t)c->B * c->T * c->NKV * c->HD;
    size_t nl = (size_t)c->B * c->NH * c->T;
    float *out = nanv(nq), *lse = nanv(nl);
    ops->attention_forward(ops->ctx, out, lse, c->q, c->k, c->v, c->mask, c->B, c->T, c->NH,
                           c->NKV, c->HD);
    double *qd = widen(c->q, nq), *kd = widen(c->k, nkv), *vd = widen(c->v, nkv);
    double *want = dvec(nq), *want_lse = dvec(nl);
    ref_attention(want, want_lse, qd, kd, vd, c->mask, c->B, c->T, c->NH, c->NKV, c->HD);
    expect_close("attention out", out, want, nq, 1e-5, 1e-4);
    expect_close("attention lse", lse, want_lse, nl, 1e-5, 1e-5);
    free(out), free(lse), free(qd), free(kd), free(vd), free(want), free(want_lse);
    att_free(c);
}

START_TEST(attention_forward_matches_reference_gqa) {
    rng_seed(7);
    /* T = 150 spans three 64-query blocks; NH = 4 query heads share NKV = 2 kv heads */
    att_case c = att_make(3, 150, 4, 2, 16, 37);
    expect_forward_matches_reference(&c);
}
END_TEST

START_TEST(attention_forward_matches_reference_hd64) {
    rng_seed(17);
    /* HD 64 takes attend.c's own paths (the transposed key tile, four queries per pass over the
     * values); T = 150: a query block of 64 reads its values in blocks of 64 keys (ATT_VB), each
     * query's sums continued from block to block */
    att_case c = att_make(3, 150, 4, 2, 64, 21);
    expect_forward_matches_reference(&c);
}
END_TEST

START_TEST(attention_padded_keys_get_no_attention) {
    rng_seed(8);
    /* Row 1 is left-padded by npad: its real part must give exactly what the same tokens give
     * alone (B = 1, T - npad, no padding), and its padding queries must output zeros. */
    const int32_t T = 90, NH = 4, NKV = 2, HD = 8, npad = 70;
    att_case c = att_make(2, T, NH, NKV, HD, npad);
    size_t row_q = (size_t)T * NH * HD, row_kv = (size_t)T * NKV * HD;
    float *out = nanv(2 * row_q), *lse = nanv((size_t)2 * NH * T);
    ops->attention_forward(ops->ctx, out, lse, c.q, c.k, c.v, c.mask, 2, T, NH, NKV, HD);
    int32_t Tr = T - npad, *mask1 = malloc((size_t)Tr * sizeof(int32_t));
    for (int32_t t = 0; t < Tr; t++) mask1[t] = 1;
    const float *q1 = c.q + row_q + (size_t)npad * NH * HD;
    const float *k1 = c.k + row_kv + (size_t)npad * NKV * HD;
    const float *v1 = c.v + row_kv + (size_t)npad * NKV * HD;
    float *alone = nanv((size_t)Tr * NH * HD), *lse1 = nanv((size_t)NH * Tr);
    ops->attention_forward(ops->ctx, alone, lse1, q1, k1, v1, mask1, 1, Tr, NH, NKV, HD);
    double *alone_d = widen(alone, (size_t)Tr * NH * HD);
    expect_close("left-padded row vs alone", out + row_q + (size_t)npad * NH * HD, alone_d,
                 (size_t)Tr * NH * HD, 1e-6, 1e-5);
    for (size_t i = 0; i < (size_t)npad * NH * HD; i++)
        ck_assert_msg(out[row_q + i] == 0.0f, "padding query output [%zu] = %g", i, out[row_q + i]);
    free(out), free(lse), free(mask1), free(alone), free(lse1), free(alone_d);
    att_free(&c);
}
END_TEST

START_TEST(attention_all_padding_row_is_zero) {
    rng_seed(15);
    /* row 1 is padding only: zero output, zero lse, zero gradients, and row 0 unaffected */
    const int32_t B = 2, T = 70, NH = 4, NKV = 2, HD = 8;
    att_case c = att_make(B, T, NH, NKV, HD, T);
    size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD, row = nq / B;
    float *out = nanv(nq), *lse = nanv((size_t)B * NH * T), *r = frandv(nq, 1.0f);
    float *dq = nanv(nq), *dk = nanv(nkv), *dv = nanv(nkv);
    ops->attention_forward(ops->ctx, out, lse, c.q, c.k, c.v, c.mask, B, T, NH, NKV, HD);
    ops->attention_backward(ops->ctx, dq, dk, dv, r, out, lse, c.q, c.k, c.v, c.mask, B, T, NH,
                            NKV, HD);
    for (size_t i = 0; i < row; i++) ck_assert(out[row + i] == 0.0f && dq[row + i] == 0.0f);
    for (size_t i = nkv / B; i < nkv; i++) ck_assert(dk[i] == 0.0f && dv[i] == 0.0f);
    for (size_t i = 0; i < (size_t)NH * T; i++) ck_assert(lse[(size_t)NH * T + i] == 0.0f);
    double *qd = widen(c.q, nq), *kd = widen(c.k, nkv), *vd = widen(c.v, nkv), *want = dvec(nq);
    ref_attention(want, NULL, qd, kd, vd, c.mask, B, T, NH, NKV, HD);
    expect_close("attention out beside an all-padding row", out, want, nq, 1e-5, 1e-4);
    free(out), free(lse), free(r), free(dq), free(dk), free(dv), free(qd), free(kd), free(vd);
    free(want);
    att_free(&c);
}
END_TEST

typedef struct att_st {
    double *q, *k, *v, *r;
    const int32_t *mask;
    int32_t B, T, NH, NKV, HD;
} att_st;

static double att_loss(void *p) {
    att_st *s = p;
    size_t n = (size_t)s->B * s->T * s->NH * s->HD;
    double *y = dvec(n);
    ref_attention(y, NULL, s->q, s->k, s->v, s->mask, s->B, s->T, s->NH, s->NKV, s->HD);
    double l = dot_r(y, s->r, n);
    free(y);
    return l;
}

static void attention_gradient_case(int32_t B, int32_t T, int32_t NH, int32_t NKV, int32_t HD,
                                    int32_t npad, size_t max_checks) {
    att_case c = att_make(B, T, NH, NKV, HD, npad);
    size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD;
    float *out = nanv(nq), *lse = nanv((size_t)B * NH * T);
    ops->attention_forward(ops->ctx, out, lse, c.q, c.k, c.v, c.mask, B, T, NH, NKV, HD);
    float *r = frandv(nq, 1.0f), *dq = nanv(nq), *dk = nanv(nkv), *dv = nanv(nkv);
    ops->attention_backward(ops->ctx, dq, dk, dv, r, out, lse, c.q, c.k, c.v, c.mask, B, T, NH,
                            NKV, HD);
    att_st st = {widen(c.q, nq), widen(c.k, nkv), widen(c.v, nkv), widen(r, nq), c.mask,
                 B, T, NH, NKV, HD};
    fd_check("attention dq", att_loss, &st, st.q, nq, dq, max_checks);
    fd_check("attention dk", att_loss, &st, st.k, nkv, dk, max_checks);
    fd_check("attention dv", att_loss, &st, st.v, nkv, dv, max_checks);
    /* padded keys and values get exactly zero gradient, padding queries too */
    for (int32_t b = 0; b < B; b++)
        for (int32_t t = 0; t < T; t++) {
            if (c.mask[b * T + t]) continue;
            for (int32_t i = 0; i < NKV * HD; i++) {
                ck_assert(dk[((size_t)b * T + t) * NKV * HD + i] == 0.0f);
                ck_assert(dv[((size_t)b * T + t) * NKV * HD + i] == 0.0f);
            }
            for (int32_t i = 0; i < NH * HD; i++)
                ck_assert(dq[((size_t)b * T + t) * NH * HD + i] == 0.0f);
        }
    /* NULL gradients are skipped, the rest unchanged */
    float *dk2 = nanv(nkv);
    ops->attention_backward(ops->ctx, NULL, dk2, NULL, r, out, lse, c.q, c.k, c.v, c.mask, B, T,
                            NH, NKV, HD);
    ck_assert_mem_eq(dk2, dk, nkv * sizeof(float));
    free(out), free(lse), free(r), free(dq), free(dk), free(dv), free(dk2);
    free(st.q), free(st.k), free(st.v), free(st.r);
    att_free(&c);
}

START_TEST(attention_backward_finite_differences) {
    rng_seed(9);
    attention_gradient_case(3, 7, 4, 2, 4, 3, 100000); /* every coordinate */
    attention_gradient_case(3, 70, 4, 2, 8, 20, 150);   /* two query blocks, a sample */
    attention_gradient_case(1, 9, 3, 3, 6, 0, 100000);  /* plain multi-head (NKV = NH) */
}
END_TEST

/* ---- prefix attention (1.6) ----------------------------------------------------------------- */

/* Rows whose queries also see a shared prefix: B rows of T, BP prefixes of P. */
typedef struct pfx_case {
    att_case own;    /* q/k/v/mask (B,T,..) as att_make makes them */
    int32_t BP, P;
    int32_t *pmask;  /* (BP,P): prefix 1 left-padded by 3 and with a hole at column P-2 */
    float *kp, *vp;  /* (BP,P,NKV,HD), 50 at padding */
    int32_t *prefix_of;
} pfx_case;

static pfx_case pfx_make(int32_t B, int32_t T, int32_t BP, int32_t P, int32_t NH, int32_t NKV,
                         int32_t HD, int32_t npad) {
    pfx_case c = {att_make(B, T, NH, NKV, HD, npad), BP, P, NULL, NULL, NULL, NULL};
    size_t kw = (size_t)NKV * HD;
    c.pmask = malloc((size_t)BP * P * sizeof(int32_t));
    c.prefix_of = malloc((size_t)B * sizeof(int32_t));
    for (int32_t j = 0; j < BP; j++)
        for (int32_t p = 0; p < P; p++) c.pmask[j * P + p] = !(j == 1 && (p < 3 || p == P - 2));
    c.kp = frandv((size_t)BP * P * kw, 1.5f), c.vp = frandv((size_t)BP * P * kw, 1.0f);
    for (size_t jp = 0; jp < (size_t)BP * P; jp++)
        for (size_t i = 0; !c.pmask[jp] && i < kw; i++) c.kp[jp * kw + i] = c.vp[jp * kw + i] = 50;
    for (int32_t b = 0; b < B; b++) c.prefix_of[b] = (int32_t)((int64_t)b * BP / B);
    return c;
}

static void pfx_free(pfx_case *c) {
    att_free(&c->own), free(c->pmask), free(c->kp), free(c->vp), free(c->prefix_of);
}

/* The reference: each row as the plain row [prefix | row] of P+T columns, through
 * ref_attention, read at its last T columns. */
static void ref_prefix_attention(double *out, double *lse, const double *q, const double *k,
                                 const double *v, const double *kp, const double *vp,
                                 const pfx_case *c) {
    const att_case *a = &c->own;
    int32_t T = a->T, P = c->P, W = P + T, NH = a->NH, HD = a->HD;
    size_t qw = (size_t)NH * HD, kw = (size_t)a->NKV * HD;
    double *cq = dvec(W * qw), *ck = dvec(W * kw), *cv = dvec(W * kw);
    double *co = dvec(W * qw), *cl = dvec((size_t)NH * W);
    int32_t *cm = malloc((size_t)W * sizeof(int32_t));
    for (int32_t b = 0; b < a->B; b++) {
        int32_t j = c->prefix_of[b];
        memcpy(ck, kp + (size_t)j * P * kw, P * kw * sizeof(double));
        memcpy(cv, vp + (size_t)j * P * kw, P * kw * sizeof(double));
        memcpy(cq + P * qw, q + (size_t)b * T * qw, T * qw * sizeof(double));
        memcpy(ck + P * kw, k + (size_t)b * T * kw, T * kw * sizeof(double));
        memcpy(cv + P * kw, v + (size_t)b * T * kw, T * kw * sizeof(double));
        memcpy(cm, c->pmask + (size_t)j * P, (size_t)P * sizeof(int32_t));
        memcpy(cm + P, a->mask + (size_t)b * T, (size_t)T * sizeof(int32_t));
        ref_attention(co, cl, cq, ck, cv, cm, 1, W, NH, a->NKV, HD);
        memcpy(out + (size_t)b * T * qw, co + P * qw, T * qw * sizeof(double));
        for (int32_t h = 0; lse && h < NH; h++)
            memcpy(lse + ((size_t)b * NH + h) * T, cl + (size_t)h * W + P,
                   (size_t)T * sizeof(double));
    }
    free(cq), free(ck), free(cv), free(co), free(cl), free(cm);
}

START_TEST(prefix_attention_matches_the_concatenated_rows) {
    rng_seed(21);
    /* 5 rows on 2 prefixes (3 + 2), T = 80 spans two query blocks, a padded prefix */
    pfx_case c = pfx_make(5, 80, 2, 70, 4, 2, 8, 0);
    const att_case *a = &c.own;
    size_t nq = (size_t)a->B * a->T * a->NH * a->HD, nkv = nq / 2, npk = (size_t)2 * 70 * 2 * 8;
    size_t nl = (size_t)a->B * a->NH * a->T;
    float *out = nanv(nq), *lse = nanv(nl);
    ops->prefix_attention_forward(ops->ctx, out, lse, a->q, a->k, a->v, a->mask, c.kp, c.vp,
                                  c.pmask, c.prefix_of, a->B, a->T, c.BP, c.P, a->NH, a->NKV,
                                  a->HD);
    double *qd = widen(a->q, nq), *kd = widen(a->k, nkv), *vd = widen(a->v, nkv);
    double *kpd = widen(c.kp, npk), *vpd = widen(c.vp, npk), *want = dvec(nq), *wl = dvec(nl);
    ref_prefix_attention(want, wl, qd, kd, vd, kpd, vpd, &c);
    expect_close("prefix attention out", out, want, nq, 1e-5, 1e-4);
    expect_close("prefix attention lse", lse, wl, nl, 1e-5, 1e-5);
    free(out), free(lse), free(qd), free(kd), free(vd), free(kpd), free(vpd), free(want), free(wl);
    pfx_free(&c);
}
END_TEST

typedef struct pfx_st {
    double *q, *k, *v, *kp, *vp, *r;
    const pfx_case *c;
} pfx_st;

static double pfx_loss(void *p) {
    pfx_st *s = p;
    const att_case *a = &s->c->own;
    size_t n = (size_t)a->B * a->T * a->NH * a->HD;
    double *y = dvec(n);
    ref_prefix_attention(y, NULL, s->q, s->k, s->v, s->kp, s->vp, s->c);
    double l = dot_r(y, s->r, n);
    free(y);
    return l;
}

static void prefix_gradient_case(int32_t B, int32_t T, int32_t BP, int32_t P, int32_t NH,
                                 int32_t NKV, int32_t HD, size_t max_checks) {
    pfx_case c = pfx_make(B, T, BP, P, NH, NKV, HD, 2);
    const att_case *a = &c.own;
    size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD;
    size_t npk = (size_t)BP * P * NKV * HD;
    float *out = nanv(nq), *lse = nanv((size_t)B * NH * T), *r = frandv(nq, 1.0f);
    ops->prefix_attention_forward(ops->ctx, out, lse, a->q, a->k, a->v, a->mask, c.kp, c.vp,
                                  c.pmask, c.prefix_of, B, T, BP, P, NH, NKV, HD);
    /* dkp/dvp start from random values: the op adds to them */
    float *dq = nanv(nq), *dk = nanv(nkv), *dv = nanv(nkv), *k0 = frandv(npk, 1.0f);
    float *dkp = malloc(npk * sizeof(float)), *dvp = malloc(npk * sizeof(float));
    memcpy(dkp, k0, npk * sizeof(float)), memcpy(dvp, k0, npk * sizeof(float));
    ops->prefix_attention_backward(ops->ctx, dq, dk, dv, dkp, dvp, r, out, lse, a->q, a->k, a->v,
                                   a->mask, c.kp, c.vp, c.pmask, c.prefix_of, B, T, BP, P, NH,
                                   NKV, HD);
    for (size_t i = 0; i < npk; i++) dkp[i] -= k0[i], dvp[i] -= k0[i];
    pfx_st st = {widen(a->q, nq), widen(a->k, nkv), widen(a->v, nkv), widen(c.kp, npk),
                 widen(c.vp, npk), widen(r, nq), &c};
    fd_check("prefix attention dq", pfx_loss, &st, st.q, nq, dq, max_checks);
    fd_check("prefix attention dk", pfx_loss, &st, st.k, nkv, dk, max_checks);
    fd_check("prefix attention dv", pfx_loss, &st, st.v, nkv, dv, max_checks);
    fd_check("prefix attention dkp", pfx_loss, &st, st.kp, npk, dkp, max_checks);
    fd_check("prefix attention dvp", pfx_loss, &st, st.vp, npk, dvp, max_checks);
    /* masked prefix keys get exactly nothing added */
    for (size_t jp = 0; jp < (size_t)BP * P; jp++)
        for (size_t i = 0; !c.pmask[jp] && i < (size_t)NKV * HD; i++)
            ck_assert(dkp[jp * NKV * HD + i] == 0.0f && dvp[jp * NKV * HD + i] == 0.0f);
    free(out), free(lse), free(r), free(dq), free(dk), free(dv), free(k0), free(dkp), free(dvp);
    free(st.q), free(st.k), free(st.v), free(st.kp), free(st.vp), free(st.r);
    pfx_free(&c);
}

START_TEST(prefix_attention_backward_finite_differences) {
    rng_seed(22);
    prefix_gradient_case(3, 6, 2, 5, 4, 2, 4, 100000); /* every coordinate */
    prefix_gradient_case(4, 70, 2, 66, 4, 2, 8, 120);  /* two query blocks, a sample */
    prefix_gradient_case(2, 5, 1, 4, 3, 3, 4, 100000); /* one prefix, plain multi-head */
}
END_TEST

START_TEST(attention_decode_equals_last_row_of_forward) {
    rng_seed(10);
    /* The same sequences through attention_forward and, for their last position, through
     * attention_decode with a cache of S > T slots (slots >= len hold NaN: must not be read). */
    const int32_t B = 3, T = 21, NH = 4, NKV = 2, HD = 8, S = 32;
    att_case c = att_make(B, T, NH, NKV, HD, 6);
    for (int32_t t = T - 2; t < T; t++) c.mask[2 * T + t] = 1; /* last query of row 2 real */
    size_t nq = (size_t)B * T * NH * HD;
    float *out = nanv(nq), *lse = nanv((size_t)B * NH * T);
    ops->attention_forward(ops->ctx, out, lse, c.q, c.k, c.v, c.mask, B, T, NH, NKV, HD);
    size_t ncache = (size_t)B * S * NKV * HD;
    float *kc = nanv(ncache), *vc = nanv(ncache), *qd = nanv((size_t)B * NH * HD);
    int32_t cm[3 * 32], len[3];
    /* row 0 decodes an earlier position: len = T - 4, i.e. the query of position T - 5 */
    const int32_t last[3] = {T - 5, T - 1, T - 1};
    for (int32_t b = 0; b < B; b++) {
        len[b] = last[b] + 1;
        for (int32_t s = 0; s < S; s++) cm[b * S + s] = s < T ? c.mask[b * T + s] : 1;
        memcpy(kc + (size_t)b * S * NKV * HD, c.k + (size_t)b * T * NKV * HD,
               (size_t)T * NKV * HD * sizeof(float));
        memcpy(vc + (size_t)b * S * NKV * HD, c.v + (size_t)b * T * NKV * HD,
               (size_t)T * NKV * HD * sizeof(float));
        memcpy(qd + (size_t)b * NH * HD, c.q + ((size_t)b * T + last[b]) * NH * HD,
               (size_t)NH * HD * sizeof(float));
    }
    float *dec = nanv((size_t)B * NH * HD);
    ops->attention_decode(ops->ctx, dec, qd, kc, vc, cm, len, B, S, NH, NKV, HD);
    for (int32_t b = 0; b < B; b++) {
        double *want = widen(out + ((size_t)b * T + last[b]) * NH * HD, (size_t)NH * HD);
        expect_close("decode vs forward row", dec + (size_t)b * NH * HD, want, (size_t)NH * HD,
                     1e-6, 1e-5);
        free(want);
    }
    free(out), free(lse), free(kc), free(vc), free(qd), free(dec);
    att_free(&c);
}
END_TEST

/* ---- fused head ----------------------------------------------------------------------------- */

static void ref_head(double *logp, double *lse, double *ent, const double *hidden,
                     const double *w, const int32_t *targets, int32_t N, int32_t C, int32_t V,
                     double scale) {
    double *z = dvec(V);
    for (int32_t n = 0; n < N; n++) {
        double mx = -INFINITY, sum = 0.0, h = 0.0;
        for (int32_t j = 0; j < V; j++) {
            double s = 0.0;
            for (int32_t c = 0; c < C; c++) s += hidden[(size_t)n * C + c] * w[(size_t)j * C + c];
            z[j] = scale * s;
            if (z[j] > mx) mx = z[j];
        }
        for (int32_t j = 0; j < V; j++) sum += exp(z[j] - mx);
        double l = mx + log(sum);
        for (int32_t j = 0; j < V; j++) h -= exp(z[j] - l) * (z[j] - l);
        int skip = targets[n] < 0; /* ops.h: rows without a target are skipped, all 0 */
        if (logp) logp[n] = skip ? 0.0 : z[targets[n]] - l;
        if (lse) lse[n] = skip ? 0.0 : l;
        if (ent) ent[n] = skip ? 0.0 : h;
    }
    free(z);
}

START_TEST(head_forward_matches_reference) {
    rng_seed(11);
    /* V = 2500 is not a multiple of the vocab chunk (512 or 1024 wide); N = 600 spans several
     * row blocks */
    const int32_t N = 600, C = 16, V = 2500;
    const float scale = 1.0f / 0.7f;
    float *hidden = frandv((size_t)N * C, 1.0f), *w = frandv((size_t)V * C, 1.0f);
    int32_t *targets = malloc((size_t)N * sizeof(int32_t));
    for (int32_t n = 0; n < N; n++) targets[n] = n % 7 == 3 ? -1 : irand(V);
    targets[5] = V - 1;
    targets[6] = 1024; /* the first entry of a chunk */
    float *logp = nanv(N), *lse = nanv(N), *ent = nanv(N);
    ops->head_forward(ops->ctx, logp, lse, ent, hidden, w, targets, N, C, V, scale);
    double *hd = widen(hidden, (size_t)N * C), *wd = widen(w, (size_t)V * C);
    double *wl = dvec(N), *wlse = dvec(N), *went = dvec(N);
    ref_head(wl, wlse, went, hd, wd, targets, N, C, V, scale);
    expect_close("head logp", logp, wl, N, 1e-5, 1e-5);
    expect_close("head lse", lse, wlse, N, 1e-5, 1e-5);
    expect_close("head entropy", ent, went, N, 1e-5, 1e-5);
    for (int32_t n = 0; n < N; n++)
        if (targets[n] < 0) ck_assert(logp[n] == 0.0f);
    float *logp2 = nanv(N);
    ops->head_forward(ops->ctx, logp2, lse, NULL, hidden, w, targets, N, C, V, scale);
    ck_assert_mem_eq(logp2, logp, (size_t)N * sizeof(float)); /* entropy is optional */
    free(hidden), free(w), free(targets), free(logp), free(lse), free(ent), free(hd), free(wd);
    free(wl), free(wlse), free(went), free(logp2);
}
END_TEST

typedef struct head_st {
    double *hidden, *w, *dlogp, *dentropy; /* dentropy NULL: no entropy term */
    const int32_t *targets;
    int32_t N, C, V;
    double scale;
} head_st;

/* sum(dlogp * logp) (+ sum(dentropy * entropy)) in double, through the reference head. */
static double head_loss(void *p) {
    head_st *s = p;
    double *logp = dvec(s->N), *ent = dvec(s->N);
    ref_head(logp, NULL, ent, s->hidden, s->w, s->targets, s->N, s->C, s->V, s->scale);
    double l = dot_r(logp, s->dlogp, s->N);
    if (s->dentropy)
        for (int32_t n = 0; n < s->N; n++)
            if (s->targets[n] >= 0) l += s->dentropy[n] * ent[n];
    free(logp), free(ent);
    return l;
}

START_TEST(head_backward_finite_differences) {
    rng_seed(12);
    const int32_t N = 6, C = 8, V = 2100; /* several vocab chunks, the last partial */
    const float scale = 1.25f;
    float *hidden = frandv((size_t)N * C, 2.0f), *w = frandv((size_t)V * C, 2.0f);
    int32_t targets[6] = {5, 2099, -1, 1024, 1500, 0};
    float *logp = nanv(N), *lse = nanv(N), *dlogp = frandv(N, 1.0f);
    ops->head_forward(ops->ctx, logp, lse, NULL, hidden, w, targets, N, C, V, scale);
    float *dh = nanv((size_t)N * C), *dw0 = frandv((size_t)V * C, 1.0f);
    float *dw = copyv(dw0, (size_t)V * C);
    ops->head_backward(ops->ctx, dh, dw, dlogp, hidden, w, targets, lse, N, C, V, scale);
    float *gw = delta(dw, dw0, (size_t)V * C);
    head_st st = {widen(hidden, (size_t)N * C), widen(w, (size_t)V * C), widen(dlogp, N), NULL,
                  targets, N, C, V, scale};
    fd_check("head dhidden", head_loss, &st, st.hidden, (size_t)N * C, dh, 1000);
    fd_check("head dw", head_loss, &st, st.w, (size_t)V * C, gw, 300);
    /* the target of row 2 is < 0: its hidden state gets no gradient */
    for (int32_t c = 0; c < C; c++) ck_assert(dh[2 * C + c] == 0.0f);
    /* the rows of w that are some row's target get the biggest updates: checked explicitly */
    fd_check("head dw[target 2099]", head_loss, &st, st.w + (size_t)2099 * C, C,
             gw + (size_t)2099 * C, C);
    float *dh2 = nanv((size_t)N * C);
    ops->head_backward(ops->ctx, dh2, NULL, dlogp, hidden, w, targets, lse, N, C, V, scale);
    ck_assert_mem_eq(dh2, dh, (size_t)N * C * sizeof(float));
    free(hidden), free(w), free(logp), free(lse), free(dlogp), free(dh), free(dw0), free(dw);
    free(gw), free(st.hidden), free(st.w), free(st.dlogp), free(dh2);
}
END_TEST

/* The entropy bonus's path (ABI 1.4): head_backward_entropy differentiates sum(dlogp * logp +
 * dentropy * entropy); with dentropy = 0 it is head_backward bit for bit. Row 4 has dlogp = 0
 * (a token only the entropy term reaches), row 2 no target. */
START_TEST(head_backward_entropy_finite_differences) {
    rng_seed(13);
    const int32_t N = 6, C = 8, V = 2100;
    const float scale = 0.8f;
    float *hidden = frandv((size_t)N * C, 2.0f), *w = frandv((size_t)V * C, 2.0f);
    int32_t targets[6] = {5, 2099, -1, 1024, 1500, 0};
    float *logp = nanv(N), *lse = nanv(N), *ent = nanv(N), *dlogp = frandv(N, 1.0f);
    float *dent = frandv(N, 1.0f);
    dlogp[4] = 0.0f;
    ops->head_forward(ops->ctx, logp, lse, ent, hidden, w, targets, N, C, V, scale);
    float *dh = nanv((size_t)N * C), *dw0 = frandv((size_t)V * C, 1.0f);
    float *dw = copyv(dw0, (size_t)V * C);
    ops->head_backward_entropy(ops->ctx, dh, dw, dlogp, dent, ent, hidden, w, targets, lse, N, C,
                               V, scale);
    float *gw = delta(dw, dw0, (size_t)V * C);
    head_st st = {widen(hidden, (size_t)N * C), widen(w, (size_t)V * C), widen(dlogp, N),
                  widen(dent, N), targets, N, C, V, scale};
    fd_check("head+entropy dhidden", head_loss, &st, st.hidden, (size_t)N * C, dh, 1000);
    fd_check("head+entropy dw", head_loss, &st, st.w, (size_t)V * C, gw, 300);
    for (int32_t c = 0; c < C; c++) ck_assert(dh[2 * C + c] == 0.0f);
    double row4 = 0; /* the entropy term alone moves row 4 */
    for (int32_t c = 0; c < C; c++) row4 += fabs(dh[4 * C + c]);
    ck_assert(row4 > 0);
    /* dentropy = 0: exactly head_backward */
    float *zero = calloc((size_t)N, sizeof(float)), *dh1 = nanv((size_t)N * C),
          *dh2 = nanv((size_t)N * C);
    ops->head_backward(ops->ctx, dh1, NULL, dlogp, hidden, w, targets, lse, N, C, V, scale);
    ops->head_backward_entropy(ops->ctx, dh2, NULL, dlogp, zero, ent, hidden, w, targets, lse, N,
                               C, V, scale);
    ck_assert_mem_eq(dh2, dh1, (size_t)N * C * sizeof(float));
    free(hidden), free(w), free(logp), free(lse), free(ent), free(dlogp), free(dent), free(dh);
    free(dw0), free(dw), free(gw), free(st.hidden), free(st.w), free(st.dlogp), free(st.dentropy);
    free(zero), free(dh1), free(dh2);
}
END_TEST

/* ---- the vectorised exp ------------------------------------------------------------------- */

START_TEST(fast_exp_within_2ulp) {
    /* every 1e-3 over the range the softmaxes use, against exp in double: the Taylor series to
     * degree 7 leaves 5e-9, the fp32 evaluation a few roundings: under 2 ulp (2.4e-7) */
    double worst = 0.0;
    for (float x = -87.0f; x <= 87.0f; x += 0.001f) {
        double want = exp((double)x), err = fabs((double)cpu_expf(x) - want) / want;
        if (err > worst) worst = err;
    }
    ck_assert_msg(worst < 2.4e-7, "worst relative error %.3g", worst);
    ck_assert(cpu_expf(0.0f) == 1.0f && cpu_expf(-0.0f) == 1.0f);
    ck_assert(cpu_expf(-INFINITY) < 1.2e-38f && cpu_expf(-1000.0f) >= 0.0f); /* clamped */
    ck_assert(isfinite(cpu_expf(INFINITY)) && cpu_expf(1000.0f) > 1e38f);  /* clamped */
    ck_assert(isnan(cpu_expf(NAN)));
}
END_TEST

/* ---- threads ------------------------------------------------------------------------------ */

/* The ops that split work by thread count (tiled GEMMs, head row tasks, attention's two task
 * layouts) give the reference result with 1, 3 and 5 threads (3 and 5 are primes:
 * one-dimensional tile grids with ragged edges), and attention the same bits. */
START_TEST(results_do_not_depend_on_thread_count) {
    rng_seed(13);
    const int32_t N = 70, IC = 200, OC = 190; /* N*IC*OC / 64 above the parallel threshold */
    size_t ni = (size_t)N * IC, nw = (size_t)OC * IC, no = (size_t)N * OC;
    float *inp = frandv(ni, 1.0f), *w = frandv(nw, 1.0f), *r = frandv(no, 1.0f);
    double *want = dvec(no), *ind = widen(inp, ni), *wd = widen(w, nw);
    ref_matmul(want, ind, wd, NULL, N, IC, OC);
    const int32_t HN = 300, HC = 32, HV = 1500;
    float *hid = frandv((size_t)HN * HC, 1.0f), *hw = frandv((size_t)HV * HC, 1.0f);
    int32_t *tg = malloc((size_t)HN * sizeof(int32_t));
    for (int32_t n = 0; n < HN; n++) tg[n] = irand(HV);
    float *dl = frandv(HN, 1.0f);
    float *first_dw = NULL, *first_dh = NULL;
    /* attention: B*NKV = 6 groups take the by-group path with 1 and 3 threads, the per-head
     * path with 5; its GEMM shapes do not depend on the thread count, so the bits must not */
    att_case ac = att_make(3, 80, 4, 2, 8, 11);
    size_t aq = (size_t)3 * 80 * 4 * 8, akv = aq / 2;
    float *ar = frandv(aq, 1.0f), *first_att[3] = {NULL, NULL, NULL};
    int counts[3] = {1, 3, 5};
    for (int c = 0; c < 3; c++) {
        grpo_error err;
        grpo_error_init(&err);
        grpo_ops *o = grpo_backend_open("cpu", counts[c], &err);
        ck_assert_ptr_nonnull(o);
        float *ao = nanv(aq), *al = nanv((size_t)3 * 4 * 80), *adq = nanv(aq), *adv = nanv(akv);
        o->attention_forward(o->ctx, ao, al, ac.q, ac.k, ac.v, ac.mask, 3, 80, 4, 2, 8);
        o->attention_backward(o->ctx, adq, NULL, adv, ar, ao, al, ac.q, ac.k, ac.v, ac.mask, 3,
                              80, 4, 2, 8);
        free(al);
        if (!first_att[0]) {
            first_att[0] = ao, first_att[1] = adq, first_att[2] = adv;
        } else {
            ck_assert_mem_eq(ao, first_att[0], aq * sizeof(float));
            ck_assert_mem_eq(adq, first_att[1], aq * sizeof(float));
            ck_assert_mem_eq(adv, first_att[2], akv * sizeof(float));
            free(ao), free(adq), free(adv);
        }
        for (int rep = 0; rep < 2; rep++) {
            float *out = nanv(no), *dinp = nanv(ni), *dw = calloc(nw, sizeof(float));
            o->matmul_forward(o->ctx, out, inp, w, NULL, N, IC, OC);
            expect_close("matmul out (threads)", out, want, no, 1e-5, 1e-4);
            o->matmul_backward(o->ctx, dinp, dw, NULL, r, inp, w, N, IC, OC);
            float *logp = nanv(HN), *lse = nanv(HN), *dh = nanv((size_t)HN * HC);
            float *hdw = calloc((size_t)HV * HC, sizeof(float));
            o->head_forward(o->ctx, logp, lse, NULL, hid, hw, tg, HN, HC, HV, 1.0f);
            o->head_backward(o->ctx, dh, hdw, dl, hid, hw, tg, lse, HN, HC, HV, 1.0f);
            if (!first_dw) {
                first_dw = dw, first_dh = dh;
            } else {
                double *a = widen(first_dw, nw), *b = widen(first_dh, (size_t)HN * HC);
                expect_close("matmul dw (threads)", dw, a, nw, 1e-5, 1e-4);
                expect_close("head dhidden (threads)", dh, b, (size_t)HN * HC, 1e-6, 1e-4);
                free(a), free(b), free(dw), free(dh);
            }
            free(out), free(dinp), free(logp), free(lse), free(hdw);
        }
        grpo_backend_close(o);
    }
    free(inp), free(w), free(r), free(want), free(ind), free(wd), free(hid), free(hw), free(tg);
    free(dl), free(first_dw), free(first_dh), free(ar);
    for (int i = 0; i < 3; i++) free(first_att[i]);
    att_free(&ac);
}
END_TEST

/* Prefix attention: the rows' dk/dv by group or by head (1 and 3 threads vs 5, as above), the
 * prefixes' dkp/dvp from per-(row, head) parts added in row and head order: the same bits. */
START_TEST(prefix_attention_bits_do_not_depend_on_thread_count) {
    rng_seed(23);
    pfx_case c = pfx_make(3, 80, 2, 40, 4, 2, 8, 11);
    const att_case *a = &c.own;
    size_t nq = (size_t)3 * 80 * 4 * 8, nkv = nq / 2, npk = (size_t)2 * 40 * 2 * 8;
    float *r = frandv(nq, 1.0f), *first[5] = {NULL, NULL, NULL, NULL, NULL};
    size_t sizes[5] = {nq, nq, nkv, npk, npk};
    int counts[3] = {1, 3, 5};
    for (int ci = 0; ci < 3; ci++) {
        grpo_error err;
        grpo_error_init(&err);
        grpo_ops *o = grpo_backend_open("cpu", counts[ci], &err);
        ck_assert_ptr_nonnull(o);
        float *got[5] = {nanv(nq), nanv(nq), nanv(nkv), calloc(npk, sizeof(float)),
                         calloc(npk, sizeof(float))};
        float *lse = nanv((size_t)3 * 4 * 80);
        o->prefix_attention_forward(o->ctx, got[0], lse, a->q, a->k, a->v, a->mask, c.kp, c.vp,
                                    c.pmask, c.prefix_of, 3, 80, 2, 40, 4, 2, 8);
        o->prefix_attention_backward(o->ctx, got[1], NULL, got[2], got[3], got[4], r, got[0], lse,
                                     a->q, a->k, a->v, a->mask, c.kp, c.vp, c.pmask, c.prefix_of,
                                     3, 80, 2, 40, 4, 2, 8);
        for (int i = 0; i < 5; i++) {
            if (!first[i]) {
                first[i] = got[i];
                continue;
            }
            ck_assert_mem_eq(got[i], first[i], sizes[i] * sizeof(float));
            free(got[i]);
        }
        free(lse);
        grpo_backend_close(o);
    }
    for (int i = 0; i < 5; i++) free(first[i]);
    free(r);
    pfx_free(&c);
}
END_TEST

/* The small-M forward splits output columns among threads; each column is the same sum in the
 * same order whatever the split, so 1, 2, 3 and 5 threads give the same bits (OC = 300: 19
 * blocks of 16, the last overlapping; M = 16, 27 and 40: one, two and three lane tiles). */
START_TEST(matmul_small_rows_same_bits_any_thread_count) {
    rng_seed(16);
    const int32_t IC = 200, OC = 300, Ms[3] = {16, 27, 40};
    float *w = frandv((size_t)OC * IC, 1.0f), *bias = frandv(OC, 1.0f);
    float *inp = frandv((size_t)40 * IC, 1.0f), *first[3] = {NULL, NULL, NULL};
    int counts[4] = {1, 2, 3, 5};
    for (int c = 0; c < 4; c++) {
        grpo_error err;
        grpo_error_init(&err);
        grpo_ops *o = grpo_backend_open("cpu", counts[c], &err);
        ck_assert_ptr_nonnull(o);
        for (int k = 0; k < 3; k++) {
            size_t no = (size_t)Ms[k] * OC;
            float *out = nanv(no);
            o->matmul_forward(o->ctx, out, inp, w, bias, Ms[k], IC, OC);
            if (!first[k]) {
                first[k] = out;
            } else {
                ck_assert_mem_eq(out, first[k], no * sizeof(float));
                free(out);
            }
        }
        grpo_backend_close(o);
    }
    free(w), free(bias), free(inp), free(first[0]), free(first[1]), free(first[2]);
}
END_TEST

START_TEST(same_thread_count_gives_same_bits) {
    rng_seed(14);
    att_case c = att_make(2, 100, 4, 2, 16, 9);
    size_t nq = (size_t)2 * 100 * 4 * 16, nkv = nq / 2, nl = (size_t)2 * 4 * 100;
    float *r = frandv(nq, 1.0f), *res[2][4];
    for (int run = 0; run < 2; run++) {
        float *out = nanv(nq), *lse = nanv(nl), *dq = nanv(nq), *dk = nanv(nkv);
        ops->attention_forward(ops->ctx, out, lse, c.q, c.k, c.v, c.mask, 2, 100, 4, 2, 16);
        ops->attention_backward(ops->ctx, dq, dk, NULL, r, out, lse, c.q, c.k, c.v, c.mask, 2,
                                100, 4, 2, 16);
        res[run][0] = out, res[run][1] = lse, res[run][2] = dq, res[run][3] = dk;
    }
    ck_assert_mem_eq(res[0][0], res[1][0], nq * sizeof(float));
    ck_assert_mem_eq(res[0][1], res[1][1], nl * sizeof(float));
    ck_assert_mem_eq(res[0][2], res[1][2], nq * sizeof(float));
    ck_assert_mem_eq(res[0][3], res[1][3], nkv * sizeof(float));
    for (int run = 0; run < 2; run++)
        for (int i = 0; i < 4; i++) free(res[run][i]);
    free(r);
    att_free(&c);
}
END_TEST

/* ---- AdamW ---------------------------------------------------------------------------------- */

START_TEST(adamw_two_steps_by_hand) {
    /* lr 0.1, beta1 0.9, beta2 0.999, eps 1e-8, weight decay 0.1 (decay factor 1 - 0.01 = 0.99).
     * Element 0: p = 1, g = 2 then 2. With a constant gradient mhat = g and vhat = g^2 at every
     * step, so each step moves by lr * g / (|g| + eps) = 0.1 * (1 - 5e-9):
     *   p1 = 0.99 - 0.0999999995 = 0.8900000005
     *   p2 = 0.8900000005 * 0.99 - 0.0999999995 = 0.781100000995
     *   m2 = 0.9 * 0.2 + 0.1 * 2 = 0.38, v2 = 0.999 * 0.004 + 0.001 * 4 = 0.007996
     * Element 1: p = -0.5, g = 1 then -1.
     *   step 1: m = 0.1, v = 0.001, mhat = 1, vhat = 1: p1 = -0.495 - 0.1/(1 + 1e-8)
     *           = -0.594999999
     *   step 2: m = 0.09 - 0.1 = -0.01, v = 0.000999 + 0.001 = 0.001999 = 1 - 0.999^2, so
     *           vhat = 1 and mhat = -0.01 / 0.19 = -1/19:
     *           p2 = -0.594999999 * 0.99 + 0.1 / 19 / (1 + 1e-8) = -0.583786841...
     *           (-0.58904999901 + 0.00526315784 = -0.58378684117)
     * Element 2: p = 3, g = 0: only the decay acts: 2.97, then 2.9403. */
    float p[3] = {1.0f, -0.5f, 3.0f}, m[3] = {0}, v[3] = {0};
    float g1[3] = {2.0f, 1.0f, 0.0f}, g2[3] = {2.0f, -1.0f, 0.0f};
    ops->adamw(ops->ctx, p, g1, m, v, 3, 0.1, 0.9, 0.999, 1e-8, 0.1, 1);
    double p1[3] = {0.8900000005, -0.594999999, 2.97};
    expect_close("adamw p after step 1", p, p1, 3, 1e-6, 1e-6);
    ops->adamw(ops->ctx, p, g2, m, v, 3, 0.1, 0.9, 0.999, 1e-8, 0.1, 2);
    double p2[3] = {0.781100000995, -0.58378684117, 2.9403};
    double m2[3] = {0.38, -0.01, 0.0}, v2[3] = {0.007996, 0.001999, 0.0};
    /* fp32: a few roundings of O(1) numbers, and m, v of one more operation each */
    expect_close("adamw p after step 2", p, p2, 3, 1e-6, 1e-6);
    expect_close("adamw m after step 2", m, m2, 3, 1e-8, 1e-6);
    expect_close("adamw v after step 2", v, v2, 3, 1e-9, 1e-6);
}
END_TEST

/* ---- PyTorch / Hugging Face fixtures -------------------------------------------------------- */

static cJSON *fixture(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/kernels/%s.json", GRPO_SOURCE_DIR, name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open fixture %s (run tools/gen_kernel_fixtures.py)", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)len + 1);
    ck_assert_ptr_nonnull(text);
    ck_assert_int_eq(fread(text, 1, (size_t)len, f), len);
    text[len] = 0;
    fclose(f);
    cJSON *doc = cJSON_Parse(text);
    free(text);
    ck_assert_msg(doc != NULL, "fixture %s: not valid JSON", path);
    return doc;
}

static double fx_dim(const cJSON *doc, const char *name) {
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "dims"),
                                                      name);
    ck_assert_msg(cJSON_IsNumber(d), "fixture: dims.%s missing", name);
    return d->valuedouble;
}

/* The array `name` of the fixture as n floats (checked), owned by the caller. */
static float *fx_floats(const cJSON *doc, const char *name, size_t n) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(doc, name);
    ck_assert_msg(cJSON_IsArray(a) && (size_t)cJSON_GetArraySize(a) == n,
                  "fixture: %s should be an array of %zu numbers", name, n);
    float *p = fvec(n);
    size_t i = 0;
    for (const cJSON *e = a->child; e; e = e->next) p[i++] = (float)e->valuedouble;
    return p;
}

static double *fx_doubles(const cJSON *doc, const char *name, size_t n) {
    float *f = fx_floats(doc, name, n);
    double *d = widen(f, n);
    free(f);
    return d;
}

static int32_t *fx_ints(const cJSON *doc, const char *name, size_t n) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(doc, name);
    ck_assert_msg(cJSON_IsArray(a) && (size_t)cJSON_GetArraySize(a) == n,
                  "fixture: %s should be an array of %zu integers", name, n);
    int32_t *p = malloc(n * sizeof(int32_t));
    ck_assert_ptr_nonnull(p);
    size_t i = 0;
    for (const cJSON *e = a->child; e; e = e->next) p[i++] = (int32_t)e->valueint;
    return p;
}

/* Compares got with the fixture's array `name`. */
static void expect_fixture(const cJSON *doc, const char *name, const float *got, size_t n,
                           double atol, double rtol) {
    double *want = fx_doubles(doc, name, n);
    expect_close(name, got, want, n, atol, rtol);
    free(want);
}

START_TEST(pytorch_matmul_and_swiglu) {
    cJSON *doc = fixture("matmul");
    int32_t N = (int32_t)fx_dim(doc, "N"), IC = (int32_t)fx_dim(doc, "IC");
    int32_t OC = (int32_t)fx_dim(doc, "OC");
    size_t ni = (size_t)N * IC, nw = (size_t)OC * IC, no = (size_t)N * OC;
    float *inp = fx_floats(doc, "inp", ni), *w = fx_floats(doc, "w", nw);
    float *bias = fx_floats(doc, "bias", OC), *dout = fx_floats(doc, "dout", no);
    float *out = nanv(no), *dinp = nanv(ni), *dw = calloc(nw, 4), *db = calloc(OC, 4);
    ops->matmul_forward(ops->ctx, out, inp, w, bias, N, IC, OC);
    ops->matmul_backward(ops->ctx, dinp, dw, db, dout, inp, w, N, IC, OC);
    expect_fixture(doc, "out", out, no, 1e-5, 1e-4);
    expect_fixture(doc, "dinp", dinp, ni, 1e-4, 1e-3);
    expect_fixture(doc, "dw", dw, nw, 1e-4, 1e-3);
    expect_fixture(doc, "dbias", db, OC, 1e-4, 1e-3);
    free(inp), free(w), free(bias), free(dout), free(out), free(dinp), free(dw), free(db);
    cJSON_Delete(doc);

    doc = fixture("swiglu");
    N = (int32_t)fx_dim(doc, "N");
    int32_t I = (int32_t)fx_dim(doc, "I");
    size_t n = (size_t)N * I;
    float *gate = fx_floats(doc, "gate", n), *up = fx_floats(doc, "up", n);
    float *d = fx_floats(doc, "dout", n), *o = nanv(n), *dg = nanv(n), *du = nanv(n);
    ops->swiglu_forward(ops->ctx, o, gate, up, N, I);
    ops->swiglu_backward(ops->ctx, dg, du, d, gate, up, N, I);
    expect_fixture(doc, "out", o, n, 1e-5, 1e-4);
    expect_fixture(doc, "dgate", dg, n, 1e-4, 1e-3);
    expect_fixture(doc, "dup", du, n, 1e-4, 1e-3);
    free(gate), free(up), free(d), free(o), free(dg), free(du);
    cJSON_Delete(doc);
}
END_TEST

START_TEST(pytorch_llama_rmsnorm_and_rope) {
    cJSON *doc = fixture("rmsnorm");
    int32_t N = (int32_t)fx_dim(doc, "N"), C = (int32_t)fx_dim(doc, "C");
    size_t n = (size_t)N * C;
    float *inp = fx_floats(doc, "inp", n), *w = fx_floats(doc, "w", C);
    float *dout = fx_floats(doc, "dout", n), *out = nanv(n), *rstd = nanv(N), *dinp = nanv(n);
    float *dw = calloc(C, 4);
    ops->rmsnorm_forward(ops->ctx, out, rstd, inp, w, N, C, (float)fx_dim(doc, "eps"));
    ops->rmsnorm_backward(ops->ctx, dinp, dw, dout, inp, w, rstd, N, C);
    expect_fixture(doc, "out", out, n, 1e-5, 1e-4);
    expect_fixture(doc, "dinp", dinp, n, 1e-4, 1e-3);
    expect_fixture(doc, "dw", dw, C, 1e-4, 1e-3);
    free(inp), free(w), free(dout), free(out), free(rstd), free(dinp), free(dw);
    cJSON_Delete(doc);

    doc = fixture("rope");
    N = (int32_t)fx_dim(doc, "N");
    int32_t NH = (int32_t)fx_dim(doc, "NH"), HD = (int32_t)fx_dim(doc, "HD");
    n = (size_t)N * NH * HD;
    int32_t *pos = fx_ints(doc, "pos", N);
    float *x = fx_floats(doc, "inp", n), *d = fx_floats(doc, "dout", n);
    float *y = nanv(n), *dx = nanv(n);
    ops->rope_forward(ops->ctx, y, x, pos, N, NH, HD, (float)fx_dim(doc, "theta"));
    ops->rope_backward(ops->ctx, dx, d, pos, N, NH, HD, (float)fx_dim(doc, "theta"));
    expect_fixture(doc, "out", y, n, 1e-4, 1e-4);
    expect_fixture(doc, "dinp", dx, n, 1e-4, 1e-4);
    free(pos), free(x), free(d), free(y), free(dx);
    cJSON_Delete(doc);
}
END_TEST

START_TEST(pytorch_gqa_attention_with_left_padding) {
    cJSON *doc = fixture("attention");
    int32_t B = (int32_t)fx_dim(doc, "B"), T = (int32_t)fx_dim(doc, "T");
    int32_t NH = (int32_t)fx_dim(doc, "NH"), NKV = (int32_t)fx_dim(doc, "NKV");
    int32_t HD = (int32_t)fx_dim(doc, "HD");
    size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD, nl = (size_t)B * NH * T;
    int32_t *mask = fx_ints(doc, "mask", (size_t)B * T);
    float *q = fx_floats(doc, "q", nq), *k = fx_floats(doc, "k", nkv);
    float *v = fx_floats(doc, "v", nkv);
    float *dout = fx_floats(doc, "dout", nq), *out = nanv(nq), *lse = nanv(nl);
    float *dq = nanv(nq), *dk = nanv(nkv), *dv = nanv(nkv);
    ops->attention_forward(ops->ctx, out, lse, q, k, v, mask, B, T, NH, NKV, HD);
    ops->attention_backward(ops->ctx, dq, dk, dv, dout, out, lse, q, k, v, mask, B, T, NH, NKV,
                            HD);
    expect_fixture(doc, "out", out, nq, 1e-5, 1e-4);
    expect_fixture(doc, "lse", lse, nl, 1e-5, 1e-4);
    expect_fixture(doc, "dq", dq, nq, 1e-4, 1e-3);
    expect_fixture(doc, "dk", dk, nkv, 1e-4, 1e-3);
    expect_fixture(doc, "dv", dv, nkv, 1e-4, 1e-3);
    free(mask), free(q), free(k), free(v), free(dout), free(out), free(lse), free(dq), free(dk);
    free(dv);
    cJSON_Delete(doc);
}
END_TEST

START_TEST(pytorch_fused_head) {
    cJSON *doc = fixture("head");
    int32_t N = (int32_t)fx_dim(doc, "N"), C = (int32_t)fx_dim(doc, "C");
    int32_t V = (int32_t)fx_dim(doc, "V");
    float scale = (float)fx_dim(doc, "scale");
    float *hidden = fx_floats(doc, "hidden", (size_t)N * C);
    float *w = fx_floats(doc, "w", (size_t)V * C);
    int32_t *targets = fx_ints(doc, "targets", N);
    float *dlogp = fx_floats(doc, "dlogp", N), *logp = nanv(N), *lse = nanv(N), *ent = nanv(N);
    float *dh = nanv((size_t)N * C), *dw = calloc((size_t)V * C, 4);
    ops->head_forward(ops->ctx, logp, lse, ent, hidden, w, targets, N, C, V, scale);
    ops->head_backward(ops->ctx, dh, dw, dlogp, hidden, w, targets, lse, N, C, V, scale);
    expect_fixture(doc, "logp", logp, N, 1e-5, 1e-5);
    /* torch computed lse and entropy for every row; ops.h skips rows without a target (0) */
    for (int32_t n = 0; n < N; n++)
        if (targets[n] < 0) {
            ck_assert(lse[n] == 0.0f && ent[n] == 0.0f);
            double *all = fx_doubles(doc, "lse", N), *ea = fx_doubles(doc, "entropy", N);
            lse[n] = (float)all[n], ent[n] = (float)ea[n];
            free(all), free(ea);
        }
    expect_fixture(doc, "lse", lse, N, 1e-5, 1e-5);
    expect_fixture(doc, "entropy", ent, N, 1e-5, 1e-4);
    expect_fixture(doc, "dhidden", dh, (size_t)N * C, 1e-4, 1e-3);
    expect_fixture(doc, "dw", dw, (size_t)V * C, 1e-5, 1e-3);
    free(hidden), free(w), free(targets), free(dlogp), free(logp), free(lse), free(ent), free(dh);
    free(dw);
    cJSON_Delete(doc);
}
END_TEST

START_TEST(pytorch_adamw_three_steps) {
    cJSON *doc = fixture("adamw");
    int32_t n = (int32_t)fx_dim(doc, "n"), steps = (int32_t)fx_dim(doc, "steps");
    float *p = fx_floats(doc, "param0", n), *g = fx_floats(doc, "grads", (size_t)steps * n);
    float *m = calloc(n, 4), *v = calloc(n, 4);
    for (int32_t t = 1; t <= steps; t++)
        ops->adamw(ops->ctx, p, g + (size_t)(t - 1) * n, m, v, n, fx_dim(doc, "lr"),
                   fx_dim(doc, "beta1"), fx_dim(doc, "beta2"), fx_dim(doc, "eps"),
                   fx_dim(doc, "weight_decay"), t);
    expect_fixture(doc, "param", p, n, 1e-7, 1e-7);
    expect_fixture(doc, "m", m, n, 1e-7, 1e-7);
    expect_fixture(doc, "v", v, n, 1e-7, 1e-7);
    free(p), free(g), free(m), free(v);
    cJSON_Delete(doc);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("cpu");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, cpu_backend_fills_every_op);
    tcase_add_test(tc, cuda_backend_opens_or_says_why);
    tcase_add_test(tc, missing_cuda_module_names_the_paths);
    tcase_add_test(tc, too_many_threads_is_refused);
    tcase_add_test(tc, memory_ops_round_trip);
    tcase_add_test(tc, large_blocks_are_huge_page_advised);
    tcase_add_test(tc, embedding_matches_reference_and_gradient);
    tcase_add_test(tc, matmul_matches_reference_and_gradient);
    tcase_add_test(tc, matmul_small_rows_match_reference);
    tcase_add_test(tc, matmul_small_rows_every_isa_path);
    tcase_add_test(tc, rmsnorm_matches_reference_and_gradient);
    tcase_add_test(tc, rope_matches_reference_at_nonzero_positions);
    tcase_add_test(tc, swiglu_matches_reference_and_gradient);
    tcase_add_test(tc, elementwise_ops_match_reference);
    tcase_add_test(tc, attention_forward_matches_reference_gqa);
    tcase_add_test(tc, attention_forward_matches_reference_hd64);
    tcase_add_test(tc, attention_padded_keys_get_no_attention);
    tcase_add_test(tc, attention_all_padding_row_is_zero);
    tcase_add_test(tc, attention_backward_finite_differences);
    tcase_add_test(tc, attention_decode_equals_last_row_of_forward);
    tcase_add_test(tc, prefix_attention_matches_the_concatenated_rows);
    tcase_add_test(tc, prefix_attention_backward_finite_differences);
    tcase_add_test(tc, head_forward_matches_reference);
    tcase_add_test(tc, head_backward_finite_differences);
    tcase_add_test(tc, head_backward_entropy_finite_differences);
    tcase_add_test(tc, fast_exp_within_2ulp);
    tcase_add_test(tc, results_do_not_depend_on_thread_count);
    tcase_add_test(tc, prefix_attention_bits_do_not_depend_on_thread_count);
    tcase_add_test(tc, matmul_small_rows_same_bits_any_thread_count);
    tcase_add_test(tc, same_thread_count_gives_same_bits);
    tcase_add_test(tc, adamw_two_steps_by_hand);
    suite_add_tcase(s, tc);
    TCase *pt = tcase_create("pytorch");
    tcase_add_checked_fixture(pt, setup, teardown);
    tcase_add_test(pt, pytorch_matmul_and_swiglu);
    tcase_add_test(pt, pytorch_llama_rmsnorm_and_rope);
    tcase_add_test(pt, pytorch_gqa_attention_with_left_padding);
    tcase_add_test(pt, pytorch_fused_head);
    tcase_add_test(pt, pytorch_adamw_three_steps);
    suite_add_tcase(s, pt);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
