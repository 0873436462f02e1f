/*  consumer_internal - what the files of the consumer share.

    The consumer (see consumer.h) is split by job:
      consumer.c        its life: creating and destroying it, start,
                        close, retire, pause, abandon, the accessors
      consumer_plugin.c what its plugin says and asks through the host
                        table (ABI 1.3, 1.5): state, counters, settings,
                        publish, window, ticket starts
      consumer_figures.c
                        what is read of it: counters summed over the
                        workers, histograms, handled; the stuck check
      consumer_offer.c  the enqueuer's side (its thread only): the shard,
                        the offer, overflow, drops, backlog and warn_at,
                        the spill offer, the wake-up
      consumer_hold.c   what it holds and the one way it lets go: the
                        bytes held in memory, the let-go (outcome, spool
                        record, release) on any thread
      consumer_attempt.c one attempt and its verdict (done, again at a
                        time, or parked on a ticket), the last word on a
                        message (done), tickets on demand, PENDING
                        completions, open tickets: shared by the single
                        worker and the pool, which only sleep or requeue
      consumer_run.c    the single worker's loop
      consumer_pool.c   pool mode: the dispatcher that feeds the per-key
                        scheduler, and the pool workers
      storage/consumer_spill.c
                        the state directory (dead letters, spool), spill:
                        the spool writer's callbacks, the deferred
                        completions, reading the spool back, and spilling
                        the queue at shutdown
    Only these files include this header; the rest of the hub uses
    consumer.h.

    Each worker keeps its own counters and histograms, so every figure has
    exactly one writer; a snapshot sums the workers. A worker's counters
    change under its sequence lock, so each worker's (dequeued, completed,
    failed) triple is read consistent, and so is their sum.

    Counters live in tallies, each an fh_consumer_counts_t (consumer_counts.h)
    written by one thread or by atomic adds: a worker's `tally`, the
    enqueuer's `offered`, the dispatcher's `pool_tally`, the spool's
    `spill_tally` and the consumer's `tally` for any thread. A snapshot
    (consumer_figures.c) adds each in by the registry's rows, so a new
    counter needs no line there.
*/
#ifndef FH_CONSUMER_INTERNAL_H_INCLUDED
#define FH_CONSUMER_INTERNAL_H_INCLUDED

#include "consumer.h"

#include "atomics.h"
#include "clock.h"
#include "crash.h"
#include "crashlog.h"
#include "deadletter.h"
#include "emit.h"
#include "host_ctx.h"
#include "keyed.h"
#include "log.h"
#include "order_key.h"
#include "pending.h"
#include "plugin.h"
#include "publish.h"
#include "queue.h"
#include "retry.h"
#include "shard.h"
#include "spool.h"
#include "spool_writer.h"
#include "thread.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* How often a worker waiting for late completions looks at `abort`. */
#define PENDING_POLL_NS (200 * INT64_C (1000000))

typedef struct {
    /* Written by the worker's thread; its counters (dequeued, completed,
       failed, retried, dead_lettered: fh_count_bump) under `progress`. */
    alignas (FH_CACHE_LINE) atomic_uint progress; /* odd while changing */
    fh_consumer_counts_t tally;                   /* read by the rows */
    atomic_int_fast64_t consume_started_ns;       /* 0 when not inside consume */
    atomic_uint_fast64_t consume_seq;             /* the message inside consume */
    fh_histogram_t queue_wait;
    fh_histogram_t processing;
    fh_handled_t handled;
    uint64_t rng;
    fh_ratelimit_t failure_log;
    fh_ratelimit_t retry_log;      /* RETRY answers that gave a reason */
    fh_ratelimit_t deadletter_log; /* dead letters that could not be written */
    char reason[256];              /* the plugin's set_reason with the last answer, or "" */
    bool quarantined;              /* the last answer was the hub's: the message
                                      crashed the hub max_crashes times */
    /* Set at start; read by anyone. */
    alignas (FH_CACHE_LINE) fh_consumer_t *consumer;
    fh_thread_t thread;
    /* Owned by the thread that checks for stuck calls. */
    bool stuck;
    /* Pool mode without order_by: how many messages this worker takes
       from the scheduler per lock (1 until its attempts prove quick). */
    unsigned batch;
} s_worker_t;

struct fh_consumer {
    /* Written by the enqueuer thread: its counters (enqueued, dropped,
       evicted: drop-oldest's, backlog_max) with fh_count_bump. */
    alignas (FH_CACHE_LINE) fh_consumer_counts_t offered;
    bool warn_armed;       /* the next crossing of warn_at is logged */
    atomic_size_t warn_at; /* a reload may change it */
    uint64_t max_bytes;    /* queue.max_bytes, 0 = none */
    /* Payload bytes in the queue (and a pool's scheduler, not started):
       added by the enqueuer, taken off by whoever takes the message. */
    atomic_uint_fast64_t held_bytes;

    alignas (FH_CACHE_LINE) atomic_bool abort; /* give up waiting: forced exit */
    atomic_uint done_workers;
    atomic_uint stuck_workers; /* written by the stuck checker */
    char *name;
    atomic_size_t index;  /* in the configuration (a reload may move it) */
    atomic_bool retiring; /* closed by a reload: consume everything, spool too */
    /* `fanhub pause`: the worker (or the dispatcher) takes nothing from
       the queue or the spool until resumed, closed or retired; it waits
       on pause_cond (fh_cons_pause_wait). */
    atomic_bool paused;
    pthread_mutex_t pause_lock;
    pthread_cond_t pause_cond;
    fh_queue_t *queue;
    fh_plugin_t *plugin;
    const fanhub_consumer_desc_t *desc;
    void (*reopen) (void *state);     /* the plugin's (ABI 1.3), or NULL */
    atomic_uint_fast64_t reopen_seen; /* the last reopen request answered */
    pthread_mutex_t reopen_lock;      /* held while the plugin reopens */
    void *state;
    bool initialized;  /* init succeeded: fini is owed */
    fanhub_ctx_t *ctx; /* the plugin keeps it: outlives the consumer (host_ctx.h) */
    fh_retry_config_t retry;
    int64_t consume_timeout_ns;
    fh_clock_ops_t clock;
    s_worker_t *workers;
    size_t worker_count;
    int overflow; /* fh_overflow_t */

    /* With a state_dir: failed messages are kept here... */
    fh_deadletter_t *dead_letters;
    /* ...and the disk spool: read first at start, and where spill goes.
       While `spooling`, every new message goes to the spool (strict FIFO
       with the memory queue); the reader turns it off, under spill_lock,
       once the spool and the queue are both empty. */
    fh_spool_t *spool;
    /* The spool's appender: spilled messages are handed to it under
       spill_lock (enqueuer; the worker at shutdown) and written, with
       their fsyncs, on its own thread, so the bus thread never waits for
       the disk. Its hand-off counts as part of the spool: see
       fh_cons_spool_unread. */
    fh_spool_writer_t *spool_writer;
    atomic_bool spill_keeping; /* the hand-off holds the memory queue kept
                                   at shutdown (not deferred) */
    pthread_mutex_t spill_lock;
    atomic_bool spooling;
    atomic_bool state_open;     /* spool and dead letters opened (release) */
    bool spill_at_shutdown;     /* overflow: spill: also when a reload retires it,
                               its spool is then its successor's */
    atomic_bool inherits_spool; /* a reload's successor that takes over its
                                   predecessor's spool: nothing before */
    /* That predecessor, under this one's spill_lock, until it hands its
       spool over: what is offered before the spool is open goes onto
       the end of the predecessor's spool (fh_consumer_offer). */
    struct fh_consumer *predecessor;
    uint64_t inherited_waiting; /* records found at open, counted at start */
    bool write_ahead;           /* queue.write_ahead: always spooling */
    bool wants_write_ahead;     /* ... once its spool is open */
    uint64_t spool_corrupt_at_open;
    uint64_t spool_lost_seen; /* fh_spool_lost already in spill_tally
                                 (or found at open: never enqueued); the
                                 reading thread's */
    /* The messages that crashed the hub (with a state_dir), read at open
       and appended to by the crash handler through crash_site. */
    fh_crashlog_t *crashlog;
    fh_crash_site_t crash_site;
    uint32_t max_crashes;
    bool crash_suspects; /* some recorded message reached max_crashes */

    /* Pool mode (workers > 1, or coalescing): a dispatcher thread moves
       messages from the queue into the per-key scheduler; the workers take
       them from there. Everything under pool_lock. */
    bool pool;
    fh_keyed_t *keyed;
    fh_order_key_t *order_key; /* NULL: every message is its own key */
    fh_shard_t *shard;         /* shard:, read by the enqueuer; or NULL */
    pthread_mutex_t pool_lock;
    pthread_cond_t pool_work;  /* CLOCK_MONOTONIC: workers wait here */
    pthread_cond_t pool_room;  /* CLOCK_MONOTONIC: the dispatcher waits here */
    atomic_uint pool_sleepers; /* threads waiting on pool_work */
    /* What the scheduler may hold (not started): queue.capacity with
       order_by, a window of a few messages a worker without. */
    uint64_t pool_limit;
    bool dispatcher_room;   /* it waits on pool_room for the scheduler to empty */
    bool dispatcher_done;   /* the queue is closed and drained */
    bool dispatcher_window; /* retiring, it waits for the spool window */
    bool pool_worked;       /* since the last idle call */
    fh_thread_t dispatcher;
    atomic_uint_fast64_t pool_started; /* messages taken for the first time */
    /* Written by the dispatcher: coalesced, key_fallback (fh_count_bump). */
    fh_consumer_counts_t pool_tally;
    fh_handled_t dispatcher_handled;
    atomic_uint_fast64_t pool_handed; /* given to the scheduler (dispatcher) */

    /* Spilled messages of this run, in spool order, whose completion
       waits for their copy read back (under spill_lock, which the spiller
       holds anyway: the spiller appends, the reader takes, the writer
       lets one it failed to store go). A ring. */
    struct s_deferred {
        uint64_t seq;
        fh_deferral_t *deferral;
    } * deferred;
    size_t deferred_head, deferred_count, deferred_cap;

    /* Messages the plugin answered FANHUB_PENDING (ABI 1.1). */
    fh_pending_t *pending;
    fh_ratelimit_t complete_log;
    fh_ratelimit_t expire_log; /* the stuck checker's */
    /* How long a worker left with nothing but open tickets waits for them
       (shutdown_timeout), and, once closed, the latest it waits (0: not
       closed): see fh_cons_ticket_deadline. */
    int64_t ticket_grace_ns;
    atomic_int_fast64_t close_deadline_ns;
    int64_t pool_drained_ns; /* pool_lock: when only tickets were left */
    /* Records read from the spool and not yet passed by its cursor, at
       most: what a restart can deliver again (plus cursor_records). */
    uint64_t spool_window;

    /* What the plugin tells of itself (ABI 1.3, consumer_plugin.c). */
    atomic_int plugin_state; /* FANHUB_STATE_* */
    /* publish: (ABI 1.5): its publisher, or NULL without one; publishes
       refused for want of one count in the tally's publish_failed. */
    fh_publisher_t *publisher;
    pthread_mutex_t error_lock; /* guards last_error */
    char last_error[256];
    int64_t max_pending;

    /* Counters any thread adds to (fh_count_add): tickets_expired,
       completions_late, tickets_abandoned (never done: the wait ran out),
       the plugin's restarts and skipped, publish_failed for want of a
       publisher; enqueued, what a reload's successor took over in its
       predecessor's spool (fh_consumer_take_inherited). */
    fh_consumer_counts_t tally;

    /* spilled, written by the spool writer's thread (s_spill_written,
       fh_count_bump); dropped and evicted, messages accepted for the spool
       then lost (not written: full, an error; or not read back: no
       memory), by any thread (fh_cons_spill_lost). */
    alignas (FH_CACHE_LINE) fh_consumer_counts_t spill_tally;
    fh_handled_t spill_handled;
    fh_ratelimit_t spill_log;
};

/* The sequence lock around a worker's counters. */
static inline void
fh_cons_progress_begin (s_worker_t *worker)
{
    unsigned v = atomic_load_explicit (&worker->progress, memory_order_relaxed);
    atomic_store_explicit (&worker->progress, v + 1, memory_order_relaxed);
    atomic_thread_fence (memory_order_release);
}

static inline void
fh_cons_progress_end (s_worker_t *worker)
{
    unsigned v = atomic_load_explicit (&worker->progress, memory_order_relaxed);
    atomic_store_explicit (&worker->progress, v + 1, memory_order_release);
}

/* n messages accepted for the spool were lost after all (any thread):
   like evictions, they count in dropped and evicted. */
static inline void
fh_cons_spill_lost (fh_consumer_t *self, uint64_t n)
{
    fh_count_add (&self->spill_tally.dropped, n);
    fh_count_add (&self->spill_tally.evicted, n);
}

/* consumer_hold.c */

/* Payload bytes of msg (what held_bytes counts). */
static inline uint64_t
fh_cons_msg_bytes (const fh_msg_t *msg)
{
    return msg->bytes;
}
/* Payload bytes held in memory by every consumer's queue (and a pool's
   scheduler, until started), and memory.max_bytes (0: no cap). The
   helpers below are inline: the offer and every start pass here. */
extern atomic_uint_fast64_t fh_cons_memory_held;
extern atomic_uint_fast64_t fh_cons_memory_max;
/* bytes came into this consumer's memory (queued; a pool's spool read)
   or left it (popped, a pool's started, evicted). */
static inline void
fh_cons_held_more (fh_consumer_t *self, uint64_t bytes)
{
    atomic_fetch_add_explicit (&self->held_bytes, bytes, memory_order_relaxed);
    atomic_fetch_add_explicit (&fh_cons_memory_held, bytes, memory_order_relaxed);
}
static inline void
fh_cons_held_less (fh_consumer_t *self, uint64_t bytes)
{
    atomic_fetch_sub_explicit (&self->held_bytes, bytes, memory_order_relaxed);
    atomic_fetch_sub_explicit (&fh_cons_memory_held, bytes, memory_order_relaxed);
}
/* True when holding `bytes` more would pass queue.max_bytes or
   memory.max_bytes. A consumer holding nothing takes one message of any
   size: nothing it could wait for would make room. */
static inline bool
fh_cons_over_bytes (fh_consumer_t *self, uint64_t bytes)
{
    uint64_t held = atomic_load_explicit (&self->held_bytes, memory_order_relaxed);
    if (held == 0)
        return false;
    if (self->max_bytes && held + bytes > self->max_bytes)
        return true;
    uint64_t max = atomic_load_explicit (&fh_cons_memory_max, memory_order_relaxed);
    return max && atomic_load_explicit (&fh_cons_memory_held, memory_order_relaxed) + bytes > max;
}

/* How a message this consumer holds leaves it (fh_cons_let_go); the
   counters of each way are its caller's. */
typedef enum {
    FH_GONE_COMPLETED,    /* done: consume answered OK */
    FH_GONE_FAILED,       /* done: failed (dead-lettered or not), or stopped */
    FH_GONE_ABANDONED,    /* its ticket given up: not done, a spooled one comes back */
    FH_GONE_COALESCED,    /* replaced in the scheduler by a newer one of its key */
    FH_GONE_EVICTED,      /* taken off the queue's head (drop-oldest), or lost
                             in a reload's fold: still counted as held */
    FH_GONE_WRITTEN,      /* the spool writer's share, written: its copy read
                             back speaks for it */
    FH_GONE_KEPT,         /* the spool writer's share, kept at shutdown: spilled */
    FH_GONE_SPILL_FAILED, /* the spool writer's share, not written: dropped */
    FH_GONE_UNWRITTEN,    /* a copy never written: its original, dropped, tells */
    FH_GONE_HANDED_OVER,  /* a copy not read back: the spool is a successor's */
    FH_GONE_UNREAD,       /* a copy not read back: lost in the spool */
    FH_GONE_UNHANDLED,    /* left at teardown: not done, nothing told */
} fh_gone_t;

/* An outcome without a release: a message taken at the offer (PENDING),
   or refused there (DROPPED; the enqueuer releases that share). NONE or
   no waiter: nothing. The let-go tells its outcomes through it. */
static inline void
fh_cons_tell (fh_consumer_t *self, fh_emit_t *emit, fh_outcome_t outcome)
{
    if (emit && outcome != FH_OUTCOME_NONE)
        fh_emit_set_outcome (emit, self->name, outcome);
}
/* The emit waiter of msg: its own, or its original's when it is a copy
   read back from the spool. A copy's deferral is set before anyone else
   sees the copy; an original's is the enqueuer's to write, not read here. */
static inline fh_emit_t *
fh_cons_emit_of (const fh_msg_t *msg)
{
    return msg->from_spool && msg->deferral ? msg->deferral->emit : msg->emit;
}
/* What each way of leaving costs: the outcome told to the emit waiter
   (NONE: nothing to tell), whether its bytes were still counted as held,
   whether a copy read back lets the spool's cursor pass its record.
   Switches, so that a constant way folds at its call site. */
static inline fh_outcome_t
fh_cons_gone_outcome (fh_gone_t way)
{
    switch (way) {
    case FH_GONE_COMPLETED: return FH_OUTCOME_COMPLETED;
    case FH_GONE_FAILED: return FH_OUTCOME_FAILED;
    case FH_GONE_COALESCED: return FH_OUTCOME_COALESCED;
    case FH_GONE_KEPT:
    case FH_GONE_HANDED_OVER: return FH_OUTCOME_SPILLED;
    case FH_GONE_ABANDONED:
    case FH_GONE_EVICTED:
    case FH_GONE_SPILL_FAILED:
    case FH_GONE_UNREAD: return FH_OUTCOME_DROPPED;
    case FH_GONE_WRITTEN:
    case FH_GONE_UNWRITTEN:
    case FH_GONE_UNHANDLED: break;
    }
    return FH_OUTCOME_NONE;
}
static inline bool
fh_cons_gone_held (fh_gone_t way)
{
    return way == FH_GONE_COALESCED || way == FH_GONE_EVICTED;
}
static inline bool
fh_cons_gone_record_done (fh_gone_t way)
{
    return way == FH_GONE_COMPLETED || way == FH_GONE_FAILED || way == FH_GONE_COALESCED;
}
/* A spool record done: the cursor may pass it, the reader is kicked (it
   may wait for the window). The let-go's, and a record that could not
   be read back into memory. */
void fh_cons_record_done (fh_consumer_t *self, uint64_t mark);

/* The one way a message this consumer holds leaves it, on any thread:
   its bytes no longer held (when the way says they still were), its
   outcome told to its emit waiter, its spool record done (a copy read
   back that is done or replaced: the reader is kicked), and its share
   released, the last counted in handled (may be NULL) at now_ns (0:
   read the clock). Inline: every message passes here (the K=1 guard
   counted 37 instructions a message more when it was a call). */
static inline void
fh_cons_let_go (fh_consumer_t *self, fh_msg_t *msg, fh_gone_t way, fh_handled_t *handled,
                int64_t now_ns)
{
    if (fh_cons_gone_held (way))
        fh_cons_held_less (self, fh_cons_msg_bytes (msg));
    fh_cons_tell (self, fh_cons_emit_of (msg), fh_cons_gone_outcome (way));
    if (fh_cons_gone_record_done (way) && msg->spool_mark && self->spool)
        fh_cons_record_done (self, msg->spool_mark);
    fh_msg_release_at (msg, handled, now_ns);
}
/* The same for the copy of a spilled message that will not be read back
   in this run (unwritten, handed over, unread, or left at teardown): its outcome
   told, the original's deferred completion released. */
void fh_cons_let_go_copy (fh_consumer_t *self, fh_deferral_t *deferral, fh_gone_t way,
                          fh_handled_t *handled);

/* Pool mode: every thread waiting on pool_work looks again. */
static inline void
fh_cons_pool_wake_all (fh_consumer_t *self)
{
    pthread_mutex_lock (&self->pool_lock);
    pthread_cond_broadcast (&self->pool_work);
    pthread_mutex_unlock (&self->pool_lock);
}

/* Pool mode: a ticket completed (the pending table's wake-up): wakes the
   pool's threads if one sleeps; else takes no lock. The completion's
   count is published (seq_cst) before this look: with no sleeper
   counted, whoever goes to sleep next sees it (the pool's wait). */
static inline void
fh_cons_pool_completed (fh_consumer_t *self)
{
    atomic_thread_fence (memory_order_seq_cst);
    if (atomic_load (&self->pool_sleepers))
        fh_cons_pool_wake_all (self);
}

/* The consumer's clock now. CLOCK_MONOTONIC, not a coarse clock (a
   fifth of the cost): this reading ends one consume and starts the next,
   and feeds the processing, queue-wait and end-to-end histograms, whose
   buckets go down to the microsecond; a coarse clock moves a few times a
   millisecond at best. The real clock is read here directly, a test's
   through its hook. */
static inline int64_t
fh_cons_now (const fh_consumer_t *self)
{
    if (self->clock.now_ns == fh_clock_real.now_ns)
        return fh_clock_mono_ns ();
    return self->clock.now_ns (self->clock.arg);
}

/* A worker starts msg (now): counted in dequeued, its queue wait
   recorded. Retries are not starts. */
static inline void
fh_cons_dequeued (s_worker_t *worker, const fh_msg_t *msg, int64_t now)
{
    fh_cons_progress_begin (worker);
    fh_count_bump (&worker->tally.dequeued);
    fh_cons_progress_end (worker);
    fh_histogram_record (&worker->queue_wait, now - msg->received_ns);
}

/* consumer_attempt.c */

/* What an attempt made of a message. */
typedef enum {
    FH_ATTEMPT_DONE,   /* finished: fh_cons_done has had its say */
    FH_ATTEMPT_AGAIN,  /* RETRY: the next attempt is due at due_ns */
    FH_ATTEMPT_PARKED, /* PENDING: its ticket is open; the plugin's
                          complete brings it back (fh_cons_completion) */
} fh_verdict_t;

/* One message between its attempts: what its worker keeps. */
typedef struct {
    fh_msg_t *msg;
    void *slot;        /* the pool's scheduler slot, or NULL */
    uint32_t attempts; /* consume calls so far */
    int64_t first_ns;  /* start of the first attempt */
    int64_t end_ns;    /* end of the last one (its completion taken) */
    int64_t due_ns;    /* FH_ATTEMPT_AGAIN: the next attempt's time */
} fh_attempt_t;

/* Attempt number at->attempts + 1 of at->msg, started at `start`: the
   plugin's consume, timed and visible to the stuck checker, and its
   verdict. A ticket is reserved only if the plugin asks for one
   (msg_ticket); in a pool the worker has claimed its place in the window
   first (fh_pending_claim, under pool_lock). */
fh_verdict_t fh_cons_attempt (s_worker_t *worker, fh_attempt_t *at, int64_t start);
/* Takes the next PENDING answer that completed into *at and gives its
   verdict, as consume's answer would have: false when none is left
   (another worker may have taken it). at->end_ns is the clock now; the
   answer's processing time is recorded. */
bool fh_cons_completion (s_worker_t *worker, fh_attempt_t *at, fh_verdict_t *verdict);
/* A message due again that its worker will not try again (stopped while
   waiting out the backoff): done, failed with that reason. */
void fh_cons_stopped (s_worker_t *worker, fh_attempt_t *at);
/* The pending table's wake-up: a completion came. */
void fh_cons_pending_wake (void *arg);
/* Reopen requests so far (fh_consumer_reopen_all). */
extern atomic_uint_fast64_t fh_cons_reopen_requests;
/* The plugin's reopen for request `want`, once for all the workers. */
void fh_cons_reopen (fh_consumer_t *self, uint64_t want);
/* On a consumer's thread, before consume and idle: the plugin's reopen,
   once per request (fh_consumer_reopen_all). Inline: before every
   consume, two loads. */
static inline void
fh_cons_maybe_reopen (fh_consumer_t *self)
{
    uint64_t want = atomic_load_explicit (&fh_cons_reopen_requests, memory_order_acquire);
    if (atomic_load_explicit (&self->reopen_seen, memory_order_acquire) != want)
        fh_cons_reopen (self, want);
}
/* Every reopen request so far counts as answered (init has just opened
   afresh). */
void fh_cons_reopen_answered (fh_consumer_t *self);
/* The plugin's idle, after a reopen that is due, named if it crashes. */
void fh_cons_idle (fh_consumer_t *self);
/* The consumer's last word on a message: counted, dead-lettered when it
   failed, logged, its waiter told, its spool record done, released. */
void fh_cons_done (s_worker_t *worker, fh_msg_t *msg, fanhub_result_t result, const char *why,
                   uint32_t attempts, int64_t first_ns, int64_t last_ns);
/* When a worker left with nothing but open tickets since drained_ns
   (CLOCK_MONOTONIC) stops waiting for them. */
int64_t fh_cons_ticket_deadline (fh_consumer_t *self, int64_t drained_ns);
/* Gives up the open tickets: their messages are not done (a spooled one
   is delivered again from the spool), counted in tickets_abandoned and
   logged. A pool's caller holds pool_lock. */
void fh_cons_abandon_tickets (fh_consumer_t *self);
/* consumer_run.c */

/* The thread of the one worker of a consumer that is not a pool. */
void *fh_cons_worker_thread (void *arg);
/* Worker or dispatcher: true while paused (and neither closed nor
   retiring), after waiting at most 100 ms for a resume; the caller then
   looks at its completions and asks again. False: take messages. */
bool fh_cons_pause_wait (fh_consumer_t *self);

/* consumer_pool.c */

/* Pool mode: the dispatcher's thread, and each pool worker's. */
void *fh_cons_dispatcher_thread (void *arg);
/* Pool mode: what the scheduler may hold, not started (pool_limit). */
uint64_t fh_cons_pool_limit (const fh_consumer_t *self);
void *fh_cons_pool_worker_thread (void *arg);

/* storage/consumer_spill.c */

/* True while the spool may not be read further: spool_window records
   read are not yet passed by its cursor (one of them is not done). */
bool fh_cons_spool_window_full (fh_consumer_t *self);
/* The next message to consume from the spool, or NULL (see there). */
fh_msg_t *fh_cons_spool_next (fh_consumer_t *self);
/* Records in the spool not yet read, the writer's hand-off included. */
uint64_t fh_cons_spool_unread (fh_consumer_t *self);
/* At shutdown with overflow: spill, the memory queue onto the spool. */
void fh_cons_spill_queue_at_shutdown (fh_consumer_t *self);
/* A message read back from the spool that crashed the hub max_crashes
   times: true, with the worker's reason set and the message logged; it
   goes to the dead letters instead of to the plugin. */
bool fh_cons_quarantine (s_worker_t *worker, const fh_msg_t *msg);

#endif
