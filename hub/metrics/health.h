/*  health - the answers of /healthz and /readyz (HEALTH and READY on the
    control socket), from the same snapshot as STATS.

    Liveness: the enqueuer's loop advanced within FH_HEALTH_STALL_NS (it
    beats at least once a second, also when idle on its poll, but not
    while a `block` consumer's full queue holds it), and the control loop
    answered (the HTTP side says so when it does not). The systemd
    watchdog is fed on the same condition.

    Readiness: live, every bus.connect endpoint connected, no consumer
    stuck (a consume older than consume_timeout) nor down or halted (a
    plugin's set_state, ABI 1.3: the worker plugin), no spool at 90 % of its
    queue.spool_max_bytes or more (past the cap spilled messages are
    dropped, so a spool stops short of it).

    Each answer is "200 " or "503 " followed by one JSON object:
    {"status": "ok"|"fail", "reasons": ["...", ...], ...}.
*/
#ifndef FH_HEALTH_H_INCLUDED
#define FH_HEALTH_H_INCLUDED

#include "config.h"
#include "metrics.h"

#include <stdbool.h>
#include <stdint.h>

/* An enqueuer that has not advanced for this long is not live. */
#define FH_HEALTH_STALL_NS (3 * INT64_C (1000000000))

/* Whether an enqueuer whose loop last advanced age_ns ago is live. */
bool fh_health_enqueuer_live (int64_t age_ns);

/* The answer to HEALTH (ready false) or READY (ready true), the caller's
   to free; NULL when out of memory. */
char *fh_health_answer (const fh_metrics_snapshot_t *snapshot, const fh_config_t *config,
                        int64_t enqueuer_age_ns, bool ready);

#endif
