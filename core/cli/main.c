/*
 * main.c — the grpo binary. Everything lives in libgrpo; see cli.c.
 *
 * The CPU backend's threads are its own pool (kernels/cpu/cpu_pool.h), which spins only a few
 * microseconds before it sleeps: no OpenMP runtime to configure, so no environment to set
 * (grpo used to re-execute itself with a short GOMP_SPINCOUNT; issue 14, issue 30). It does
 * re-execute itself where OpenBLAS took the CPU for an older one and chose kernels without AVX2
 * (grpo_cpu_blas_core_pick: OPENBLAS_CORETYPE is read only as OpenBLAS loads).
 *
 * Isolated rewards run in workers started from this binary (train/reward_worker.h); only its main
 * names it, so a test program linked with libgrpo never starts its own main in their place.
 */
#include "cli/cli.h"
#include "kernels.h"
#include "train/reward_worker.h"

int main(int argc, char **argv) {
    grpo_cpu_blas_core_pick(); /* OpenBLAS's kernels for this CPU (kernels/cpu/blas_core.c) */
    grpo_reward_worker_set_program("/proc/self/exe"); /* isolated rewards run in grpo itself */
    return grpo_cli_main(argc, argv);
}
