/*
 * test_cuda_emu.c — the CUDA host emulation (kernels/cuda/emu) itself: what the backend's
 * kernels rely on when CI runs them without a GPU. The kernels are in tests/cuda/emu_selftest.cu
 * (built as C++ on the emulation, linked in by tests/cuda.cmake); each result is compared with a
 * plain loop here. Sums use small integer values, so every order of addition gives the same
 * float and the comparisons are exact.
 * Runs the same with or without GRPO_CUDA_EMULATION (it never opens a backend).
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/emu_selftest.h"

/* cudaError_t values of the CUDA runtime (the emulation uses CUDA's numbers) */
enum { CUDA_SUCCESS = 0, CUDA_INVALID_VALUE = 1, CUDA_INVALID_CONFIGURATION = 9 };

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static int rand_int(int lo, int hi) { /* [lo, hi] */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (int)((rng >> 33) % (uint64_t)(hi - lo + 1));
}

static float *rand_ints_as_floats(int n) {
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) x[i] = (float)rand_int(-8, 8);
    return x;
}

/* The tree reduction in shared memory reads its neighbours' slots: with __syncthreads it is the
 * sum; without, thread 0 runs ahead and reads slots no thread has written yet (NaN poison). */
START_TEST(barrier_orders_a_block_reduction) {
    enum { N = 256, BLOCKS = 3 };
    float *x = rand_ints_as_floats(N * BLOCKS), out[BLOCKS];
    ck_assert_int_eq(emu_block_sum(out, x, N, BLOCKS, 1), CUDA_SUCCESS);
    for (int b = 0; b < BLOCKS; b++) {
        float want = 0;
        for (int i = 0; i < N; i++) want += x[b * N + i];
        ck_assert_msg(out[b] == want, "block %d: %g, want %g", b, out[b], want);
    }
    ck_assert_int_eq(emu_block_sum(out, x, N, BLOCKS, 0), CUDA_SUCCESS);
    for (int b = 0; b < BLOCKS; b++)
        ck_assert_msg(isnan(out[b]), "block %d without a barrier: %g (expected NaN)", b, out[b]);
    free(x);
}
END_TEST

/* Warp sums, a static __shared__ array and a barrier; threads that return before the barrier
 * (live < threads) count as arrived, as on a GPU. */
START_TEST(warp_sums_through_static_shared) {
    static const int cases[][2] = {{256, 256}, {256, 200}, {1024, 1024}, {96, 33}, {32, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int threads = cases[c][0], live = cases[c][1];
        float *x = rand_ints_as_floats(threads), out = -1, want = 0;
        for (int i = 0; i < live; i++) want += x[i];
        ck_assert_int_eq(emu_warp_block_sum(&out, x, threads, live), CUDA_SUCCESS);
        ck_assert_msg(out == want, "%d threads, %d live: %g, want %g", threads, live, out, want);
        free(x);
    }
}
END_TEST

START_TEST(shuffles_match_plain_loops) {
    enum { T = 128 };
    float *x = rand_ints_as_floats(T), xs[T], ds[T], bc[T], hs[T];
    int ix[T], rot[T], mx[T];
    for (int i = 0; i < T; i++) ix[i] = rand_int(-1000, 1000);
    ck_assert_int_eq(emu_shuffles(xs, ds, bc, rot, mx, hs, x, ix, T), CUDA_SUCCESS);
    for (int w = 0; w < T / 32; w++) {
        float sum = 0, half[2] = {0, 0};
        int max = ix[w * 32];
        for (int l = 0; l < 32; l++) {
            sum += x[w * 32 + l];
            half[l / 16] += x[w * 32 + l];
            if (ix[w * 32 + l] > max) max = ix[w * 32 + l];
        }
        ck_assert_msg(ds[w * 32] == sum, "warp %d: down tree %g, want %g", w, ds[w * 32], sum);
        for (int l = 0; l < 32; l++) {
            int i = w * 32 + l;
            ck_assert_msg(xs[i] == sum, "lane %d: xor sum %g, want %g", i, xs[i], sum);
            ck_assert_msg(bc[i] == x[w * 32 + 5], "lane %d: broadcast %g", i, bc[i]);
            ck_assert_msg(rot[i] == ix[w * 32 + (l + 1) % 32], "lane %d: rotate %d", i, rot[i]);
            ck_assert_msg(mx[i] == max, "lane %d: max %d, want %d", i, mx[i], max);
            ck_assert_msg(hs[i] == half[l / 16], "lane %d: width-16 sum %g, want %g", i, hs[i],
                          half[l / 16]);
        }
    }
    free(x);
}
END_TEST

START_TEST(dynamic_shared_memory) {
    enum { N = 100 }; /* not a whole number of warps */
    float *x = rand_ints_as_floats(N), first[N], rev[N];
    ck_assert_int_eq(emu_dyn_shared(first, rev, x, N), CUDA_SUCCESS);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(isnan(first[i]), "slot %d before any write: %g (expected the NaN poison)",
                      i, first[i]);
        ck_assert_msg(rev[i] == x[N - 1 - i], "slot %d: %g, want %g", i, rev[i], x[N - 1 - i]);
    }
    free(x);
}
END_TEST

START_TEST(multi_dimensional_grids_and_blocks) {
    enum { GX = 3, GY = 2, GZ = 2, BX = 4, BY = 3, BZ = 2 };
    enum { THREADS = GX * GY * GZ * BX * BY * BZ };
    int *out = malloc(sizeof(int) * 6 * THREADS), dims[6];
    ck_assert_int_eq(emu_grid_indices(out, dims, GX, GY, GZ, BX, BY, BZ), CUDA_SUCCESS);
    int want_dims[6] = {GX, GY, GZ, BX, BY, BZ};
    for (int i = 0; i < 6; i++) ck_assert_int_eq(dims[i], want_dims[i]);
    int g = 0; /* blocks x fastest, then y, z; threads likewise inside */
    for (int bz = 0; bz < GZ; bz++)
        for (int by = 0; by < GY; by++)
            for (int bx = 0; bx < GX; bx++)
                for (int tz = 0; tz < BZ; tz++)
                    for (int ty = 0; ty < BY; ty++)
                        for (int tx = 0; tx < BX; tx++, g++) {
                            int want[6] = {bx, by, bz, tx, ty, tz};
                            for (int k = 0; k < 6; k++)
                                ck_assert_msg(out[6 * g + k] == want[k],
                                              "thread %d: index %d is %d, want %d", g, k,
                                              out[6 * g + k], want[k]);
                        }
    free(out);
}
END_TEST

START_TEST(atomics_are_read_modify_writes) {
    enum { BLOCKS = 5, THREADS = 96, N = BLOCKS * THREADS };
    int olds[N], counts[2], seen[N];
    float fsum;
    ck_assert_int_eq(emu_atomics(olds, counts, &fsum, BLOCKS, THREADS), CUDA_SUCCESS);
    ck_assert_int_eq(counts[0], N);
    ck_assert_int_eq(counts[1], N - 1);
    ck_assert_msg(fsum == 0.5f * N, "float atomicAdd: %g, want %g", fsum, 0.5 * N);
    memset(seen, 0, sizeof seen); /* the old values are 0..N-1, each once */
    for (int i = 0; i < N; i++) {
        ck_assert_msg(olds[i] >= 0 && olds[i] < N, "old value %d", olds[i]);
        ck_assert_msg(!seen[olds[i]]++, "old value %d returned twice", olds[i]);
    }
}
END_TEST

/* CUDA refuses these launches (the kernel never runs) and reports it once through
 * cudaGetLastError, which then reads cudaSuccess again. */
START_TEST(bad_launches_are_reported) {
    static const struct {
        unsigned gx, bx, by, shmem;
        int want;
    } cases[] = {
        {1, 1025, 1, 0, CUDA_INVALID_CONFIGURATION},   /* > 1024 threads in x */
        {1, 32, 33, 0, CUDA_INVALID_CONFIGURATION},    /* 1056 threads in all */
        {0, 32, 1, 0, CUDA_INVALID_CONFIGURATION},     /* an empty grid */
        {2, 64, 1, 48 * 1024 + 4, CUDA_INVALID_VALUE}, /* over 48 KiB of dynamic shared */
        {2, 1024, 1, 48 * 1024, CUDA_SUCCESS},         /* the limits themselves are fine */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int ran = -1, after = -1;
        int e = emu_launch_config(&ran, &after, cases[c].gx, cases[c].bx, cases[c].by,
                                  cases[c].shmem);
        ck_assert_msg(e == cases[c].want, "case %zu: error %d (%s), want %d", c, e,
                      emu_error_string(e), cases[c].want);
        ck_assert_int_eq(after, CUDA_SUCCESS);
        int threads = (int)(cases[c].gx * cases[c].bx * cases[c].by);
        ck_assert_int_eq(ran, e == CUDA_SUCCESS ? threads : 0);
    }
    ck_assert_str_eq(emu_error_string(CUDA_INVALID_CONFIGURATION),
                     "invalid configuration argument");
}
END_TEST

int main(void) {
    Suite *s = suite_create("cuda_emu");
    TCase *tc = tcase_create("cuda_emu");
    tcase_add_test(tc, barrier_orders_a_block_reduction);
    tcase_add_test(tc, warp_sums_through_static_shared);
    tcase_add_test(tc, shuffles_match_plain_loops);
    tcase_add_test(tc, dynamic_shared_memory);
    tcase_add_test(tc, multi_dimensional_grids_and_blocks);
    tcase_add_test(tc, atomics_are_read_modify_writes);
    tcase_add_test(tc, bad_launches_are_reported);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
