/*
 * cuda_parity.h — what the CUDA op parity tests share: the two backends (cpu, the reference, and
 * cuda, natively or under the host emulation), buffers filled the same on both, comparisons.
 *
 * Which cuda: GRPO_CUDA_EMULATION=1 in the environment (the *_emu ctest registrations) opens the
 * emulated backend (kernels/cuda built by the host compiler); without it the real one, and a
 * machine with no GPU skips the whole suite with one line and exit 77 (ctest: skipped). The
 * emulated module is built with the project, so an emulated backend that cannot open is a skip
 * outside CI only: under CI=true it fails (tests/test_skip.h).
 * Every buffer goes through upload/download: a test must pass on a real GPU unchanged.
 * Open it in main() before the suite runs, and run the suite with
 * srunner_set_fork_status(sr, CK_NOFORK): a CUDA context does not survive fork(), and exit(77)
 * inside a forked test would count as a failure (tests/test_cuda_gemm.c does this).
 */
#ifndef GRPO_TEST_CUDA_PARITY_H
#define GRPO_TEST_CUDA_PARITY_H

#include <math.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "test_skip.h"

typedef struct cuda_parity {
    grpo_ops *cpu, *cuda;
    int emulated;
} cuda_parity;

/* Opens both backends; exits 77 with one line when the cuda one cannot run here (1 under CI when
 * it is the emulation). */
static inline void cuda_parity_open(cuda_parity *p) {
    grpo_error err;
    grpo_error_init(&err);
    memset(p, 0, sizeof *p);
    const char *emu = getenv("GRPO_CUDA_EMULATION");
    p->emulated = emu && strcmp(emu, "1") == 0;
    p->cpu = grpo_backend_open("cpu", 1, &err);
    if (!p->cpu) {
        fprintf(stderr, "cpu backend: %s\n", err.message);
        exit(1);
    }
    p->cuda = grpo_backend_open("cuda", 1, &err);
    if (!p->cuda) {
        char what[1200];
        snprintf(what, sizeof what, "cuda backend%s not available here: %s",
                 p->emulated ? " (emulation)" : "", err.message);
        if (p->emulated) test_skip_or_fail(what);
        printf("SKIP: %s\n", what);
        exit(77);
    }
    printf("cuda parity: %s\n", p->emulated ? "host emulation (no GPU used)" : "real GPU");
}

static inline void cuda_parity_close(cuda_parity *p) {
    grpo_backend_close(p->cuda);
    grpo_backend_close(p->cpu);
    memset(p, 0, sizeof *p);
}

/* For suites that open the cuda backend in each test's own (forked) process: probes in a child
 * first that cuda_parity_open succeeds, and exits with the child's status (77: skipped) when it
 * does not. test: the test's name, for the one line said when the probe itself fails. */
static inline void cuda_parity_skip_unless_available(const char *test) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        cuda_parity probe;
        cuda_parity_open(&probe); /* exits 77 when unavailable */
        cuda_parity_close(&probe);
        _exit(0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        fprintf(stderr, "%s: the availability probe failed\n", test);
        exit(1);
    }
    if (WEXITSTATUS(status) != 0) exit(WEXITSTATUS(status));
}

/* Deterministic uniform floats in [lo, hi). */
static uint64_t cuda_parity_rng = 0x243F6A8885A308D3ull;
static inline float cuda_parity_uniform(float lo, float hi) {
    cuda_parity_rng = cuda_parity_rng * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (float)(cuda_parity_rng >> 40) * (1.0f / 16777216.0f);
}

/* A pair of buffers holding the same bytes: host (cpu backend memory) and device (cuda). */
typedef struct cuda_pair {
    void *cpu, *dev;
    uint64_t bytes;
} cuda_pair;

static inline cuda_pair cuda_pair_new(cuda_parity *p, const void *init, uint64_t bytes) {
    cuda_pair b = {p->cpu->alloc(p->cpu->ctx, bytes), p->cuda->alloc(p->cuda->ctx, bytes), bytes};
    if (!b.cpu || !b.dev) {
        fprintf(stderr, "cuda_pair_new: out of memory (%llu bytes)\n", (unsigned long long)bytes);
        exit(1);
    }
    if (init) {
        memcpy(b.cpu, init, bytes);
        p->cuda->upload(p->cuda->ctx, b.dev, init, bytes);
    }
    return b;
}

/* n random floats in [lo, hi) on both sides. */
static inline cuda_pair cuda_pair_rand(cuda_parity *p, uint64_t n, float lo, float hi) {
    float *h = malloc(n * sizeof(float) + 1);
    for (uint64_t i = 0; i < n; i++) h[i] = cuda_parity_uniform(lo, hi);
    cuda_pair b = cuda_pair_new(p, h, n * sizeof(float));
    free(h);
    return b;
}

/* n copies of value v on both sides (NaN: "must be overwritten"). */
static inline cuda_pair cuda_pair_fill(cuda_parity *p, uint64_t n, float v) {
    float *h = malloc(n * sizeof(float) + 1);
    for (uint64_t i = 0; i < n; i++) h[i] = v;
    cuda_pair b = cuda_pair_new(p, h, n * sizeof(float));
    free(h);
    return b;
}

static inline void cuda_pair_free(cuda_parity *p, cuda_pair *b) {
    p->cpu->free(p->cpu->ctx, b->cpu);
    p->cuda->free(p->cuda->ctx, b->dev);
    memset(b, 0, sizeof *b);
}

/* Compares n floats of the pair (device downloaded) with |cuda - cpu| <= atol + rtol * |cpu|;
 * returns the number of mismatches and prints the first few naming `what` and the index. NaN
 * matches NaN only. */
static inline int cuda_pair_compare(cuda_parity *p, const cuda_pair *b, uint64_t n, double atol,
                             double rtol, const char *what) {
    float *got = malloc(n * sizeof(float) + 1);
    p->cuda->sync(p->cuda->ctx);
    p->cuda->download(p->cuda->ctx, got, b->dev, n * sizeof(float));
    const float *want = b->cpu;
    int bad = 0;
    double worst = 0;
    for (uint64_t i = 0; i < n; i++) {
        double g = got[i], w = want[i], d = fabs(g - w);
        int ok = isnan(w) ? isnan(g) : !isnan(g) && d <= atol + rtol * fabs(w);
        if (!isnan(d) && d > worst) worst = d;
        if (!ok && bad++ < 5)
            fprintf(stderr, "%s[%llu]: cuda %.9g, cpu %.9g (atol %g, rtol %g)\n", what,
                    (unsigned long long)i, g, w, atol, rtol);
    }
    if (bad) fprintf(stderr, "%s: %d of %llu differ (largest |diff| %g)\n", what, bad,
                     (unsigned long long)n, worst);
    free(got);
    return bad;
}

#endif /* GRPO_TEST_CUDA_PARITY_H */
