/*
 * test_comm.c — the communicator's single-process world (core/base/comm.h) and the per-row
 * sampling streams (core/base/rng.h) data-parallel training rests on. The MPI world is checked by
 * tests/mpi/train_mpi.sh under mpirun.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "base/comm.h"
#include "base/rng.h"

/* A plain process (no launcher variables) is rank 0 of 1 and every collective is the identity. */
START_TEST(plain_process_is_a_world_of_one) {
    unsetenv("OMPI_COMM_WORLD_SIZE"), unsetenv("PMI_SIZE"), unsetenv("SLURM_STEP_NUM_TASKS");
    grpo_error err;
    grpo_error_init(&err);
    ck_assert_int_eq(grpo_comm_launched_size(), 0);
    ck_assert_int_eq(grpo_comm_init(&err), GRPO_OK);
    ck_assert_int_eq(grpo_comm_rank(), 0);
    ck_assert_int_eq(grpo_comm_size(), 1);
    ck_assert_str_eq(grpo_comm_name(), "single");
    double d[3] = {1.5, -2, 3};
    float f[2] = {4, 5}, g[2] = {0, 0};
    ck_assert_int_eq(grpo_comm_allreduce_f64(d, 3, GRPO_COMM_SUM, &err), GRPO_OK);
    ck_assert_int_eq(grpo_comm_allreduce_f64(d, 3, GRPO_COMM_MIN, &err), GRPO_OK);
    ck_assert_int_eq(grpo_comm_allreduce_f32(f, 2, GRPO_COMM_MAX, &err), GRPO_OK);
    ck_assert(d[0] == 1.5 && d[1] == -2 && d[2] == 3 && f[0] == 4 && f[1] == 5);
    ck_assert_int_eq(grpo_comm_allgather_f32(g, f, 2, &err), GRPO_OK);
    ck_assert(g[0] == 4 && g[1] == 5);
    char *out = NULL;
    size_t n = 0;
    ck_assert_int_eq(grpo_comm_gather_bytes(&out, &n, "a\nb\n", 4, &err), GRPO_OK);
    ck_assert_uint_eq(n, 4);
    ck_assert_str_eq(out, "a\nb\n");
    free(out);
    ck_assert_int_eq(grpo_comm_gather_bytes(&out, &n, "", 0, &err), GRPO_OK);
    ck_assert(out && n == 0 && out[0] == 0);
    free(out);
    ck_assert_int_eq(grpo_comm_broadcast(d, sizeof d, 0, &err), GRPO_OK);
    ck_assert_int_eq(grpo_comm_barrier(&err), GRPO_OK);
    ck_assert(grpo_comm_seconds() >= 0);
    grpo_comm_finalize();
    ck_assert_int_eq(grpo_comm_size(), 1);
}
END_TEST

/* The launchers' variables: mpirun's first, then PMI's, then srun's; junk is no launcher. */
START_TEST(launcher_size_comes_from_the_environment) {
    unsetenv("OMPI_COMM_WORLD_SIZE"), unsetenv("PMI_SIZE"), unsetenv("SLURM_STEP_NUM_TASKS");
    setenv("SLURM_STEP_NUM_TASKS", "4", 1);
    ck_assert_int_eq(grpo_comm_launched_size(), 4);
    setenv("PMI_SIZE", "3", 1);
    ck_assert_int_eq(grpo_comm_launched_size(), 3);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    ck_assert_int_eq(grpo_comm_launched_size(), 2);
    setenv("OMPI_COMM_WORLD_SIZE", "2x", 1), setenv("PMI_SIZE", "", 1);
    setenv("SLURM_STEP_NUM_TASKS", "-1", 1);
    ck_assert_int_eq(grpo_comm_launched_size(), 0);
    unsetenv("OMPI_COMM_WORLD_SIZE"), unsetenv("PMI_SIZE"), unsetenv("SLURM_STEP_NUM_TASKS");
}
END_TEST

/* grpo_rng_seed_stream: a pure function of (seed, a, b), and neighbouring streams differ. */
START_TEST(streams_are_reproducible_and_distinct) {
    grpo_rng x, y;
    grpo_rng_seed_stream(&x, 1, 2, 3);
    grpo_rng_seed_stream(&y, 1, 2, 3);
    ck_assert_mem_eq(x.s, y.s, sizeof x.s);
    const uint64_t other[][3] = {{2, 2, 3}, {1, 3, 3}, {1, 2, 4}, {1, 3, 2}};
    for (int k = 0; k < 4; k++) {
        grpo_rng_seed_stream(&y, other[k][0], other[k][1], other[k][2]);
        ck_assert_msg(memcmp(x.s, y.s, sizeof x.s) != 0, "stream %d equals (1, 2, 3)", k);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("comm");
    TCase *tc = tcase_create("single");
    tcase_add_test(tc, plain_process_is_a_world_of_one);
    tcase_add_test(tc, launcher_size_comes_from_the_environment);
    tcase_add_test(tc, streams_are_reproducible_and_distinct);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
