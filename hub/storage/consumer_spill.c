/*  consumer_spill - the state directory and spill: the spool of a consumer.
    See consumer_internal.h.

    Opening the dead letters and the spool; the spool writer's callbacks;
    the deferred completions of spilled messages (deferred by the spill
    offer, consumer_offer.c); reading the spool back; spilling the memory
    queue at shutdown.
*/
#include "consumer_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static fh_deferral_t *s_deferral_of (fh_consumer_t *self, uint64_t seq);
static void s_spill_describe (void *arg, void *item, fh_spool_entry_t *entry);
static void s_spill_written (void *arg, void *item, int rc, int error);
static void s_spill_wrote (void *arg);

/* The crash record of the consumer's state directory dir (crashlog.h):
   what it says is logged; the crash handler appends to it from now on.
   With nothing spooled no recorded message can come back: emptied. */
static int
s_open_crashlog (fh_consumer_t *self, const char *dir, char *err, size_t errlen)
{
    char why[1024];
    bool keep = fh_spool_records (self->spool) > 0;
    self->crashlog = fh_crashlog_open (dir, keep, why, sizeof why);
    if (!self->crashlog) {
        snprintf (err, errlen, "consumer '%s': crash record: %s", self->name, why);
        return -1;
    }
    /* A few lines at most, however long the record: the first messages,
       then one line for the rest. */
    size_t count = fh_crashlog_messages (self->crashlog), shown = count <= 3 ? count : 2;
    size_t at_max = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t seq;
        uint32_t crashes;
        int sig;
        fh_crashlog_at (self->crashlog, i, &seq, &crashes, &sig);
        bool out = crashes >= self->max_crashes;
        self->crash_suspects |= out;
        at_max += out;
        if (i >= shown)
            continue;
        fh_warning ("consumer '%s': message %llu crashed the hub %u time%s, the last by signal "
                    "%d (%s); %s max_crashes (%u): if still in the spool, it %s",
                    self->name, (unsigned long long) seq, crashes, crashes == 1 ? "" : "s", sig,
                    fh_crashlog_signal_name (sig), out ? "at" : "below", self->max_crashes,
                    out ? "goes to the dead letters instead of to the plugin"
                        : "is consumed again");
    }
    if (count > shown)
        fh_warning ("consumer '%s': the crash record names %zu messages in all, %zu of them at "
                    "max_crashes (%u): those still in the spool go to the dead letters, the "
                    "others are consumed again (docs/runbook.md: clearing a crash record)",
                    self->name, count, at_max, self->max_crashes);
    self->crash_site.record_fd = fh_crashlog_fd (self->crashlog);
    return 0;
}

bool
fh_cons_quarantine (s_worker_t *worker, const fh_msg_t *msg)
{
    fh_consumer_t *self = worker->consumer;
    fanhub_bytes_t topic = fh_msg_frame (msg, 0);
    uint32_t crc = fh_crashlog_identity (topic, fh_msg_frame (msg, 1));
    int sig = 0;
    uint32_t crashes = fh_crashlog_crashes (self->crashlog, msg->seq, crc, &sig);
    if (crashes < self->max_crashes)
        return false;
    snprintf (worker->reason, sizeof worker->reason,
              "crashed the hub %u time%s: signal %d (%s) in consume", crashes,
              crashes == 1 ? "" : "s", sig, fh_crashlog_signal_name (sig));
    worker->quarantined = true;
    fh_error ("consumer '%s': message %llu (%.*s) %s (max_crashes %u): dead-lettered, not "
              "given to the plugin",
              self->name, (unsigned long long) msg->seq, (int) topic.size,
              (const char *) topic.data, worker->reason, self->max_crashes);
    return true;
}

int
fh_consumer_open_state (fh_consumer_t *self, const fh_config_t *config, char *err, size_t errlen)
{
    /* A fedora_messaging consumer's backlog and failures stay on the
       broker (requeued): no spool, no dead letters of its own. */
    if (!config->state_dir || config->consumers[self->index].fedora_messaging)
        return 0;
    char dir[4096], why[1024];
    snprintf (dir, sizeof dir, "%s/%s/%s", config->state_dir, self->name, FH_DEADLETTER_SUBDIR);
    self->dead_letters = fh_deadletter_open (dir, self->name, true, why, sizeof why);
    if (!self->dead_letters) {
        snprintf (err, errlen, "consumer '%s': dead-letter store: %s", self->name, why);
        return -1;
    }
    snprintf (dir, sizeof dir, "%s/%s", config->state_dir, self->name);
    const fh_consumer_config_t *mine = &config->consumers[self->index];
    fh_spool_options_t options = {
        .segment_bytes = config->spool.segment_bytes,
        .max_bytes = mine->spool_max_bytes,
        .fsync = (fh_spool_fsync_t) config->spool.fsync,
        .fsync_interval_ms = config->spool.fsync_interval_ms,
    };
    self->spool = fh_spool_open (dir, &options, &self->spool_corrupt_at_open, why, sizeof why);
    if (!self->spool) {
        snprintf (err, errlen, "consumer '%s': spool: %s", self->name, why);
        return -1;
    }
    /* The hand-off covers a burst while one group commit is synced. */
    size_t handoff = fh_queue_capacity (self->queue);
    if (handoff < FH_SPOOL_WRITER_MIN_ITEMS)
        handoff = FH_SPOOL_WRITER_MIN_ITEMS;
    fh_spool_writer_ops_t ops = {s_spill_describe, s_spill_written, s_spill_wrote, self};
    self->spool_writer = fh_spool_writer_new (self->spool, handoff, FH_SPOOL_WRITER_MAX_BYTES, &ops,
                                              why, sizeof why);
    if (!self->spool_writer) {
        snprintf (err, errlen, "consumer '%s': spool: %s", self->name, why);
        fh_spool_close (&self->spool);
        return -1;
    }
    if (s_open_crashlog (self, dir, err, errlen) != 0) {
        fh_spool_writer_destroy (&self->spool_writer);
        fh_spool_close (&self->spool);
        return -1;
    }
    self->spill_at_shutdown = self->overflow == FH_OVERFLOW_SPILL;
    /* Write-ahead: every message is on disk before the consumer sees it,
       so a crash loses nothing the hub took. */
    self->write_ahead = mine->write_ahead && self->spill_at_shutdown;
    if (self->write_ahead)
        atomic_store (&self->spooling, true);
    uint64_t waiting = fh_spool_records (self->spool);
    if (waiting) {
        /* Left by the last run, or by the instance a reload replaced: it
           goes first, and new messages queue behind it. They count as
           accepted, so backlog includes them (a successor's at its start,
           when its lineage moves them over from the predecessor). */
        atomic_store (&self->spooling, true);
        bool inherits = atomic_load (&self->inherits_spool);
        if (inherits)
            self->inherited_waiting = waiting;
        else
            fh_count_set (&self->offered.enqueued, waiting);
        fh_info ("consumer '%s': %llu messages waiting in its spool from %s; they go first",
                 self->name, (unsigned long long) waiting,
                 inherits ? "the instance it replaces" : "the last run");
    }
    self->spool_lost_seen = fh_spool_lost (self->spool); /* never counted in enqueued */
    /* Last: the enqueuer reads `spooling` once it sees the spool open, and
       a message it put in memory before `spooling` was set would be
       consumed before the older ones in the spool. */
    atomic_store_explicit (&self->state_open, true, memory_order_release);
    if (self->spool_lost_seen)
        fh_warning ("consumer '%s': spool: %llu records or segments lost before this start "
                    "(counted in spool_lost)",
                    self->name, (unsigned long long) self->spool_lost_seen);
    if (self->spool_corrupt_at_open)
        fh_warning ("consumer '%s': spool: %llu damaged records or regions skipped", self->name,
                    (unsigned long long) self->spool_corrupt_at_open);
    return 0;
}

void
fh_consumer_inherit_spool (fh_consumer_t *self, fh_consumer_t *predecessor)
{
    atomic_store (&self->inherits_spool, true);
    pthread_mutex_lock (&self->spill_lock);
    self->predecessor = predecessor;
    pthread_mutex_unlock (&self->spill_lock);
}

void
fh_consumer_forget_predecessor (fh_consumer_t *self)
{
    pthread_mutex_lock (&self->spill_lock);
    self->predecessor = NULL;
    pthread_mutex_unlock (&self->spill_lock);
}

uint64_t
fh_consumer_take_inherited (fh_consumer_t *self)
{
    uint64_t waiting = self->inherited_waiting;
    self->inherited_waiting = 0;
    /* Into the any-thread tally, not the enqueuer's: the enqueuer may be
       offering to this instance already, and its single-writer bump of
       offered.enqueued (a load and a store) would lose an add made
       meanwhile. */
    fh_count_add (&self->tally.enqueued, waiting);
    return waiting;
}

void
fh_consumer_hand_over (fh_consumer_t *self)
{
    if (!atomic_load_explicit (&self->state_open, memory_order_acquire) || !self->spool_writer)
        return;
    /* What it handed to its writer is on disk (or counted lost) now, so
       its figures are final when the lineage keeps them. */
    fh_spool_writer_flush (self->spool_writer);
    /* Spilled in this run and not read back: the successor reads them.
       Done for this instance as at a stop: written to its spool. */
    pthread_mutex_lock (&self->spill_lock);
    for (size_t i = 0; i < self->deferred_count; i++) {
        fh_deferral_t *deferral
            = self->deferred[(self->deferred_head + i) % self->deferred_cap].deferral;
        if (!deferral)
            continue; /* its write failed: let go already */
        fh_cons_let_go_copy (self, deferral, FH_GONE_HANDED_OVER, &self->spill_handled);
    }
    self->deferred_count = 0;
    pthread_mutex_unlock (&self->spill_lock);
}

uint64_t
fh_consumer_spool_max_seq (const fh_consumer_t *self)
{
    return self->spool ? fh_spool_max_seq (self->spool) : 0;
}

/* The next message from the spool, as a message of its own (one holder,
   this consumer); NULL when the spool is empty, after turning spooling
   off if the memory queue is empty too (new messages go to memory again).
   Only the reading thread calls it. */
bool
fh_cons_spool_window_full (fh_consumer_t *self)
{
    return self->spool && fh_spool_window (self->spool) >= self->spool_window;
}

fh_msg_t *
fh_cons_spool_next (fh_consumer_t *self)
{
    if (fh_cons_spool_window_full (self))
        return NULL; /* a done record's fh_cons_done kicks the queue */
    if (!self->spool || !fh_spool_records (self->spool)) {
        if (self->spool && atomic_load (&self->spooling)) {
            pthread_mutex_lock (&self->spill_lock);
            /* Under the lock the enqueuer cannot spill; while spooling it
               pushes nothing to memory, so an empty queue stays empty. The
               writer's hand-off counts as spool: its messages are older
               than any the queue will take next. */
            if (!fh_cons_spool_unread (self) && fh_queue_size (self->queue) == 0
                && !self->write_ahead)
                atomic_store (&self->spooling, false);
            pthread_mutex_unlock (&self->spill_lock);
        }
        return NULL; /* the writer kicks the queue when it has written more */
    }
    fh_spool_record_t record;
    int rc = fh_spool_read (self->spool, &record);
    uint64_t lost = fh_spool_lost (self->spool);
    if (lost != self->spool_lost_seen) {
        /* Accepted, and never to be read back: out of the backlog, as a
           spill the spool could not store is (dropped and evicted). */
        fh_cons_spill_lost (self, lost - self->spool_lost_seen);
        self->spool_lost_seen = lost;
    }
    if (rc != 1)
        return NULL; /* an I/O error is logged by the spool; try later */
    uint32_t count = record.frame_count;
    zmq_msg_t *frames = malloc (count * sizeof *frames);
    fh_msg_t *msg = NULL;
    if (!frames)
        goto out_of_memory;
    for (uint32_t i = 0; i < count; i++) {
        zmq_msg_init_size (&frames[i], record.frames[i].size);
        memcpy (zmq_msg_data (&frames[i]), record.frames[i].data, record.frames[i].size);
    }
    msg = fh_msg_new (frames, count, record.seq,
                      record.received_wall_ns - fh_clock_wall_offset_ns ());
    for (uint32_t i = 0; i < count; i++)
        zmq_msg_close (&frames[i]);
    free (frames);
    if (msg) {
        msg->from_spool = true;
        msg->spool_mark = record.mark;
        if (record.this_run)
            msg->deferral = s_deferral_of (self, record.seq);
        atomic_store_explicit (&msg->holders, 1, memory_order_relaxed);
        return msg;
    }
out_of_memory:
    /* Lost for this consumer: counted and logged, and done for the spool. */
    fh_cons_spill_lost (self, 1);
    fh_error ("consumer '%s': out of memory: dropped message %llu read from its spool", self->name,
              (unsigned long long) record.seq);
    fh_cons_record_done (self, record.mark);
    return NULL;
}

/* The reader: the deferral of the record just read (one appended in this
   run), or NULL. Records that were never read back (lost to damage, and
   counted there) let their waiters go. */
static fh_deferral_t *
s_deferral_of (fh_consumer_t *self, uint64_t seq)
{
    fh_deferral_t *found = NULL;
    pthread_mutex_lock (&self->spill_lock);
    while (self->deferred_count) {
        struct s_deferred *head = &self->deferred[self->deferred_head];
        if (head->seq > seq)
            break;
        self->deferred_head = (self->deferred_head + 1) % self->deferred_cap;
        self->deferred_count--;
        if (head->seq == seq) {
            found = head->deferral;
            break;
        }
        if (!head->deferral)
            continue; /* its write failed: let go already */
        fh_cons_let_go_copy (self, head->deferral, FH_GONE_UNREAD, NULL);
    }
    pthread_mutex_unlock (&self->spill_lock);
    return found;
}

/* The spool writer failed to store msg, whose deferral the enqueuer had
   queued: takes it out of the ring, so that its waiter hears now. */
static void
s_undefer (fh_consumer_t *self, uint64_t seq)
{
    fh_deferral_t *deferral = NULL;
    pthread_mutex_lock (&self->spill_lock);
    for (size_t i = self->deferred_count; i-- > 0;) {
        struct s_deferred *entry = &self->deferred[(self->deferred_head + i) % self->deferred_cap];
        if (entry->seq == seq) {
            deferral = entry->deferral;
            entry->deferral = NULL; /* s_deferral_of passes over it */
            break;
        }
        if (entry->seq < seq)
            break;
    }
    pthread_mutex_unlock (&self->spill_lock);
    if (deferral)
        fh_cons_let_go_copy (self, deferral, FH_GONE_UNWRITTEN, &self->spill_handled);
}

/* Spilled messages not yet read back: in the spool, or still in the
   writer's hand-off (read first: an item leaves it only once its record
   counts in the spool). */
uint64_t
fh_cons_spool_unread (fh_consumer_t *self)
{
    uint64_t handed = self->spool_writer ? fh_spool_writer_pending (self->spool_writer) : 0;
    return handed + fh_spool_records (self->spool);
}

/* The spool writer's `describe`: what to store of msg. */
static void
s_spill_describe (void *arg, void *item, fh_spool_entry_t *entry)
{
    (void) arg;
    fh_msg_t *msg = item;
    fanhub_bytes_t *frames = (fanhub_bytes_t *) entry->frames;
    for (uint32_t i = 0; i < entry->frame_count; i++)
        frames[i] = fh_msg_frame (msg, i);
    entry->seq = msg->seq;
    entry->received_wall_ns = msg->received_ns + fh_clock_wall_offset_ns ();
}

/* The spool writer's `written`, on its thread: counted as spilled or,
   when the spool could not take it, as dropped (and its waiter told);
   then the writer's share of msg is released. */
static void
s_spill_written (void *arg, void *item, int rc, int error)
{
    fh_consumer_t *self = arg;
    fh_msg_t *msg = item;
    bool kept_at_shutdown = atomic_load_explicit (&self->spill_keeping, memory_order_relaxed);
    if (rc == 0) {
        fh_count_bump (&self->spill_tally.spilled);
        /* A message kept at shutdown is not read back in this run; one
           spilled while running speaks through its copy read back. */
        fh_cons_let_go (self, msg, kept_at_shutdown ? FH_GONE_KEPT : FH_GONE_WRITTEN,
                        &self->spill_handled, 0);
        return;
    }
    fh_cons_spill_lost (self, 1);
    if (!kept_at_shutdown)
        s_undefer (self, msg->seq);
    fh_log_limited (&self->spill_log, FANHUB_LOG_WARNING, "consumer '%s': dropped message %llu: %s",
                    self->name, (unsigned long long) msg->seq,
                    rc == FH_SPOOL_FULL ? "the spool is full (queue.spool_max_bytes)"
                                        : strerror (error));
    fh_cons_let_go (self, msg, FH_GONE_SPILL_FAILED, &self->spill_handled, 0);
}

/* The spool writer's `wrote`: the reader may have more to read. */
static void
s_spill_wrote (void *arg)
{
    fh_consumer_t *self = arg;
    fh_queue_kick (self->queue);
}

/* At shutdown, a spilling consumer keeps what is queued in memory for the
   next run: onto the end of the spool, when nothing newer is there (when
   spooling, the queue holds the older messages and is consumed instead). */
void
fh_cons_spill_queue_at_shutdown (fh_consumer_t *self)
{
    pthread_mutex_lock (&self->spill_lock);
    /* Not spooling: the hand-off is empty (spooling stops only when it
       is, and only spilling puts into it), so it holds these only. */
    if (!atomic_load (&self->spooling) && fh_queue_size (self->queue) > 0) {
        uint64_t before = fh_count_read (&self->spill_tally.spilled);
        atomic_store (&self->spill_keeping, true);
        fh_msg_t *msg;
        /* Still counted as enqueued and not dequeued: backlog holds. */
        while ((msg = fh_queue_pop (self->queue))) {
            fh_cons_held_less (self, fh_cons_msg_bytes (msg));
            fh_spool_writer_put (self->spool_writer, msg, msg->frame_count, fh_cons_msg_bytes (msg),
                                 true);
        }
        fh_spool_writer_flush (self->spool_writer);
        atomic_store (&self->spill_keeping, false);
        uint64_t kept = fh_count_read (&self->spill_tally.spilled) - before;
        if (kept)
            fh_info ("consumer '%s': %llu queued messages kept in its spool for %s", self->name,
                     (unsigned long long) kept,
                     atomic_load (&self->retiring) ? "the instance that replaces it"
                                                   : "the next run");
    }
    pthread_mutex_unlock (&self->spill_lock);
}
