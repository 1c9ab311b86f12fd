/*
 * test_cpu_pool.c — the CPU backend's thread pool (kernels/cpu/cpu_pool.h) and its use by the
 * backend (cpu_parallel, kernels/cpu/cpu_ctx.c), issue 30:
 *   - every task of a job runs exactly once, on a thread index below the pool's threads, for
 *     1..4 threads, job sizes 0..10000, many small jobs in a row, and uneven tasks;
 *   - a job started from inside a task (nested) runs inline, completely, and is counted so;
 *   - yielding, checked by behaviour and not by timing: idle workers park on the futex (their
 *     park count grows while nothing runs), a caller left waiting for a worker's long task parks
 *     too, and an op too small for a fork/join runs on the caller (the backend's inline count
 *     grows, its fork count does not) while a large one forks; a decode step's RoPE runs
 *     inline and its small-row matmul forks once with one range of work stealing a thread;
 *   - work stealing (cpu_parallel_steal): every item once for 1..4 threads and 0..1000 items,
 *     a range's own items in order with the next one announced, and a range whose task
 *     stalls (sleeps) taken over by the others from its back;
 *   - ops give the same bits at 1, 2, 3 and 4 threads (rmsnorm backward's dw partial sums, a
 *     long residual, adamw), whichever thread ran which task;
 *   - the default thread count follows OMP_NUM_THREADS as OpenMP's did.
 */
#include <check.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu_backend.h"
#include "cpu/cpu_pool.h"
#include "kernels.h"

typedef struct count_job {
    _Atomic int32_t *hits;
    _Atomic int32_t bad_tid;
    int32_t threads;
    int32_t uneven; /* task t spins ~(t % 64) * 500 iterations */
} count_job;

static void count_task(void *arg, int64_t task, int32_t tid) {
    count_job *j = arg;
    if (tid < 0 || tid >= j->threads) atomic_store(&j->bad_tid, 1);
    if (j->uneven) {
        volatile int32_t x = 0;
        for (int64_t i = 0; i < task % 64 * 500; i++) x = x + 1;
    }
    atomic_fetch_add(&j->hits[task], 1);
}

/* Runs a job of n tasks on p and checks each ran once on a valid thread. */
static void run_counted(cpu_pool *p, int64_t n, int32_t uneven) {
    count_job j = {calloc((size_t)(n > 0 ? n : 1), sizeof(_Atomic int32_t)), 0,
                   cpu_pool_threads(p), uneven};
    ck_assert_ptr_nonnull(j.hits);
    cpu_pool_run(p, n, 0, count_task, &j);
    for (int64_t t = 0; t < n; t++)
        ck_assert_msg(atomic_load(&j.hits[t]) == 1,
                      "%d threads, %lld tasks: task %lld ran %d times",
                      cpu_pool_threads(p), (long long)n, (long long)t, atomic_load(&j.hits[t]));
    ck_assert_msg(!atomic_load(&j.bad_tid), "a thread index outside [0, threads)");
    free(j.hits);
}

START_TEST(every_task_once) {
    const int64_t sizes[] = {0, 1, 2, 3, 7, 64, 1000, 10000};
    for (int32_t threads = 1; threads <= 4; threads++) {
        cpu_pool *p = cpu_pool_new(threads);
        ck_assert_ptr_nonnull(p);
        ck_assert_int_eq(cpu_pool_threads(p), threads);
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            run_counted(p, sizes[s], 0);
            run_counted(p, sizes[s], 1); /* uneven: later tasks cost more */
        }
        cpu_pool_counters c;
        cpu_pool_counters_get(p, &c);
        if (threads == 1) ck_assert_uint_eq(c.jobs, 0); /* no workers: everything inline */
        cpu_pool_free(p);
    }
}
END_TEST

START_TEST(many_small_jobs) {
    for (int32_t threads = 2; threads <= 4; threads++) {
        cpu_pool *p = cpu_pool_new(threads);
        ck_assert_ptr_nonnull(p);
        for (int32_t i = 0; i < 5000; i++) run_counted(p, 1 + i % 5, 0);
        cpu_pool_counters c;
        cpu_pool_counters_get(p, &c);
        ck_assert_uint_eq(c.jobs + c.inline_jobs, 5000);
        ck_assert_uint_eq(c.inline_jobs, 1000); /* the one-task jobs */
        ck_assert_uint_eq(c.tasks, 1000u * (1 + 2 + 3 + 4 + 5));
        cpu_pool_free(p);
    }
}
END_TEST

typedef struct nest_job {
    cpu_pool *p;
    _Atomic int32_t inner_hits[8 * 16];
    _Atomic int32_t bad_tid;
} nest_job;

typedef struct inner_arg {
    nest_job *j;
    int64_t outer;
} inner_arg;

static void inner_task(void *arg, int64_t task, int32_t tid) {
    inner_arg *a = arg;
    if (tid != 0) atomic_store(&a->j->bad_tid, 1); /* a nested job runs on its caller, as 0 */
    atomic_fetch_add(&a->j->inner_hits[a->outer * 16 + task], 1);
}

static void outer_task(void *arg, int64_t task, int32_t tid) {
    nest_job *j = arg;
    (void)tid;
    inner_arg a = {j, task};
    cpu_pool_run(j->p, 16, 0, inner_task, &a);
}

START_TEST(nested_runs_inline) {
    for (int32_t threads = 2; threads <= 4; threads++) {
        nest_job *j = calloc(1, sizeof *j);
        ck_assert_ptr_nonnull(j);
        j->p = cpu_pool_new(threads);
        ck_assert_ptr_nonnull(j->p);
        cpu_pool_run(j->p, 8, 0, outer_task, j);
        for (int32_t i = 0; i < 8 * 16; i++) ck_assert_int_eq(atomic_load(&j->inner_hits[i]), 1);
        ck_assert_int_eq(atomic_load(&j->bad_tid), 0);
        cpu_pool_counters c;
        cpu_pool_counters_get(j->p, &c);
        ck_assert_uint_eq(c.jobs, 1);
        ck_assert_uint_eq(c.inline_jobs, 8);
        ck_assert_uint_eq(c.tasks, 8 + 8 * 16);
        cpu_pool_free(j->p);
        free(j);
    }
}
END_TEST

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts)) continue;
}

/* a worker's task sleeps 20 ms, the caller's 1 ms (time for the woken workers to claim some) */
static void slow_on_worker(void *arg, int64_t task, int32_t tid) {
    (void)arg, (void)task;
    sleep_ms(tid != 0 ? 20 : 1);
}

START_TEST(idle_threads_park) {
    cpu_pool *p = cpu_pool_new(3);
    ck_assert_ptr_nonnull(p);
    cpu_pool_counters c0, c1;
    run_counted(p, 100, 0);
    sleep_ms(50); /* idle: far longer than the spin */
    cpu_pool_counters_get(p, &c0);
    ck_assert_msg(c0.worker_parks >= 2, "idle workers parked %llu times, expected both asleep",
                  (unsigned long long)c0.worker_parks);
    sleep_ms(50); /* still idle: parked workers do not wake (no busy polling) */
    cpu_pool_counters_get(p, &c1);
    ck_assert_uint_eq(c1.worker_parks, c0.worker_parks);
    /* parked workers are woken by the next job, and a caller left waiting parks */
    for (int i = 0; i < 50 && c1.caller_parks == 0; i++) {
        cpu_pool_run(p, 6, 0, slow_on_worker, NULL);
        cpu_pool_counters_get(p, &c1);
    }
    ck_assert_msg(c1.worker_tasks > 0 && c1.wake_calls > 0, "no worker woke for a job");
    ck_assert_msg(c1.caller_parks > 0, "the caller never parked waiting for a 20 ms task");
    run_counted(p, 1000, 1); /* and the pool still works */
    cpu_pool_free(p);
}
END_TEST

static grpo_ops *open_cpu(int32_t threads) {
    grpo_error err;
    grpo_error_init(&err);
    grpo_ops *ops = grpo_backend_open("cpu", threads, &err);
    ck_assert_msg(ops != NULL, "cpu backend: %s", err.message);
    return ops;
}

START_TEST(small_ops_run_inline) {
    grpo_ops *ops = open_cpu(2);
    cpu_ctx *ctx = ops->ctx;
    enum { BIG = 1 << 20 };
    float *a = calloc(BIG, sizeof(float)), *b = calloc(BIG, sizeof(float));
    ck_assert(a && b);
    cpu_ctx_stats s0, s1, s2;
    cpu_pool_counters p0, p1;
    cpu_ctx_stats_get(ctx, &s0, &p0);
    ops->residual_forward(ctx, a, a, b, 100); /* 100 adds: far below a fork/join's cost */
    cpu_ctx_stats_get(ctx, &s1, &p1);
    ck_assert_uint_eq(s1.inline_runs[CPU_FAM_ELEMENT], s0.inline_runs[CPU_FAM_ELEMENT] + 1);
    ck_assert_uint_eq(s1.forks[CPU_FAM_ELEMENT], s0.forks[CPU_FAM_ELEMENT]);
    ck_assert_uint_eq(p1.jobs, p0.jobs); /* no wake-up */
    ck_assert_uint_eq(p1.wake_calls, p0.wake_calls);
    ops->residual_forward(ctx, a, a, b, BIG);
    cpu_ctx_stats_get(ctx, &s2, NULL);
    ck_assert_uint_eq(s2.forks[CPU_FAM_ELEMENT], s1.forks[CPU_FAM_ELEMENT] + 1);
    free(a), free(b);
    grpo_backend_close(ops);
}
END_TEST

/* A decode step's ops at the MiniMind2-small shape (16 rows, 8 heads of 64, 512 -> 1408) on 2
 * threads: RoPE of the step's rows stays on the caller while a prefill's (256 rows) forks, and
 * the small-row matmul forks once with one task a thread (a range of consecutive weight
 * blocks, the rest by stealing), not one task per block. */
START_TEST(decode_ops_fork_little) {
    grpo_ops *ops = open_cpu(2);
    cpu_ctx *ctx = ops->ctx;
    enum { R = 16, NH = 8, HD = 64, P = 256, IC = 512, OC = 1408 };
    float *q = calloc((size_t)P * NH * HD, sizeof(float)), *w = calloc((size_t)OC * IC, 4);
    float *x = calloc((size_t)R * IC, 4), *y = calloc((size_t)R * OC, 4);
    int32_t *pos = calloc(P, sizeof(int32_t));
    ck_assert(q && w && x && y && pos);
    cpu_ctx_stats s0, s1, s2, s3;
    cpu_pool_counters p2, p3;
    cpu_ctx_stats_get(ctx, &s0, NULL);
    ops->rope_forward(ctx, q, q, pos, R, NH, HD, 10000.0f);
    cpu_ctx_stats_get(ctx, &s1, NULL);
    ck_assert_uint_eq(s1.forks[CPU_FAM_NORM], s0.forks[CPU_FAM_NORM]);
    ck_assert_uint_eq(s1.inline_runs[CPU_FAM_NORM], s0.inline_runs[CPU_FAM_NORM] + 1);
    ops->rope_forward(ctx, q, q, pos, P, NH, HD, 10000.0f);
    cpu_ctx_stats_get(ctx, &s2, &p2);
    ck_assert_uint_eq(s2.forks[CPU_FAM_NORM], s1.forks[CPU_FAM_NORM] + 1);
    ops->matmul_forward(ctx, y, x, w, NULL, R, IC, OC);
    cpu_ctx_stats_get(ctx, &s3, &p3);
    ck_assert_uint_eq(s3.forks[CPU_FAM_GEMM_FWD], s2.forks[CPU_FAM_GEMM_FWD] + 1);
    ck_assert_uint_eq(p3.tasks - p2.tasks, 2);
    free(q), free(w), free(x), free(y), free(pos);
    grpo_backend_close(ops);
}
END_TEST

typedef struct steal_check {
    _Atomic int32_t *hits;
    _Atomic int32_t *by;       /* the range whose task took the item */
    _Atomic int32_t bad;       /* an own item out of order, or a wrong next */
    int32_t stall_part;        /* this range's task sleeps before it claims (-1: none) */
} steal_check;

static void steal_check_task(void *arg, cpu_steal *s, int32_t part, int32_t tid) {
    (void)tid;
    steal_check *c = arg;
    if (part == c->stall_part) nanosleep(&(struct timespec){0, 20000000}, NULL);
    int64_t i, next, expect = -1;
    while ((i = cpu_steal_claim(s, part, &next)) >= 0) {
        if (expect >= 0 && i != expect && atomic_load(&c->hits[expect]) == 0)
            atomic_store(&c->bad, 1); /* an announced own item skipped, not taken by anyone */
        if (next >= 0 && next != i + 1) atomic_store(&c->bad, 1);
        atomic_fetch_add(&c->hits[i], 1);
        atomic_store(&c->by[i], part);
        expect = next;
    }
}

/* Every item exactly once whatever the threads and items; and a range whose task stalls
 * leaves its items to the others, which take them from its back. */
START_TEST(steal_every_item_once) {
    enum { NMAX = 1000 };
    _Atomic int32_t hits[NMAX], by[NMAX];
    for (int32_t threads = 1; threads <= 4; threads++) {
        grpo_ops *ops = open_cpu(threads);
        const int64_t sizes[] = {0, 1, 2, 3, 7, 64, 999, NMAX};
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            const int64_t n = sizes[k];
            for (int32_t stall = -1; stall < (threads > 1 ? 2 : 0); stall++) {
                for (int64_t i = 0; i < NMAX; i++)
                    atomic_init(&hits[i], 0), atomic_init(&by[i], -1);
                steal_check c = {hits, by, 0, stall};
                cpu_parallel_steal(ops->ctx, CPU_FAM_ELEMENT, threads, n, steal_check_task, &c);
                for (int64_t i = 0; i < NMAX; i++)
                    ck_assert_msg(atomic_load(&hits[i]) == (i < n), "threads %d n %lld stall %d: "
                                  "item %lld taken %d times", threads, (long long)n, stall,
                                  (long long)i, atomic_load(&hits[i]));
                ck_assert_int_eq(atomic_load(&c.bad), 0);
                if (stall == 1 && n >= 64) { /* range 1 is [n/t, 2n/t): others took its back */
                    int64_t taken = 0;
                    for (int64_t i = n / threads; i < 2 * n / threads; i++)
                        taken += atomic_load(&by[i]) != 1;
                    ck_assert_msg(taken > 0 && atomic_load(&by[2 * n / threads - 1]) != 1,
                                  "threads %d n %lld: the stalled range's back was not stolen "
                                  "(%lld taken)", threads, (long long)n, (long long)taken);
                }
            }
        }
        grpo_backend_close(ops);
    }
}
END_TEST

static uint32_t lcg(uint32_t *s) { return *s = *s * 1664525u + 1013904223u; }
static float frand(uint32_t *s) { return (float)(lcg(s) >> 8) / (float)(1u << 24) - 0.5f; }

/* rmsnorm backward (dw from partial sums), a residual and an adamw step at `threads`; the
 * outputs concatenated into out (n_out floats). */
enum { RN = 300, RC = 200, EN = 200003 };
static void ops_at(int32_t threads, float *out) {
    grpo_ops *ops = open_cpu(threads);
    uint32_t s = 7;
    float *x = malloc(RN * RC * 4), *d = malloc(RN * RC * 4), *w = malloc(RC * 4);
    float *r = malloc(RN * 4), *y = malloc(RN * RC * 4);
    float *p = malloc(EN * 4), *g = malloc(EN * 4), *m = calloc(EN, 4), *v = calloc(EN, 4);
    ck_assert(x && d && w && r && y && p && g && m && v);
    for (int i = 0; i < RN * RC; i++) x[i] = frand(&s), d[i] = frand(&s);
    for (int i = 0; i < RC; i++) w[i] = 1.0f + frand(&s);
    for (int i = 0; i < EN; i++) p[i] = frand(&s), g[i] = frand(&s);
    float *dw = out, *dx = out + RC, *pe = dx + RN * RC;
    memset(dw, 0, RC * 4);
    ops->rmsnorm_forward(ops->ctx, y, r, x, w, RN, RC, 1e-6f);
    ops->rmsnorm_backward(ops->ctx, dx, dw, d, x, w, r, RN, RC);
    ops->residual_forward(ops->ctx, pe, p, g, EN);
    ops->adamw(ops->ctx, p, g, m, v, EN, 1e-3, 0.9, 0.999, 1e-8, 0.01, 1);
    memcpy(pe + EN, p, EN * 4);
    free(x), free(d), free(w), free(r), free(y), free(p), free(g), free(m), free(v);
    grpo_backend_close(ops);
}

START_TEST(thread_count_invariant) {
    size_t n = RC + (size_t)RN * RC + 2 * (size_t)EN;
    float *ref = malloc(n * 4), *got = malloc(n * 4);
    ck_assert(ref && got);
    ops_at(1, ref);
    for (int32_t threads = 2; threads <= 4; threads++) {
        ops_at(threads, got);
        ck_assert_msg(!memcmp(ref, got, n * 4), "%d threads: other bits than 1 thread", threads);
    }
    free(ref), free(got);
}
END_TEST

START_TEST(default_threads) {
    char *old = getenv("OMP_NUM_THREADS") ? strdup(getenv("OMP_NUM_THREADS")) : NULL;
    setenv("OMP_NUM_THREADS", "3", 1);
    ck_assert_int_eq(cpu_pool_default_threads(), 3);
    unsetenv("OMP_NUM_THREADS");
    ck_assert_int_ge(cpu_pool_default_threads(), 1);
    if (old) setenv("OMP_NUM_THREADS", old, 1), free(old);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("cpu_pool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, every_task_once);
    tcase_add_test(tc, many_small_jobs);
    tcase_add_test(tc, nested_runs_inline);
    tcase_add_test(tc, idle_threads_park);
    tcase_add_test(tc, small_ops_run_inline);
    tcase_add_test(tc, decode_ops_fork_little);
    tcase_add_test(tc, steal_every_item_once);
    tcase_add_test(tc, thread_count_invariant);
    tcase_add_test(tc, default_threads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
