/*
 * comm.h — the communicator data-parallel training runs over: the ranks of one job (MPI
 * for CPU ranks; NCCL for device buffers is planned, docs/ARCHITECTURE.md).
 *
 * One process belongs to one world. grpo_comm_init() decides which implementation serves it:
 *   single  size 1, rank 0; every collective leaves its buffer as it is (the sum, min or max over
 *           one rank). A plain `grpo train` runs here and never calls MPI_Init.
 *   mpi     when the process was started by a launcher with more than one rank (mpirun/mpiexec:
 *           OMPI_COMM_WORLD_SIZE or PMI_SIZE; Slurm's srun: SLURM_STEP_NUM_TASKS) and this build
 *           found MPI (CMake's FindMPI: GRPO_HAVE_MPI). One rank is the single world. More
 *           than one on a build without MPI is an error, so N copies never train side by side
 *           unaware of each other.
 * The collectives are blocking and every rank MUST make the same calls in the same order (MPI's
 * rule). MPI's default error handler stays: a failed collective, or a peer that died, ends the
 * job instead of hanging. grpo_comm_abort() prints nothing; the caller names the rank and cause
 * first.
 *
 * Buffers are host memory. Errors: GRPO_OK or GRPO_ERR_* with one line in err (may be NULL).
 */
#ifndef GRPO_COMM_H
#define GRPO_COMM_H

#include <stddef.h>

#include "grpo/plugin.h"

typedef enum grpo_comm_op { GRPO_COMM_SUM, GRPO_COMM_MIN, GRPO_COMM_MAX } grpo_comm_op;

/* The ranks a launcher started, read from its environment (see above); 0 when none did. */
int grpo_comm_launched_size(void);

/* Joins the world (idempotent; the first call decides single or mpi, see above). */
int grpo_comm_init(grpo_error *err);
/* Leaves it (MPI_Finalize after an MPI init; nothing otherwise). Idempotent. */
void grpo_comm_finalize(void);

int grpo_comm_rank(void); /* 0 .. size-1; 0 before init */
int grpo_comm_size(void); /* 1 before init and in the single implementation */
const char *grpo_comm_name(void); /* "single" or "mpi" */

/* In place: x[n] becomes op over the ranks' x[n], element-wise, on every rank. */
int grpo_comm_allreduce_f64(double *x, size_t n, grpo_comm_op op, grpo_error *err);
int grpo_comm_allreduce_f32(float *x, size_t n, grpo_comm_op op, grpo_error *err);
/* out[size*n] = the ranks' in[n] in rank order, on every rank (out and in do not overlap). */
int grpo_comm_allgather_f32(float *out, const float *in, size_t n, grpo_error *err);
/* Rank 0 receives the ranks' bytes in rank order: *out (malloc'd, NUL-terminated, *out_n bytes
 * without the NUL); other ranks get *out = NULL, *out_n = 0. */
int grpo_comm_gather_bytes(char **out, size_t *out_n, const char *in, size_t n, grpo_error *err);
/* buf[bytes] of root is copied to every rank. */
int grpo_comm_broadcast(void *buf, size_t bytes, int root, grpo_error *err);
int grpo_comm_barrier(grpo_error *err);
/* Ends every rank of the job with status code (MPI_Abort); exit(code) in the single world. */
_Noreturn void grpo_comm_abort(int code);

/* Seconds this process has spent inside the collectives above since init (waiting for slower
 * ranks included): the trainer's time/comm metric. */
double grpo_comm_seconds(void);

/* ---- implementations (comm.c dispatches; comm_mpi.c exists only with GRPO_HAVE_MPI) --------- */
typedef struct grpo_comm_impl {
    const char *name;
    int (*allreduce)(void *x, size_t n, int is_f64, grpo_comm_op op);
    int (*allgather)(float *out, const float *in, size_t n);
    int (*gather_bytes)(char **out, size_t *out_n, const char *in, size_t n);
    int (*broadcast)(void *buf, size_t bytes, int root);
    int (*barrier)(void);
    void (*abort)(int code); /* does not return */
    void (*finalize)(void);
} grpo_comm_impl;

/* MPI_Init and the mpi table; rank/size filled. Returns 0, or -1 with why filled. */
int grpo_comm_mpi_open(const grpo_comm_impl **impl, int *rank, int *size, char *why,
                       size_t why_size);

#endif
