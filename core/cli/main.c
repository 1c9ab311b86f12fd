/*
 * main.c — the grpo binary. Everything lives in libgrpo; see cli.c.
 *
 * The CPU backend's threads are its own pool (kernels/cpu/cpu_pool.h), which spins only a few
 * microseconds before it sleeps: no OpenMP runtime to configure, so no environment to set
 * (grpo used to re-execute itself with a short GOMP_SPINCOUNT; issue 14, issue 30).
 *
 * Isolated rewards run in workers started from this binary (train/reward_worker.h); only its main
 * names it, so a test program linked with libgrpo never starts its own main in their place.
 */
#include "cli/cli.h"
#include "train/reward_worker.h"

int main(int argc, char **argv) {
    grpo_reward_worker_set_program("/proc/self/exe"); /* isolated rewards run in grpo itself */
    return grpo_cli_main(argc, argv);
}
