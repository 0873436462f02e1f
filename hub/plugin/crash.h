/*  crash - what a plugin that kills the process leaves behind.

    A plugin runs inside the hub's process: a fatal signal in consume
    (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) ends the hub. The handler
    writes one line, async-signal-safe, naming the consumer and the plugin
    that were inside consume on the faulting thread, then re-raises the
    signal with its default action, so the exit status and the core dump
    are the signal's. The handler runs on an alternate signal stack, so a
    plugin that overflows its stack (runaway recursion) is named too. A plugin that calls exit(N) inside consume ends the
    process with status N and a log line, before CZMQ's exit handler can
    abort on the sockets other threads still hold. What it costs: the
    process (systemd restarts it); what was queued for spilling consumers
    is in their spool and consumed again after the restart.
*/
#ifndef FH_CRASH_H_INCLUDED
#define FH_CRASH_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

/* Main thread, once, before any plugin runs: the signal handlers, and an
   exit handler that runs before CZMQ's (it initialises CZMQ first). */
void fh_crash_install (void);
/* Gives the calling thread an alternate signal stack (once; freed when
   the thread ends), so that a stack overflow in a plugin is named too.
   fh_crash_enter does it; a thread that runs other plugin code (init,
   fini) calls it first. */
void fh_crash_thread (void);
/* Consumer threads, around each consume call. The strings must live as
   long as the thread may call consume. */
void fh_crash_enter (const char *consumer, const char *plugin);
void fh_crash_leave (void);
/* Before fh_crash_enter: the message going in, named on the line by its
   seq and the msg_id of its body (read by the handler only, not here). */
void fh_crash_message (uint64_t seq, const void *body, size_t size);

#endif
