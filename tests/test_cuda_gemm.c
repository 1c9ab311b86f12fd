/*
 * test_cuda_gemm.c — the CUDA backend's linear-layer ops (kernels/cuda/gemm.cu) against the CPU
 * backend: matmul_forward, matmul_backward, matmul_forward_w and matmul_backward_w, at shapes
 * that are multiples of nothing, with and without bias, in f32 and under precision bf16.
 * Runs on a GPU (test_cuda_gemm) or on the host emulation (test_cuda_gemm_emu, OpenBLAS sgemm
 * behind the same conversion kernels); see tests/cuda_parity.h.
 *
 * Tolerances (|cuda - cpu| <= atol + rtol * |cpu|, inputs uniform in [-1, 1)):
 * - f32: each output is a sum of K <= 70 products of magnitude <= 1, accumulated in fp32 by
 *   both sides in different orders (cuBLAS tiles and fuses multiply-adds): the difference is a
 *   few ulps of the sum of |terms| (<= 70 * 6e-8 ~ 4e-6 worst case, ~1e-6 typical), so atol
 *   1e-5, rtol 1e-5, while a wrong index or a missing term is O(0.1).
 * - bf16 weights (the *_w ops) are widened exactly, so the same tolerance.
 * - precision bf16 is compared with the CPU backend run on the bf16-rounded operands: a product
 *   of two bf16 values is exact in fp32 and both sides accumulate in fp32, so again 1e-5; and
 *   the same output must differ from the unrounded fp32 product by more than that somewhere
 *   (bf16 keeps 8 bits: ~4e-3 relative per operand), proving the operands were rounded.
 * Activation gradients are pre-filled with NaN (must be written); dw and dbias with random
 * values (must be accumulated), and a second backward must accumulate again.
 */
#include <check.h>

#include "cuda_parity.h"

#define ATOL 1e-5
#define RTOL 1e-5

static cuda_parity P;  /* cpu + cuda (f32) */
static cuda_parity PB; /* cpu + cuda opened with precision bf16 */

typedef struct shape {
    int32_t N, IC, OC;
} shape;
static const shape SHAPES[] = {{1, 1, 1}, {7, 13, 5}, {33, 17, 29}, {67, 45, 70},
                               {50, 1, 9}, {3, 64, 1}, {49, 70, 33}};
#define NSHAPES (int)(sizeof SHAPES / sizeof SHAPES[0])

/* A bf16 copy of an fp32 pair: converted by the cpu backend, the same bytes uploaded. */
static cuda_pair bf16_pair(cuda_parity *p, const cuda_pair *f, uint64_t n) {
    cuda_pair b = cuda_pair_new(p, NULL, n * 2);
    p->cpu->convert(p->cpu->ctx, b.cpu, GRPO_DTYPE_BF16, f->cpu, GRPO_DTYPE_F32, n);
    p->cuda->upload(p->cuda->ctx, b.dev, b.cpu, n * 2);
    return b;
}

/* Rounds the cpu side of a pair to bf16 values (the device side keeps the fp32 ones). */
static void round_cpu_side(cuda_pair *b, uint64_t n) {
    float *x = b->cpu;
    for (uint64_t i = 0; i < n; i++) x[i] = grpo_bf16_to_f32(grpo_bf16_from_f32(x[i]));
}

/* ---- f32 ------------------------------------------------------------------------------------- */

START_TEST(matmul_forward_matches_cpu) {
    for (int si = 0; si < NSHAPES; si++)
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            shape s = SHAPES[si];
            uint64_t ni = (uint64_t)s.N * s.IC, nw = (uint64_t)s.OC * s.IC, no = (uint64_t)s.N * s.OC;
            cuda_pair inp = cuda_pair_rand(&P, ni, -1, 1), w = cuda_pair_rand(&P, nw, -1, 1);
            cuda_pair bias = cuda_pair_rand(&P, (uint64_t)s.OC, -1, 1);
            cuda_pair out = cuda_pair_fill(&P, no, NAN);
            P.cpu->matmul_forward(P.cpu->ctx, out.cpu, inp.cpu, w.cpu,
                                  with_bias ? bias.cpu : NULL, s.N, s.IC, s.OC);
            P.cuda->matmul_forward(P.cuda->ctx, out.dev, inp.dev, w.dev,
                                   with_bias ? bias.dev : NULL, s.N, s.IC, s.OC);
            char what[96];
            snprintf(what, sizeof what, "out (N %d IC %d OC %d bias %d)", s.N, s.IC, s.OC,
                     with_bias);
            ck_assert_int_eq(cuda_pair_compare(&P, &out, no, ATOL, RTOL, what), 0);
            cuda_pair_free(&P, &inp), cuda_pair_free(&P, &w), cuda_pair_free(&P, &bias);
            cuda_pair_free(&P, &out);
        }
}
END_TEST

/* Every combination of NULL gradients at each shape; the backward runs twice. */
START_TEST(matmul_backward_matches_cpu) {
    for (int si = 0; si < NSHAPES; si++)
        for (int mask = 1; mask < 8; mask++) { /* bit 0 dinp, 1 dw, 2 dbias */
            shape s = SHAPES[si];
            uint64_t ni = (uint64_t)s.N * s.IC, nw = (uint64_t)s.OC * s.IC, no = (uint64_t)s.N * s.OC;
            cuda_pair inp = cuda_pair_rand(&P, ni, -1, 1), w = cuda_pair_rand(&P, nw, -1, 1);
            cuda_pair dout = cuda_pair_rand(&P, no, -1, 1);
            cuda_pair dinp = cuda_pair_fill(&P, ni, NAN), dw = cuda_pair_rand(&P, nw, -1, 1);
            cuda_pair dbias = cuda_pair_rand(&P, (uint64_t)s.OC, -1, 1);
            for (int rep = 0; rep < 2; rep++) {
                P.cpu->matmul_backward(P.cpu->ctx, mask & 1 ? dinp.cpu : NULL,
                                       mask & 2 ? dw.cpu : NULL, mask & 4 ? dbias.cpu : NULL,
                                       dout.cpu, inp.cpu, w.cpu, s.N, s.IC, s.OC);
                P.cuda->matmul_backward(P.cuda->ctx, mask & 1 ? dinp.dev : NULL,
                                        mask & 2 ? dw.dev : NULL, mask & 4 ? dbias.dev : NULL,
                                        dout.dev, inp.dev, w.dev, s.N, s.IC, s.OC);
            }
            char what[96];
            int bad = 0;
            snprintf(what, sizeof what, "dinp (N %d IC %d OC %d)", s.N, s.IC, s.OC);
            if (mask & 1) bad += cuda_pair_compare(&P, &dinp, ni, ATOL, RTOL, what);
            snprintf(what, sizeof what, "dw (N %d IC %d OC %d)", s.N, s.IC, s.OC);
            if (mask & 2) bad += cuda_pair_compare(&P, &dw, nw, ATOL, RTOL, what);
            snprintf(what, sizeof what, "dbias (N %d IC %d OC %d)", s.N, s.IC, s.OC);
            if (mask & 4) bad += cuda_pair_compare(&P, &dbias, (uint64_t)s.OC, ATOL, RTOL, what);
            /* a NULL gradient is left alone: the prefills are still equal on both sides */
            if (!(mask & 2)) bad += cuda_pair_compare(&P, &dw, nw, 0, 0, "untouched dw");
            if (!(mask & 4))
                bad += cuda_pair_compare(&P, &dbias, (uint64_t)s.OC, 0, 0, "untouched dbias");
            ck_assert_msg(bad == 0, "shape %d, gradients mask %d: %d mismatches", si, mask, bad);
            cuda_pair *all[] = {&inp, &w, &dout, &dinp, &dw, &dbias};
            for (int i = 0; i < 6; i++) cuda_pair_free(&P, all[i]);
        }
}
END_TEST

/* ---- bf16 weights (frozen), f32 compute -------------------------------------------------------- */

START_TEST(bf16_weight_ops_match_cpu) {
    for (int si = 0; si < NSHAPES; si++)
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            shape s = SHAPES[si];
            uint64_t ni = (uint64_t)s.N * s.IC, nw = (uint64_t)s.OC * s.IC, no = (uint64_t)s.N * s.OC;
            cuda_pair inp = cuda_pair_rand(&P, ni, -1, 1), w32 = cuda_pair_rand(&P, nw, -1, 1);
            cuda_pair w = bf16_pair(&P, &w32, nw), bias = cuda_pair_rand(&P, (uint64_t)s.OC, -1, 1);
            cuda_pair out = cuda_pair_fill(&P, no, NAN), dout = cuda_pair_rand(&P, no, -1, 1);
            cuda_pair dinp = cuda_pair_fill(&P, ni, NAN);
            const float *b_cpu = with_bias ? bias.cpu : NULL, *b_dev = with_bias ? bias.dev : NULL;
            P.cpu->matmul_forward_w(P.cpu->ctx, out.cpu, inp.cpu, w.cpu, GRPO_DTYPE_BF16, b_cpu,
                                    s.N, s.IC, s.OC);
            P.cuda->matmul_forward_w(P.cuda->ctx, out.dev, inp.dev, w.dev, GRPO_DTYPE_BF16, b_dev,
                                     s.N, s.IC, s.OC);
            P.cpu->matmul_backward_w(P.cpu->ctx, dinp.cpu, dout.cpu, w.cpu, GRPO_DTYPE_BF16, s.N,
                                     s.IC, s.OC);
            P.cuda->matmul_backward_w(P.cuda->ctx, dinp.dev, dout.dev, w.dev, GRPO_DTYPE_BF16,
                                      s.N, s.IC, s.OC);
            char what[96];
            snprintf(what, sizeof what, "out_w (N %d IC %d OC %d bias %d)", s.N, s.IC, s.OC,
                     with_bias);
            ck_assert_int_eq(cuda_pair_compare(&P, &out, no, ATOL, RTOL, what), 0);
            snprintf(what, sizeof what, "dinp_w (N %d IC %d OC %d)", s.N, s.IC, s.OC);
            ck_assert_int_eq(cuda_pair_compare(&P, &dinp, ni, ATOL, RTOL, what), 0);
            cuda_pair *all[] = {&inp, &w32, &w, &bias, &out, &dout, &dinp};
            for (int i = 0; i < 7; i++) cuda_pair_free(&P, all[i]);
        }
}
END_TEST

/* An f32 weight passed to the *_w ops is the plain op. */
START_TEST(f32_weight_ops_are_the_plain_ops) {
    shape s = {19, 23, 31};
    uint64_t ni = (uint64_t)s.N * s.IC, nw = (uint64_t)s.OC * s.IC, no = (uint64_t)s.N * s.OC;
    cuda_pair inp = cuda_pair_rand(&P, ni, -1, 1), w = cuda_pair_rand(&P, nw, -1, 1);
    cuda_pair out = cuda_pair_fill(&P, no, NAN), dout = cuda_pair_rand(&P, no, -1, 1);
    cuda_pair dinp = cuda_pair_fill(&P, ni, NAN);
    P.cpu->matmul_forward(P.cpu->ctx, out.cpu, inp.cpu, w.cpu, NULL, s.N, s.IC, s.OC);
    P.cuda->matmul_forward_w(P.cuda->ctx, out.dev, inp.dev, w.dev, GRPO_DTYPE_F32, NULL, s.N,
                             s.IC, s.OC);
    P.cpu->matmul_backward(P.cpu->ctx, dinp.cpu, NULL, NULL, dout.cpu, inp.cpu, w.cpu, s.N, s.IC,
                           s.OC);
    P.cuda->matmul_backward_w(P.cuda->ctx, dinp.dev, dout.dev, w.dev, GRPO_DTYPE_F32, s.N, s.IC,
                              s.OC);
    ck_assert_int_eq(cuda_pair_compare(&P, &out, no, ATOL, RTOL, "out (f32 through _w)"), 0);
    ck_assert_int_eq(cuda_pair_compare(&P, &dinp, ni, ATOL, RTOL, "dinp (f32 through _w)"), 0);
    cuda_pair *all[] = {&inp, &w, &out, &dout, &dinp};
    for (int i = 0; i < 5; i++) cuda_pair_free(&P, all[i]);
}
END_TEST

/* ---- precision bf16 (autocast) ---------------------------------------------------------------- */

/* How many outputs of the device pair differ from `exact` (fp32 of unrounded operands) by more
 * than the tolerance: > 0 when the operands really were rounded. */
static int differs_from(cuda_parity *p, const cuda_pair *b, const float *exact, uint64_t n) {
    float *got = malloc(n * sizeof(float) + 1);
    p->cuda->download(p->cuda->ctx, got, b->dev, n * sizeof(float));
    int d = 0;
    for (uint64_t i = 0; i < n; i++) d += fabs(got[i] - exact[i]) > ATOL + RTOL * fabs(exact[i]);
    free(got);
    return d;
}

START_TEST(bf16_precision_rounds_the_operands) {
    for (int si = 0; si < NSHAPES; si++) {
        shape s = SHAPES[si];
        uint64_t ni = (uint64_t)s.N * s.IC, nw = (uint64_t)s.OC * s.IC, no = (uint64_t)s.N * s.OC;
        cuda_pair inp = cuda_pair_rand(&PB, ni, -1, 1), w = cuda_pair_rand(&PB, nw, -1, 1);
        cuda_pair bias = cuda_pair_rand(&PB, (uint64_t)s.OC, -1, 1);
        cuda_pair dout = cuda_pair_rand(&PB, no, -1, 1);
        cuda_pair out = cuda_pair_fill(&PB, no, NAN), dinp = cuda_pair_fill(&PB, ni, NAN);
        cuda_pair dw = cuda_pair_rand(&PB, nw, -1, 1), dbias = cuda_pair_rand(&PB, (uint64_t)s.OC, -1, 1);
        /* the fp32 product of the unrounded operands, to show the bf16 one is another */
        float *exact = malloc(no * sizeof(float) + 1);
        PB.cpu->matmul_forward(PB.cpu->ctx, exact, inp.cpu, w.cpu, bias.cpu, s.N, s.IC, s.OC);
        PB.cuda->matmul_forward(PB.cuda->ctx, out.dev, inp.dev, w.dev, bias.dev, s.N, s.IC, s.OC);
        PB.cuda->matmul_backward(PB.cuda->ctx, dinp.dev, dw.dev, dbias.dev, dout.dev, inp.dev,
                                 w.dev, s.N, s.IC, s.OC);
        /* the reference: dbias sums the fp32 dout (no matmul), the products see rounded values */
        PB.cpu->matmul_backward(PB.cpu->ctx, NULL, NULL, dbias.cpu, dout.cpu, NULL, NULL, s.N,
                                s.IC, s.OC);
        round_cpu_side(&inp, ni), round_cpu_side(&w, nw), round_cpu_side(&dout, no);
        PB.cpu->matmul_forward(PB.cpu->ctx, out.cpu, inp.cpu, w.cpu, bias.cpu, s.N, s.IC, s.OC);
        PB.cpu->matmul_backward(PB.cpu->ctx, dinp.cpu, dw.cpu, NULL, dout.cpu, inp.cpu, w.cpu,
                                s.N, s.IC, s.OC);
        char what[96];
        int bad = 0;
        snprintf(what, sizeof what, "bf16 out (N %d IC %d OC %d)", s.N, s.IC, s.OC);
        bad += cuda_pair_compare(&PB, &out, no, ATOL, RTOL, what);
        snprintf(what, sizeof what, "bf16 dinp (N %d IC %d OC %d)", s.N, s.IC, s.OC);
        bad += cuda_pair_compare(&PB, &dinp, ni, ATOL, RTOL, what);
        snprintf(what, sizeof what, "bf16 dw (N %d IC %d OC %d)", s.N, s.IC, s.OC);
        bad += cuda_pair_compare(&PB, &dw, nw, ATOL, RTOL, what);
        snprintf(what, sizeof what, "bf16 dbias (N %d IC %d OC %d)", s.N, s.IC, s.OC);
        bad += cuda_pair_compare(&PB, &dbias, (uint64_t)s.OC, ATOL, RTOL, what);
        ck_assert_msg(bad == 0, "shape %d: %d mismatches", si, bad);
        if (s.IC >= 13)
            ck_assert_msg(differs_from(&PB, &out, exact, no) > 0,
                          "shape %d: the bf16 product equals the fp32 one: operands not rounded",
                          si);
        free(exact);
        cuda_pair *all[] = {&inp, &w, &bias, &dout, &out, &dinp, &dw, &dbias};
        for (int i = 0; i < 8; i++) cuda_pair_free(&PB, all[i]);
    }
}
END_TEST

/* A bf16 weight under precision bf16: only the activation is rounded. */
START_TEST(bf16_precision_with_bf16_weights) {
    shape s = {37, 29, 41};
    uint64_t ni = (uint64_t)s.N * s.IC, nw = (uint64_t)s.OC * s.IC, no = (uint64_t)s.N * s.OC;
    cuda_pair inp = cuda_pair_rand(&PB, ni, -1, 1), w32 = cuda_pair_rand(&PB, nw, -1, 1);
    cuda_pair w = bf16_pair(&PB, &w32, nw), dout = cuda_pair_rand(&PB, no, -1, 1);
    cuda_pair out = cuda_pair_fill(&PB, no, NAN), dinp = cuda_pair_fill(&PB, ni, NAN);
    PB.cuda->matmul_forward_w(PB.cuda->ctx, out.dev, inp.dev, w.dev, GRPO_DTYPE_BF16, NULL, s.N,
                              s.IC, s.OC);
    PB.cuda->matmul_backward_w(PB.cuda->ctx, dinp.dev, dout.dev, w.dev, GRPO_DTYPE_BF16, s.N,
                               s.IC, s.OC);
    round_cpu_side(&inp, ni), round_cpu_side(&dout, no);
    PB.cpu->matmul_forward_w(PB.cpu->ctx, out.cpu, inp.cpu, w.cpu, GRPO_DTYPE_BF16, NULL, s.N,
                             s.IC, s.OC);
    PB.cpu->matmul_backward_w(PB.cpu->ctx, dinp.cpu, dout.cpu, w.cpu, GRPO_DTYPE_BF16, s.N, s.IC,
                              s.OC);
    ck_assert_int_eq(cuda_pair_compare(&PB, &out, no, ATOL, RTOL, "bf16 out_w"), 0);
    ck_assert_int_eq(cuda_pair_compare(&PB, &dinp, ni, ATOL, RTOL, "bf16 dinp_w"), 0);
    cuda_pair *all[] = {&inp, &w32, &w, &dout, &out, &dinp};
    for (int i = 0; i < 6; i++) cuda_pair_free(&PB, all[i]);
}
END_TEST

int main(void) {
    cuda_parity_open(&P); /* exits 77 (skipped) where the cuda backend cannot run */
    grpo_error err;
    grpo_error_init(&err);
    grpo_backend_options bf16 = {1, GRPO_DTYPE_BF16};
    PB = P;
    PB.cuda = grpo_backend_open_with("cuda", &bf16, &err);
    if (!PB.cuda) {
        fprintf(stderr, "cuda backend with precision bf16: %s\n", err.message);
        return EXIT_FAILURE;
    }
    Suite *s = suite_create("cuda_gemm");
    TCase *tc = tcase_create("cuda_gemm");
    tcase_add_test(tc, matmul_forward_matches_cpu);
    tcase_add_test(tc, matmul_backward_matches_cpu);
    tcase_add_test(tc, bf16_weight_ops_match_cpu);
    tcase_add_test(tc, f32_weight_ops_are_the_plain_ops);
    tcase_add_test(tc, bf16_precision_rounds_the_operands);
    tcase_add_test(tc, bf16_precision_with_bf16_weights);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK); /* a CUDA context does not survive fork() */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    grpo_backend_close(PB.cuda);
    cuda_parity_close(&P);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
