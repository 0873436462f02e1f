/*  stats_format - a STATS snapshot as Prometheus text, collectd PUTVAL
    lines or a table for a terminal. See stats_format.h; the metrics are
    listed in docs/metrics.md.

    Everything is read through jansson's getters, which answer NULL, 0 or
    0.0 for a missing member or a value of another type, so a broken
    snapshot cannot crash a formatter: it gives zeros. The text is built
    in one growing buffer; running out of memory anywhere turns the
    result into NULL.
*/
#include "stats_format.h"

#include "fanhub/consumer.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- A growing string ---------------------------------------------------- */

typedef struct {
    char *data;
    size_t len;
    size_t size;
    bool failed;
} s_buf_t;

static bool
s_buf_reserve (s_buf_t *buf, size_t more)
{
    if (buf->failed)
        return false;
    if (more > SIZE_MAX / 2 - buf->len) {
        buf->failed = true;
        return false;
    }
    size_t need = buf->len + more + 1;
    if (need <= buf->size)
        return true;
    size_t size = buf->size ? buf->size : 4096;
    while (size < need)
        size *= 2;
    char *data = realloc (buf->data, size);
    if (!data) {
        buf->failed = true;
        return false;
    }
    buf->data = data;
    buf->size = size;
    return true;
}

static void
s_buf_put (s_buf_t *buf, const char *text, size_t size)
{
    if (!s_buf_reserve (buf, size))
        return;
    memcpy (buf->data + buf->len, text, size);
    buf->len += size;
    buf->data[buf->len] = '\0';
}

static void
s_buf_puts (s_buf_t *buf, const char *text)
{
    s_buf_put (buf, text, strlen (text));
}

static void s_buf_printf (s_buf_t *buf, const char *fmt, ...) FANHUB_PRINTF (2, 3);

static void
s_buf_printf (s_buf_t *buf, const char *fmt, ...)
{
    va_list args;
    va_start (args, fmt);
    int size = vsnprintf (NULL, 0, fmt, args);
    va_end (args);
    if (size < 0) {
        buf->failed = true;
        return;
    }
    if (!s_buf_reserve (buf, (size_t) size))
        return;
    va_start (args, fmt);
    vsnprintf (buf->data + buf->len, (size_t) size + 1, fmt, args);
    va_end (args);
    buf->len += (size_t) size;
}

/* The text, or NULL (and nothing leaked) when something failed. */
static char *
s_buf_finish (s_buf_t *buf)
{
    if (!buf->failed && !buf->data)
        s_buf_reserve (buf, 0);
    if (buf->failed) {
        free (buf->data);
        return NULL;
    }
    buf->data[buf->len] = '\0';
    return buf->data;
}

/* ---- Reading the snapshot ------------------------------------------------ */

/* A member as an integer: integers as they are, other numbers truncated,
   anything else 0. */
static json_int_t
s_int (const json_t *object, const char *key)
{
    const json_t *value = json_object_get (object, key);
    if (json_is_integer (value))
        return json_integer_value (value);
    double real = json_number_value (value);
    if (real >= -9.2e18 && real <= 9.2e18)
        return (json_int_t) real;
    return 0;
}

/* A member as a double; 0 when it is not a number. */
static double
s_real (const json_t *object, const char *key)
{
    return json_number_value (json_object_get (object, key));
}

/* A member as a string; "" when it is not a string. */
static const char *
s_str (const json_t *object, const char *key)
{
    const char *text = json_string_value (json_object_get (object, key));
    return text ? text : "";
}

/* A consumer's name, or NULL when it has none to be shown under. */
static const char *
s_consumer_name (const json_t *consumer)
{
    const char *name = json_string_value (json_object_get (consumer, "name"));
    return name && *name ? name : NULL;
}

/* The hub's name, or NULL when it has none (null, missing, empty). */
static const char *
s_hub_name (const json_t *hub)
{
    const char *name = json_string_value (json_object_get (hub, "name"));
    return name && *name ? name : NULL;
}

/* ---- Numbers ------------------------------------------------------------- */

/* v with "%.<precision>g", a ',' from the locale turned into '.'. */
static void
s_put_double (s_buf_t *buf, int precision, double v)
{
    if (isnan (v) || isinf (v)) {
        s_buf_puts (buf, isnan (v) ? "NaN" : v > 0 ? "+Inf" : "-Inf");
        return;
    }
    char text[64];
    snprintf (text, sizeof text, "%.*g", precision, v);
    for (char *c = text; *c; c++)
        if (*c == ',')
            *c = '.';
    s_buf_puts (buf, text);
}

static void
s_put_integer (s_buf_t *buf, json_int_t v)
{
    s_buf_printf (buf, "%" JSON_INTEGER_FORMAT, v);
}

/* A JSON value as a number: integers as integers, reals with %.9g,
   anything else 0. */
static void
s_put_number (s_buf_t *buf, const json_t *value)
{
    if (json_is_integer (value))
        s_put_integer (buf, json_integer_value (value));
    else if (json_is_real (value))
        s_put_double (buf, 9, json_real_value (value));
    else
        s_buf_puts (buf, "0");
}

/* ---- Prometheus ---------------------------------------------------------- */

static void
s_prom_family (s_buf_t *buf, const char *name, const char *type, const char *help)
{
    s_buf_printf (buf, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value, escaped: backslash, double quote and newline. */
static void
s_prom_label_value (s_buf_t *buf, const char *text)
{
    for (const char *c = text; *c; c++) {
        if (*c == '\\')
            s_buf_puts (buf, "\\\\");
        else if (*c == '"')
            s_buf_puts (buf, "\\\"");
        else if (*c == '\n')
            s_buf_puts (buf, "\\n");
        else
            s_buf_put (buf, c, 1);
    }
}

/* NAME{consumer="C"[,quantile="Q"]} for a per-consumer sample; with no
   consumer (a hub-wide one), NAME{quantile="Q"} or NAME alone. */
static void
s_prom_consumer_sample (s_buf_t *buf, const char *name, const char *suffix,
                        const char *consumer, const char *quantile)
{
    s_buf_puts (buf, name);
    s_buf_puts (buf, suffix);
    if (!consumer && !quantile) {
        s_buf_puts (buf, " ");
        return;
    }
    s_buf_puts (buf, "{");
    if (consumer) {
        s_buf_puts (buf, "consumer=\"");
        s_prom_label_value (buf, consumer);
        s_buf_puts (buf, quantile ? "\"," : "\"");
    }
    if (quantile) {
        s_buf_puts (buf, "quantile=\"");
        s_buf_puts (buf, quantile);
        s_buf_puts (buf, "\"");
    }
    s_buf_puts (buf, "} ");
}

typedef enum { S_COUNTER, S_GAUGE, S_SUMMARY } s_kind_t;

/* The per-consumer families, in the order they are written. field is the
   consumer's member; for a gauge, sub (when set) a member of that. */
static const struct {
    const char *name;
    s_kind_t kind;
    const char *field;
    const char *sub;
    const char *help;
} s_consumer_families[] = {
    { "fanhub_consumer_enqueued_total", S_COUNTER, "enqueued", NULL,
      "Messages put on the consumer's queue (or its spool)." },
    { "fanhub_consumer_dequeued_total", S_COUNTER, "dequeued", NULL,
      "Messages taken off the consumer's queue to be consumed." },
    { "fanhub_consumer_completed_total", S_COUNTER, "completed", NULL,
      "Messages the consumer's plugin finished with ok." },
    { "fanhub_consumer_failed_total", S_COUNTER, "failed", NULL,
      "Messages that failed for good: the plugin answered fail, or retries ran out." },
    { "fanhub_consumer_retried_total", S_COUNTER, "retried", NULL,
      "Times a message was tried again after the plugin answered retry." },
    { "fanhub_consumer_dropped_total", S_COUNTER, "dropped", NULL,
      "Messages dropped by the overflow policy of the consumer's full queue." },
    { "fanhub_consumer_spilled_total", S_COUNTER, "spilled", NULL,
      "Messages written to the consumer's disk spool." },
    { "fanhub_consumer_dead_lettered_total", S_COUNTER, "dead_lettered", NULL,
      "Messages sent to the consumer's dead-letter store." },
    { "fanhub_consumer_coalesced_total", S_COUNTER, "coalesced", NULL,
      "Messages merged into one already queued instead of being consumed on their own." },
    { "fanhub_consumer_backlog", S_GAUGE, "backlog", NULL,
      "Messages waiting for the consumer: enqueued - dequeued, spool included." },
    { "fanhub_consumer_in_flight", S_GAUGE, "in_flight", NULL,
      "Messages being consumed now: dequeued - completed - failed." },
    { "fanhub_consumer_backlog_max", S_GAUGE, "backlog_max", NULL,
      "Highest backlog since the hub started." },
    { "fanhub_consumer_capacity", S_GAUGE, "capacity", NULL,
      "Messages the consumer's queue holds before its overflow policy applies." },
    { "fanhub_consumer_stuck", S_GAUGE, "stuck", NULL,
      "Consume calls running now for longer than the stuck threshold." },
    { "fanhub_consumer_evicted_total", S_COUNTER, "evicted", NULL,
      "Queued messages dropped by drop-oldest to make room for a newer one (also in dropped)." },
    { "fanhub_consumer_spool_bytes", S_GAUGE, "spool_bytes", NULL,
      "Bytes of spooled messages not yet consumed." },
    { "fanhub_consumer_spool_corrupt_total", S_COUNTER, "spool_corrupt", NULL,
      "Damaged spool records or regions skipped." },
    { "fanhub_consumer_spool_cursor_errors_total", S_COUNTER, "spool_cursor_errors", NULL,
      "Spool cursor writes that failed (each is tried again)." },
    { "fanhub_consumer_keys_active", S_GAUGE, "keys_active", NULL,
      "Pool: keys with a message queued, running or waiting for a retry." },
    { "fanhub_consumer_key_backlog_max", S_GAUGE, "key_backlog_max", NULL,
      "Pool: the most messages one key has had queued at once." },
    { "fanhub_consumer_key_fallback_total", S_COUNTER, "key_fallback", NULL,
      "Pool: messages whose order_by key could not be read, given the fallback key." },
    { "fanhub_consumer_queue_wait_seconds", S_SUMMARY, "queue_wait", NULL,
      "Time from the hub receiving a message to the consumer starting on it, since start." },
    { "fanhub_consumer_processing_seconds", S_SUMMARY, "processing", NULL,
      "Time the consumer's plugin took for a message, since start." },
    { "fanhub_consumer_queue_wait_max_seconds", S_GAUGE, "queue_wait", "max",
      "Longest queue wait since the hub started." },
    { "fanhub_consumer_processing_max_seconds", S_GAUGE, "processing", "max",
      "Longest processing time since the hub started." },
};

static const struct {
    const char *label;
    const char *field;
} s_quantiles[] = {
    { "0.5", "p50" }, { "0.9", "p90" }, { "0.99", "p99" }, { "0.999", "p999" },
};

static void
s_prom_summary (s_buf_t *buf, const char *name, const char *consumer,
                const json_t *histogram)
{
    json_int_t count = s_int (histogram, "count");
    for (size_t i = 0; i < sizeof s_quantiles / sizeof s_quantiles[0]; i++) {
        s_prom_consumer_sample (buf, name, "", consumer, s_quantiles[i].label);
        if (count > 0)
            s_put_number (buf, json_object_get (histogram, s_quantiles[i].field));
        else
            s_buf_puts (buf, "NaN");
        s_buf_puts (buf, "\n");
    }
    s_prom_consumer_sample (buf, name, "_sum", consumer, NULL);
    s_put_number (buf, json_object_get (histogram, "sum"));
    s_buf_puts (buf, "\n");
    s_prom_consumer_sample (buf, name, "_count", consumer, NULL);
    s_put_integer (buf, count);
    s_buf_puts (buf, "\n");
}

/* A family of one unlabelled sample: HELP, TYPE, NAME VALUE. */
static void
s_prom_scalar (s_buf_t *buf, const char *name, const char *type, const char *help,
               const json_t *value)
{
    s_prom_family (buf, name, type, help);
    s_buf_puts (buf, name);
    s_buf_puts (buf, " ");
    s_put_number (buf, value);
    s_buf_puts (buf, "\n");
}

static void
s_prom_hub (s_buf_t *buf, const json_t *hub)
{
    s_prom_family (buf, "fanhub_info", "gauge",
                   "Constant 1, labelled with the hub's version and configured name.");
    s_buf_puts (buf, "fanhub_info{version=\"");
    s_prom_label_value (buf, s_str (hub, "version"));
    s_buf_puts (buf, "\",name=\"");
    s_prom_label_value (buf, s_str (hub, "name"));
    s_buf_puts (buf, "\"} 1\n");

    s_prom_scalar (buf, "fanhub_uptime_seconds", "gauge", "Seconds since the hub started.",
                   json_object_get (hub, "uptime"));
    s_prom_scalar (buf, "fanhub_received_total", "counter",
                   "Bus messages read, malformed ones included.",
                   json_object_get (hub, "received"));

    /* One sample per reason; a hub that does not break them down gets
       one sample without the label. */
    s_prom_family (buf, "fanhub_malformed_total", "counter",
                   "Bus messages dropped as malformed, by reason.");
    const json_t *reasons = json_object_get (hub, "malformed_by_reason");
    if (json_object_size (reasons) > 0) {
        const char *reason;
        json_t *count;
        json_object_foreach ((json_t *) reasons, reason, count) {
            s_buf_puts (buf, "fanhub_malformed_total{reason=\"");
            s_prom_label_value (buf, reason);
            s_buf_puts (buf, "\"} ");
            s_put_number (buf, count);
            s_buf_puts (buf, "\n");
        }
    }
    else {
        s_buf_puts (buf, "fanhub_malformed_total ");
        s_put_number (buf, json_object_get (hub, "malformed"));
        s_buf_puts (buf, "\n");
    }

    s_prom_scalar (buf, "fanhub_unrouted_total", "counter",
                   "Well-formed bus messages that matched no consumer.",
                   json_object_get (hub, "unrouted"));

    /* Completion and upstream gaps: only when the snapshot has them. */
    const json_t *handled = json_object_get (hub, "handled");
    if (handled)
        s_prom_scalar (buf, "fanhub_handled_total", "counter",
                       "Messages every consumer they went to is done with.", handled);
    const json_t *end_to_end = json_object_get (hub, "end_to_end");
    if (json_is_object (end_to_end)) {
        s_prom_family (buf, "fanhub_end_to_end_seconds", "summary",
                       "Time from the hub receiving a message to it being handled, since start.");
        s_prom_summary (buf, "fanhub_end_to_end_seconds", NULL, end_to_end);
        s_prom_scalar (buf, "fanhub_end_to_end_max_seconds", "gauge",
                       "Longest time to handled since the hub started.",
                       json_object_get (end_to_end, "max"));
    }
    const json_t *upstream = json_object_get (hub, "upstream");
    if (json_is_object (upstream)) {
        static const struct {
            const char *name, *type, *field, *help;
        } families[] = {
            { "fanhub_upstream_lost_total", "counter", "lost",
              "Sequence numbers a producer skipped: messages lost before the hub." },
            { "fanhub_upstream_restarts_total", "counter", "restarts",
              "Times a producer's sequence went back (a restart, or out of order)." },
            { "fanhub_upstream_untracked_total", "counter", "untracked",
              "Messages without a usable sequence or producer, or beyond max_producers." },
            { "fanhub_upstream_producers", "gauge", "producers", "Producers tracked." },
        };
        for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
            s_prom_scalar (buf, families[i].name, families[i].type, families[i].help,
                           json_object_get (upstream, families[i].field));
    }

    const json_t *endpoints = json_object_get (hub, "endpoints");
    bool first = true;
    for (size_t i = 0; i < json_array_size (endpoints); i++) {
        const json_t *endpoint = json_array_get (endpoints, i);
        const char *address = json_string_value (json_object_get (endpoint, "endpoint"));
        if (!address)
            continue;
        if (first)
            s_prom_family (buf, "fanhub_endpoint_connected", "gauge",
                           "1 while at least one peer is connected on the bus endpoint, else 0.");
        first = false;
        s_buf_puts (buf, "fanhub_endpoint_connected{endpoint=\"");
        s_prom_label_value (buf, address);
        s_buf_puts (buf, "\",kind=\"");
        s_prom_label_value (buf, s_str (endpoint, "kind"));
        s_buf_puts (buf, json_is_true (json_object_get (endpoint, "connected"))
                             ? "\"} 1\n"
                             : "\"} 0\n");
    }
}

char *
fh_stats_format_prometheus (const json_t *stats)
{
    s_buf_t buf = { 0 };
    s_prom_hub (&buf, json_object_get (stats, "hub"));

    const json_t *consumers = json_object_get (stats, "consumers");
    size_t named = 0;
    for (size_t i = 0; i < json_array_size (consumers); i++)
        if (s_consumer_name (json_array_get (consumers, i)))
            named++;
    if (named == 0)
        return s_buf_finish (&buf);

    for (size_t f = 0; f < sizeof s_consumer_families / sizeof s_consumer_families[0]; f++) {
        const char *name = s_consumer_families[f].name;
        s_kind_t kind = s_consumer_families[f].kind;
        s_prom_family (&buf, name,
                       kind == S_COUNTER ? "counter" : kind == S_GAUGE ? "gauge" : "summary",
                       s_consumer_families[f].help);
        for (size_t i = 0; i < json_array_size (consumers); i++) {
            const json_t *consumer = json_array_get (consumers, i);
            const char *consumer_name = s_consumer_name (consumer);
            if (!consumer_name)
                continue;
            const json_t *value = json_object_get (consumer, s_consumer_families[f].field);
            if (kind == S_SUMMARY) {
                s_prom_summary (&buf, name, consumer_name, value);
                continue;
            }
            if (s_consumer_families[f].sub)
                value = json_object_get (value, s_consumer_families[f].sub);
            s_prom_consumer_sample (&buf, name, "", consumer_name, NULL);
            s_put_number (&buf, value);
            s_buf_puts (&buf, "\n");
        }
    }
    return s_buf_finish (&buf);
}

/* ---- collectd ------------------------------------------------------------ */

/* A name inside a collectd identifier: '/', '"', '\\', spaces and control
   characters would break it (or the quoting), so they become '_'. */
static void
s_collectd_name (s_buf_t *buf, const char *text)
{
    for (const char *c = text; *c; c++) {
        unsigned char byte = (unsigned char) *c;
        if (byte <= ' ' || byte == 0x7f || byte == '/' || byte == '"' || byte == '\\')
            s_buf_puts (buf, "_");
        else
            s_buf_put (buf, c, 1);
    }
}

typedef struct {
    const char *host;
    const char *hub_name; /* NULL when the hub has none */
    double interval;
    double when_s;
} s_collectd_t;

/* PUTVAL "HOST/fanhub-[HUB.]INSTANCE/TYPE" [interval=I] WHEN: ... the value
   is left for the caller, then "\n". */
static void
s_collectd_start (s_buf_t *buf, const s_collectd_t *self, const char *instance,
                  const char *type)
{
    s_buf_puts (buf, "PUTVAL \"");
    s_collectd_name (buf, self->host);
    s_buf_puts (buf, "/fanhub-");
    if (self->hub_name && instance) {
        s_collectd_name (buf, self->hub_name);
        s_buf_puts (buf, ".");
    }
    if (instance)
        s_collectd_name (buf, instance);
    else
        s_collectd_name (buf, self->hub_name ? self->hub_name : "hub");
    s_buf_puts (buf, "/");
    s_buf_puts (buf, type);
    s_buf_puts (buf, "\"");
    if (self->interval > 0 && isfinite (self->interval)) {
        s_buf_puts (buf, " interval=");
        s_put_double (buf, 6, self->interval);
    }
    s_buf_puts (buf, " ");
    if (self->when_s > 0 && isfinite (self->when_s)) {
        if (self->when_s == floor (self->when_s))
            s_buf_printf (buf, "%.0f", self->when_s);
        else {
            char text[64];
            snprintf (text, sizeof text, "%.3f", self->when_s);
            for (char *c = text; *c; c++)
                if (*c == ',')
                    *c = '.';
            s_buf_puts (buf, text);
        }
    }
    else
        s_buf_puts (buf, "N");
    s_buf_puts (buf, ":");
}

static void
s_collectd_integer (s_buf_t *buf, const s_collectd_t *self, const char *instance,
                    const char *type, json_int_t value)
{
    s_collectd_start (buf, self, instance, type);
    s_put_integer (buf, value);
    s_buf_puts (buf, "\n");
}

/* latency-NAME_p99 and latency-NAME_mean from the histogram's figures
   over the last interval; 0 when that interval had no sample. */
static void
s_collectd_latency (s_buf_t *buf, const s_collectd_t *self, const char *instance,
                    const char *name, const json_t *histogram)
{
    const json_t *interval = json_object_get (histogram, "interval");
    bool samples = s_int (interval, "count") > 0;
    static const char *const figures[] = { "p99", "mean" };
    for (size_t i = 0; i < 2; i++) {
        char type[64];
        snprintf (type, sizeof type, "latency-%s_%s", name, figures[i]);
        s_collectd_start (buf, self, instance, type);
        s_put_double (buf, 9, samples ? s_real (interval, figures[i]) : 0.0);
        s_buf_puts (buf, "\n");
    }
}

char *
fh_stats_format_collectd (const json_t *stats, const char *host, double interval, double when_s)
{
    s_buf_t buf = { 0 };
    const json_t *hub = json_object_get (stats, "hub");
    s_collectd_t self = {
        .host = host && *host ? host : "localhost",
        .hub_name = s_hub_name (hub),
        .interval = interval,
        .when_s = when_s,
    };
    s_collectd_integer (&buf, &self, NULL, "derive-received", s_int (hub, "received"));
    s_collectd_integer (&buf, &self, NULL, "derive-malformed", s_int (hub, "malformed"));
    s_collectd_integer (&buf, &self, NULL, "derive-unrouted", s_int (hub, "unrouted"));

    const json_t *consumers = json_object_get (stats, "consumers");
    for (size_t i = 0; i < json_array_size (consumers); i++) {
        const json_t *consumer = json_array_get (consumers, i);
        const char *name = s_consumer_name (consumer);
        if (!name)
            continue;
        s_collectd_integer (&buf, &self, name, "queue_length", s_int (consumer, "backlog"));
        s_collectd_latency (&buf, &self, name, "queue_wait",
                            json_object_get (consumer, "queue_wait"));
        s_collectd_latency (&buf, &self, name, "processing",
                            json_object_get (consumer, "processing"));
        s_collectd_integer (&buf, &self, name, "derive-completed", s_int (consumer, "completed"));
        s_collectd_integer (&buf, &self, name, "derive-failed", s_int (consumer, "failed"));
        s_collectd_integer (&buf, &self, name, "derive-dropped", s_int (consumer, "dropped"));
        s_collectd_integer (&buf, &self, name, "derive-enqueued", s_int (consumer, "enqueued"));
    }
    return s_buf_finish (&buf);
}

/* ---- Table --------------------------------------------------------------- */

#define S_NAME_MIN 8
#define S_NAME_MAX 32

/* A duration for people: "450ns", "850us", "12.3ms", "1.20s"; the unit is
   chosen after rounding, so 0.99996 s is "1.00s", not "1000.0ms". */
static void
s_human_seconds (char *text, size_t size, double seconds)
{
    if (!(seconds >= 0) || !isfinite (seconds))
        snprintf (text, size, "-");
    else if (seconds * 1e9 < 999.5)
        snprintf (text, size, "%.0fns", seconds * 1e9);
    else if (seconds * 1e6 < 999.5)
        snprintf (text, size, "%.0fus", seconds * 1e6);
    else if (seconds * 1e3 < 999.95)
        snprintf (text, size, "%.1fms", seconds * 1e3);
    else
        snprintf (text, size, "%.2fs", seconds);
    for (char *c = text; *c; c++)
        if (*c == ',')
            *c = '.';
}

/* An uptime: "12s", "1m23s", "2h05m07s", "3d04h05m". */
static void
s_human_uptime (char *text, size_t size, double seconds)
{
    long long s = seconds >= 0 && seconds < 1e15 ? (long long) seconds : 0;
    if (s < 60)
        snprintf (text, size, "%llds", s);
    else if (s < 3600)
        snprintf (text, size, "%lldm%02llds", s / 60, s % 60);
    else if (s < 86400)
        snprintf (text, size, "%lldh%02lldm%02llds", s / 3600, s / 60 % 60, s % 60);
    else
        snprintf (text, size, "%lldd%02lldh%02lldm", s / 86400, s / 3600 % 24, s / 60 % 60);
}

/* The p99 of the last interval; before the first interval has passed
   (or when it had no samples), the whole run's; "-" without samples. */
static void
s_table_p99 (char *text, size_t size, const json_t *histogram)
{
    const json_t *interval = json_object_get (histogram, "interval");
    if (s_int (interval, "count") > 0)
        s_human_seconds (text, size, s_real (interval, "p99"));
    else if (s_int (histogram, "count") > 0)
        s_human_seconds (text, size, s_real (histogram, "p99"));
    else
        snprintf (text, size, "-");
}

/* The name in a column of width: printable ASCII only, cut with '~'. */
static void
s_table_name (s_buf_t *buf, const char *name, size_t width)
{
    size_t len = strlen (name);
    for (size_t i = 0; i < width; i++) {
        unsigned char byte = i < len ? (unsigned char) name[i] : ' ';
        if (i == width - 1 && len > width)
            byte = '~';
        else if (byte < ' ' || byte > '~')
            byte = '?';
        s_buf_put (buf, (const char *) &byte, 1);
    }
}

char *
fh_stats_format_table (const json_t *stats)
{
    s_buf_t buf = { 0 };
    const json_t *hub = json_object_get (stats, "hub");
    const char *hub_name = s_hub_name (hub);
    char uptime[64];
    s_human_uptime (uptime, sizeof uptime, s_real (hub, "uptime"));
    s_buf_puts (&buf, "hub ");
    if (hub_name)
        s_table_name (&buf, hub_name, strlen (hub_name) < S_NAME_MAX ? strlen (hub_name) : S_NAME_MAX);
    else
        s_buf_puts (&buf, "-");
    s_buf_printf (&buf,
                  " up %s  received %" JSON_INTEGER_FORMAT "  malformed %" JSON_INTEGER_FORMAT
                  "  unrouted %" JSON_INTEGER_FORMAT "\n",
                  uptime, s_int (hub, "received"), s_int (hub, "malformed"),
                  s_int (hub, "unrouted"));

    const json_t *consumers = json_object_get (stats, "consumers");
    size_t width = S_NAME_MIN;
    for (size_t i = 0; i < json_array_size (consumers); i++) {
        const char *name = s_consumer_name (json_array_get (consumers, i));
        if (name && strlen (name) > width)
            width = strlen (name) < S_NAME_MAX ? strlen (name) : S_NAME_MAX;
    }
    s_table_name (&buf, "CONSUMER", width);
    s_buf_printf (&buf, " %9s %9s %11s %11s %9s %9s %8s %8s\n", "BACKLOG", "IN_FLIGHT",
                  "ENQUEUED", "COMPLETED", "FAILED", "DROPPED", "WAIT_P99", "PROC_P99");
    for (size_t i = 0; i < json_array_size (consumers); i++) {
        const json_t *consumer = json_array_get (consumers, i);
        const char *name = s_consumer_name (consumer);
        if (!name)
            continue;
        char wait[32], proc[32];
        s_table_p99 (wait, sizeof wait, json_object_get (consumer, "queue_wait"));
        s_table_p99 (proc, sizeof proc, json_object_get (consumer, "processing"));
        s_table_name (&buf, name, width);
        s_buf_printf (&buf,
                      " %9" JSON_INTEGER_FORMAT " %9" JSON_INTEGER_FORMAT
                      " %11" JSON_INTEGER_FORMAT " %11" JSON_INTEGER_FORMAT
                      " %9" JSON_INTEGER_FORMAT " %9" JSON_INTEGER_FORMAT " %8s %8s\n",
                      s_int (consumer, "backlog"), s_int (consumer, "in_flight"),
                      s_int (consumer, "enqueued"), s_int (consumer, "completed"),
                      s_int (consumer, "failed"), s_int (consumer, "dropped"), wait, proc);
    }
    return s_buf_finish (&buf);
}
