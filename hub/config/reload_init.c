/*  reload_init - a reload's plugin init, bounded. See reload_init.h. */
#include "reload_init.h"

#include "clock.h"
#include "host.h"
#include "log.h"
#include "thread.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POLL_NS (100 * INT64_C (1000000)) /* how often a waiting reload looks for a stop */

/* One init under way. Until `done`, the thread owns nothing else of it;
   once `abandoned`, the thread alone owns `consumer` and sets `finished`
   last; the main thread frees the rest after joining it. */
typedef struct {
    const fh_consumer_config_t *config; /* in the configuration tag holds */
    size_t index;
    char *plugin_dir;
    char what[512]; /* "consumer 'NAME', plugin PLUGIN" */
    fh_lineage_tag_t tag;
    void (*release) (fh_lineage_tag_t);
    fh_thread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t returned;
    bool done;               /* under lock: fh_consumer_new returned */
    bool abandoned;          /* under lock: the reload gave up on it */
    int64_t abandoned_ns;    /* under lock: when */
    fh_consumer_t *consumer; /* under lock, once done and not abandoned */
    char err[2048];          /* likewise */
    atomic_bool finished;    /* abandoned, returned, discarded: join it */
} s_load_t;

/* The abandoned inits (main thread), and the figures. */
static s_load_t **s_abandoned;
static size_t s_abandoned_count;
static atomic_uint_fast64_t s_abandoned_total, s_returned_late;

static void
s_load_free (s_load_t *load)
{
    if (load->release)
        load->release (load->tag);
    pthread_mutex_destroy (&load->lock);
    pthread_cond_destroy (&load->returned);
    free (load->plugin_dir);
    free (load);
}

static void *
s_load_thread (void *arg)
{
    s_load_t *load = arg;
    char err[sizeof load->err] = "";
    fh_consumer_t *consumer
        = fh_consumer_new (&fh_host, load->config, load->index, load->plugin_dir, err, sizeof err);
    pthread_mutex_lock (&load->lock);
    load->done = true;
    bool abandoned = load->abandoned;
    int64_t since = load->abandoned_ns;
    if (!abandoned) {
        load->consumer = consumer;
        snprintf (load->err, sizeof load->err, "%s", err);
        pthread_cond_signal (&load->returned);
    }
    pthread_mutex_unlock (&load->lock);
    if (!abandoned)
        return NULL; /* the waiting reload has it all now */
    /* Too late: nothing of the hub knows this instance; it goes here,
       its fini (when init succeeded) on this thread. */
    atomic_fetch_add (&s_returned_late, 1);
    fh_warning ("%s: the init a reload gave up on returned %.1f s later (%s); the instance "
                "it made is discarded",
                load->what, (double) (fh_clock_mono_ns () - since) / 1e9,
                consumer ? "it succeeded"
                : err[0] ? err
                         : "it failed");
    fh_consumer_destroy (&consumer);
    atomic_store_explicit (&load->finished, true, memory_order_release);
    return NULL;
}

/* Waits for the init until deadline or a stop; true when it returned. */
static bool
s_wait (s_load_t *load, int64_t deadline, bool *stopped)
{
    pthread_mutex_lock (&load->lock);
    while (!load->done) {
        int64_t now = fh_clock_mono_ns ();
        if ((*stopped = fh_consumer_stopping ()) || now >= deadline)
            break;
        int64_t until = deadline - now < POLL_NS ? deadline : now + POLL_NS;
        struct timespec ts = {(time_t) (until / 1000000000), (long) (until % 1000000000)};
        pthread_cond_timedwait (&load->returned, &load->lock, &ts);
    }
    bool done = load->done;
    if (!done) {
        load->abandoned = true;
        load->abandoned_ns = fh_clock_mono_ns ();
    }
    pthread_mutex_unlock (&load->lock);
    return done;
}

/* An abandoned init goes on the list the reap looks at (or, without
   room, stays unreaped: its configuration is never let go). */
static void
s_keep_abandoned (s_load_t *load)
{
    atomic_fetch_add (&s_abandoned_total, 1);
    s_load_t **list = realloc (s_abandoned, (s_abandoned_count + 1) * sizeof *list);
    if (!list)
        return;
    s_abandoned = list;
    s_abandoned[s_abandoned_count++] = load;
}

fh_consumer_t *
fh_reload_init_run (const fh_consumer_config_t *config, size_t index, const char *plugin_dir,
                    int64_t limit_ms, fh_lineage_tag_t tag, void (*release) (fh_lineage_tag_t),
                    fh_reload_init_outcome_t *outcome, char *err, size_t errlen)
{
    *outcome = FH_RELOAD_INIT_DONE;
    if (limit_ms < FH_RELOAD_INIT_MIN_MS)
        limit_ms = FH_RELOAD_INIT_MIN_MS;
    s_load_t *load = calloc (1, sizeof *load);
    if (load && plugin_dir)
        load->plugin_dir = strdup (plugin_dir);
    if (!load || (plugin_dir && !load->plugin_dir)) {
        if (load)
            free (load);
        if (release)
            release (tag);
        snprintf (err, errlen, "consumer '%s': out of memory", config->name);
        return NULL;
    }
    load->config = config;
    load->index = index;
    load->tag = tag;
    load->release = release;
    snprintf (load->what, sizeof load->what, "consumer '%s', plugin %s", config->name,
              config->plugin);
    pthread_mutex_init (&load->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init (&attr);
    pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
    pthread_cond_init (&load->returned, &attr);
    pthread_condattr_destroy (&attr);
    atomic_init (&load->finished, false);
    char why[256];
    if (fh_thread_start (&load->thread, "fh:init", s_load_thread, load, why, sizeof why) != 0) {
        /* No thread: the init runs here, unbounded, as before. */
        fh_warning ("%s: %s; its init runs without a time limit", load->what, why);
        fh_consumer_t *consumer
            = fh_consumer_new (&fh_host, config, index, plugin_dir, err, errlen);
        s_load_free (load);
        return consumer;
    }
    bool stopped = false;
    if (s_wait (load, fh_clock_mono_ns () + limit_ms * 1000000, &stopped)) {
        fh_thread_join (&load->thread);
        fh_consumer_t *consumer = load->consumer;
        if (!consumer)
            snprintf (err, errlen, "%s", load->err);
        s_load_free (load);
        return consumer;
    }
    *outcome = FH_RELOAD_INIT_ABANDONED;
    if (stopped)
        snprintf (err, errlen, "%s: init had not returned when a stop came; it is abandoned",
                  load->what);
    else
        snprintf (err, errlen,
                  "%s: init did not return within %.3g s (shutdown_timeout); it is abandoned",
                  load->what, (double) limit_ms / 1000);
    fh_error ("%s (the thread fh:init is left behind; should it return, what it made is "
              "discarded)",
              err);
    s_keep_abandoned (load);
    return NULL;
}

size_t
fh_reload_init_reap (void)
{
    size_t left = 0;
    for (size_t i = 0; i < s_abandoned_count; i++) {
        s_load_t *load = s_abandoned[i];
        if (atomic_load_explicit (&load->finished, memory_order_acquire)) {
            fh_thread_join (&load->thread);
            s_load_free (load);
        }
        else
            s_abandoned[left++] = load;
    }
    s_abandoned_count = left;
    return left;
}

size_t
fh_reload_init_outstanding (char *what, size_t size)
{
    size_t count = 0;
    if (size)
        what[0] = '\0';
    for (size_t i = 0; i < s_abandoned_count; i++)
        if (!atomic_load_explicit (&s_abandoned[i]->finished, memory_order_acquire)) {
            if (!count++ && size)
                snprintf (what, size, "%s", s_abandoned[i]->what);
        }
    return count;
}

uint64_t
fh_reload_init_abandoned_total (void)
{
    return atomic_load (&s_abandoned_total);
}

uint64_t
fh_reload_init_returned_late (void)
{
    return atomic_load (&s_returned_late);
}
