/* comm.c — the world communicator: launcher detection, the single-process implementation and
 * the dispatch to MPI's (comm.h). */
#include "base/comm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct {
    const grpo_comm_impl *impl; /* NULL before init */
    int rank, size;
    double seconds; /* inside collectives */
} world = {NULL, 0, 1, 0.0};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The first of the launchers' size variables that is a positive number. */
int grpo_comm_launched_size(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        errno = 0;
        long n = v ? strtol(v, &end, 10) : 0;
        if (v && *v && !*end && errno != ERANGE && n > 0) return n > 1 << 20 ? 1 << 20 : (int)n;
    }
    return 0;
}

/* ---- single: one rank, every collective the identity ----------------------------------- */

static int single_allreduce(void *x, size_t n, int is_f64, grpo_comm_op op) {
    (void)x, (void)n, (void)is_f64, (void)op;
    return 0;
}
static int single_allgather(float *out, const float *in, size_t n) {
    if (n) memcpy(out, in, n * sizeof *in);
    return 0;
}
static int single_gather_bytes(char **out, size_t *out_n, const char *in, size_t n) {
    if (!(*out = malloc(n + 1))) return -1;
    if (n) memcpy(*out, in, n);
    (*out)[n] = 0, *out_n = n;
    return 0;
}
static int single_broadcast(void *buf, size_t bytes, int root) {
    (void)buf, (void)bytes, (void)root;
    return 0;
}
static int single_barrier(void) { return 0; }
static void single_abort(int code) { exit(code); }
static void single_finalize(void) {}

static const grpo_comm_impl single = {
    /* .name = */ "single",
    /* .allreduce = */ single_allreduce,
    /* .allgather = */ single_allgather,
    /* .gather_bytes = */ single_gather_bytes,
    /* .broadcast = */ single_broadcast,
    /* .barrier = */ single_barrier,
    /* .abort = */ single_abort,
    /* .finalize = */ single_finalize,
};

#ifndef GRPO_HAVE_MPI
int grpo_comm_mpi_open(const grpo_comm_impl **impl, int *rank, int *size, char *why,
                       size_t why_size) {
    (void)impl, (void)rank, (void)size;
    snprintf(why, why_size, "this grpo was built without MPI (CMake did not find it: install "
             "openmpi-bin and libopenmpi-dev, scripts/setup.sh, and rebuild)");
    return -1;
}
#endif

int grpo_comm_init(grpo_error *err) {
    if (world.impl) return GRPO_OK;
    int launched = grpo_comm_launched_size();
    world.impl = &single, world.rank = 0, world.size = 1;
    if (launched <= 1) return GRPO_OK; /* one rank is the single world: no MPI_Init */
    char why[512];
    const grpo_comm_impl *impl;
    int rank, size;
    if (grpo_comm_mpi_open(&impl, &rank, &size, why, sizeof why) != 0)
        return grpo_error_set(err, GRPO_ERR_INVALID,
                              "started by a launcher with %d ranks (mpirun/srun), but %s; "
                              "expected one plain process or an MPI build",
                              launched, why);
    world.impl = impl, world.rank = rank, world.size = size;
    return GRPO_OK;
}

void grpo_comm_finalize(void) {
    if (world.impl) world.impl->finalize();
    world.impl = NULL, world.rank = 0, world.size = 1;
}

int grpo_comm_rank(void) { return world.rank; }
int grpo_comm_size(void) { return world.size; }
const char *grpo_comm_name(void) { return world.impl ? world.impl->name : single.name; }
double grpo_comm_seconds(void) { return world.seconds; }

static const grpo_comm_impl *impl(void) { return world.impl ? world.impl : &single; }

/* A collective's status: the time it took counted, a failure named. */
static int done(int bad, double t0, const char *what, grpo_error *err) {
    world.seconds += now() - t0;
    if (!bad) return GRPO_OK;
    return grpo_error_set(err, GRPO_ERR_IO, "comm (%s, rank %d of %d): %s failed", impl()->name,
                          world.rank, world.size, what);
}

int grpo_comm_allreduce_f64(double *x, size_t n, grpo_comm_op op, grpo_error *err) {
    double t0 = now();
    return done(impl()->allreduce(x, n, 1, op) != 0, t0, "allreduce", err);
}

int grpo_comm_allreduce_f32(float *x, size_t n, grpo_comm_op op, grpo_error *err) {
    double t0 = now();
    return done(impl()->allreduce(x, n, 0, op) != 0, t0, "allreduce", err);
}

int grpo_comm_allgather_f32(float *out, const float *in, size_t n, grpo_error *err) {
    double t0 = now();
    return done(impl()->allgather(out, in, n) != 0, t0, "allgather", err);
}

int grpo_comm_gather_bytes(char **out, size_t *out_n, const char *in, size_t n, grpo_error *err) {
    double t0 = now();
    *out = NULL, *out_n = 0;
    return done(impl()->gather_bytes(out, out_n, in, n) != 0, t0, "gather (out of memory?)", err);
}

int grpo_comm_broadcast(void *buf, size_t bytes, int root, grpo_error *err) {
    double t0 = now();
    return done(impl()->broadcast(buf, bytes, root) != 0, t0, "broadcast", err);
}

int grpo_comm_barrier(grpo_error *err) {
    double t0 = now();
    return done(impl()->barrier() != 0, t0, "barrier", err);
}

_Noreturn void grpo_comm_abort(int code) {
    fflush(stdout), fflush(stderr);
    impl()->abort(code);
    exit(code); /* an abort that returned */
}
