/*
 * test_blas_core.c — the choice of OpenBLAS's kernels (kernels/cpu/blas_core.c,
 * cpu_blas_core_for): a release of OpenBLAS older than the CPU takes it for an older one and
 * runs kernels without AVX2 (Debian 12's 0.3.21 ran "Prescott" on a Xeon of family 6 model 207);
 * grpo then asks for the kernels the CPU's instructions allow. Checked here:
 *   - kernels without AVX2 on a CPU with AVX-512 -> SkylakeX, AVX2 and FMA -> Haswell, whatever
 *     the case of the name;
 *   - kernels OpenBLAS built on AVX2 or AVX-512 are left as they are, on any CPU;
 *   - a CPU without AVX2 (or no name) is left alone.
 * That the grpo binary runs the chosen kernels is tests/cli/blas_core.sh.
 */
#include <check.h>
#include <stdlib.h>

#include "cpu/cpu_backend.h"

START_TEST(old_kernels_on_a_newer_cpu_are_replaced) {
    static const char *const old[] = {"Prescott", "Core2", "Nehalem", "Sandybridge", "Barcelona",
                                      "prescott", "Atom", "Bulldozer"};
    for (size_t i = 0; i < sizeof old / sizeof old[0]; i++) {
        ck_assert_str_eq(cpu_blas_core_for(old[i], CPU_SIMD_AVX512), "SkylakeX");
        ck_assert_str_eq(cpu_blas_core_for(old[i], CPU_SIMD_AVX2), "Haswell");
    }
}
END_TEST

START_TEST(kernels_built_on_avx2_are_kept) {
    static const char *const ok[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids",
                                     "Excavator", "HASWELL", "skylakex"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        for (int32_t simd = CPU_SIMD_BASE; simd <= CPU_SIMD_AVX512; simd++)
            ck_assert_msg(cpu_blas_core_for(ok[i], simd) == NULL, "%s at level %d", ok[i], simd);
}
END_TEST

START_TEST(cpu_without_avx2_is_left_alone) {
    ck_assert_ptr_null(cpu_blas_core_for("Prescott", CPU_SIMD_BASE));
    ck_assert_ptr_null(cpu_blas_core_for("Sandybridge", CPU_SIMD_BASE));
    ck_assert_ptr_null(cpu_blas_core_for(NULL, CPU_SIMD_AVX512));
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("blas_core");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, old_kernels_on_a_newer_cpu_are_replaced);
    tcase_add_test(tc, kernels_built_on_avx2_are_kept);
    tcase_add_test(tc, cpu_without_avx2_is_left_alone);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
