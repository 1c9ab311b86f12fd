/*
 * main.c — the grpo binary. Everything lives in libgrpo; see cli.c.
 *
 * Before that, the OpenMP wait policy. libgomp's idle threads spin for a long time (its default
 * GOMP_SPINCOUNT) before they sleep: on an idle machine that makes the hand-off between two
 * parallel regions cheap, but when another process holds one of the cores, a spinning thread
 * burns the time slice its busy sibling needs and a step slows by several times (issue 14).
 * libgomp reads its settings once, when it is loaded (before main), so grpo chooses a shorter
 * spin by re-executing itself once with GOMP_SPINCOUNT set — only when the user set neither
 * OMP_WAIT_POLICY nor GOMP_SPINCOUNT (their settings win), and only once (GRPO_OMP_SET marks the
 * re-executed process; set by the user, it skips the re-exec too, e.g. under valgrind, which does
 * not follow an exec by default). Programs grpo starts (exec rewards) inherit both variables.
 * When the re-exec is not possible (no /proc) grpo runs on with libgomp's default.
 *
 * Isolated rewards run in workers started from this binary (train/reward_worker.h); only its main
 * names it, so a test program linked with libgrpo never starts its own main in their place.
 */
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"
#include "train/reward_worker.h"

/* Spins before an idle OpenMP thread sleeps (libgomp's default: 300000); measured in
 * bench/busy_core.sh (BENCHMARKS.md "A busy core"). */
#define GRPO_SPINCOUNT "3000"

static void choose_omp_wait(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT") || getenv("GRPO_OMP_SET")) return;
    /* the binary's own path, not /proc/self/exe: exec names the process after the file it runs,
     * and ps, top, pgrep and mpirun's messages should still say grpo */
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || (size_t)n >= sizeof self - 1) return;
    self[n] = 0;
    if (setenv("GOMP_SPINCOUNT", GRPO_SPINCOUNT, 1) || setenv("GRPO_OMP_SET", "1", 1)) return;
    execv(self, argv); /* returns only when it failed: run on with libgomp's default */
    unsetenv("GOMP_SPINCOUNT");
    unsetenv("GRPO_OMP_SET");
}

int main(int argc, char **argv) {
    choose_omp_wait(argv);
    grpo_reward_worker_set_program("/proc/self/exe"); /* isolated rewards run in grpo itself */
    return grpo_cli_main(argc, argv);
}
