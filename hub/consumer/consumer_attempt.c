/*  consumer_attempt - one attempt and the last word on a message, shared
    by the single worker (consumer_run.c) and the pool's workers
    (consumer_pool.c). See consumer_internal.h.

    An attempt is one call, fh_cons_attempt: the plugin's consume, timed
    and visible to the stuck checker, then its verdict: done, again at a
    time (the retry decision: which backoff, or finished and why), or
    parked on a ticket. Done is the consumer's last word on a message:
    counted, dead-lettered when it failed, its waiter told, its spool
    record done, released. The workers' loops only sleep until a retry
    is due (the single worker) or requeue it (the pool).

    A ticket is reserved in the pending table only when the plugin asks
    for one during consume (msg_ticket): the attempt running on a thread
    is kept here (s_inside) for that. Answers the plugin gave as PENDING
    complete later, through fh_consumer_complete, and are taken by
    whichever worker comes first (fh_cons_completion). Before consume and
    idle, a worker answers a reopen request (SIGHUP:
    fh_consumer_reopen_all).
*/
#include "consumer_internal.h"

#include "fanhub/sdk.h"

#include "fedmsg.h"

#include <stdio.h>
#include <stdlib.h>

static void
s_report_failure (s_worker_t *worker, const fh_msg_t *msg, const char *why)
{
    fanhub_bytes_t topic = fh_msg_frame (msg, 0);
    char note[FH_FEDMSG_ID_SIZE + 16];
    fh_fedmsg_id_note (fh_msg_frame (msg, 1), note, sizeof note);
    fh_log_limited (&worker->failure_log, FANHUB_LOG_WARNING,
                    "consumer '%s': message %llu%s (%.*s) failed: %s", worker->consumer->name,
                    (unsigned long long) msg->seq, note, (int) topic.size,
                    (const char *) topic.data, why);
}

/* Reopen requests so far: a signal is the process's, so is this. */
atomic_uint_fast64_t fh_cons_reopen_requests;

void
fh_consumer_reopen_all (void)
{
    atomic_fetch_add_explicit (&fh_cons_reopen_requests, 1, memory_order_release);
}

void
fh_cons_reopen (fh_consumer_t *self, uint64_t want)
{
    /* With workers, one of them answers the request and the others wait
       for it: none may write before the plugin has reopened. */
    pthread_mutex_lock (&self->reopen_lock);
    if (atomic_load_explicit (&self->reopen_seen, memory_order_relaxed) != want) {
        if (self->reopen && self->initialized)
            self->reopen (self->state);
        atomic_store_explicit (&self->reopen_seen, want, memory_order_release);
    }
    pthread_mutex_unlock (&self->reopen_lock);
}

void
fh_cons_reopen_answered (fh_consumer_t *self)
{
    atomic_store (&self->reopen_seen, atomic_load (&fh_cons_reopen_requests));
}

void
fh_cons_idle (fh_consumer_t *self)
{
    fh_cons_maybe_reopen (self);
    fh_crash_enter (&self->crash_site, "idle", NULL);
    self->desc->idle (self->state);
    fh_crash_leave ();
}

/* The attempt inside consume on this thread, for msg_ticket and
   msg_attempt: msg is NULL outside consume. */
static _Thread_local struct {
    const fh_msg_t *msg;
    fh_consumer_t *consumer;
    const fh_attempt_t *at;
    int64_t start;
    fanhub_ticket_t ticket; /* reserved for it, or 0 */
} s_inside;

/* A ticket for the attempt inside consume on this thread (0 when the
   table has no room: never when the workers checked fh_pending_full). */
static fanhub_ticket_t
s_reserve (void)
{
    fh_consumer_t *self = s_inside.consumer;
    fh_pending_item_t item = {.msg = (fh_msg_t *) s_inside.msg,
                              .slot = s_inside.at->slot,
                              .attempts = s_inside.at->attempts,
                              .first_ns = s_inside.at->first_ns,
                              .started_ns = s_inside.start};
    return fh_pending_reserve (self->pending, &item, self->pool);
}

fanhub_ticket_t
fh_consumer_msg_ticket (const fh_msg_t *msg)
{
    if (!msg || msg != s_inside.msg)
        return 0;
    if (!s_inside.ticket)
        s_inside.ticket = s_reserve ();
    return s_inside.ticket;
}

uint32_t
fh_consumer_msg_attempt (const fh_msg_t *msg)
{
    return msg && msg == s_inside.msg ? s_inside.at->attempts : 0;
}

/* One consume call, timed, visible to the stuck checker while it runs.
   An answer of FANHUB_PENDING leaves the ticket the plugin took open in
   the pending table (and is not timed yet: its processing time is
   recorded when it completes); any other answer frees it. */
static fanhub_result_t
s_call_consume (s_worker_t *worker, const fh_attempt_t *at, int64_t start, int64_t *end)
{
    fh_consumer_t *self = worker->consumer;
    fh_msg_t *msg = at->msg;
    if (msg->from_spool && self->crash_suspects && fh_cons_quarantine (worker, msg)) {
        *end = start; /* the plugin never sees it */
        if (self->pool)
            fh_pending_unclaim (self->pending);
        return FANHUB_FAIL;
    }
    atomic_store_explicit (&worker->consume_seq, msg->seq, memory_order_relaxed);
    atomic_store_explicit (&worker->consume_started_ns, start ? start : 1, memory_order_release);
    fh_cons_maybe_reopen (self);
    s_inside.consumer = self;
    s_inside.at = at;
    s_inside.start = start;
    s_inside.msg = msg;
    fh_crash_enter (&self->crash_site, "consume", msg); /* named if it dies */
    fanhub_result_t result = self->desc->consume (self->state, msg);
    fh_crash_leave ();
    /* A PENDING answer without msg_ticket keeps a ticket the plugin cannot
       name, as when every consume had one: consume_timeout ends it (as
       RETRY), a stop abandons it. */
    if (result == FANHUB_PENDING && !s_inside.ticket)
        s_inside.ticket = s_reserve ();
    fanhub_ticket_t ticket = s_inside.ticket;
    s_inside.msg = NULL;
    s_inside.ticket = 0;
    if (self->pool && !ticket)
        fh_pending_unclaim (self->pending); /* the place claimed for it */
    fh_host_take_reason (worker->reason, sizeof worker->reason);
    *end = fh_cons_now (self);
    atomic_store_explicit (&worker->consume_started_ns, 0, memory_order_release);
    if (result == FANHUB_PENDING && ticket) {
        fh_pending_hold (self->pending, ticket);
        return result;
    }
    if (ticket && fh_pending_cancel (self->pending, ticket))
        fh_warning ("consume: consumer '%s': message %llu: the plugin completed it and "
                    "also answered %d; the answer counts",
                    self->name, (unsigned long long) msg->seq, (int) result);
    if (result == FANHUB_PENDING)
        result = FANHUB_FAIL; /* no ticket could be kept: never with the checks */
    fh_histogram_record (&worker->processing, *end - start);
    return result;
}

/* The pending table's wake-up: a completion came. */
void
fh_cons_pending_wake (void *arg)
{
    fh_consumer_t *self = arg;
    if (self->pool)
        fh_cons_pool_completed (self);
    else
        fh_queue_kick (self->queue);
}

int
fh_consumer_complete (fh_consumer_t *self, fanhub_ticket_t ticket, fanhub_result_t result)
{
    return fh_consumer_complete_reason (self, ticket, result, NULL);
}

int
fh_consumer_complete_reason (fh_consumer_t *self, fanhub_ticket_t ticket, fanhub_result_t result,
                             const char *reason)
{
    if (fh_consumer_complete_try (self, ticket, result, reason) == 0)
        return 0;
    fh_consumer_count_late (self, ticket);
    return -1;
}

int
fh_consumer_complete_try (fh_consumer_t *self, fanhub_ticket_t ticket, fanhub_result_t result,
                          const char *reason)
{
    if (result != FANHUB_OK && result != FANHUB_RETRY && result != FANHUB_FAIL) {
        fh_error ("complete: consumer '%s': ticket %llu: result %d is not OK, RETRY or "
                  "FAIL; taken as FAIL",
                  self->name, (unsigned long long) ticket, (int) result);
        result = FANHUB_FAIL;
    }
    return fh_pending_complete_reason (self->pending, ticket, result, reason) == 0 ? 0 : -1;
}

void
fh_consumer_count_late (fh_consumer_t *self, fanhub_ticket_t ticket)
{
    fh_count_add (&self->tally.completions_late, 1);
    fh_log_limited (&self->complete_log, FANHUB_LOG_WARNING,
                    "complete: consumer '%s': ticket %llu is not pending (completed already, "
                    "expired by consume_timeout, abandoned, or unknown); ignored, counted in "
                    "completions_late",
                    self->name, (unsigned long long) ticket);
}

/* A message's last word: counted, logged when it failed, its waiter told,
   released. */
/* A failed message kept as a dead letter: true when it was; when it
   could not be, counted and logged. Apart, so that the common done
   (OK) carries no buffers. */
static __attribute__ ((noinline)) bool
s_dead_letter (s_worker_t *worker, fh_msg_t *msg, const char *why, uint32_t attempts,
               int64_t first_ns, int64_t last_ns)
{
    fh_consumer_t *self = worker->consumer;
    uint32_t count = msg->frame_count;
    fanhub_bytes_t *frames = malloc (count * sizeof *frames);
    if (!frames)
        return false;
    for (uint32_t i = 0; i < count; i++)
        frames[i] = fh_msg_frame (msg, i);
    int64_t offset = fh_clock_wall_offset_ns ();
    fh_deadletter_item_t item = {
        .seq = msg->seq,
        .received_wall_ns = msg->received_ns + offset,
        .frames = frames,
        .frame_count = count,
        .reason = why,
        .attempts = attempts,
        .first_attempt_ns = first_ns + offset,
        .last_attempt_ns = last_ns + offset,
    };
    char id[FH_DEADLETTER_ID_SIZE], err[512];
    bool stored = fh_deadletter_add (self->dead_letters, &item, id, err, sizeof err) == 0;
    free (frames);
    if (!stored) { /* one line per message was 14,534 lines on a full disk */
        fh_count_add (&worker->tally.dead_letter_errors, 1);
        char note[FH_FEDMSG_ID_SIZE + 16];
        fh_fedmsg_id_note (fh_msg_frame (msg, 1), note, sizeof note);
        fh_log_limited (&worker->deadletter_log, FANHUB_LOG_ERROR,
                        "consumer '%s': message %llu%s: cannot keep it as a dead letter: %s "
                        "(failed, not in dead_lettered)",
                        self->name, (unsigned long long) msg->seq, note, err);
    }
    return stored;
}

void
fh_cons_done (s_worker_t *worker, fh_msg_t *msg, fanhub_result_t result, const char *why,
              uint32_t attempts, int64_t first_ns, int64_t last_ns)
{
    fh_consumer_t *self = worker->consumer;
    bool stored = result != FANHUB_OK && self->dead_letters
                  && s_dead_letter (worker, msg, why, attempts, first_ns, last_ns);
    fh_cons_progress_begin (worker);
    fh_count_bump (result == FANHUB_OK ? &worker->tally.completed : &worker->tally.failed);
    if (stored)
        fh_count_bump (&worker->tally.dead_lettered);
    fh_cons_progress_end (worker);
    if (result != FANHUB_OK)
        s_report_failure (worker, msg, why);
    /* Done: the spool's cursor may move over it. The end of the last
       attempt is the handling time, unless a test's clock measured it:
       received_ns is always the real clock's. */
    fh_cons_let_go (self, msg, result == FANHUB_OK ? FH_GONE_COMPLETED : FH_GONE_FAILED,
                    &worker->handled, self->clock.now_ns == fh_clock_real.now_ns ? last_ns : 0);
}

/* The retry decision, the same for every worker, after attempt number
   `attempts` answered result: the backoff in ms before the next attempt
   (the retry is then logged and counted in retried), or -1 when the
   message is finished, with why filled for anything but OK. late is the
   reason a PENDING answer completed with ("" without one), NULL for
   consume's own answer; expired: its ticket ran past consume_timeout. */
static int64_t
s_retry_decide (s_worker_t *worker, fanhub_result_t result, uint32_t attempts, const char *late,
                bool expired, char *why, size_t whylen)
{
    fh_consumer_t *self = worker->consumer;
    const char *verb = expired ? "pending past consume_timeout, taken as"
                       : late  ? "completed with"
                               : "consume answered";
    /* The plugin's own words, when it gave them (host->set_reason, or
       complete_reason's for a late answer: `late`). */
    const char *reason = late ? late : worker->reason;
    const char *colon = reason[0] ? ": " : "";
    why[0] = '\0';
    if (result == FANHUB_OK)
        return -1;
    if (worker->quarantined && !late) {
        worker->quarantined = false;
        fanhub_utf8_copy (why, whylen, reason); /* the hub's word, not the plugin's */
        return -1;
    }
    if (result != FANHUB_RETRY) {
        fanhub_utf8_format (why, whylen, "%s FAIL%s%s", verb, colon, reason);
        return -1;
    }
    if (attempts >= self->retry.max_attempts) {
        fanhub_utf8_format (why, whylen, "%s RETRY %u time%s (retry.max_attempts)%s%s", verb,
                            attempts, attempts == 1 ? "" : "s", colon, reason);
        return -1;
    }
    if (reason[0])
        fh_log_limited (&worker->retry_log, FANHUB_LOG_WARNING,
                        "consumer '%s': attempt %u answered RETRY: %s; retrying", self->name,
                        attempts, reason);
    fh_cons_progress_begin (worker);
    fh_count_bump (&worker->tally.retried);
    fh_cons_progress_end (worker);
    return fh_retry_delay_ms (&self->retry, attempts, &worker->rng);
}

/* s_verdict on an answer other than OK: the retry decision. Apart, so
   that the common answer carries no buffer. */
static __attribute__ ((noinline)) fh_verdict_t
s_verdict_not_ok (s_worker_t *worker, fh_attempt_t *at, fanhub_result_t result, const char *late,
                  bool expired)
{
    char why[512];
    int64_t delay_ms
        = s_retry_decide (worker, result, at->attempts, late, expired, why, sizeof why);
    if (delay_ms >= 0) {
        at->due_ns = at->end_ns + delay_ms * 1000000;
        return FH_ATTEMPT_AGAIN;
    }
    fh_cons_done (worker, at->msg, result, why, at->attempts, at->first_ns, at->end_ns);
    return FH_ATTEMPT_DONE;
}

/* The verdict on at after its last attempt answered result (late and
   expired as for s_retry_decide): done (fh_cons_done), or again at
   at->due_ns. */
static fh_verdict_t
s_verdict (s_worker_t *worker, fh_attempt_t *at, fanhub_result_t result, const char *late,
           bool expired)
{
    if (result != FANHUB_OK)
        return s_verdict_not_ok (worker, at, result, late, expired);
    /* OK, the common answer, needs no decision. */
    fh_cons_done (worker, at->msg, result, "", at->attempts, at->first_ns, at->end_ns);
    return FH_ATTEMPT_DONE;
}

fh_verdict_t
fh_cons_attempt (s_worker_t *worker, fh_attempt_t *at, int64_t start)
{
    at->attempts++;
    int64_t end;
    fanhub_result_t result = s_call_consume (worker, at, start, &end);
    at->end_ns = end;
    if (result == FANHUB_PENDING)
        return FH_ATTEMPT_PARKED;
    return s_verdict (worker, at, result, NULL, false);
}

bool
fh_cons_completion (s_worker_t *worker, fh_attempt_t *at, fh_verdict_t *verdict)
{
    fh_consumer_t *self = worker->consumer;
    fh_pending_item_t item;
    if (!fh_pending_take_done (self->pending, &item))
        return false;
    int64_t now = self->clock.now_ns (self->clock.arg);
    fh_histogram_record (&worker->processing, now - item.started_ns);
    *at = (fh_attempt_t){.msg = item.msg,
                         .slot = item.slot,
                         .attempts = item.attempts,
                         .first_ns = item.first_ns,
                         .end_ns = now};
    *verdict = s_verdict (worker, at, item.result, item.reason ? item.reason : "", item.expired);
    free (item.reason);
    return true;
}

void
fh_cons_stopped (s_worker_t *worker, fh_attempt_t *at)
{
    fh_cons_done (worker, at->msg, FANHUB_RETRY, "stopped while waiting to retry", at->attempts,
                  at->first_ns, at->end_ns);
}

int64_t
fh_cons_ticket_deadline (fh_consumer_t *self, int64_t drained_ns)
{
    int64_t deadline = drained_ns + self->ticket_grace_ns;
    int64_t closed = atomic_load (&self->close_deadline_ns);
    return closed && closed < deadline ? closed : deadline;
}

void
fh_cons_abandon_tickets (fh_consumer_t *self)
{
    fh_pending_item_t item;
    size_t count = 0;
    uint64_t oldest = UINT64_MAX;
    while (fh_pending_take_open (self->pending, &item)) {
        count++;
        if (item.msg->seq < oldest)
            oldest = item.msg->seq;
        if (item.slot)
            fh_keyed_release (self->keyed, item.slot);
        /* Not done: a spooled one stays in the spool for a successor or
           the next run. */
        fh_cons_let_go (self, item.msg, FH_GONE_ABANDONED, NULL, 0);
        fh_count_add (&self->tally.tickets_abandoned, 1);
    }
    if (count)
        fh_warning ("consumer '%s': %zu message%s still PENDING after the wait for them "
                    "(shutdown_timeout) ran out, the oldest message %llu: abandoned, counted "
                    "in tickets_abandoned; spooled ones are delivered again from the spool",
                    self->name, count, count == 1 ? "" : "s", (unsigned long long) oldest);
}
