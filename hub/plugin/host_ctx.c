/*  host_ctx - a consumer's context for its plugin, and the reason a
    plugin gives with its answer. See host_ctx.h. */
#include "host_ctx.h"

#include "log.h"

#include "fanhub/sdk.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* Late completes counted by consumer name once its instance's figures
   are final: the instance's own counter is not read any more. */
struct s_host_gone {
    char *name;
    atomic_uint_fast64_t late;
    struct s_host_gone *next;
};

static pthread_mutex_t s_gone_lock = PTHREAD_MUTEX_INITIALIZER;
static struct s_host_gone *s_gone; /* one per name, never freed */
static fanhub_ctx_t *s_retired;    /* poisoned contexts, never freed */

/* The name's counter, made when missing; NULL when out of memory. */
static struct s_host_gone *
s_gone_of (const char *name)
{
    pthread_mutex_lock (&s_gone_lock);
    struct s_host_gone *gone = s_gone;
    while (gone && strcmp (gone->name, name) != 0)
        gone = gone->next;
    if (!gone && (gone = calloc (1, sizeof *gone))) {
        if ((gone->name = strdup (name))) {
            atomic_init (&gone->late, 0);
            gone->next = s_gone;
            s_gone = gone;
        }
        else {
            free (gone);
            gone = NULL;
        }
    }
    pthread_mutex_unlock (&s_gone_lock);
    return gone;
}

uint64_t
fh_host_late_gone (const char *name)
{
    uint64_t late = 0;
    pthread_mutex_lock (&s_gone_lock);
    for (struct s_host_gone *gone = s_gone; gone; gone = gone->next)
        if (strcmp (gone->name, name) == 0)
            late = atomic_load_explicit (&gone->late, memory_order_relaxed);
    pthread_mutex_unlock (&s_gone_lock);
    return late;
}

fanhub_ctx_t *
fh_host_ctx_new (fh_consumer_t *consumer, const char *name)
{
    fanhub_ctx_t *ctx = calloc (1, sizeof *ctx);
    char *copy = ctx ? strdup (name) : NULL;
    if (!copy) {
        free (ctx);
        return NULL;
    }
    ctx->consumer_name = copy;
    ctx->consumer = consumer;
    atomic_init (&ctx->users, 0);
    atomic_init (&ctx->stale, false);
    atomic_init (&ctx->retired, false);
    atomic_init (&ctx->late_said, false);
    return ctx;
}

void
fh_host_ctx_set_plugin (fanhub_ctx_t *ctx, const char *plugin)
{
    free (ctx->plugin);
    ctx->plugin = plugin ? strdup (plugin) : NULL;
}

void
fh_host_ctx_stale (fanhub_ctx_t *ctx)
{
    if (!ctx || atomic_load (&ctx->stale))
        return;
    ctx->gone = s_gone_of (ctx->consumer_name);
    atomic_store (&ctx->stale, true); /* after gone: a reader of stale sees it */
}

void
fh_host_ctx_retire (fanhub_ctx_t **ctx_p)
{
    fanhub_ctx_t *ctx = *ctx_p;
    if (!ctx)
        return;
    *ctx_p = NULL;
    fh_host_ctx_stale (ctx);
    /* Sequentially consistent with fh_host_ctx_enter: a call either saw
       retired, or is counted in users, which is waited for. */
    atomic_store (&ctx->retired, true);
    while (atomic_load (&ctx->users))
        sched_yield ();
    pthread_mutex_lock (&s_gone_lock);
    ctx->next = s_retired;
    s_retired = ctx;
    pthread_mutex_unlock (&s_gone_lock);
}

fh_consumer_t *
fh_host_ctx_enter (fanhub_ctx_t *ctx)
{
    if (!ctx || !ctx->consumer)
        return NULL;
    atomic_fetch_add (&ctx->users, 1);
    if (atomic_load (&ctx->retired)) {
        atomic_fetch_sub (&ctx->users, 1);
        return NULL;
    }
    return ctx->consumer;
}

void
fh_host_ctx_leave (fanhub_ctx_t *ctx)
{
    atomic_fetch_sub (&ctx->users, 1);
}

void
fh_host_ctx_late (fanhub_ctx_t *ctx, fanhub_ticket_t ticket, const char *call)
{
    if (ctx->gone)
        atomic_fetch_add_explicit (&ctx->gone->late, 1, memory_order_relaxed);
    if (atomic_load (&ctx->retired) && !atomic_exchange (&ctx->late_said, true))
        fh_warning ("%s: consumer '%s', plugin %s: ticket %llu completed after the instance "
                    "was torn down (its fini had returned): ignored, counted in "
                    "completions_late (later ones of this instance are counted only)",
                    call, ctx->consumer_name, ctx->plugin ? ctx->plugin : "?",
                    (unsigned long long) ticket);
}

/* The reason of the consume running on this thread (set_reason). */
_Thread_local char fh_host_reason[256];

void
fh_host_set_reason (const char *fmt, va_list args)
{
    fanhub_utf8_vformat (fh_host_reason, sizeof fh_host_reason, fmt, args);
    fh_host_reason[strcspn (fh_host_reason, "\r\n")] = '\0'; /* one line */
}

void
fh_host_take_reason_set (char *reason, size_t size)
{
    /* Most answers come without a reason: formatted only when there is
       one (a snprintf per consume was a quarter of the K=1 path's
       instructions). */
    fanhub_utf8_copy (reason, size, fh_host_reason);
    fh_host_reason[0] = '\0';
}
