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

/* Around each plugin call: `where` is "consume", "idle", "init" or "fini",
   msg the message inside consume or NULL. Three stores to thread-locals:
   nothing is formatted or copied until a crash. site, where and msg must
   live until fh_crash_leave. */
void fh_crash_enter (const fh_crash_site_t *site, const char *where, const fanhub_msg_t *msg);
void fh_crash_leave (void);

#endif
