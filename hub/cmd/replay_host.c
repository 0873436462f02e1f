/*  replay_host - tickets and completions for `fanhub replay`. See
    replay_host.h. */
#include "replay_host.h"

#include "clock.h"
#include "host.h"

#include <fanhub/sdk.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One completion, until replay took it. */
typedef struct s_done {
    fanhub_ticket_t ticket;
    fanhub_result_t result;
    bool dropped;
    char *reason;
    struct s_done *next;
} s_done_t;

static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t s_completed = PTHREAD_COND_INITIALIZER;
static s_done_t *s_dones;             /* under s_lock */
static size_t s_window;               /* under s_lock */
static fanhub_ticket_t s_current;     /* the replay thread's */
static _Thread_local bool s_skipping; /* a DROP's count came before its complete */
static fanhub_host_t s_table;
static pthread_once_t s_once = PTHREAD_ONCE_INIT;

static fanhub_ticket_t
s_msg_ticket (const fanhub_msg_t *msg)
{
    (void) msg;
    return s_current;
}

static uint32_t
s_msg_attempt (const fanhub_msg_t *msg)
{
    (void) msg;
    return 1; /* replay reports a retry; it never tries again */
}

static void
s_complete_reason (fanhub_ctx_t *ctx, fanhub_ticket_t ticket, fanhub_result_t result,
                   const char *reason)
{
    (void) ctx;
    s_done_t *done = calloc (1, sizeof *done);
    bool dropped = s_skipping;
    s_skipping = false;
    if (!done) {
        fprintf (stderr, "fanhub replay: out of memory: a completion is lost\n");
        return;
    }
    *done = (s_done_t){ticket, result, dropped, reason && *reason ? strdup (reason) : NULL, NULL};
    pthread_mutex_lock (&s_lock);
    done->next = s_dones;
    s_dones = done;
    pthread_cond_broadcast (&s_completed);
    pthread_mutex_unlock (&s_lock);
}

static void
s_complete (fanhub_ctx_t *ctx, fanhub_ticket_t ticket, fanhub_result_t result)
{
    s_complete_reason (ctx, ticket, result, NULL);
}

static void
s_count (fanhub_ctx_t *ctx, int counter, uint64_t n)
{
    (void) ctx;
    (void) n;
    if (counter == FANHUB_COUNT_SKIPPED)
        s_skipping = true;
}

static int64_t
s_consumer_setting (fanhub_ctx_t *ctx, const char *name)
{
    (void) ctx;
    /* A lone consumer's defaults: one worker, no consume_timeout (replay
       waits with its own --timeout), a single attempt. */
    if (strcmp (name, "workers") == 0 || strcmp (name, "retry.max_attempts") == 0)
        return 1;
    if (strcmp (name, "max_pending") == 0)
        return 1000;
    if (strcmp (name, "consume_timeout_ms") == 0)
        return 0;
    if (strcmp (name, "max_crashes") == 0)
        return 3;
    return -1;
}

static void s_set_state (fanhub_ctx_t *ctx, int state, const char *fmt, ...) FANHUB_PRINTF (3, 4);

static void
s_set_state (fanhub_ctx_t *ctx, int state, const char *fmt, ...)
{
    char error[256] = "";
    if (fmt) {
        va_list args;
        va_start (args, fmt);
        fanhub_utf8_vformat (error, sizeof error, fmt, args);
        va_end (args);
    }
    if (state != FANHUB_STATE_UP || error[0])
        fprintf (stderr, "fanhub replay: consumer '%s' is %s%s%s\n", ctx->consumer_name,
                 state == FANHUB_STATE_UP     ? "up"
                 : state == FANHUB_STATE_DOWN ? "down"
                                              : "halted",
                 error[0] ? ": " : "", error);
}

static void
s_set_window (fanhub_ctx_t *ctx, size_t n)
{
    (void) ctx;
    pthread_mutex_lock (&s_lock);
    s_window = n;
    pthread_mutex_unlock (&s_lock);
}

static void
s_ticket_started (fanhub_ctx_t *ctx, fanhub_ticket_t ticket)
{
    (void) ctx;
    (void) ticket;
}

static void
s_make (void)
{
    s_table = fh_host;
    s_table.msg_ticket = s_msg_ticket;
    s_table.complete = s_complete;
    s_table.complete_reason = s_complete_reason;
    s_table.consumer_setting = s_consumer_setting;
    s_table.set_state = s_set_state;
    s_table.count = s_count;
    s_table.msg_attempt = s_msg_attempt;
    s_table.set_window = s_set_window;
    s_table.ticket_started = s_ticket_started;
}

const fanhub_host_t *
fh_replay_host (void)
{
    pthread_once (&s_once, s_make);
    return &s_table;
}

void
fh_replay_ticket_set (fanhub_ticket_t ticket)
{
    s_current = ticket;
}

size_t
fh_replay_window (void)
{
    pthread_mutex_lock (&s_lock);
    size_t window = s_window;
    pthread_mutex_unlock (&s_lock);
    return window;
}

/* Under s_lock: takes ticket's record off the list, or NULL. */
static s_done_t *
s_take (fanhub_ticket_t ticket)
{
    for (s_done_t **at = &s_dones; *at; at = &(*at)->next)
        if ((*at)->ticket == ticket) {
            s_done_t *done = *at;
            *at = done->next;
            return done;
        }
    return NULL;
}

bool
fh_replay_wait (fanhub_ticket_t ticket, int64_t deadline_ns, bool (*stop) (void),
                fanhub_result_t *result, bool *dropped, char *reason, size_t size)
{
    pthread_mutex_lock (&s_lock);
    s_done_t *done;
    while (!(done = s_take (ticket)) && fh_clock_mono_ns () < deadline_ns && !(stop && stop ())) {
        /* The condition runs on the wall clock: a short slice, so that a
           stop or the deadline is seen soon either way. */
        struct timespec until;
        clock_gettime (CLOCK_REALTIME, &until);
        until.tv_nsec += 100000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait (&s_completed, &s_lock, &until);
    }
    pthread_mutex_unlock (&s_lock);
    if (!done)
        return false;
    *result = done->result;
    *dropped = done->dropped;
    snprintf (reason, size, "%s", done->reason ? done->reason : "");
    free (done->reason);
    free (done);
    return true;
}
