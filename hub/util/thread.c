/*  thread - starting and joining the hub's own threads. See thread.h. */
#define _GNU_SOURCE /* pthread_setname_np */
#include "thread.h"

#include <stdio.h>
#include <string.h>

#define NAME_MAX_BYTES 15 /* the kernel's limit, without the NUL */

static void
s_set_name (pthread_t id, const char *name)
{
    char cut[NAME_MAX_BYTES + 1];
    snprintf (cut, sizeof cut, "%s", name);
    /* Only a diagnostic: a thread without its name works the same. */
    (void) pthread_setname_np (id, cut);
}

int
fh_thread_start (fh_thread_t *thread, const char *name, void *(*run) (void *), void *arg, char *err,
                 size_t errlen)
{
    int rc = pthread_create (&thread->id, NULL, run, arg);
    if (rc != 0) {
        snprintf (err, errlen, "cannot start the thread %s: %s", name, strerror (rc));
        return -1;
    }
    s_set_name (thread->id, name);
    thread->started = true;
    return 0;
}

bool
fh_thread_started (const fh_thread_t *thread)
{
    return thread->started;
}

void
fh_thread_join (fh_thread_t *thread)
{
    if (!thread->started)
        return;
    pthread_join (thread->id, NULL);
    thread->started = false;
}

void
fh_thread_detach (fh_thread_t *thread)
{
    if (!thread->started)
        return;
    pthread_detach (thread->id);
    thread->started = false;
}

void
fh_thread_name_self (const char *name)
{
    s_set_name (pthread_self (), name);
}
