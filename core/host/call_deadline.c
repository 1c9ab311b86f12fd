/* call_deadline.c — the watchdog of in-process plugin calls (see call_deadline.h). */
#include "host/call_deadline.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed;
static int started;

/* One call under a deadline: each thread that calls plugins arms its own slot (reward scorers
 * run on several threads at once, train/reward_pool.h). */
typedef struct slot {
    int armed;
    struct timespec due; /* CLOCK_MONOTONIC */
    double seconds, timeout;
    const char *plugin, *section, *what;
} slot;

#define MAX_SLOTS 64 /* threads calling plugins at once; more run without a deadline */
static slot slots[MAX_SLOTS];
static _Thread_local int my_slot = -1; /* this thread's slot, or -1 */

/* Ends the process: the call of slot a ran past its deadline (called with lock held). */
static void overrun(const slot *a) {
    char within[160], line[1024];
    if (a->seconds == a->timeout)
        snprintf(within, sizeof within, "timeout = %g s", a->timeout);
    else
        snprintf(within, sizeof within, "%g s (a backstop at %g x its timeout = %g s, which the "
                 "plugin keeps itself)", a->seconds, a->seconds / a->timeout, a->timeout);
    int n = snprintf(line, sizeof line,
                     "\nerror: plugin %s (section [%s]) did not return from %s within %s; an "
                     "in-process call cannot be stopped safely, so the run ends (checkpoints "
                     "already written are intact; raise [%s] timeout, or set isolate = true "
                     "there to kill a late call and score its batch NaN)\n",
                     a->plugin, a->section ? a->section : "-", a->what, within,
                     a->section ? a->section : "reward.NAME");
    for (int off = 0; n > 0 && off < n && off < (int)sizeof line;) {
        ssize_t w = write(STDERR_FILENO, line + off, (size_t)n - (size_t)off);
        if (w <= 0) break;
        off += (int)w;
    }
    _exit(GRPO_EXIT_PLUGIN_TIMEOUT);
}

static int before(const struct timespec *a, const struct timespec *b) {
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* The armed slot due first, or NULL (lock held). */
static const slot *first_due(void) {
    const slot *f = NULL;
    for (int i = 0; i < MAX_SLOTS; i++)
        if (slots[i].armed && (!f || before(&slots[i].due, &f->due))) f = &slots[i];
    return f;
}

static void *watch(void *arg) {
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        const slot *f = first_due();
        if (!f) {
            pthread_cond_wait(&changed, &lock);
            continue;
        }
        struct timespec at = f->due, now;
        pthread_cond_timedwait(&changed, &lock, &at);
        clock_gettime(CLOCK_MONOTONIC, &now);
        f = first_due(); /* still armed and past due (not re-armed later meanwhile) */
        if (f && !before(&now, &f->due)) overrun(f);
    }
    return NULL;
}

static int start(void) {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&changed, &a);
    pthread_condattr_destroy(&a);
    pthread_attr_t ta;
    pthread_attr_init(&ta);
    pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int rc = pthread_create(&t, &ta, watch, NULL);
    pthread_attr_destroy(&ta);
    return rc == 0 ? 0 : -1;
}

int grpo_call_deadline_arm(double seconds, double timeout, const char *plugin,
                           const char *section, const char *what) {
    if (!(seconds > 0)) return 0;
    pthread_mutex_lock(&lock);
    if (!started) started = start() == 0;
    for (int i = 0; started && my_slot < 0 && i < MAX_SLOTS; i++)
        if (!slots[i].plugin) my_slot = i, slots[i].plugin = plugin; /* taken for good */
    if (!started || my_slot < 0) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    slot *a = &slots[my_slot];
    clock_gettime(CLOCK_MONOTONIC, &a->due);
    double whole = (double)(long)seconds;
    a->due.tv_sec += (time_t)whole;
    a->due.tv_nsec += (long)((seconds - whole) * 1e9);
    if (a->due.tv_nsec >= 1000000000L) a->due.tv_sec++, a->due.tv_nsec -= 1000000000L;
    a->armed = 1, a->seconds = seconds, a->timeout = timeout > 0 ? timeout : seconds;
    a->plugin = plugin, a->section = section, a->what = what;
    pthread_cond_signal(&changed);
    pthread_mutex_unlock(&lock);
    return 0;
}

void grpo_call_deadline_disarm(void) {
    pthread_mutex_lock(&lock);
    if (my_slot >= 0) slots[my_slot].armed = 0;
    pthread_cond_signal(&changed);
    pthread_mutex_unlock(&lock);
}
