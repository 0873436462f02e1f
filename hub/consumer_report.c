/*  consumer_report - what a plugin tells of itself (ABI 1.3): its state
    (up, down, halted) with the last error, its counters (restarts,
    skipped), and the settings it may ask for. See consumer.h.

    The worker plugin is the reason: its processes live outside the hub,
    and an operator needs to see in `fanhub stats` that a consumer is down
    and why, without reading the log.
*/
#include "consumer_internal.h"

#include <stdio.h>
#include <string.h>

int64_t
fh_consumer_setting (fh_consumer_t *self, const char *name)
{
    if (!name)
        return -1;
    if (strcmp (name, "workers") == 0)
        return (int64_t) self->worker_count;
    if (strcmp (name, "max_pending") == 0)
        return self->max_pending;
    if (strcmp (name, "consume_timeout_ms") == 0)
        return self->consume_timeout_ns / 1000000;
    if (strcmp (name, "retry.max_attempts") == 0)
        return (int64_t) self->retry.max_attempts;
    if (strcmp (name, "max_crashes") == 0)
        return (int64_t) self->max_crashes;
    return -1;
}

void
fh_consumer_set_state (fh_consumer_t *self, int state, const char *error)
{
    if (state < FANHUB_STATE_UP || state > FANHUB_STATE_HALTED) {
        fh_warning ("set_state: consumer '%s': state %d is not UP, DOWN or HALTED; ignored",
                    self->name, state);
        return;
    }
    if (error) {
        pthread_mutex_lock (&self->error_lock);
        snprintf (self->last_error, sizeof self->last_error, "%s", error);
        self->last_error[strcspn (self->last_error, "\r\n")] = '\0'; /* one line */
        pthread_mutex_unlock (&self->error_lock);
    }
    atomic_store_explicit (&self->plugin_state, state, memory_order_release);
}

void
fh_consumer_count (fh_consumer_t *self, int counter, uint64_t n)
{
    if (counter == FANHUB_COUNT_RESTARTS)
        atomic_fetch_add_explicit (&self->restarts, n, memory_order_relaxed);
    else if (counter == FANHUB_COUNT_SKIPPED)
        atomic_fetch_add_explicit (&self->skipped, n, memory_order_relaxed);
    else
        fh_warning ("count: consumer '%s': no counter %d; ignored", self->name, counter);
}

void
fh_consumer_last_error (fh_consumer_t *self, char *buf, size_t size)
{
    pthread_mutex_lock (&self->error_lock);
    snprintf (buf, size, "%s", self->last_error);
    pthread_mutex_unlock (&self->error_lock);
}

void
fh_cons_report_counts (fh_consumer_t *self, fh_consumer_counts_t *out)
{
    out->restarts = atomic_load_explicit (&self->restarts, memory_order_relaxed);
    out->skipped = atomic_load_explicit (&self->skipped, memory_order_relaxed);
    out->plugin_state = (uint64_t) atomic_load_explicit (&self->plugin_state, memory_order_acquire);
    /* Here rather than in consumer.c, which is past its size: the status
       page's on-disk share of the backlog. As there: only once state_open
       says so is the spool there to read. */
    if (atomic_load_explicit (&self->state_open, memory_order_acquire) && self->spool)
        out->spool_messages = fh_spool_records (self->spool);
}
