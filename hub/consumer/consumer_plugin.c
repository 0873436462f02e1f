/*  consumer_plugin - what a consumer's plugin says and asks through the
    host table (plugin/host.c), on the plugin's threads: its state and
    last error, its counters, the settings it may read, the process's
    stop, publishing (ABI 1.5), its window and its tickets' starts. See
    consumer.h; consumer_internal.h says how the files share the work.
*/
#include "consumer_internal.h"

#include "fanhub/sdk.h"

#include "plugin_metrics.h"

#include <pthread.h>
#include <string.h>

/* What a plugin tells of itself (ABI 1.3): its state (up, down, halted)
   with the last error, its counters (restarts, skipped), and the settings
   it may ask for. The worker plugin is the reason: its processes live
   outside the hub, and an operator needs to see in `fanhub stats` that a
   consumer is down and why, without reading the log. */
static atomic_bool s_stopping;

void
fh_consumer_note_stopping (void)
{
    atomic_store (&s_stopping, true);
}

bool
fh_consumer_stopping (void)
{
    return atomic_load (&s_stopping);
}

int64_t
fh_consumer_setting (fh_consumer_t *self, const char *name)
{
    if (!name)
        return -1;
    if (strcmp (name, "stopping") == 0)
        return atomic_load (&s_stopping) ? 1 : 0;
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
        fanhub_utf8_copy (self->last_error, sizeof self->last_error, error);
        self->last_error[strcspn (self->last_error, "\r\n")] = '\0'; /* one line */
        pthread_mutex_unlock (&self->error_lock);
    }
    atomic_store_explicit (&self->plugin_state, state, memory_order_release);
}

void
fh_consumer_count (fh_consumer_t *self, int counter, uint64_t n)
{
    if (counter == FANHUB_COUNT_RESTARTS)
        fh_count_add (&self->tally.restarts, n);
    else if (counter == FANHUB_COUNT_SKIPPED)
        fh_count_add (&self->tally.skipped, n);
    else
        fh_warning ("count: consumer '%s': no counter %d; ignored", self->name, counter);
}

void
fh_consumer_set_window (fh_consumer_t *self, size_t n)
{
    if (self->pending)
        fh_pending_set_window (self->pending, n);
}

void
fh_consumer_ticket_started (fh_consumer_t *self, fanhub_ticket_t ticket)
{
    if (self->pending)
        fh_pending_started (self->pending, ticket, self->clock.now_ns (self->clock.arg));
}

int
fh_consumer_publish (fh_consumer_t *self, const char *topic, const void *body, size_t size)
{
    if (self->publisher)
        return fh_publisher_send (self->publisher, topic, body, size);
    if (fh_count_add (&self->tally.publish_failed, 1) == 0)
        fh_warning ("consumer '%s': its plugin publishes, but the consumer has no publish: "
                    "settings; dropped (counted in publish_failed; this is said once)",
                    self->name);
    return -1;
}

void
fh_consumer_publish_endpoints (fh_consumer_t *self, char *buf, size_t size)
{
    if (self->publisher)
        fh_publisher_endpoints (self->publisher, buf, size);
    else if (size)
        buf[0] = '\0';
}

const struct fh_plugin_metrics *
fh_consumer_plugin_metrics (const fh_consumer_t *self)
{
    return self->ctx ? fh_plugin_metrics_of (&self->ctx->metrics) : NULL;
}

void
fh_consumer_last_error (fh_consumer_t *self, char *buf, size_t size)
{
    pthread_mutex_lock (&self->error_lock);
    fanhub_utf8_copy (buf, size, self->last_error);
    pthread_mutex_unlock (&self->error_lock);
}

int
fh_consumer_plugin_state (fh_consumer_t *self)
{
    return atomic_load_explicit (&self->plugin_state, memory_order_acquire);
}
