/*  control_commands - what the control actor does for the commands that
    name one consumer (INJECT's look-up, PAUSE, RESUME, RESTART), and the
    JSON answer of an EMIT.

    Called on the control actor's thread under the hub's lock (control.c
    holds it for every request), so the consumer table cannot change under
    a look-up. A name comes from anyone who can reach the control socket:
    it is compared byte for byte and shown through fh_control_show.
*/
#ifndef FH_CONTROL_COMMANDS_H_INCLUDED
#define FH_CONTROL_COMMANDS_H_INCLUDED

#include "emit.h"
#include "fanhub/consumer.h"
#include "hub.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The index of the consumer called name, or SIZE_MAX with reply "ERROR no
   consumer 'NAME' in this hub". */
size_t fh_control_consumer_find (fh_hub_t *hub, fanhub_bytes_t name, char *reply, size_t size);

/* PAUSE (pause true) or RESUME: the consumer's current instance stops
   or goes on taking messages (fh_consumer_set_paused). reply gets "OK
   paused 'x' (backlog N)", "OK resumed 'x' ..." or an ERROR. */
void fh_control_pause (fh_hub_t *hub, fanhub_bytes_t name, bool pause, char *reply, size_t size);

/* RESTART: asks the main thread for a restart of the consumer
   (fh_hub_restart_ask) and returns its number, which
   fh_hub_restart_result answers; or 0 with reply an ERROR (no such
   consumer; one restart not yet taken). The caller then sends SIGUSR1. */
uint64_t fh_control_restart_ask (fh_hub_t *hub, fanhub_bytes_t name, char *reply, size_t size);

/* EMIT's answer: {"matched", "handled", "timed_out", "outcomes"}, compact
   JSON (malloc'd), or NULL when out of memory. */
char *fh_control_emit_answer (fh_emit_t *emit, int matched, bool timed_out);

#endif
