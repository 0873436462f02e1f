/*  host_ctx - a consumer's context for its plugin (fanhub_ctx_t), and the
    reason a plugin gives with its answer.

    The host table (host.h) is one constant table for all consumers; what
    differs per consumer is the fanhub_ctx_t passed alongside, which names
    the consumer for log lines and leads host calls to it.

    A plugin may call the host on its own threads, even after its fini
    returned (a completion from a thread fini did not wait for): every
    call that reaches the consumer goes through the context's guard (a
    count of calls inside: fh_host_ctx_enter), and a retired context
    answers without it.

    The consumer owns its context's life (new, stale, retire) and takes
    the reason after each consume; the host table enters the context and
    sets the reason. Nothing here calls either of them.
*/
#ifndef FH_HOST_CTX_H_INCLUDED
#define FH_HOST_CTX_H_INCLUDED

#include "fanhub/consumer.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fh_consumer fh_consumer_t;

struct fanhub_ctx {
    const char *consumer_name;
    fh_consumer_t *consumer;            /* for host->complete; NULL in tests' fake hosts */
    const fanhub_consumer_desc_t *desc; /* the plugin's, for host->options_load */
    /* A consumer's own context (fh_host_ctx_new) only; zero in one made on
       the stack (check, replay), which never retires. */
    char *plugin;             /* the plugin's path, for the log once the consumer is gone */
    atomic_uint users;        /* host calls inside the consumer right now */
    atomic_bool stale;        /* its figures are final: lates counted by name */
    atomic_bool retired;      /* fini returned: the consumer is gone */
    atomic_bool late_said;    /* the first call after retirement was logged */
    struct s_host_gone *gone; /* the name's counter of lates once stale */
    struct fanhub_ctx *next;  /* in the list of retired contexts */
    /* ABI 1.6: the plugin's own figures (plugin_metrics.h), made at its
       first host->metric_new; lives as long as the context. */
    struct fh_plugin_metrics *metrics; /* fh_plugin_metrics_of reads it */
};

/* A consumer's context, handed to its plugin's init and kept by the
   plugin for every host call: it outlives the consumer. name and plugin
   are copied; consumer is the consumer it speaks for. NULL when out of
   memory. */
fanhub_ctx_t *fh_host_ctx_new (fh_consumer_t *consumer, const char *name);
/* The plugin's path, for the log after the consumer is gone (copied). */
void fh_host_ctx_set_plugin (fanhub_ctx_t *ctx, const char *plugin);
/* The consumer's figures were taken for the last time (a reload's
   successor or the stop folds them): a late complete from now on is
   counted under the consumer's name (fh_host_late_gone), and a ticket of
   the instance is stale: a complete of it is accepted, never a crash,
   until retirement. Any thread; once. */
void fh_host_ctx_stale (fanhub_ctx_t *ctx);
/* After the plugin's fini returned, before the consumer is freed: waits
   for the host calls inside it to return; from then on every host call
   on ctx is answered without the consumer (a complete is logged once
   with the consumer's and plugin's names and counted as late), because a
   plugin may still hold ctx on a thread of its own. The context is
   poisoned, never freed (a list keeps it). Nulls *ctx_p; safe with NULL. */
void fh_host_ctx_retire (fanhub_ctx_t **ctx_p);
/* Completes counted under a consumer's name since its contexts went
   stale (0 when none). Any thread. */
uint64_t fh_host_late_gone (const char *name);

/* The consumer behind ctx, counted as a call inside it (end it with
   fh_host_ctx_leave), or NULL: none (a stack context), or retired. */
fh_consumer_t *fh_host_ctx_enter (fanhub_ctx_t *ctx);
void fh_host_ctx_leave (fanhub_ctx_t *ctx);
/* A complete that came too late to count in its instance's figures
   (ctx retired, or stale and its ticket gone): counted under the name;
   after retirement logged once per instance. call names the host call. */
void fh_host_ctx_late (fanhub_ctx_t *ctx, fanhub_ticket_t ticket, const char *call);

/* host->set_reason: the reason of the consume running on this thread,
   formatted, one line. */
void fh_host_set_reason (const char *fmt, va_list args) FANHUB_PRINTF (1, 0);
/* The reason set on this thread and not yet taken, "" when none. */
extern _Thread_local char fh_host_reason[256];
/* fh_host_take_reason when there is one. */
void fh_host_take_reason_set (char *reason, size_t size);
/* The reason the plugin gave with host->set_reason on this thread since
   the last call (copied into reason, "" when none), and forgets it. The
   consumer runtime calls it after each consume; most answers come without
   a reason, and cost a look (inline) and a store. */
static inline void
fh_host_take_reason (char *reason, size_t size)
{
    if (fh_host_reason[0])
        fh_host_take_reason_set (reason, size);
    else
        reason[0] = '\0';
}

#endif
