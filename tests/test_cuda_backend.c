/*
 * test_cuda_backend.c — the CUDA backend's core (kernels/cuda/cuda_backend.cu, cuda_ctx.cu,
 * cuda_memory.cu): the table, memory ops and the precision option. On a GPU (test_cuda_backend)
 * or the host emulation (test_cuda_backend_emu); see tests/cuda_parity.h.
 */
#include <check.h>
#include <stddef.h>

#include "cuda_parity.h"

static cuda_parity P;

START_TEST(table_is_cuda_and_its_core_ops_are_there) {
    ck_assert_str_eq(P.cuda->name, "cuda");
    ck_assert_uint_eq(P.cuda->struct_size, sizeof(grpo_ops));
    ck_assert_ptr_nonnull(P.cuda->ctx);
    void *core[] = {(void *)P.cuda->alloc,          (void *)P.cuda->free,
                    (void *)P.cuda->upload,         (void *)P.cuda->download,
                    (void *)P.cuda->copy,           (void *)P.cuda->zero,
                    (void *)P.cuda->sync,           (void *)P.cuda->matmul_forward,
                    (void *)P.cuda->matmul_backward, (void *)P.cuda->matmul_forward_w,
                    (void *)P.cuda->matmul_backward_w};
    for (size_t i = 0; i < sizeof core / sizeof core[0]; i++)
        ck_assert_msg(core[i] != NULL, "core op %zu is NULL", i);
}
END_TEST

/* alloc is zeroed; upload, copy (also between offsets), zero of a part and download round trip. */
START_TEST(memory_ops_round_trip) {
    enum { N = 1000 };
    void *ctx = P.cuda->ctx;
    float host[N], back[N];
    for (int i = 0; i < N; i++) host[i] = (float)i * 0.25f - 7.5f;
    float *a = P.cuda->alloc(ctx, sizeof host), *b = P.cuda->alloc(ctx, sizeof host);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq((uintptr_t)a % 64, 0);
    memset(back, 0x7f, sizeof back);
    P.cuda->download(ctx, back, b, sizeof back);
    for (int i = 0; i < N; i++) ck_assert_msg(back[i] == 0.0f, "fresh alloc [%d] = %g", i, back[i]);
    P.cuda->upload(ctx, a, host, sizeof host);
    P.cuda->copy(ctx, b, a, sizeof host);
    P.cuda->copy(ctx, b + 500, a, 100 * sizeof(float)); /* b[500..600) = a[0..100) */
    P.cuda->zero(ctx, b + 10, 5 * sizeof(float));
    P.cuda->sync(ctx);
    P.cuda->download(ctx, back, b, sizeof back);
    for (int i = 0; i < N; i++) {
        float want = i >= 10 && i < 15 ? 0.0f : i >= 500 && i < 600 ? host[i - 500] : host[i];
        ck_assert_msg(back[i] == want, "[%d] = %g, want %g", i, back[i], want);
    }
    /* zero-byte operations are no-ops, a zero-byte allocation is a valid pointer */
    void *z = P.cuda->alloc(ctx, 0);
    ck_assert_ptr_nonnull(z);
    P.cuda->upload(ctx, z, host, 0);
    P.cuda->download(ctx, back, z, 0);
    P.cuda->copy(ctx, z, a, 0);
    P.cuda->zero(ctx, z, 0);
    P.cuda->free(ctx, z);
    P.cuda->free(ctx, a);
    P.cuda->free(ctx, b);
    P.cuda->free(ctx, NULL);
}
END_TEST

START_TEST(precision_is_checked) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_backend_options bad = {1, 7};
    ck_assert_ptr_null(grpo_backend_open_with("cuda", &bad, &err));
    ck_assert_int_eq(err.status, GRPO_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "precision 7"), "message: %s", err.message);
    grpo_backend_options bf16 = {1, GRPO_DTYPE_BF16};
    grpo_error_init(&err);
    grpo_ops *ops = grpo_backend_open_with("cuda", &bf16, &err);
    ck_assert_msg(ops != NULL, "bf16: %s", err.message);
    grpo_backend_close(ops);
}
END_TEST

int main(void) {
    cuda_parity_open(&P); /* exits 77 (skipped) where the cuda backend cannot run */
    Suite *s = suite_create("cuda_backend");
    TCase *tc = tcase_create("cuda_backend");
    tcase_add_test(tc, table_is_cuda_and_its_core_ops_are_there);
    tcase_add_test(tc, memory_ops_round_trip);
    tcase_add_test(tc, precision_is_checked);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK); /* a CUDA context does not survive fork() */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    cuda_parity_close(&P);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
