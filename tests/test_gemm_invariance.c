/*
 * test_gemm_invariance.c — the CPU backend's forward products are batch-invariant (issue 32):
 * a row's outputs are the same bits whatever else is computed with it.
 *
 * matmul_forward takes matmul_small.c for N <= CPU_SMALL_M (48) and gemm_nt.c above; both must
 * make every output the one sequential chain over the reduction, so for random inputs, weights
 * and biases and shapes with IC and OC off every tile and block size (IC past the 256-term block,
 * OC past the 32-output panel, and past 1024 where the block size changes), the rows of a batch
 * of N equal (memcmp) the same rows computed alone (N = 1, the small path) and placed elsewhere
 * in other batches, for N = 1 .. 260, at 1 and 2 threads, with the ISA limited to AVX2 and to
 * the baseline too (the chain is fma or mul+add by ISA: each limit is compared with itself).
 * A few rows' values are checked against a double reference within the rigorous bound of a
 * sequential fp32 sum, |err| <= (IC + 1) u (sum_i |x_i w_i| + |b|), u = 2^-24: a wrong index or
 * a dropped term is off by O(1e-1).
 * bf16 weights (matmul_forward_w): the same properties, and the same bits as the fp32 forward
 * of the widened weight. The fused head (head_forward, head_forward_w): a row's logp, lse and
 * entropy are the same bits alone and among 100 rows (some without target), at 1 and 2 threads,
 * and its logits are scale times matmul_forward's outputs, bit for bit.
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
    ops = grpo_backend_open("cpu", 2, &err);
    ck_assert_msg(ops != NULL, "cpu backend: %s", err.message);
}

static void teardown(void) {
    grpo_backend_close(ops);
    ops = NULL;
}

static cpu_ctx *ctx(void) { return ops->ctx; }

#define TEST_RNG_SEED 0x243F6A8885A308D3ull
#include "test_random.h"

/* ---- matmul_forward ------------------------------------------------------------------------ */

#define POOL 260 /* input rows the batches are cut from */

/* One shape: POOL input rows, w (OC,IC) as fp32 (wf, the widened bf16 when wb) and bf16 (wb or
 * NULL), bias. */
typedef struct mm_case {
    int32_t IC, OC;
    float *x, *wf, *bias;
    uint16_t *wb;
} mm_case;

static mm_case mm_new(int32_t IC, int32_t OC, int bf16) {
    mm_case c = {IC, OC, randv((size_t)POOL * IC), randv((size_t)OC * IC), randv(OC), NULL};
    if (bf16) {
        c.wb = malloc((size_t)OC * IC * sizeof(uint16_t));
        ck_assert_ptr_nonnull(c.wb);
        for (size_t i = 0; i < (size_t)OC * IC; i++) {
            c.wb[i] = grpo_bf16_from_f32(c.wf[i]);
            c.wf[i] = grpo_bf16_to_f32(c.wb[i]);
        }
    }
    return c;
}

static void mm_free(mm_case *c) { free(c->x), free(c->wf), free(c->bias), free(c->wb); }

/* out (N,OC) of pool rows off..off+N through matmul_forward (fp32 w) or matmul_forward_w (bf16) */
static void mm_run(const mm_case *c, float *out, int32_t off, int32_t N, int bf16,
                   const float *bias) {
    const float *x = c->x + (size_t)off * c->IC;
    if (bf16)
        ops->matmul_forward_w(ops->ctx, out, x, c->wb, GRPO_DTYPE_BF16, bias, N, c->IC, c->OC);
    else
        ops->matmul_forward(ops->ctx, out, x, c->wf, bias, N, c->IC, c->OC);
}

/* Asserts the outputs of pool row r against the double reference and the sequential-sum bound */
static void mm_check_value(const mm_case *c, const float *o, int32_t r, const float *bias) {
    for (int32_t j = 0; j < c->OC; j++) {
        double s = 0.0, mag = 0.0;
        for (int32_t i = 0; i < c->IC; i++) {
            double t = (double)c->x[(size_t)r * c->IC + i] * c->wf[(size_t)j * c->IC + i];
            s += t, mag += fabs(t);
        }
        if (bias) s += bias[j], mag += fabs(bias[j]);
        double bound = (c->IC + 1.0) * 0x1p-24 * mag * 1.0001 + 1e-30;
        ck_assert_msg(fabs(o[j] - s) <= bound, "row %d out %d: %.9g vs %.9g (bound %.3g)", r, j,
                      (double)o[j], s, bound);
    }
}

/* Every row of batches of N = 1..POOL (all N when every_n, else a spread of them) at a moving
 * offset equals the row computed alone, at 1 and 2 threads, for the context's ISA limit. */
static void mm_sweep(const mm_case *c, int bf16, int every_n) {
    const int32_t IC = c->IC, OC = c->OC;
    static const int32_t spread[] = {1, 2, 3, 11, 12, 13, 47, 48, 49, 50, 61, 97, 128, 200, 260};
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        const float *bias = with_bias ? c->bias : NULL;
        float *alone = outv((size_t)POOL * OC);
        ctx()->threads = 1;
        for (int32_t r = 0; r < POOL; r++) mm_run(c, alone + (size_t)r * OC, r, 1, bf16, bias);
        for (int32_t r = 0; r < POOL; r += 67) mm_check_value(c, alone + (size_t)r * OC, r, bias);
        if (bf16) { /* the same bits as the fp32 forward of the widened weight */
            float *f = outv((size_t)POOL * OC);
            ops->matmul_forward(ops->ctx, f, c->x, c->wf, bias, POOL, IC, OC);
            ck_assert_msg(!memcmp(f, alone, (size_t)POOL * OC * sizeof(float)),
                          "bf16 forward differs from fp32 on the widened weight (IC %d OC %d)",
                          IC, OC);
            free(f);
        }
        int32_t count = every_n ? POOL : (int32_t)(sizeof spread / sizeof spread[0]);
        float *out = outv((size_t)POOL * OC);
        for (int32_t t = 1; t <= 2; t++) {
            ctx()->threads = t;
            for (int32_t k = 0; k < count; k++) {
                int32_t N = every_n ? k + 1 : spread[k], off = (k * 37 + t) % (POOL - N + 1);
                mm_run(c, out, off, N, bf16, bias);
                for (int32_t n = 0; n < N; n++)
                    ck_assert_msg(!memcmp(out + (size_t)n * OC, alone + (size_t)(off + n) * OC,
                                          (size_t)OC * sizeof(float)),
                                  "IC %d OC %d bias %d bf16 %d limit %d threads %d: row %d of a "
                                  "batch of %d differs from the row alone",
                                  IC, OC, with_bias, bf16, ctx()->simd_limit, t, n, N);
            }
        }
        ctx()->threads = 2;
        free(out), free(alone);
    }
}

/* the last: a tile of more than 1024 columns and 2^18 outputs takes gemm_nt's wide KC (512)
 * at 1 thread, the narrow one (256) in halves at 2 */
static const int32_t shapes[][2] = {{37, 45}, {64, 96}, {300, 77}, {600, 129}, {5, 33},
                                    {40, 5}, {700, 1300}};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

static void mm_all_shapes(int bf16) {
    for (int s = 0; s < NSHAPES; s++) {
        mm_case c = mm_new(shapes[s][0], shapes[s][1], bf16);
        mm_sweep(&c, bf16, s == 0);
        mm_free(&c);
    }
}

START_TEST(matmul_rows_same_in_every_batch) {
    mm_all_shapes(0);
}
END_TEST

START_TEST(matmul_rows_same_in_every_batch_every_isa) {
    const int32_t limits[2] = {CPU_SIMD_AVX2, CPU_SIMD_BASE};
    for (int k = 0; k < 2; k++) {
        ctx()->simd_limit = limits[k];
        mm_all_shapes(0);
    }
    ctx()->simd_limit = CPU_SIMD_ANY;
}
END_TEST

START_TEST(matmul_bf16_rows_same_in_every_batch) {
    const int32_t limits[3] = {CPU_SIMD_ANY, CPU_SIMD_AVX2, CPU_SIMD_BASE};
    for (int k = 0; k < 3; k++) {
        ctx()->simd_limit = limits[k];
        mm_all_shapes(1);
    }
    ctx()->simd_limit = CPU_SIMD_ANY;
}
END_TEST

/* The baseline chain is a product then a sum, the others an fma: on a CPU with fma the two
 * differ somewhere (else the ISA sweep above would not test two kernels). The backend is
 * optimised in every build type (CMakeLists.txt): at -O0 GCC would form no fma at all. */
START_TEST(isa_paths_are_different_chains) {
    if (cpu_simd_level(CPU_SIMD_ANY) == CPU_SIMD_BASE) return;
    mm_case c = mm_new(600, 129, 0);
    float *a = outv((size_t)POOL * c.OC), *b = outv((size_t)POOL * c.OC);
    mm_run(&c, a, 0, POOL, 0, c.bias);
    ctx()->simd_limit = CPU_SIMD_BASE;
    mm_run(&c, b, 0, POOL, 0, c.bias);
    ctx()->simd_limit = CPU_SIMD_ANY;
    ck_assert_msg(memcmp(a, b, (size_t)POOL * c.OC * sizeof(float)) != 0,
                  "fma and mul+add chains gave the same bits on %d outputs", POOL * c.OC);
    free(a), free(b);
    mm_free(&c);
}
END_TEST

/* ---- head_forward ------------------------------------------------------------------------- */

/* logp, lse and entropy of each of the 100 rows alone equal those of the rows among 100 (every
 * 7th without a target), at 1 and 2 threads, fp32 and bf16 weights. */
static void head_sweep(int bf16) {
    enum { N = 100, C = 72, V = 1100 }; /* V: two full vocab chunks of 512 and a part */
    float *h = randv((size_t)N * C), *w = randv((size_t)V * C);
    uint16_t *wb = malloc((size_t)V * C * sizeof(uint16_t));
    ck_assert_ptr_nonnull(wb);
    for (size_t i = 0; i < (size_t)V * C; i++) wb[i] = grpo_bf16_from_f32(w[i]);
    int32_t tg[N];
    for (int32_t n = 0; n < N; n++)
        tg[n] = n % 7 == 3 ? -1 : (int32_t)((frand() + 1.0f) * 0.5f * (float)V) % V;
    float one[3][N], all[3][N];
    for (int32_t t = 1; t <= 2; t++) {
        ctx()->threads = t;
        for (int32_t n = 0; n < N; n++) {
            if (tg[n] < 0) continue;
            const float *hn = h + (size_t)n * C;
            if (bf16)
                ops->head_forward_w(ops->ctx, &one[0][n], &one[1][n], &one[2][n], hn, wb,
                                    GRPO_DTYPE_BF16, &tg[n], 1, C, V, 0.7f);
            else
                ops->head_forward(ops->ctx, &one[0][n], &one[1][n], &one[2][n], hn, w, &tg[n],
                                  1, C, V, 0.7f);
        }
        if (bf16)
            ops->head_forward_w(ops->ctx, all[0], all[1], all[2], h, wb, GRPO_DTYPE_BF16, tg, N,
                                C, V, 0.7f);
        else
            ops->head_forward(ops->ctx, all[0], all[1], all[2], h, w, tg, N, C, V, 0.7f);
        for (int32_t n = 0; n < N; n++) {
            if (tg[n] < 0) continue;
            ck_assert_msg(isfinite(one[0][n]) && one[0][n] < 0.0f, "row %d: logp %g", n,
                          (double)one[0][n]);
            for (int k = 0; k < 3; k++)
                ck_assert_msg(!memcmp(&one[k][n], &all[k][n], sizeof(float)),
                              "bf16 %d threads %d row %d: output %d alone %.9g, among %d %.9g",
                              bf16, t, n, k, (double)one[k][n], N, (double)all[k][n]);
        }
    }
    ctx()->threads = 2;
    free(h), free(w), free(wb);
}

START_TEST(head_rows_same_alone_and_in_batch) {
    head_sweep(0);
    head_sweep(1);
}
END_TEST

/* With one vocabulary entry lse = m + log(e^0) is the logit itself, so lse shows z: in a batch
 * of 100 rows (C past the 256-term block) it is, bit for bit, scale times matmul_forward's output
 * for the row alone (head.c's product is the linear layer's). */
START_TEST(head_logit_is_matmul_forward_times_scale) {
    enum { N = 100 };
    const int32_t Cs[2] = {72, 600};
    for (int k = 0; k < 2; k++) {
        int32_t C = Cs[k];
        float *h = randv((size_t)N * C), *w = randv(C), lse[N], logp[N];
        int32_t tg[N];
        for (int32_t n = 0; n < N; n++) tg[n] = 0;
        ops->head_forward(ops->ctx, logp, lse, NULL, h, w, tg, N, C, 1, 0.7f);
        for (int32_t n = 0; n < N; n++) {
            float y, z;
            ops->matmul_forward(ops->ctx, &y, h + (size_t)n * C, w, NULL, 1, C, 1);
            z = 0.7f * y;
            ck_assert_msg(!memcmp(&z, &lse[n], sizeof z) && logp[n] == 0.0f,
                          "C %d row %d: head logit %.9g, 0.7 * matmul_forward %.9g", C, n,
                          (double)lse[n], (double)z);
        }
        free(h), free(w);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("gemm_invariance");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, matmul_rows_same_in_every_batch);
    tcase_add_test(tc, matmul_rows_same_in_every_batch_every_isa);
    tcase_add_test(tc, matmul_bf16_rows_same_in_every_batch);
    tcase_add_test(tc, isa_paths_are_different_chains);
    tcase_add_test(tc, head_rows_same_alone_and_in_batch);
    tcase_add_test(tc, head_logit_is_matmul_forward_times_scale);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
