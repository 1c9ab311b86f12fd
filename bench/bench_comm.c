/*
 * bench_comm.c — the gradient all-reduce of data-parallel training alone (core/base/comm.h): the
 * median time of grpo_comm_allreduce_f32 (sum, in place) over P floats, for the gradient sizes of
 * the models bench/mpi_scaling.sh trains. A barrier before each call keeps waits for the other
 * rank out of the time (grpo's time/comm metric includes them).
 *
 * usage: mpirun -np 2 build/bench/bench_comm [REPEATS]   (default 20; one process: no MPI, ~0)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/comm.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 20;
    grpo_error err;
    grpo_error_init(&err);
    if (reps < 1 || grpo_comm_init(&err) != GRPO_OK) {
        fprintf(stderr, "bench_comm: %s\n", reps < 1 ? "REPEATS must be >= 1" : err.message);
        return 1;
    }
    /* grpo init-model's default (the arith runs) and the MiniMind2-small body with grpo's
     * byte-level vocabulary (bench/mpi_scaling.sh minimind): their parameter counts */
    static const struct { const char *what; size_t P; } sizes[] = {
        {"arith model (init-model default)", 821376},
        {"MiniMind2-small body, byte vocab", 22688256},
    };
    double *t = malloc((size_t)reps * sizeof *t);
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        float *g = malloc(sizes[s].P * sizeof *g);
        if (!g || !t) return 1;
        for (size_t i = 0; i < sizes[s].P; i++) g[i] = (float)(i % 7) * 1e-3f;
        for (int r = 0; r < reps; r++) {
            grpo_comm_barrier(&err);
            double t0 = now();
            if (grpo_comm_allreduce_f32(g, sizes[s].P, GRPO_COMM_SUM, &err) != GRPO_OK) {
                fprintf(stderr, "bench_comm: %s\n", err.message);
                grpo_comm_abort(1);
            }
            t[r] = now() - t0;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp);
        if (grpo_comm_rank() == 0)
            printf("%-36s P = %9zu floats (%6.1f MB): all-reduce median %8.3f ms over %d ranks "
                   "(%s)\n",
                   sizes[s].what, sizes[s].P, sizes[s].P * 4e-6, 1e3 * t[reps / 2],
                   grpo_comm_size(), grpo_comm_name());
        free(g);
    }
    free(t);
    grpo_comm_finalize();
    return 0;
}
