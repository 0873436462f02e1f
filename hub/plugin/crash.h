/*  crash - what a plugin that kills the process leaves behind.

    A plugin runs inside the hub's process: a fatal signal in consume
    (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) ends the hub. The handler
    writes one line, async-signal-safe, naming the consumer and the plugin
    that were inside a plugin call on the faulting thread and, inside
    consume, the message: its seq, topic and msg_id (the first "msg_id"
    string of a JSON body). With a state_dir it appends the crash to the
    consumer's crash record (crashlog.h), so that the next start can
    dead-letter a spooled message that crashes the hub every time. Then it
    re-raises the signal with its default action, so the exit status and
    the core dump are the signal's. The handler runs on an alternate
    signal stack, so a plugin that overflows its stack (runaway recursion)
    is named too. A plugin that calls exit(N) inside a call ends the
    process with status N and a log line, before CZMQ's exit handler can
    abort on the sockets other threads still hold. What it costs: the
    process (systemd restarts it); what was queued for spilling consumers
    is in their spool and consumed again after the restart.
*/
#ifndef FH_CRASH_H_INCLUDED
#define FH_CRASH_H_INCLUDED

#include "fanhub/consumer.h"

#include <stdatomic.h>
#include <stdbool.h>

/* Main thread, once, before any plugin runs: the signal handlers, and an
   exit handler that runs before CZMQ's (it initialises CZMQ first). */
void fh_crash_install (void);
/* Gives the calling thread an alternate signal stack (once; freed when
   the thread ends), so that a stack overflow in a plugin is named too.
   fh_crash_enter does it; a thread that runs other plugin code (init,
   fini) calls it first. */
void fh_crash_thread (void);
/* Where a consumer's plugin runs: its names, and the descriptor of its
   crash record (crashlog.h) or -1. Set before its threads start. */
typedef struct {
    const char *consumer;
    const char *plugin;
    int record_fd;
} fh_crash_site_t;

/* What the thread's own signal handler reads (crash.c): set by the
   thread around its plugin calls; a thread-local of the executable is
   async-signal-safe. tl_alt_stack: the thread has tried for its stack. */
extern _Thread_local const fh_crash_site_t *fh_crash_tl_site;
extern _Thread_local const char *fh_crash_tl_where;
extern _Thread_local const fanhub_msg_t *fh_crash_tl_msg;
extern _Thread_local bool fh_crash_tl_alt_stack;

/* Around each plugin call: `where` is "consume", "idle", "init" or "fini",
   msg the message inside consume or NULL. Three stores to thread-locals:
   nothing is formatted or copied until a crash. site, where and msg must
   live until fh_crash_leave. Inline: they run around every consume. */
static inline void
fh_crash_enter (const fh_crash_site_t *site, const char *where, const fanhub_msg_t *msg)
{
    if (!fh_crash_tl_alt_stack)
        fh_crash_thread ();
    fh_crash_tl_where = where;
    fh_crash_tl_msg = msg;
    /* The handler sees where and msg once it sees the site. */
    atomic_signal_fence (memory_order_seq_cst);
    fh_crash_tl_site = site;
}

static inline void
fh_crash_leave (void)
{
    fh_crash_tl_site = NULL;
}

#endif
