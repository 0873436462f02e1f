/*  stats_table - a metrics snapshot for a terminal: the table of `fanhub
    stats` and one consumer in full. See stats_table.h; the figures are the
    rows of the registry (metrics.h).

    The text is written to a memory stream (open_memstream): running out of
    memory anywhere turns the result into NULL.
*/
#include "stats_table.h"

#include <math.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_NAME_MIN 8
#define S_NAME_MAX 32
#define S_ERROR_LEAD "  last error: "

/* Closes out, the memory stream of *text: the text, or NULL (and
   nothing kept) when writing failed. */
static char *
s_finish (FILE *out, char **text)
{
    bool failed = ferror (out) != 0;
    if (fclose (out) != 0 || failed) {
        free (*text);
        return NULL;
    }
    return *text;
}

/* The length of the UTF-8 character at text (at most len bytes), or 0
   when the bytes there are not one (a stray continuation byte, an
   overlong or cut sequence, a surrogate, above U+10FFFF). *code gets it. */
static size_t
s_utf8_char (const unsigned char *text, size_t len, uint32_t *code)
{
    unsigned char c = text[0];
    size_t n = c < 0x80             ? 1
               : (c & 0xe0) == 0xc0 ? 2
               : (c & 0xf0) == 0xe0 ? 3
               : (c & 0xf8) == 0xf0 ? 4
                                    : 0;
    if (n == 0 || n > len)
        return 0;
    uint32_t value = n == 1 ? c : c & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((text[i] & 0xc0) != 0x80)
            return 0;
        value = value << 6 | (text[i] & 0x3f);
    }
    static const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (value < least[n] || value > 0x10ffff || (value >= 0xd800 && value <= 0xdfff))
        return 0;
    *code = value;
    return n;
}

/* text for a terminal: each character one column, control characters
   (C0, DEL, C1) and bytes that are not UTF-8 as '?'; with max (> 0) at
   most max characters, the last one '~' when text is longer. Cuts only
   between characters. */
static void
s_put_text (FILE *out, const char *text, size_t max)
{
    const unsigned char *p = (const unsigned char *) text;
    size_t len = strlen (text), shown = 0;
    while (len > 0) {
        uint32_t code = 0;
        size_t n = s_utf8_char (p, len, &code);
        if (max > 0 && shown + 1 == max && (n ? n : 1) < len) {
            fputc ('~', out);
            return;
        }
        if (n == 0 || code < 0x20 || (code >= 0x7f && code < 0xa0))
            fputc ('?', out);
        else
            fwrite (p, 1, n, out);
        n = n ? n : 1;
        p += n;
        len -= n;
        shown++;
    }
}

const char *
fh_stats_table_state (const fh_metrics_item_t *consumer)
{
    int64_t state = fh_metric_value_int (&consumer->values[FH_M_PLUGIN_STATE]);
    if (state == 2)
        return "halted";
    if (state == 1)
        return "down";
    if (state == 3) /* FH_CONSUMER_PAUSED: `fanhub pause` */
        return "paused";
    if (state != 0)
        return "?";
    return fh_metric_value_int (&consumer->values[FH_M_STUCK]) > 0 ? "stuck" : "up";
}

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

/* The name in a column of width: printable ASCII only, cut with '~'. */
static void
s_table_name (FILE *out, const char *name, size_t width)
{
    size_t len = strlen (name);
    for (size_t i = 0; i < width; i++) {
        unsigned char byte = i < len ? (unsigned char) name[i] : ' ';
        if (i == width - 1 && len > width)
            byte = '~';
        else if (byte < ' ' || byte > '~')
            byte = '?';
        fputc (byte, out);
    }
}

/* The p99 of the last interval; before the first interval has passed
   (or when it had no samples), the whole run's; "-" without samples. */
static void
s_table_p99 (char *text, size_t size, const fh_metrics_latency_t *latency)
{
    if (latency->interval.count > 0)
        s_human_seconds (text, size, latency->interval.p99);
    else if (latency->run.count > 0)
        s_human_seconds (text, size, latency->run.p99);
    else
        snprintf (text, size, "-");
}

/* A time to drain: "-" for nothing to drain, "never" at a rate of 0,
   else "45s", "12m05s", "3h05m", "2d04h". */
static void
s_human_eta (char *text, size_t size, int64_t backlog, double rate)
{
    if (backlog <= 0)
        snprintf (text, size, "-");
    else if (!(rate > 0) || (double) backlog / rate > 1e9)
        snprintf (text, size, "never");
    else {
        long long s = (long long) ceil ((double) backlog / rate);
        if (s < 3600)
            s_human_uptime (text, size, (double) s);
        else if (s < 86400)
            snprintf (text, size, "%lldh%02lldm", s / 3600, s / 60 % 60);
        else
            snprintf (text, size, "%lldd%02lldh", s / 86400, s / 3600 % 24);
    }
}

/* Messages per second taken off the consumer's queue: between previous
   and now when previous has the same consumer at an earlier uptime (and
   its counter has not gone back: a restart); else over the last metrics
   interval (the queue_wait samples: one per message started), or since
   start while the first interval lasts. */
static double
s_table_rate (const fh_metrics_snapshot_t *snapshot, const fh_metrics_snapshot_t *previous,
              fh_metrics_item_t *consumer)
{
    double now = fh_metric_value_real (&snapshot->hub.values[FH_M_UPTIME]);
    for (size_t i = 0; previous && i < previous->consumer_count; i++) {
        fh_metrics_item_t *before = &previous->consumers[i];
        if (strcmp (before->name, consumer->name) != 0)
            continue;
        double then = fh_metric_value_real (&previous->hub.values[FH_M_UPTIME]);
        int64_t done = fh_metric_value_int (&consumer->values[FH_M_DEQUEUED])
                       - fh_metric_value_int (&before->values[FH_M_DEQUEUED]);
        if (now > then && done >= 0)
            return (double) done / (now - then);
    }
    double interval = fh_metric_value_real (&snapshot->hub.values[FH_M_INTERVAL]);
    const fh_metrics_latency_t *wait = fh_metrics_latency (consumer, FH_M_QUEUE_WAIT);
    if (now > 0 && now < interval) /* no interval has ended yet: since start */
        return (double) wait->run.count / now;
    return interval > 0 ? (double) wait->interval.count / interval : 0.0;
}

/* The hub line. */
static void
s_table_hub (FILE *out, const fh_metrics_item_t *hub)
{
    const char *hub_name = hub->name && *hub->name ? hub->name : NULL;
    char uptime[64];
    s_human_uptime (uptime, sizeof uptime, fh_metric_value_real (&hub->values[FH_M_UPTIME]));
    fputs ("hub ", out);
    if (hub_name)
        s_table_name (out, hub_name,
                      strlen (hub_name) < S_NAME_MAX ? strlen (hub_name) : S_NAME_MAX);
    else
        fputs ("-", out);
    fprintf (out, " up %s  received %" PRId64 "  malformed %" PRId64 "  unrouted %" PRId64 "\n",
             uptime, fh_metric_value_int (&hub->values[FH_M_RECEIVED]),
             fh_metric_value_int (&hub->values[FH_M_MALFORMED]),
             fh_metric_value_int (&hub->values[FH_M_UNROUTED]));
}

/* One consumer's line, and its last error's cut to columns_width (0:
   not cut). */
static void
s_table_consumer (FILE *out, const fh_metrics_snapshot_t *snapshot,
                  const fh_metrics_snapshot_t *previous, fh_metrics_item_t *consumer, size_t width,
                  size_t columns_width)
{
    s_table_name (out, consumer->name, width);
    fprintf (out, " %-6s", fh_stats_table_state (consumer));
    int64_t backlog = fh_metric_value_int (&consumer->values[FH_M_BACKLOG]);
    double rate = s_table_rate (snapshot, previous, consumer);
    char eta[32];
    s_human_eta (eta, sizeof eta, backlog, rate);
    fprintf (out, " %9" PRId64 " %8.1f %8s", backlog, rate, eta);
    static const fh_metric_id_t columns[] = {FH_M_IN_FLIGHT,     FH_M_ENQUEUED, FH_M_COMPLETED,
                                             FH_M_FAILED,        FH_M_DROPPED,  FH_M_SPILLED,
                                             FH_M_DEAD_LETTERED, FH_M_STUCK};
    static const int widths[] = {9, 11, 11, 9, 9, 9, 7, 5};
    for (size_t c = 0; c < sizeof columns / sizeof columns[0]; c++)
        fprintf (out, " %*" PRId64, widths[c], fh_metric_value_int (&consumer->values[columns[c]]));
    char wait[32], proc[32];
    s_table_p99 (wait, sizeof wait, fh_metrics_latency (consumer, FH_M_QUEUE_WAIT));
    s_table_p99 (proc, sizeof proc, fh_metrics_latency (consumer, FH_M_PROCESSING));
    fprintf (out, " %8s %8s\n", wait, proc);
    /* publish: (ABI 1.5) a line of its own under the consumer's. */
    int64_t published = fh_metric_value_int (&consumer->values[FH_M_PUBLISHED]);
    int64_t publish_failed = fh_metric_value_int (&consumer->values[FH_M_PUBLISH_FAILED]);
    if (consumer->publish || published || publish_failed)
        fprintf (out, "  publish %s  published %" PRId64 "  failed %" PRId64 "\n",
                 consumer->publish ? consumer->publish : "-", published, publish_failed);
    if (consumer->error && *consumer->error) {
        fputs (S_ERROR_LEAD, out);
        s_put_text (out, consumer->error,
                    columns_width == 0                      ? 0
                    : columns_width > strlen (S_ERROR_LEAD) ? columns_width - strlen (S_ERROR_LEAD)
                                                            : 1);
        fputc ('\n', out);
    }
}

/* The table with rates taken since previous (NULL: over the last metrics
   interval); see fh_stats_format_table_since. */
static char *
s_table_since (const fh_metrics_snapshot_t *snapshot, const fh_metrics_snapshot_t *previous,
               size_t columns_width)
{
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream (&text, &size);
    if (!out)
        return NULL;
    s_table_hub (out, &snapshot->hub);
    size_t width = S_NAME_MIN;
    for (size_t i = 0; i < snapshot->consumer_count; i++) {
        size_t len = strlen (snapshot->consumers[i].name);
        if (len > width)
            width = len < S_NAME_MAX ? len : S_NAME_MAX;
    }
    s_table_name (out, "CONSUMER", width);
    fprintf (out, " %-6s %9s %8s %8s %9s %11s %11s %9s %9s %9s %7s %5s %8s %8s\n", "STATE",
             "BACKLOG", "RATE", "ETA", "IN_FLIGHT", "ENQUEUED", "COMPLETED", "FAILED", "DROPPED",
             "SPILLED", "DEAD", "STUCK", "WAIT_P99", "PROC_P99");
    for (size_t i = 0; i < snapshot->consumer_count; i++)
        s_table_consumer (out, snapshot, previous, &snapshot->consumers[i], width, columns_width);
    return s_finish (out, &text);
}

char *
fh_metrics_table (const fh_metrics_snapshot_t *snapshot, size_t width)
{
    return s_table_since (snapshot, NULL, width);
}

/* ---- One consumer in full ------------------------------------------------ */

static void
s_detail_value (FILE *out, const fh_metric_value_t *value)
{
    if (value->is_real)
        fprintf (out, "%.9g", value->real);
    else
        fprintf (out, "%" PRId64, value->integer);
}

static void
s_detail_latency (FILE *out, const char *name, const fh_metrics_latency_t *latency)
{
    const fh_histogram_summary_t *parts[] = {&latency->interval, &latency->run};
    static const char *const labels[] = {"last interval", "since start"};
    for (size_t i = 0; i < 2; i++) {
        const fh_histogram_summary_t *s = parts[i];
        char p50[32], p90[32], p99[32], p999[32], max[32];
        s_human_seconds (p50, sizeof p50, s->p50);
        s_human_seconds (p90, sizeof p90, s->p90);
        s_human_seconds (p99, sizeof p99, s->p99);
        s_human_seconds (p999, sizeof p999, s->p999);
        s_human_seconds (max, sizeof max, s->max);
        fprintf (out, "%-20s %-13s  count %" PRIu64, i == 0 ? name : "", labels[i], s->count);
        if (s->count > 0)
            fprintf (out, "  p50 %s  p90 %s  p99 %s  p999 %s  max %s", p50, p90, p99, p999, max);
        fputc ('\n', out);
    }
}

static void
s_detail (FILE *out, const fh_metrics_snapshot_t *snapshot, fh_metrics_item_t *consumer)
{
    fputs ("consumer             ", out);
    s_put_text (out, consumer->name, 0);
    fputs ("\nplugin               ", out);
    s_put_text (out, consumer->text ? consumer->text : "", 0);
    if (consumer->version && *consumer->version) {
        fputc (' ', out);
        s_put_text (out, consumer->version, 0);
    }
    fprintf (out, "\nstate                %s\n", fh_stats_table_state (consumer));
    fputs ("last error           ", out);
    s_put_text (out, consumer->error && *consumer->error ? consumer->error : "-", 0);
    fputc ('\n', out);
    char uptime[64];
    s_human_uptime (uptime, sizeof uptime,
                    fh_metric_value_real (&snapshot->hub.values[FH_M_UPTIME]));
    fprintf (out, "hub up               %s\n", uptime);
    for (int id = 0; id < FH_METRIC_COUNT; id++) {
        const fh_metric_t *row = &fh_metrics[id];
        if (row->scope != FH_SCOPE_CONSUMER || row->of != row->id || id == FH_M_PLUGIN_STATE
            || id == FH_M_WORKERS
            || (row->type != FH_METRIC_COUNTER && row->type != FH_METRIC_GAUGE))
            continue;
        fprintf (out, "%-20s ", row->json);
        s_detail_value (out, &consumer->values[id]);
        fputc ('\n', out);
    }
    s_detail_latency (out, "queue_wait", fh_metrics_latency (consumer, FH_M_QUEUE_WAIT));
    s_detail_latency (out, "processing", fh_metrics_latency (consumer, FH_M_PROCESSING));
    fprintf (out, "%-20s %zu\n", "workers", consumer->workers);
    for (size_t i = 0; i < consumer->workers && consumer->busy; i++)
        fprintf (out, "  worker %-11zu busy %.1f%%\n", i, consumer->busy[i] * 100.0);
    for (size_t i = 0; i < consumer->own_count; i++) /* its plugin's own (ABI 1.6) */
        fprintf (out, "plugin %-13s %" PRId64 "\n", consumer->own[i].name, consumer->own[i].value);
}

/* ---- From a JSON snapshot ------------------------------------------------ */

char *
fh_stats_format_table (const json_t *stats)
{
    return fh_stats_format_table_since (stats, NULL, 0);
}

char *
fh_stats_format_table_since (const json_t *stats, const json_t *previous, size_t width)
{
    fh_metrics_snapshot_t *now = fh_metrics_from_json (stats);
    fh_metrics_snapshot_t *before = previous ? fh_metrics_from_json (previous) : NULL;
    char *text = now && (before || !previous) ? s_table_since (now, before, width) : NULL;
    fh_metrics_snapshot_destroy (&now);
    fh_metrics_snapshot_destroy (&before);
    return text;
}

char *
fh_stats_format_consumer (const json_t *stats, const char *name, bool *found)
{
    *found = false;
    fh_metrics_snapshot_t *snapshot = fh_metrics_from_json (stats);
    if (!snapshot)
        return NULL;
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream (&text, &size);
    for (size_t i = 0; out && i < snapshot->consumer_count && !*found; i++)
        if (strcmp (snapshot->consumers[i].name, name) == 0) {
            s_detail (out, snapshot, &snapshot->consumers[i]);
            *found = true;
        }
    char *result = out ? s_finish (out, &text) : NULL;
    fh_metrics_snapshot_destroy (&snapshot);
    return result;
}
