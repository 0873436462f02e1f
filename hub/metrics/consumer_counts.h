/*  consumer_counts - a consumer's figures as one plain struct.

    fh_consumer_counts_t is what a snapshot reads of a consumer:
    fh_consumer_counts (consumer.c) fills it for one instance,
    fh_lineage_counts (lineage.c) for a named consumer over its instances.
    Each field that STATS shows has a row in the registry (metrics_rows.h,
    COUNTS) carrying its offset and how it sums (metrics.h,
    fh_metric_sum_t); the snapshot (metrics/stats.c) and the sums over a
    consumer's workers and a lineage's instances
    (fh_metrics_counts_add) walk those rows, never the fields by name.

    A counter is three edits: its field here, its row in metrics_rows.h, its
    line in docs/metrics.md; and where it is counted, in one of the
    consumer's tallies, each of this type (consumer_internal.h): with
    fh_count_add on the consumer's `tally` (any thread), with fh_count_bump
    on the one of its single writer (a worker's `tally`, inside the
    worker's sequence lock for figures read together; the enqueuer's
    `offered`; the dispatcher's `pool_tally`; the spool writer's
    `spill_tally`). Every snapshot adds each tally in by the rows.
*/
#ifndef FH_CONSUMER_COUNTS_H_INCLUDED
#define FH_CONSUMER_COUNTS_H_INCLUDED

#include <stdint.h>

typedef struct {
    uint64_t enqueued;      /* accepted into the queue */
    uint64_t dropped;       /* lost before the queue: queue full, no memory */
    uint64_t dequeued;      /* taken from the queue (consume started) */
    uint64_t completed;     /* consume answered FANHUB_OK */
    uint64_t failed;        /* finished unsuccessfully: FAIL, or RETRY until the
                           attempts ran out (dead_lettered counts those stored) */
    uint64_t retried;       /* consume calls after a RETRY answer */
    uint64_t dead_lettered; /* failed messages written to the dead-letter store */
    uint64_t in_flight;     /* dequeued - completed - failed - tickets_abandoned:
                           inside consume, or PENDING */
    uint64_t backlog;       /* enqueued - dequeued - evicted: accepted, not yet
                           started (spool included) */
    uint64_t backlog_max;   /* the highest backlog since start */
    uint64_t capacity;      /* queue.capacity */
    uint64_t stuck;         /* workers inside a consume older than consume_timeout */
    uint64_t workers;
    /* Pool mode (workers > 1 or coalesce); 0 otherwise. */
    uint64_t coalesced;           /* queued messages replaced by a newer one of their key */
    uint64_t key_fallback;        /* messages whose order_by key could not be read */
    uint64_t keys_active;         /* keys with messages queued, running or retrying */
    uint64_t key_backlog_max;     /* the most messages one key ever had queued */
    uint64_t evicted;             /* accepted, then dropped (also in dropped):
                           drop-oldest's queued messages dropped for newer
                           ones; spilled messages the spool could not store */
    uint64_t spilled;             /* written to the disk spool */
    uint64_t spool_bytes;         /* on disk, not yet consumed */
    uint64_t spool_messages;      /* written to the spool, not yet read back */
    uint64_t spool_corrupt;       /* damaged spool records skipped */
    uint64_t spool_cursor_errors; /* spool cursor writes that failed */
    uint64_t spool_lost;          /* spooled records lost (missing segments...) */
    uint64_t spool_fsyncs;        /* fdatasync calls on spool segments */
    uint64_t spool_handoff;       /* spilled, handed to the spool's writer, not
                               yet written (a crash loses them) */
    /* Told by the plugin (ABI 1.3): */
    uint64_t restarts;          /* its worker processes started again */
    uint64_t skipped;           /* messages done without processing */
    uint64_t published;         /* host->publish calls accepted (publish.h) */
    uint64_t publish_failed;    /* host->publish calls refused */
    uint64_t plugin_state;      /* FANHUB_STATE_*: 0 up, 1 down, 2 halted; or
                                   FH_CONSUMER_PAUSED, whatever the plugin says */
    uint64_t tickets_expired;   /* PENDING past consume_timeout: the attempt failed */
    uint64_t completions_late;  /* complete of a void ticket: ignored */
    uint64_t tickets_abandoned; /* PENDING when the wait at a reload or stop
                                   ran out: never done */
    uint64_t queue_bytes;       /* payload held in memory, not yet started (max_bytes) */
    /* failed messages the dead-letter store could not keep (a full disk) */
    uint64_t dead_letter_errors;
} fh_consumer_counts_t;

/* Adds n to a counter of a tally: an atomic add, so that any thread may
   count; returns the count before. Release, so that a reader that reads
   the count (fh_count_read, acquire) sees what its thread counted before
   it. */
static inline uint64_t
fh_count_add (uint64_t *counter, uint64_t n)
{
    return __atomic_fetch_add (counter, n, __ATOMIC_RELEASE);
}

/* Adds one to a counter of a tally that has a single writing thread (a
   worker's, the enqueuer's): a plain load and store, no locked add, as
   fh_bump (atomics.h). */
static inline void
fh_count_bump (uint64_t *counter)
{
    __atomic_store_n (counter, __atomic_load_n (counter, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
}

/* Sets a counter of a tally (before anyone counts in it, or by its one
   writer). */
static inline void
fh_count_set (uint64_t *counter, uint64_t value)
{
    __atomic_store_n (counter, value, __ATOMIC_RELEASE);
}

/* A counter of a tally as it is now. */
static inline uint64_t
fh_count_read (const uint64_t *counter)
{
    return __atomic_load_n (counter, __ATOMIC_ACQUIRE);
}

/* Raises a high-water mark of a tally that two threads may raise (its
   writer, and a reader that saw a higher value first). */
static inline void
fh_count_raise (uint64_t *max, uint64_t value)
{
    uint64_t seen = __atomic_load_n (max, __ATOMIC_RELAXED);
    while (
        value > seen
        && !__atomic_compare_exchange_n (max, &seen, value, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        ;
}

#endif
