/*
 * cpu_pool.c — the CPU backend's thread pool (cpu_pool.h): persistent workers, tasks claimed
 * from one counter, spin-then-park waiting on a futex.
 *
 * The job state is one 64-bit word, the ticket: the job's generation (high 32 bits) and the
 * tasks not yet claimed (low 32). A thread claims a task by a compare-and-swap that takes one
 * from the count only while the generation is the one it joined, so a thread that slept
 * through the end of a job can never claim a task of the next one with the old job's function.
 * Claim j (the count before the swap) is task n - j: tasks go out in ascending order. The
 * caller publishes a job (fn, arg, n, then the ticket), bumps the epoch word the idle workers
 * wait on, runs tasks itself, and waits on the done word until n tasks have returned.
 *
 * Waiting is spin then park: CPU_POOL_SPIN_NS of pause instructions watching the word (the clock
 * read every SPIN_CHECK of them), then a futex
 * wait on it (FUTEX_WAIT_PRIVATE; elsewhere a mutex and condition variable). Sleepers announce
 * themselves (the sleepers count, the caller_sleeping flag) before they re-check the word and
 * sleep, and the side that changes the word reads that announcement after the change (both
 * sequentially consistent), so a wake is never lost and never issued when nobody sleeps.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity */
#endif
#include "cpu/cpu_pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define POOL_PAUSE() _mm_pause()
#else
#define POOL_PAUSE() atomic_signal_fence(memory_order_seq_cst)
#endif

#define POOL_MAX_TASKS 0xFFFFFFFFu /* the ticket's 32-bit count */
#define SPIN_CHECK 16              /* pauses between two reads of the clock while spinning */

typedef struct pool_worker {
    struct cpu_pool *pool;
    int32_t tid;
    pthread_t thread;
} pool_worker;

struct cpu_pool {
    int32_t threads;
    int32_t started;             /* workers running (threads - 1 unless creation failed) */
    pool_worker *workers;
    _Alignas(64) _Atomic uint64_t ticket; /* generation << 32 | tasks left to claim */
    _Alignas(64) _Atomic uint32_t done;   /* tasks of this job returned; the caller waits */
    _Atomic uint32_t epoch;               /* bumped at each job and at stop; workers wait */
    _Atomic int32_t sleepers;             /* workers parked (or about to) on epoch */
    _Atomic int32_t caller_sleeping;      /* the caller parked (or about to) on done */
    _Atomic int32_t busy;                 /* a job is running: another run goes inline */
    _Atomic int32_t stop;
    cpu_pool_fn *fn; /* the job, written before the ticket is published */
    void *arg;
    uint32_t n;
    _Alignas(64) _Atomic uint64_t c_jobs, c_inline, c_tasks, c_wtasks, c_wparks, c_cparks,
        c_wakes;
#if !defined(__linux__)
    pthread_mutex_t mu;
    pthread_cond_t cv;
#endif
};

static _Thread_local int tls_in_pool; /* this thread is a worker, or a caller inside a run */

/* ---- futex: sleep while *w == expect; wake sleepers of w ------------------------------------ */
static void word_wait(cpu_pool *p, _Atomic uint32_t *w, uint32_t expect) {
#if defined(__linux__)
    (void)p;
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, expect, NULL, NULL, 0);
#else
    pthread_mutex_lock(&p->mu);
    while (atomic_load(w) == expect) pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
#endif
}

static void word_wake(cpu_pool *p, _Atomic uint32_t *w, int n) {
#if defined(__linux__)
    (void)p;
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
#else
    (void)w, (void)n;
    pthread_mutex_lock(&p->mu); /* the waiter re-checks under the lock: no lost wake */
    pthread_mutex_unlock(&p->mu);
    pthread_cond_broadcast(&p->cv);
#endif
}

/* ---- tasks -------------------------------------------------------------------------------- */
/* Claims and runs tasks of generation gen until none is left; returns how many it ran. */
static uint64_t work(cpu_pool *p, uint32_t gen, int32_t tid) {
    uint64_t ran = 0;
    uint64_t tk = atomic_load(&p->ticket);
    for (;;) {
        uint32_t left = (uint32_t)tk;
        if ((uint32_t)(tk >> 32) != gen || left == 0) break;
        if (!atomic_compare_exchange_weak(&p->ticket, &tk, tk - 1)) continue;
        /* the job cannot end before this task returns: fn, arg and n are this job's */
        uint32_t n = p->n;
        p->fn(p->arg, (int64_t)(n - left), tid);
        ran++;
        /* after this add the caller may return and publish the next job: fn, arg and n are
         * read no more (a wake the caller no longer needs is harmless) */
        if (atomic_fetch_add(&p->done, 1) + 1 == n && atomic_load(&p->caller_sleeping))
            word_wake(p, &p->done, 1);
        tk = atomic_load(&p->ticket);
    }
    return ran;
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spins, then parks, until *w != seen; returns the new value. *parks counts the parks (as
 * they begin: a thread asleep now is counted). */
static uint32_t await_change(cpu_pool *p, _Atomic uint32_t *w, uint32_t seen,
                             _Atomic int32_t *announce, _Atomic uint64_t *parks) {
    uint32_t v;
    int64_t t0 = now_ns();
    for (int i = 1;; i++) {
        if ((v = atomic_load_explicit(w, memory_order_acquire)) != seen) return v;
        POOL_PAUSE();
        if (i % SPIN_CHECK == 0 && now_ns() - t0 > CPU_POOL_SPIN_NS) break;
    }
    atomic_fetch_add(announce, 1);
    while ((v = atomic_load(w)) == seen) {
        atomic_fetch_add_explicit(parks, 1, memory_order_relaxed);
        word_wait(p, w, seen);
    }
    atomic_fetch_sub(announce, 1);
    return v;
}

static void *worker_main(void *wp) {
    pool_worker *me = wp;
    cpu_pool *p = me->pool;
    tls_in_pool = 1;
    uint32_t seen = 0; /* the epoch at creation */
    for (;;) {
        seen = await_change(p, &p->epoch, seen, &p->sleepers, &p->c_wparks);
        if (atomic_load(&p->stop)) break;
        uint32_t gen = (uint32_t)(atomic_load(&p->ticket) >> 32);
        uint64_t ran = work(p, gen, me->tid);
        if (ran) atomic_fetch_add_explicit(&p->c_wtasks, ran, memory_order_relaxed);
    }
    return NULL;
}

/* ---- the pool ----------------------------------------------------------------------------- */
cpu_pool *cpu_pool_new(int32_t threads) {
    cpu_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->threads = threads > 1 ? threads : 1;
#if !defined(__linux__)
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
#endif
    if (p->threads > 1) {
        p->workers = calloc((size_t)p->threads, sizeof *p->workers);
        if (!p->workers) {
            cpu_pool_free(p);
            return NULL;
        }
    }
    for (int32_t t = 1; t < p->threads; t++) {
        p->workers[t] = (pool_worker){p, t, 0};
        if (pthread_create(&p->workers[t].thread, NULL, worker_main, &p->workers[t])) {
            cpu_pool_free(p);
            return NULL;
        }
        p->started = t;
    }
    return p;
}

void cpu_pool_free(cpu_pool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->epoch, 1);
    word_wake(p, &p->epoch, p->threads);
    for (int32_t t = 1; t <= p->started; t++) pthread_join(p->workers[t].thread, NULL);
#if !defined(__linux__)
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
#endif
    free(p->workers);
    free(p);
}

int32_t cpu_pool_threads(const cpu_pool *p) { return p ? p->threads : 1; }

static void run_inline(cpu_pool *p, int64_t n_tasks, cpu_pool_fn *fn, void *arg) {
    if (p) {
        atomic_fetch_add_explicit(&p->c_inline, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->c_tasks, (uint64_t)n_tasks, memory_order_relaxed);
    }
    for (int64_t t = 0; t < n_tasks; t++) fn(arg, t, 0);
}

void cpu_pool_run(cpu_pool *p, int64_t n_tasks, int32_t max_threads, cpu_pool_fn *fn,
                  void *arg) {
    if (n_tasks <= 0) return;
    int32_t nt = p ? p->started + 1 : 1;
    if (max_threads > 0 && max_threads < nt) nt = max_threads;
    if (n_tasks < nt) nt = (int32_t)n_tasks;
    int32_t idle = 0;
    if (nt <= 1 || tls_in_pool || n_tasks > (int64_t)POOL_MAX_TASKS ||
        !atomic_compare_exchange_strong(&p->busy, &idle, 1)) {
        run_inline(p, n_tasks, fn, arg);
        return;
    }
    tls_in_pool = 1;
    p->fn = fn, p->arg = arg, p->n = (uint32_t)n_tasks;
    atomic_store(&p->done, 0);
    uint32_t gen = (uint32_t)(atomic_load(&p->ticket) >> 32) + 1;
    atomic_store(&p->ticket, (uint64_t)gen << 32 | (uint32_t)n_tasks);
    atomic_fetch_add(&p->epoch, 1);
    if (atomic_load(&p->sleepers) > 0) {
        word_wake(p, &p->epoch, nt - 1);
        atomic_fetch_add_explicit(&p->c_wakes, 1, memory_order_relaxed);
    }
    work(p, gen, 0);
    uint32_t d = atomic_load(&p->done);
    while (d != (uint32_t)n_tasks)
        d = await_change(p, &p->done, d, &p->caller_sleeping, &p->c_cparks);
    atomic_fetch_add_explicit(&p->c_jobs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->c_tasks, (uint64_t)n_tasks, memory_order_relaxed);
    tls_in_pool = 0;
    atomic_store(&p->busy, 0);
}

void cpu_pool_counters_get(const cpu_pool *p, cpu_pool_counters *out) {
    *out = (cpu_pool_counters){0};
    if (!p) return;
    cpu_pool *q = (cpu_pool *)p; /* relaxed reads of the atomics */
    out->jobs = atomic_load_explicit(&q->c_jobs, memory_order_relaxed);
    out->inline_jobs = atomic_load_explicit(&q->c_inline, memory_order_relaxed);
    out->tasks = atomic_load_explicit(&q->c_tasks, memory_order_relaxed);
    out->worker_tasks = atomic_load_explicit(&q->c_wtasks, memory_order_relaxed);
    out->worker_parks = atomic_load_explicit(&q->c_wparks, memory_order_relaxed);
    out->caller_parks = atomic_load_explicit(&q->c_cparks, memory_order_relaxed);
    out->wake_calls = atomic_load_explicit(&q->c_wakes, memory_order_relaxed);
}

int32_t cpu_pool_default_threads(void) {
    const char *env = getenv("OMP_NUM_THREADS");
    if (env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (end != env && v > 0 && v < (1L << 30)) return (int32_t)v;
    }
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int32_t)n : 1;
}
