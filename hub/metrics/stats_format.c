/*  stats_format - a metrics snapshot as Prometheus text or collectd
    PUTVAL lines (the table for a terminal: stats_table.c). See
    stats_format.h; the metrics are
    the rows of the registry (metrics.h), described in docs/metrics.md.

    Prometheus and collectd walk the registry: each row with a Prometheus
    name is one family, each row with a collectd type one value per hub or
    consumer. The text is built in one growing buffer; running out of
    memory anywhere turns the result into NULL.
*/
#include "stats_format.h"

#include "fanhub/consumer.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* ---- Numbers ------------------------------------------------------------- */

/* v with "%.<precision>g", a ',' from the locale turned into '.'. With
   precision 9, more digits (up to 17) when 9 would not read back as v: a
   start time in seconds since 1970 needs them. */
static void
s_put_double (s_buf_t *buf, int precision, double v)
{
    if (isnan (v) || isinf (v)) {
        s_buf_puts (buf, isnan (v) ? "NaN" : v > 0 ? "+Inf" : "-Inf");
        return;
    }
    char text[64];
    snprintf (text, sizeof text, "%.*g", precision, v);
    while (precision >= 9 && precision < 17 && strtod (text, NULL) != v)
        snprintf (text, sizeof text, "%.*g", ++precision, v);
    for (char *c = text; *c; c++)
        if (*c == ',')
            *c = '.';
    s_buf_puts (buf, text);
}

/* A value as the row or the snapshot has it: integers as integers, reals
   with %.9g (or the digits it takes to read back). */
static void
s_put_value (s_buf_t *buf, const fh_metric_value_t *value)
{
    if (value->is_real)
        s_put_double (buf, 9, value->real);
    else
        s_buf_printf (buf, "%" PRId64, value->integer);
}

/* ---- Prometheus ---------------------------------------------------------- */

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

/* NAME[SUFFIX]{LABEL="VALUE",...} and a space; labels is NULL-terminated
   pairs; no braces without labels. */
static void
s_prom_sample (s_buf_t *buf, const char *name, const char *suffix, const char *const *labels)
{
    s_buf_puts (buf, name);
    s_buf_puts (buf, suffix);
    for (size_t i = 0; labels[i]; i += 2) {
        s_buf_puts (buf, i == 0 ? "{" : ",");
        s_buf_puts (buf, labels[i]);
        s_buf_puts (buf, "=\"");
        s_prom_label_value (buf, labels[i + 1]);
        s_buf_puts (buf, "\"");
    }
    s_buf_puts (buf, labels[0] ? "} " : " ");
}

static void
s_prom_family (s_buf_t *buf, const fh_metric_t *row)
{
    const char *type = row->type == FH_METRIC_COUNTER     ? "counter"
                       : row->type == FH_METRIC_HISTOGRAM ? "histogram"
                                                          : "gauge";
    s_buf_printf (buf, "# HELP %s %s\n# TYPE %s %s\n", row->prometheus, row->help, row->prometheus,
                  type);
}

/* A histogram's samples for one hub or consumer: the cumulative buckets
   (+Inf is the count), _sum and _count. labels has room for le. */
static void
s_prom_histogram (s_buf_t *buf, const char *name, const fh_metrics_latency_t *latency,
                  const char **labels, size_t used)
{
    char le[32];
    uint64_t count = 0;
    labels[used] = "le";
    labels[used + 1] = le;
    labels[used + 2] = NULL;
    for (size_t i = 0; i <= FH_METRICS_BUCKETS; i++) {
        if (i < FH_METRICS_BUCKETS)
            fh_metrics_bucket_text (i, le, sizeof le);
        else
            snprintf (le, sizeof le, "+Inf");
        /* A snapshot read back may disagree with itself: the counts never
           go down from one bound to the next, nor above the count. */
        if (i < FH_METRICS_BUCKETS && latency->le[i] > count)
            count = latency->le[i];
        if (i == FH_METRICS_BUCKETS || count > latency->run.count)
            count = latency->run.count;
        s_prom_sample (buf, name, "_bucket", labels);
        s_buf_printf (buf, "%" PRIu64 "\n", count);
    }
    labels[used] = NULL;
    s_prom_sample (buf, name, "_sum", labels);
    s_put_double (buf, 9, latency->run.sum);
    s_buf_puts (buf, "\n");
    s_prom_sample (buf, name, "_count", labels);
    s_buf_printf (buf, "%" PRIu64 "\n", latency->run.count);
}

/* One row's samples for one item (the hub, an endpoint or a consumer). */
static void
s_prom_item (s_buf_t *buf, const fh_metrics_snapshot_t *snapshot, const fh_metric_t *row,
             fh_metrics_item_t *item, const char **labels, size_t used)
{
    if (row->id == FH_M_VERSION) {
        const char *info[]
            = {"version", item->text ? item->text : "", "name", item->name ? item->name : "", NULL};
        s_prom_sample (buf, row->prometheus, "", info);
        s_buf_puts (buf, "1\n");
        return;
    }
    if (row->id == FH_M_CONSUMER_INFO) {
        const char *info[] = {
            "consumer", item->name ? item->name : "",       "plugin", item->text ? item->text : "",
            "version",  item->version ? item->version : "", NULL};
        s_prom_sample (buf, row->prometheus, "", info);
        s_buf_puts (buf, "1\n");
        return;
    }
    if (row->id == FH_M_MALFORMED && snapshot->reason_count > 0) {
        for (size_t i = 0; i < snapshot->reason_count; i++) {
            const char *reason[] = {"reason", snapshot->reasons[i].name, NULL};
            s_prom_sample (buf, row->prometheus, "", reason);
            s_put_value (buf, &snapshot->reasons[i].value);
            s_buf_puts (buf, "\n");
        }
        return;
    }
    if (row->type == FH_METRIC_HISTOGRAM) {
        s_prom_histogram (buf, row->prometheus, fh_metrics_latency (item, row->id), labels, used);
        return;
    }
    s_prom_sample (buf, row->prometheus, "", labels);
    if (row->of != row->id)
        s_put_double (buf, 9, fh_metrics_latency (item, row->of)->run.max);
    else
        s_put_value (buf, &item->values[row->id]);
    s_buf_puts (buf, "\n");
}

/* Whether the snapshot has the row at all (completion, upstream, process
   figures come only with their part; a family needs a sample). */
static bool
s_present (const fh_metrics_snapshot_t *snapshot, const fh_metric_t *row)
{
    if (row->id == FH_M_SIG_CRL_EXPIRES)
        return snapshot->has_crl;
    switch (row->scope) {
    case FH_SCOPE_UPSTREAM: return snapshot->has_upstream;
    case FH_SCOPE_AMQP: return snapshot->has_amqp;
    case FH_SCOPE_SIGNATURES: return snapshot->has_signatures;
    case FH_SCOPE_PROCESS: return snapshot->has_process;
    case FH_SCOPE_ENDPOINT: return snapshot->endpoint_count > 0;
    case FH_SCOPE_CONSUMER: return snapshot->consumer_count > 0;
    case FH_SCOPE_HUB: break;
    }
    if (row->id == FH_M_HANDLED)
        return snapshot->has_handled;
    if (row->id == FH_M_END_TO_END || row->of == FH_M_END_TO_END)
        return snapshot->has_end_to_end;
    return true;
}

/* A family name Prometheus takes: [a-zA-Z_:][a-zA-Z0-9_:]*. */
static bool
s_prom_name_ok (const char *name)
{
    if (!name || !*name || (*name >= '0' && *name <= '9'))
        return false;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')
              || *c == '_' || *c == ':'))
            return false;
    return true;
}

/* Whether a consumer before (i, k) has a plugin figure of family. */
static bool
s_own_seen (const fh_metrics_snapshot_t *snapshot, size_t i, size_t k, const char *family)
{
    for (size_t j = 0; j <= i; j++)
        for (size_t n = 0; n < (j == i ? k : snapshot->consumers[j].own_count); n++) {
            const char *other = snapshot->consumers[j].own[n].family;
            if (other && strcmp (other, family) == 0)
                return true;
        }
    return false;
}

/* The plugins' own figures (ABI 1.6): one family each, with a sample per
   consumer that has it (of the kind the first one gave it). */
static void
s_prom_own (s_buf_t *buf, const fh_metrics_snapshot_t *snapshot)
{
    for (size_t i = 0; i < snapshot->consumer_count; i++)
        for (size_t k = 0; k < snapshot->consumers[i].own_count; k++) {
            const fh_metrics_own_t *first = &snapshot->consumers[i].own[k];
            if (!s_prom_name_ok (first->family) || s_own_seen (snapshot, i, k, first->family))
                continue;
            s_buf_printf (buf, "# HELP %s ", first->family);
            for (const char *c = first->help; *c; c++) /* HELP escapes \\ and newlines */
                if (*c == '\\' || *c == '\n')
                    s_buf_puts (buf, *c == '\\' ? "\\\\" : "\\n");
                else
                    s_buf_put (buf, c, 1);
            s_buf_printf (buf, "\n# TYPE %s %s\n", first->family,
                          first->gauge ? "gauge" : "counter");
            for (size_t j = i; j < snapshot->consumer_count; j++)
                for (size_t n = j == i ? k : 0; n < snapshot->consumers[j].own_count; n++) {
                    const fh_metrics_own_t *m = &snapshot->consumers[j].own[n];
                    if (!m->family || strcmp (m->family, first->family) != 0
                        || m->gauge != first->gauge)
                        continue;
                    const char *labels[]
                        = {"consumer",
                           snapshot->consumers[j].name ? snapshot->consumers[j].name : "", NULL};
                    s_prom_sample (buf, m->family, "", labels);
                    s_buf_printf (buf, "%" PRId64 "\n", m->value);
                }
        }
}

char *
fh_metrics_prometheus (const fh_metrics_snapshot_t *snapshot)
{
    s_buf_t buf = {0};
    for (size_t id = 0; id < FH_METRIC_COUNT; id++) {
        const fh_metric_t *row = &fh_metrics[id];
        if (!row->prometheus || !s_present (snapshot, row))
            continue;
        s_prom_family (&buf, row);
        const char *labels[8] = {NULL};
        if (row->scope == FH_SCOPE_ENDPOINT)
            for (size_t i = 0; i < snapshot->endpoint_count; i++) {
                fh_metrics_item_t *item = &snapshot->endpoints[i];
                labels[0] = "endpoint";
                labels[1] = item->name ? item->name : "";
                labels[2] = "kind";
                labels[3] = item->text ? item->text : "";
                s_prom_item (&buf, snapshot, row, item, labels, 4);
            }
        else if (row->scope == FH_SCOPE_CONSUMER)
            for (size_t i = 0; i < snapshot->consumer_count; i++) {
                fh_metrics_item_t *item = &snapshot->consumers[i];
                labels[0] = "consumer";
                labels[1] = item->name ? item->name : "";
                s_prom_item (&buf, snapshot, row, item, labels, 2);
            }
        else
            s_prom_item (&buf, snapshot, row, (fh_metrics_item_t *) &snapshot->hub, labels, 0);
    }
    s_prom_own (&buf, snapshot);
    return s_buf_finish (&buf);
}

/* ---- collectd ------------------------------------------------------------ */

size_t
fh_metrics_collectd_name (char *out, size_t size, const char *text)
{
    size_t len = 0;
    for (const char *c = text; *c && len + 1 < size; c++) {
        unsigned char byte = (unsigned char) *c;
        bool bad = byte <= ' ' || byte == 0x7f || byte == '/' || byte == '"' || byte == '\\';
        out[len++] = bad ? '_' : *c;
    }
    if (size > 0)
        out[len] = '\0';
    return len;
}

void
fh_metrics_collectd_instance (char *out, size_t size, const char *hub_name, const char *kind,
                              const char *name)
{
    char hub[128], item[160];
    fh_metrics_collectd_name (hub, sizeof hub, hub_name && *hub_name ? hub_name : "hub");
    if (!name) {
        snprintf (out, size, "%s", hub);
        return;
    }
    if (kind && strcmp (kind, "endpoint") == 0) {
        /* "endpoint_" and the address, each run of characters other than
           letters, digits and '.' as one '_': tcp://h:1 is endpoint_tcp_h_1. */
        size_t len = (size_t) snprintf (item, sizeof item, "endpoint_");
        for (const char *c = name; *c && len + 1 < sizeof item; c++) {
            bool keep = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')
                        || (*c >= '0' && *c <= '9') || *c == '.';
            if (keep)
                item[len++] = *c;
            else if (item[len - 1] != '_')
                item[len++] = '_';
        }
        item[len] = '\0';
    }
    else
        fh_metrics_collectd_name (item, sizeof item, name);
    if (hub_name && *hub_name)
        snprintf (out, size, "%s.%s", hub, item);
    else
        snprintf (out, size, "%s", item);
}

typedef struct {
    const char *host;
    const char *hub_name; /* NULL when the hub has none */
    double interval;
    double when_s;
} s_collectd_t;

/* PUTVAL "HOST/fanhub-INSTANCE/TYPE" [interval=I] WHEN: ... the value
   is left for the caller, then "\n". */
static void
s_collectd_start (s_buf_t *buf, const s_collectd_t *self, const char *instance, const char *type)
{
    char host[256];
    fh_metrics_collectd_name (host, sizeof host, self->host);
    s_buf_printf (buf, "PUTVAL \"%s/fanhub-%s/%s\"", host, instance, type);
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

/* A row's value as collectd takes it: a derive (a counter) as an integer,
   CPU seconds as milliseconds (total_time_in_ms), a histogram's max from
   its histogram, a real gauge (uptime) as a real, the rest as integers. */
static void
s_collectd_value (s_buf_t *buf, const fh_metric_t *row, fh_metrics_item_t *item)
{
    const fh_metric_value_t *value = &item->values[row->id];
    if (row->of != row->id)
        s_put_double (buf, 9, fh_metrics_latency (item, row->of)->run.max);
    else if (row->id == FH_M_PROCESS_CPU) {
        double ms = fh_metric_value_real (value) * 1e3;
        s_buf_printf (buf, "%" PRId64, ms >= 0 && ms < 9e18 ? (int64_t) llround (ms) : 0);
    }
    else if (row->real && row->type != FH_METRIC_COUNTER)
        s_put_double (buf, 9, fh_metric_value_real (value));
    else
        s_buf_printf (buf, "%" PRId64, fh_metric_value_int (value));
    s_buf_puts (buf, "\n");
}

/* The values of one scope's rows that have a collectd type, or for a
   latency its _p99 and _mean over the last interval (0 when that interval
   had no sample). */
static void
s_collectd_item (s_buf_t *buf, const s_collectd_t *self, const fh_metrics_snapshot_t *snapshot,
                 fh_metric_scope_t scope, const char *instance, fh_metrics_item_t *item)
{
    for (size_t id = 0; id < FH_METRIC_COUNT; id++) {
        const fh_metric_t *row = &fh_metrics[id];
        if (row->scope != scope || !row->collectd || !s_present (snapshot, row))
            continue;
        if (row->type != FH_METRIC_HISTOGRAM) {
            s_collectd_start (buf, self, instance, row->collectd);
            s_collectd_value (buf, row, item);
            continue;
        }
        const fh_histogram_summary_t *interval = &fh_metrics_latency (item, row->id)->interval;
        static const char *const figures[] = {"p99", "mean"};
        for (size_t i = 0; i < 2; i++) {
            char type[64];
            snprintf (type, sizeof type, "%s_%s", row->collectd, figures[i]);
            s_collectd_start (buf, self, instance, type);
            double value = i == 0 ? interval->p99 : interval->mean;
            s_put_double (buf, 9, interval->count > 0 ? value : 0.0);
            s_buf_puts (buf, "\n");
        }
    }
}

char *
fh_metrics_collectd (const fh_metrics_snapshot_t *snapshot, const char *host, double interval,
                     double when_s)
{
    s_buf_t buf = {0};
    s_collectd_t self = {
        .host = host && *host ? host : "localhost",
        .hub_name = snapshot->hub.name && *snapshot->hub.name ? snapshot->hub.name : NULL,
        .interval = interval,
        .when_s = when_s,
    };
    char instance[320];
    fh_metrics_collectd_instance (instance, sizeof instance, self.hub_name, NULL, NULL);
    fh_metrics_item_t *hub = (fh_metrics_item_t *) &snapshot->hub;
    static const fh_metric_scope_t hub_scopes[]
        = {FH_SCOPE_HUB, FH_SCOPE_AMQP, FH_SCOPE_UPSTREAM, FH_SCOPE_PROCESS};
    for (size_t i = 0; i < sizeof hub_scopes / sizeof hub_scopes[0]; i++)
        s_collectd_item (&buf, &self, snapshot, hub_scopes[i], instance, hub);
    if (snapshot->has_signatures)
        s_collectd_item (&buf, &self, snapshot, FH_SCOPE_SIGNATURES, instance, hub);
    for (size_t i = 0; i < snapshot->endpoint_count; i++) {
        fh_metrics_item_t *endpoint = &snapshot->endpoints[i];
        fh_metrics_collectd_instance (instance, sizeof instance, self.hub_name, "endpoint",
                                      endpoint->name ? endpoint->name : "");
        s_collectd_item (&buf, &self, snapshot, FH_SCOPE_ENDPOINT, instance, endpoint);
    }
    for (size_t i = 0; i < snapshot->consumer_count; i++) {
        fh_metrics_collectd_instance (instance, sizeof instance, self.hub_name, "consumer",
                                      snapshot->consumers[i].name);
        s_collectd_item (&buf, &self, snapshot, FH_SCOPE_CONSUMER, instance,
                         &snapshot->consumers[i]);
        /* Its plugin's own figures (ABI 1.6): TYPE-plugin_NAME. */
        for (size_t k = 0; k < snapshot->consumers[i].own_count; k++) {
            const fh_metrics_own_t *m = &snapshot->consumers[i].own[k];
            char name[128], type[160];
            fh_metrics_collectd_name (name, sizeof name, m->name);
            snprintf (type, sizeof type, "%s-plugin_%s", m->gauge ? "gauge" : "derive", name);
            s_collectd_start (&buf, &self, instance, type);
            s_buf_printf (&buf, "%" PRId64 "\n", m->value);
        }
    }
    return s_buf_finish (&buf);
}

/* ---- From a JSON snapshot ------------------------------------------------ */

typedef enum { S_PROMETHEUS, S_COLLECTD } s_format_t;

/* The JSON read back into a snapshot, then written in format. */
static char *
s_format_json (const json_t *stats, s_format_t format, const char *host, double interval,
               double when_s)
{
    fh_metrics_snapshot_t *snapshot = fh_metrics_from_json (stats);
    if (!snapshot)
        return NULL;
    char *text = format == S_PROMETHEUS ? fh_metrics_prometheus (snapshot)
                                        : fh_metrics_collectd (snapshot, host, interval, when_s);
    fh_metrics_snapshot_destroy (&snapshot);
    return text;
}

char *
fh_stats_format_prometheus (const json_t *stats)
{
    return s_format_json (stats, S_PROMETHEUS, NULL, 0, 0);
}

char *
fh_stats_format_collectd (const json_t *stats, const char *host, double interval, double when_s)
{
    return s_format_json (stats, S_COLLECTD, host, interval, when_s);
}
