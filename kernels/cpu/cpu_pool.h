/*
 * cpu_pool.h — the CPU backend's thread pool: `threads - 1` persistent workers, created once per
 * context, and the caller, which runs tasks too (issue 30, "threads that scale and yield").
 *
 * cpu_pool_run(p, n, fn, arg) calls fn(arg, task, tid) once for every task in [0, n) and returns
 * when all have returned. Tasks are claimed one at a time from a shared counter, so a thread
 * that is descheduled (another process holds its core) simply claims fewer of them: the others
 * take the rest (work stealing in effect) instead of waiting for a fixed share. tid names the
 * thread (0 the caller, 1 .. threads-1 the workers) for per-thread buffers; which thread runs a
 * task must never change what it computes (each task writes fixed outputs in a fixed order),
 * so results do not depend on the thread count or the schedule.
 *
 * Waiting: an idle worker spins briefly (pause instructions for CPU_POOL_SPIN_NS, 25 us) for
 * the next job, then parks on a futex (Linux; a condition variable elsewhere); the caller
 * waits for the last task the same way. So a hand-off between consecutive ops is cheap and a
 * waiting thread does not burn the time slice of a process that needs the core.
 *
 * A call made while the pool is running a job (from inside a task, or from another thread) runs
 * its tasks inline on the calling thread, in order, with tid 0 — correct, only not parallel.
 * Counters (cpu_pool_counters) say how often the pool forked, parked and woke; tests read them.
 */
#ifndef GRPO_CPU_POOL_H
#define GRPO_CPU_POOL_H

#include <stdint.h>

typedef struct cpu_pool cpu_pool;
/* One task: task in [0, n_tasks); tid in [0, threads) the running thread (0: the caller). */
typedef void cpu_pool_fn(void *arg, int64_t task, int32_t tid);

/* How long an idle thread spins before it parks, in nanoseconds: long enough to catch the next
 * op of a step (the host's work between two ops is mostly shorter), short next to a scheduler
 * time slice (ms), so a thread spinning beside a busy process costs it little. Measured by the
 * clock, not in pause instructions, whose length varies 10x between CPUs. */
#define CPU_POOL_SPIN_NS 25000

typedef struct cpu_pool_counters {
    uint64_t jobs;          /* cpu_pool_run calls that woke workers (fork/joins) */
    uint64_t inline_jobs;   /* calls run on the caller alone (one task, one thread, nested) */
    uint64_t tasks;         /* tasks run, by any thread */
    uint64_t worker_tasks;  /* of those, run by a worker */
    uint64_t worker_parks;  /* a worker went to sleep on the futex (after its spin) */
    uint64_t caller_parks;  /* the caller slept waiting for the last task */
    uint64_t wake_calls;    /* futex wakes issued for workers */
} cpu_pool_counters;

/* A pool of `threads` threads in all (threads - 1 workers started here; threads <= 1: none);
 * NULL when a thread or memory cannot be had. */
cpu_pool *cpu_pool_new(int32_t threads);
/* Stops and joins the workers; p may be NULL. No job may be running. */
void cpu_pool_free(cpu_pool *p);
/* Threads of the pool, the caller included (>= 1). */
int32_t cpu_pool_threads(const cpu_pool *p);
/* Runs fn(arg, task, tid) for every task in [0, n_tasks), the caller included; returns when
 * every task has returned. At most max_threads - 1 parked workers are woken (<= 0: all), and
 * none when n_tasks, max_threads or the pool's threads are 1; a worker still spinning from the
 * last job may join too, so tid may be any in [0, threads). p NULL: inline. */
void cpu_pool_run(cpu_pool *p, int64_t n_tasks, int32_t max_threads, cpu_pool_fn *fn,
                  void *arg);
/* The counters so far (a snapshot; relaxed reads). */
void cpu_pool_counters_get(const cpu_pool *p, cpu_pool_counters *out);

/* The default thread count: OMP_NUM_THREADS when set to a number (as before the pool, when the
 * threads were OpenMP's), else the CPUs this process may run on. */
int32_t cpu_pool_default_threads(void);

#endif
