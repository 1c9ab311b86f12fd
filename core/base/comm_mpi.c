/* comm_mpi.c — the MPI implementation of the communicator (comm.h); built only when CMake found
 * MPI (GRPO_HAVE_MPI). MPI_COMM_WORLD with its default error handler (errors are fatal to the
 * job, so a dead peer never leaves the others waiting). */
#include "base/comm.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MPI counts are int: larger buffers go in pieces of this many elements. */
#define PIECE (1 << 30)

static MPI_Op op_of(grpo_comm_op op) {
    return op == GRPO_COMM_MIN ? MPI_MIN : op == GRPO_COMM_MAX ? MPI_MAX : MPI_SUM;
}

static int mpi_allreduce(void *x, size_t n, int is_f64, grpo_comm_op op) {
    size_t es = is_f64 ? sizeof(double) : sizeof(float);
    for (size_t i = 0; i < n; i += PIECE) {
        int k = n - i < PIECE ? (int)(n - i) : PIECE;
        if (MPI_Allreduce(MPI_IN_PLACE, (char *)x + i * es, k, is_f64 ? MPI_DOUBLE : MPI_FLOAT,
                          op_of(op), MPI_COMM_WORLD) != MPI_SUCCESS)
            return -1;
    }
    return 0;
}

static int mpi_allgather(float *out, const float *in, size_t n) {
    if (n > INT_MAX) return -1; /* per-row statistics: far below */
    return MPI_Allgather(in, (int)n, MPI_FLOAT, out, (int)n, MPI_FLOAT, MPI_COMM_WORLD) ==
                   MPI_SUCCESS
               ? 0
               : -1;
}

static int mpi_gather_bytes(char **out, size_t *out_n, const char *in, size_t n) {
    int rank, size, mine = n > INT_MAX ? -1 : (int)n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank), MPI_Comm_size(MPI_COMM_WORLD, &size);
    int *counts = rank == 0 ? malloc((size_t)size * sizeof *counts) : NULL;
    int *displs = rank == 0 ? malloc((size_t)size * sizeof *displs) : NULL;
    int ok = rank != 0 || (counts && displs);
    /* every rank takes part even when one is out of memory, so none is left waiting */
    if (MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        ok = 0;
    long long total = 0;
    for (int r = 0; rank == 0 && ok && r < size; r++) {
        if (counts[r] < 0 || total + counts[r] > INT_MAX) ok = 0;
        else displs[r] = (int)total, total += counts[r];
    }
    if (rank == 0 && ok && !(*out = malloc((size_t)total + 1))) ok = 0;
    if (rank == 0 && !ok) /* still receive nothing, in step with the others */
        for (int r = 0; counts && displs && r < size; r++) counts[r] = 0, displs[r] = 0;
    char dummy;
    if (MPI_Gatherv(in, mine < 0 ? 0 : mine, MPI_CHAR, rank == 0 && *out ? *out : &dummy, counts,
                    displs, MPI_CHAR, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        ok = 0;
    if (rank == 0 && ok) (*out)[total] = 0, *out_n = (size_t)total;
    if (rank == 0 && !ok) free(*out), *out = NULL;
    free(counts), free(displs);
    return ok && mine >= 0 ? 0 : -1;
}

static int mpi_broadcast(void *buf, size_t bytes, int root) {
    for (size_t i = 0; i < bytes || i == 0; i += PIECE) {
        int k = bytes - i < PIECE ? (int)(bytes - i) : PIECE;
        if (MPI_Bcast((char *)buf + i, k, MPI_BYTE, root, MPI_COMM_WORLD) != MPI_SUCCESS) return -1;
        if (bytes == 0) break;
    }
    return 0;
}

static int mpi_barrier(void) { return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1; }

static void mpi_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

static void mpi_finalize(void) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
}

static const grpo_comm_impl mpi = {
    /* .name = */ "mpi",
    /* .allreduce = */ mpi_allreduce,
    /* .allgather = */ mpi_allgather,
    /* .gather_bytes = */ mpi_gather_bytes,
    /* .broadcast = */ mpi_broadcast,
    /* .barrier = */ mpi_barrier,
    /* .abort = */ mpi_abort,
    /* .finalize = */ mpi_finalize,
};

int grpo_comm_mpi_open(const grpo_comm_impl **impl, int *rank, int *size, char *why,
                       size_t why_size) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        snprintf(why, why_size, "MPI_Init failed");
        return -1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    *impl = &mpi;
    return 0;
}
