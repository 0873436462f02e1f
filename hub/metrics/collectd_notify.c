/*  collectd_notify - PUTNOTIF lines from a series of snapshots. See
    collectd_notify.h.

    The state is one entry per consumer and per endpoint, found by name.
    A call builds the next state beside the current one and writes the
    lines; only when both worked does the next state replace the current
    one, so running out of memory changes nothing.
*/
#include "collectd_notify.h"

#include "fanhub/consumer.h"
#include "stats_format.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { S_CONSUMER, S_ENDPOINT } s_kind_t;

typedef struct {
    s_kind_t kind;
    char *name;
    bool backlog_warned; /* consumer: backlog reached warn_at */
    bool stuck_warned;   /* consumer: stuck workers */
    int64_t state;       /* consumer: the plugin's state last said (FANHUB_STATE_*) */
    bool said;           /* a notification went out about it once */
    bool down;           /* endpoint: disconnected at the last snapshot */
    double down_since;   /* endpoint: since when (now_s) */
    bool down_warned;    /* endpoint: warned about it */
} s_entry_t;

struct fh_collectd_notify {
    double disconnected_after_s;
    bool resend;
    s_entry_t *entries;
    size_t count;
};

fh_collectd_notify_t *
fh_collectd_notify_new (double disconnected_after_s)
{
    fh_collectd_notify_t *self = calloc (1, sizeof *self);
    if (self)
        self->disconnected_after_s = disconnected_after_s;
    return self;
}

static void
s_entries_free (s_entry_t *entries, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free (entries[i].name);
    free (entries);
}

void
fh_collectd_notify_destroy (fh_collectd_notify_t **self_p)
{
    fh_collectd_notify_t *self = *self_p;
    if (!self)
        return;
    s_entries_free (self->entries, self->count);
    free (self);
    *self_p = NULL;
}

void
fh_collectd_notify_resend (fh_collectd_notify_t *self)
{
    self->resend = true;
}

/* The entry of the last state for this item; a fresh one when none. */
static s_entry_t
s_previous (const fh_collectd_notify_t *self, s_kind_t kind, const char *name)
{
    for (size_t i = 0; i < self->count; i++)
        if (self->entries[i].kind == kind && strcmp (self->entries[i].name, name) == 0)
            return self->entries[i];
    return (s_entry_t){.kind = kind};
}

typedef struct {
    FILE *out;
    const char *host; /* made safe */
    const char *hub_name;
    double when_s;
} s_writer_t;

/* One PUTNOTIF line; message is quoted, '"' and '\' escaped. */
static void
s_putnotif (s_writer_t *w, bool warning, const char *kind, const char *name, const char *type,
            const char *type_instance, const char *message)
{
    char instance[320];
    fh_metrics_collectd_instance (instance, sizeof instance, w->hub_name, kind, name);
    fprintf (w->out,
             "PUTNOTIF severity=%s time=%.0f host=%s plugin=fanhub plugin_instance=%s "
             "type=%s",
             warning ? "warning" : "okay", w->when_s, w->host, instance, type);
    if (type_instance)
        fprintf (w->out, " type_instance=%s", type_instance);
    fputs (" message=\"", w->out);
    for (const char *c = message; *c; c++) {
        if (*c == '"' || *c == '\\')
            fputc ('\\', w->out);
        fputc (*c == '\n' ? ' ' : *c, w->out);
    }
    fputs ("\"\n", w->out);
}

/* A consumer's backlog against warn_at. */
static void
s_backlog (s_writer_t *w, s_entry_t *entry, bool resend, const fh_metrics_item_t *item)
{
    int64_t backlog = fh_metric_value_int (&item->values[FH_M_BACKLOG]);
    int64_t warn_at = fh_metric_value_int (&item->values[FH_M_WARN_AT]);
    char message[512];
    bool was = entry->backlog_warned;
    if (warn_at > 0 && backlog >= warn_at)
        entry->backlog_warned = true;
    else if (warn_at <= 0 || backlog < warn_at / 2)
        entry->backlog_warned = false;
    if (was == entry->backlog_warned && !(resend && entry->said))
        return;
    if (entry->backlog_warned)
        snprintf (message, sizeof message,
                  "consumer '%s': backlog %" PRId64 " reached queue.warn_at %" PRId64, item->name,
                  backlog, warn_at);
    else if (warn_at > 0)
        snprintf (message, sizeof message,
                  "consumer '%s': backlog %" PRId64 " is below half of queue.warn_at %" PRId64
                  " again",
                  item->name, backlog, warn_at);
    else
        snprintf (message, sizeof message,
                  "consumer '%s': backlog %" PRId64 "; queue.warn_at is 0 now", item->name,
                  backlog);
    s_putnotif (w, entry->backlog_warned, "consumer", item->name, "queue_length", NULL, message);
    entry->said = true;
}

/* A consumer's stuck workers. */
static void
s_stuck (s_writer_t *w, s_entry_t *entry, bool resend, const fh_metrics_item_t *item)
{
    int64_t stuck = fh_metric_value_int (&item->values[FH_M_STUCK]);
    char message[512];
    bool was = entry->stuck_warned;
    entry->stuck_warned = stuck > 0;
    if (was == entry->stuck_warned && !(resend && entry->said))
        return;
    if (entry->stuck_warned)
        snprintf (message, sizeof message,
                  "consumer '%s': %" PRId64 " worker(s) stuck in consume past consume_timeout",
                  item->name, stuck);
    else
        snprintf (message, sizeof message, "consumer '%s': no worker is stuck any more",
                  item->name);
    s_putnotif (w, entry->stuck_warned, "consumer", item->name, "count", "stuck", message);
    entry->said = true;
}

/* A consumer's plugin state (ABI 1.3): down or halted, then up again. */
static void
s_state (s_writer_t *w, s_entry_t *entry, bool resend, const fh_metrics_item_t *item)
{
    int64_t state = fh_metric_value_int (&item->values[FH_M_PLUGIN_STATE]);
    if (state != FANHUB_STATE_DOWN && state != FANHUB_STATE_HALTED)
        state = FANHUB_STATE_UP;
    int64_t was = entry->state;
    entry->state = state;
    if (was == state && !(resend && entry->said))
        return;
    char message[512];
    if (state == FANHUB_STATE_UP)
        snprintf (message, sizeof message, "consumer '%s': up again", item->name);
    else
        snprintf (message, sizeof message, "consumer '%s': %s: %s", item->name,
                  state == FANHUB_STATE_DOWN ? "down" : "halted",
                  item->error && *item->error ? item->error : "no error given");
    s_putnotif (w, state != FANHUB_STATE_UP, "consumer", item->name, "gauge", "state", message);
    entry->said = true;
}

/* A bus.connect endpoint: disconnected for disconnected_after_s. */
static void
s_endpoint (s_writer_t *w, s_entry_t *entry, bool resend, const fh_metrics_item_t *item,
            double after_s, double now_s)
{
    bool connected = fh_metric_value_int (&item->values[FH_M_ENDPOINT_CONNECTED]) != 0;
    if (!item->text || strcmp (item->text, "connect") != 0)
        return;
    if (!connected && !entry->down)
        entry->down_since = now_s;
    entry->down = !connected;
    bool was = entry->down_warned;
    entry->down_warned = entry->down && now_s - entry->down_since >= after_s;
    if (was == entry->down_warned && !(resend && entry->said))
        return;
    char message[512];
    if (entry->down_warned)
        snprintf (message, sizeof message,
                  "bus endpoint '%s': not connected for %.0f s (bus.connect)", item->name,
                  now_s - entry->down_since);
    else
        snprintf (message, sizeof message, "bus endpoint '%s': connected", item->name);
    s_putnotif (w, entry->down_warned, "endpoint", item->name, "bool", "connected", message);
    entry->said = true;
}

char *
fh_collectd_notify (fh_collectd_notify_t *self, const fh_metrics_snapshot_t *snapshot,
                    const char *host, double now_s, double when_s)
{
    size_t count = snapshot->consumer_count + snapshot->endpoint_count;
    s_entry_t *next = calloc (count ? count : 1, sizeof *next);
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream (&text, &size);
    if (!next || !out) {
        free (next);
        if (out)
            fclose (out);
        free (text);
        return NULL;
    }
    char safe_host[256];
    fh_metrics_collectd_name (safe_host, sizeof safe_host, host && *host ? host : "localhost");
    s_writer_t w = {out, safe_host, snapshot->hub.name, when_s};
    bool failed = false;
    for (size_t i = 0; i < count; i++) {
        bool consumer = i < snapshot->consumer_count;
        const fh_metrics_item_t *item = consumer
                                            ? &snapshot->consumers[i]
                                            : &snapshot->endpoints[i - snapshot->consumer_count];
        const char *name = item->name ? item->name : "";
        next[i] = s_previous (self, consumer ? S_CONSUMER : S_ENDPOINT, name);
        next[i].name = strdup (name);
        failed = failed || !next[i].name;
        if (consumer) {
            s_backlog (&w, &next[i], self->resend, item);
            s_stuck (&w, &next[i], self->resend, item);
            s_state (&w, &next[i], self->resend, item);
        }
        else
            s_endpoint (&w, &next[i], self->resend, item, self->disconnected_after_s, now_s);
    }
    bool write_error = ferror (out) != 0;
    failed = fclose (out) != 0 || write_error || failed;
    if (failed) {
        s_entries_free (next, count);
        free (text);
        return NULL;
    }
    s_entries_free (self->entries, self->count);
    self->entries = next;
    self->count = count;
    self->resend = false;
    return text;
}
