/*  loop - the worker plugin's I/O thread.

    One thread per consumer does every read and write of its workers'
    sockets and pipes, in one poll() loop: consume only queues a message
    and wakes it. Each pass it hands waiting messages to processes (the
    one with the fewest in flight; a message a dead worker held goes
    alone to an idle one, so that an innocent neighbour of a poison
    message is never blamed for its crashes), writes what the processes
    have to read, reads their answers and completes the messages, logs
    their output lines, and starts again those that died, with backoff.
    What a process's state means, from its start to its end, is life.c's:
    this file calls it as frames come and processes end, never the other
    way.
*/
#define _GNU_SOURCE

#include "worker.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

/* A line of a worker's stdout or stderr (or its LOG frames): logged with
   the consumer's name and the worker's index, at most 100 a second, and
   what was held back said at most once a second. Control characters
   become '?': a worker's text cannot forge or break the hub's lines. */
static void
s_log_line (worker_t *w, proc_t *p, fanhub_log_level_t level, const char *line, bool cut)
{
    int64_t now = worker_now_ns ();
    w->line_credit_ns += now - w->line_last_ns;
    w->line_last_ns = now;
    if (w->line_credit_ns > WORKER_LINE_BURST_NS)
        w->line_credit_ns = WORKER_LINE_BURST_NS;
    if (w->line_credit_ns < WORKER_LINE_COST_NS) {
        w->lines_dropped++;
        return;
    }
    w->line_credit_ns -= WORKER_LINE_COST_NS;
    if (w->lines_dropped && now - w->lines_said_ns >= WORKER_LINE_BURST_NS) {
        w->host->log (w->ctx, FANHUB_LOG_WARNING,
                      "workers: %llu lines not logged (more than 100 a second)",
                      (unsigned long long) w->lines_dropped);
        w->lines_dropped = 0;
        w->lines_said_ns = now;
    }
    char clean[WORKER_LINE_MAX];
    size_t n = 0;
    for (; line[n] && n < sizeof clean - 1; n++)
        clean[n] = (unsigned char) line[n] < 0x20 && line[n] != '\t' ? '?' : line[n];
    clean[n] = '\0';
    w->host->log (w->ctx, level, "worker %zu: %s%s", p->index, clean, cut ? " [cut]" : "");
}

static void
s_emit_line (void *arg, proc_t *p, bool is_err, const char *line)
{
    if (is_err)
        snprintf (p->last_err, sizeof p->last_err, "%s", line);
    s_log_line (arg, p, is_err ? FANHUB_LOG_WARNING : FANHUB_LOG_INFO, line,
                is_err ? p->err_line.cut : p->out_line.cut);
}

/* p is gone or must go (life_end); what it wrote on stderr last is
   logged first, as it says why. hung: killed for holding a message past
   consume_timeout. */
static void
s_end (worker_t *w, proc_t *p, const char *cause, bool hung, int64_t now)
{
    if (p->err >= 0)
        proc_read_lines (p, p->err, &p->err_line, s_emit_line, w);
    life_end (w, p, cause, hung, now);
}

static void
s_died (worker_t *w, proc_t *p, const char *cause, int64_t now)
{
    s_end (w, p, cause, false, now);
}

/* A protocol error of p (why says it): logged, and p killed. */
static void
s_broken (worker_t *w, proc_t *p, const char *why, int64_t now)
{
    w->host->log (w->ctx, FANHUB_LOG_ERROR, "worker %zu: %s; killed", p->index, why);
    s_died (w, p, why, now);
}

/* The place of the i-th message p holds, oldest first (i < prefetch). */
static size_t *
s_held (const worker_t *w, proc_t *p, size_t i)
{
    size_t at = p->held_head + i;
    return &p->held[at < (size_t) w->prefetch ? at : at - (size_t) w->prefetch];
}

/* The oldest of p's messages not started yet starts when p runs none
   (a worker works its messages one after another): from here the hub's
   consume_timeout runs for it. Under lock. */
static void
s_start_next (worker_t *w, proc_t *p, int64_t now)
{
    for (size_t i = 0; i < p->in_flight && p->running == 0; i++) {
        job_t *job = &w->jobs[*s_held (w, p, i)];
        if (job->started)
            continue;
        job->started = true;
        job->started_ns = now;
        p->running++;
        if (FANHUB_HOST_HAS_1_5 (w->host))
            w->host->ticket_started (w->ctx, job->ticket);
    }
}

/* Takes slot out of p's held messages (in order): the oldest, as a
   worker answers in order, at once; another by moving those after it
   (the array moved the rest for every answer: 8 KB at prefetch 1000).
   Under lock. */
static void
s_unhold (const worker_t *w, proc_t *p, size_t slot)
{
    for (size_t i = 0; i < p->in_flight; i++) {
        if (*s_held (w, p, i) != slot)
            continue;
        if (i == 0)
            p->held_head = p->held_head + 1 < (size_t) w->prefetch ? p->held_head + 1 : 0;
        for (; i > 0 && i + 1 < p->in_flight; i++)
            *s_held (w, p, i) = *s_held (w, p, i + 1);
        p->in_flight--;
        return;
    }
}

/* Answers taken under the lock at most at once (then the rest). */
#define ANSWER_BATCH 64

typedef struct {
    fanhub_ticket_t ticket;
    uint8_t verdict;
    const char *reason; /* in p's input buffer */
    size_t reason_size;
    uint8_t *frame; /* its MESSAGE frame, freed after the lock */
} s_answered_t;

/* The ANSWER frames of p at data[*at..size), one after another: each
   message done under one lock for the run (up to ANSWER_BATCH), the
   next one started once (s_start_next: those answered before the hub saw
   them start need no clock), and each completed once the lock is let go.
   *at moves past the frames taken. False on a protocol error (a
   malformed ANSWER, or one to a ticket p does not hold); those before it
   are completed. */
static bool
s_answers (worker_t *w, proc_t *p, const uint8_t *data, size_t size, size_t *at, int64_t now)
{
    s_answered_t done[ANSWER_BATCH];
    size_t n = 0;
    bool ok = true;
    pthread_mutex_lock (&w->lock);
    while (n < ANSWER_BATCH) {
        uint8_t type;
        const uint8_t *payload;
        size_t psize, used;
        char err[160];
        if (wire_next (data + *at, size - *at, WORKER_FRAME_MAX_IN, &type, &payload, &psize, &used,
                       err, sizeof err)
                != 1
            || type != 'A')
            break; /* the caller reads it (or says what is wrong with it) */
        s_answered_t *d = &done[n];
        uint64_t wire;
        if (wire_answer (payload, psize, &wire, &d->verdict, &d->reason, &d->reason_size) != 0) {
            ok = false;
            break;
        }
        size_t slot = (size_t) (wire & 0xffffffffu);
        job_t *job = slot < (size_t) w->cap ? &w->jobs[slot] : NULL;
        if (!job || !job->used || job->wire != wire || job->proc != (ssize_t) p->index) {
            ok = w->halted; /* then it may be one failed at the halt */
            if (!ok)
                break;
            *at += used;
            continue;
        }
        *at += used;
        d->ticket = job->ticket;
        d->frame = job->frame;
        job->frame = NULL;
        if (job->started)
            p->running--;
        crash_forget (w, job->seq);
        s_unhold (w, p, slot);
        worker_free_job (w, job);
        n++;
    }
    if (n) {
        p->solo = false;
        p->failures = 0;
        s_start_next (w, p, now);
    }
    pthread_mutex_unlock (&w->lock);
    static const fanhub_result_t results[] = {FANHUB_OK, FANHUB_RETRY, FANHUB_FAIL, FANHUB_OK};
    for (size_t i = 0; i < n; i++) {
        free (done[i].frame);
        char text[WORKER_REASON_MAX + 1];
        size_t len = done[i].reason_size < WORKER_REASON_MAX ? done[i].reason_size
                                                             : WORKER_REASON_MAX;
        memcpy (text, done[i].reason, len);
        text[len] = '\0';
        if (done[i].verdict == WORKER_VERDICT_DROP)
            w->host->count (w->ctx, FANHUB_COUNT_SKIPPED, 1);
        w->host->complete_reason (w->ctx, done[i].ticket, results[done[i].verdict], text);
    }
    return ok;
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
                s_log_line (w, p, level, line, n < len);
            text += len + (nl != NULL);
        }
        return true;
    }
    if (p->state == PROC_HELLO && (type == 'R' || type == 'E')) {
        if (type == 'R')
            life_ready (w, p, payload, size, now);
        else
            life_refused (w, p, payload, size, now);
        return p->state == PROC_READY;
    }
    if (type == 'X' && p->state == PROC_READY) {
        life_halt (w, p, payload, size, now);
        return true;
    }
    else if (type == 'P' && p->state == PROC_READY) {
        if (worker_publish_frame (w, p, payload, size, why, sizeof why))
            return true;
    }
    else
        snprintf (why, sizeof why, "protocol error: a frame of type 0x%02x where it has no place",
                  type);
    s_broken (w, p, why, now);
    return false;
}

/* Reads what p wrote on its socket. Not inlined (nor s_write, s_assign):
   the perf guard's worker case counts the hub's side of a message from
   these (tests/perf/perf_guard.py). */
__attribute__ ((noinline)) static void
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
                s_broken (w, p, why, now);
                return;
            }
            if (type == 'A' && p->state != PROC_HELLO) {
                if (s_answers (w, p, p->in.data, p->in.size, &at, now))
                    continue;
                s_broken (w, p,
                          "protocol error: a malformed ANSWER, or one to a ticket it does not "
                          "hold",
                          now);
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

__attribute__ ((noinline)) static void
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
__attribute__ ((noinline)) static void
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
        *s_held (w, p, p->in_flight++) = slot;
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
            life_start_failed (w, p, why, now);
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
            const job_t *job = &w->jobs[*s_held (w, p, k)];
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
                 && !proc_read_lines (p, p->out, &p->out_line, s_emit_line, w)) {
            close (p->out);
            p->out = -1;
        }
        else if (fds[i].fd == p->err
                 && !proc_read_lines (p, p->err, &p->err_line, s_emit_line, w)) {
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
        life_start (w, &w->procs[i], now);
    bool quitting = false;
    int64_t last_scan = now;
    while (true) {
        now = worker_now_ns ();
        if (atomic_load (&w->stop) && !quitting) {
            quitting = true;
            life_quit_all (w, now);
        }
        for (size_t i = 0; i < w->nprocs && !quitting; i++) {
            proc_t *p = &w->procs[i];
            if (p->state == PROC_DOWN && now >= p->restart_at_ns && !w->halted)
                life_start (w, p, now);
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
