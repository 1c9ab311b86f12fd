/*
 * blas_core_first.c — linked into every test program: before main, OpenBLAS's kernels for this
 * CPU (grpo_cpu_blas_core_pick, kernels/cpu/blas_core.c), as the grpo binary picks them, so that
 * the tests run the products grpo runs (OpenBLAS 0.3.21 takes some CPUs with AVX-512 for
 * Prescott, whose kernels also sum a row differently with the batch's size).
 */
#include "kernels.h"

__attribute__((constructor)) static void blas_core_first(void) { grpo_cpu_blas_core_pick(); }
