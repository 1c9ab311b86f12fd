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
static int armed;              /* a call is running under a deadline */
static struct timespec due;    /* CLOCK_MONOTONIC */
static double armed_seconds, armed_timeout;
static const char *armed_plugin, *armed_section, *armed_what;

/* Ends the process: the armed call ran past its deadline (called with lock held). */
static void overrun(void) {
    char within[160], line[1024];
    if (armed_seconds == armed_timeout)
        snprintf(within, sizeof within, "timeout = %g s", armed_timeout);
    else
        snprintf(within, sizeof within, "%g s (a backstop at %g x its timeout = %g s, which the "
                 "plugin keeps itself)", armed_seconds, armed_seconds / armed_timeout,
                 armed_timeout);
    int n = snprintf(line, sizeof line,
                     "\nerror: plugin %s (section [%s]) did not return from %s within %s; an "
                     "in-process call cannot be stopped safely, so the run ends (checkpoints "
                     "already written are intact; raise [%s] timeout, or set isolate = true "
                     "there to kill a late call and score its batch NaN)\n",
                     armed_plugin, armed_section ? armed_section : "-", armed_what, within,
                     armed_section ? armed_section : "reward.NAME");
    for (int off = 0; n > 0 && off < n && off < (int)sizeof line;) {
        ssize_t w = write(STDERR_FILENO, line + off, (size_t)n - (size_t)off);
        if (w <= 0) break;
        off += (int)w;
    }
    _exit(GRPO_EXIT_PLUGIN_TIMEOUT);
}

static void *watch(void *arg) {
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        if (!armed) {
            pthread_cond_wait(&changed, &lock);
            continue;
        }
        struct timespec at = due;
        int rc = pthread_cond_timedwait(&changed, &lock, &at);
        if (rc == ETIMEDOUT && armed && at.tv_sec == due.tv_sec && at.tv_nsec == due.tv_nsec)
            overrun();
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
    if (!started) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    clock_gettime(CLOCK_MONOTONIC, &due);
    double whole = (double)(long)seconds;
    due.tv_sec += (time_t)whole;
    due.tv_nsec += (long)((seconds - whole) * 1e9);
    if (due.tv_nsec >= 1000000000L) due.tv_sec++, due.tv_nsec -= 1000000000L;
    armed = 1, armed_seconds = seconds, armed_timeout = timeout > 0 ? timeout : seconds;
    armed_plugin = plugin, armed_section = section, armed_what = what;
    pthread_cond_signal(&changed);
    pthread_mutex_unlock(&lock);
    return 0;
}

void grpo_call_deadline_disarm(void) {
    pthread_mutex_lock(&lock);
    armed = 0;
    pthread_cond_signal(&changed);
    pthread_mutex_unlock(&lock);
}
