/*  life - a worker process's life cycle, on the I/O thread (loop.c).

    A process is started (spawned, HELLO queued) and waits for READY
    within handshake_timeout; READY makes it take messages, ERROR is a
    start refused (for now, when the consumer's own start-up said so). A
    start that fails, and a process that ends, is started again after a
    backoff that doubles up to restart_max; what an ended process held is
    settled first (crash.c). HALT stops the consumer: what waits fails, the
    other processes are asked to QUIT. At stop every ready process gets
    QUIT and the rest are killed. This file moves a process from state to
    state; reading and writing its socket and pipes is loop.c's, which
    calls these as frames come and processes end.
*/
#include "worker.h"

#include <fanhub/sdk.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

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

void
life_start_failed (worker_t *w, proc_t *p, const char *why, int64_t now)
{
    s_start_failed_as (w, p, why, false, now);
}

/* (worker.h) loop.c has logged what p wrote on stderr last; a hung p's
   messages are settled as crash.c's s_settle_hung says. */
void
life_end (worker_t *w, proc_t *p, const char *cause, bool hung, int64_t now)
{
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
        life_start_failed (w, p, why, now);
        return;
    }
    worker_done_t *done = calloc ((size_t) w->cap, sizeof *done);
    pthread_mutex_lock (&w->lock);
    size_t count = done ? crash_settle (w, p, cause, hung, now, done) : 0;
    bool halted = w->halted;
    pthread_mutex_unlock (&w->lock);
    bool ending = was == PROC_QUITTING || atomic_load (&w->stop) || halted;
    if (!ending) { /* said before its messages fail: who sees them fail sees why */
        s_schedule_restart (w, p, now);
        if (w->m_crashes) {
            w->host->metric_add (w->m_crashes, 1);
            if (hung)
                w->host->metric_add (w->m_hangs, 1);
        }
        w->host->log (w->ctx, FANHUB_LOG_ERROR,
                      "worker %zu (pid %d) %s holding %zu message%s; next start in %.1f s",
                      p->index, (int) pid, cause, held, held == 1 ? "" : "s",
                      (double) (p->restart_at_ns - now) / 1e9);
        w->host->set_state (w->ctx, s_any_ready (w) ? FANHUB_STATE_UP : FANHUB_STATE_DOWN,
                            "worker %zu %s%s%s", p->index, cause, p->last_err[0] ? ": " : "",
                            p->last_err);
    }
    for (size_t i = 0; i < count; i++)
        w->host->complete_reason (w->ctx, done[i].ticket, done[i].result, done[i].reason);
    free (done);
    if (ending) {
        p->state = PROC_DOWN;
        p->restart_at_ns = INT64_MAX;
        bool clean = status >= 0 && WIFEXITED (status) && WEXITSTATUS (status) == 0;
        if (!clean) /* QUIT asks for exit 0 */
            w->host->log (w->ctx, FANHUB_LOG_WARNING, "worker %zu (pid %d) %s after QUIT", p->index,
                          (int) pid, cause);
    }
}

void
life_start (worker_t *w, proc_t *p, int64_t now)
{
    char err[256];
    if (p->ever_started)
        w->host->count (w->ctx, FANHUB_COUNT_RESTARTS, 1);
    p->ever_started = true;
    p->started_ns = now;
    if (proc_spawn (p, w->argv, w->envp, err, sizeof err) != 0) {
        life_start_failed (w, p, err, now);
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
        life_start_failed (w, p, "out of memory for HELLO", now);
        return;
    }
    free (text);
    p->state = PROC_HELLO;
    p->deadline_ns = now + w->handshake_ns;
}

void
life_ready (worker_t *w, proc_t *p, const uint8_t *payload, size_t size, int64_t now)
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
        life_start_failed (w, p, why, now);
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

void
life_refused (worker_t *w, proc_t *p, const uint8_t *payload, size_t size, int64_t now)
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
void
life_halt (worker_t *w, proc_t *p, const uint8_t *payload, size_t size, int64_t now)
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

/* At stop: QUIT to every ready process; the others are killed. */
void
life_quit_all (worker_t *w, int64_t now)
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
