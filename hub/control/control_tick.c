/*  control_tick - the exporters, once a second. See control_tick.h. */
#include "control_tick.h"

#include "clock.h"
#include "collectd_push.h"
#include "enqueuer.h"
#include "health.h"
#include "log.h"
#include "moksha.h"
#include "notify.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

struct fh_tick {
    fh_status_t *status; /* the status page's ring (status.h) */
    fh_moksha_t *moksha;
    fh_collectd_push_t *push;
    /* sd_notify's STATUS: the figures at the last tick. */
    uint64_t notified_received;
    int64_t notified_ns;
    bool fed; /* the watchdog, at the last tick */
    /* What the last tick made, sent after the lock is released. */
    char *collectd; /* a batch of fh_collectd_push_batch, or NULL */
    char *moksha_message;
    char notify[512];
};

fh_tick_t *
fh_tick_new (fh_hub_t *hub, char *err, size_t errlen)
{
    fh_tick_t *self = calloc (1, sizeof *self);
    if (self)
        self->status = fh_status_new ();
    if (!self || !self->status) {
        snprintf (err, errlen, "control: out of memory");
        fh_tick_destroy (&self);
        return NULL;
    }
    self->fed = true;
    self->notified_ns = fh_clock_mono_ns ();
    self->moksha = fh_moksha_new (hub, err, errlen);
    if (!self->moksha && err[0]) {
        fh_tick_destroy (&self);
        return NULL;
    }
    self->push = fh_collectd_push_new (fh_hub_config (hub));
    return self;
}

void
fh_tick_destroy (fh_tick_t **self_p)
{
    fh_tick_t *self = *self_p;
    if (!self)
        return;
    free (self->collectd);
    free (self->moksha_message);
    fh_collectd_push_destroy (&self->push);
    fh_moksha_destroy (&self->moksha);
    fh_status_destroy (&self->status);
    free (self);
    *self_p = NULL;
}

void
fh_tick_follow_reload (fh_tick_t *self, fh_hub_t *hub)
{
    if (!self->moksha)
        return;
    char why[512];
    fh_moksha_destroy (&self->moksha);
    self->moksha = fh_moksha_new (hub, why, sizeof why);
    if (!self->moksha)
        fh_error ("after the reload, %s", why);
}

fh_status_t *
fh_tick_status (fh_tick_t *self)
{
    return self->status;
}

/* systemd's STATUS line (message rate, largest backlog) and, with
   WatchdogSec=, WATCHDOG=1: the control loop is alive, so a hung control
   plane gets restarted. */
static void
s_notify_status (fh_tick_t *self, fh_hub_t *hub, int64_t now)
{
    fh_enqueuer_counts_t counts;
    fh_hub_counts (hub, &counts);
    double seconds = (double) (now - self->notified_ns) / 1e9;
    double rate = seconds > 0 && counts.received >= self->notified_received
                      ? (double) (counts.received - self->notified_received) / seconds
                      : 0;
    self->notified_received = counts.received;
    self->notified_ns = now;
    uint64_t largest = 0;
    const char *name = NULL;
    for (size_t i = 0; i < fh_hub_consumer_count (hub); i++) {
        fh_consumer_counts_t c;
        fh_hub_consumer_counts (hub, i, &c);
        if (!name || c.backlog > largest) {
            largest = c.backlog;
            name = fh_consumer_name (fh_hub_consumer (hub, i));
        }
    }
    /* The watchdog is fed only while the enqueuer's loop turns too: a
       wedged enqueuer gets the hub restarted. */
    int64_t age = fh_hub_enqueuer_age_ns (hub);
    bool live = fh_health_enqueuer_live (age);
    if (fh_notify_watchdog_usec () && live != self->fed)
        fh_log (live ? FANHUB_LOG_INFO : FANHUB_LOG_WARNING,
                live ? "watchdog: fed again, the enqueuer advances"
                     : "watchdog: not fed: the enqueuer has not advanced for %.1f s",
                (double) age / 1e9);
    self->fed = live;
    snprintf (self->notify, sizeof self->notify,
              "%sSTATUS=%.0f msg/s, largest backlog %llu (%.64s)%s",
              fh_notify_watchdog_usec () && live ? "WATCHDOG=1\n" : "", rate,
              (unsigned long long) largest, name ? name : "none",
              live ? "" : "; the enqueuer is not advancing");
}

void
fh_tick_make (fh_tick_t *self, fh_hub_t *hub, fh_stats_t *stats, int64_t now_ns)
{
    fh_stats_tick (stats, now_ns);
    fh_status_tick (self->status, hub, now_ns);
    free (self->moksha_message);
    self->moksha_message = fh_moksha_message (self->moksha, now_ns);
    free (self->collectd);
    self->collectd = fh_collectd_push_batch (self->push, stats, now_ns);
    s_notify_status (self, hub, now_ns);
}

void
fh_tick_send (fh_tick_t *self)
{
    fh_moksha_send (self->moksha, self->moksha_message);
    self->moksha_message = NULL;
    fh_collectd_push_flush (self->push, self->collectd);
    self->collectd = NULL;
    if (self->notify[0])
        fh_notify ("%s", self->notify);
    self->notify[0] = '\0';
}
