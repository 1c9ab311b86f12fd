/* reward_pool.c — the threads that score a batch while it decodes (see reward_pool.h). */
#include "train/reward_pool.h"

#include "host/plugin_call.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One pooled reward's state in the batch in progress. */
typedef struct reward_q {
    uint32_t *items;  /* [cap] queued parts: a sample (rows_independent) or a group index */
    uint32_t head, tail;
    uint32_t pending; /* parts queued or being scored */
    char lost[300];   /* why its worker was lost in this batch ("" = not) */
    int failed;       /* an error was kept in err */
    uint32_t err_part;
    grpo_error err;
} reward_q;

typedef struct worker_arg {
    grpo_reward_pool *pool;
    int k, j;
    void *scratch;
    pthread_t thread;
    int started;
} worker_arg;

struct grpo_reward_pool {
    grpo_reward_pool_plan plan;
    pthread_mutex_t lock;
    pthread_cond_t work, idle;
    int stopping;
    worker_arg *args; /* [n_threads] */
    int n_threads;
    reward_q *q;      /* [K] */
    /* the batch in progress */
    const grpo_sample *samples;
    uint32_t n, U, cap;
    float *R;
    uint32_t *group_of;     /* [n] sample -> group */
    uint32_t *group_first;  /* [U + 1] group g is samples group_first[g] .. group_first[g+1]-1 */
    uint32_t *left;         /* [U] samples of group g not yet done */
    uint32_t *pending_of;   /* [U] parts of group g (every reward's) queued or being scored */
    uint32_t rows_left;     /* samples not yet done: rows still decoding */
    uint32_t early, parts;  /* parts begun while rows_left > 0, all parts */
    int failed_k;
};

/* The samples of part p of reward k: *first and *n. */
static void part_span(const grpo_reward_pool *p, int k, uint32_t part, uint32_t *first,
                      uint32_t *n) {
    if (p->plan.rows_independent[k]) {
        *first = part, *n = 1;
    } else {
        *first = p->group_first[part], *n = p->group_first[part + 1] - p->group_first[part];
    }
}

/* The group part p of reward k belongs to. */
static uint32_t part_group(const grpo_reward_pool *p, int k, uint32_t part) {
    return p->plan.rows_independent[k] ? p->group_of[part] : part;
}

/* Scores one part of reward k outside the lock, then records it under the lock (held on entry
 * and on return). */
static void run_part(worker_arg *a, uint32_t part) {
    grpo_reward_pool *p = a->pool;
    reward_q *q = &p->q[a->k];
    int skip = q->lost[0] || q->failed; /* the batch's scores of k are lost or failed already */
    p->early += p->rows_left > 0, p->parts++;
    uint32_t first, n;
    part_span(p, a->k, part, &first, &n);
    pthread_mutex_unlock(&p->lock);
    float *row = skip ? NULL : malloc(n * sizeof *row);
    char why[300] = "";
    grpo_error err;
    grpo_error_init(&err);
    int rc = GRPO_OK;
    if (!skip && !row)
        rc = grpo_error_set(&err, GRPO_ERR_NOMEM, "out of memory scoring %u samples", n);
    else if (!skip)
        rc = p->plan.score(p->plan.user, a->k, a->j, &a->scratch, p->samples + first, first, n,
                           row, why, sizeof why, &err);
    int K = p->plan.K;
    for (uint32_t i = 0; !skip && rc == GRPO_OK && !why[0] && i < n; i++)
        p->R[(size_t)(first + i) * K + a->k] = row[i];
    free(row);
    pthread_mutex_lock(&p->lock);
    if (why[0] && !q->lost[0]) snprintf(q->lost, sizeof q->lost, "%s", why);
    if (rc != GRPO_OK && (!q->failed || part < q->err_part))
        q->failed = 1, q->err_part = part, q->err = err;
    int group_idle = --p->pending_of[part_group(p, a->k, part)] == 0;
    if (--q->pending == 0 || group_idle) pthread_cond_broadcast(&p->idle);
}

static void *worker_main(void *arg) {
    worker_arg *a = arg;
    grpo_reward_pool *p = a->pool;
    reward_q *q = &p->q[a->k];
    grpo_plugin_call_thread_begin(); /* a crash report's stack */
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stopping && q->head == q->tail) pthread_cond_wait(&p->work, &p->lock);
        if (q->head == q->tail) break; /* stopping, nothing left */
        run_part(a, q->items[q->head++]);
    }
    pthread_mutex_unlock(&p->lock);
    grpo_plugin_call_thread_end();
    return NULL;
}

void grpo_reward_pool_stop(grpo_reward_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (int t = 0; t < p->n_threads; t++)
        if (p->args[t].started) pthread_join(p->args[t].thread, NULL);
    for (int t = 0; t < p->n_threads; t++)
        if (p->args[t].scratch && p->plan.free_scratch) p->plan.free_scratch(p->args[t].scratch);
    for (int k = 0; p->q && k < p->plan.K; k++) free(p->q[k].items);
    free(p->q), free(p->args), free(p->group_of), free(p->group_first), free(p->left);
    free(p->pending_of);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->idle);
    free(p);
}

int grpo_reward_pool_start(grpo_reward_pool **out, const grpo_reward_pool_plan *plan,
                           grpo_error *err) {
    grpo_reward_pool *p = calloc(1, sizeof *p);
    int n = 0;
    for (int k = 0; k < plan->K; k++) n += plan->threads[k];
    if (p) p->q = calloc((size_t)plan->K + 1, sizeof *p->q);
    if (p) p->args = calloc((size_t)n + 1, sizeof *p->args);
    if (!p || !p->q || !p->args) {
        if (p) free(p->q), free(p->args), free(p);
        return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory for the rewards' %d threads",
                              n);
    }
    p->plan = *plan, p->failed_k = INT32_MAX;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->idle, NULL);
    *out = p;
    for (int k = 0, t = 0; k < plan->K; k++)
        for (int j = 0; j < plan->threads[k]; j++, t++) {
            worker_arg *a = &p->args[t];
            a->pool = p, a->k = k, a->j = j;
            if (pthread_create(&a->thread, NULL, worker_main, a) != 0) {
                grpo_reward_pool_stop(p);
                *out = NULL;
                return grpo_error_set(err, GRPO_ERR_INTERNAL, "cannot start the scoring thread "
                                      "%d of reward %d", j + 1, k + 1);
            }
            a->started = 1, p->n_threads = t + 1;
        }
    return GRPO_OK;
}

/* group_of, group_first, left for a batch of n in groups of G, or by samples' group runs. */
static int group_batch(grpo_reward_pool *p, const grpo_sample *samples, uint32_t n, uint32_t G) {
    free(p->group_of), free(p->group_first), free(p->left), free(p->pending_of);
    p->group_of = malloc((n + 1) * sizeof *p->group_of);
    p->group_first = malloc((n + 2) * sizeof *p->group_first);
    p->left = malloc((n + 1) * sizeof *p->left);
    p->pending_of = calloc(n + 1, sizeof *p->pending_of);
    if (!p->group_of || !p->group_first || !p->left || !p->pending_of) return 0;
    uint32_t U = 0;
    for (uint32_t i = 0; i < n; i++) {
        int starts = G ? i % G == 0 : i == 0 || samples[i].group != samples[i - 1].group;
        if (starts) p->group_first[U++] = i;
        p->group_of[i] = U - 1;
    }
    p->group_first[U] = n, p->U = U;
    for (uint32_t g = 0; g < U; g++) p->left[g] = p->group_first[g + 1] - p->group_first[g];
    return 1;
}

int grpo_reward_pool_begin(grpo_reward_pool *p, const grpo_sample *samples, uint32_t n,
                           uint32_t G, float *R, grpo_error *err) {
    pthread_mutex_lock(&p->lock);
    int ok = group_batch(p, samples, n, G);
    for (int k = 0; ok && k < p->plan.K; k++) {
        reward_q *q = &p->q[k];
        if (!p->plan.threads[k]) continue;
        if (n + 1 > p->cap || !q->items) {
            free(q->items);
            ok = (q->items = malloc((n + 1) * sizeof *q->items)) != NULL;
        }
        q->head = q->tail = q->pending = 0, q->lost[0] = '\0', q->failed = 0;
    }
    if (ok && n + 1 > p->cap) p->cap = n + 1;
    p->samples = samples, p->n = n, p->R = R, p->rows_left = n;
    p->early = p->parts = 0, p->failed_k = INT32_MAX;
    pthread_mutex_unlock(&p->lock);
    return ok ? GRPO_OK : grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory for the reward "
                                         "queues of %u samples", n);
}

static void enqueue(grpo_reward_pool *p, int k, uint32_t part) {
    reward_q *q = &p->q[k];
    q->items[q->tail++] = part, q->pending++;
    p->pending_of[part_group(p, k, part)]++;
}

void grpo_reward_pool_row_done(grpo_reward_pool *p, uint32_t i) {
    pthread_mutex_lock(&p->lock);
    uint32_t g = p->group_of[i];
    p->rows_left--;
    int group_done = --p->left[g] == 0;
    for (int k = 0; k < p->plan.K; k++) {
        if (!p->plan.threads[k]) continue;
        if (p->plan.rows_independent[k]) enqueue(p, k, i);
        else if (group_done) enqueue(p, k, g);
    }
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
}

void grpo_reward_pool_all_done(grpo_reward_pool *p) {
    pthread_mutex_lock(&p->lock);
    p->rows_left = 0; /* nothing decodes: no part counts as early */
    for (int k = 0; k < p->plan.K; k++) {
        if (!p->plan.threads[k]) continue;
        uint32_t parts = p->plan.rows_independent[k] ? p->n : p->U;
        for (uint32_t u = 0; u < parts; u++) enqueue(p, k, u);
    }
    for (uint32_t g = 0; g < p->U; g++) p->left[g] = 0;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
}

void grpo_reward_pool_wait_group(grpo_reward_pool *p, uint32_t i) {
    pthread_mutex_lock(&p->lock);
    uint32_t g = p->group_of[i];
    while (p->pending_of[g]) pthread_cond_wait(&p->idle, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

int grpo_reward_pool_finish(grpo_reward_pool *p, int complete, grpo_error *err) {
    pthread_mutex_lock(&p->lock);
    for (int k = 0; k < p->plan.K; k++)
        while (p->q[k].pending) pthread_cond_wait(&p->idle, &p->lock);
    pthread_mutex_unlock(&p->lock); /* every thread now waits for work */
    if (!complete) return GRPO_OK;
    int K = p->plan.K;
    for (int k = 0; k < K; k++) {
        reward_q *q = &p->q[k];
        if (!p->plan.threads[k] || !q->lost[0] || q->failed) continue;
        p->plan.lost(p->plan.user, k, q->lost, p->n);
        for (uint32_t i = 0; i < p->n; i++) p->R[(size_t)i * K + k] = NAN;
    }
    for (int k = 0; k < K; k++)
        if (p->plan.threads[k] && p->q[k].failed) {
            p->failed_k = k;
            *err = p->q[k].err;
            return err->status ? err->status : GRPO_ERR_INTERNAL;
        }
    return GRPO_OK;
}

int grpo_reward_pool_failed(const grpo_reward_pool *p) { return p ? p->failed_k : INT32_MAX; }

void grpo_reward_pool_parts(const grpo_reward_pool *p, uint32_t *early, uint32_t *all) {
    *early = p ? p->early : 0, *all = p ? p->parts : 0;
}
