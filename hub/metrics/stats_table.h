/*  stats_table - a metrics snapshot for a person at a terminal: the table
    of `fanhub stats --format table` and `--watch`, and one consumer in
    full (`fanhub stats --consumer NAME`).

    Pure functions, as stats_format.h's: each takes a snapshot and returns
    a new string (NULL only when out of memory); nothing reads the
    terminal or the environment: the caller passes the terminal's width.
    A JSON snapshot is read with fh_metrics_from_json, so it is as
    untrusted as there (stats_format.h). Text that came from outside (a
    consumer's name, a plugin's last error) is made safe to print: control
    characters, C1 controls and bytes that are not UTF-8 show as '?'.
*/
#ifndef FH_STATS_TABLE_H_INCLUDED
#define FH_STATS_TABLE_H_INCLUDED

#include "metrics.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* A consumer's state in a word: "halted" or "down" when its plugin says
   so (the state row: 2, 1), else "stuck" while a consume runs longer
   than consume_timeout (the stuck row above 0), else "up"; "paused"
   (3) after `fanhub pause`. A plugin
   state the table does not know shows as "?". */
const char *fh_stats_table_state (const fh_metrics_item_t *consumer);

/* The table, one line per consumer.

   First the hub line,
       hub NAME up 1m23s  received N  malformed N  unrouted N
   (NAME "-" when the hub has no name), then a header line and one line
   per consumer, in the snapshot's order, with the columns CONSUMER,
   STATE (fh_stats_table_state), BACKLOG, RATE, ETA, IN_FLIGHT, ENQUEUED,
   COMPLETED, FAILED, DROPPED, SPILLED, DEAD (dead_lettered), STUCK,
   WAIT_P99 and PROC_P99. A consumer whose plugin reported an error has a
   second line under its own, "  last error: TEXT", cut to width
   characters (at a UTF-8 character, the last shown one replaced by '~';
   width 0: not cut). RATE is the messages per second taken off the queue
   (dequeued) over the last metrics interval (its queue_wait samples;
   since start while the first interval lasts), "%.1f"; ETA the time to
   drain the backlog at that rate if nothing more came ("45s", "12m05s",
   "3h05m", "2d04h"; "-" with no backlog, "never" at a rate of 0). The two
   latencies are the p99 over the last metrics interval, in human units
   ("850us", "12.3ms", "1.20s"), or "-" when that interval had no sample.
   The CONSUMER column is as wide as the longest name (at least 8, at
   most 32 characters: a longer name is cut and ends in '~');
   characters that are not printable ASCII show as '?'. Every line ends
   in '\n'. */
char *fh_metrics_table (const fh_metrics_snapshot_t *snapshot, size_t width);
char *fh_stats_format_table (const json_t *stats);
/* The same, with RATE from the difference of dequeued between previous
   (an earlier snapshot of the same hub, or NULL) and stats over their
   uptimes, for each consumer previous has with a lower count and an
   earlier uptime; the others as fh_stats_format_table; the last error
   lines cut to width (0: not cut). */
char *fh_stats_format_table_since (const json_t *stats, const json_t *previous, size_t width);

/* The consumer called name, in full: its plugin, state and last error
   (whole), every counter and gauge of the registry's consumer rows (by
   their JSON names), both latencies (the last interval's and the whole
   run's count, p50, p90, p99, p999 and max) and its workers' share of
   time inside consume; lines of "KEY  VALUE". *found is false (and the
   text empty) when the snapshot has no such consumer. */
char *fh_stats_format_consumer (const json_t *stats, const char *name, bool *found);

#endif
