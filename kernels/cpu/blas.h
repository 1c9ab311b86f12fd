/*
 * blas.h — OpenBLAS's cblas.h for the CPU backend. It pulls in <complex.h>, whose macro `I`
 * would rename the intermediate-size parameter `I` of ops.h, so the macro is dropped here.
 */
#ifndef GRPO_CPU_BLAS_H
#define GRPO_CPU_BLAS_H
#include <cblas.h>
#undef I
#endif
