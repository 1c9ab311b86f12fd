/*
 * test_gemm_bf16.c — the CPU backend's bf16-compute forward products (grpo_backend_set_compute
 * with GRPO_DTYPE_BF16: VDPBF16PS, pairs of bf16 products with fp32 accumulation; gemm_nt.c,
 * matmul_small.c, the head through gemm_nt; or, where the CPU has AMX and the OS grants it,
 * TDPBF16PS on AMX tiles, gemm_amx.c, for all three).
 *
 * Every bf16 test runs twice: on the path the backend picks (AMX where cpu_amx_bf16_ready) and
 * with GRPO_TEST_NO_AMX set (VDPBF16PS); the AMX run says in one line when it is skipped
 * because the CPU or the OS has no AMX. The properties below hold for each path on its own
 * (each is its own chain: their bits differ).
 *
 * On a CPU with avx512_bf16, for random inputs, weights (fp32, and held as bf16) and biases and
 * shapes off every tile and block size (odd IC, IC past the 256- and 512-term blocks, OC past
 * the 32-output panel and the 8-row decode block, OC < 8):
 *   - value: each output is within the rigorous bound of a sequential fp32 sum of the exact
 *     products of the bf16-rounded operands, |err| <= (IC + 2) u (sum_i |x~_i w~_i| + |b|),
 *     u = 2^-24, against a double reference on the rounded operands (x~ = bf16(x) to nearest
 *     even): a wrong pairing, a dropped term or an unrounded operand is far outside it;
 *   - near fp32: |bf16 - fp32 forward| <= 2^-7 (sum_i |x_i w_i| + |b|), the stated bf16
 *     tolerance (each product of two rounded operands is within 2^-8 (1 + 2^-9) of the exact
 *     one), and the bf16 path differs from fp32 somewhere (it ran);
 *   - invariance: a row's outputs are the same bits alone (N = 1: matmul_small.c) and in batches
 *     of N = 1 .. 260 (both paths) at any offset, at 1, 2 and 3 threads, and in a batch of 1100
 *     rows (three of AMX's packed input blocks) at 1 and 2 threads; bf16 weights give the same
 *     bits as their fp32 widening (one weight mechanism: rounding an exact bf16 is the identity);
 *   - head: a row's logp, lse, entropy are the same bits alone and among 100 rows, 1 and 2
 *     threads, and its logit is scale times the bf16 matmul_forward's output, bit for bit.
 * The backward's products (train.compute_dtype = bf16: cpu_sgemm's bf16 form), both paths:
 *   - matmul_backward's dinp and dw (accumulated into a random dw) within the stated tolerance
 *     of fp32's, |bf16 - fp32| <= (2^-7 (1 + 2^-9) + 2 (K + 2) 2^-24) sum_k |a_k b_k| (+ 2^-23
 *     |dw0|), not fp32's bits, dbias fp32's; the same bits at 1, 2 and 3 threads (a split
 *     product: the pool forked); a context back in f32 gives OpenBLAS's bits again;
 *   - head_backward's dhidden and dw within 1e-2 of fp32's (relative norm; the probabilities
 *     come from bf16 logits too), not fp32's bits, the same bits at 1, 2 and 3 threads.
 * Everywhere: bf16 compute is refused (GRPO_ERR_UNSUPPORTED naming avx512_bf16) under the ISA
 * limit AVX2 and with GRPO_TEST_NO_AVX512BF16 set, and the refusal leaves the context in f32;
 * the cuda backend (its host emulation) refuses it too.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "kernels.h"

static grpo_ops *ops;

static void setup(void) {
    grpo_error err;
    grpo_error_init(&err);
    ops = grpo_backend_open("cpu", 3, &err);
    ck_assert_msg(ops != NULL, "cpu backend: %s", err.message);
}

static void teardown(void) {
    grpo_backend_close(ops);
    ops = NULL;
}

static cpu_ctx *ctx(void) { return ops->ctx; }

/* The bf16 path under test, the loop tests' run: 0 the backend's pick (AMX where there is),
 * 1 VDPBF16PS (GRPO_TEST_NO_AMX, GRPO_TEST_BF16_PATH=dot), 2 the same chain on fp32 fmas
 * (GRPO_TEST_BF16_PATH=fma) */
static int bf16_path;

/* Sets the compute dtype; 0 (and a note) when this CPU cannot compute in bf16. */
static int compute(int32_t dtype) {
    grpo_error err;
    if (bf16_path)
        setenv("GRPO_TEST_NO_AMX", "1", 1);
    else
        unsetenv("GRPO_TEST_NO_AMX");
    if (bf16_path)
        setenv("GRPO_TEST_BF16_PATH", bf16_path == 1 ? "dot" : "fma", 1);
    else
        unsetenv("GRPO_TEST_BF16_PATH");
    grpo_error_init(&err);
    int32_t rc = grpo_backend_set_compute(ops, dtype, &err);
    if (rc != GRPO_OK) {
        ck_assert_int_eq(rc, GRPO_ERR_UNSUPPORTED);
        fprintf(stderr, "test_gemm_bf16: skipped on this CPU: %s\n", err.message);
        return 0;
    }
    return 1;
}

/* ops anew on t threads (a pool of that size: per-thread buffers are sized by it), computing
 * in dtype. */
static void reopen(int t, int32_t dtype) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_backend_close(ops);
    ops = grpo_backend_open("cpu", t, &err);
    ck_assert_msg(ops != NULL, "cpu backend: %s", err.message);
    ck_assert(compute(dtype));
}

/* The path of run i of a loop test: 0 AMX (0 and a note where the CPU or OS has none), 1 the
 * VDPBF16PS chain, 2 that chain on fp32 fmas. 0 also when bf16 is refused. */
static int path(int i) {
    bf16_path = i;
    if (!compute(GRPO_DTYPE_BF16)) return 0;
    if (!bf16_path && !ctx()->bf16_amx) {
        fprintf(stderr, "test_gemm_bf16: AMX run skipped: %s\n", cpu_amx_bf16_why());
        return 0;
    }
    ck_assert_int_eq(ctx()->bf16_fma, bf16_path == 2);
    return 1;
}

#define TEST_RNG_SEED 0x13198A2E03707344ull
#include "test_random.h"

static double rounded(float x) { return (double)grpo_bf16_to_f32(grpo_bf16_from_f32(x)); }

#define POOL 260

/* One shape: POOL input rows, w (OC,IC) fp32 (w) and its bf16 rounding (wb) with that rounding
 * widened (wr), bias. */
typedef struct mm_case {
    int32_t IC, OC;
    float *x, *w, *wr, *bias;
    uint16_t *wb;
} mm_case;

static mm_case mm_new(int32_t IC, int32_t OC) {
    size_t n = (size_t)OC * IC;
    mm_case c = {IC, OC, randv((size_t)POOL * IC), randv(n), outv(n), randv(OC), NULL};
    c.wb = malloc((n ? n : 1) * sizeof(uint16_t));
    ck_assert_ptr_nonnull(c.wb);
    for (size_t i = 0; i < n; i++) {
        c.wb[i] = grpo_bf16_from_f32(c.w[i]);
        c.wr[i] = grpo_bf16_to_f32(c.wb[i]);
    }
    return c;
}

static void mm_free(mm_case *c) { free(c->x), free(c->w), free(c->wr), free(c->bias), free(c->wb); }

/* out (N,OC) of pool rows off..off+N: w fp32 (wsel 0), widened bf16 (1), or bf16 (2) */
static void mm_run(const mm_case *c, float *out, int32_t off, int32_t N, int wsel,
                   const float *bias) {
    const float *x = c->x + (size_t)off * c->IC;
    if (wsel == 2)
        ops->matmul_forward_w(ops->ctx, out, x, c->wb, GRPO_DTYPE_BF16, bias, N, c->IC, c->OC);
    else
        ops->matmul_forward(ops->ctx, out, x, wsel ? c->wr : c->w, bias, N, c->IC, c->OC);
}

/* Row r's outputs o (bf16 compute) against the double sum of the rounded operands, and f (the
 * fp32 forward, fp32 w) within the bf16 tolerance; returns how many of them differ from f. */
static int mm_check_row(const mm_case *c, const float *o, const float *f, int32_t r,
                        const float *bias) {
    int differ = 0;
    for (int32_t j = 0; j < c->OC; j++) {
        double s = 0.0, mag = 0.0, mag32 = 0.0;
        for (int32_t i = 0; i < c->IC; i++) {
            float xi = c->x[(size_t)r * c->IC + i], wi = c->w[(size_t)j * c->IC + i];
            double t = rounded(xi) * rounded(wi);
            s += t, mag += fabs(t), mag32 += fabs((double)xi * wi);
        }
        double b = bias ? bias[j] : 0.0;
        s += b, mag += fabs(b), mag32 += fabs(b);
        double bound = (c->IC + 2.0) * 0x1p-24 * mag * 1.0001 + 1e-30;
        ck_assert_msg(fabs(o[j] - s) <= bound, "IC %d OC %d row %d out %d: %.9g vs %.9g (bound "
                      "%.3g)", c->IC, c->OC, r, j, (double)o[j], s, bound);
        double tol = 0x1p-7 * mag32 + 1e-30;
        ck_assert_msg(fabs((double)o[j] - f[j]) <= tol, "IC %d OC %d row %d out %d: bf16 %.9g, "
                      "fp32 %.9g (tolerance %.3g)", c->IC, c->OC, r, j, (double)o[j],
                      (double)f[j], tol);
        differ += o[j] != f[j];
    }
    return differ;
}

/* The properties of the header for one shape. */
static void mm_sweep(const mm_case *c) {
    const int32_t IC = c->IC, OC = c->OC;
    static const int32_t spread[] = {1, 2, 3, 11, 12, 13, 47, 48, 49, 50, 61, 97, 128, 200, 260};
    const int32_t count = (int32_t)(sizeof spread / sizeof spread[0]);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        const float *bias = with_bias ? c->bias : NULL;
        float *alone = outv((size_t)POOL * OC), *f32 = outv((size_t)POOL * OC);
        float *out = outv((size_t)POOL * OC);
        compute(GRPO_DTYPE_F32);
        mm_run(c, f32, 0, POOL, 0, bias);
        compute(GRPO_DTYPE_BF16);
        ck_assert_int_eq(ctx()->bf16_amx, !bf16_path);
        reopen(1, GRPO_DTYPE_BF16);
        for (int32_t r = 0; r < POOL; r++) mm_run(c, alone + (size_t)r * OC, r, 1, 0, bias);
        int differ = 0;
        for (int32_t r = 0; r < POOL; r += 37)
            differ += mm_check_row(c, alone + (size_t)r * OC, f32 + (size_t)r * OC, r, bias);
        ck_assert_msg(IC < 2 || differ > 0, "IC %d OC %d: bf16 compute gave the fp32 bits", IC,
                      OC);
        for (int wsel = 0; wsel < 3; wsel++)
            for (int32_t t = 1; t <= 3; t++) {
                reopen(t, GRPO_DTYPE_BF16);
                for (int32_t k = 0; k < count; k++) {
                    int32_t N = spread[k], off = (k * 37 + t + wsel) % (POOL - N + 1);
                    mm_run(c, out, off, N, wsel, bias);
                    /* wsel 0: the fp32 weight itself; 1, 2: its rounding, widened or as bf16,
                     * which must equal the fp32 weight rounded while packed */
                    for (int32_t n = 0; n < N; n++)
                        ck_assert_msg(!memcmp(out + (size_t)n * OC,
                                              alone + (size_t)(off + n) * OC,
                                              (size_t)OC * sizeof(float)),
                                      "IC %d OC %d bias %d weights %d threads %d: row %d of a "
                                      "batch of %d differs from the row alone (fp32 weights, "
                                      "1 thread)",
                                      IC, OC, with_bias, wsel, t, n, N);
                }
            }
        reopen(3, GRPO_DTYPE_F32);
        free(out), free(alone), free(f32);
    }
}

/* {IC, OC}: odd IC and OC < 8; tiles and panels off; IC past the 256-term block; a tile of more
 * than 1024 columns and 2^18 outputs (gemm_nt's 512-term block at 1 thread) */
static const int32_t shapes[][2] = {{37, 45}, {64, 96}, {1, 5}, {301, 77}, {600, 129},
                                    {5, 3}, {700, 1300}};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

START_TEST(bf16_matmul_values_and_invariance) {
    if (!path(_i)) return;
    for (int s = 0; s < NSHAPES; s++) {
        mm_case c = mm_new(shapes[s][0], shapes[s][1]);
        mm_sweep(&c);
        mm_free(&c);
    }
}
END_TEST

/* A batch of more rows than one packed block of inputs (gemm_amx.c's AMX_RB = 512: three of
 * them here, w packed once for all): each row the same bits as alone, fp32 and bf16 weights, 1
 * and 2 threads; IC and OC off the k-tile and the 32-row groups (w rounded into a copy) and on
 * them (bf16 w read in place). */
START_TEST(bf16_matmul_rows_same_in_many_row_blocks) {
    if (!path(_i)) return;
    enum { N = 1100 };
    static const int32_t big[][2] = {{130, 300}, {128, 96}};
    for (int s = 0; s < 2; s++) {
        const int32_t IC = big[s][0], OC = big[s][1];
        mm_case c = mm_new(IC, OC);
        float *x = c.x;
        c.x = randv((size_t)N * IC);
        float *alone = outv((size_t)N * OC), *out = outv((size_t)N * OC);
        for (int wsel = 0; wsel < 3; wsel += 2) {
            reopen(1, GRPO_DTYPE_BF16);
            for (int32_t r = 0; r < N; r++)
                mm_run(&c, alone + (size_t)r * OC, r, 1, wsel, c.bias);
            for (int32_t t = 1; t <= 2; t++) {
                reopen(t, GRPO_DTYPE_BF16);
                mm_run(&c, out, 0, N, wsel, c.bias);
                for (int32_t n = 0; n < N; n++)
                    ck_assert_msg(!memcmp(out + (size_t)n * OC, alone + (size_t)n * OC,
                                          (size_t)OC * sizeof(float)),
                                  "IC %d OC %d weights %d threads %d: row %d of %d differs from "
                                  "the row alone", IC, OC, wsel, t, n, N);
            }
        }
        reopen(3, GRPO_DTYPE_F32);
        free(c.x), c.x = x;
        free(alone), free(out);
        mm_free(&c);
    }
}
END_TEST

/* head_forward in bf16: a row alone and among N, 1, 2 and 3 threads; differs from fp32 */
START_TEST(bf16_head_rows_same_alone_and_in_batch) {
    if (!path(_i)) return;
    enum { N = 100, C = 301, V = 1100 };
    float *h = randv((size_t)N * C), *w = randv((size_t)V * C);
    uint16_t *wb = malloc((size_t)V * C * sizeof(uint16_t));
    ck_assert_ptr_nonnull(wb);
    for (size_t i = 0; i < (size_t)V * C; i++) wb[i] = grpo_bf16_from_f32(w[i]);
    int32_t tg[N];
    for (int32_t n = 0; n < N; n++)
        tg[n] = n % 7 == 3 ? -1 : (int32_t)((frand() + 1.0f) * 0.5f * (float)V) % V;
    float one[3][N], all[3][N], f32[3][N];
    compute(GRPO_DTYPE_F32);
    ops->head_forward(ops->ctx, f32[0], f32[1], f32[2], h, w, tg, N, C, V, 0.7f);
    compute(GRPO_DTYPE_BF16);
    for (int bf16w = 0; bf16w < 2; bf16w++)
        for (int32_t t = 1; t <= 3; t++) {
            reopen(t, GRPO_DTYPE_BF16);
            for (int32_t n = 0; n < N; n++) {
                if (tg[n] < 0) continue;
                const float *hn = h + (size_t)n * C;
                ops->head_forward_w(ops->ctx, &one[0][n], &one[1][n], &one[2][n], hn,
                                    bf16w ? (const void *)wb : w,
                                    bf16w ? GRPO_DTYPE_BF16 : GRPO_DTYPE_F32, &tg[n], 1, C, V,
                                    0.7f);
            }
            ops->head_forward_w(ops->ctx, all[0], all[1], all[2], h,
                                bf16w ? (const void *)wb : w,
                                bf16w ? GRPO_DTYPE_BF16 : GRPO_DTYPE_F32, tg, N, C, V, 0.7f);
            int differ = 0;
            for (int32_t n = 0; n < N; n++) {
                if (tg[n] < 0) continue;
                ck_assert_msg(isfinite(one[0][n]) && fabsf(one[0][n] - f32[0][n]) < 0.05f,
                              "row %d: logp %g, fp32 %g", n, (double)one[0][n],
                              (double)f32[0][n]);
                differ += one[0][n] != f32[0][n];
                for (int k = 0; k < 3; k++)
                    ck_assert_msg(!memcmp(&one[k][n], &all[k][n], sizeof(float)),
                                  "bf16 w %d threads %d row %d: output %d alone %.9g, among %d "
                                  "%.9g", bf16w, t, n, k, (double)one[k][n], N,
                                  (double)all[k][n]);
            }
            ck_assert_msg(differ > 0, "bf16 head gave the fp32 log-probs");
        }
    reopen(3, GRPO_DTYPE_F32);
    free(h), free(w), free(wb);
}
END_TEST

/* With one vocabulary entry lse is the logit: scale times the bf16 matmul_forward's output */
START_TEST(bf16_head_logit_is_matmul_forward_times_scale) {
    if (!path(_i)) return;
    enum { N = 100, C = 600 };
    float *h = randv((size_t)N * C), *w = randv(C), lse[N], logp[N];
    int32_t tg[N];
    for (int32_t n = 0; n < N; n++) tg[n] = 0;
    ops->head_forward(ops->ctx, logp, lse, NULL, h, w, tg, N, C, 1, 0.7f);
    for (int32_t n = 0; n < N; n++) {
        float y, z;
        ops->matmul_forward(ops->ctx, &y, h + (size_t)n * C, w, NULL, 1, C, 1);
        z = 0.7f * y;
        ck_assert_msg(!memcmp(&z, &lse[n], sizeof z), "row %d: head logit %.9g, 0.7 * "
                      "matmul_forward %.9g", n, (double)lse[n], (double)z);
    }
    compute(GRPO_DTYPE_F32);
    free(h), free(w);
}
END_TEST

/* ---- the backward's products (cpu_sgemm's bf16 form: train.compute_dtype = bf16) ---------- */

/* The stated tolerance of a bf16 product against fp32: each operand rounded to bf16 (8
 * significant bits, relative error <= 2^-8) makes each product within 2^-7 (1 + 2^-9) of the
 * exact one, and both sides' fp32 sums of K terms are within (K + 2) 2^-24 of theirs, so
 *   |bf16 - fp32| <= (2^-7 (1 + 2^-9) + 2 (K + 2) 2^-24) sum_k |a_k b_k| + 2^-23 |c0|
 * (c0: the value accumulated into): about 7.8e-3 of the sum of magnitudes (a bound; the
 * errors of random data mostly cancel). */
static double bwd_tol(int32_t K, double mag, double c0) {
    return (0x1p-7 * (1 + 0x1p-9) + 2.0 * (K + 2) * 0x1p-24) * mag + 0x1p-23 * fabs(c0) + 1e-30;
}

/* One backward case: dout (N,OC), inp (N,IC), w (OC,IC); dw starts at dw0. */
typedef struct bwd_case {
    int32_t N, IC, OC;
    float *dout, *inp, *w, *dw0;
} bwd_case;

static bwd_case bwd_new(int32_t N, int32_t IC, int32_t OC) {
    bwd_case c = {N, IC, OC, randv((size_t)N * OC), randv((size_t)N * IC), randv((size_t)OC * IC),
                  randv((size_t)OC * IC)};
    return c;
}

static void bwd_free(bwd_case *c) { free(c->dout), free(c->inp), free(c->w), free(c->dw0); }

/* matmul_backward of c: dinp (N,IC) written, dw (OC,IC) = dw0 + the product, dbias (OC) */
static void bwd_run(const bwd_case *c, float *dinp, float *dw, float *dbias) {
    memcpy(dw, c->dw0, (size_t)c->OC * c->IC * sizeof(float));
    memset(dbias, 0, (size_t)c->OC * sizeof(float));
    ops->matmul_backward(ops->ctx, dinp, dw, dbias, c->dout, c->inp, c->w, c->N, c->IC, c->OC);
}

/* bf16's dinp and dw (b) against fp32's (f) within bwd_tol; dbias the same bits (a plain fp32
 * sum in both); returns how many outputs differ from fp32's. */
static int bwd_check(const bwd_case *c, const float *bi, const float *bw, const float *bb,
                     const float *fi, const float *fw, const float *fb) {
    const int32_t N = c->N, IC = c->IC, OC = c->OC;
    int differ = 0;
    for (int32_t n = 0; n < N; n++)
        for (int32_t i = 0; i < IC; i++) {
            double mag = 0.0;
            for (int32_t o = 0; o < OC; o++)
                mag += fabs((double)c->dout[(size_t)n * OC + o] * c->w[(size_t)o * IC + i]);
            size_t k = (size_t)n * IC + i;
            ck_assert_msg(fabs((double)bi[k] - fi[k]) <= bwd_tol(OC, mag, 0.0),
                          "N %d IC %d OC %d dinp[%d][%d]: bf16 %.9g, fp32 %.9g", N, IC, OC, n, i,
                          (double)bi[k], (double)fi[k]);
            differ += bi[k] != fi[k];
        }
    for (int32_t o = 0; o < OC; o++)
        for (int32_t i = 0; i < IC; i++) {
            double mag = 0.0;
            for (int32_t n = 0; n < N; n++)
                mag += fabs((double)c->dout[(size_t)n * OC + o] * c->inp[(size_t)n * IC + i]);
            size_t k = (size_t)o * IC + i;
            ck_assert_msg(fabs((double)bw[k] - fw[k]) <= bwd_tol(N, mag, c->dw0[k]),
                          "N %d IC %d OC %d dw[%d][%d]: bf16 %.9g, fp32 %.9g", N, IC, OC, o, i,
                          (double)bw[k], (double)fw[k]);
            differ += bw[k] != fw[k];
        }
    ck_assert(!memcmp(bb, fb, (size_t)OC * sizeof(float)));
    return differ;
}

/* {N, IC, OC}: odd sizes off every tile, panel and k-tile; N past the decode block and the
 * 256-term block (dw's reduction runs over N); a case large enough for 2 threads to split */
static const int32_t bwd_shapes[][3] = {{97, 37, 45}, {49, 301, 77}, {300, 64, 129},
                                        {600, 130, 33}, {5, 3, 1}};
#define NBWD ((int)(sizeof bwd_shapes / sizeof bwd_shapes[0]))

/* matmul_backward in bf16: dinp and dw within the stated tolerance of fp32 and not its bits,
 * dbias fp32's; the same bits at 1, 2 and 3 threads (2 threads did split the work: the pool
 * forked for it). */
START_TEST(bf16_matmul_backward_near_fp32_and_thread_invariant) {
    if (!path(_i)) return;
    for (int s = 0; s < NBWD; s++) {
        bwd_case c = bwd_new(bwd_shapes[s][0], bwd_shapes[s][1], bwd_shapes[s][2]);
        size_t ni = (size_t)c.N * c.IC, nw = (size_t)c.OC * c.IC;
        float *fi = outv(ni), *fw = outv(nw), *fb = outv(c.OC);
        float *bi = outv(ni), *bw = outv(nw), *bb = outv(c.OC);
        float *ti = outv(ni), *tw = outv(nw), *tb = outv(c.OC);
        reopen(1, GRPO_DTYPE_F32);
        bwd_run(&c, fi, fw, fb);
        reopen(1, GRPO_DTYPE_BF16);
        bwd_run(&c, bi, bw, bb);
        int differ = bwd_check(&c, bi, bw, bb, fi, fw, fb);
        ck_assert_msg(differ > 0, "N %d IC %d OC %d: bf16 backward gave the fp32 bits", c.N,
                      c.IC, c.OC);
        for (int32_t t = 2; t <= 3; t++) {
            reopen(t, GRPO_DTYPE_BF16);
            bwd_run(&c, ti, tw, tb);
            ck_assert_msg(!memcmp(ti, bi, ni * sizeof(float)) &&
                              !memcmp(tw, bw, nw * sizeof(float)),
                          "N %d IC %d OC %d: %d threads differ from 1", c.N, c.IC, c.OC, t);
            if ((double)c.N * c.IC * c.OC / 64.0 >= CPU_MIN_PARALLEL_WORK)
                ck_assert_msg(ctx()->stats.forks[CPU_FAM_GEMM_FWD] > 0,
                              "N %d IC %d OC %d: %d threads never split the product", c.N, c.IC,
                              c.OC, t);
        }
        reopen(3, GRPO_DTYPE_F32);
        free(fi), free(fw), free(fb), free(bi), free(bw), free(bb), free(ti), free(tw), free(tb);
        bwd_free(&c);
    }
}
END_TEST

/* The fp32 backward is OpenBLAS's, as before: a context set back to f32 after bf16 gives the
 * bits of one that never computed in bf16. */
START_TEST(fp32_matmul_backward_unchanged_after_bf16) {
    if (!path(_i)) return;
    bwd_case c = bwd_new(97, 37, 45);
    size_t ni = (size_t)c.N * c.IC, nw = (size_t)c.OC * c.IC;
    float *fi = outv(ni), *fw = outv(nw), *fb = outv(c.OC);
    float *gi = outv(ni), *gw = outv(nw), *gb = outv(c.OC);
    reopen(1, GRPO_DTYPE_F32);
    bwd_run(&c, fi, fw, fb);
    compute(GRPO_DTYPE_BF16);
    bwd_run(&c, gi, gw, gb);
    compute(GRPO_DTYPE_F32);
    bwd_run(&c, gi, gw, gb);
    ck_assert(!memcmp(fi, gi, ni * sizeof(float)) && !memcmp(fw, gw, nw * sizeof(float)));
    free(fi), free(fw), free(fb), free(gi), free(gw), free(gb);
    bwd_free(&c);
}
END_TEST

/* |a - b| / |b| over n values (norms) */
static double rel_diff(const float *a, const float *b, size_t n) {
    double d = 0.0, m = 0.0;
    for (size_t i = 0; i < n; i++)
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), m += (double)b[i] * b[i];
    return sqrt(d / (m > 0 ? m : 1e-300));
}

/* head_backward in bf16: dhidden and dw near fp32's (relative norm of the difference < 1e-2:
 * the softmax's probabilities come from bf16 logits too, so no per-product bound holds), not
 * their bits, and the same bits at 1, 2 and 3 threads. */
START_TEST(bf16_head_backward_near_fp32_and_thread_invariant) {
    if (!path(_i)) return;
    enum { N = 120, C = 301, V = 1100 };
    float *h = randv((size_t)N * C), *w = randv((size_t)V * C), *dl = randv(N);
    for (size_t i = 0; i < (size_t)V * C; i++) w[i] *= 0.1f; /* logits of a few units */
    int32_t tg[N];
    for (int32_t n = 0; n < N; n++)
        tg[n] = n % 7 == 3 ? -1 : (int32_t)((frand() + 1.0f) * 0.5f * (float)V) % V;
    float lse[N], logp[N];
    float *dh[4], *dw[4];
    for (int32_t t = 0; t <= 3; t++) { /* t = 0: fp32, 1 thread */
        reopen(t ? t : 1, t ? GRPO_DTYPE_BF16 : GRPO_DTYPE_F32);
        dh[t] = outv((size_t)N * C), dw[t] = calloc((size_t)V * C, sizeof(float));
        ops->head_forward(ops->ctx, logp, lse, NULL, h, w, tg, N, C, V, 0.7f);
        ops->head_backward(ops->ctx, dh[t], dw[t], dl, h, w, tg, lse, N, C, V, 0.7f);
    }
    double eh = rel_diff(dh[1], dh[0], (size_t)N * C), ew = rel_diff(dw[1], dw[0], (size_t)V * C);
    ck_assert_msg(eh < 1e-2 && ew < 1e-2 && eh > 0 && ew > 0,
                  "bf16 head backward: dhidden %.3g, dw %.3g from fp32 (expected in (0, 1e-2))",
                  eh, ew);
    for (int32_t t = 2; t <= 3; t++)
        ck_assert_msg(!memcmp(dh[t], dh[1], (size_t)N * C * sizeof(float)) &&
                          !memcmp(dw[t], dw[1], (size_t)V * C * sizeof(float)),
                      "bf16 head backward: %d threads differ from 1", t);
    reopen(3, GRPO_DTYPE_F32);
    for (int32_t t = 0; t <= 3; t++) free(dh[t]), free(dw[t]);
    free(h), free(w), free(dl);
}
END_TEST

/* Where the CPU has AMX and the OS grants it, bf16 compute runs on it, and GRPO_TEST_NO_AMX
 * moves it to VDPBF16PS; elsewhere it never does (and the line says why). */
START_TEST(bf16_on_amx_where_granted) {
    bf16_path = 0;
    if (!compute(GRPO_DTYPE_BF16)) return;
    if (!cpu_amx_bf16_ready()) {
        fprintf(stderr, "test_gemm_bf16: no AMX here: %s\n", cpu_amx_bf16_why());
        ck_assert_int_eq(ctx()->bf16_amx, 0);
        return;
    }
    ck_assert_int_eq(ctx()->bf16_amx, 1);
    bf16_path = 1;
    ck_assert(compute(GRPO_DTYPE_BF16));
    ck_assert_int_eq(ctx()->bf16_amx, 0);
    bf16_path = 0;
    compute(GRPO_DTYPE_F32);
    unsetenv("GRPO_TEST_NO_AMX");
}
END_TEST

/* Without AMX, bf16 runs on fp32 fmas on Intel cores and on VDPBF16PS elsewhere
 * (cpu_bf16_fma), and the two are one chain: for inputs and weights (fp32, and bf16 read in
 * place) with magnitudes from 2^-140 (denormal as bf16: VDPBF16PS takes them as 0) and products
 * below the normal range to 2^60, signed zeros and cancelling terms, whole rows whose sums are
 * denormal (VDPBF16PS flushes them to 0) or whose terms are, the forward of 1..260 rows
 * (the decode rows of matmul_small.c and gemm_nt.c's tiles), with and without bias, and the
 * backward's dinp and dw (transposed operands, dw accumulated) give the same bits on both, at 1
 * and 3 threads. */
static float wild(void) {
    static const int scales[] = {0, -140, -126, -70, -64, -40, -20, 0, 0, 0, 20, 60};
    float v = frand();
    int k = (int)((frand() + 1.0f) * 0.5f * (float)(sizeof scales / sizeof scales[0]));
    if (k >= (int)(sizeof scales / sizeof scales[0])) k = 1;
    if (k <= 0) return frand() < 0.0f ? -0.0f : 0.0f;
    return ldexpf(v, scales[k]);
}

static float *wildv(size_t n) {
    float *v = malloc((n ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < n; i++) v[i] = wild();
    return v;
}

/* the batches of both_run's forward, BOTH_ROWS rows in all */
static const int32_t both_rows[] = {1, 3, 8, 16, 17, 48, 49, 260};
#define BOTH_ROWS (1 + 3 + 8 + 16 + 17 + 48 + 49 + 260)

/* forward (batches of both_rows of x's first rows, fp32 w and bf16 wb) and backward of one shape
 * on path p */
static void both_run(int p, int32_t t, int32_t IC, int32_t OC, const float *x, const float *w,
                     const uint16_t *wb, const float *bias, const bwd_case *bc, float *fw,
                     float *fb, float *di, float *dw, float *db) {
    bf16_path = p;
    reopen(t, GRPO_DTYPE_BF16);
    size_t at = 0;
    for (size_t k = 0; k < sizeof both_rows / sizeof both_rows[0]; k++) {
        const int32_t *rows = both_rows;
        ops->matmul_forward(ops->ctx, fw + at, x, w, bias, rows[k], IC, OC);
        ops->matmul_forward_w(ops->ctx, fb + at, x, wb, GRPO_DTYPE_BF16, NULL, rows[k], IC, OC);
        at += (size_t)rows[k] * OC;
    }
    bwd_run(bc, di, dw, db);
}

START_TEST(bf16_fma_chain_is_the_vdpbf16ps_chain) {
    bf16_path = 1;
    if (!compute(GRPO_DTYPE_BF16)) return;
    static const int32_t shapes2[][2] = {{37, 45}, {64, 96}, {301, 77}, {600, 40}};
    for (size_t s = 0; s < sizeof shapes2 / sizeof shapes2[0]; s++) {
        const int32_t IC = shapes2[s][0], OC = shapes2[s][1], N = BOTH_ROWS;
        float *x = wildv((size_t)260 * IC), *w = wildv((size_t)OC * IC), *bias = wildv(OC);
        /* whole rows small enough for their sums to be denormal (flushed by VDPBF16PS) or for
         * their terms to be denormal as bf16 (taken as 0) */
        for (int32_t r = 0; r < 260; r++)
            for (int32_t i = 0; i < IC && r % 7 >= 5; i++)
                x[(size_t)r * IC + i] = ldexpf(frand(), r % 7 == 5 ? -70 : -130);
        for (int32_t o = 0; o < OC; o += 5)
            for (int32_t i = 0; i < IC; i++) w[(size_t)o * IC + i] = ldexpf(frand(), -64);
        uint16_t *wb = malloc((size_t)OC * IC * sizeof *wb);
        ck_assert_ptr_nonnull(wb);
        for (size_t i = 0; i < (size_t)OC * IC; i++) wb[i] = grpo_bf16_from_f32(w[i]);
        bwd_case bc = {97, IC, OC, wildv((size_t)97 * OC), wildv((size_t)97 * IC), w,
                       wildv((size_t)OC * IC)};
        float *out[2][5];
        size_t len[5] = {(size_t)N * OC, (size_t)N * OC, (size_t)97 * IC, (size_t)OC * IC,
                         (size_t)OC};
        for (int32_t t = 1; t <= 3; t += 2) {
            for (int p = 0; p < 2; p++) {
                for (int k = 0; k < 5; k++) out[p][k] = outv(len[k]);
                both_run(p + 1, t, IC, OC, x, w, wb, bias, &bc, out[p][0], out[p][1],
                         out[p][2], out[p][3], out[p][4]);
                ck_assert_int_eq(ctx()->bf16_fma, p);
            }
            static const char *const what[5] = {"forward (fp32 w)", "forward (bf16 w)", "dinp",
                                                "dw", "dbias"};
            for (int k = 0; k < 5; k++) {
                size_t diff = 0, first = 0;
                for (size_t i = len[k]; i-- > 0;)
                    if (memcmp(&out[0][k][i], &out[1][k][i], sizeof(float))) diff++, first = i;
                ck_assert_msg(diff == 0, "IC %d OC %d threads %d %s: %zu of %zu differ, first "
                              "at %zu: VDPBF16PS %a, fmas %a", IC, OC, t, what[k], diff, len[k],
                              first, (double)out[0][k][first], (double)out[1][k][first]);
            }
            for (int p = 0; p < 2; p++)
                for (int k = 0; k < 5; k++) free(out[p][k]);
        }
        free(bc.dout), free(bc.inp), free(bc.dw0), free(x), free(w), free(bias), free(wb);
    }
    bf16_path = 0;
    reopen(3, GRPO_DTYPE_F32);
}
END_TEST

/* Asserts that bf16 compute is refused now, naming the instruction set, and leaves f32. */
static void assert_refused(const char *why) {
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_backend_set_compute(ops, GRPO_DTYPE_BF16, &err), GRPO_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "avx512_bf16") != NULL, "%s: %s", why, err.message);
    ck_assert_int_eq(ctx()->compute_dtype, GRPO_DTYPE_F32);
}

START_TEST(bf16_refused_without_the_instructions) {
    ctx()->simd_limit = CPU_SIMD_AVX2;
    assert_refused("ISA limited to AVX2");
    ctx()->simd_limit = CPU_SIMD_ANY;
    setenv("GRPO_TEST_NO_AVX512BF16", "1", 1);
    assert_refused("GRPO_TEST_NO_AVX512BF16");
    unsetenv("GRPO_TEST_NO_AVX512BF16");
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_backend_set_compute(ops, GRPO_DTYPE_F32, &err), GRPO_OK);
}
END_TEST

/* The cuda backend (its host emulation here) computes per pass in f32 only: bf16 is refused,
 * naming the backend, f32 accepted. Skipped where the emulation module is not built. */
START_TEST(bf16_refused_on_the_cuda_backend) {
    setenv("GRPO_CUDA_EMULATION", "1", 1);
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *cuda = grpo_backend_open("cuda", 1, &err);
    unsetenv("GRPO_CUDA_EMULATION");
    if (!cuda) {
        fprintf(stderr, "test_gemm_bf16: no cuda emulation here: %s\n", err.message);
        return;
    }
    ck_assert_int_eq(grpo_backend_set_compute(cuda, GRPO_DTYPE_BF16, &err), GRPO_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "backend 'cuda'") != NULL, "%s", err.message);
    ck_assert_int_eq(grpo_backend_set_compute(cuda, GRPO_DTYPE_F32, &err), GRPO_OK);
    grpo_backend_close(cuda);
}
END_TEST

int main(void) {
    Suite *s = suite_create("gemm_bf16");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, bf16_matmul_values_and_invariance, 0, 3);
    tcase_add_loop_test(tc, bf16_matmul_rows_same_in_many_row_blocks, 0, 3);
    tcase_add_loop_test(tc, bf16_head_rows_same_alone_and_in_batch, 0, 3);
    tcase_add_loop_test(tc, bf16_head_logit_is_matmul_forward_times_scale, 0, 3);
    tcase_add_loop_test(tc, bf16_matmul_backward_near_fp32_and_thread_invariant, 0, 3);
    tcase_add_loop_test(tc, fp32_matmul_backward_unchanged_after_bf16, 0, 3);
    tcase_add_loop_test(tc, bf16_head_backward_near_fp32_and_thread_invariant, 0, 3);
    tcase_add_test(tc, bf16_on_amx_where_granted);
    tcase_add_test(tc, bf16_fma_chain_is_the_vdpbf16ps_chain);
    tcase_add_test(tc, bf16_refused_without_the_instructions);
    tcase_add_test(tc, bf16_refused_on_the_cuda_backend);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
