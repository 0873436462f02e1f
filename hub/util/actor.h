/*  actor - ending a CZMQ actor whose thread shares memory with its owner.

    zactor_destroy sends $TERM and waits for the actor's thread through a
    pipe, an ordering neither C11 nor TSan sees. The actor therefore sets a
    flag of its own (release) as the last thing it does, and its owner
    reads it (acquire) once zactor_destroy returns: everything the thread
    wrote before is then the owner's to read and free.
*/
#ifndef FH_ACTOR_H_INCLUDED
#define FH_ACTOR_H_INCLUDED

#include <czmq.h>
#include <stdatomic.h>
#include <stdbool.h>

/* Ends *actor_p (nothing when NULL) and acquires its finished flag. */
static inline void
fh_actor_join (zactor_t **actor_p, atomic_bool *finished)
{
    zactor_destroy (actor_p);
    (void) atomic_load_explicit (finished, memory_order_acquire);
}

#endif
