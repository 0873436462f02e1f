/*  loop - the worker plugin's I/O thread.

    One thread per consumer does every read and write of its workers'
    sockets and pipes, in one poll() loop: consume only queues a message
    and wakes it. Each pass it hands waiting messages to processes (the
    one with the fewest in flight; a message a dead worker held goes
    alone to an idle one, so that an innocent neighbour of a poison
    message is never blamed for its crashes), writes what the processes
    have to read, reads their answers and completes the messages, logs
    their output lines, and starts again those that died, with backoff.
*/
#define _GNU_SOURCE

#include "worker.h"

#include <fanhub/sdk.h>

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SCAN_NS (50 * INT64_C (1000000)) /* timeouts are looked for this often */

void
loop_wake (worker_t *w)
{
    uint64_t one = 1;
    ssize_t n = write (w->wake_fd, &one, sizeof one);
    (void) n; /* a full counter wakes it as well */
}

static bool
s_any_ready (worker_t *w)
{
    for (size_t i = 0; i < w->nprocs; i++)
        if (w->procs[i].state == PROC_READY)
            return true;
    return false;
}

/* When the next start of p may be, after it ended (early or not). */
static void
s_schedule_restart (worker_t *w, proc_t *p, int64_t now)
{
    p->state = PROC_DOWN;
    int64_t delay = w->restart_ns;
    for (unsigned i = 0; i < p->failures && delay < w->restart_max_ns; i++)
        delay *= 2;
    if (delay > w->restart_max_ns)
        delay = w->restart_max_ns;
    p->failures++;
    p->restart_at_ns = now + delay;
}

/* A start that failed (spawn, ERROR, no READY, exit before READY). One
   the consumer refused for now (its own start-up raised: a database not
   up yet) does not fail init: the consumer starts down, and retries. */
static void
s_start_failed_as (worker_t *w, proc_t *p, const char *why, bool for_now, int64_t now)
{
    proc_kill (p);
    pthread_mutex_lock (&w->lock);
    bool starting = !w->running;
    if (starting && !w->start_failed && (!for_now || !w->start_down))
        snprintf (w->start_err, sizeof w->start_err, "worker %zu: %s", p->index, why);
    if (starting && for_now && !p->refused_for_now) {
        p->refused_for_now = true;
        w->start_down++;
    }
    else if (starting && !for_now)
        w->start_failed = true;
    bool any_ready = w->ready_count > 0;
    pthread_cond_broadcast (&w->ready_cond);
    pthread_mutex_unlock (&w->lock);
    s_schedule_restart (w, p, now);
    if (starting && for_now) { /* init goes on: said here, on this thread */
        w->host->log (w->ctx, FANHUB_LOG_ERROR,
                      "worker %zu: %s; not ready for now: next start in %.1f s", p->index, why,
                      (double) (p->restart_at_ns - now) / 1e9);
        if (!any_ready)
            w->host->set_state (w->ctx, FANHUB_STATE_DOWN, "worker %zu: %s", p->index, why);
    }
    if (starting)
        return; /* init says it */
    w->host->log (w->ctx, FANHUB_LOG_ERROR, "worker %zu: %s; next start in %.1f s", p->index, why,
                  (double) (p->restart_at_ns - now) / 1e9);
    if (!s_any_ready (w))
        w->host->set_state (w->ctx, FANHUB_STATE_DOWN, "worker %zu: %s", p->index, why);
    else
        w->host->set_state (w->ctx, FANHUB_STATE_UP, "worker %zu: %s", p->index, why);
}

static void
s_start_failed (worker_t *w, proc_t *p, const char *why, int64_t now)
{
    s_start_failed_as (w, p, why, false, now);
}

/* p is gone or must go: killed, reaped, its messages settled, its restart
   scheduled. cause NULL: its exit status says why. hung: killed for
   holding a message past consume_timeout (see s_settle_hung). */
static void
s_end (worker_t *w, proc_t *p, const char *cause, bool hung, int64_t now)
{
    if (p->err >= 0)
        proc_read_lines (p, p->err, &p->err_line, worker_emit_line, w);
    proc_state_t was = p->state;
    pid_t pid = p->last_pid; /* p->pid is 0 once reaped */
    size_t held = p->in_flight;
    int status = proc_kill (p);
    char text[160];
    if (!cause) {
        wire_status_text (status, text, sizeof text);
        cause = text;
    }
    if (was == PROC_HELLO) {
        char why[512];
        snprintf (why, sizeof why, "%s before READY%s%s", cause, p->last_err[0] ? ": " : "",
                  p->last_err);
        s_start_failed (w, p, why, now);
        return;
    }
    worker_done_t *done = calloc ((size_t) w->cap, sizeof *done);
    pthread_mutex_lock (&w->lock);
    size_t count = done ? crash_settle (w, p, cause, hung, now, done) : 0;
    bool halted = w->halted;
    pthread_mutex_unlock (&w->lock);
    for (size_t i = 0; i < count; i++)
        w->host->complete_reason (w->ctx, done[i].ticket, done[i].result, done[i].reason);
    free (done);
    if (was == PROC_QUITTING || atomic_load (&w->stop) || halted) {
        p->state = PROC_DOWN;
        p->restart_at_ns = INT64_MAX;
        bool clean = status >= 0 && WIFEXITED (status) && WEXITSTATUS (status) == 0;
        if (!clean) /* QUIT asks for exit 0 */
            w->host->log (w->ctx, FANHUB_LOG_WARNING, "worker %zu (pid %d) %s after QUIT", p->index,
                          (int) pid, cause);
        return;
    }
    s_schedule_restart (w, p, now);
    if (w->m_crashes) {
        w->host->metric_add (w->m_crashes, 1);
        if (hung)
            w->host->metric_add (w->m_hangs, 1);
    }
    w->host->log (w->ctx, FANHUB_LOG_ERROR,
                  "worker %zu (pid %d) %s holding %zu message%s; next start in %.1f s", p->index,
                  (int) pid, cause, held, held == 1 ? "" : "s",
                  (double) (p->restart_at_ns - now) / 1e9);
    w->host->set_state (w->ctx, s_any_ready (w) ? FANHUB_STATE_UP : FANHUB_STATE_DOWN,
                        "worker %zu %s%s%s", p->index, cause, p->last_err[0] ? ": " : "",
                        p->last_err);
}

static void
s_died (worker_t *w, proc_t *p, const char *cause, int64_t now)
{
    s_end (w, p, cause, false, now);
}

static void
s_start (worker_t *w, proc_t *p, int64_t now)
{
    char err[256];
    if (p->ever_started)
        w->host->count (w->ctx, FANHUB_COUNT_RESTARTS, 1);
    p->ever_started = true;
    p->started_ns = now;
    if (proc_spawn (p, w->argv, w->envp, err, sizeof err) != 0) {
        s_start_failed (w, p, err, now);
        return;
    }
    json_t *hello = json_pack (
        "{s:i, s:s, s:o, s:I, s:I, s:I}", "protocol", WORKER_PROTOCOL, "consumer", w->name,
        "options", json_loads (w->hello_options, 0, NULL), "max_pending", (json_int_t) w->window,
        "prefetch", (json_int_t) w->prefetch, "worker", (json_int_t) p->index);
    char *text = hello ? json_dumps (hello, JSON_COMPACT) : NULL;
    json_decref (hello);
    if (!text || wire_frame (&p->outq, 'H', text, strlen (text)) != 0) {
        free (text);
        s_start_failed (w, p, "out of memory for HELLO", now);
        return;
    }
    free (text);
    p->state = PROC_HELLO;
    p->deadline_ns = now + w->handshake_ns;
}

static void
s_ready (worker_t *w, proc_t *p, const uint8_t *payload, size_t size, int64_t now)
{
    json_error_t error;
    json_t *ready = json_loadb ((const char *) payload, size, JSON_ALLOW_NUL, &error);
    json_int_t protocol = p->protocol = json_integer_value (json_object_get (ready, "protocol"));
    const char *name = json_string_value (json_object_get (ready, "name"));
    const char *version = json_string_value (json_object_get (ready, "version"));
    snprintf (p->name, sizeof p->name, "%s %s", name ? name : "?", version ? version : "?");
    json_decref (ready);
    if (protocol < WORKER_PROTOCOL_MIN || protocol > WORKER_PROTOCOL) {
        char why[160];
        snprintf (why, sizeof why, "READY speaks protocol %lld; the hub speaks %d to %d",
                  (long long) protocol, WORKER_PROTOCOL_MIN, WORKER_PROTOCOL);
        s_start_failed (w, p, why, now);
        return;
    }
    p->state = PROC_READY;
    pthread_mutex_lock (&w->lock);
    if (p->refused_for_now) { /* counted once, as ready now */
        p->refused_for_now = false;
        w->start_down--;
    }
    w->ready_count++;
    pthread_cond_broadcast (&w->ready_cond);
    pthread_mutex_unlock (&w->lock);
    w->host->log (w->ctx, FANHUB_LOG_INFO, "worker %zu (pid %d) ready: %s", p->index, (int) p->pid,
                  p->name);
    w->host->set_state (w->ctx, FANHUB_STATE_UP, NULL);
}

static void
s_refused (worker_t *w, proc_t *p, const uint8_t *payload, size_t size, int64_t now)
{
    json_t *error = json_loadb ((const char *) payload, size, JSON_ALLOW_NUL, NULL);
    const char *text = json_string_value (json_object_get (error, "error"));
    char why[512];
    snprintf (why, sizeof why, "refused to start: %s", text ? text : "(ERROR without a reason)");
    bool for_now = json_is_true (json_object_get (error, "retry"));
    json_decref (error);
    s_start_failed_as (w, p, why, for_now, now);
}

/* HALT: the consumer takes no more messages (fedora-messaging's
   HaltConsumer). What the halting worker held and what waits fails, so
   that it is a dead letter to replay once the cause is fixed (as
   fedora-messaging's nack without requeue sends it to the dead-letter
   exchange); the other workers finish theirs and quit. */
static void
s_halt (worker_t *w, proc_t *p, const uint8_t *payload, size_t size, int64_t now)
{
    json_t *halt = json_loadb ((const char *) payload, size, JSON_ALLOW_NUL, NULL);
    const char *reason = json_string_value (json_object_get (halt, "reason"));
    worker_done_t *done = calloc ((size_t) w->cap, sizeof *done);
    size_t count = 0;
    pthread_mutex_lock (&w->lock);
    w->halted = true;
    fanhub_utf8_format (w->halt_reason, sizeof w->halt_reason, "halted by worker %zu: %s", p->index,
                        reason ? reason : "");
    for (size_t i = 0; done && i < (size_t) w->cap; i++) {
        job_t *job = &w->jobs[i];
        if (!job->used || (job->proc != -1 && job->proc != (ssize_t) p->index))
            continue;
        done[count] = (worker_done_t){.ticket = job->ticket, .result = FANHUB_FAIL};
        fanhub_utf8_format (done[count++].reason, sizeof done->reason, "the consumer is %s",
                            w->halt_reason);
        worker_free_job (w, job);
    }
    w->wcount = 0;
    p->in_flight = 0;
    p->running = 0;
    pthread_mutex_unlock (&w->lock);
    json_decref (halt);
    /* Halted before its messages fail: an AMQP source that sees them
       fail knows it is halted and stops consuming (source_amqp.h). */
    w->host->set_state (w->ctx, FANHUB_STATE_HALTED, "%s", w->halt_reason);
    for (size_t i = 0; i < count; i++)
        w->host->complete_reason (w->ctx, done[i].ticket, done[i].result, done[i].reason);
    free (done);
    w->host->log (w->ctx, FANHUB_LOG_ERROR,
                  "%s; the consumer takes no more messages until the hub starts again "
                  "(they fail, as dead letters to replay)",
                  w->halt_reason);
    for (size_t i = 0; i < w->nprocs; i++) {
        proc_t *q = &w->procs[i];
        if (q->state == PROC_READY && wire_frame (&q->outq, 'Q', NULL, 0) == 0) {
            q->state = PROC_QUITTING;
            q->deadline_ns = now + w->shutdown_ns;
        }
    }
}

/* The oldest of p's messages not started yet starts when p runs none
   (a worker works its messages one after another): from here the hub's
   consume_timeout runs for it. Under lock. */
static void
s_start_next (worker_t *w, proc_t *p, int64_t now)
{
    for (size_t i = 0; i < p->in_flight && p->running == 0; i++) {
        job_t *job = &w->jobs[p->held[i]];
        if (job->started)
            continue;
        job->started = true;
        job->started_ns = now;
        p->running++;
        if (FANHUB_HOST_HAS_1_5 (w->host))
            w->host->ticket_started (w->ctx, job->ticket);
    }
}

/* Takes slot out of p's held messages (in order). Under lock. */
static void
s_unhold (proc_t *p, size_t slot)
{
    for (size_t i = 0; i < p->in_flight; i++) {
        if (p->held[i] != slot)
            continue;
        memmove (&p->held[i], &p->held[i + 1], (p->in_flight - i - 1) * sizeof *p->held);
        p->in_flight--;
        return;
    }
}

/* An ANSWER: the message is done. False on a protocol error. */
static bool
s_answer (worker_t *w, proc_t *p, const uint8_t *payload, size_t size, int64_t now)
{
    uint64_t wire;
    uint8_t verdict;
    const char *reason;
    size_t reason_size;
    if (wire_answer (payload, size, &wire, &verdict, &reason, &reason_size) != 0)
        return false;
    size_t slot = (size_t) (wire & 0xffffffffu);
    pthread_mutex_lock (&w->lock);
    job_t *job = slot < (size_t) w->cap ? &w->jobs[slot] : NULL;
    if (!job || !job->used || job->wire != wire || job->proc != (ssize_t) p->index) {
        bool halted = w->halted; /* then it may be one failed at the halt */
        pthread_mutex_unlock (&w->lock);
        return halted;
    }
    fanhub_ticket_t ticket = job->ticket;
    if (job->started)
        p->running--;
    crash_forget (w, job->seq);
    s_unhold (p, slot);
    worker_free_job (w, job);
    p->solo = false;
    p->failures = 0;
    s_start_next (w, p, now);
    pthread_mutex_unlock (&w->lock);
    static const fanhub_result_t results[] = {FANHUB_OK, FANHUB_RETRY, FANHUB_FAIL, FANHUB_OK};
    char text[WORKER_REASON_MAX + 1];
    size_t n = reason_size < WORKER_REASON_MAX ? reason_size : WORKER_REASON_MAX;
    memcpy (text, reason, n);
    text[n] = '\0';
    if (verdict == WORKER_VERDICT_DROP)
        w->host->count (w->ctx, FANHUB_COUNT_SKIPPED, 1);
    w->host->complete_reason (w->ctx, ticket, results[verdict], text);
    return true;
}

/* One frame from p. False when p is gone (killed for a protocol error, or
   a failed handshake). */
static bool
s_frame (worker_t *w, proc_t *p, uint8_t type, const uint8_t *payload, size_t size, int64_t now)
{
    char why[160];
    if (type == 'L' && size >= 1) {
        /* syslog levels: 0-3 error, 4 warning, 5-6 info, 7 debug */
        fanhub_log_level_t level = payload[0] <= 3   ? FANHUB_LOG_ERROR
                                   : payload[0] == 4 ? FANHUB_LOG_WARNING
                                   : payload[0] <= 6 ? FANHUB_LOG_INFO
                                                     : FANHUB_LOG_DEBUG;
        /* A frame of several lines (a traceback): each one named, and
           each cut on its own, so that a long one keeps its last line. */
        const char *text = (const char *) payload + 1, *end = text + size - 1;
        while (text < end) {
            const char *nl = memchr (text, '\n', (size_t) (end - text));
            size_t len = (size_t) ((nl ? nl : end) - text);
            char line[WORKER_LINE_MAX];
            size_t n = len < sizeof line - 1 ? len : sizeof line - 1;
            memcpy (line, text, n);
            line[n] = '\0';
            if (n)
                worker_log_line (w, p, level, line, n < len);
            text += len + (nl != NULL);
        }
        return true;
    }
    if (p->state == PROC_HELLO && (type == 'R' || type == 'E')) {
        if (type == 'R')
            s_ready (w, p, payload, size, now);
        else
            s_refused (w, p, payload, size, now);
        return p->state == PROC_READY;
    }
    if (type == 'A' && p->state != PROC_HELLO) {
        if (s_answer (w, p, payload, size, now))
            return true;
        snprintf (why, sizeof why,
                  "protocol error: a malformed ANSWER, or one to a ticket it "
                  "does not hold");
    }
    else if (type == 'X' && p->state == PROC_READY) {
        s_halt (w, p, payload, size, now);
        return true;
    }
    else if (type == 'P' && p->state == PROC_READY) {
        if (worker_publish_frame (w, p, payload, size, why, sizeof why))
            return true;
    }
    else
        snprintf (why, sizeof why, "protocol error: a frame of type 0x%02x where it has no place",
                  type);
    w->host->log (w->ctx, FANHUB_LOG_ERROR, "worker %zu: %s; killed", p->index, why);
    s_died (w, p, why, now);
    return false;
}

/* Reads what p wrote on its socket. */
static void
s_read (worker_t *w, proc_t *p, int64_t now)
{
    for (int chunk = 0; chunk < 4 && p->sock >= 0; chunk++) {
        if (wbuf_reserve (&p->in, 65536) != 0) {
            s_died (w, p, "cannot read: out of memory", now);
            return;
        }
        ssize_t n = recv (p->sock, p->in.data + p->in.size, p->in.cap - p->in.size, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            s_died (w, p, NULL, now);
            return;
        }
        if (n < 0)
            return;
        p->in.size += (size_t) n;
        size_t at = 0;
        while (true) {
            uint8_t type;
            const uint8_t *payload;
            size_t size, used;
            char err[160], why[200];
            int rc = wire_next (p->in.data + at, p->in.size - at, WORKER_FRAME_MAX_IN, &type,
                                &payload, &size, &used, err, sizeof err);
            if (rc == 0)
                break;
            if (rc < 0) {
                snprintf (why, sizeof why, "protocol error: %s", err);
                w->host->log (w->ctx, FANHUB_LOG_ERROR, "worker %zu: %s; killed", p->index, why);
                s_died (w, p, why, now);
                return;
            }
            if (!s_frame (w, p, type, payload, size, now))
                return; /* gone; its buffer was reset */
            at += used;
        }
        wbuf_shift (&p->in, at);
        if ((size_t) n < 65536)
            return;
    }
}

static void
s_write (worker_t *w, proc_t *p, int64_t now)
{
    while (p->outq.size) {
        ssize_t n = send (p->sock, p->outq.data, p->outq.size, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            wbuf_shift (&p->outq, (size_t) n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        s_died (w, p, NULL, now);
        return;
    }
}

/* The ready process with the fewest in flight (none but an idle one for
   a suspect), or NULL. */
static proc_t *
s_pick (worker_t *w, bool suspect)
{
    proc_t *best = NULL;
    for (size_t i = 0; i < w->nprocs; i++) {
        proc_t *p = &w->procs[i];
        if (p->state != PROC_READY || p->solo || (suspect && p->in_flight)
            || p->in_flight >= (size_t) w->prefetch)
            continue;
        if (!best || p->in_flight < best->in_flight)
            best = p;
    }
    return best;
}

/* Hands waiting messages to processes. */
static void
s_assign (worker_t *w, int64_t now)
{
    pthread_mutex_lock (&w->lock);
    size_t cap = (size_t) w->cap;
    for (size_t n = w->wcount; n > 0 && !w->halted; n--) {
        size_t slot = w->waitq[w->whead];
        w->whead = (w->whead + 1) % cap;
        w->wcount--;
        job_t *job = &w->jobs[slot];
        proc_t *p = s_pick (w, job->suspect);
        if (!p || wbuf_append (&p->outq, job->frame, job->frame_size) != 0) {
            w->waitq[(w->whead + w->wcount) % cap] = slot; /* stays, in order */
            w->wcount++;
            continue;
        }
        job->proc = (ssize_t) p->index;
        job->started = false;
        p->held[p->in_flight++] = slot;
        s_start_next (w, p, now);
        p->solo = job->suspect;
    }
    pthread_mutex_unlock (&w->lock);
}

/* Handshakes, quits and answers overdue: the process is killed. */
static void
s_timeouts (worker_t *w, int64_t now)
{
    char why[160];
    for (size_t i = 0; i < w->nprocs; i++) {
        proc_t *p = &w->procs[i];
        pid_t pid = p->pid;
        int status = p->state != PROC_DOWN ? proc_try_reap (p) : -1;
        if (status >= 0) {
            /* Gone, though something it started may keep its socket
               open: that goes with it, and what it answered is read. */
            kill (-pid, SIGKILL);
            s_read (w, p, now);
            if (p->state != PROC_DOWN && p->pid == 0)
                s_died (w, p, NULL, now);
            continue;
        }
        if (p->state == PROC_HELLO && now >= p->deadline_ns) {
            snprintf (why, sizeof why, "no READY within handshake_timeout (%.1f s)",
                      (double) w->handshake_ns / 1e9);
            s_start_failed (w, p, why, now);
        }
        else if (p->state == PROC_QUITTING && now >= p->deadline_ns)
            s_died (w, p, "still running at shutdown_timeout: killed", now);
    }
    if (w->consume_timeout_ns <= 0)
        return;
    /* A message started consume_timeout ago and not answered (the hub's
       ticket expires then too): its worker is silent, or answered the
       ones behind it and skipped it. Those queued behind do not count. */
    bool late[w->nprocs];
    pthread_mutex_lock (&w->lock);
    for (size_t i = 0; i < w->nprocs; i++) {
        proc_t *p = &w->procs[i];
        late[i] = false;
        for (size_t k = 0; k < p->in_flight && !late[i]; k++) {
            const job_t *job = &w->jobs[p->held[k]];
            late[i] = job->started && now - job->started_ns > w->consume_timeout_ns;
        }
    }
    pthread_mutex_unlock (&w->lock);
    for (size_t i = 0; i < w->nprocs; i++) {
        if (!late[i] || w->procs[i].state != PROC_READY)
            continue;
        snprintf (why, sizeof why, "stopped answering (consume_timeout %.1f s) and was killed",
                  (double) w->consume_timeout_ns / 1e9);
        s_end (w, &w->procs[i], why, true, now);
    }
}

/* At stop: QUIT to every ready process; the others are killed. */
static void
s_quit_all (worker_t *w, int64_t now)
{
    for (size_t i = 0; i < w->nprocs; i++) {
        proc_t *p = &w->procs[i];
        if (p->state == PROC_READY && wire_frame (&p->outq, 'Q', NULL, 0) == 0) {
            p->state = PROC_QUITTING;
            p->deadline_ns = now + w->shutdown_ns;
        }
        else if (p->state != PROC_QUITTING) {
            proc_kill (p);
            p->state = PROC_DOWN;
            p->restart_at_ns = INT64_MAX;
        }
    }
}

/* The poll set and its timeout; false when there is nothing left to do
   (stopping, every process gone). */
static bool
s_poll (worker_t *w, int64_t now, bool scanning)
{
    struct pollfd fds[1 + 3 * w->nprocs];
    proc_t *owner[1 + 3 * w->nprocs];
    size_t n = 0;
    fds[n] = (struct pollfd){.fd = w->wake_fd, .events = POLLIN};
    owner[n++] = NULL;
    int64_t next = INT64_MAX;
    bool alive = false;
    for (size_t i = 0; i < w->nprocs; i++) {
        proc_t *p = &w->procs[i];
        if (p->state == PROC_DOWN) {
            if (p->restart_at_ns < next)
                next = p->restart_at_ns;
            continue;
        }
        alive = true;
        if (p->state != PROC_READY && p->deadline_ns < next)
            next = p->deadline_ns;
        scanning |= p->state == PROC_HELLO; /* an exit is seen by reaping too */
        fds[n] = (struct pollfd){.fd = p->sock, .events = POLLIN | (p->outq.size ? POLLOUT : 0)};
        owner[n++] = p;
        if (p->out >= 0) {
            fds[n] = (struct pollfd){.fd = p->out, .events = POLLIN};
            owner[n++] = p;
        }
        if (p->err >= 0) {
            fds[n] = (struct pollfd){.fd = p->err, .events = POLLIN};
            owner[n++] = p;
        }
    }
    if (atomic_load (&w->stop) && !alive)
        return false;
    if (scanning && now + SCAN_NS < next)
        next = now + SCAN_NS;
    int timeout = next == INT64_MAX ? -1 : next <= now ? 0 : (int) ((next - now) / 1000000 + 1);
    if (poll (fds, n, timeout) <= 0)
        return true;
    now = worker_now_ns ();
    if (fds[0].revents) {
        uint64_t count;
        ssize_t got = read (w->wake_fd, &count, sizeof count);
        (void) got;
    }
    for (size_t i = 1; i < n; i++) {
        proc_t *p = owner[i];
        if (!fds[i].revents || p->state == PROC_DOWN)
            continue;
        if (fds[i].fd == p->sock) {
            if (fds[i].revents & POLLOUT)
                s_write (w, p, now);
            if (p->sock >= 0 && (fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                s_read (w, p, now);
        }
        else if (fds[i].fd == p->out
                 && !proc_read_lines (p, p->out, &p->out_line, worker_emit_line, w)) {
            close (p->out);
            p->out = -1;
        }
        else if (fds[i].fd == p->err
                 && !proc_read_lines (p, p->err, &p->err_line, worker_emit_line, w)) {
            close (p->err);
            p->err = -1;
        }
    }
    return true;
}

void *
loop_thread (void *arg)
{
    worker_t *w = arg;
    int64_t now = worker_now_ns ();
    w->line_last_ns = now;
    w->line_credit_ns = WORKER_LINE_BURST_NS;
    for (size_t i = 0; i < w->nprocs; i++)
        s_start (w, &w->procs[i], now);
    bool quitting = false;
    int64_t last_scan = now;
    while (true) {
        now = worker_now_ns ();
        if (atomic_load (&w->stop) && !quitting) {
            quitting = true;
            s_quit_all (w, now);
        }
        for (size_t i = 0; i < w->nprocs && !quitting; i++) {
            proc_t *p = &w->procs[i];
            if (p->state == PROC_DOWN && now >= p->restart_at_ns && !w->halted)
                s_start (w, p, now);
        }
        s_assign (w, now);
        size_t held = 0;
        for (size_t i = 0; i < w->nprocs; i++) {
            if (w->procs[i].state != PROC_DOWN && w->procs[i].outq.size)
                s_write (w, &w->procs[i], now);
            held += w->procs[i].in_flight;
        }
        if (w->m_pending) /* as of the last round: cheap, a store */
            w->host->metric_set (w->m_pending, (int64_t) held);
        if (now - last_scan >= SCAN_NS) {
            s_timeouts (w, now);
            last_scan = now;
        }
        pthread_mutex_lock (&w->lock);
        bool scanning = w->wcount < (size_t) w->cap - w->nfree; /* some in flight */
        pthread_mutex_unlock (&w->lock);
        if (!s_poll (w, now, scanning || quitting))
            break;
    }
    return NULL;
}
