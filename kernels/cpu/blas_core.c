/*
 * blas_core.c — OpenBLAS's kernels for this CPU.
 *
 * OpenBLAS (built with DYNAMIC_ARCH, as Debian ships it) picks one set of kernels when it loads,
 * from the CPU's family and model. A release older than the CPU does not know its model and
 * falls back: Debian 12's 0.3.21 takes an Intel Xeon of family 6, model 207 (Emerald Rapids,
 * AVX-512 with avx512_bf16) for "Prescott", SSE3 kernels, and its sgemm runs at 32 instead of
 * 155 GFLOP/s (bench_dense, 1 thread). grpo's fp32 backward and attention are OpenBLAS calls, so
 * the whole policy phase ran 3.9x slower there (8.63 against 2.20 CPU s at the mm128 step).
 *
 * The kernels can only be chosen before OpenBLAS loads, through OPENBLAS_CORETYPE. So a program
 * that wants its CPU's kernels calls grpo_cpu_blas_core_pick first thing (the grpo binary and
 * the benches in main, the test programs in a constructor): where OpenBLAS chose kernels
 * without AVX2 on a CPU that has AVX2 and FMA, and the user set no OPENBLAS_CORETYPE, it sets
 * the variable to the kernels the CPU's instructions allow (cpu_blas_core_for) and executes the
 * program's file again (the target of /proc/self/exe, so that the process keeps its name) with
 * the same arguments (/proc/self/cmdline); the variable is then set, so this happens once.
 * GRPO_OPENBLAS_CORE_WAS keeps OpenBLAS's own choice for `grpo version` to show. Nothing is
 * printed. A core OpenBLAS did recognise is left alone, and so is a user's choice.
 */
#include "cpu/cpu_backend.h"

#include "cpu/blas.h"
#include "kernels.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* OpenBLAS's x86-64 kernel sets (its names, as openblas_get_corename prints them) built on AVX2
 * and FMA or on AVX-512. Any other is an older set (Prescott, Nehalem, Sandybridge, ...). */
static const char *const avx2_cores[] = {"Haswell", "Zen", "Excavator", "SkylakeX", "Cooperlake",
                                         "SapphireRapids"};

static int is_avx2_core(const char *core) {
    for (size_t i = 0; i < sizeof avx2_cores / sizeof avx2_cores[0]; i++)
        if (strcasecmp(core, avx2_cores[i]) == 0) return 1;
    return 0;
}

/* grpo calls OpenBLAS for sgemm alone: SkylakeX's kernels are its AVX-512 set, Haswell's its
 * AVX2 one. (Cooperlake's, for CPUs with avx512_bf16, add bf16 routines grpo does not call;
 * their sgemm ran at the same rate here, 155 against 155 GFLOP/s.) */
const char *cpu_blas_core_for(const char *current, int32_t simd) {
    if (!current || simd < CPU_SIMD_AVX2 || is_avx2_core(current)) return NULL;
    return simd >= CPU_SIMD_AVX512 ? "SkylakeX" : "Haswell";
}

/* CPU_SIMD_AVX512 only with the AVX-512 subsets OpenBLAS's SkylakeX kernels use. */
static int32_t blas_simd_level(void) {
    int32_t level = cpu_simd_level(CPU_SIMD_ANY);
#if defined(__GNUC__) && defined(__x86_64__)
    if (level == CPU_SIMD_AVX512 &&
        !(__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd")))
        level = CPU_SIMD_AVX2;
#endif
    return level;
}

const char *grpo_cpu_blas_core(void) { return openblas_get_corename(); }

const char *grpo_cpu_blas_core_was(void) { return getenv("GRPO_OPENBLAS_CORE_WAS"); }

/* argv of this process from /proc/self/cmdline (NUL-separated), malloc'd; NULL on failure */
static char **own_argv(void) {
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int ok = 1;
    for (int c; ok && (c = fgetc(f)) != EOF;) {
        if (len + 2 > cap) {
            char *more = realloc(buf, cap = cap ? 2 * cap : 4096);
            if (!more) {
                ok = 0;
                break;
            }
            buf = more;
        }
        buf[len++] = (char)c;
    }
    fclose(f);
    if (!ok || !len) {
        free(buf);
        return NULL;
    }
    buf[len] = '\0';
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += buf[i] == '\0';
    char **argv = calloc(n + 2, sizeof *argv);
    if (!argv) {
        free(buf);
        return NULL;
    }
    for (size_t i = 0, a = 0; i < len && a <= n; i += strlen(buf + i) + 1) argv[a++] = buf + i;
    return argv;
}

void grpo_cpu_blas_core_pick(void) {
    if (getenv("OPENBLAS_CORETYPE")) return; /* the user's choice, or this pick's second run */
    const char *current = openblas_get_corename();
    const char *want = cpu_blas_core_for(current, blas_simd_level());
    char exe[4096];
    ssize_t n = want ? readlink("/proc/self/exe", exe, sizeof exe - 1) : -1;
    char **argv = n > 0 ? own_argv() : NULL;
    if (!argv) return;
    exe[n] = '\0'; /* the program's own path: the process keeps its name (pgrep, ps) */
    setenv("GRPO_OPENBLAS_CORE_WAS", current, 1);
    setenv("OPENBLAS_CORETYPE", want, 1);
    fflush(NULL);
    execv(exe, argv);
    unsetenv("OPENBLAS_CORETYPE"); /* going on with OpenBLAS's own choice */
    unsetenv("GRPO_OPENBLAS_CORE_WAS");
    free(argv[0]);
    free(argv);
}
