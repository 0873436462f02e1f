/*  stats_format - a metrics snapshot as text: Prometheus, collectd (the
    table for a terminal: stats_table.h).

    Pure functions: each takes a snapshot and returns a new string;
    nothing is kept between calls and no function touches a socket, a
    clock or the environment, so they are safe from any thread. The
    fh_metrics_* functions take the C snapshot (metrics.h) the hub makes;
    the fh_stats_format_* ones a JSON snapshot (docs/stats-schema.md, as
    the control socket answers it, for `fanhub stats`), read back with
    fh_metrics_from_json first. The metrics are the registry's rows
    (metrics.h); docs/metrics.md lists each under its names.

    A JSON snapshot comes over a socket, so it is not trusted: a field that is
    missing or of the wrong type counts as 0 (a string as the empty
    string, a boolean as false; an integer and a real are both numbers), a
    consumer without a non-empty string name is left out, and an argument
    that is not an object (NULL included) gives the output of an empty
    snapshot. A valid snapshot always gives the same text. Integers are
    written as integers, reals with "%.9g", or as many more digits (up to
    17) as it takes to read back the same number (with a '.' even if the locale
    says ',').
*/
#ifndef FH_STATS_FORMAT_H_INCLUDED
#define FH_STATS_FORMAT_H_INCLUDED

#include "metrics.h"

#include <jansson.h>

char *fh_metrics_prometheus (const fh_metrics_snapshot_t *snapshot);
char *fh_metrics_collectd (const fh_metrics_snapshot_t *snapshot, const char *host, double interval,
                           double when_s);

/* text as a name inside a collectd identifier, into out (cut to size):
   '/', '"', '\\', spaces and control characters become '_'. Returns the
   length written. */
size_t fh_metrics_collectd_name (char *out, size_t size, const char *text);
/* The plugin instance (after "fanhub-") of an item: the hub's name (or
   "hub") when name is NULL; else the consumer's name, or for kind
   "endpoint" "endpoint_" and the address with each run of characters
   other than letters, digits and '.' written as one '_'; either after
   "HUBNAME." when the hub has a name. */
void fh_metrics_collectd_instance (char *out, size_t size, const char *hub_name, const char *kind,
                                   const char *name);

/* Prometheus text exposition format 0.0.4. Returns a malloc'd string or NULL.

   Every family is named fanhub_*, has one HELP and one TYPE line and all
   its samples together; a family with no sample (no consumer, no
   endpoint) is left out entirely. Per-consumer families carry the label
   consumer="NAME". Label values are escaped per the format (backslash,
   double quote, newline). The latencies (fanhub_end_to_end_seconds,
   fanhub_consumer_queue_wait_seconds, fanhub_consumer_processing_seconds)
   are histograms over the whole run: cumulative _bucket samples at the
   bounds of fh_metrics_bucket_text and +Inf, _sum and _count. The process_*
   families come last, when the snapshot has them. NULL only when out of
   memory. */
char *fh_stats_format_prometheus (const json_t *stats);

/* collectd PUTVAL lines for the Exec plugin / unixsock. host: the collectd host name;
   interval: seconds (the interval= option); when_s: timestamp to write, or 0 for "N".

   One line per value, each ending in '\n':
       PUTVAL "HOST/fanhub-INSTANCE/TYPE-TYPEINSTANCE" interval=10 N:VALUE
   Every row of the registry with a collectd type (docs/metrics.md lists
   them), in the registry's order: first the hub's rows (those of
   hub.amqp, hub.upstream and process only when the snapshot has them),
   under the plugin instance hub.name (or "hub"); then each endpoint's,
   then each consumer's, under fh_metrics_collectd_instance. Derive
   values (counters) are integers: a real is truncated, one out of range
   counts as 0; CPU seconds are written as milliseconds; other reals as
   reals. A latency gives TYPE_p99 and TYPE_mean (seconds, over the last
   metrics interval; 0 when that interval had no sample). A NULL or
   empty host is "localhost". interval is printed with "%g" and left out
   when it is not a positive number. when_s is printed as whole seconds,
   or with milliseconds when it has a fraction; 0 (or anything not
   positive) writes "N", collectd's "now". NULL only when out of memory. */
char *fh_stats_format_collectd (const json_t *stats, const char *host, double interval,
                                double when_s);

#endif
