/*  replay_host - the host table `fanhub replay` hands its plugin: the
    hub's (fh_host), with tickets and completions of its own, so that a
    plugin answering FANHUB_PENDING (the worker plugins: `python`,
    `worker`) runs for real and completes from its own threads.

    Replay has no consumer runtime: msg_ticket answers the ticket replay
    set before the consume call (fh_replay_ticket_set), complete and
    complete_reason (ABI 1.1, 1.2) record the answer, a DROP (the count
    FANHUB_COUNT_SKIPPED a worker plugin calls just before it completes,
    on the same thread) is told apart from an ok, set_window (ABI 1.5)
    records the window replay keeps open, ticket_started is accepted,
    consumer_setting answers a lone consumer's defaults, msg_attempt 1,
    and set_state is said on stderr. State is the process's: replay
    drives one plugin.
*/
#ifndef FH_REPLAY_HOST_H_INCLUDED
#define FH_REPLAY_HOST_H_INCLUDED

#include "fanhub/consumer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The table, made once (any thread after the first call). */
const fanhub_host_t *fh_replay_host (void);

/* The replay thread, before a consume: the ticket that consume's
   msg_ticket answers (0: none). */
void fh_replay_ticket_set (fanhub_ticket_t ticket);

/* The replay thread: waits until ticket is completed (true: its result,
   whether it was a DROP, and its reason, "" when none) or the monotonic
   deadline passes, or stop () says so (false). A ticket is waited for
   once: its record is freed. */
bool fh_replay_wait (fanhub_ticket_t ticket, int64_t deadline_ns, bool (*stop) (void),
                     fanhub_result_t *result, bool *dropped, char *reason, size_t size);

/* The window set_window asked for (0: none). */
size_t fh_replay_window (void);

#endif
