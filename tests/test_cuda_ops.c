/*
 * test_cuda_ops.c — the CUDA backend's embedding, RMSNorm, RoPE, SwiGLU, elementwise (residual,
 * accumulate, scale, sumsq, AdamW, dropout, convert) and row-routing ops against the CPU backend,
 * on small odd shapes (tests/cuda_parity.h: a real GPU, or the host emulation under
 * GRPO_CUDA_EMULATION=1; without either the suite is skipped).
 *
 * Both backends get the same bytes; parameter gradients are pre-filled with random values (the
 * op must add to them) and activation gradients with NaN (the op must overwrite them).
 *
 * Tolerances (|cuda - cpu| <= atol + rtol * |cpu|), by what may legitimately differ:
 * - exact (0): ops whose every element is the same fp32 operations in the same order on both
 *   sides: embedding lookups and their backward (each element's tokens added in token order on
 *   both sides), gather/scatter rows (scatter adds in order of m, multiply and add rounded
 *   separately), residual/accumulate/scale (one rounding each), dropout, convert, and AdamW
 *   (the CPU's operation order with no fma contraction; sqrt and division correctly rounded).
 * - RMSNorm: the sum of squares (and the backward's dot) are reduced in another order (a block
 *   tree vs the CPU's SIMD lanes), and a GPU may fuse a multiply-add: relative rounding of ~C *
 *   6e-8 in the worst case, ~1e-6 for C <= 300; atol 1e-6 + rtol 1e-5 forward, the backward's
 *   difference of two O(1) terms gets atol 1e-5 + rtol 1e-4.
 * - RoPE: the same fp32 angles (inv_freq is formed on the host by the CPU's expression), but a
 *   device cosf/sinf may differ from the host libm's in the last bit (2 ulp): atol 2e-6 on O(1)
 *   values, at positions up to ~3000.
 * - SwiGLU: expf within 2 ulp on both sides (the CPU's vector exp, the device's expf), a few
 *   roundings after it: rtol 1e-5, atol 1e-6.
 * - sumsq: double sums in another order: rtol 1e-12.
 * - scatter_add_rows_backward's dw: a double dot product in another order rounded to fp32:
 *   rtol 1e-6, atol 1e-7.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_parity.h"

static cuda_parity P;

/* Run the statement on each backend in turn: OPS is its table, S(pair) its buffer of the pair. */
#define EACH_SIDE for (int side_ = 0; side_ < 2; side_++)
#define OPS (side_ ? P.cuda : P.cpu)
#define S(pair) ((void *)(side_ ? (pair).dev : (pair).cpu))
#define CALL(op, ...) OPS->op(OPS->ctx, __VA_ARGS__)

#define EXPECT_CLOSE(pair, n, atol, rtol, what)                                                \
    ck_assert_int_eq(cuda_pair_compare(&P, &(pair), (n), (atol), (rtol), (what)), 0)
#define EXPECT_EXACT(pair, n, what) EXPECT_CLOSE(pair, n, 0.0, 0.0, what)

static cuda_pair ids_pair(const int32_t *v, uint64_t n) {
    return cuda_pair_new(&P, v, n * sizeof(int32_t));
}

/* n ids in [0, range), with many repeats when range < n. */
static cuda_pair random_ids(uint64_t n, int32_t range) {
    int32_t *v = malloc(n * sizeof *v + 1);
    for (uint64_t i = 0; i < n; i++) {
        v[i] = (int32_t)cuda_parity_uniform(0.0f, (float)range);
        if (v[i] >= range) v[i] = range - 1; /* lo + (hi - lo) * u can round up to hi */
    }
    cuda_pair b = ids_pair(v, n);
    free(v);
    return b;
}

/* Both sides' bytes of a pair are identical (the device's downloaded). */
static void expect_same_bytes(const cuda_pair *b, const char *what) {
    unsigned char *got = malloc(b->bytes + 1);
    P.cuda->sync(P.cuda->ctx);
    P.cuda->download(P.cuda->ctx, got, b->dev, b->bytes);
    ck_assert_msg(memcmp(got, b->cpu, b->bytes) == 0, "%s: cuda bytes differ from cpu", what);
    free(got);
}

/* ---- embedding ---------------------------------------------------------------------------- */

START_TEST(embedding_forward_and_bf16_table_match_cpu) {
    enum { N = 7, C = 37, V = 5 };
    cuda_pair wte = cuda_pair_rand(&P, V * C, -1, 1), ids = random_ids(N, V);
    cuda_pair out = cuda_pair_fill(&P, N * C, NAN);
    uint16_t wb[V * C];
    for (int i = 0; i < V * C; i++) wb[i] = grpo_bf16_from_f32(((float *)wte.cpu)[i] * 3.1f);
    cuda_pair wte16 = cuda_pair_new(&P, wb, sizeof wb), out16 = cuda_pair_fill(&P, N * C, NAN);
    EACH_SIDE {
        CALL(embedding_forward, S(out), S(ids), S(wte), N, C);
        CALL(embedding_forward_w, S(out16), S(ids), S(wte16), GRPO_DTYPE_BF16, N, C);
    }
    EXPECT_EXACT(out, N * C, "embedding_forward out");
    EXPECT_EXACT(out16, N * C, "embedding_forward_w out");
    cuda_pair_free(&P, &wte), cuda_pair_free(&P, &ids), cuda_pair_free(&P, &out);
    cuda_pair_free(&P, &wte16), cuda_pair_free(&P, &out16);
}
END_TEST

/* Repeated ids add in token order on both sides; N = 300 spreads the rows over several owner
 * buckets of the device kernel. dwte starts random: the op accumulates. */
START_TEST(embedding_backward_accumulates_repeated_ids) {
    const int32_t Ns[] = {7, 300};
    for (int k = 0; k < 2; k++) {
        int32_t N = Ns[k], C = 37, V = 9;
        cuda_pair dout = cuda_pair_rand(&P, (uint64_t)N * C, -1, 1), ids = random_ids(N, V);
        cuda_pair dwte = cuda_pair_rand(&P, (uint64_t)V * C, -1, 1);
        EACH_SIDE CALL(embedding_backward, S(dwte), S(dout), S(ids), N, C);
        EXPECT_EXACT(dwte, (uint64_t)V * C, "embedding_backward dwte");
        cuda_pair_free(&P, &dout), cuda_pair_free(&P, &ids), cuda_pair_free(&P, &dwte);
    }
}
END_TEST

/* ---- rmsnorm ------------------------------------------------------------------------------ */

START_TEST(rmsnorm_forward_and_backward_match_cpu) {
    /* C = 300 > the device's 256 threads per row; N = 45 > the 32 rows of a dw partial */
    const int32_t shapes[][2] = {{7, 37}, {45, 300}};
    for (int k = 0; k < 2; k++) {
        int32_t N = shapes[k][0], C = shapes[k][1];
        uint64_t n = (uint64_t)N * C;
        cuda_pair inp = cuda_pair_rand(&P, n, -2, 2), w = cuda_pair_rand(&P, C, 0.5f, 1.5f);
        cuda_pair out = cuda_pair_fill(&P, n, NAN), rstd = cuda_pair_fill(&P, N, NAN);
        cuda_pair dout = cuda_pair_rand(&P, n, -1, 1), dinp = cuda_pair_fill(&P, n, NAN);
        cuda_pair dw = cuda_pair_rand(&P, C, -1, 1);
        EACH_SIDE {
            CALL(rmsnorm_forward, S(out), S(rstd), S(inp), S(w), N, C, 1e-5f);
            CALL(rmsnorm_backward, S(dinp), S(dw), S(dout), S(inp), S(w), S(rstd), N, C);
        }
        EXPECT_CLOSE(out, n, 1e-6, 1e-5, "rmsnorm out");
        EXPECT_CLOSE(rstd, N, 1e-6, 1e-5, "rmsnorm rstd");
        EXPECT_CLOSE(dinp, n, 1e-5, 1e-4, "rmsnorm dinp");
        EXPECT_CLOSE(dw, C, 1e-5, 1e-4, "rmsnorm dw");
        /* dinp may alias dout: dw must be formed from dout before it is overwritten */
        EACH_SIDE CALL(rmsnorm_backward, S(dout), S(dw), S(dout), S(inp), S(w), S(rstd), N, C);
        EXPECT_CLOSE(dout, n, 1e-5, 1e-4, "rmsnorm dinp (in place)");
        EXPECT_CLOSE(dw, C, 1e-5, 1e-4, "rmsnorm dw (in place)");
        cuda_pair bufs[] = {inp, w, out, rstd, dout, dinp, dw};
        for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) cuda_pair_free(&P, &bufs[i]);
    }
}
END_TEST

/* ---- rope --------------------------------------------------------------------------------- */

START_TEST(rope_forward_backward_and_in_place_match_cpu) {
    enum { N = 7, NH = 3, HD = 6 };
    const uint64_t n = N * NH * HD;
    int32_t pos[N] = {0, 1, 2, 17, 300, 1999, 3001};
    cuda_pair p = ids_pair(pos, N), x = cuda_pair_rand(&P, n, -1, 1);
    cuda_pair out = cuda_pair_fill(&P, n, NAN), dinp = cuda_pair_fill(&P, n, NAN);
    cuda_pair inplace = cuda_pair_new(&P, x.cpu, n * sizeof(float));
    EACH_SIDE {
        CALL(rope_forward, S(out), S(x), S(p), N, NH, HD, 10000.0f);
        CALL(rope_backward, S(dinp), S(x), S(p), N, NH, HD, 10000.0f);
        CALL(rope_forward, S(inplace), S(inplace), S(p), N, NH, HD, 1e6f);
    }
    EXPECT_CLOSE(out, n, 2e-6, 0, "rope out");
    EXPECT_CLOSE(dinp, n, 2e-6, 0, "rope dinp");
    EXPECT_CLOSE(inplace, n, 2e-6, 0, "rope out (in place, theta 1e6)");
    cuda_pair bufs[] = {p, x, out, dinp, inplace};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) cuda_pair_free(&P, &bufs[i]);
}
END_TEST

/* ---- swiglu ------------------------------------------------------------------------------- */

START_TEST(swiglu_forward_and_backward_match_cpu) {
    enum { N = 7, I = 45 };
    const uint64_t n = N * I;
    cuda_pair gate = cuda_pair_rand(&P, n, -6, 6), up = cuda_pair_rand(&P, n, -2, 2);
    cuda_pair dout = cuda_pair_rand(&P, n, -1, 1), out = cuda_pair_fill(&P, n, NAN);
    cuda_pair dgate = cuda_pair_fill(&P, n, NAN), dup = cuda_pair_fill(&P, n, NAN);
    cuda_pair dgate_only = cuda_pair_fill(&P, n, NAN);
    EACH_SIDE {
        CALL(swiglu_forward, S(out), S(gate), S(up), N, I);
        CALL(swiglu_backward, S(dgate), S(dup), S(dout), S(gate), S(up), N, I);
        CALL(swiglu_backward, S(dgate_only), NULL, S(dout), S(gate), S(up), N, I);
    }
    EXPECT_CLOSE(out, n, 1e-6, 1e-5, "swiglu out");
    EXPECT_CLOSE(dgate, n, 1e-6, 1e-5, "swiglu dgate");
    EXPECT_CLOSE(dup, n, 1e-6, 1e-5, "swiglu dup");
    EXPECT_CLOSE(dgate_only, n, 1e-6, 1e-5, "swiglu dgate (dup NULL)");
    cuda_pair bufs[] = {gate, up, dout, out, dgate, dup, dgate_only};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) cuda_pair_free(&P, &bufs[i]);
}
END_TEST

/* ---- residual, accumulate, scale, sumsq --------------------------------------------------- */

START_TEST(residual_accumulate_scale_match_cpu) {
    const uint64_t n = 1031;
    cuda_pair a = cuda_pair_rand(&P, n, -1, 1), b = cuda_pair_rand(&P, n, -1, 1);
    cuda_pair out = cuda_pair_fill(&P, n, NAN), y = cuda_pair_rand(&P, n, -1, 1);
    EACH_SIDE {
        CALL(residual_forward, S(out), S(a), S(b), n);
        CALL(accumulate, S(y), S(a), n);
        CALL(scale, S(b), 0.37f, n);
    }
    EXPECT_EXACT(out, n, "residual out");
    EXPECT_EXACT(y, n, "accumulate y");
    EXPECT_EXACT(b, n, "scale x");
    cuda_pair_free(&P, &a), cuda_pair_free(&P, &b), cuda_pair_free(&P, &out);
    cuda_pair_free(&P, &y);
}
END_TEST

/* Past the device's grid cap (4096 blocks of 256 threads): each thread of a grid-stride loop
 * handles several elements. One op per loop shape: flat (residual), (row, column) (gather), and
 * (token, head, pair) (rope). */
START_TEST(grid_stride_loops_cover_more_than_one_grid) {
    const uint64_t n = 4096u * 256u * 2u + 77u;
    cuda_pair a = cuda_pair_rand(&P, n, -1, 1), b = cuda_pair_rand(&P, n, -1, 1);
    cuda_pair out = cuda_pair_fill(&P, n, NAN);
    EACH_SIDE CALL(residual_forward, S(out), S(a), S(b), n);
    EXPECT_EXACT(out, n, "residual out (large)");
    enum { M = 301, C = 7001, N = 5 };
    cuda_pair ix = random_ids(M, N), rows = cuda_pair_fill(&P, (uint64_t)M * C, NAN);
    EACH_SIDE CALL(gather_rows, S(rows), S(a), S(ix), M, C);
    EXPECT_EXACT(rows, (uint64_t)M * C, "gather_rows out (large)");
    enum { T = 2777, NH = 3, HD = 256 }; /* T * NH * HD/2 pairs > one grid of threads */
    const uint64_t nr = (uint64_t)T * NH * HD;
    cuda_pair pos = random_ids(T, 4096), x = cuda_pair_rand(&P, nr, -1, 1);
    cuda_pair rot = cuda_pair_fill(&P, nr, NAN);
    EACH_SIDE CALL(rope_forward, S(rot), S(x), S(pos), T, NH, HD, 10000.0f);
    EXPECT_CLOSE(rot, nr, 2e-6, 0, "rope out (large)");
    cuda_pair bufs[] = {a, b, out, ix, rows, pos, x, rot};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) cuda_pair_free(&P, &bufs[i]);
}
END_TEST

/* n from 0 to well over one device block (256 threads x 8) and one CPU block (65536) */
START_TEST(sumsq_matches_cpu_over_many_blocks) {
    const uint64_t ns[] = {0, 5, 2049, 200003};
    for (int k = 0; k < 4; k++) {
        uint64_t n = ns[k];
        cuda_pair x = cuda_pair_rand(&P, n ? n : 1, -3, 3);
        double want = P.cpu->sumsq(P.cpu->ctx, x.cpu, n);
        double got = P.cuda->sumsq(P.cuda->ctx, x.dev, n);
        ck_assert_msg(fabs(got - want) <= 1e-12 * want, "sumsq n=%llu: cuda %.17g cpu %.17g",
                      (unsigned long long)n, got, want);
        if (n == 0) ck_assert(got == 0.0);
        cuda_pair_free(&P, &x);
    }
}
END_TEST

/* ---- adamw -------------------------------------------------------------------------------- */

START_TEST(adamw_several_steps_same_bits_as_cpu) {
    const uint64_t n = 1001;
    cuda_pair p = cuda_pair_rand(&P, n, -1, 1), m = cuda_pair_fill(&P, n, 0);
    cuda_pair v = cuda_pair_fill(&P, n, 0);
    for (int32_t t = 1; t <= 4; t++) {
        cuda_pair g = cuda_pair_rand(&P, n, -0.1f, 0.1f);
        EACH_SIDE CALL(adamw, S(p), S(g), S(m), S(v), n, 1e-3, 0.9, 0.999, 1e-8, 0.01, t);
        cuda_pair_free(&P, &g);
    }
    EXPECT_EXACT(p, n, "adamw param");
    EXPECT_EXACT(m, n, "adamw m");
    EXPECT_EXACT(v, n, "adamw v");
    cuda_pair_free(&P, &p), cuda_pair_free(&P, &m), cuda_pair_free(&P, &v);
}
END_TEST

/* ---- dropout ------------------------------------------------------------------------------ */

/* The device mask is grpo_dropout_keeps's: on ones, out[i] != 0 exactly where it keeps i. */
START_TEST(dropout_mask_is_grpo_dropout_keeps) {
    const uint64_t n = 5003, seed = 0x1234abcdull;
    const float p = 0.3f;
    cuda_pair ones = cuda_pair_fill(&P, n, 1.0f), out = cuda_pair_fill(&P, n, NAN);
    cuda_pair x = cuda_pair_rand(&P, n, -1, 1);
    EACH_SIDE {
        CALL(dropout, S(out), S(ones), n, p, seed);
        CALL(dropout, S(x), S(x), n, p, seed + 1); /* in place */
    }
    float *got = malloc(n * sizeof *got);
    P.cuda->sync(P.cuda->ctx);
    P.cuda->download(P.cuda->ctx, got, out.dev, n * sizeof *got);
    uint64_t kept = 0;
    for (uint64_t i = 0; i < n; i++) {
        int keep = grpo_dropout_keeps(seed, i, p);
        kept += keep;
        ck_assert_msg(keep ? got[i] == 1.0f / (1.0f - p) : got[i] == 0.0f,
                      "dropout[%llu]: %g, grpo_dropout_keeps says %d", (unsigned long long)i,
                      got[i], keep);
    }
    ck_assert(kept > n / 2 && kept < n); /* a real mask: some dropped, about 70% kept */
    free(got);
    EXPECT_EXACT(out, n, "dropout out");
    EXPECT_EXACT(x, n, "dropout out (in place)");
    cuda_pair_free(&P, &ones), cuda_pair_free(&P, &out), cuda_pair_free(&P, &x);
}
END_TEST

/* ---- convert ------------------------------------------------------------------------------ */

static float f_of_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Rounding ties (to even, both ways), NaN (a signalling one comes back quiet), infinities,
 * signed zero, subnormals and the overflow to infinity: the same bf16 bits as the CPU and as
 * grpo_bf16_from_f32; then back to fp32 exactly. */
START_TEST(convert_bf16_bits_match_cpu) {
    const uint32_t bits[] = {0x3f808000u, 0x3f818000u, 0xbf808000u, 0x3f808001u, 0x3f807fffu,
                             0x7fc00000u, 0x7f800001u, 0xffa00000u, 0x7f800000u, 0xff800000u,
                             0x00000000u, 0x80000000u, 0x00000001u, 0x00018000u, 0x7f7fffffu,
                             0x7f7f8000u, 0x3eaaaaabu};
    enum { K = sizeof bits / sizeof *bits };
    float f[K];
    uint16_t want[K];
    for (int i = 0; i < K; i++) f[i] = f_of_bits(bits[i]), want[i] = grpo_bf16_from_f32(f[i]);
    cuda_pair src = cuda_pair_new(&P, f, sizeof f), h = cuda_pair_new(&P, NULL, sizeof want);
    cuda_pair back = cuda_pair_fill(&P, K, 1.0f), same = cuda_pair_new(&P, NULL, sizeof f);
    EACH_SIDE {
        CALL(convert, S(h), GRPO_DTYPE_BF16, S(src), GRPO_DTYPE_F32, K);
        CALL(convert, S(back), GRPO_DTYPE_F32, S(h), GRPO_DTYPE_BF16, K);
        CALL(convert, S(same), GRPO_DTYPE_F32, S(src), GRPO_DTYPE_F32, K);
    }
    ck_assert(memcmp(h.cpu, want, sizeof want) == 0);
    expect_same_bytes(&h, "convert f32->bf16");
    expect_same_bytes(&back, "convert bf16->f32");
    expect_same_bytes(&same, "convert f32->f32");
    cuda_pair_free(&P, &src), cuda_pair_free(&P, &h), cuda_pair_free(&P, &back);
    cuda_pair_free(&P, &same);
}
END_TEST

/* ---- rows --------------------------------------------------------------------------------- */

START_TEST(gather_rows_matches_cpu) {
    enum { N = 6, M = 9, C = 37 };
    int32_t idx[M] = {5, 0, 0, 3, 5, 1, 2, 5, 4};
    cuda_pair ix = ids_pair(idx, M), inp = cuda_pair_rand(&P, N * C, -1, 1);
    cuda_pair out = cuda_pair_fill(&P, M * C, NAN);
    EACH_SIDE CALL(gather_rows, S(out), S(inp), S(ix), M, C);
    EXPECT_EXACT(out, M * C, "gather_rows out");
    cuda_pair_free(&P, &ix), cuda_pair_free(&P, &inp), cuda_pair_free(&P, &out);
}
END_TEST

/* Repeated idx, weighted and unweighted; M = 300 spreads the rows over several owner buckets.
 * out starts random: the op adds. */
START_TEST(scatter_add_rows_repeated_idx_match_cpu) {
    const int32_t Ms[] = {9, 300};
    for (int k = 0; k < 2; k++) {
        int32_t M = Ms[k], N = 7, C = 37;
        cuda_pair ix = random_ids(M, N), inp = cuda_pair_rand(&P, (uint64_t)M * C, -1, 1);
        cuda_pair w = cuda_pair_rand(&P, M, 0, 1);
        cuda_pair out = cuda_pair_rand(&P, (uint64_t)N * C, -1, 1);
        cuda_pair out1 = cuda_pair_rand(&P, (uint64_t)N * C, -1, 1);
        EACH_SIDE {
            CALL(scatter_add_rows, S(out), S(inp), S(ix), S(w), M, C);
            CALL(scatter_add_rows, S(out1), S(inp), S(ix), NULL, M, C);
        }
        EXPECT_EXACT(out, (uint64_t)N * C, "scatter_add_rows out (weighted)");
        EXPECT_EXACT(out1, (uint64_t)N * C, "scatter_add_rows out (w NULL)");
        cuda_pair bufs[] = {ix, inp, w, out, out1};
        for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) cuda_pair_free(&P, &bufs[i]);
    }
}
END_TEST

START_TEST(scatter_add_rows_backward_matches_cpu) {
    enum { N = 7, M = 11, C = 300 }; /* C > the 256 threads of a row block */
    int32_t idx[M] = {6, 6, 0, 2, 2, 2, 5, 1, 3, 4, 6};
    cuda_pair ix = ids_pair(idx, M), dout = cuda_pair_rand(&P, N * C, -1, 1);
    cuda_pair inp = cuda_pair_rand(&P, M * C, -1, 1), w = cuda_pair_rand(&P, M, 0, 1);
    cuda_pair dinp = cuda_pair_fill(&P, M * C, NAN), dw = cuda_pair_fill(&P, M, NAN);
    cuda_pair dinp1 = cuda_pair_fill(&P, M * C, NAN), dw_only = cuda_pair_fill(&P, M, NAN);
    EACH_SIDE {
        CALL(scatter_add_rows_backward, S(dinp), S(dw), S(dout), S(inp), S(ix), S(w), M, C);
        CALL(scatter_add_rows_backward, S(dinp1), NULL, S(dout), S(inp), S(ix), NULL, M, C);
        CALL(scatter_add_rows_backward, NULL, S(dw_only), S(dout), S(inp), S(ix), S(w), M, C);
    }
    EXPECT_EXACT(dinp, M * C, "scatter_add_rows_backward dinp");
    EXPECT_EXACT(dinp1, M * C, "scatter_add_rows_backward dinp (w NULL)");
    EXPECT_CLOSE(dw, M, 1e-7, 1e-6, "scatter_add_rows_backward dw");
    EXPECT_CLOSE(dw_only, M, 1e-7, 1e-6, "scatter_add_rows_backward dw (dinp NULL)");
    cuda_pair bufs[] = {ix, dout, inp, w, dinp, dw, dinp1, dw_only};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) cuda_pair_free(&P, &bufs[i]);
}
END_TEST

int main(void) {
    cuda_parity_open(&P); /* exits 77 (skipped) when no cuda backend can run here */
    Suite *s = suite_create("cuda_ops");
    TCase *tc = tcase_create("parity");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, embedding_forward_and_bf16_table_match_cpu);
    tcase_add_test(tc, embedding_backward_accumulates_repeated_ids);
    tcase_add_test(tc, rmsnorm_forward_and_backward_match_cpu);
    tcase_add_test(tc, rope_forward_backward_and_in_place_match_cpu);
    tcase_add_test(tc, swiglu_forward_and_backward_match_cpu);
    tcase_add_test(tc, residual_accumulate_scale_match_cpu);
    tcase_add_test(tc, grid_stride_loops_cover_more_than_one_grid);
    tcase_add_test(tc, sumsq_matches_cpu_over_many_blocks);
    tcase_add_test(tc, adamw_several_steps_same_bits_as_cpu);
    tcase_add_test(tc, dropout_mask_is_grpo_dropout_keeps);
    tcase_add_test(tc, convert_bf16_bits_match_cpu);
    tcase_add_test(tc, gather_rows_matches_cpu);
    tcase_add_test(tc, scatter_add_rows_repeated_idx_match_cpu);
    tcase_add_test(tc, scatter_add_rows_backward_matches_cpu);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    /* one process: a CUDA context does not survive fork(), and the backends are opened once */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    cuda_parity_close(&P);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
