/*
 * amx_detect.c — whether bf16 compute can run on Intel AMX tiles here (gemm_amx.c): the CPU's
 * amx_bf16 and amx_tile (with avx512f, for the packing), the build's AMX kernels
 * (GRPO_HAVE_AMX), and Linux's permission for the tile data, asked once a process.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* syscall */
#endif
#include <pthread.h>

#include "cpu/cpu_backend.h"

#if defined(GRPO_HAVE_AMX) && defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define AMX_BUILT 1
#endif

#define AMX_ARCH_GET_PERM 0x1022
#define AMX_ARCH_REQ_PERM 0x1023
#define AMX_XTILEDATA 18

static pthread_once_t amx_once = PTHREAD_ONCE_INIT;
static int amx_ok; /* written once, under amx_once */
static const char *amx_why = "not built with -mamx-tile -mamx-bf16";

/* Once a process: CPUID.(7,0):EDX bits 22 (amx_bf16) and 24 (amx_tile), then Linux's
 * permission for the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA). */
static void amx_detect(void) {
#if defined(AMX_BUILT)
    unsigned a, b, c, d;
    __builtin_cpu_init();
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 22)) || !(d & (1u << 24)) ||
        !__builtin_cpu_supports("avx512f")) {
        amx_why = "this CPU has no amx_bf16/amx_tile (with avx512f)";
        return;
    }
    unsigned long perm = 0;
    if (syscall(SYS_arch_prctl, AMX_ARCH_REQ_PERM, AMX_XTILEDATA) != 0 ||
        syscall(SYS_arch_prctl, AMX_ARCH_GET_PERM, &perm) != 0 ||
        !(perm & (1ul << AMX_XTILEDATA))) {
        amx_why = "the OS refused the AMX tile data (arch_prctl ARCH_REQ_XCOMP_PERM)";
        return;
    }
    amx_ok = 1;
    amx_why = "";
#endif
}

int cpu_amx_bf16_ready(void) {
    pthread_once(&amx_once, amx_detect);
    return amx_ok;
}

const char *cpu_amx_bf16_why(void) {
    pthread_once(&amx_once, amx_detect);
    return amx_why;
}

