/*  thread - starting and joining the hub's own threads.

    Each thread gets a name that `top -H`, `ps -L` and gdb show, "fh:" and
    what it does (the kernel keeps 15 bytes of it), so that an operator can
    tell the spool writer from the ZAP handler. An fh_thread_t remembers
    whether it started, so that a destroy function can join it, or not,
    after a constructor failed at any step.
*/
#ifndef FH_THREAD_H_INCLUDED
#define FH_THREAD_H_INCLUDED

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct {
    pthread_t id;
    bool started;
} fh_thread_t;

/* Starts run (arg) on a new thread named name (e.g. "fh:zap"; cut to 15
   bytes). 0, or -1 with one line in err: "cannot start the thread NAME:
   REASON". */
int fh_thread_start (fh_thread_t *thread, const char *name, void *(*run) (void *), void *arg,
                     char *err, size_t errlen);

/* Whether fh_thread_start succeeded and fh_thread_join has not run yet. */
bool fh_thread_started (const fh_thread_t *thread);

/* Waits for the thread to return, when it was started; then a no-op. */
void fh_thread_join (fh_thread_t *thread);

/* Lets the thread run on unjoined (its owner gives up on it), when it was
   started; then a no-op. */
void fh_thread_detach (fh_thread_t *thread);

/* Names the calling thread: CZMQ's actors start their own threads, so
   each actor names itself first thing ("fh:enq", "fh:control"). */
void fh_thread_name_self (const char *name);

#endif
