/*  crash - the worker plugin's blame table: how many times each message
    (by seq) was in flight when its worker died, so that a message a dead
    worker held goes alone next time and a poison message is a dead
    letter at max_crashes; and what becomes of the messages a process
    held when it died or hung (crash_settle). Every call is made under
    the worker's lock.
*/
#include "worker.h"

#include <fanhub/sdk.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

crash_t *
crash_find (worker_t *w, uint64_t seq)
{
    for (size_t i = 0; i < w->ncrashes; i++)
        if (w->crashes[i].seq == seq)
            return &w->crashes[i];
    return NULL;
}

void
crash_forget (worker_t *w, uint64_t seq)
{
    crash_t *c = crash_find (w, seq);
    if (c)
        *c = w->crashes[--w->ncrashes];
}

unsigned
crash_add (worker_t *w, uint64_t seq)
{
    crash_t *c = crash_find (w, seq);
    if (!c && w->ncrashes == w->crashcap) {
        size_t cap = w->crashcap ? w->crashcap * 2 : 16;
        crash_t *grown = realloc (w->crashes, cap * sizeof *grown);
        if (!grown)
            return 1;
        w->crashes = grown;
        w->crashcap = cap;
    }
    if (!c) {
        c = &w->crashes[w->ncrashes++];
        c->seq = seq;
        c->crashes = 0;
        c->hung_out = false;
    }
    return ++c->crashes;
}

bool
crash_suspect (worker_t *w, uint64_t seq)
{
    return crash_find (w, seq) != NULL;
}

bool
crash_hung_out (worker_t *w, uint64_t seq, char *reason, size_t size)
{
    crash_t *c = crash_find (w, seq);
    if (!c || !c->hung_out)
        return false;
    snprintf (reason, size,
              "worker stopped answering (consume_timeout %.1f s) and was killed %u time%s on "
              "this message",
              (double) w->consume_timeout_ns / 1e9, c->crashes, c->crashes == 1 ? "" : "s");
    crash_forget (w, seq);
    return true;
}

void
worker_free_job (worker_t *w, job_t *job)
{
    free (job->frame);
    job->frame = NULL;
    job->used = false;
    w->free_slots[w->nfree++] = (size_t) (job - w->jobs);
}

static int
s_wire_desc (const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* What a hung process held when it was killed at consume_timeout. The
   hub expires a started ticket at consume_timeout too (one clock: the
   one ticket_started set), and that is the one charge: a job started
   that long ago is dropped here (counted as a crash, for blame), never
   completed; one not started (queued behind it in the process) goes
   back to the head of the wait queue, uncharged, in its order. Under
   lock. */
static void
s_settle_hung (worker_t *w, proc_t *p, size_t held, int64_t now)
{
    uint64_t *again = calloc (held, sizeof *again);
    size_t n = 0, cap = (size_t) w->cap;
    for (size_t i = 0; i < cap; i++) {
        job_t *job = &w->jobs[i];
        if (!job->used || job->proc != (ssize_t) p->index)
            continue;
        if ((job->started && now - job->started_ns > w->consume_timeout_ns) || !again) {
            unsigned crashes = crash_add (w, job->seq);
            crash_t *c = crash_find (w, job->seq);
            if (c && held == 1 && crashes >= w->max_crashes)
                c->hung_out = true; /* its next consume fails it */
            else if (job->attempt >= w->max_attempts)
                crash_forget (w, job->seq); /* the hub finishes it now */
            worker_free_job (w, job);
            continue;
        }
        job->proc = -1;
        job->started = false;
        again[n++] = job->wire;
    }
    qsort (again, n, sizeof *again, s_wire_desc); /* the wire's serial: consume order */
    for (size_t i = 0; i < n; i++) {
        job_t *job = &w->jobs[again[i] & 0xffffffffu];
        job->suspect = crash_suspect (w, job->seq);
        w->whead = (w->whead + cap - 1) % cap;
        w->waitq[w->whead] = (size_t) (job - w->jobs);
        w->wcount++;
    }
    free (again);
}

/* The messages p held when it died: each one attempt; dead-lettered when
   it was alone in flight at its max_crashes-th crash, else retried (and
   sent alone next time). A hung p: s_settle_hung. Under lock; fills done
   (n entries at most). */
size_t
crash_settle (worker_t *w, proc_t *p, const char *cause, bool hung, int64_t now,
              worker_done_t *done)
{
    size_t held = 0, count = 0;
    for (size_t i = 0; i < (size_t) w->cap; i++)
        held += w->jobs[i].used && w->jobs[i].proc == (ssize_t) p->index;
    p->in_flight = 0; /* what it held is settled here */
    p->running = 0;
    if (hung && !atomic_load (&w->stop) && !w->halted) {
        s_settle_hung (w, p, held, now);
        return 0;
    }
    for (size_t i = 0; i < (size_t) w->cap; i++) {
        job_t *job = &w->jobs[i];
        if (!job->used || job->proc != (ssize_t) p->index)
            continue;
        if (atomic_load (&w->stop)) {
            worker_free_job (w, job); /* the hub gave up on them already */
            continue;
        }
        if (w->halted) {
            worker_done_t *d = &done[count++];
            d->ticket = job->ticket;
            d->result = FANHUB_FAIL;
            fanhub_utf8_format (d->reason, sizeof d->reason, "the consumer is %s", w->halt_reason);
            worker_free_job (w, job);
            continue;
        }
        unsigned crashes = crash_add (w, job->seq);
        worker_done_t *d = &done[count++];
        d->ticket = job->ticket;
        if (held == 1 && crashes >= w->max_crashes) {
            d->result = FANHUB_FAIL;
            snprintf (d->reason, sizeof d->reason, "worker %s %u time%s on this message", cause,
                      crashes, crashes == 1 ? "" : "s");
            crash_forget (w, job->seq);
        }
        else {
            d->result = FANHUB_RETRY;
            snprintf (d->reason, sizeof d->reason,
                      "worker %s (crash %u on this message; max_crashes %llu)", cause, crashes,
                      (unsigned long long) w->max_crashes);
            if (job->attempt >= w->max_attempts)
                crash_forget (w, job->seq); /* the hub finishes it now */
        }
        worker_free_job (w, job);
    }
    return count;
}
