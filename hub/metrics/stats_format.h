/*  stats_format - a STATS snapshot as text: Prometheus, collectd, a table.

    Pure functions: each takes a snapshot (the JSON object described in
    docs/stats-schema.md, as the control socket answers it) and returns a
    new string; nothing is kept between calls and no function touches a
    socket, a clock or the environment, so they are safe from any thread.
    docs/metrics.md lists every metric under its three names.

    The snapshot comes over a socket, so it is not trusted: a field that is
    missing or of the wrong type counts as 0 (a string as the empty
    string, a boolean as false; an integer and a real are both numbers), a
    consumer without a non-empty string name is left out, and an argument
    that is not an object (NULL included) gives the output of an empty
    snapshot. A valid snapshot always gives the same text. Integers are
    written as integers, reals with "%.9g" (with a '.' even if the locale
    says ',').
*/
#ifndef FH_STATS_FORMAT_H_INCLUDED
#define FH_STATS_FORMAT_H_INCLUDED

#include <jansson.h>

/* Prometheus text exposition format 0.0.4. Returns a malloc'd string or NULL.

   Every family is named fanhub_*, has one HELP and one TYPE line and all
   its samples together; a family with no sample (no consumer, no
   endpoint) is left out entirely. Per-consumer families carry the label
   consumer="NAME". Label values are escaped per the format (backslash,
   double quote, newline). The summaries fanhub_consumer_queue_wait_seconds
   and fanhub_consumer_processing_seconds give the whole-run quantiles 0.5,
   0.9, 0.99 and 0.999 (NaN while count is 0, as Prometheus' client
   libraries do), _sum and _count. NULL only when out of memory. */
char *fh_stats_format_prometheus (const json_t *stats);

/* collectd PUTVAL lines for the Exec plugin / unixsock. host: the collectd host name;
   interval: seconds (the interval= option); when_s: timestamp to write, or 0 for "N".

   One line per value, each ending in '\n':
       PUTVAL "HOST/fanhub-INSTANCE/TYPE-TYPEINSTANCE" interval=10 N:VALUE
   First the hub, under the plugin instance hub.name (or "hub" when the
   hub has no name): derive-received, derive-malformed, derive-unrouted.
   Then each consumer, under the plugin instance CONSUMER, or
   HUBNAME.CONSUMER when hub.name is a non-empty string: queue_length
   (the backlog), latency-queue_wait_p99, latency-queue_wait_mean,
   latency-processing_p99, latency-processing_mean (seconds, over the last
   metrics interval; 0 when that interval had no sample), derive-completed,
   derive-failed, derive-dropped, derive-enqueued. Derive values are
   integers: a real is truncated, one out of range counts as 0.
   In host and names, '/', '"', '\\', spaces and control characters
   become '_'; a NULL or empty host is "localhost". interval is printed
   with "%g" and left out when it is not a positive number. when_s is
   printed as whole seconds, or with milliseconds when it has a fraction;
   0 (or anything not positive) writes "N", collectd's "now".
   NULL only when out of memory. */
char *fh_stats_format_collectd (const json_t *stats, const char *host, double interval, double when_s);

/* A compact table for `fanhub stats --watch` and the demo: one line per consumer.

   First the hub line,
       hub NAME up 1m23s  received N  malformed N  unrouted N
   (NAME "-" when the hub has no name), then a header line and one line
   per consumer, in the snapshot's order, with the columns CONSUMER,
   BACKLOG, IN_FLIGHT, ENQUEUED, COMPLETED, FAILED, DROPPED, WAIT_P99 and
   PROC_P99. The two latencies are the p99 over the last metrics interval,
   in human units ("850us", "12.3ms", "1.20s"), or "-" when that interval
   had no sample. The CONSUMER column is as wide as the longest name (at
   least 8, at most 32 characters: a longer name is cut and ends in '~');
   characters that are not printable ASCII show as '?'. Every line ends in
   '\n'. NULL only when out of memory. */
char *fh_stats_format_table (const json_t *stats);

#endif
