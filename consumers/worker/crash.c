/*  crash - the worker plugin's blame table: how many times each message
    (by seq) was in flight when its worker died, so that a message a dead
    worker held goes alone next time and a poison message is a dead
    letter at max_crashes. Every call is made under the worker's lock.
*/
#include "worker.h"

#include <stdio.h>
#include <stdlib.h>

crash_t *
crash_find (worker_t *w, uint64_t seq)
{
    for (size_t i = 0; i < w->ncrashes; i++)
        if (w->crashes[i].seq == seq)
            return &w->crashes[i];
    return NULL;
}

void
crash_forget (worker_t *w, uint64_t seq)
{
    crash_t *c = crash_find (w, seq);
    if (c)
        *c = w->crashes[--w->ncrashes];
}

unsigned
crash_add (worker_t *w, uint64_t seq)
{
    crash_t *c = crash_find (w, seq);
    if (!c && w->ncrashes == w->crashcap) {
        size_t cap = w->crashcap ? w->crashcap * 2 : 16;
        crash_t *grown = realloc (w->crashes, cap * sizeof *grown);
        if (!grown)
            return 1;
        w->crashes = grown;
        w->crashcap = cap;
    }
    if (!c) {
        c = &w->crashes[w->ncrashes++];
        c->seq = seq;
        c->crashes = 0;
        c->hung_out = false;
    }
    return ++c->crashes;
}

bool
crash_suspect (worker_t *w, uint64_t seq)
{
    return crash_find (w, seq) != NULL;
}

bool
crash_hung_out (worker_t *w, uint64_t seq, char *reason, size_t size)
{
    crash_t *c = crash_find (w, seq);
    if (!c || !c->hung_out)
        return false;
    snprintf (reason, size,
              "worker stopped answering (consume_timeout %.1f s) and was killed %u time%s on "
              "this message",
              (double) w->consume_timeout_ns / 1e9, c->crashes, c->crashes == 1 ? "" : "s");
    crash_forget (w, seq);
    return true;
}
